//! `gleaner.Iterator`: a lazy Python iterator over a key range.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::convert::bytes_of;
use crate::db::Shared;
use crate::errors::{OrRaise, closed};

/// What an iterator yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Yields {
    /// `(key, value)` tuples.
    Items,
    /// Keys (separated values are not read).
    Keys,
    /// Values.
    Values,
}

/// Where the engine's iterator stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not positioned yet: the first `__next__` seeks to the first (last) key.
    Start,
    /// Positioned by `seek`, on an entry not yet yielded.
    Positioned,
    /// On the entry last yielded.
    Yielded,
    /// Past the end.
    Done,
    /// A step failed: every later one fails too (the error was raised once; the iterator's
    /// position is lost).
    Failed,
}

struct State {
    it: gleaner::DbIterator,
    phase: Phase,
}

/// One step's yield: the key, and the value unless only keys are wanted.
type Entry = (Vec<u8>, Option<Vec<u8>>);

/// Entries of a database in key order, or reverse, as of a snapshot or the time it was made
/// (`Db.items()`, `keys()`, `values()`). Lazy: each step reads what it yields. It raises
/// `ClosedError` once its database is closed.
#[pyclass(module = "gleaner", name = "Iterator", frozen)]
pub struct PyIterator {
    /// Locked only with the GIL released.
    state: Mutex<State>,
    shared: Arc<Shared>,
    reverse: bool,
    yields: Yields,
}

impl PyIterator {
    /// An iterator over `it`, stepping backwards when `reverse`.
    pub fn new(
        shared: Arc<Shared>,
        it: gleaner::DbIterator,
        reverse: bool,
        yields: Yields,
    ) -> Self {
        PyIterator {
            state: Mutex::new(State {
                it,
                phase: Phase::Start,
            }),
            shared,
            reverse,
            yields,
        }
    }

    /// Steps to the next entry and copies out what it yields: `None` at the end.
    fn step(&self) -> gleaner::Result<Option<Entry>> {
        let mut st = self.state.lock();
        let moved = match (st.phase, self.reverse) {
            (Phase::Done, _) => return Ok(None),
            (Phase::Failed, _) => {
                return Err(gleaner::Error::InvalidArgument(
                    "the iterator failed at an earlier step; make a new one".into(),
                ));
            }
            (Phase::Start, false) => st.it.seek_to_first(),
            (Phase::Start, true) => st.it.seek_to_last(),
            (Phase::Positioned, _) => Ok(()),
            (Phase::Yielded, false) => st.it.next(),
            (Phase::Yielded, true) => st.it.prev(),
        };
        if let Err(e) = moved {
            // The engine's iterator is invalid now: a later step must not pass for the end.
            st.phase = Phase::Failed;
            return Err(e);
        }
        if !st.it.valid() {
            st.phase = Phase::Done;
            return Ok(None);
        }
        st.phase = Phase::Yielded;
        let key = st.it.key().to_vec();
        let value = match self.yields {
            Yields::Keys => None,
            Yields::Items | Yields::Values => Some(st.it.value().to_vec()),
        };
        Ok(Some((key, value)))
    }
}

#[pymethods]
impl PyIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(closed(py, &self.shared.path, "iterating"));
        }
        let Some((key, value)) = py.allow_threads(|| self.step()).or_raise(py)? else {
            return Ok(None);
        };
        let key = PyBytes::new(py, &key);
        Ok(Some(match (self.yields, value) {
            (Yields::Keys, _) | (_, None) => key.into_any().unbind(),
            (Yields::Values, Some(v)) => PyBytes::new(py, &v).into_any().unbind(),
            (Yields::Items, Some(v)) => PyTuple::new(py, [key, PyBytes::new(py, &v)])?
                .into_any()
                .unbind(),
        }))
    }

    /// Repositions the iterator: the next item is the first entry at or after `key` (at or
    /// before it, for a reverse iterator), within the iterator's bounds.
    fn seek(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(closed(py, &self.shared.path, "seeking"));
        }
        let reverse = self.reverse;
        py.allow_threads(|| {
            let mut st = self.state.lock();
            let sought = if reverse {
                st.it.seek_for_prev(&key)
            } else {
                st.it.seek(&key)
            };
            st.phase = match sought {
                Ok(()) => Phase::Positioned,
                Err(_) => Phase::Failed,
            };
            sought
        })
        .or_raise(py)
    }
}
