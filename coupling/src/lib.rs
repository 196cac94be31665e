//! C ABI of the mpcbox solvent, for C, C++ and Fortran MD codes.
//!
//! Every function catches panics and reports failure through its return value (`0` = success,
//! a nonzero `MpcboxStatus` otherwise; `NULL` for constructors); `mpcbox_last_error()` then
//! gives the message of the last failure on the calling thread. Arrays are flat, row-major
//! `double[3*n]` (x0, y0, z0, x1, ...), positions in units of the MPC cell size.

// Every unsafe operation sits in its own `unsafe` block with the reason it is sound.
#![deny(unsafe_op_in_unsafe_fn)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use mpcbox::{Checkpoint, Config, MpcError, Solvent};

mod device;
mod host_memory;
mod observables;
mod ranks;
pub use device::mpcbox_step_device;
pub use host_memory::{mpcbox_host_alloc, mpcbox_host_free};
pub use observables::{mpcbox_last_collision, mpcbox_observables, MpcboxObservables};

/// An mpcbox solvent (opaque).
pub struct MpcboxSolvent {
    inner: Solvent,
}

/// Status codes of the C ABI.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpcboxStatus {
    Ok = 0,
    /// A null pointer where an object or array was required.
    NullArgument = 1,
    /// Invalid configuration (the message names the field and the fix).
    Config = 2,
    /// Invalid solute arrays (lengths, NaN/inf, masses); the solvent is unchanged.
    Solute = 3,
    /// Device or backend failure, including out of memory.
    Device = 4,
    /// Checkpoint or file input/output failure.
    Io = 5,
    /// An internal error (a bug): please report it with the message.
    Internal = 6,
    /// The dynamics became unstable (a non-finite energy, a torn bond); the message says at
    /// which step and what usually causes it.
    Unstable = 7,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn status_of(e: &MpcError) -> MpcboxStatus {
    match e {
        MpcError::Config(_) => MpcboxStatus::Config,
        MpcError::Solute { .. } => MpcboxStatus::Solute,
        MpcError::Device(_) | MpcError::Driver { .. } | MpcError::OutOfMemory { .. } => {
            MpcboxStatus::Device
        }
        MpcError::Unstable { .. } => MpcboxStatus::Unstable,
        // a stop on request ends with the checkpoint written: the run's files are the matter
        MpcError::Checkpoint { .. } | MpcError::Io { .. } | MpcError::Interrupted { .. } => {
            MpcboxStatus::Io
        }
    }
}

/// Run `f`, turning errors and panics into a status code and the thread's last error.
fn guard(f: impl FnOnce() -> Result<(), (MpcboxStatus, String)>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => MpcboxStatus::Ok as c_int,
        Ok(Err((status, msg))) => {
            set_error(msg);
            status as c_int
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned());
            set_error(format!(
                "internal error (please report): {}",
                what.unwrap_or_default()
            ));
            MpcboxStatus::Internal as c_int
        }
    }
}

fn mpc(e: MpcError) -> (MpcboxStatus, String) {
    (status_of(&e), e.to_string())
}

fn null(what: &str) -> (MpcboxStatus, String) {
    (
        MpcboxStatus::NullArgument,
        format!("argument `{what}` is NULL; fix: pass a valid pointer"),
    )
}

/// The UTF-8 text at `p`.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string that lives and stays unchanged for 'a.
unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, (MpcboxStatus, String)> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: `p` is not NULL and the caller promises a NUL-terminated string that outlives 'a.
    let text = unsafe { CStr::from_ptr(p) };
    text.to_str().map_err(|_| {
        (
            MpcboxStatus::Config,
            format!("argument `{what}` is not valid UTF-8"),
        )
    })
}

/// The solvent behind a handle.
///
/// # Safety
/// `s` must be NULL or come from `mpcbox_create_*`, not freed, and not used elsewhere for 'a.
unsafe fn solvent_mut<'a>(
    s: *mut MpcboxSolvent,
) -> Result<&'a mut Solvent, (MpcboxStatus, String)> {
    // SAFETY: the caller promises `s` is NULL or a live solvent from `mpcbox_create_*` that no
    // one else uses during 'a; `as_mut` maps NULL to None.
    unsafe { s.as_mut() }
        .map(|s| &mut s.inner)
        .ok_or_else(|| null("solvent"))
}

