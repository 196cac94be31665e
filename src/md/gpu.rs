//! The MD engine on a CUDA GPU ([`GpuMd`]): the same forces and integrators as [`Md`] (LJ / WCA,
//! DPD pair style and DPD thermostat with the same Philox pair noise, harmonic and FENE bonds,
//! velocity Verlet and BAOAB Langevin), in f64, with kernels from `kernels/md.cu` compiled by
//! NVRTC with `--fmad=false`.
//!
//! Every per-pair and per-particle expression rounds exactly as in [`Md`]; a particle sums its
//! neighbours in the order of the GPU list (cells in order, members sorted by index), which
//! differs from the CPU list order, so forces agree with the CPU engine to rounding. The cell
//! members are sorted after binning, so a GPU run is deterministic run to run.
//!
//! Particles stay in their input order on the GPU (no Morton reordering). Positions and
//! velocities live on the device; [`GpuMd::system`] downloads them on demand and
//! [`GpuMd::set_velocities`] uploads velocities changed from outside (MPC coupling).

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig,
    PushKernelArg,
};

use super::engine::{ForceReport, Md, MdSettings};
use super::forcefield::{dpd_key, BondStyle, ForceField, MdThermostat, PairStyle};
use super::neighbor::{CellList, CHUNK};
use super::system::System;
use crate::backend::cuda::{kernels, CudaDevice};
use crate::backend::DeviceSolutes;
use crate::error::{ConfigError, MpcError, Result};
use crate::rng::{philox_key, splitmix64};

/// Which engine runs the MD of a run config (`md.backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum MdBackend {
    /// The GPU engine when a CUDA GPU is usable, else the CPU engine.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl MdBackend {
    /// Whether a GPU engine should be used: `Cuda` fails with a clear error when no GPU is
    /// usable; `Auto` falls back to the CPU.
    pub fn use_gpu(self) -> Result<bool> {
        match self {
            MdBackend::Cpu => Ok(false),
            MdBackend::Auto => Ok(crate::backend::cuda::probe().is_ok()),
            MdBackend::Cuda => match crate::backend::cuda::probe() {
                Ok(_) => Ok(true),
                Err(why) => Err(MpcError::Config(ConfigError {
                    field: "md.backend".into(),
                    problem: format!("Cuda was requested but no CUDA GPU is usable: {why}"),
                    fix: "use md.backend: Auto (falls back to the CPU) or Cpu".into(),
                })),
            },
        }
    }
}

/// Threads per block.
const BLOCK: u32 = 128;

const FLAG_REBUILD: usize = 0;
const FLAG_CELL_MAX: usize = 1;
const FLAG_NEIGH_MAX: usize = 2;
const FLAG_BROKEN: usize = 3;
const NFLAGS: usize = 8;

fn drv(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> MpcError + '_ {
    move |e| MpcError::Device(format!("CUDA {what} failed (MD engine): {e:?}"))
}

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LjPairRepr {
    lj1: f64,
    lj2: f64,
    lj3: f64,
    lj4: f64,
    rc2: f64,
    shift: f64,
}

unsafe impl DeviceRepr for LjPairRepr {}

struct MdKernels {
    first_half: CudaFunction,
    second_half: CudaFunction,
    cell_bin: CudaFunction,
    cell_sort: CudaFunction,
    build_list: CudaFunction,
    forces: CudaFunction,
    /// One-type LJ without thermostat passes or bonds.
    forces_lj1: CudaFunction,
}

/// Static description of the interactions, uploaded once.
struct Params {
    style: i32,
    ntypes: u32,
    lj: CudaSlice<LjPairRepr>,
    dpd_a: CudaSlice<f64>,
    dpd: (f64, f64, f64),
    th_on: i32,
    th: (f64, f64, f64),
    bond_off: CudaSlice<u32>,
    bond_j: CudaSlice<u32>,
    bond_kind: CudaSlice<u32>,
    bond_style: CudaSlice<i32>,
    bond_k: CudaSlice<f64>,
    bond_r0: CudaSlice<f64>,
}

