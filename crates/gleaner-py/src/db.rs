//! `gleaner.Db`: one open database, shared by every thread of the interpreter.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::batch::PyWriteBatch;
use crate::convert::{bytes_of, opt_bytes, options_of, to_py_value};
use crate::errors::{OrRaise, closed, raise_named};
use crate::iter::{PyIterator, Yields};
use crate::snapshot::{PySnapshot, get_at};

/// What a database's handle, its snapshots and its iterators share.
pub struct Shared {
    /// The engine's handle.
    pub db: gleaner::Db,
    /// `close()` was called: snapshots and iterators refuse to go on.
    pub closed: AtomicBool,
    /// The directory, for messages.
    pub path: String,
}

impl Drop for Shared {
    /// The last of the handle, its snapshots and iterators is gone without `close()`: the
    /// engine closes (waiting for background work, syncing) with the GIL released, as every
    /// call that can block does.
    fn drop(&mut self) {
        let db = &self.db;
        Python::with_gil(|py| {
            py.allow_threads(|| {
                // Errors at drop cannot be reported; `close()` reports them.
                let _ = db.close();
            })
        });
    }
}

impl Shared {
    /// `ClosedError` once the database is closed.
    pub fn check_open(&self, py: Python<'_>, what: &str) -> PyResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(py, &self.path, what));
        }
        Ok(())
    }
}

/// An open Gleaner database (`gleaner.Db(path, read_only=False, **options)`).
#[pyclass(module = "gleaner", name = "Db", frozen, weakref)]
pub struct PyDb {
    pub(crate) shared: Arc<Shared>,
}

impl PyDb {
    /// One write, synced when `sync`.
    fn write_one(
        &self,
        py: Python<'_>,
        sync: bool,
        fill: impl FnOnce(&mut gleaner::WriteBatch),
    ) -> PyResult<()> {
        let mut batch = gleaner::WriteBatch::new();
        fill(&mut batch);
        let db = &self.shared.db;
        py.allow_threads(|| db.write(batch, &gleaner::WriteOptions { sync }))
            .or_raise(py)
    }

    fn iterator(
        &self,
        py: Python<'_>,
        bounds: (Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
        reverse: bool,
        snapshot: Option<&Bound<'_, PySnapshot>>,
        fill_cache: bool,
        yields: Yields,
    ) -> PyResult<PyIterator> {
        self.shared.check_open(py, "iter")?;
        let lower = opt_bytes(bounds.0, "start")?;
        let upper = opt_bytes(bounds.1, "end")?;
        let snap = snapshot
            .map(|s| s.get().inner_for(py, &self.shared))
            .transpose()?;
        let db = &self.shared.db;
        let it = py
            .allow_threads(|| {
                let guard = snap.as_ref().map(|s| s.read());
                let snapshot = match &guard {
                    Some(g) => Some((**g).as_ref().ok_or_else(PySnapshot::released_error)?),
                    None => None,
                };
                db.iter(&gleaner::ReadOptions {
                    snapshot,
                    fill_cache,
                    lower_bound: lower,
                    upper_bound: upper,
                    lazy_values: yields == Yields::Keys,
                })
            })
            .or_raise(py)?;
        Ok(PyIterator::new(
            Arc::clone(&self.shared),
            it,
            reverse,
            yields,
        ))
    }
}

#[pymethods]
impl PyDb {
    /// Opens (creating it if missing) the database in directory `path`. Every keyword argument
    /// is an option by its OPTIONS-file name (`gleaner.option_names()` lists them; the engine's
    /// `Options` documents each with its default, docs/format.md the file): a `bool`, `int` or
    /// `float`, or a string in the file's syntax (`memtable_size='64MiB'`,
    /// `gc_policy='titan'`). With `read_only=True` the database is opened without writing
    /// anything, beside other read-only handles.
    ///
    /// Raises `InvalidArgumentError` for an unknown option or a bad value (naming it),
    /// `LockedError` when another handle has it open for writing, `CorruptionError`, `IoError`.
    #[new]
    #[pyo3(signature = (path, *, read_only = false, **options))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        read_only: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = options_of(py, options)?;
        let db = py
            .allow_threads(|| {
                if read_only {
                    gleaner::Db::open_read_only(&path, opts)
                } else {
                    gleaner::Db::open(&path, opts)
                }
            })
            .or_raise(py)?;
        Ok(PyDb {
            shared: Arc::new(Shared {
                db,
                closed: AtomicBool::new(false),
                path: path.display().to_string(),
            }),
        })
    }