/// `n` triples from a flat array (NULL allowed when n == 0).
///
/// # Safety
/// `p` must be NULL or point to 3n doubles that are not written during 'a.
unsafe fn triples<'a>(
    p: *const f64,
    n: usize,
    what: &str,
) -> Result<&'a [[f64; 3]], (MpcboxStatus, String)> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: `p` is not NULL and the caller promises 3n readable doubles, i.e. n `[f64; 3]`
    // (same alignment as f64), not written by anyone else during 'a.
    Ok(unsafe { std::slice::from_raw_parts(p as *const [f64; 3], n) })
}

/// `n` writable triples from a flat array (NULL allowed when n == 0).
///
/// # Safety
/// `p` must be NULL or point to 3n doubles that nothing else reads or writes during 'a.
unsafe fn triples_mut<'a>(
    p: *mut f64,
    n: usize,
    what: &str,
) -> Result<&'a mut [[f64; 3]], (MpcboxStatus, String)> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: `p` is not NULL and the caller promises 3n writable doubles that nothing else
    // accesses during 'a; `[f64; 3]` has the alignment of f64.
    Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut [f64; 3], n) })
}

/// `n` doubles (NULL allowed when n == 0).
///
/// # Safety
/// `p` must be NULL or point to n doubles that are not written during 'a.
unsafe fn scalars<'a>(
    p: *const f64,
    n: usize,
    what: &str,
) -> Result<&'a [f64], (MpcboxStatus, String)> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: `p` is not NULL and the caller promises n readable doubles during 'a.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn boxed(make: impl FnOnce() -> Result<Solvent, (MpcboxStatus, String)>) -> *mut MpcboxSolvent {
    let mut out: *mut MpcboxSolvent = std::ptr::null_mut();
    let status = guard(|| {
        out = Box::into_raw(Box::new(MpcboxSolvent { inner: make()? }));
        Ok(())
    });
    if status != 0 {
        return std::ptr::null_mut();
    }
    out
}

/// Create a solvent from RON config text. Returns NULL on failure (see `mpcbox_last_error`).
///
/// # Safety
/// `ron_text` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_create_from_ron(ron_text: *const c_char) -> *mut MpcboxSolvent {
    boxed(|| {
        // SAFETY: the caller promises a NUL-terminated string (or NULL, which is refused).
        let text = unsafe { c_str(ron_text, "ron_text")? };
        let cfg = Config::from_ron_str(text).map_err(|e| mpc(e.into()))?;
        Solvent::new(cfg).map_err(mpc)
    })
}

/// Create a solvent from a RON config file. Returns NULL on failure.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_create_from_file(path: *const c_char) -> *mut MpcboxSolvent {
    boxed(|| {
        // SAFETY: the caller promises a NUL-terminated string (or NULL, which is refused).
        let path = unsafe { c_str(path, "path")? };
        let cfg = Config::from_file(Path::new(path)).map_err(|e| mpc(e.into()))?;
        Solvent::new(cfg).map_err(mpc)
    })
}

/// Create a solvent from a checkpoint file written by `mpcbox_checkpoint_save` or `mpcbox run`.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_create_from_checkpoint(path: *const c_char) -> *mut MpcboxSolvent {
    boxed(|| {
        // SAFETY: the caller promises a NUL-terminated string (or NULL, which is refused).
        let path = unsafe { c_str(path, "path")? };
        let ck = Checkpoint::load(Path::new(path)).map_err(mpc)?;
        Solvent::from_checkpoint(ck, None).map_err(mpc)
    })
}

/// Free a solvent (NULL is ignored).
///
/// # Safety
/// `solvent` must come from an `mpcbox_create_*` function and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_free(solvent: *mut MpcboxSolvent) {
    if !solvent.is_null() {
        // SAFETY: a non-NULL `solvent` was made by `Box::into_raw` in `boxed` and, as the caller
        // promises, is freed only once and not used afterwards.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(solvent) })));
    }
}

