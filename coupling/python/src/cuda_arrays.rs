//! CUDA arrays from CuPy, PyTorch, Numba (anything exporting `__cuda_array_interface__`):
//! their device pointer, length and stream, checked for what the coupled step needs (float64,
//! C-contiguous, (n, 3) or (n,), writable where written).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// One array's device address, row count and the stream its producer asks consumers to order
/// after (the interface's `stream`: 1 = legacy default, 2 = per-thread default, else a
/// `CUstream`; None: no ordering needed).
pub struct CudaArray {
    pub ptr: u64,
    pub rows: usize,
    pub stream: Option<u64>,
}

/// Whether `obj` exports the CUDA array interface.
pub fn is_cuda_array(obj: &Bound<'_, PyAny>) -> bool {
    obj.hasattr("__cuda_array_interface__").unwrap_or(false)
}

fn bad(name: &str, problem: String, fix: &str) -> PyErr {
    PyValueError::new_err(format!("`{name}` {problem}; fix: {fix}"))
}

/// Read `obj.__cuda_array_interface__` as a float64 C-contiguous array of shape (n, `cols`)
/// (or (n,) when `cols` is None).
pub fn cuda_array(
    obj: &Bound<'_, PyAny>,
    name: &str,
    cols: Option<usize>,
    writable: bool,
) -> PyResult<CudaArray> {
    let cai = obj.getattr("__cuda_array_interface__").map_err(|_| {
        bad(
            name,
            "is not a CUDA array".into(),
            "pass CuPy/PyTorch CUDA arrays for all three of pos, vel, mass, or numpy arrays for all",
        )
    })?;
    let cai = cai.cast::<PyDict>()?;
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        cai.get_item(key)?.ok_or_else(|| {
            bad(
                name,
                format!("has no `{key}` in its CUDA array interface"),
                "pass a CuPy or PyTorch array",
            )
        })
    };
    let typestr: String = get("typestr")?.extract()?;
    if typestr != "<f8" {
        return Err(bad(
            name,
            format!("has dtype {typestr}"),
            "pass float64 arrays (astype float64 / .double())",
        ));
    }
    let shape: Vec<usize> = get("shape")?.extract()?;
    let (rows, expected): (usize, Vec<isize>) = match (cols, shape.as_slice()) {
        (Some(c), [n, k]) if *k == c => (*n, vec![c as isize * 8, 8]),
        (None, [n]) => (*n, vec![8]),
        _ => {
            let want = cols.map_or("(n,)".to_string(), |c| format!("(n, {c})"));
            return Err(bad(
                name,
                format!("has shape {shape:?}"),
                &format!("pass an array of shape {want}"),
            ));
        }
    };
    // no strides (or None): C order by the interface's definition; else every axis longer
    // than one must step as C order does (a single row of a transposed array is strided too)
    if let Some(strides) = cai.get_item("strides")?.filter(|s| !s.is_none()) {
        let s: Vec<isize> = strides.extract()?;
        let c_order = s.len() == expected.len()
            && shape
                .iter()
                .zip(s.iter().zip(&expected))
                .all(|(&n, (got, want))| n <= 1 || got == want);
        if !c_order {
            return Err(bad(
                name,
                format!("has strides {s:?} for shape {shape:?}, not C order (a transpose, a Fortran-ordered array or a slice), whose rows would be read in another order"),
                "pass a C-contiguous array (cupy.ascontiguousarray(a) / a.contiguous()); for \
                 `vel`, which is updated in place, make it C-contiguous once before the loop",
            ));
        }
    }
    let data = get("data")?;
    let data = data.cast::<PyTuple>()?;
    let ptr: u64 = data.get_item(0)?.extract()?;
    let readonly: bool = data.get_item(1)?.extract()?;
    if writable && readonly {
        return Err(bad(
            name,
            "is read-only".into(),
            "pass a writable array: the velocities are updated in place",
        ));
    }
    let stream = match cai.get_item("stream")? {
        Some(s) if !s.is_none() => Some(s.extract::<u64>()?),
        _ => None,
    };
    Ok(CudaArray { ptr, rows, stream })
}
