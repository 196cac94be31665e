//! Building a GPU engine: [`GpuMd::new`] as named steps: the CPU engine's checks, the device
//! and its kernels, the particle arrays, the force-field tables (`params`) and the
//! neighbour-list buffers (`neighbor`), then the initial forces.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaModule, CudaSlice, CudaStream};

use super::integrate::{MdSends, MdShear};
use super::neighbor::DeviceLists;
use super::observe::MdUnwrapFrame;
use super::params::LjPairRepr;
use super::params::Params;
use super::WallParams;
use super::{drv, GpuMd, MD_NFLAGS};
use crate::backend::cuda::launch::kernel_table;
use crate::backend::cuda::{kernels, CudaDevice};
use crate::error::Result;
use crate::md::engine::{ForceReport, Md, MdSettings};
use crate::md::forcefield::{ForceField, MdThermostat};
use crate::md::system::System;

kernel_table! {
    /// The GPU MD engine's kernels (`kernels/md*.cu`), with their parameters (the typed
    /// launchers, and the list `tests` compare with the sources).
    pub(super) struct MdKernels;

    "md.cu" {
        first_half: "md_first_half"(
            n: Val<u32>, pos: Out<f64>, vel: Out<f64>, force: In<f64>, inv_mass: In<f64>,
            image: Out<i32>, tag: In<u32>, built_at: In<f64>, flags: Out<u32>, dt: Val<f64>,
            langevin: Val<i32>, c1: Val<f64>, c2: Val<f64>, kt: Val<f64>, lk0: Val<u32>,
            lk1: Val<u32>, step: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>,
            quarter_skin2: Val<f64>, skin: Val<f64>, le: Val<MdShear>, own_lo: Val<f64>,
            own_hi: Val<f64>, y_prev: Out<f64>, m: Val<u32>, work: In<u32>, kicks: Val<i32>,
            sends: Val<MdSends>,
        ),
        /// md_first_half without Langevin drift, shear, sends or y_prev (whatever is passed).
        first_half_plain: "md_first_half_plain"(
            n: Val<u32>, pos: Out<f64>, vel: Out<f64>, force: In<f64>, inv_mass: In<f64>,
            image: Out<i32>, tag: In<u32>, built_at: In<f64>, flags: Out<u32>, dt: Val<f64>,
            langevin: Val<i32>, c1: Val<f64>, c2: Val<f64>, kt: Val<f64>, lk0: Val<u32>,
            lk1: Val<u32>, step: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>,
            quarter_skin2: Val<f64>, skin: Val<f64>, le: Val<MdShear>, own_lo: Val<f64>,
            own_hi: Val<f64>, y_prev: Out<f64>, m: Val<u32>, work: In<u32>, kicks: Val<i32>,
            sends: Val<MdSends>,
        ),
        second_half: "md_second_half"(
            n: Val<u32>, vel: Out<f64>, force: In<f64>, inv_mass: In<f64>, dt: Val<f64>,
            pos: In<f64>, ly: Val<f64>, own_lo: Val<f64>, own_hi: Val<f64>, m: Val<u32>,
            work: In<u32>,
        ),
        cell_bin: "md_cell_bin"(
            n: Val<u32>, pos: In<f64>, count: Out<u32>, members: Out<u32>, cap: Val<u32>,
            dx: Val<u32>, dy: Val<u32>, dz: Val<u32>, cx: Val<f64>, cy: Val<f64>, cz: Val<f64>,
            flags: Out<u32>, ly: Val<f64>, band_lo: Val<f64>, band_hi: Val<f64>, row0: Val<u32>,
            rows: Val<u32>,
        ),
        cell_sort: "md_cell_sort"(
            ncells: Val<u32>, count: In<u32>, members: Out<u32>, cap: Val<u32>,
        ),
        build_list: "md_build_list"(
            n: Val<u32>, pos: In<f64>, count: In<u32>, members: In<u32>, cap: Val<u32>,
            dx: Val<u32>, dy: Val<u32>, dz: Val<u32>, cx: Val<f64>, cy: Val<f64>, cz: Val<f64>,
            lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, rl2: Val<f64>, all_pairs: Val<i32>,
            reach: Val<i32>, list: Out<u32>, nneigh: Out<u32>, max_neigh: Val<u32>,
            built_at: Out<f64>, flags: Out<u32>, off: Val<f64>, sheared: Val<i32>,
            cand_lo: Val<f64>, cand_hi: Val<f64>, row0: Val<u32>, rows: Val<u32>, work: Out<u32>,
            coll_lo: Val<f64>, coll_hi: Val<f64>, colliders: Out<u32>,
        ),
    }
    "md_forces.cu" {
        forces: "md_forces"(
            n: Val<u32>, pos: In<f64>, vel: In<f64>, typ: In<u32>, tag: In<u32>, list: In<u32>,
            nneigh: In<u32>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, le_off: Val<f64>,
            le_vel: Val<f64>, style: Val<i32>, ntypes: Val<u32>, lj: In<LjPairRepr>,
            dpd_a: In<f64>, dpd_gamma: Val<f64>, dpd_rc: Val<f64>, dpd_s: Val<f64>,
            dpd_noise: Val<f64>, th_on: Val<i32>, th_gamma: Val<f64>, th_rc: Val<f64>,
            th_s: Val<f64>, th_noise: Val<f64>, dk0: Val<u32>, dk1: Val<u32>, step: Val<u64>,
            bond_off: In<u32>, bond_j: In<u32>, bond_kind: In<u32>, bond_style: In<i32>,
            bond_k: In<f64>, bond_r0: In<f64>, force: Out<f64>, energy: Val<i32>, e_pair: Out<f64>,
            w_pair: Out<f64>, e_bond: Out<f64>, w_bond: Out<f64>, w_tensor: Out<f64>,
            flags: Out<u32>, own_lo: Val<f64>, own_hi: Val<f64>, bond_reach: Val<f64>, m: Val<u32>,
            work: In<u32>,
        ),
        /// One-type LJ without thermostat passes or bonds.
        forces_lj1: "md_forces_lj1"(
            n: Val<u32>, pos: In<f64>, vel: In<f64>, typ: In<u32>, tag: In<u32>, list: In<u32>,
            nneigh: In<u32>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, le_off: Val<f64>,
            le_vel: Val<f64>, style: Val<i32>, ntypes: Val<u32>, lj: In<LjPairRepr>,
            dpd_a: In<f64>, dpd_gamma: Val<f64>, dpd_rc: Val<f64>, dpd_s: Val<f64>,
            dpd_noise: Val<f64>, th_on: Val<i32>, th_gamma: Val<f64>, th_rc: Val<f64>,
            th_s: Val<f64>, th_noise: Val<f64>, dk0: Val<u32>, dk1: Val<u32>, step: Val<u64>,
            bond_off: In<u32>, bond_j: In<u32>, bond_kind: In<u32>, bond_style: In<i32>,
            bond_k: In<f64>, bond_r0: In<f64>, force: Out<f64>, energy: Val<i32>, e_pair: Out<f64>,
            w_pair: Out<f64>, e_bond: Out<f64>, w_bond: Out<f64>, w_tensor: Out<f64>,
            flags: Out<u32>, own_lo: Val<f64>, own_hi: Val<f64>, bond_reach: Val<f64>, m: Val<u32>,
            work: In<u32>,
        ),
        /// One-type LJ and bonds without thermostat passes, energies never computed.
        forces_lj1_bonds: "md_forces_lj1_bonds"(
            n: Val<u32>, pos: In<f64>, vel: In<f64>, typ: In<u32>, tag: In<u32>, list: In<u32>,
            nneigh: In<u32>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, le_off: Val<f64>,
            le_vel: Val<f64>, style: Val<i32>, ntypes: Val<u32>, lj: In<LjPairRepr>,
            dpd_a: In<f64>, dpd_gamma: Val<f64>, dpd_rc: Val<f64>, dpd_s: Val<f64>,
            dpd_noise: Val<f64>, th_on: Val<i32>, th_gamma: Val<f64>, th_rc: Val<f64>,
            th_s: Val<f64>, th_noise: Val<f64>, dk0: Val<u32>, dk1: Val<u32>, step: Val<u64>,
            bond_off: In<u32>, bond_j: In<u32>, bond_kind: In<u32>, bond_style: In<i32>,
            bond_k: In<f64>, bond_r0: In<f64>, force: Out<f64>, energy: Val<i32>, e_pair: Out<f64>,
            w_pair: Out<f64>, e_bond: Out<f64>, w_bond: Out<f64>, w_tensor: Out<f64>,
            flags: Out<u32>, own_lo: Val<f64>, own_hi: Val<f64>, bond_reach: Val<f64>, m: Val<u32>,
            work: In<u32>,
        ),
    }
    "md_walls.cu" {
        wall_forces: "md_wall_forces"(
            n: Val<u32>, pos: In<f64>, force: Out<f64>, w: Val<WallParams>, epsilon: Val<f64>,
            sigma: Val<f64>, cutoff: Val<f64>, energy: Val<i32>, e_wall: Out<f64>, tag: In<u32>,
            flags: Out<u32>, ly: Val<f64>, own_lo: Val<f64>, own_hi: Val<f64>, m: Val<u32>,
            work: In<u32>,
        ),
    }
    "md_observe.cu" {
        chunk_energy: "md_chunk_energy"(
            n: Val<u32>, chunk: Val<u32>, e_pair: In<f64>, e_bond: In<f64>, w_pair: In<f64>,
            w_bond: In<f64>, e_wall: In<f64>, w_tensor: In<f64>, out_: Out<f64>,
        ),
        chunk_kinetic: "md_chunk_kinetic"(
            n: Val<u32>, chunk: Val<u32>, pos: In<f64>, vel: In<f64>, mass: In<f64>,
            rate: Val<f64>, half_ly: Val<f64>, own_lo: Val<f64>, own_hi: Val<f64>, out_: Out<f64>,
        ),
        chain_conformation: "md_chain_conformation"(
            chains: Val<u32>, offsets: In<u32>, members: In<u32>, ends: In<u32>, pos: In<f64>,
            image: In<i32>, mass: In<f64>, frame: Val<MdUnwrapFrame>, out_: Out<f64>,
        ),
        chain_geometry: "md_chain_geometry"(
            chains: Val<u32>, offsets: In<u32>, members: In<u32>, pos: In<f64>, image: In<i32>,
            mass: In<f64>, frame: Val<MdUnwrapFrame>, out_: Out<f64>,
        ),
        chunk_ke_momentum: "md_chunk_ke_momentum"(
            n: Val<u32>, chunk: Val<u32>, vel: In<f64>, inv_mass: In<f64>, out_: Out<f64>,
        ),
        bond_max2: "md_bond_max2"(
            n: Val<u32>, pos: In<f64>, bond_off: In<u32>, bond_j: In<u32>, lx: Val<f64>,
            ly: Val<f64>, lz: Val<f64>, off: Val<f64>, out_: Out<f64>,
        ),
    }
    "md_slabs.cu" {
        slab_pack: "md_slab_pack"(
            n: Val<u32>, mode: Val<i32>, pos: In<f64>, vel: In<f64>, image: In<i32>,
            built_at: In<f64>, force: In<f64>, y_prev: In<f64>, vel_before: In<f64>, ly: Val<f64>,
            own_lo: Val<f64>, own_hi: Val<f64>, band_lo: Val<f64>, band_hi: Val<f64>,
            cap: Val<u32>, out_: Out<f64>, count: Out<u32>, m: Val<u32>, work: In<u32>,
        ),
        slab_unpack: "md_slab_unpack"(
            count: In<u32>, limit: Val<u32>, rec: In<f64>, pos: Out<f64>, vel: Out<f64>,
            image: Out<i32>, built_at: Out<f64>, force: Out<f64>,
        ),
        slab_snapshot: "md_slab_snapshot_velocities"(
            m: Val<u32>, work: In<u32>, vel: In<f64>, out_: Out<f64>,
        ),
    }
}