/// One MPC step with `n` solutes: positions `pos[3n]` and masses `mass[n]` in, velocities
/// `vel[3n]` in and out. Positions outside the box are wrapped (Lees-Edwards images in y).
/// On failure nothing changes: neither the fluid nor `vel`.
///
/// # Safety
/// The arrays must hold at least `3n`, `3n` and `n` doubles (they may be NULL when n == 0).
#[no_mangle]
pub unsafe extern "C" fn mpcbox_step(
    solvent: *mut MpcboxSolvent,
    n: usize,
    pos: *const f64,
    vel: *mut f64,
    mass: *const f64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and arrays of 3n, 3n and n doubles that
        // do not overlap `vel` (NULL pointers are refused by the helpers).
        let (s, p, v, m) = unsafe {
            (
                solvent_mut(solvent)?,
                triples(pos, n, "pos")?,
                triples_mut(vel, n, "vel")?,
                scalars(mass, n, "mass")?,
            )
        };
        s.step_with_solutes(p, v, m).map(|_| ()).map_err(mpc)
    })
}

/// `steps` MPC steps of the fluid alone.
///
/// # Safety
/// `solvent` must be valid.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_step_fluid(solvent: *mut MpcboxSolvent, steps: u64) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent (NULL is refused).
        let s = unsafe { solvent_mut(solvent)? };
        for _ in 0..steps {
            s.step().map_err(mpc)?;
        }
        Ok(())
    })
}

/// Begin the next step before its solutes are known: the fluid's part that needs none (its
/// streaming and binning) is queued on the GPU(s) and runs while the caller's MD steps do.
/// The next `mpcbox_step` (host arrays; over ranks, each rank's own) or `mpcbox_step_device`
/// with `n` solutes finishes it; nothing else may step, read or checkpoint the fluid in
/// between. `*begun` (when not NULL) is set to 1 if the step was begun, 0 if the backend does
/// the whole step in the finishing call (the CPU, or n = 0): the finishing call is the same.
/// A finish that refuses its solutes (a bad value, another count) leaves the step begun.
///
/// # Safety
/// `solvent` must be valid; `begun` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_begin_fluid(
    solvent: *mut MpcboxSolvent,
    n: usize,
    begun: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent (NULL is refused).
        let s = unsafe { solvent_mut(solvent)? };
        let did = s.begin_fluid_step(n).map_err(mpc)?;
        if !begun.is_null() {
            // SAFETY: the caller promises `begun` is NULL (tested above) or writable.
            unsafe { *begun = c_int::from(did) };
        }
        Ok(())
    })
}

/// First half of a split step: hand over the solutes (copied). On a GPU the upload overlaps
/// the fluid streaming; call `mpcbox_finish_step` to complete the step.
///
/// # Safety
/// As `mpcbox_step` (here `vel` is only read).
#[no_mangle]
pub unsafe extern "C" fn mpcbox_begin_step(
    solvent: *mut MpcboxSolvent,
    n: usize,
    pos: *const f64,
    vel: *const f64,
    mass: *const f64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and readable arrays of 3n, 3n and n
        // doubles (NULL pointers are refused by the helpers).
        let (s, p, v, m) = unsafe {
            (
                solvent_mut(solvent)?,
                triples(pos, n, "pos")?,
                triples(vel, n, "vel")?,
                scalars(mass, n, "mass")?,
            )
        };
        s.begin_step(p, v, m).map_err(mpc)
    })
}

/// Second half of a split step: the new solute velocities go to `vel_out[3n]`.
///
/// # Safety
/// `vel_out` must hold `3n` doubles, n as given to `mpcbox_begin_step`.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_finish_step(
    solvent: *mut MpcboxSolvent,
    n: usize,
    vel_out: *mut f64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and 3n writable doubles at `vel_out`.
        let (s, v) = unsafe { (solvent_mut(solvent)?, triples_mut(vel_out, n, "vel_out")?) };
        s.finish_step(v).map(|_| ()).map_err(mpc)
    })
}

/// The run constants of a solvent (from its config), for codes that check their own units
/// against the solvent's (e.g. the LAMMPS plugin: MD steps × dt = h, box = cells × a).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MpcboxParameters {
    /// Box edge lengths in cells (Lx, Ly, Lz).
    pub box_lengths: [f64; 3],
    /// Collision time step h.
    pub time_step: f64,
    /// Lees-Edwards shear rate (flow along x, gradient along y); 0 without shear.
    pub shear_rate: f64,
    /// Thermal energy kT (fluid mass × (cells / time unit)²).
    pub kt: f64,
    /// Mass of one fluid particle.
    pub fluid_mass: f64,
    /// Mean number of fluid particles per cell.
    pub particles_per_cell: u32,
}