/// The MD engine on one CUDA GPU. Same step API as [`Md`].
pub struct GpuMd {
    dev: CudaDevice,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    k: MdKernels,
    /// Host copy of the system; positions, velocities and images are current only after
    /// [`GpuMd::system`].
    sys: System,
    host_current: bool,
    pub ff: ForceField,
    pub thermostat: MdThermostat,
    settings: MdSettings,
    step: u64,
    n: usize,
    pos: CudaSlice<f64>,
    vel: CudaSlice<f64>,
    force: CudaSlice<f64>,
    image: CudaSlice<i32>,
    typ: CudaSlice<u32>,
    tag: CudaSlice<u32>,
    inv_mass: CudaSlice<f64>,
    inv_mass_host: Vec<f64>,
    /// Masses on the device, for the MPC collision of device-resident solutes (uploaded once:
    /// they never change).
    mass: CudaSlice<f64>,
    built_at: CudaSlice<f64>,
    flags: CudaSlice<u32>,
    cell_count: CudaSlice<u32>,
    cell_members: CudaSlice<u32>,
    cell_cap: usize,
    list: CudaSlice<u32>,
    nneigh: CudaSlice<u32>,
    max_neigh: usize,
    e_pair: CudaSlice<f64>,
    w_pair: CudaSlice<f64>,
    e_bond: CudaSlice<f64>,
    w_bond: CudaSlice<f64>,
    p: Params,
    /// Cells per dimension of the list build, or None for all pairs.
    dims: Option<[usize; 3]>,
    /// Stencil reach in cells (1: 3³ cells, 2: 5³ cells).
    reach: i32,
    builds: u64,
    report: ForceReport,
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
        // The CPU engine's validation (and initial FENE check).
        drop(Md::new(
            sys.clone(),
            ff.clone(),
            thermostat,
            settings.clone(),
        )?);
        let dev = CudaDevice::open(ordinal)?;
        let ctx = dev.context().clone();
        let stream = dev.stream().clone();
        let module = crate::backend::cuda::load_module(&ctx, kernels::md_cubin_for)?;
        let f = |name: &str| crate::backend::cuda::kernel(&module, name);
        let k = MdKernels {
            first_half: f("md_first_half")?,
            second_half: f("md_second_half")?,
            cell_bin: f("md_cell_bin")?,
            cell_sort: f("md_cell_sort")?,
            build_list: f("md_build_list")?,
            forces: f("md_forces")?,
            forces_lj1: f("md_forces_lj1")?,
        };
        let n = sys.len();
        let s = &stream;
        let flat =
            |v: &[[f64; 3]]| -> Vec<f64> { v.iter().flat_map(|a| a.iter().copied()).collect() };
        let up_f64 = |v: &[f64]| s.clone_htod(v).map_err(drv("upload"));
        let up_u32 = |v: &[u32]| s.clone_htod(v).map_err(drv("upload"));
        let pos = up_f64(&flat(&sys.pos))?;
        let vel = up_f64(&flat(&sys.vel))?;
        let imgs: Vec<i32> = sys.image.iter().flat_map(|a| a.iter().copied()).collect();
        let image = s.clone_htod(&imgs).map_err(drv("upload"))?;
        let typ = up_u32(&sys.typ)?;
        let tag = up_u32(&sys.tag)?;
        let inv_mass_host: Vec<f64> = (0..n).map(|i| 1.0 / sys.mass(i)).collect();
        let inv_mass = up_f64(&inv_mass_host)?;
        let mass = up_f64(&sys.masses())?;
        let zeros = |m: usize| s.alloc_zeros::<f64>(m.max(1)).map_err(drv("alloc"));
        let force = zeros(3 * n)?;
        let built_at = zeros(3 * n)?;
        let (e_pair, w_pair, e_bond, w_bond) = (zeros(n)?, zeros(n)?, zeros(n)?, zeros(n)?);
        let flags = s.alloc_zeros::<u32>(NFLAGS).map_err(drv("alloc"))?;

