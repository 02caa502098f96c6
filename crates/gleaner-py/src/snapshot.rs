//! `gleaner.Snapshot`: a consistent view, released explicitly or at the end of a `with` block.

use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::db::Shared;
use crate::errors::OrRaise;

/// A snapshot's engine handle, `None` once released. Locked only with the GIL released.
pub type SnapshotCell = Arc<RwLock<Option<gleaner::Snapshot>>>;

/// A consistent point-in-time view of a database (`Db.snapshot()`): reads given it see exactly
/// the writes acknowledged before it was taken. Release it (`release()`, or use it as a context
/// manager) so the versions it keeps can be collected.
#[pyclass(module = "gleaner", name = "Snapshot", frozen)]
pub struct PySnapshot {
    inner: SnapshotCell,
    shared: Arc<Shared>,
    sequence: u64,
    time_ms: u64,
}

impl PySnapshot {
    /// A handle for `snap` of the database behind `shared`.
    pub fn new(shared: Arc<Shared>, snap: gleaner::Snapshot) -> Self {
        PySnapshot {
            sequence: snap.sequence(),
            time_ms: snap.time_ms(),
            inner: Arc::new(RwLock::new(Some(snap))),
            shared,
        }
    }

    /// The engine handle's cell, for a read of the database behind `shared`: a snapshot of
    /// another database is refused (its sequence number means nothing there, and that
    /// database would not keep the versions it reads).
    pub fn inner_for(&self, py: Python<'_>, shared: &Arc<Shared>) -> PyResult<SnapshotCell> {
        if !Arc::ptr_eq(&self.shared, shared) {
            return Err(crate::errors::raise_named(
                py,
                "InvalidArgumentError",
                format!(
                    "the snapshot is of the database at {}, not of this one at {}",
                    self.shared.path, shared.path
                ),
            ));
        }
        Ok(Arc::clone(&self.inner))
    }

    /// The error a read at a released snapshot fails with.
    pub fn released_error() -> gleaner::Error {
        gleaner::Error::InvalidArgument(
            "the snapshot was released (Snapshot.release or the end of its with block)".into(),
        )
    }
}

/// The value of `key` in `db` at the snapshot in `cell` (call without the GIL).
pub fn get_at(
    db: &gleaner::Db,
    cell: &SnapshotCell,
    key: &[u8],
) -> gleaner::Result<Option<gleaner::Bytes>> {
    let guard = cell.read();
    let snapshot = guard.as_ref().ok_or_else(PySnapshot::released_error)?;
    let entry = db.get_entry(
        key,
        &gleaner::ReadOptions {
            snapshot: Some(snapshot),
            ..Default::default()
        },
    )?;
    Ok(entry.map(|e| e.value))
}

#[pymethods]
impl PySnapshot {
    /// The sequence number the snapshot reads at.
    #[getter]
    fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The database's time (ms since the epoch) at the snapshot, at which expiry is judged.
    #[getter]
    fn time_ms(&self) -> u64 {
        self.time_ms
    }

    /// Whether it was released.
    #[getter]
    fn released(&self, py: Python<'_>) -> bool {
        let inner = &self.inner;
        py.allow_threads(|| inner.read().is_none())
    }

    /// The value of `key` at the snapshot, or `None` (`Db.get(key, snapshot=self)`).
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = crate::convert::bytes_of(key, "key")?;
        self.shared.check_open(py, "a read at a snapshot")?;
        let (inner, db) = (&self.inner, &self.shared.db);
        let value = py.allow_threads(|| get_at(db, inner, &key)).or_raise(py)?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// Releases the snapshot (later reads at it raise `InvalidArgumentError`); releasing twice
    /// is harmless.
    fn release(&self, py: Python<'_>) {
        let inner = &self.inner;
        // Dropped outside the lock, and without the GIL: another thread may be reading at it.
        let taken = py.allow_threads(|| inner.write().take());
        py.allow_threads(move || drop(taken));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the snapshot at the end of a `with` block.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.release(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.released(py) { " released" } else { "" };
        format!("<gleaner.Snapshot sequence={}{state}>", self.sequence)
    }
}
