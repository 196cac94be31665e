//! Forces on the GPU (the counterpart of `md::pair` and `md::bond`): one launch of
//! `md_forces` evaluates the pair style, the DPD thermostat and the bonds of each particle in
//! the order of the CPU engine; `md_forces_lj1` is the one-type LJ case without thermostat
//! or bonds, `md_forces_lj1_bonds` the same with bonds on steps without energies. With
//! energies, the per-particle terms come back and are summed over the CPU engine's fixed
//! chunks.

use cudarc::driver::{LaunchArgs, PushKernelArg};

use super::params::{Params, STYLE_LJ};
use super::{drv, grid, items, items_grid, push_items, GpuMd};
use crate::error::Result;
use crate::md::pair::dpd::noise_amplitude;
use crate::md::random::dpd_key;

/// The per-launch scalars of `md_forces`.
struct ForceScalars {
    n: u32,
    box_len: [f64; 3],
    /// Lees-Edwards image offset in (−Lx/2, Lx/2] and velocity jump (zeros without shear).
    le: [f64; 2],
    dpd_noise: f64,
    th_noise: f64,
    key: [u32; 2],
    step: u64,
    energy: i32,
}

/// `style .. step` of md_forces: the pair style, the DPD thermostat and the noise stream.
fn push_pair_params<'a>(b: &mut LaunchArgs<'a>, sc: &'a ForceScalars, p: &'a Params) {
    b.arg(&p.style)
        .arg(&p.ntypes)
        .arg(&p.lj)
        .arg(&p.dpd_a)
        .arg(&p.dpd.0)
        .arg(&p.dpd.1)
        .arg(&p.dpd.2)
        .arg(&sc.dpd_noise)
        .arg(&p.th_on)
        .arg(&p.th.0)
        .arg(&p.th.1)
        .arg(&p.th.2)
        .arg(&sc.th_noise)
        .arg(&sc.key[0])
        .arg(&sc.key[1])
        .arg(&sc.step);
}

/// `bond_off .. bond_r0` of md_forces.
fn push_bonds<'a>(b: &mut LaunchArgs<'a>, p: &'a Params) {
    b.arg(&p.bond_off)
        .arg(&p.bond_j)
        .arg(&p.bond_kind)
        .arg(&p.bond_style)
        .arg(&p.bond_k)
        .arg(&p.bond_r0);
}

impl GpuMd {
    fn force_scalars(&self, energy: bool) -> ForceScalars {
        let st = &self.settings;
        ForceScalars {
            n: self.n as u32,
            box_len: self.sys.box_len,
            le: [
                self.sys.periodic_box().image_offset(),
                self.sys.lees_edwards.velocity,
            ],
            dpd_noise: noise_amplitude(self.p.dpd.0, st.kt, st.dt),
            th_noise: noise_amplitude(self.p.th.0, st.kt, st.dt),
            key: dpd_key(st.seed),
            step: self.step,
            energy: energy as i32,
        }
    }

    /// Launch the force kernel (no list maintenance); energies when `energy`, their report
    /// read before returning.
    pub(super) fn launch_forces(&mut self, energy: bool) -> Result<()> {
        self.queue_forces(energy)?;
        self.take_energy_report()
    }

