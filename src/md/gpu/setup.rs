//! Building a GPU engine: [`GpuMd::new`] as named steps: the CPU engine's checks, the device
//! and its kernels, the particle arrays, the force-field tables (`params`) and the
//! neighbour-list buffers (`neighbor`), then the initial forces.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, CudaStream};

use super::neighbor::DeviceLists;
use super::params::Params;
use super::{drv, GpuMd, MD_NFLAGS};
use crate::backend::cuda::{kernels, CudaDevice};
use crate::error::Result;
use crate::md::engine::{ForceReport, Md, MdSettings};
use crate::md::forcefield::{ForceField, MdThermostat};
use crate::md::system::System;

/// The kernels of `kernels/md.cu`.
pub(super) struct MdKernels {
    pub first_half: CudaFunction,
    pub second_half: CudaFunction,
    pub cell_bin: CudaFunction,
    pub cell_sort: CudaFunction,
    pub build_list: CudaFunction,
    pub forces: CudaFunction,
    /// One-type LJ without thermostat passes or bonds.
    pub forces_lj1: CudaFunction,
    /// The walls' WCA forces (`kernels/md_walls.cu`).
    pub wall_forces: CudaFunction,
    /// Reductions for observables (`kernels/md_observe.cu`).
    pub chunk_energy: CudaFunction,
    pub chunk_kinetic: CudaFunction,
    pub chain_conformation: CudaFunction,
    /// The decomposed engine's exchanges (`kernels/md_slabs.cu`).
    pub slab_pack: CudaFunction,
    pub slab_unpack: CudaFunction,
    pub slab_snapshot: CudaFunction,
}

/// The engine's own stream: non-blocking (it does not wait for the fluid's work on the GPU's
/// default stream, nor the fluid for it; the coupling orders the two with events) and of the
/// highest priority, so that its short kernels are scheduled ahead of the blocks of the fluid's
/// long passes where the two share a GPU (the fluid streams towards the next collision while
/// the MD steps run: `Solvent::begin_device_step`).
fn engine_stream(dev: &CudaDevice) -> Result<Arc<CudaStream>> {
    let ctx = dev.context();
    ctx.bind_to_thread().map_err(drv("bind"))?;
    let (_, highest) =
        cudarc::driver::result::stream::get_priority_range().map_err(drv("stream priorities"))?;
    ctx.new_stream_with_priority(highest).map_err(drv("stream"))
}

impl MdKernels {
    /// Compile (or take from the cache) `kernels/md.cu` for `dev` and look up every kernel.
    fn load(dev: &CudaDevice) -> Result<(Arc<CudaModule>, MdKernels)> {
        let module = crate::backend::cuda::load_module(dev.context(), kernels::md_cubin_for)?;
        let f = |name: &str| crate::backend::cuda::kernel(&module, name);
        let k = MdKernels {
            first_half: f("md_first_half")?,
            second_half: f("md_second_half")?,
            cell_bin: f("md_cell_bin")?,
            cell_sort: f("md_cell_sort")?,
            build_list: f("md_build_list")?,
            forces: f("md_forces")?,
            forces_lj1: f("md_forces_lj1")?,
            wall_forces: f("md_wall_forces")?,
            chunk_energy: f("md_chunk_energy")?,
            chunk_kinetic: f("md_chunk_kinetic")?,
            chain_conformation: f("md_chain_conformation")?,
            slab_pack: f("md_slab_pack")?,
            slab_unpack: f("md_slab_unpack")?,
            slab_snapshot: f("md_slab_snapshot_velocities")?,
        };
        Ok((module, k))
    }
}

/// Per-particle device arrays, in the input particle order; vectors interleaved xyz as
/// `System::pos`.
pub(super) struct DeviceParticles {
    pub pos: CudaSlice<f64>,
    pub vel: CudaSlice<f64>,
    pub force: CudaSlice<f64>,
    pub image: CudaSlice<i32>,
    pub typ: CudaSlice<u32>,
    pub tag: CudaSlice<u32>,
    pub inv_mass: CudaSlice<f64>,
    /// Masses, for the MPC collision of device-resident solutes (uploaded once: they never
    /// change).
    pub mass: CudaSlice<f64>,
    /// Positions at the last list build (skin/2 criterion).
    pub built_at: CudaSlice<f64>,
}

/// `n` zeros (at least one element, so that empty systems allocate).
pub(super) fn zeros_f64(s: &Arc<CudaStream>, n: usize) -> Result<CudaSlice<f64>> {
    s.alloc_zeros::<f64>(n.max(1)).map_err(drv("alloc"))
}

fn flat<T: Copy>(v: &[[T; 3]]) -> Vec<T> {
    v.iter().flat_map(|a| a.iter().copied()).collect()
}

impl DeviceParticles {
    fn upload(s: &Arc<CudaStream>, sys: &System, inv_mass: &[f64]) -> Result<DeviceParticles> {
        let n = sys.len();
        Ok(DeviceParticles {
            pos: s.clone_htod(&flat(&sys.pos)).map_err(drv("upload"))?,
            vel: s.clone_htod(&flat(&sys.vel)).map_err(drv("upload"))?,
            image: s.clone_htod(&flat(&sys.image)).map_err(drv("upload"))?,
            typ: s.clone_htod(&sys.typ).map_err(drv("upload"))?,
            tag: s.clone_htod(&sys.tag).map_err(drv("upload"))?,
            inv_mass: s.clone_htod(inv_mass).map_err(drv("upload"))?,
            mass: s.clone_htod(&sys.masses()).map_err(drv("upload"))?,
            force: zeros_f64(s, 3 * n)?,
            built_at: zeros_f64(s, 3 * n)?,
        })
    }
}

