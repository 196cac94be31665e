//! Device-resident solutes through the C ABI: an MD code whose particles live in the memory of
//! the fluid's GPU hands over CUDA device pointers and its stream; nothing crosses PCIe.

use std::ffi::{c_int, c_void};

use mpcbox::backend::DeviceSolutes;

use crate::{guard, mpc, null, solvent_mut, MpcboxSolvent};

/// One MPC step with `n` solutes whose arrays live in the memory of the fluid's GPU. `pos[3n]`,
/// `vel[3n]` (in and out) and `mass[n]` are CUDA device pointers (as `cudaMalloc`, `cuMemAlloc`,
/// CuPy or PyTorch give them), laid out as in `mpcbox_step`; `stream` is the caller's
/// `cudaStream_t` / `CUstream` (NULL: the legacy default stream). The step waits for the work
/// already queued on `stream` before it reads the solutes, and the caller's work queued on
/// `stream` afterwards sees the new velocities. Pointers that are not device memory of the
/// fluid's GPU, buffers shorter than `n` solutes, NaN/inf, coordinates beyond 1e9 cells and
/// masses <= 0 are refused (`MPCBOX_STATUS_SOLUTE`, message naming the array) and nothing
/// changes. A solvent on the CPU refuses with `MPCBOX_STATUS_DEVICE`.
///
/// # Safety
/// `solvent` must come from an `mpcbox_create_*` function. The pointers are only passed to the
/// CUDA driver, which checks what they point to; `stream`, if not NULL, must be a live stream
/// of the current process.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_step_device(
    solvent: *mut MpcboxSolvent,
    n: usize,
    pos: *const f64,
    vel: *mut f64,
    mass: *const f64,
    stream: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller guarantees `solvent` is NULL or from `mpcbox_create_*`;
        // `solvent_mut` checks for NULL.
        let s = unsafe { solvent_mut(solvent)? };
        if n > 0 {
            for (p, what) in [
                (pos as *const c_void, "pos"),
                (vel as *const c_void, "vel"),
                (mass as *const c_void, "mass"),
            ] {
                if p.is_null() {
                    return Err(null(what));
                }
            }
        }
        let solutes = DeviceSolutes {
            pos: pos as u64,
            vel: vel as u64,
            mass: mass as u64,
            n,
            stream: stream as u64,
        };
        s.step_with_device_solutes(&solutes)
            .map(|_| ())
            .map_err(mpc)
    })
}
