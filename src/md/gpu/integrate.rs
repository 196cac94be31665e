//! Time steps on the GPU (the counterpart of `md::integrate`): `md_first_half` (kick, drift,
//! or drift + O + drift for BAOAB Langevin, wrap, and the skin/2 displacement check), the list
//! rebuild when some particle moved too far (under shear: relative to the imposed flow), the
//! forces, `md_second_half` (kick). Within a run of steps the closing kick is folded into the
//! next step's `md_first_half` (same values, one pass over the particles fewer per step); the
//! last step of a run closes with `md_second_half`, so velocities are whole steps' between
//! runs.

use std::time::Instant;

use cudarc::driver::{DeviceRepr, PushKernelArg};

use super::{drv, grid, items, push_items, GpuMd, MD_FLAG_REBUILD};
pub(super) use crate::backend::cuda::contract::MD_FUSED_SENDS;
use crate::error::Result;
use crate::md::forcefield::MdThermostat;
use crate::md::integrate::ou_coefficients;
use crate::md::random::langevin_key;

/// `struct MdShear` of kernels/md_boundary.cuh: the Lees-Edwards state of a step.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MdShear {
    offset: f64,
    velocity: f64,
    mi_offset: f64,
    /// δ at the last list build.
    built_offset: f64,
    /// The strain γ̇ τ since the last list build (`ShearFlow::strain_since`).
    strain: f64,
    /// |γ̇ τ| r_cut, the most the strain tilts a pair within the cutoff; infinite once the
    /// offset has moved half a box length since the build (rebuild).
    strain_slack: f64,
    periods: i64,
    sheared: i32,
    pad: i32,
}

// SAFETY: plain-old-data (six f64, an i64, two i32: 64 bytes without implicit padding,
// checked below) with the C layout of `MdShear`, which md_first_half takes by value.
unsafe impl DeviceRepr for MdShear {}

impl crate::backend::cuda::launch::CudaType for MdShear {
    const NAME: &'static str = "MdShear";
}

const _: () = assert!(std::mem::size_of::<MdShear>() == 64);

/// `struct MdSends` of kernels/md_items.cuh: the drift's exchange packed by `md_first_half`
/// (a decomposed engine's neighbour links of one sender, at most [`MD_FUSED_SENDS`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MdSends {
    pub(super) links: u32,
    pad: u32,
    pub(super) band_lo: [f64; MD_FUSED_SENDS],
    pub(super) band_hi: [f64; MD_FUSED_SENDS],
    /// Records each send buffer holds.
    pub(super) cap: [u32; MD_FUSED_SENDS],
    /// Device addresses of the count words (zero when the kernel starts).
    pub(super) count: [u64; MD_FUSED_SENDS],
    /// Device addresses of the send buffers.
    pub(super) out: [u64; MD_FUSED_SENDS],
}

// SAFETY: plain-old-data with the C layout of `MdSends` (two u32, eight f64, four u32, eight
// u64: 152 bytes, each field at its natural alignment without implicit padding, checked below),
// which md_first_half takes by value; the addresses are only dereferenced by the kernel, for
// the links the host filled in.
unsafe impl DeviceRepr for MdSends {}

impl crate::backend::cuda::launch::CudaType for MdSends {
    const NAME: &'static str = "MdSends";
}

const _: () = assert!(std::mem::size_of::<MdSends>() == 152);

/// The scalar arguments of `md_first_half`.
struct HalfStep {
    n: u32,
    dt: f64,
    /// 1 for BAOAB Langevin.
    langevin: i32,
    /// O-step coefficients (see `ou_coefficients`); 1 and 0 without Langevin.
    c1: f64,
    c2: f64,
    kt: f64,
    key: [u32; 2],
    /// The step count before the increment (as the CPU's O step).
    step: u64,
    box_len: [f64; 3],
    /// (skin/2)²: the rebuild threshold of the displacement since the last build.
    quarter_skin2: f64,
    skin: f64,
    shear: MdShear,
}