/// Per-particle energy and virial terms of the last evaluation with energies (each pair and
/// bond from both sides; the host sums them over fixed chunks and halves).
pub(super) struct EnergyTerms {
    pub e_pair: CudaSlice<f64>,
    pub w_pair: CudaSlice<f64>,
    pub e_bond: CudaSlice<f64>,
    pub w_bond: CudaSlice<f64>,
    /// Per particle: the virial tensor (xx, yy, zz, xy, xz, yz) of all its pair and bond forces.
    pub w_tensor: CudaSlice<f64>,
    /// Wall energy per particle (`md_wall_forces`).
    pub e_wall: CudaSlice<f64>,
}

impl EnergyTerms {
    fn alloc(s: &Arc<CudaStream>, n: usize) -> Result<EnergyTerms> {
        Ok(EnergyTerms {
            e_pair: zeros_f64(s, n)?,
            w_pair: zeros_f64(s, n)?,
            e_bond: zeros_f64(s, n)?,
            w_bond: zeros_f64(s, n)?,
            w_tensor: zeros_f64(s, 6 * n)?,
            e_wall: zeros_f64(s, n)?,
        })
    }
}

impl GpuMd {
    /// Validate exactly as [`Md::new`] (by building the CPU engine's checks on a copy), open
    /// GPU `ordinal`, upload, build the list and compute the initial forces.
    pub fn new(
        sys: System,
        ff: ForceField,
        thermostat: MdThermostat,
        settings: MdSettings,
        ordinal: usize,
    ) -> Result<GpuMd> {
        GpuMd::validate(&sys, &ff, thermostat, &settings)?;
        GpuMd::open_validated(
            sys,
            ff,
            thermostat,
            settings,
            ordinal,
            super::SlabRole::WHOLE,
        )
    }

    /// The CPU engine's validation (and initial FENE check), on copies.
    pub(super) fn validate(
        sys: &System,
        ff: &ForceField,
        thermostat: MdThermostat,
        settings: &MdSettings,
    ) -> Result<()> {
        drop(Md::new(
            sys.clone(),
            ff.clone(),
            thermostat,
            settings.clone(),
        )?);
        Ok(())
    }

    /// [`GpuMd::new`] for inputs already validated, integrating the part `role` of the box (a
    /// slab of a decomposed engine, with its work list and start-of-step y, or the whole).
    pub(super) fn open_validated(
        mut sys: System,
        ff: ForceField,
        thermostat: MdThermostat,
        settings: MdSettings,
        ordinal: usize,
        role: super::SlabRole,
    ) -> Result<GpuMd> {
        if let Some(shear) = settings.shear {
            sys.lees_edwards = shear.lees_edwards_at(0, settings.dt, sys.box_len);
        }
        let dev = CudaDevice::open(ordinal)?;
        let (module, k) = MdKernels::load(&dev)?;
        let stream = engine_stream(&dev)?;
        let n = sys.len();
        let inv_mass_host: Vec<f64> = (0..n).map(|i| 1.0 / sys.mass(i)).collect();
        let parts = DeviceParticles::upload(&stream, &sys, &inv_mass_host)?;
        let energy = EnergyTerms::alloc(&stream, n)?;
        let flags = stream.alloc_zeros::<u32>(MD_NFLAGS).map_err(drv("alloc"))?;
        // SAFETY: uninitialised pinned host memory, read only after a device-to-host copy into
        // it that the host waited for (GpuMd::queued_flags waits for the event recorded after
        // the copy). Cached, not write-combined: the host reads it.
        let flags_host = unsafe { dev.context().alloc_pinned_with_flags::<u32>(MD_NFLAGS, 0) }
            .map_err(drv("pinned"))?;
        let flags_ready = stream.context().new_event(None).map_err(drv("event"))?;
        let p = Params::upload(&stream, &sys, &ff, thermostat)?;
        let cutoff = ff.cutoff_with(thermostat);
        let slab = role.is_slab();
        let lists = DeviceLists::alloc(
            &stream,
            &sys,
            cutoff,
            settings.skin,
            slab.then_some(role.band),
        )?;
        let list = || -> Result<super::WorkList> {
            let idx = stream.alloc_zeros::<u32>(n.max(1)).map_err(drv("alloc"))?;
            Ok(super::WorkList { idx, len: 0 })
        };
        let (y_prev, work, colliders) = if slab {
            (Some(zeros_f64(&stream, n)?), Some(list()?), Some(list()?))
        } else {
            (None, None, None)
        };
        let mut md = GpuMd {
            dev,
            stream,
            _module: module,
            k,
            sys,
            host_current: true,
            ff,
            thermostat,
            settings,
            step: 0,
            n,
            parts,
            inv_mass_host,
            flags,
            flags_host,
            flags_ready,
            lists,
            energy,
            p,
            report: ForceReport::default(),
            walls: None,
            reduce: Default::default(),
            role,
            y_prev,
            work,
            colliders,
            kick_owed: false,
            fused_sends: Default::default(),
            phase_seconds: None,
        };
        md.compute_forces()?;
        Ok(md)
    }
}
