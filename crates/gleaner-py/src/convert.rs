//! Conversions between Python values and the engine's: keys and values, options, figures.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString,
};

use crate::errors::OrRaise;

/// The bytes of a key or value: `bytes`, `bytearray`, `memoryview` of bytes, or `str` (encoded
/// UTF-8). `what` names the argument in the `TypeError` for anything else.
pub fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    if let Ok(b) = obj.downcast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if obj.is_instance_of::<PyMemoryView>() {
        let bytes = obj.call_method0("tobytes")?.downcast_into::<PyBytes>()?;
        return Ok(bytes.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes or str, not {}",
        obj.get_type().name()?
    )))
}

/// Optional key bytes.
pub fn opt_bytes(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    obj.filter(|o| !o.is_none())
        .map(|o| bytes_of(o, what))
        .transpose()
}

/// Options by their OPTIONS-file names from keyword arguments: a `bool`, `int` or `float`, or a
/// string in the file's syntax (`'64MiB'`, `'scavenger'`). Unknown names and values that do not
/// parse raise the engine's `InvalidArgumentError`, naming the option.
pub fn options_of(
    py: Python<'_>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<gleaner::Options> {
    let mut opts = gleaner::Options::default();
    for (name, value) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let name: String = name.extract()?;
        let text = if let Ok(b) = value.downcast::<PyBool>() {
            b.is_true().to_string()
        } else if value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>() {
            value.str()?.to_str()?.to_string()
        } else if let Ok(s) = value.downcast::<PyString>() {
            s.to_str()?.to_string()
        } else {
            return Err(PyTypeError::new_err(format!(
                "option `{name}` must be a bool, int, float or str, not {}",
                value.get_type().name()?
            )));
        };
        opts.set(&name, &text).or_raise(py)?;
    }
    Ok(opts)
}

/// A JSON value (the engine's figures, serialised) as Python objects: objects as `dict`, arrays
/// as `list`, numbers as `int` or `float`.
pub fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<PyObject> {
    Ok(match v {
        serde_json::Value::Null => py.None(),
        serde_json::Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        serde_json::Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN))
                    .into_any()
                    .unbind()
            }
        }
        serde_json::Value::String(s) => PyString::new(py, s).into_any().unbind(),
        serde_json::Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        serde_json::Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, json_to_py(py, item)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// Any serialisable figures as Python objects.
pub fn to_py_value<T: serde::Serialize>(py: Python<'_>, value: &T) -> PyResult<PyObject> {
    let json = serde_json::to_value(value)
        .map_err(|e| PyTypeError::new_err(format!("figures do not serialise: {e}")))?;
    json_to_py(py, &json)
}
