//! The C ABI over MPI ranks: a program that runs MPI itself hands mpcbox its communicator, then
//! each rank steps the one box with the solutes it holds (routed to the rank that owns their
//! cells and back). Built with the crate's `mpi` feature; without it `mpcbox_use_mpi_comm`
//! reports that MPI is missing.

use std::ffi::c_int;

use crate::{guard, mpc, solvent_mut, MpcboxSolvent};

/// Run this process's solvents over the caller's MPI communicator, given in its Fortran form
/// (from C: `MPI_Comm_c2f(MPI_COMM_WORLD)`; from Fortran: the integer handle; from mpi4py:
/// `comm.py2f()`). Call once, after `MPI_Init` and before the first `mpcbox_create_*`; every
/// rank then creates the same solvent. mpcbox communicates on a duplicate of the communicator.
///
/// # Safety
/// `fortran_comm` names a valid communicator; MPI stays initialised while solvents live.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_use_mpi_comm(fortran_comm: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's promise above.
        unsafe { mpcbox::ranks::adopt_fortran_comm(fortran_comm) }.map_err(mpc)
    })
}

/// Over MPI ranks: `on` non-zero when each rank passes its own solutes to `mpcbox_step`
/// (routed to the rank that owns their cells, velocities back to the rank that passed them);
/// zero when every rank passes the same ones. Every rank must call `mpcbox_step` every step,
/// with or without solutes (n = 0). No effect on one process.
///
/// # Safety
/// `solvent` is a live handle from `mpcbox_create_*` (or NULL, refused).
#[no_mangle]
pub unsafe extern "C" fn mpcbox_set_solutes_per_rank(
    solvent: *mut MpcboxSolvent,
    on: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live handle (or NULL, refused).
        let s = unsafe { solvent_mut(solvent)? };
        s.set_solutes_per_rank(on != 0).map_err(mpc)
    })
}