    /// The database's directory.
    #[getter]
    fn path(&self) -> String {
        self.shared.path.clone()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The value of `key`, or `None`; at `snapshot` when given.
    #[pyo3(signature = (key, *, snapshot = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        snapshot: Option<&Bound<'py, PySnapshot>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let key = bytes_of(key, "key")?;
        self.shared.check_open(py, "get")?;
        let db = &self.shared.db;
        let value = match snapshot {
            // The entry's value shares the engine's buffer: the one copy is into the PyBytes.
            None => py.allow_threads(|| {
                db.get_entry(&key, &gleaner::ReadOptions::default())
                    .map(|e| e.map(|e| e.value))
            }),
            Some(s) => {
                let snap = s.get().inner_for(py, &self.shared)?;
                py.allow_threads(|| get_at(db, &snap, &key))
            }
        }
        .or_raise(py)?;
        Ok(value.map(|v| PyBytes::new(py, &v)))
    }

    /// `db[key]`: the value, or `KeyError`.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.get(py, key, None)?
            .ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }

    /// `key in db`.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.get(py, key, None)?.is_some())
    }

    /// Writes `value` under `key`; with `sync=True` the write is on disk when it returns. With
    /// `ttl_ms` the key expires that many milliseconds from now (the database's clock,
    /// `time_ms`), with `expiry_ms` at that time (ms since the epoch): later reads find it
    /// absent, snapshots taken before still read it. An expiry already past writes a version
    /// that reads as a deletion.
    #[pyo3(signature = (key, value, *, sync = false, ttl_ms = None, expiry_ms = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
        ttl_ms: Option<u64>,
        expiry_ms: Option<u64>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        self.shared.check_open(py, "put")?;
        let expiry = match (ttl_ms, expiry_ms) {
            (Some(_), Some(_)) => {
                return Err(raise_named(
                    py,
                    "InvalidArgumentError",
                    "put: give ttl_ms or expiry_ms, not both".into(),
                ));
            }
            (Some(ttl), None) => {
                Some(gleaner::expiry::expiry_after(self.shared.db.time_ms(), ttl).or_raise(py)?)
            }
            (None, at) => at,
        };
        self.write_one(py, sync, |b| match expiry {
            Some(at) => b.put_with_expiry(key, value, at),
            None => b.put(key, value),
        })
    }

    /// The database's time in milliseconds since the epoch: what expiry is judged by.
    #[getter]
    fn time_ms(&self) -> u64 {
        self.shared.db.time_ms()
    }

    /// `db[key] = value`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, false, None, None)
    }

    /// Deletes `key` (nothing happens when it is absent).
    #[pyo3(signature = (key, *, sync = false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        self.shared.check_open(py, "delete")?;
        self.write_one(py, sync, |b| b.delete(key))
    }

    /// `del db[key]`: deletes it. Unlike a `dict`, no `KeyError` for an absent key (knowing
    /// would cost a read).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    /// Deletes every key in `[start, end)`.
    #[pyo3(signature = (start, end, *, sync = false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let (start, end) = (bytes_of(start, "start")?, bytes_of(end, "end")?);
        self.shared.check_open(py, "delete_range")?;
        self.write_one(py, sync, |b| b.delete_range(start, end))
    }

    /// Applies `batch` atomically (the batch is left as it was).
    #[pyo3(signature = (batch, *, sync = false))]
    fn write(&self, py: Python<'_>, batch: &Bound<'_, PyWriteBatch>, sync: bool) -> PyResult<()> {
        self.shared.check_open(py, "write")?;
        let batch = batch.get().copy();
        let db = &self.shared.db;
        py.allow_threads(|| db.write(batch, &gleaner::WriteOptions { sync }))
            .or_raise(py)
    }

    /// A consistent view of the database as of now; release it with `release()` or a `with`
    /// block.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        self.shared.check_open(py, "snapshot")?;
        let snap = self.shared.db.snapshot();
        Ok(PySnapshot::new(Arc::clone(&self.shared), snap))
    }

    /// `(key, value)` pairs from `start` (inclusive) to `end` (exclusive) in key order, or
    /// backwards with `reverse=True`, as of `snapshot` or now; lazy.
    #[pyo3(signature = (start = None, end = None, *, reverse = false, snapshot = None, fill_cache = true))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, PySnapshot>>,
        fill_cache: bool,
    ) -> PyResult<PyIterator> {
        self.iterator(
            py,
            (start, end),
            reverse,
            snapshot,
            fill_cache,
            Yields::Items,
        )
    }

    /// As `items()`.
    #[pyo3(signature = (start = None, end = None, *, reverse = false, snapshot = None, fill_cache = true))]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, PySnapshot>>,
        fill_cache: bool,
    ) -> PyResult<PyIterator> {
        self.iterator(
            py,
            (start, end),
            reverse,
            snapshot,
            fill_cache,
            Yields::Items,
        )
    }

    /// The keys, as `items()`; separated values are not read.
    #[pyo3(signature = (start = None, end = None, *, reverse = false, snapshot = None, fill_cache = true))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, PySnapshot>>,
        fill_cache: bool,
    ) -> PyResult<PyIterator> {
        self.iterator(
            py,
            (start, end),
            reverse,
            snapshot,
            fill_cache,
            Yields::Keys,
        )
    }

    /// The values, as `items()`.
    #[pyo3(signature = (start = None, end = None, *, reverse = false, snapshot = None, fill_cache = true))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, PySnapshot>>,
        fill_cache: bool,
    ) -> PyResult<PyIterator> {
        self.iterator(
            py,
            (start, end),
            reverse,
            snapshot,
            fill_cache,
            Yields::Values,
        )
    }

    /// `for key in db`: the keys in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIterator> {
        self.iterator(py, (None, None), false, None, true, Yields::Keys)
    }

    /// Writes the memtables to key tables and waits until they are installed.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.check_open(py, "flush")?;
        let db = &self.shared.db;
        py.allow_threads(|| db.flush()).or_raise(py)
    }

    /// Syncs the write-ahead log: every write acknowledged so far is on disk.
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.check_open(py, "sync_wal")?;
        let db = &self.shared.db;
        py.allow_threads(|| db.sync_wal()).or_raise(py)
    }

    /// Compacts the keys in `[start, end]` (every key by default) down the index tree, so no
    /// overwritten version or tombstone a snapshot does not need is left there.
    #[pyo3(signature = (start = None, end = None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        self.shared.check_open(py, "compact_range")?;
        let db = &self.shared.db;
        py.allow_threads(|| db.compact_range(start.as_deref(), end.as_deref()))
            .or_raise(py)
    }

    /// Runs garbage collection until the policy finds nothing to collect; returns what it
    /// did as a `dict` (`jobs`, `records_dropped`, …).
    fn run_gc(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.shared.check_open(py, "run_gc")?;
        let db = &self.shared.db;
        let done = py.allow_threads(|| db.run_gc()).or_raise(py)?;
        to_py_value(py, &done)
    }

    /// Recounts every value table's garbage from the key tables and compares it with the
    /// accounting; a `dict` whose `mismatches` list is empty when they agree.
    fn recount_garbage(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.shared.check_open(py, "recount_garbage")?;
        let db = &self.shared.db;
        let r = py.allow_threads(|| db.recount_garbage()).or_raise(py)?;
        let d = PyDict::new(py);
        d.set_item("tables", r.tables)?;
        d.set_item("handles", r.handles)?;
        d.set_item("aliases", r.aliases)?;
        d.set_item("reclaimed_early", r.reclaimed_early)?;
        d.set_item("expired", r.expired)?;
        d.set_item("retired_refs", r.retired_refs)?;
        d.set_item("awaiting_write_back", r.awaiting_write_back)?;
        d.set_item("mismatches", r.mismatches)?;
        Ok(d.into_any().unbind())
    }

    /// The database's figures as a `dict` of `dict`s (docs/stats.md): levels, value tables,
    /// GC, compaction, I/O, partitions, …
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.shared.check_open(py, "stats")?;
        let db = &self.shared.db;
        let stats = py.allow_threads(|| db.stats());
        to_py_value(py, &stats)
    }

    /// Closes the database: waits for background work, syncs and releases the directory.
    /// Later calls, and iterators and snapshots of it, raise `ClosedError`. Closing twice is
    /// harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        py.allow_threads(|| {
            shared.closed.store(true, Ordering::Release);
            shared.db.close()
        })
        .or_raise(py)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the database at the end of a `with` block.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " closed" } else { "" };
        format!("<gleaner.Db {:?}{state}>", self.shared.path)
    }
}

/// Verifies the closed database in `path` without changing it (`gleaner check`): every file it
/// needs, checksums, the garbage accounting, … Returns the report as a `dict`; its `problems`
/// list is empty for an intact database. Options as for `Db` (the file system's).
#[pyfunction]
#[pyo3(signature = (path, **options))]
pub fn check(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyObject> {
    let opts = options_of(py, options)?;
    let report = py
        .allow_threads(|| gleaner::tools::check_db(&path, &opts))
        .or_raise(py)?;
    to_py_value(py, &report)
}

/// Every option name `Db` accepts.
#[pyfunction]
pub fn option_names() -> Vec<&'static str> {
    gleaner::Options::NAMES.to_vec()
}
