//! The seam between the coupled loop and an MD engine ([`MdEngine`]): the CPU engine
//! ([`Md`]), the GPU engine ([`GpuEngine`]: device-resident beads on the fluid's GPU, or a host
//! round trip) and, in time, decomposed engines all look the same to [`super::Coupling`], which
//! no longer branches on which engine runs. Observables come back as reductions (stress,
//! conformation); the whole system only when it is observed or checkpointed.

use super::super::engine::{ForceReport, Md, MdSettings, MdState};
use super::super::gpu::{blocks_per_sm_beside_fluid, GpuMd, SlabMd};
use super::super::observe::{ChainObserver, ChainSample};
use super::super::rheology::{conformation, kinetic_tensor, pressure_from, Conformation};
use super::super::system::System;
use crate::error::Result;
use crate::solvent::Solvent;

/// What the coupled loop asks of an MD engine.
pub trait MdEngine: Send {
    /// The device it runs on ("cpu" or the GPU's description).
    fn describe(&self) -> String;
    /// How the beads reach the fluid: "device-resident (GPU N)", "GPU MD, host round trip",
    /// "CPU MD".
    fn path_description(&self) -> String;
    fn settings(&self) -> &MdSettings;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn step_count(&self) -> u64;
    fn list_builds(&self) -> u64;
    fn uses_verlet_list(&self) -> bool;
    /// `n` MD steps; energies and the virial tensor at the last one when `energies`.
    fn advance(&mut self, n: u64, energies: bool) -> Result<()>;
    /// The MPC collision of the beads with the fluid (`solvent` steps once); velocities come
    /// back into the engine and velocity-dependent forces are recomputed.
    fn collide(&mut self, solvent: &mut Solvent) -> Result<()>;
    /// The solutes' (pressure tensor, its kinetic part) now, the virial from the last force
    /// evaluation with energies (`md::rheology::pressure_tensor`).
    fn solute_pressure(&mut self, shear_rate: f64) -> Result<([f64; 6], [f64; 6])>;
    /// The chains' conformation now (`md::rheology::conformation`).
    fn conformation(&mut self) -> Result<Conformation>;
    /// The md.csv chain columns now (`ChainObserver::sample` of the system; the GPU engines
    /// reduce them where the beads are).
    fn chain_sample(&mut self, observer: &ChainObserver) -> Result<ChainSample> {
        Ok(observer.sample(self.system()?))
    }
    /// The system now (downloaded when the host copy is stale).
    fn system(&mut self) -> Result<&System>;
    /// Energies and virial of the current configuration, where the last force evaluation
    /// skipped them (`advance(n, false)`).
    fn refresh_energies(&mut self) -> Result<()>;
    fn report(&self) -> ForceReport;
    fn kinetic_energy(&mut self) -> Result<f64>;
    fn momentum(&mut self) -> Result<[f64; 3]>;
    /// Both at once: one reduction where the engine's beads live on a GPU (an md.csv row).
    fn kinetic_energy_and_momentum(&mut self) -> Result<(f64, [f64; 3])> {
        Ok((self.kinetic_energy()?, self.momentum()?))
    }
    /// The engine's state for a checkpoint.
    fn state(&mut self) -> Result<MdState>;
    /// Hand the beads over through host memory even where they could stay on the GPU.
    fn use_host_round_trip(&mut self);
    /// The GPU the engine runs on (None on the CPU).
    fn gpu_ordinal(&self) -> Option<usize>;
    /// Wait for the engine's queued device work (timings).
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    /// Whether the coupled loop begins the fluid's next step ([`Solvent::begin_fluid_step`])
    /// before this engine's MD steps, so the fluid streams while they run: the beads reach
    /// the fluid as device memory and the engine's kernels run on their own streams
    /// (`MPCBOX_MD_OVERLAP=off` turns it off).
    fn overlaps_fluid(&self) -> bool {
        false
    }
    /// Whether the next MD steps run beside the fluid's streaming: the engine on one GPU then
    /// launches its forces and list kernels over part of it (`md::gpu::blocks_per_sm_beside_fluid`).
    fn set_beside_fluid(&mut self, _on: bool) {}
    /// Benchmarks: time the phases of each MD step (an engine that can; the others ignore it).
    fn set_profiling(&mut self, _on: bool) {}
    /// The profiled phases' names and seconds, where the engine times them.
    fn phase_seconds(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Where the host's time goes in the MD steps since profiling was last switched (on or
    /// off), where the engine times it.
    fn host_seconds(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// `MPCBOX_MD_OVERLAP`: on unless `off`.
fn overlap_wanted(value: Option<&str>) -> bool {
    value != Some("off")
}

/// The MPC collision of host arrays (the CPU engine's system, or a GPU engine's host copy).
fn collide_host(sys: &mut System, solvent: &mut Solvent) -> Result<()> {
    let mass = sys.masses();
    solvent.step_with_solutes(&sys.pos, &mut sys.vel, &mass)?;
    Ok(())
}

impl MdEngine for Md {
    fn describe(&self) -> String {
        "cpu".into()
    }

    fn path_description(&self) -> String {
        "CPU MD".into()
    }

    fn settings(&self) -> &MdSettings {
        Md::settings(self)
    }

    fn len(&self) -> usize {
        self.sys.len()
    }

    fn step_count(&self) -> u64 {
        Md::step_count(self)
    }

    fn list_builds(&self) -> u64 {
        Md::list_builds(self)
    }

    fn uses_verlet_list(&self) -> bool {
        Md::uses_verlet_list(self)
    }

    fn advance(&mut self, n: u64, _energies: bool) -> Result<()> {
        self.run(n)
    }

    fn collide(&mut self, solvent: &mut Solvent) -> Result<()> {
        collide_host(&mut self.sys, solvent)?;
        self.velocities_changed()
    }

    fn solute_pressure(&mut self, shear_rate: f64) -> Result<([f64; 6], [f64; 6])> {
        let k = kinetic_tensor(&self.sys, shear_rate);
        Ok((
            pressure_from(&self.sys, k, self.report().virial_tensor),
            pressure_from(&self.sys, k, [0.0; 6]),
        ))
    }

    fn conformation(&mut self) -> Result<Conformation> {
        Ok(conformation(&self.sys))
    }

    fn system(&mut self) -> Result<&System> {
        Ok(&self.sys)
    }

    /// The CPU engine evaluates energies at the last step of every `run`.
    fn refresh_energies(&mut self) -> Result<()> {
        Ok(())
    }

    fn report(&self) -> ForceReport {
        Md::report(self)
    }

    fn kinetic_energy(&mut self) -> Result<f64> {
        Ok(Md::kinetic_energy(self))
    }

    fn momentum(&mut self) -> Result<[f64; 3]> {
        Ok(Md::momentum(self))
    }

    fn state(&mut self) -> Result<MdState> {
        Ok(Md::state(self))
    }

    fn use_host_round_trip(&mut self) {}

    fn gpu_ordinal(&self) -> Option<usize> {
        None
    }
}

/// The GPU engine in a coupled run: on the fluid's GPU its beads are handed over as device
/// pointers and never leave it (`device_resident`); otherwise through host memory.
pub struct GpuEngine {
    pub md: GpuMd,
    device_resident: bool,
    /// The last force evaluation skipped energies.
    energies_stale: bool,
}

impl GpuEngine {
    /// `fluid_gpu`: the GPU the fluid runs on (None: CPU fluid). `MPCBOX_COUPLING=host` forces
    /// the host round trip.
    pub fn new(md: GpuMd, fluid_gpu: Option<usize>) -> GpuEngine {
        let device_resident =
            Some(md.ordinal()) == fluid_gpu && !crate::knobs::knobs().is("MPCBOX_COUPLING", "host");
        GpuEngine {
            md,
            device_resident,
            energies_stale: false,
        }
    }
}

impl MdEngine for GpuEngine {
    fn describe(&self) -> String {
        self.md.describe()
    }

    fn overlaps_fluid(&self) -> bool {
        self.device_resident && overlap_wanted(crate::knobs::knobs().get("MPCBOX_MD_OVERLAP"))
    }

    fn set_beside_fluid(&mut self, on: bool) {
        let k = if on { blocks_per_sm_beside_fluid() } else { 0 };
        self.md.set_blocks_per_multiprocessor(k);
    }

    fn set_profiling(&mut self, on: bool) {
        self.md.set_profiling(on)
    }

    fn phase_seconds(&self) -> Vec<(&'static str, f64)> {
        self.md.phase_seconds().map_or(Vec::new(), |p| {
            crate::md::gpu::MD_PHASE_NAMES.into_iter().zip(p).collect()
        })
    }

    fn path_description(&self) -> String {
        if self.device_resident {
            format!("device-resident (GPU {})", self.md.ordinal())
        } else {
            "GPU MD, host round trip".into()
        }
    }

    fn settings(&self) -> &MdSettings {
        self.md.settings()
    }

    fn len(&self) -> usize {
        self.md.len()
    }

    fn step_count(&self) -> u64 {
        self.md.step_count()
    }

    fn list_builds(&self) -> u64 {
        self.md.list_builds()
    }

    fn uses_verlet_list(&self) -> bool {
        self.md.uses_verlet_list()
    }

    /// Energies only where asked for: the per-chunk sums are small, but the energy terms cost
    /// a wider force kernel.
    fn advance(&mut self, n: u64, energies: bool) -> Result<()> {
        self.energies_stale = !energies;
        if energies {
            self.md.run(n)
        } else {
            self.md.advance(n)
        }
    }

    fn collide(&mut self, solvent: &mut Solvent) -> Result<()> {
        if self.device_resident {
            solvent.step_with_device_solutes(&self.md.device_solutes())?;
            return self.md.velocities_changed();
        }
        let mut sys = self.md.system()?.clone();
        collide_host(&mut sys, solvent)?;
        self.md.set_velocities(&sys.vel)
    }

    fn solute_pressure(&mut self, shear_rate: f64) -> Result<([f64; 6], [f64; 6])> {
        self.md.solute_pressure(shear_rate)
    }

    fn conformation(&mut self) -> Result<Conformation> {
        self.md.conformation()
    }

    fn chain_sample(&mut self, observer: &ChainObserver) -> Result<ChainSample> {
        self.md.chain_sample(observer)
    }

    fn system(&mut self) -> Result<&System> {
        self.md.system()
    }

    fn refresh_energies(&mut self) -> Result<()> {
        if self.energies_stale {
            self.md.compute_forces()?;
            self.energies_stale = false;
        }
        Ok(())
    }

    fn report(&self) -> ForceReport {
        self.md.report()
    }

    fn kinetic_energy(&mut self) -> Result<f64> {
        self.md.kinetic_energy()
    }

    fn momentum(&mut self) -> Result<[f64; 3]> {
        self.md.momentum()
    }

    fn kinetic_energy_and_momentum(&mut self) -> Result<(f64, [f64; 3])> {
        self.md.kinetic_energy_and_momentum()
    }

    fn state(&mut self) -> Result<MdState> {
        self.md.state()
    }

    fn use_host_round_trip(&mut self) {
        self.device_resident = false;
    }

    fn gpu_ordinal(&self) -> Option<usize> {
        Some(self.md.ordinal())
    }

    fn synchronize(&self) -> Result<()> {
        self.md.synchronize()
    }
}

/// The engine decomposed over the fluid's y slabs: always device-resident, each slab's beads
/// collided by its own GPU.
impl MdEngine for SlabMd {
    fn describe(&self) -> String {
        SlabMd::describe(self)
    }

    fn path_description(&self) -> String {
        format!(
            "device-resident, MD decomposed over {} y slabs",
            self.slab_count()
        )
    }

    fn set_profiling(&mut self, on: bool) {
        SlabMd::set_profiling(self, on)
    }

    fn phase_seconds(&self) -> Vec<(&'static str, f64)> {
        SlabMd::phase_seconds(self).map_or(Vec::new(), |p| {
            crate::md::gpu::MD_PHASE_NAMES.into_iter().zip(p).collect()
        })
    }

    fn host_seconds(&self) -> Vec<(&'static str, f64)> {
        let names = crate::md::gpu::MD_HOST_NAMES;
        names.into_iter().zip(SlabMd::host_seconds(self)).collect()
    }

    fn settings(&self) -> &MdSettings {
        SlabMd::settings(self)
    }

    fn len(&self) -> usize {
        SlabMd::len(self)
    }

    fn step_count(&self) -> u64 {
        SlabMd::step_count(self)
    }

    fn list_builds(&self) -> u64 {
        SlabMd::list_builds(self)
    }

    fn uses_verlet_list(&self) -> bool {
        SlabMd::uses_verlet_list(self)
    }

    fn advance(&mut self, n: u64, energies: bool) -> Result<()> {
        SlabMd::advance(self, n, energies)
    }

    fn overlaps_fluid(&self) -> bool {
        overlap_wanted(crate::knobs::knobs().get("MPCBOX_MD_OVERLAP"))
    }

    fn collide(&mut self, solvent: &mut Solvent) -> Result<()> {
        SlabMd::collide(self, solvent)
    }

    fn solute_pressure(&mut self, shear_rate: f64) -> Result<([f64; 6], [f64; 6])> {
        SlabMd::solute_pressure(self, shear_rate)
    }

    fn conformation(&mut self) -> Result<Conformation> {
        SlabMd::conformation(self)
    }

    fn chain_sample(&mut self, observer: &ChainObserver) -> Result<ChainSample> {
        SlabMd::chain_sample(self, observer)
    }

    fn system(&mut self) -> Result<&System> {
        SlabMd::system(self)
    }

    fn refresh_energies(&mut self) -> Result<()> {
        SlabMd::refresh_energies(self)
    }

    fn report(&self) -> ForceReport {
        SlabMd::report(self)
    }

    fn kinetic_energy(&mut self) -> Result<f64> {
        SlabMd::kinetic_energy(self)
    }

    fn momentum(&mut self) -> Result<[f64; 3]> {
        SlabMd::momentum(self)
    }

    fn kinetic_energy_and_momentum(&mut self) -> Result<(f64, [f64; 3])> {
        SlabMd::kinetic_energy_and_momentum(self)
    }

    fn state(&mut self) -> Result<MdState> {
        SlabMd::state(self)
    }

    /// The slabs' beads never leave their GPUs; choose the round trip when the coupling is
    /// made (`MPCBOX_COUPLING=host`).
    fn use_host_round_trip(&mut self) {
        tracing::warn!(
            "the MD engine decomposed over slabs has no host round trip; set \
             MPCBOX_COUPLING=host before the coupling is made"
        );
    }

    fn gpu_ordinal(&self) -> Option<usize> {
        Some(self.ordinal())
    }

    fn synchronize(&self) -> Result<()> {
        SlabMd::synchronize(self)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_md_overlap_value_parses() {
        let on: Vec<bool> = crate::knobs::MD_OVERLAPS
            .iter()
            .map(|v| super::overlap_wanted(Some(v)))
            .collect();
        assert_eq!(on, [true, false], "on, off");
        assert!(super::overlap_wanted(None), "on by default");
    }
}
