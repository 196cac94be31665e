//! `mpcbox.host_arrays(n)`: numpy arrays for n solutes' positions, velocities and masses in
//! page-locked host memory where a CUDA GPU is usable, so that `Solvent.step` sends them to the
//! GPU and back by DMA straight from and into them, tested on the GPU, instead of a host check
//! and a staging copy each step (docs/coupling-costs.md, "Page-locked host arrays tested on the
//! GPU"); ordinary memory without a GPU. An MD loop in numpy keeps its solutes in them (or
//! copies into them, `pos[:] = ...`) and hands them over as any numpy arrays.

use std::ptr::NonNull;

use numpy::ndarray::{ArrayView1, ArrayView2};
use numpy::{PyArray1, PyArray2};
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

/// The memory of one call's three arrays: 7 n doubles, positions then velocities then masses.
enum Memory {
    /// From the CUDA driver (`alloc_page_locked`), given back by `free_page_locked`.
    PageLocked(NonNull<u8>),
    Ordinary(Box<[f64]>),
}

/// The owner of the arrays' memory, set as their numpy base: it lives as long as any of them.
#[pyclass(module = "mpcbox", frozen)]
struct HostBlock {
    memory: Memory,
}

// SAFETY: the block only holds the address of memory it owns alone (nothing else frees or
// reallocates it); Python code reads and writes that memory through the numpy arrays, as it
// would any numpy array's, and the block frees it once, when the last array is gone.
unsafe impl Send for HostBlock {}
// SAFETY: as above; the block itself is never changed after it is made (`frozen`).
unsafe impl Sync for HostBlock {}

impl HostBlock {
    /// Zeroed memory for `doubles` f64, page-locked where the CUDA driver gives it.
    fn new(doubles: usize) -> HostBlock {
        if let Some(p) = ::mpcbox::backend::cuda::alloc_page_locked(doubles * 8) {
            // SAFETY: the driver returned `doubles * 8` writable bytes at p (none read yet).
            unsafe { p.as_ptr().write_bytes(0, doubles * 8) };
            return HostBlock {
                memory: Memory::PageLocked(p),
            };
        }
        HostBlock {
            memory: Memory::Ordinary(vec![0.0; doubles].into_boxed_slice()),
        }
    }

    fn as_ptr(&self) -> *mut f64 {
        match &self.memory {
            // page-locked memory from the driver is aligned for any type
            Memory::PageLocked(p) => p.as_ptr().cast(),
            Memory::Ordinary(b) => b.as_ptr().cast_mut(),
        }
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        if let Memory::PageLocked(p) = self.memory {
            // SAFETY: from alloc_page_locked and freed only here; the arrays over it are gone
            // (each holds this block as its base), and a step's copies finish before it returns.
            unsafe { ::mpcbox::backend::cuda::free_page_locked(p) };
        }
    }
}

/// Positions (n, 3), velocities (n, 3) and masses (n,).
type SoluteArrays<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// `(pos, vel, mass)` for `n` solutes: float64 numpy arrays of shapes (n, 3), (n, 3) and (n,),
/// zeroed, in page-locked host memory where a CUDA GPU is usable (ordinary memory otherwise),
/// for `Solvent.step`. Fill them in place (`pos[:] = x`); rebinding the name (`pos = x`)
/// leaves the page-locked array behind.
#[pyfunction]
pub(crate) fn host_arrays(py: Python<'_>, n: i64) -> PyResult<SoluteArrays<'_>> {
    let n = usize::try_from(crate::count(n, "n")?)
        .ok()
        .filter(|&n| n.checked_mul(56).is_some_and(|b| b <= isize::MAX as usize))
        .ok_or_else(|| PyMemoryError::new_err(format!("`n` is {n}: too many solutes")))?;
    let block = Bound::new(py, HostBlock::new(7 * n))?;
    let p = block.get().as_ptr();
    // SAFETY: the block holds 7n zeroed, aligned doubles at p, owned by it alone and never
    // reallocated; each view covers its own part (3n, 3n, n) in C order, and each array keeps
    // the block alive as its base (borrow_from_array's contract).
    unsafe {
        let pos = ArrayView2::from_shape_ptr((n, 3), p);
        let vel = ArrayView2::from_shape_ptr((n, 3), p.add(3 * n));
        let mass = ArrayView1::from_shape_ptr(n, p.add(6 * n));
        Ok((
            PyArray2::borrow_from_array(&pos, block.clone().into_any()),
            PyArray2::borrow_from_array(&vel, block.clone().into_any()),
            PyArray1::borrow_from_array(&mass, block.into_any()),
        ))
    }
}