/// The engine's own stream: non-blocking (it does not wait for the fluid's work on the GPU's
/// default stream, nor the fluid for it; the coupling orders the two with events) and of the
/// highest priority, so that its short kernels are scheduled ahead of the blocks of the fluid's
/// long passes where the two share a GPU (the fluid streams towards the next collision while
/// the MD steps run: `Solvent::begin_fluid_step`).
fn engine_stream(dev: &CudaDevice) -> Result<Arc<CudaStream>> {
    let ctx = dev.context();
    ctx.bind_to_thread().map_err(drv("bind"))?;
    let (_, highest) =
        cudarc::driver::result::stream::get_priority_range().map_err(drv("stream priorities"))?;
    ctx.new_stream_with_priority(highest).map_err(drv("stream"))
}

impl MdKernels {
    /// Compile (or take from the cache) `kernels/md.cu` for `dev` and look up every kernel.
    fn compile(dev: &CudaDevice) -> Result<(Arc<CudaModule>, MdKernels)> {
        let module = crate::backend::cuda::load_module(dev.context(), kernels::md_cubin_for)?;
        let k = MdKernels::load(|name| crate::backend::cuda::kernel(&module, name))?;
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
        let (module, k) = MdKernels::compile(&dev)?;
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
        let multiprocessors = dev
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(drv("multiprocessor count"))?;
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
            multiprocessors: multiprocessors.max(1) as u32,
            item_blocks: 0,
            phase_seconds: None,
        };
        md.compute_forces()?;
        Ok(md)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every MD kernel's parameters in the table (what its typed launcher takes) are those its
    /// CUDA source declares, type for type.
    #[test]
    fn the_md_kernel_table_matches_the_kernels_signatures() {
        use crate::backend::cuda::launch::{check_table, cuda_signatures};
        let sources = cuda_signatures(&kernels::md_source());
        let table = MdKernels::signatures();
        let mut problems = check_table(&table, &sources);
        for (name, _) in &sources {
            if !table.iter().any(|(_, n, _)| n == name) {
                problems.push(format!("{name}: in the sources, not in the table"));
            }
        }
        assert!(
            problems.is_empty(),
            "the MD kernel table (md/gpu/setup.rs) and kernels/ disagree:\n{}\nfix: declare the \
             kernel's parameters in the table as the source does",
            problems.join("\n")
        );
    }
}