    /// Launch the force kernel (no list maintenance); energies when `energy`, their report
    /// queued for [`GpuMd::take_energy_report`].
    pub(super) fn queue_forces(&mut self, energy: bool) -> Result<()> {
        let sc = self.force_scalars(energy);
        let s = self.stream.clone();
        let p = &self.p;
        // the kernels compiled for fewer terms keep fewer registers (kernels/md_forces.cu)
        let one_type_lj = p.style == STYLE_LJ && p.ntypes == 1 && p.th_on == 0;
        let kernel = match (one_type_lj, self.sys.bonds.is_empty(), energy) {
            (true, true, _) => &self.k.forces_lj1,
            (true, false, false) => &self.k.forces_lj1_bonds,
            _ => &self.k.forces,
        };
        let (d, l, e) = (&mut self.parts, &self.lists, &mut self.energy);
        let mut b = s.launch_builder(kernel);
        b.arg(&sc.n).arg(&d.pos).arg(&d.vel).arg(&d.typ).arg(&d.tag);
        l.push_list(&mut b);
        b.arg(&sc.box_len[0])
            .arg(&sc.box_len[1])
            .arg(&sc.box_len[2])
            .arg(&sc.le[0])
            .arg(&sc.le[1]);
        push_pair_params(&mut b, &sc, p);
        push_bonds(&mut b, p);
        b.arg(&mut d.force)
            .arg(&sc.energy)
            .arg(&mut e.e_pair)
            .arg(&mut e.w_pair)
            .arg(&mut e.e_bond)
            .arg(&mut e.w_bond)
            .arg(&mut e.w_tensor)
            .arg(&mut self.flags)
            .arg(&self.role.own[0])
            .arg(&self.role.own[1])
            .arg(&self.role.bond_reach);
        // a slab's steps without energies: its work list; with energies every particle, so
        // that the terms of those it does not own are zero
        push_items(&mut b, self.work.as_ref(), !energy, &sc.n);
        let m = items(self.work.as_ref(), !energy, self.n);
        // SAFETY: the arguments are MD_FORCES_PARAMS of kernels/md.cu in order and type (the
        // three force kernels take them; m, work: m indices < n, or null for all n).
        // Per-particle buffers hold n (or 3n) elements;
        // `list` holds max_neigh · n indices < n and `nneigh[i]` ≤ max_neigh (md_build_list caps
        // it); the LJ table and `dpd_a` hold ntypes² entries (a single dummy when unused, and
        // then not read) and every type is < ntypes (checked by Md::new); the bond CSR has n + 1
        // offsets and its kinds index the style arrays (bond types checked by Md::new, + 1 for
        // the dummy); `w_tensor` holds 6n f64. The kernel's threads take the items below m
        // and write only their particles' outputs.
        unsafe { b.launch(items_grid(m, self.item_blocks)) }.map_err(drv("md_forces"))?;
        self.launch_wall_forces(energy)?;
        if energy {
            self.queue_energy_report()?;
        }
        Ok(())
    }

    /// `md_wall_forces` after the pair and bond forces (between walls only).
    fn launch_wall_forces(&mut self, energy: bool) -> Result<()> {
        let Some((w, wp)) = self.walls.clone() else {
            return Ok(());
        };
        let (n, e) = (self.n as u32, energy as i32);
        let s = self.stream.clone();
        let d = &mut self.parts;
        let mut b = s.launch_builder(&self.k.wall_forces);
        b.arg(&n)
            .arg(&d.pos)
            .arg(&mut d.force)
            .arg(&wp)
            .arg(&w.epsilon)
            .arg(&w.sigma)
            .arg(&w.cutoff)
            .arg(&e)
            .arg(&mut self.energy.e_wall)
            .arg(&d.tag)
            .arg(&mut self.flags)
            .arg(&self.sys.box_len[1])
            .arg(&self.role.own[0])
            .arg(&self.role.own[1]);
        push_items(&mut b, self.work.as_ref(), !energy, &n);
        let m = items(self.work.as_ref(), !energy, self.n);
        // SAFETY: md_wall_forces(n, pos, force, MpcWalls, epsilon, sigma, cutoff, energy,
        // e_wall, tag, flags, ly, own_lo, own_hi, m, work) in order and type (WallParams
        // mirrors MpcWalls; work: m indices < n, or null for all n); `pos` and `force` hold 3n
        // f64, `e_wall` and `tag` n, `flags` MD_NFLAGS words; the kernel returns for threads ≥ m
        // and writes only its particle's entries (and the flag words).
        unsafe { b.launch(grid(m)) }.map_err(drv("md_wall_forces"))?;
        Ok(())
    }

    /// Rebuild the list if needed, then all forces with energies; checks broken bonds.
    pub fn compute_forces(&mut self) -> Result<()> {
        if self.lists.builds == 0 {
            self.build_list()?;
        }
        self.launch_forces(true)?;
        let f = self.read_flags()?;
        self.check_flags(&f)
    }
}