impl GpuMd {
    fn half_step(&mut self) -> HalfStep {
        let st = &self.settings;
        let (langevin, c1, c2) = match self.thermostat {
            MdThermostat::Langevin { damping } => {
                let (c1, c2) = ou_coefficients(damping, st.dt);
                (1i32, c1, c2)
            }
            _ => (0i32, 1.0, 0.0),
        };
        HalfStep {
            n: self.n as u32,
            dt: st.dt,
            langevin,
            c1,
            c2,
            kt: st.kt,
            key: langevin_key(st.seed),
            step: self.step,
            box_len: self.sys.box_len,
            quarter_skin2: 0.25 * st.skin * st.skin,
            skin: st.skin,
            shear: self.shear_args(),
        }
    }

    /// The Lees-Edwards state at the end of this step's drift (the host copy's
    /// `lees_edwards` is moved on to it), as `Md::step` takes it.
    fn shear_args(&mut self) -> MdShear {
        let Some(shear) = self.settings.shear else {
            return MdShear::default();
        };
        let le = shear.lees_edwards_at(self.step + 1, self.settings.dt, self.sys.box_len);
        self.sys.lees_edwards = le;
        let bx = self.sys.periodic_box();
        let built_offset = self.lists.built_offset;
        let strain = shear.strain_since(le.offset, built_offset, self.sys.box_len);
        MdShear {
            offset: le.offset,
            velocity: le.velocity,
            mi_offset: bx.image_offset(),
            built_offset,
            strain: strain.unwrap_or(0.0),
            strain_slack: strain.map_or(f64::INFINITY, |s| s.abs() * self.cutoff()),
            periods: le.periods,
            sheared: 1,
            pad: 0,
        }
    }

    /// `md_first_half`: everything of a step before the forces.
    pub(super) fn launch_first_half(&mut self) -> Result<()> {
        let h = self.half_step();
        let s = self.stream.clone();
        let d = &mut self.parts;
        let own = self.role.own;
        let no_y_prev = 0u64;
        // without Langevin drift, shear, sends or y_prev: the kernel compiled without them,
        // which keeps fewer registers
        let plain = h.langevin == 0
            && h.shear.sheared == 0
            && self.fused_sends.links == 0
            && self.y_prev.is_none();
        let kernel = match plain {
            true => &self.k.first_half_plain,
            false => &self.k.first_half,
        };
        let mut b = s.launch_builder(kernel);
        b.arg(&h.n)
            .arg(&mut d.pos)
            .arg(&mut d.vel)
            .arg(&d.force)
            .arg(&d.inv_mass)
            .arg(&mut d.image)
            .arg(&d.tag)
            .arg(&d.built_at)
            .arg(&mut self.flags)
            .arg(&h.dt)
            .arg(&h.langevin)
            .arg(&h.c1)
            .arg(&h.c2)
            .arg(&h.kt)
            .arg(&h.key[0])
            .arg(&h.key[1])
            .arg(&h.step)
            .arg(&h.box_len[0])
            .arg(&h.box_len[1])
            .arg(&h.box_len[2])
            .arg(&h.quarter_skin2)
            .arg(&h.skin)
            .arg(&h.shear)
            .arg(&own[0])
            .arg(&own[1]);
        match self.y_prev.as_mut() {
            Some(y) => b.arg(y),
            None => b.arg(&no_y_prev),
        };
        push_items(&mut b, self.work.as_ref(), true, &h.n);
        let m = items(self.work.as_ref(), true, self.n);
        let kicks = 1 + i32::from(self.kick_owed);
        let sends = std::mem::take(&mut self.fused_sends);
        b.arg(&kicks).arg(&sends);
        // SAFETY: md_first_half's parameters (md_first_half_plain's too, which reads neither
        // y_prev nor sends) in order and type (n, pos, vel, force, inv_mass,
        // image, tag, built_at, flags, dt, langevin, c1, c2, kt, lk0, lk1, step, lx, ly, lz,
        // quarter_skin2, skin, MdShear by value, own_lo, own_hi, y_prev: n f64 or null, which
        // the kernel tests, m, work: m indices < n or null for all n, kicks, MdSends by value);
        // the vector buffers hold 3n elements, `inv_mass` and `tag` n, `flags` MD_NFLAGS words;
        // the kernel returns for threads ≥ m and touches only its particle's entries, and
        // writes a record to a link of `sends` only below that link's capacity, in a send
        // buffer of this GPU that the host sized for it (`Link::fuse_into`), counting in a
        // count word of this slab's flags.
        unsafe { b.launch(grid(m)) }.map_err(drv("md_first_half"))?;
        self.kick_owed = false;
        Ok(())
    }

