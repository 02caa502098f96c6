//! `gleaner.WriteBatch`: writes applied together by `Db.write`.

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::convert::bytes_of;

/// Puts, deletes and range deletes that `Db.write(batch)` applies atomically, in order.
#[pyclass(module = "gleaner", name = "WriteBatch", frozen)]
pub struct PyWriteBatch {
    /// Locked only briefly, with the GIL held, and never across a call that releases it.
    inner: Mutex<gleaner::WriteBatch>,
}

impl PyWriteBatch {
    /// A copy of the writes, for `Db.write`.
    pub fn copy(&self) -> gleaner::WriteBatch {
        self.inner.lock().clone()
    }
}

#[pymethods]
impl PyWriteBatch {
    /// An empty batch.
    #[new]
    fn new() -> Self {
        PyWriteBatch {
            inner: Mutex::new(gleaner::WriteBatch::new()),
        }
    }

    /// Adds a put of `value` under `key`, expiring at `expiry_ms` (ms since the epoch, the
    /// database's clock: `Db.time_ms`) when given.
    #[pyo3(signature = (key, value, *, expiry_ms = None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        expiry_ms: Option<u64>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        match expiry_ms {
            Some(at) => self.inner.lock().put_with_expiry(key, value, at),
            None => self.inner.lock().put(key, value),
        }
        Ok(())
    }

    /// Adds a delete of `key`.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        self.inner.lock().delete(key);
        Ok(())
    }

    /// Adds a delete of every key in `[start, end)`.
    fn delete_range(&self, start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let (start, end) = (bytes_of(start, "start")?, bytes_of(end, "end")?);
        self.inner.lock().delete_range(start, end);
        Ok(())
    }

    /// Removes every write.
    fn clear(&self) {
        self.inner.lock().clear();
    }

    /// Writes in the batch.
    fn __len__(&self) -> usize {
        self.inner.lock().count() as usize
    }

    fn __repr__(&self) -> String {
        format!("<gleaner.WriteBatch of {} writes>", self.__len__())
    }
}
