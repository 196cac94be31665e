//! The kernels' parameters of one step ([`KernelParams`], the run constants plus the step's
//! plan), passed by value to every step kernel; the mirror of `struct MpcParams` in
//! `kernels/mpc.cuh`.

use cudarc::driver::DeviceRepr;

use super::CudaBackend;
use crate::physics::StepPlan;

/// Kernel parameters, passed by value; mirrors `struct MpcParams` in `kernels/mpc.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KernelParams {
    length: [f64; 3],
    h: f64,
    mass: f64,
    kt: f64,
    cos_angle: f64,
    sin_angle: f64,
    accel: [f64; 3],
    shear_rate: f64,
    le_velocity: f64,
    shift: [f64; 3],
    le_offset: f64,
    seed: u64,
    step: u64,
    cells: [u32; 3],
    thermostat: u32,
    measure_stress: u32,
    n_fluid: u32,
    n_solutes: u32,
    n_cells: u32,
    cell_offset: u32,
    slab: u32,
}

// SAFETY: plain-old-data (f64, u64 and u32 fields and arrays, no pointers, no padding
// between fields: 192 bytes, checked below) with the C layout of `MpcParams`, which the
// kernels take by value.
unsafe impl DeviceRepr for KernelParams {}

const _: () = assert!(std::mem::size_of::<KernelParams>() == 192);

impl CudaBackend {
    /// The kernels' parameters for the step `plan` with `n_solutes` solutes, on this GPU's
    /// particles and cells (slab mode: its layers, draws keyed by the global cell).
    pub(super) fn params(&self, plan: &StepPlan, n_solutes: usize) -> KernelParams {
        let p = &self.phys;
        KernelParams {
            length: p.length,
            h: p.h,
            mass: p.mass,
            kt: p.kt,
            cos_angle: p.cos_angle,
            sin_angle: p.sin_angle,
            accel: p.acceleration,
            shear_rate: p.shear_rate,
            le_velocity: p.le_velocity,
            shift: plan.shift,
            le_offset: plan.le_offset,
            seed: p.seed,
            step: plan.step,
            cells: p.cells,
            thermostat: p.thermostat as u32,
            measure_stress: plan.measure_stress as u32,
            n_fluid: self.n as u32,
            n_solutes: n_solutes as u32,
            n_cells: self.ncells as u32,
            cell_offset: self.slab.as_ref().map_or(0, |sl| sl.cell_offset),
            slab: self.slab.is_some() as u32,
        }
    }
}
