//! The fluid's observables through the C ABI: all of them (sums over every fluid particle), or
//! only what the last collision measured.

use std::ffi::c_int;

use super::{guard, mpc, null, solvent_mut, MpcboxSolvent};

/// Fluid observables (reductions on the device).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MpcboxObservables {
    pub step: u64,
    pub time: f64,
    pub particles: u64,
    pub momentum: [f64; 3],
    pub kinetic_energy: f64,
    /// kT from velocities relative to the cell velocity, before the last collision.
    pub temperature: f64,
    /// xy stress of the last step (kinetic, collisional); NaN when not measured.
    pub stress_xy_kinetic: f64,
    pub stress_xy_collisional: f64,
}

impl From<&mpcbox::Observables> for MpcboxObservables {
    /// Every field of the solvent's observables, destructured whole: a field added there does
    /// not compile here until the C struct says what becomes of it.
    fn from(o: &mpcbox::Observables) -> MpcboxObservables {
        let mpcbox::Observables {
            step,
            time,
            particles,
            momentum,
            kinetic_energy,
            temperature,
            stress_xy,
            // between walls: in summary.json and the Rust API, not in the C struct
            wall_force: _,
        } = *o;
        let (stress_xy_kinetic, stress_xy_collisional) = stresses(stress_xy);
        MpcboxObservables {
            step,
            time,
            particles,
            momentum,
            kinetic_energy,
            temperature,
            stress_xy_kinetic,
            stress_xy_collisional,
        }
    }
}

/// `out` written with what `measure` makes of the solvent, behind the C ABI's checks (NULL
/// refused, errors and panics turned into a status and `mpcbox_last_error`).
///
/// # Safety
/// `solvent` and `out` must be NULL or valid.
unsafe fn write_observables(
    solvent: *mut MpcboxSolvent,
    out: *mut MpcboxObservables,
    measure: impl FnOnce(&mut mpcbox::Solvent) -> mpcbox::Result<MpcboxObservables>,
) -> c_int {
    guard(|| {
        // SAFETY: the caller promises a live solvent and a writable `MpcboxObservables` at
        // `out`; NULL is refused.
        let (s, out) = unsafe {
            (
                solvent_mut(solvent)?,
                out.as_mut().ok_or_else(|| null("out"))?,
            )
        };
        *out = measure(s).map_err(mpc)?;
        Ok(())
    })
}

/// The xy stresses (kinetic, collisional), NaN where not measured.
fn stresses(stress: Option<(f64, f64)>) -> (f64, f64) {
    stress.unwrap_or((f64::NAN, f64::NAN))
}

/// Fluid observables now. Over MPI ranks every rank calls it (the sums are over all ranks).
///
/// # Safety
/// `solvent` and `out` must be valid.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_observables(
    solvent: *mut MpcboxSolvent,
    out: *mut MpcboxObservables,
) -> c_int {
    // SAFETY: the caller's promise, passed on.
    unsafe {
        write_observables(solvent, out, |s| {
            Ok(MpcboxObservables::from(&s.observables()?))
        })
    }
}

/// What the last collision measured, without the sums over every fluid particle that
/// `mpcbox_observables` makes: `step`, `time`, `temperature` and the xy stresses (NaN when
/// the last step did not measure them); `particles` is 0, `momentum` and `kinetic_energy` NaN.
/// Cheap and local: over MPI ranks every rank holds the same values, and need not call it
/// together.
///
/// # Safety
/// `solvent` and `out` must be valid.
#[no_mangle]
pub unsafe extern "C" fn mpcbox_last_collision(
    solvent: *mut MpcboxSolvent,
    out: *mut MpcboxObservables,
) -> c_int {
    // SAFETY: the caller's promise, passed on.
    unsafe {
        write_observables(solvent, out, |s| {
            let (temperature, stress) = s.last_collision();
            let (sk, sc) = stresses(stress);
            Ok(MpcboxObservables {
                step: s.step_count(),
                time: s.time(),
                particles: 0,
                momentum: [f64::NAN; 3],
                kinetic_energy: f64::NAN,
                temperature,
                stress_xy_kinetic: sk,
                stress_xy_collisional: sc,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{mpcbox_create_from_ron, mpcbox_free, mpcbox_step};

    /// `mpcbox_last_collision` gives what `mpcbox_observables` gives of the last collision
    /// (kT; the stresses of a sheared, sampled step) without the sums over the fluid, and
    /// refuses a NULL output.
    #[test]
    fn last_collision_matches_the_observables_of_the_same_step() {
        let ron = std::ffi::CString::new(
            "(cells: (6, 6, 6), particles_per_cell: 5, time_step: 0.1, \
             collision: Srd(angle_deg: 130.0), shear_rate: 0.05, seed: 3, steps: 0, \
             output: (sample_interval: 1), device: Cpu)",
        )
        .unwrap();
        // SAFETY: a NUL-terminated config; the solvent is freed at the end, once.
        let s = unsafe { mpcbox_create_from_ron(ron.as_ptr()) };
        assert!(!s.is_null());
        let pos = [1.5, 2.5, 3.5, 4.0, 0.5, 5.5];
        let mut vel = [0.1, 0.0, -0.2, 0.0, 0.3, 0.1];
        let mass = [5.0, 5.0];
        let (mut last, mut all) = (MpcboxObservables::default(), MpcboxObservables::default());
        for _ in 0..3 {
            // SAFETY: a live solvent and arrays of 6, 6 and 2 doubles for n = 2; the outputs
            // are writable MpcboxObservables.
            unsafe {
                assert_eq!(
                    mpcbox_step(s, 2, pos.as_ptr(), vel.as_mut_ptr(), mass.as_ptr()),
                    0
                );
                assert_eq!(mpcbox_last_collision(s, &mut last), 0);
                assert_eq!(mpcbox_observables(s, &mut all), 0);
            }
            assert_eq!(last.step, all.step);
            assert_eq!(last.time, all.time);
            assert!(last.temperature.is_finite());
            assert_eq!(last.temperature.to_bits(), all.temperature.to_bits());
            assert!(last.stress_xy_kinetic.is_finite(), "sampled under shear");
            assert_eq!(
                last.stress_xy_kinetic.to_bits(),
                all.stress_xy_kinetic.to_bits()
            );
            assert_eq!(
                last.stress_xy_collisional.to_bits(),
                all.stress_xy_collisional.to_bits()
            );
            assert_eq!(last.particles, 0);
            assert!(last.kinetic_energy.is_nan() && last.momentum.iter().all(|p| p.is_nan()));
        }
        assert_eq!(last.step, 3);
        // SAFETY: a live solvent; NULL output is what is tested (refused, nothing written).
        assert_ne!(unsafe { mpcbox_last_collision(s, std::ptr::null_mut()) }, 0);
        // SAFETY: made above, freed once.
        unsafe { mpcbox_free(s) };
    }
}
