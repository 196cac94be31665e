//! Configs from Python keywords or dicts: `mpcbox.Solvent(cells=(16, 16, 16), ...)` and
//! `mpcbox.Solvent.from_dict({...})` build the same [`Config`] a RON file does, with the same
//! names (the RON fields), the same validation ([`Config::validate`]) and the same messages.
//! Enums are strings (`thermostat="Mbs"`) or one-key dicts
//! (`collision={"Srd": {"angle_deg": 130.0}}`, `device={"Cuda": [0, 1]}`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use ::mpcbox::Config;
use ::mpcbox::ConfigError as FieldError;

pyo3::create_exception!(
    mpcbox,
    ConfigError,
    pyo3::exceptions::PyValueError,
    "An invalid config value; `field`, `problem` and `fix` say which, what and how."
);

/// The Python exception for a config error: `mpcbox.ConfigError` (a ValueError) with the
/// message of the RON config and attributes `field`, `problem`, `fix`.
pub fn config_error(py: Python<'_>, e: &FieldError) -> PyErr {
    let err = ConfigError::new_err(e.to_string());
    let value = err.value(py);
    for (name, text) in [
        ("field", &e.field),
        ("problem", &e.problem),
        ("fix", &e.fix),
    ] {
        if let Err(set) = value.setattr(name, text) {
            return set;
        }
    }
    err
}

/// A validated config from a dict of RON field names. `steps` defaults to `default_steps`
/// when the dict has none.
pub fn config_from_dict(
    py: Python<'_>,
    dict: &Bound<'_, PyDict>,
    default_steps: Option<u64>,
) -> PyResult<Config> {
    let dict = plain(dict.as_any())?.cast_into::<PyDict>()?;
    if let Some(steps) = default_steps {
        if !dict.contains("steps")? {
            dict.set_item("steps", steps)?;
        }
    }
    let mut de = pythonize::Depythonizer::from_object(dict.as_any());
    let cfg: Config = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| config_error(py, &parse_error(&e)))?;
    cfg.validate().map_err(|e| config_error(py, &e))?;
    Ok(cfg)
}

/// `obj` with what serde reads as Python built-ins: path-like objects (pathlib.Path) become
/// str, numpy arrays lists and numpy scalars Python numbers; dicts and sequences are copied.
fn plain<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    if let Ok(d) = obj.cast::<PyDict>() {
        let out = PyDict::new(py);
        for (k, v) in d.iter() {
            out.set_item(k, plain(&v)?)?;
        }
        return Ok(out.into_any());
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items: PyResult<Vec<_>> = obj.try_iter()?.map(|v| plain(&v?)).collect();
        return Ok(PyList::new(py, items?)?.into_any());
    }
    if obj.hasattr("__fspath__")? {
        return py.import("os")?.call_method1("fspath", (obj,));
    }
    let numpy_type = obj
        .get_type()
        .getattr("__module__")
        .and_then(|m| m.extract::<String>())
        .is_ok_and(|m| m == "numpy");
    if numpy_type && obj.hasattr("tolist")? {
        return plain(&obj.call_method0("tolist")?);
    }
    Ok(obj.clone())
}

/// The text between the first pair of backquotes after `after` in `msg`.
fn quoted<'a>(msg: &'a str, after: &str) -> Option<&'a str> {
    let rest = &msg[msg.find(after)? + after.len()..];
    let start = rest.find('`')? + 1;
    let len = rest[start..].find('`')?;
    Some(&rest[start..start + len])
}

/// serde's "expected one of `a`, `b`" list as "a, b".
fn choices(msg: &str) -> String {
    let list = msg.split("expected").nth(1).unwrap_or("");
    list.split('`')
        .skip(1)
        .step_by(2)
        .collect::<Vec<_>>()
        .join(", ")
}

/// serde's error at `path` in the words of the RON config errors (field, problem, fix).
fn parse_error(e: &serde_path_to_error::Error<pythonize::PythonizeError>) -> FieldError {
    // Enum variants (`collision.Srd.angle_deg`) are left out, as the RON checks name fields.
    let path = e
        .path()
        .to_string()
        .split('.')
        .filter(|s| !s.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect::<Vec<_>>()
        .join(".");
    let msg = e.inner().to_string();
    let at = |name: &str| match path.as_str() {
        "." | "" | "?" => name.to_string(),
        p if p.ends_with(name) => p.to_string(),
        p => format!("{p}.{name}"),
    };
    let field_path = if path == "." {
        "(config)".into()
    } else {
        path.clone()
    };
    if let Some(name) = quoted(&msg, "unknown field") {
        return FieldError {
            field: at(name),
            problem: "no such keyword".into(),
            fix: format!("remove it or use one of: {}", choices(&msg)),
        };
    }
    if let Some(name) = quoted(&msg, "missing field") {
        return FieldError {
            field: at(name),
            problem: "missing".into(),
            fix: format!("add `{name}=...` (the fields of a RON config, see examples/*.ron)"),
        };
    }
    if let Some(name) = quoted(&msg, "unknown variant") {
        return FieldError {
            field: field_path,
            problem: format!("`{name}` is not a valid choice"),
            fix: format!("use one of: {}", choices(&msg)),
        };
    }
    FieldError {
        field: field_path,
        problem: msg,
        fix: "give a value of the type the RON config takes (docs/python.md lists them)".into(),
    }
}