        // interactions
        let (style, ntypes, lj_host, dpd_a_host, dpd) = match &ff.pair {
            PairStyle::None => (
                0,
                1u32,
                vec![LjPairRepr::default()],
                vec![0.0],
                (0.0, 1.0, 1.0),
            ),
            PairStyle::Lj(t) => (
                1,
                t.n as u32,
                t.pairs
                    .iter()
                    .map(|p| LjPairRepr {
                        lj1: p.lj1,
                        lj2: p.lj2,
                        lj3: p.lj3,
                        lj4: p.lj4,
                        rc2: p.rc2,
                        shift: p.shift,
                    })
                    .collect(),
                vec![0.0],
                (0.0, 1.0, 1.0),
            ),
            PairStyle::Dpd(d) => (
                2,
                d.n as u32,
                vec![LjPairRepr::default()],
                d.a.clone(),
                (d.gamma, d.cutoff, d.exponent),
            ),
        };
        let (th_on, th) = match thermostat {
            MdThermostat::Dpd {
                gamma,
                cutoff,
                exponent,
            } => (1, (gamma, cutoff, exponent)),
            _ => (0, (0.0, 1.0, 1.0)),
        };
        // bond adjacency: as Md::refresh_per_particle (partners sorted per particle)
        let mut index_of = std::collections::HashMap::with_capacity(n);
        for (i, &t) in sys.tag.iter().enumerate() {
            index_of.insert(t, i as u32);
        }
        let mut off = vec![0u32; n + 1];
        for b in &sys.bonds {
            off[index_of[&b.a] as usize + 1] += 1;
            off[index_of[&b.b] as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill: Vec<u32> = off.clone();
        let mut partner = vec![(0u32, 0u32); off[n] as usize];
        for b in &sys.bonds {
            let (ia, ib) = (index_of[&b.a] as usize, index_of[&b.b] as usize);
            partner[fill[ia] as usize] = (ib as u32, b.kind);
            fill[ia] += 1;
            partner[fill[ib] as usize] = (ia as u32, b.kind);
            fill[ib] += 1;
        }
        for i in 0..n {
            partner[off[i] as usize..off[i + 1] as usize].sort_unstable();
        }
        let bj: Vec<u32> = partner.iter().map(|p| p.0).chain([0]).collect();
        let bk: Vec<u32> = partner.iter().map(|p| p.1).chain([0]).collect();
        let mut bstyle = vec![0i32];
        let mut bkk = vec![0.0];
        let mut br0 = vec![0.0];
        for b in &ff.bond_styles {
            let (st, kk, r0) = match *b {
                BondStyle::Harmonic { k, r0 } => (0, k, r0),
                BondStyle::Fene { k, r0 } => (1, k, r0),
            };
            bstyle.push(st);
            bkk.push(kk);
            br0.push(r0);
        }
        // index 0 of the style arrays is a dummy so that empty style lists upload; shift kinds
        let bk: Vec<u32> = bk.iter().map(|&x| x + 1).collect();
        let p = Params {
            style,
            ntypes,
            lj: s.clone_htod(&lj_host).map_err(drv("upload"))?,
            dpd_a: up_f64(&dpd_a_host)?,
            dpd,
            th_on,
            th,
            bond_off: up_u32(&off)?,
            bond_j: up_u32(&bj)?,
            bond_kind: up_u32(&bk)?,
            bond_style: s.clone_htod(&bstyle).map_err(drv("upload"))?,
            bond_k: up_f64(&bkk)?,
            bond_r0: up_f64(&br0)?,
        };

        let cutoff = match thermostat {
            MdThermostat::Dpd { cutoff, .. } => ff.pair.cutoff().max(cutoff),
            _ => ff.pair.cutoff(),
        };
        let r_list = cutoff + settings.skin;
        // cells of r_list/2 with a 5³ stencil (fewer candidates), else of r_list with 3³,
        // else all pairs
        let (dims, reach) = if cutoff > 0.0 {
            match CellList::dims_for_list(sys.box_len, r_list) {
                Some(d) => (Some(d), 2),
                None => (CellList::dims_for(sys.box_len, r_list), 1),
            }
        } else {
            (None, 1)
        };
        let ncells = dims.map(|d| d[0] * d[1] * d[2]).unwrap_or(1);
        let rho = n as f64 / sys.volume();
        let cell_cap = match dims {
            Some(d) => {
                let v =
                    sys.box_len[0] * sys.box_len[1] * sys.box_len[2] / (d[0] * d[1] * d[2]) as f64;
                ((rho * v * 2.0) as usize + 16).next_power_of_two()
            }
            None => 1,
        };
        let max_neigh = if cutoff > 0.0 {
            let v = 4.0 / 3.0 * std::f64::consts::PI * r_list.powi(3);
            ((rho * v * 1.5) as usize + 32).min(n.max(1))
        } else {
            1
        };
        let cell_count = s.alloc_zeros::<u32>(ncells).map_err(drv("alloc"))?;
        let cell_members = s
            .alloc_zeros::<u32>(ncells * cell_cap)
            .map_err(drv("alloc"))?;
        let list = s
            .alloc_zeros::<u32>((max_neigh * n).max(1))
            .map_err(drv("alloc"))?;
        let nneigh = s.alloc_zeros::<u32>(n.max(1)).map_err(drv("alloc"))?;
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
            pos,
            vel,
            force,
            image,
            typ,
            tag,
            inv_mass,
            inv_mass_host,
            mass,
            built_at,
            flags,
            cell_count,
            cell_members,
            cell_cap,
            list,
            nneigh,
            max_neigh,
            e_pair,
            w_pair,
            e_bond,
            w_bond,
            p,
            dims,
            reach,
            builds: 0,
            report: ForceReport::default(),
        };
        md.compute_forces()?;
        Ok(md)
    }

