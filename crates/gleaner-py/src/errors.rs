//! The engine's errors as the exceptions of `gleaner.errors` (defined in Python, so `IoError` can
//! also be an `OSError` and `InvalidArgumentError` a `ValueError`).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The exception class of `gleaner.errors` an engine error is raised as, and whether its
/// arguments start with an errno (`OSError`'s `(errno, strerror)`).
fn class_of(e: &gleaner::Error) -> &'static str {
    match e {
        gleaner::Error::Io { .. } => "IoError",
        gleaner::Error::Corruption { .. } => "CorruptionError",
        gleaner::Error::InvalidArgument(_) => "InvalidArgumentError",
        gleaner::Error::Locked { .. } => "LockedError",
        gleaner::Error::SpaceBudgetExceeded { .. } => "SpaceBudgetExceededError",
        gleaner::Error::OpenedReadOnly { .. } => "OpenedReadOnlyError",
        gleaner::Error::Closed => "ClosedError",
        gleaner::Error::ReadOnly(_) => "ReadOnlyError",
        // A kind added to the engine later: the base class, with the engine's message.
        _ => "Error",
    }
}

/// The exception to raise for engine error `e`, carrying its message.
pub fn to_py(py: Python<'_>, e: &gleaner::Error) -> PyErr {
    build(py, e).unwrap_or_else(|failed| {
        PyRuntimeError::new_err(format!("{e} (and gleaner.errors failed to load: {failed})"))
    })
}

fn build(py: Python<'_>, e: &gleaner::Error) -> PyResult<PyErr> {
    let class = py.import("gleaner.errors")?.getattr(class_of(e))?;
    let message = e.to_string();
    let errno = match e {
        gleaner::Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    };
    let value = match errno {
        Some(n) => class.call1((n, message))?,
        None => class.call1((message,))?,
    };
    Ok(PyErr::from_value(value))
}

/// `ClosedError` for a use of a closed database, naming what was refused.
pub fn closed(py: Python<'_>, path: &str, what: &str) -> PyErr {
    raise_named(
        py,
        "ClosedError",
        format!("database at {path} is closed: {what} refused"),
    )
}

/// An exception of `gleaner.errors` by class name, with `message`.
pub fn raise_named(py: Python<'_>, class: &str, message: String) -> PyErr {
    let made = py
        .import("gleaner.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message.clone(),)));
    match made {
        Ok(value) => PyErr::from_value(value),
        Err(failed) => PyRuntimeError::new_err(format!(
            "{message} (and gleaner.errors failed to load: {failed})"
        )),
    }
}

/// Engine results as Python results.
pub trait OrRaise<T> {
    /// The value, or the engine's error raised as its exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for gleaner::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}
