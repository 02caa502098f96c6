//! `gleaner._gleaner`: the native half of the `gleaner` Python package (docs/python.md). The
//! Python half (`python/gleaner/`) re-exports these classes and defines the exceptions.
//!
//! Rules every method here keeps: the GIL is released around every call into the engine that
//! can block (I/O, waits for background work), and a lock of this crate is only ever taken
//! with the GIL released, so a thread blocked on one never holds the GIL another needs to let
//! it go.

mod batch;
mod convert;
mod db;
mod errors;
mod iter;
mod snapshot;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _gleaner(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<db::PyDb>()?;
    m.add_class::<batch::PyWriteBatch>()?;
    m.add_class::<snapshot::PySnapshot>()?;
    m.add_class::<iter::PyIterator>()?;
    m.add_function(wrap_pyfunction!(db::check, m)?)?;
    m.add_function(wrap_pyfunction!(db::option_names, m)?)?;
    Ok(())
}