/// The solvent's run constants into `out`.
///
/// # Safety
/// `solvent` and `out` must be valid.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_parameters(
    solvent: *mut MpcboxSolvent,
    out: *mut MpcboxParameters,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and a writable `MpcboxParameters` at
        // `out`; NULL is refused.
        let (s, out) = unsafe {
            (
                solvent_mut(solvent)?,
                out.as_mut().ok_or_else(|| null("out"))?,
            )
        };
        let (phys, cfg) = (s.physics(), s.config());
        *out = MpcboxParameters {
            box_lengths: phys.length,
            time_step: phys.h,
            shear_rate: phys.shear_rate,
            kt: phys.kt,
            fluid_mass: phys.mass,
            particles_per_cell: cfg.particles_per_cell,
        };
        Ok(())
    })
}

/// Box edge lengths (in cells) into `out[3]`.
///
/// # Safety
/// `solvent` must be valid and `out` hold 3 doubles.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_box_lengths(solvent: *mut MpcboxSolvent, out: *mut f64) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent (NULL is refused).
        let s = unsafe { solvent_mut(solvent)? };
        if out.is_null() {
            return Err(null("out"));
        }
        // SAFETY: `out` is not NULL and the caller promises room for 3 doubles.
        let out = unsafe { std::slice::from_raw_parts_mut(out, 3) };
        out.copy_from_slice(&s.physics().length);
        Ok(())
    })
}

/// Steps completed (0 for a NULL solvent).
///
/// # Safety
/// `solvent` must be valid or NULL.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_step_count(solvent: *const MpcboxSolvent) -> u64 {
    // SAFETY: the caller promises NULL or a live solvent; `as_ref` maps NULL to None.
    unsafe { solvent.as_ref() }.map_or(0, |s| s.inner.step_count())
}

/// Number of fluid particles (0 for a NULL solvent).
///
/// # Safety
/// `solvent` must be valid or NULL.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_fluid_particles(solvent: *const MpcboxSolvent) -> u64 {
    // SAFETY: the caller promises NULL or a live solvent; `as_ref` maps NULL to None.
    unsafe { solvent.as_ref() }.map_or(0, |s| s.inner.n_fluid() as u64)
}

/// Write a checkpoint of the fluid (atomically: temporary file, then rename). Refused (status
/// `Config`, nothing written) where `path` holds a checkpoint of another run (or another file)
/// or its directory another run's files: see `mpcbox_checkpoint_overwrite`. Over MPI ranks
/// every rank calls it (the fluid is gathered) and rank 0 alone checks and writes the file.
///
/// # Safety
/// `solvent` must be valid and `path` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_checkpoint_save(
    solvent: *mut MpcboxSolvent,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's promises are those of `save`.
    unsafe { save(solvent, path, false) }
}

/// `mpcbox_checkpoint_save` that replaces whatever `path` holds, another run's checkpoint
/// included (as MD codes replace their own restart files).
///
/// # Safety
/// `solvent` must be valid and `path` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_checkpoint_overwrite(
    solvent: *mut MpcboxSolvent,
    path: *const c_char,
) -> c_int {
    // SAFETY: the caller's promises are those of `save`.
    unsafe { save(solvent, path, true) }
}

/// The checkpoint writers.
///
/// # Safety
/// `solvent` must be NULL or valid, and `path` NULL or NUL-terminated.
unsafe fn save(solvent: *mut MpcboxSolvent, path: *const c_char, overwrite: bool) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and a NUL-terminated path (NULL refused).
        let (s, p) = unsafe { (solvent_mut(solvent)?, c_str(path, "path")?) };
        let p = Path::new(p);
        // the gather first: every rank takes part, whatever rank 0 then decides
        let ck = s.checkpoint().map_err(mpc)?;
        mpcbox::output_dir::check_checkpoint_path(p, s.run_id(), overwrite).map_err(mpc)?;
        ck.save_on_root(p).map_err(mpc)
    })
}

/// Put the fluid back to a checkpoint of a solvent with the same box and particle count.
///
/// # Safety
/// `solvent` must be valid and `path` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_restore(solvent: *mut MpcboxSolvent, path: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and a NUL-terminated path (NULL refused).
        let (s, p) = unsafe { (solvent_mut(solvent)?, c_str(path, "path")?) };
        let ck = Checkpoint::load(Path::new(p)).map_err(mpc)?;
        s.restore(&ck).map_err(mpc)
    })
}

/// The message of the last failure on this thread ("" if none). Valid until the next failing
/// call on the same thread.
#[no_mangle]
pub extern "C" fn mpcbox_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