    /// The end of a step: its closing kick, or, when `fold` (another step follows at once),
    /// the kick owed to the next step's `md_first_half`, which applies both in one pass.
    pub(super) fn close_step(&mut self, fold: bool) -> Result<()> {
        if fold {
            self.kick_owed = true;
            Ok(())
        } else {
            self.launch_second_half()
        }
    }

    /// The kick owed by [`GpuMd::close_step`] applied now (after a run of steps that stopped
    /// early on an error), so that the velocities are whole steps' again.
    pub(super) fn settle_kick(&mut self) -> Result<()> {
        if self.kick_owed {
            self.kick_owed = false;
            self.launch_second_half()?;
        }
        Ok(())
    }

    /// `md_second_half`: the closing kick with the new forces.
    pub(super) fn launch_second_half(&mut self) -> Result<()> {
        let (n, dt) = (self.n as u32, self.settings.dt);
        let (ly, own) = (self.sys.box_len[1], self.role.own);
        let s = self.stream.clone();
        let d = &mut self.parts;
        let mut b = s.launch_builder(&self.k.second_half);
        b.arg(&n)
            .arg(&mut d.vel)
            .arg(&d.force)
            .arg(&d.inv_mass)
            .arg(&dt)
            .arg(&d.pos)
            .arg(&ly)
            .arg(&own[0])
            .arg(&own[1]);
        push_items(&mut b, self.work.as_ref(), true, &n);
        let m = items(self.work.as_ref(), true, self.n);
        // SAFETY: md_second_half's parameters in order and type (n, vel, force, inv_mass, dt,
        // pos, ly, own_lo, own_hi, m, work: m indices < n or null for all n); `vel`, `force` and
        // `pos` hold 3n f64 and `inv_mass` n; the kernel returns for threads ≥ m.
        unsafe { b.launch(grid(m)) }.map_err(drv("md_second_half"))?;
        Ok(())
    }

    /// One step; `fold`: another follows at once (its first half takes this one's last kick).
    fn step_inner(&mut self, energy: bool, fold: bool) -> Result<()> {
        let mut t = Instant::now();
        self.launch_first_half()?;
        self.host_current = false;
        self.step += 1;
        self.mark(0, &mut t)?;
        let f = self.read_flags()?;
        self.check_flags(&f)?;
        self.mark(1, &mut t)?;
        if f[MD_FLAG_REBUILD] != 0 {
            self.build_list()?;
            self.mark(2, &mut t)?;
        }
        self.launch_forces(energy)?;
        self.mark(3, &mut t)?;
        self.close_step(fold)?;
        self.mark(4, &mut t)
    }

    /// Time each phase of the step from now on (`on`), or stop; the times start from zero.
    pub fn set_profiling(&mut self, on: bool) {
        self.phase_seconds = on.then_some([0.0; 5]);
    }

    /// The seconds per phase ([`MD_PHASE_NAMES`](super::MD_PHASE_NAMES)) since profiling was
    /// switched on.
    pub fn phase_seconds(&self) -> Option<[f64; 5]> {
        self.phase_seconds
    }

    /// Profiling: wait for the GPU and add the time since `t` to `phase`.
    fn mark(&mut self, phase: usize, t: &mut Instant) -> Result<()> {
        if self.phase_seconds.is_some() {
            self.synchronize()?;
            if let Some(p) = self.phase_seconds.as_mut() {
                p[phase] += t.elapsed().as_secs_f64();
            }
            *t = Instant::now();
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
        let mut run = Ok(());
        for k in 0..n {
            run = self.step_inner(energy_at_end && k + 1 == n, k + 1 < n);
            if run.is_err() {
                break;
            }
        }
        self.settle_kick()?;
        run?;
        let f = self.read_flags()?;
        self.check_flags(&f)
    }

    /// Broken bonds, beads on walls, bonds beyond a slab's halo.
    pub(super) fn check_flags(&self, f: &[u32]) -> Result<()> {
        self.check_bonds_intact(f)?;
        self.check_walls(f)?;
        self.check_halo(f)
    }
}