    /// A short description of the device.
    pub fn describe(&self) -> String {
        self.dev.describe()
    }

    pub fn settings(&self) -> &MdSettings {
        &self.settings
    }

    pub fn step_count(&self) -> u64 {
        self.step
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Number of neighbour list builds so far.
    pub fn list_builds(&self) -> u64 {
        self.builds
    }

    pub fn cutoff(&self) -> f64 {
        match self.thermostat {
            MdThermostat::Dpd { cutoff, .. } => self.ff.pair.cutoff().max(cutoff),
            _ => self.ff.pair.cutoff(),
        }
    }

    pub fn report(&self) -> ForceReport {
        self.report
    }

    pub fn potential_energy(&self) -> f64 {
        self.report.potential_energy()
    }

    /// The system with current positions, velocities and images (downloaded when stale).
    pub fn system(&mut self) -> Result<&System> {
        if !self.host_current {
            let s = &self.stream;
            let pos = s.clone_dtoh(&self.pos).map_err(drv("download"))?;
            let vel = s.clone_dtoh(&self.vel).map_err(drv("download"))?;
            let img = s.clone_dtoh(&self.image).map_err(drv("download"))?;
            for i in 0..self.n {
                for k in 0..3 {
                    self.sys.pos[i][k] = pos[3 * i + k];
                    self.sys.vel[i][k] = vel[3 * i + k];
                    self.sys.image[i][k] = img[3 * i + k];
                }
            }
            self.host_current = true;
        }
        Ok(&self.sys)
    }

    /// Replace the velocities (e.g. after an MPC collision) and recompute velocity-dependent
    /// forces (DPD).
    pub fn set_velocities(&mut self, vel: &[[f64; 3]]) -> Result<()> {
        assert_eq!(vel.len(), self.n, "one velocity per particle");
        self.system()?;
        self.sys.vel.copy_from_slice(vel);
        let flat: Vec<f64> = vel.iter().flat_map(|a| a.iter().copied()).collect();
        self.stream
            .memcpy_htod(&flat, &mut self.vel)
            .map_err(drv("upload"))?;
        self.velocities_changed()
    }

    /// Forces of the current configuration (downloaded), in the input particle order.
    pub fn forces(&self) -> Result<Vec<[f64; 3]>> {
        let f = self
            .stream
            .clone_dtoh(&self.force)
            .map_err(drv("download"))?;
        Ok((0..self.n)
            .map(|i| [f[3 * i], f[3 * i + 1], f[3 * i + 2]])
            .collect())
    }

    fn velocities_host(&mut self) -> Result<Vec<[f64; 3]>> {
        Ok(self.system()?.vel.clone())
    }

    /// Kinetic energy (velocities downloaded; same chunked sum as [`Md::kinetic_energy`]).
    pub fn kinetic_energy(&mut self) -> Result<f64> {
        let v = self.velocities_host()?;
        let im = &self.inv_mass_host;
        let mut total = 0.0;
        for c in 0..v.len().div_ceil(CHUNK) {
            let mut s = 0.0;
            for i in c * CHUNK..((c + 1) * CHUNK).min(v.len()) {
                let u = v[i];
                s += 0.5 / im[i] * (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
            }
            total += s;
        }
        Ok(total)
    }

    pub fn total_energy(&mut self) -> Result<f64> {
        Ok(self.kinetic_energy()? + self.potential_energy())
    }

    /// Kinetic temperature with 3N − 3 degrees of freedom.
    pub fn temperature(&mut self) -> Result<f64> {
        let dof = (3 * self.n).saturating_sub(3).max(1) as f64;
        Ok(2.0 * self.kinetic_energy()? / dof)
    }

    /// Virial pressure (2 KE + W) / (3V), conservative forces only.
    pub fn pressure(&mut self) -> Result<f64> {
        Ok((2.0 * self.kinetic_energy()? + self.report.virial) / (3.0 * self.sys.volume()))
    }

    /// Total momentum Σ m v (chunked as [`Md::momentum`]).
    pub fn momentum(&mut self) -> Result<[f64; 3]> {
        let v = self.velocities_host()?;
        let im = &self.inv_mass_host;
        let mut out = [0.0; 3];
        for c in 0..v.len().div_ceil(CHUNK) {
            let mut p = [0.0; 3];
            for i in c * CHUNK..((c + 1) * CHUNK).min(v.len()) {
                let m = 1.0 / im[i];
                for k in 0..3 {
                    p[k] += m * v[i][k];
                }
            }
            for k in 0..3 {
                out[k] += p[k];
            }
        }
        Ok(out)
    }

    fn read_flags(&self) -> Result<Vec<u32>> {
        self.stream.clone_dtoh(&self.flags).map_err(drv("download"))
    }

    fn broken_error(&self, f: &[u32]) -> MpcError {
        let (a, b) = (f[FLAG_BROKEN + 1], f[FLAG_BROKEN + 2]);
        MpcError::Config(ConfigError {
            field: "md.bonds".into(),
            problem: format!(
                "FENE bond {}-{} is stretched at or beyond R0, at MD step {} (GPU engine)",
                a.min(b),
                a.max(b),
                self.step
            ),
            fix: "use a smaller MD time step (raise md.steps_per_collision), a softer start, or \
                  a larger R0"
                .into(),
        })
    }

    /// Build the neighbour list (growing the cell capacity / list width until it fits).
    fn build_list(&mut self) -> Result<()> {
        let n = self.n as u32;
        let l = self.sys.box_len;
        let r_list = self.cutoff() + self.settings.skin;
        let rl2 = r_list * r_list;
        loop {
            let zero = vec![0u32; NFLAGS];
            self.stream
                .memcpy_htod(&zero, &mut self.flags)
                .map_err(drv("upload"))?;
            let (d, all_pairs) = match self.dims {
                Some(d) => (d, 0i32),
                None => ([1, 1, 1], 1i32),
            };
            let (dx, dy, dz) = (d[0] as u32, d[1] as u32, d[2] as u32);
            let (cx, cy, cz) = (l[0] / d[0] as f64, l[1] / d[1] as f64, l[2] / d[2] as f64);
            let cap = self.cell_cap as u32;
            let ncells = d[0] * d[1] * d[2];
            let s = self.stream.clone();
            if all_pairs == 0 {
                s.memset_zeros(&mut self.cell_count)
                    .map_err(drv("memset"))?;
                unsafe {
                    s.launch_builder(&self.k.cell_bin)
                        .arg(&n)
                        .arg(&self.pos)
                        .arg(&mut self.cell_count)
                        .arg(&mut self.cell_members)
                        .arg(&cap)
                        .arg(&dx)
                        .arg(&dy)
                        .arg(&dz)
                        .arg(&cx)
                        .arg(&cy)
                        .arg(&cz)
                        .arg(&mut self.flags)
                        .launch(grid(self.n))
                        .map_err(drv("md_cell_bin"))?;
                }
                let f = self.read_flags()?;
                if f[FLAG_CELL_MAX] as usize > self.cell_cap {
                    self.cell_cap = (f[FLAG_CELL_MAX] as usize).next_power_of_two();
                    self.cell_members = s
                        .alloc_zeros::<u32>(ncells * self.cell_cap)
                        .map_err(drv("alloc"))?;
                    continue;
                }
                let nc = ncells as u32;
                unsafe {
                    s.launch_builder(&self.k.cell_sort)
                        .arg(&nc)
                        .arg(&self.cell_count)
                        .arg(&mut self.cell_members)
                        .arg(&cap)
                        .launch(grid(ncells))
                        .map_err(drv("md_cell_sort"))?;
                }
            }
            let mn = self.max_neigh as u32;
            unsafe {
                s.launch_builder(&self.k.build_list)
                    .arg(&n)
                    .arg(&self.pos)
                    .arg(&self.cell_count)
                    .arg(&self.cell_members)
                    .arg(&cap)
                    .arg(&dx)
                    .arg(&dy)
                    .arg(&dz)
                    .arg(&cx)
                    .arg(&cy)
                    .arg(&cz)
                    .arg(&l[0])
                    .arg(&l[1])
                    .arg(&l[2])
                    .arg(&rl2)
                    .arg(&all_pairs)
                    .arg(&self.reach)
                    .arg(&mut self.list)
                    .arg(&mut self.nneigh)
                    .arg(&mn)
                    .arg(&mut self.built_at)
                    .arg(&mut self.flags)
                    .launch(grid(self.n))
                    .map_err(drv("md_build_list"))?;
            }
            let f = self.read_flags()?;
            if f[FLAG_NEIGH_MAX] as usize > self.max_neigh {
                self.max_neigh = f[FLAG_NEIGH_MAX] as usize + 16;
                self.list = s
                    .alloc_zeros::<u32>(self.max_neigh * self.n)
                    .map_err(drv("alloc"))?;
                continue;
            }
            self.builds += 1;
            return Ok(());
        }
    }

    /// Launch the force kernel (no list maintenance); energies when `energy`.
    fn launch_forces(&mut self, energy: bool) -> Result<()> {
        let st = &self.settings;
        let n = self.n as u32;
        let l = self.sys.box_len;
        let noise = |gamma: f64| (2.0 * gamma * st.kt).sqrt() / st.dt.sqrt();
        let dpd_noise = noise(self.p.dpd.0);
        let th_noise = noise(self.p.th.0);
        let key = dpd_key(st.seed);
        let en = energy as i32;
        let step = self.step;
        let s = self.stream.clone();
        let p = &self.p;
        let fast = p.style == 1 && p.ntypes == 1 && p.th_on == 0 && self.sys.bonds.is_empty();
        let kernel = if fast {
            &self.k.forces_lj1
        } else {
            &self.k.forces
        };
        unsafe {
            s.launch_builder(kernel)
                .arg(&n)
                .arg(&self.pos)
                .arg(&self.vel)
                .arg(&self.typ)
                .arg(&self.tag)
                .arg(&self.list)
                .arg(&self.nneigh)
                .arg(&l[0])
                .arg(&l[1])
                .arg(&l[2])
                .arg(&p.style)
                .arg(&p.ntypes)
                .arg(&p.lj)
                .arg(&p.dpd_a)
                .arg(&p.dpd.0)
                .arg(&p.dpd.1)
                .arg(&p.dpd.2)
                .arg(&dpd_noise)
                .arg(&p.th_on)
                .arg(&p.th.0)
                .arg(&p.th.1)
                .arg(&p.th.2)
                .arg(&th_noise)
                .arg(&key[0])
                .arg(&key[1])
                .arg(&step)
                .arg(&p.bond_off)
                .arg(&p.bond_j)
                .arg(&p.bond_kind)
                .arg(&p.bond_style)
                .arg(&p.bond_k)
                .arg(&p.bond_r0)
                .arg(&mut self.force)
                .arg(&en)
                .arg(&mut self.e_pair)
                .arg(&mut self.w_pair)
                .arg(&mut self.e_bond)
                .arg(&mut self.w_bond)
                .arg(&mut self.flags)
                .launch(grid(self.n))
                .map_err(drv("md_forces"))?;
        }
        if energy {
            let sum = |d: &CudaSlice<f64>| -> Result<f64> {
                let v = s.clone_dtoh(d).map_err(drv("download"))?;
                Ok(v[..self.n]
                    .chunks(CHUNK)
                    .map(|c| c.iter().sum::<f64>())
                    .sum::<f64>())
            };
            self.report = ForceReport {
                pair_energy: 0.5 * sum(&self.e_pair)?,
                bond_energy: 0.5 * sum(&self.e_bond)?,
                virial: 0.5 * sum(&self.w_pair)? + 0.5 * sum(&self.w_bond)?,
            };
        }
        Ok(())
    }

    /// Rebuild the list if needed, then all forces with energies; checks broken bonds.
    pub fn compute_forces(&mut self) -> Result<()> {
        if self.builds == 0 {
            self.build_list()?;
        }
        self.launch_forces(true)?;
        let f = self.read_flags()?;
        if f[FLAG_BROKEN] != 0 {
            return Err(self.broken_error(&f));
        }
        Ok(())
    }

    fn step_inner(&mut self, energy: bool) -> Result<()> {
        let st = &self.settings;
        let dt = st.dt;
        let (langevin, c1, c2) = match self.thermostat {
            MdThermostat::Langevin { damping } => {
                let c1 = (-damping * dt).exp();
                (1i32, c1, (1.0 - c1 * c1).max(0.0))
            }
            _ => (0i32, 1.0, 0.0),
        };
        const LANGEVIN_SALT: u64 = 0x4c41_4e47_4556_494e;
        let lk = philox_key(splitmix64(st.seed ^ LANGEVIN_SALT));
        let kt = st.kt;
        let q = 0.25 * st.skin * st.skin;
        let l = self.sys.box_len;
        let n = self.n as u32;
        let step = self.step;
        let s = self.stream.clone();
        unsafe {
            s.launch_builder(&self.k.first_half)
                .arg(&n)
                .arg(&mut self.pos)
                .arg(&mut self.vel)
                .arg(&self.force)
                .arg(&self.inv_mass)
                .arg(&mut self.image)
                .arg(&self.tag)
                .arg(&self.built_at)
                .arg(&mut self.flags)
                .arg(&dt)
                .arg(&langevin)
                .arg(&c1)
                .arg(&c2)
                .arg(&kt)
                .arg(&lk[0])
                .arg(&lk[1])
                .arg(&step)
                .arg(&l[0])
                .arg(&l[1])
                .arg(&l[2])
                .arg(&q)
                .launch(grid(self.n))
                .map_err(drv("md_first_half"))?;
        }
        self.host_current = false;
        self.step += 1;
        let f = self.read_flags()?;
        if f[FLAG_BROKEN] != 0 {
            return Err(self.broken_error(&f));
        }
        if f[FLAG_REBUILD] != 0 {
            self.build_list()?;
        }
        self.launch_forces(energy)?;
        unsafe {
            s.launch_builder(&self.k.second_half)
                .arg(&n)
                .arg(&mut self.vel)
                .arg(&self.force)
                .arg(&self.inv_mass)
                .arg(&dt)
                .launch(grid(self.n))
                .map_err(drv("md_second_half"))?;
        }
        Ok(())
    }

    /// One MD step: velocity Verlet, or BAOAB with the Langevin thermostat.
    pub fn step(&mut self) -> Result<()> {
        self.run(1)
    }

    /// `n` MD steps; energy and virial are evaluated on the last one.
    pub fn run(&mut self, n: u64) -> Result<()> {
        self.run_steps(n, true)
    }

    /// `n` MD steps without evaluating energy and virial (their per-particle terms would come
    /// back to the host): the coupled loop's steps between observations.
    pub fn advance(&mut self, n: u64) -> Result<()> {
        self.run_steps(n, false)
    }

    fn run_steps(&mut self, n: u64, energy_at_end: bool) -> Result<()> {
        for k in 0..n {
            self.step_inner(energy_at_end && k + 1 == n)?;
        }
        let f = self.read_flags()?;
        if f[FLAG_BROKEN] != 0 {
            return Err(self.broken_error(&f));
        }
        Ok(())
    }

    /// Recompute forces after velocities changed (DPD); a no-op otherwise.
    pub fn velocities_changed(&mut self) -> Result<()> {
        let velocity_dependent = matches!(self.ff.pair, PairStyle::Dpd(_))
            || matches!(self.thermostat, MdThermostat::Dpd { .. });
        if velocity_dependent {
            self.compute_forces()?;
        }
        Ok(())
    }

    /// The GPU this engine runs on.
    pub fn ordinal(&self) -> usize {
        self.dev.context().ordinal()
    }

    /// The particles as device-resident solutes of an MPC collision on the same GPU
    /// ([`crate::Solvent::step_with_device_solutes`]): positions, velocities and masses stay
    /// where they are, ordered on this engine's stream. The collision overwrites the
    /// velocities, so the host copy is marked stale; call [`GpuMd::velocities_changed`] after
    /// the collision (velocity-dependent forces).
    pub fn device_solutes(&mut self) -> DeviceSolutes {
        self.host_current = false;
        let addr = |b: &CudaSlice<f64>| {
            let (ptr, _sync) = b.device_ptr(&self.stream);
            ptr
        };
        DeviceSolutes {
            pos: addr(&self.pos),
            vel: addr(&self.vel),
            mass: addr(&self.mass),
            n: self.n,
            stream: self.stream.cu_stream() as u64,
        }
    }

    /// Wait for the GPU.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv("sync"))
    }
}
