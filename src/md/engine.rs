//! The MD engine: forces (pair, DPD thermostat, bonds) over full neighbour lists or all pairs,
//! velocity Verlet (BAOAB when a Langevin thermostat is on), list maintenance and Morton
//! reordering. Everything is f64.
//!
//! Determinism: each particle sums its own force over its own neighbours in list order (pairs
//! are computed twice, once from each side, with exactly antisymmetric arithmetic), energies and
//! virials are reduced over fixed chunks of [`CHUNK`] particles and added in chunk order, and
//! random numbers are addressed by (tags, step). A run is therefore bitwise identical for any
//! number of threads.

use std::sync::Arc;

use rayon::prelude::*;

use super::forcefield::{
    dpd_key, dpd_theta, langevin_normals, BondEval, DpdParams, ForceField, LjTable, MdThermostat,
    PairStyle,
};
use super::neighbor::{
    min_image, morton_order, prefer_all_pairs, CellList, NeighborMode, VerletList, CHUNK,
};
use super::system::System;
use crate::error::{ConfigError, MpcError, Result};

/// Run parameters of the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct MdSettings {
    pub dt: f64,
    /// kT of thermostats (Langevin, DPD).
    pub kt: f64,
    pub seed: u64,
    /// Verlet skin: lists hold pairs within cutoff + skin and are rebuilt when some particle
    /// has moved more than skin/2 since the last build.
    pub skin: f64,
    pub neighbor: NeighborMode,
    /// Reorder particles along the Morton curve every this many list builds (0: never).
    pub reorder_every: u64,
    /// Worker threads (0: all cores).
    pub threads: usize,
}

impl Default for MdSettings {
    fn default() -> Self {
        MdSettings {
            dt: 0.005,
            kt: 1.0,
            seed: 1,
            skin: 0.3,
            neighbor: NeighborMode::Auto,
            reorder_every: 20,
            threads: 0,
        }
    }
}

/// Sums of the last force evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForceReport {
    pub pair_energy: f64,
    pub bond_energy: f64,
    /// Σ over pairs and bonds of r_ij · F_ij (conservative forces only).
    pub virial: f64,
}

impl ForceReport {
    pub fn potential_energy(&self) -> f64 {
        self.pair_energy + self.bond_energy
    }
}

pub struct Md {
    pub sys: System,
    pub ff: ForceField,
    pub thermostat: MdThermostat,
    settings: MdSettings,
    step: u64,
    force: Vec<[f64; 3]>,
    inv_mass: Vec<f64>,
    cells: CellList,
    verlet: VerletList,
    use_list: bool,
    /// Bonded partners of each particle (index, bond type), CSR.
    bond_offset: Vec<usize>,
    bond_partner: Vec<(u32, u32)>,
    report: ForceReport,
    pool: Arc<rayon::ThreadPool>,
}

fn cfg_err(field: &str, problem: String, fix: &str) -> MpcError {
    MpcError::Config(ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    })
}

/// Neighbours of particle i: a list slice, or every other particle.
#[derive(Clone, Copy)]
enum Neigh<'a> {
    List(&'a VerletList),
    All(usize),
}

/// A pair interaction evaluated from particle i's side: `begin` loads what i needs once,
/// `pair` adds the force of neighbour j on i into `acc` and returns (energy, virial) of the pair.
trait PairKernel: Sync {
    type I: Copy;
    fn begin(&self, i: usize) -> Self::I;
    fn pair(&self, i: &Self::I, j: usize, acc: &mut [f64; 3]) -> (f64, f64);
}

/// Run `kernel` over every neighbour j of every i, adding into `force`; returns half the summed
/// energy and virial (every pair is seen twice) when `ENERGY`, else zeros (the energy and
/// virial arithmetic is then compiled out, as on MD steps without output).
fn pair_pass<K: PairKernel, const ENERGY: bool>(
    force: &mut [[f64; 3]],
    neigh: Neigh<'_>,
    kernel: &K,
) -> (f64, f64) {
    let parts: Vec<(f64, f64)> = force
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, fchunk)| {
            let mut e = 0.0;
            let mut w = 0.0;
            for (k, fi) in fchunk.iter_mut().enumerate() {
                let i = c * CHUNK + k;
                let st = kernel.begin(i);
                let mut acc = [0.0; 3];
                match neigh {
                    Neigh::List(v) => {
                        let ch = &v.chunks[c];
                        let nb = &ch.list[ch.offset[k] as usize..ch.offset[k + 1] as usize];
                        for &j in nb {
                            let (de, dw) = kernel.pair(&st, j as usize, &mut acc);
                            if ENERGY {
                                e += de;
                                w += dw;
                            }
                        }
                    }
                    Neigh::All(n) => {
                        for j in 0..n {
                            if j != i {
                                let (de, dw) = kernel.pair(&st, j, &mut acc);
                                if ENERGY {
                                    e += de;
                                    w += dw;
                                }
                            }
                        }
                    }
                }
                fi[0] += acc[0];
                fi[1] += acc[1];
                fi[2] += acc[2];
            }
            (e, w)
        })
        .collect();
    let (e, w) = parts.iter().fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    (0.5 * e, 0.5 * w)
}

#[inline(always)]
fn separation(a: [f64; 3], b: [f64; 3], l: [f64; 3], h: [f64; 3]) -> [f64; 3] {
    [
        min_image(a[0] - b[0], l[0], h[0]),
        min_image(a[1] - b[1], l[1], h[1]),
        min_image(a[2] - b[2], l[2], h[2]),
    ]
}

/// LJ over a type table; `SINGLE` skips the type lookup for one-type systems.
struct LjKernel<'a, const SINGLE: bool> {
    pos: &'a [[f64; 3]],
    typ: &'a [u32],
    table: &'a LjTable,
    l: [f64; 3],
    h: [f64; 3],
}

impl<const SINGLE: bool> PairKernel for LjKernel<'_, SINGLE> {
    type I = ([f64; 3], usize);

    #[inline(always)]
    fn begin(&self, i: usize) -> Self::I {
        let row = if SINGLE {
            0
        } else {
            self.typ[i] as usize * self.table.n
        };
        (self.pos[i], row)
    }

    #[inline(always)]
    fn pair(&self, st: &Self::I, j: usize, acc: &mut [f64; 3]) -> (f64, f64) {
        let d = separation(st.0, self.pos[j], self.l, self.h);
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let p = if SINGLE {
            &self.table.pairs[0]
        } else {
            &self.table.pairs[st.1 + self.typ[j] as usize]
        };
        // branch-free: most list entries are inside rc, the rest are masked out
        let inside = if r2 < p.rc2 { 1.0 } else { 0.0 };
        let (fr, e) = p.eval(r2);
        let fr = fr * inside;
        acc[0] += fr * d[0];
        acc[1] += fr * d[1];
        acc[2] += fr * d[2];
        (e * inside, fr * r2)
    }
}

fn lj_pass(
    force: &mut [[f64; 3]],
    neigh: Neigh<'_>,
    sys: &System,
    table: &LjTable,
    energy: bool,
) -> (f64, f64) {
    let l = sys.box_len;
    let h = [l[0] / 2.0, l[1] / 2.0, l[2] / 2.0];
    if table.n == 1 {
        let k = LjKernel::<true> {
            pos: &sys.pos,
            typ: &sys.typ,
            table,
            l,
            h,
        };
        if energy {
            pair_pass::<_, true>(force, neigh, &k)
        } else {
            pair_pass::<_, false>(force, neigh, &k)
        }
    } else {
        let k = LjKernel::<false> {
            pos: &sys.pos,
            typ: &sys.typ,
            table,
            l,
            h,
        };
        if energy {
            pair_pass::<_, true>(force, neigh, &k)
        } else {
            pair_pass::<_, false>(force, neigh, &k)
        }
    }
}

/// DPD pair forces; `conservative` false is the thermostat-only variant (no a_ij term).
struct DpdKernel<'a> {
    sys: &'a System,
    p: &'a DpdParams,
    conservative: bool,
    l: [f64; 3],
    h: [f64; 3],
    noise: f64,
    key: [u32; 2],
    step: u64,
}

impl PairKernel for DpdKernel<'_> {
    type I = usize;

    #[inline(always)]
    fn begin(&self, i: usize) -> usize {
        i
    }

    #[inline(always)]
    fn pair(&self, &i: &usize, j: usize, acc: &mut [f64; 3]) -> (f64, f64) {
        let (sys, p) = (self.sys, self.p);
        let d = separation(sys.pos[i], sys.pos[j], self.l, self.h);
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let rc = p.cutoff;
        if r2 >= rc * rc || r2 == 0.0 {
            return (0.0, 0.0);
        }
        let r = r2.sqrt();
        let wc = 1.0 - r / rc;
        let wr = p.weight_r(r);
        let (vi, vj) = (sys.vel[i], sys.vel[j]);
        // (e · v_ij) r
        let erv = d[0] * (vi[0] - vj[0]) + d[1] * (vi[1] - vj[1]) + d[2] * (vi[2] - vj[2]);
        let theta = dpd_theta(self.key, sys.tag[i], sys.tag[j], self.step);
        let mut f = -p.gamma * wr * wr * erv / r + self.noise * wr * theta;
        let (mut e, mut w) = (0.0, 0.0);
        if self.conservative {
            let a = p.a[sys.typ[i] as usize * p.n + sys.typ[j] as usize];
            f += a * wc;
            e = 0.5 * a * rc * wc * wc;
            w = a * wc * r;
        }
        let fr = f / r;
        acc[0] += fr * d[0];
        acc[1] += fr * d[1];
        acc[2] += fr * d[2];
        (e, w)
    }
}

#[allow(clippy::too_many_arguments)]
fn dpd_pass(
    force: &mut [[f64; 3]],
    neigh: Neigh<'_>,
    sys: &System,
    p: &DpdParams,
    conservative: bool,
    kt: f64,
    dt: f64,
    seed: u64,
    step: u64,
) -> (f64, f64) {
    let l = sys.box_len;
    let k = DpdKernel {
        sys,
        p,
        conservative,
        l,
        h: [l[0] / 2.0, l[1] / 2.0, l[2] / 2.0],
        noise: (2.0 * p.gamma * kt).sqrt() / dt.sqrt(),
        key: dpd_key(seed),
        step,
    };
    pair_pass::<_, true>(force, neigh, &k)
}

impl Md {
    /// Validate the system and force field, build lists and compute the initial forces.
    pub fn new(
        sys: System,
        ff: ForceField,
        thermostat: MdThermostat,
        settings: MdSettings,
    ) -> Result<Md> {
        sys.validate()?;
        let s = &settings;
        if !(s.dt.is_finite() && s.dt > 0.0) {
            return Err(cfg_err(
                "md.dt",
                format!("must be finite and > 0 (got {})", s.dt),
                "set an MD time step such as 0.005 (or raise md.steps_per_collision)",
            ));
        }
        if !(s.kt.is_finite() && s.kt > 0.0) {
            return Err(cfg_err(
                "kT",
                format!("must be finite and > 0 (got {})", s.kt),
                "set a positive thermal energy such as 1.0",
            ));
        }
        if !(s.skin.is_finite() && s.skin >= 0.0) {
            return Err(cfg_err(
                "md.skin",
                format!("must be finite and ≥ 0 (got {})", s.skin),
                "use a Verlet skin such as 0.3",
            ));
        }
        match &ff.pair {
            PairStyle::Lj(t) if t.n < sys.n_types() => {
                return Err(cfg_err(
                    "md.pair",
                    format!(
                        "LJ coefficients for {} type(s), the system has {}",
                        t.n,
                        sys.n_types()
                    ),
                    "give coefficients for every type pair",
                ))
            }
            PairStyle::Dpd(d) => {
                if d.n < sys.n_types() {
                    return Err(cfg_err(
                        "md.pair",
                        format!(
                            "DPD a_ij for {} type(s), the system has {}",
                            d.n,
                            sys.n_types()
                        ),
                        "give a_ij for every type pair",
                    ));
                }
                check_dpd(d.gamma, d.cutoff, d.exponent, "md.pair.Dpd")?;
                if d.a.iter().any(|a| !a.is_finite()) {
                    return Err(cfg_err(
                        "md.pair.Dpd.a",
                        "a_ij must be finite".into(),
                        "give finite conservative amplitudes such as 25.0",
                    ));
                }
            }
            _ => {}
        }
        match thermostat {
            MdThermostat::Langevin { damping } => {
                if !(damping.is_finite() && damping >= 0.0) {
                    return Err(cfg_err(
                        "md.thermostat.Langevin.damping",
                        format!("must be finite and ≥ 0 (got {damping})"),
                        "give a friction rate such as 1.0 (1/time)",
                    ));
                }
            }
            MdThermostat::Dpd {
                gamma,
                cutoff,
                exponent,
            } => check_dpd(gamma, cutoff, exponent, "md.thermostat.Dpd")?,
            MdThermostat::None => {}
        }
        for (k, b) in ff.bond_styles.iter().enumerate() {
            b.validate(k)?;
        }
        for b in &sys.bonds {
            if b.kind as usize >= ff.bond_styles.len() {
                return Err(cfg_err(
                    "Bonds",
                    format!(
                        "bond {}-{} has bond type {} but {} bond style(s) are defined",
                        b.a,
                        b.b,
                        b.kind + 1,
                        ff.bond_styles.len()
                    ),
                    "define a style for every bond type in md.bonds",
                ));
            }
        }
        let cutoff = Self::cutoff_of(&ff, thermostat);
        for (k, &l) in sys.box_len.iter().enumerate() {
            if l < 2.0 * cutoff {
                return Err(cfg_err(
                    "md box",
                    format!("box edge {k} = {l} is shorter than twice the pair cutoff {cutoff}"),
                    "use a larger box or a shorter cutoff",
                ));
            }
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(settings.threads)
            .build()
            .map_err(|e| MpcError::Device(format!("thread pool: {e}")))?;
        let n = sys.len();
        let mut md = Md {
            inv_mass: Vec::new(),
            force: vec![[0.0; 3]; n],
            sys,
            ff,
            thermostat,
            settings,
            step: 0,
            cells: CellList::default(),
            verlet: VerletList::default(),
            use_list: false,
            bond_offset: Vec::new(),
            bond_partner: Vec::new(),
            report: ForceReport::default(),
            pool: Arc::new(pool),
        };
        md.use_list = md.choose_list();
        md.refresh_per_particle();
        md.compute_forces()
            .map_err(|e| match e {
                MpcError::Config(mut c) if c.field == "md.bonds" => {
                    c.field = "Bonds".into();
                    c.fix = "start FENE bonds shorter than R0 (md.bonds r0), e.g. place bonded beads about 0.97 σ apart".into();
                    MpcError::Config(c)
                }
                other => other,
            })?;
        Ok(md)
    }

    fn cutoff_of(ff: &ForceField, th: MdThermostat) -> f64 {
        let mut rc = ff.pair.cutoff();
        if let MdThermostat::Dpd { cutoff, .. } = th {
            rc = rc.max(cutoff);
        }
        rc
    }

    /// The largest pair cutoff (pair style and DPD thermostat).
    pub fn cutoff(&self) -> f64 {
        Self::cutoff_of(&self.ff, self.thermostat)
    }

    fn choose_list(&self) -> bool {
        let rc = self.cutoff();
        if rc == 0.0 {
            return false;
        }
        let r_list = rc + self.settings.skin;
        let fits = CellList::dims_for_list(self.sys.box_len, r_list).is_some();
        match self.settings.neighbor {
            NeighborMode::AllPairs => false,
            NeighborMode::Verlet => fits,
            NeighborMode::Auto => {
                let rho = self.sys.len() as f64 / self.sys.volume();
                fits && !prefer_all_pairs(self.sys.len(), rho, r_list)
            }
        }
    }

    /// Whether forces come from cell + Verlet lists (false: all pairs).
    pub fn uses_verlet_list(&self) -> bool {
        self.use_list
    }

    pub fn settings(&self) -> &MdSettings {
        &self.settings
    }

    pub fn step_count(&self) -> u64 {
        self.step
    }

    /// Number of Verlet list builds so far.
    pub fn list_builds(&self) -> u64 {
        self.verlet.builds
    }

    /// Forces of the current configuration, in the current particle order.
    pub fn forces(&self) -> &[[f64; 3]] {
        &self.force
    }

    pub fn report(&self) -> ForceReport {
        self.report
    }

    pub fn potential_energy(&self) -> f64 {
        self.report.potential_energy()
    }

    pub fn kinetic_energy(&self) -> f64 {
        let v = &self.sys.vel;
        let im = &self.inv_mass;
        let parts: Vec<f64> = self.pool.install(|| {
            (0..v.len().div_ceil(CHUNK))
                .into_par_iter()
                .map(|c| {
                    let mut s = 0.0;
                    for i in c * CHUNK..((c + 1) * CHUNK).min(v.len()) {
                        let u = v[i];
                        s += 0.5 / im[i] * (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
                    }
                    s
                })
                .collect()
        });
        parts.iter().sum()
    }

    pub fn total_energy(&self) -> f64 {
        self.kinetic_energy() + self.potential_energy()
    }

    /// Kinetic temperature with 3N − 3 degrees of freedom.
    pub fn temperature(&self) -> f64 {
        let dof = (3 * self.sys.len()).saturating_sub(3).max(1) as f64;
        2.0 * self.kinetic_energy() / dof
    }

    /// Virial pressure (2 KE + W) / (3V), conservative forces only.
    pub fn pressure(&self) -> f64 {
        (2.0 * self.kinetic_energy() + self.report.virial) / (3.0 * self.sys.volume())
    }

    /// Per-particle masses and inverse masses, bond adjacency (after any reordering).
    fn refresh_per_particle(&mut self) {
        let sys = &self.sys;
        self.inv_mass = (0..sys.len()).map(|i| 1.0 / sys.mass(i)).collect();
        let mut index_of = std::collections::HashMap::with_capacity(sys.len());
        for (i, &t) in sys.tag.iter().enumerate() {
            index_of.insert(t, i as u32);
        }
        let mut count = vec![0usize; sys.len() + 1];
        for b in &sys.bonds {
            count[index_of[&b.a] as usize + 1] += 1;
            count[index_of[&b.b] as usize + 1] += 1;
        }
        for i in 0..sys.len() {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        self.bond_partner = vec![(0, 0); count[sys.len()]];
        for b in &sys.bonds {
            let (ia, ib) = (index_of[&b.a], index_of[&b.b]);
            self.bond_partner[fill[ia as usize]] = (ib, b.kind);
            fill[ia as usize] += 1;
            self.bond_partner[fill[ib as usize]] = (ia, b.kind);
            fill[ib as usize] += 1;
        }
        // fixed order of partners, independent of the bond list order
        for i in 0..sys.len() {
            self.bond_partner[count[i]..count[i + 1]].sort_unstable();
        }
        self.bond_offset = count;
    }

    /// Permute every per-particle array: new particle k is old particle perm[k].
    fn permute(&mut self, perm: &[u32]) {
        fn apply<T: Copy + Send + Sync>(v: &mut Vec<T>, perm: &[u32]) {
            let out: Vec<T> = perm.par_iter().map(|&i| v[i as usize]).collect();
            *v = out;
        }
        let s = &mut self.sys;
        apply(&mut s.pos, perm);
        apply(&mut s.vel, perm);
        apply(&mut s.image, perm);
        apply(&mut s.typ, perm);
        apply(&mut s.tag, perm);
        apply(&mut s.mol, perm);
        apply(&mut self.force, perm);
        self.refresh_per_particle();
    }

    /// Rebuild the Verlet list when needed, reordering along the Morton curve every
    /// `reorder_every` builds.
    fn update_neighbors(&mut self) {
        if !self.use_list {
            return;
        }
        let skin = self.settings.skin;
        let l = self.sys.box_len;
        let need = self.verlet.builds == 0
            || self.verlet.max_displacement2(&self.sys.pos, l) > 0.25 * skin * skin;
        if !need {
            return;
        }
        let k = self.settings.reorder_every;
        if k > 0 && self.verlet.builds % k == 0 {
            let perm = morton_order(&self.sys.pos, l);
            self.permute(&perm);
        }
        let r_list = self.cutoff() + skin;
        let dims =
            CellList::dims_for_list(l, r_list).expect("checked when the list mode was chosen");
        self.cells.build(&self.sys.pos, l, dims);
        self.verlet.build(&self.sys.pos, l, &self.cells, r_list);
    }

    /// All forces at the current positions (and velocities, for DPD) and step.
    pub fn compute_forces(&mut self) -> Result<()> {
        let pool = self.pool.clone();
        pool.install(|| self.compute_forces_inner(true))
    }

    /// Forces; pair energy and virial only when `energy` (the report keeps the last values
    /// otherwise).
    fn compute_forces_inner(&mut self, energy: bool) -> Result<()> {
        self.update_neighbors();
        let neigh = if self.use_list {
            Neigh::List(&self.verlet)
        } else {
            Neigh::All(self.sys.len())
        };
        self.force
            .par_chunks_mut(CHUNK * 8)
            .for_each(|c| c.fill([0.0; 3]));
        let st = &self.settings;
        let mut rep = ForceReport::default();
        let (e, w) = match &self.ff.pair {
            PairStyle::None => (0.0, 0.0),
            PairStyle::Lj(t) => lj_pass(&mut self.force, neigh, &self.sys, t, energy),
            PairStyle::Dpd(p) => dpd_pass(
                &mut self.force,
                neigh,
                &self.sys,
                p,
                true,
                st.kt,
                st.dt,
                st.seed,
                self.step,
            ),
        };
        rep.pair_energy = e;
        rep.virial = w;
        if let MdThermostat::Dpd {
            gamma,
            cutoff,
            exponent,
        } = self.thermostat
        {
            let p = DpdParams::uniform(1, 0.0, gamma, cutoff, exponent);
            dpd_pass(
                &mut self.force,
                neigh,
                &self.sys,
                &p,
                false,
                st.kt,
                st.dt,
                st.seed,
                self.step,
            );
        }
        if !self.bond_partner.is_empty() {
            let (e, w) = self.bond_pass()?;
            rep.bond_energy = e;
            rep.virial += w;
        }
        if energy {
            self.report = rep;
        }
        Ok(())
    }

    fn bond_pass(&mut self) -> Result<(f64, f64)> {
        let sys = &self.sys;
        let l = sys.box_len;
        let h = [l[0] / 2.0, l[1] / 2.0, l[2] / 2.0];
        let styles = &self.ff.bond_styles;
        let (off, partner) = (&self.bond_offset, &self.bond_partner);
        // per chunk: (energy, virial), or the tags and length of a broken bond
        type ChunkResult = std::result::Result<(f64, f64), (u32, u32, f64)>;
        let parts: Vec<ChunkResult> = self
            .force
            .par_chunks_mut(CHUNK)
            .enumerate()
            .map(|(c, fchunk)| {
                let (mut e, mut w) = (0.0, 0.0);
                for (k, fi) in fchunk.iter_mut().enumerate() {
                    let i = c * CHUNK + k;
                    for &(j, kind) in &partner[off[i]..off[i + 1]] {
                        let d = separation(sys.pos[i], sys.pos[j as usize], l, h);
                        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                        match styles[kind as usize].eval(r2) {
                            BondEval::Ok(fr, u) => {
                                fi[0] += fr * d[0];
                                fi[1] += fr * d[1];
                                fi[2] += fr * d[2];
                                e += u;
                                w += fr * r2;
                            }
                            BondEval::Broken => {
                                return Err((sys.tag[i], sys.tag[j as usize], r2.sqrt()))
                            }
                        }
                    }
                }
                Ok((e, w))
            })
            .collect();
        let (mut e, mut w) = (0.0, 0.0);
        for p in parts {
            match p {
                Ok((a, b)) => {
                    e += a;
                    w += b;
                }
                Err((a, b, r)) => {
                    return Err(cfg_err(
                        "md.bonds",
                        format!(
                            "FENE bond {}-{} is stretched to r = {r:.4}, at or beyond R0, at MD step {}",
                            a.min(b),
                            a.max(b),
                            self.step
                        ),
                        "use a smaller MD time step (raise md.steps_per_collision), a softer start, or a larger R0",
                    ))
                }
            }
        }
        Ok((0.5 * e, 0.5 * w))
    }

    /// One MD step: velocity Verlet (B A B), or B A O A B with the Langevin thermostat.
    pub fn step(&mut self) -> Result<()> {
        let pool = self.pool.clone();
        pool.install(|| self.step_inner(true))
    }

    /// One step; `energy`: also evaluate the potential energy and virial.
    fn step_inner(&mut self, energy: bool) -> Result<()> {
        let dt = self.settings.dt;
        self.kick(0.5 * dt);
        match self.thermostat {
            MdThermostat::Langevin { damping } => {
                self.drift(0.5 * dt);
                self.ornstein_uhlenbeck(damping, dt);
                self.drift(0.5 * dt);
            }
            _ => self.drift(dt),
        }
        self.wrap();
        self.step += 1;
        self.compute_forces_inner(energy)?;
        self.kick(0.5 * dt);
        Ok(())
    }

    /// `n` MD steps; energy and virial are evaluated on the last one (for [`Md::report`]).
    pub fn run(&mut self, n: u64) -> Result<()> {
        let pool = self.pool.clone();
        pool.install(|| {
            for k in 0..n {
                self.step_inner(k + 1 == n)?;
            }
            Ok(())
        })
    }

    fn kick(&mut self, h: f64) {
        let (f, im) = (&self.force, &self.inv_mass);
        self.sys
            .vel
            .par_chunks_mut(CHUNK * 8)
            .enumerate()
            .for_each(|(c, vs)| {
                for (k, v) in vs.iter_mut().enumerate() {
                    let i = c * CHUNK * 8 + k;
                    let a = h * im[i];
                    v[0] += a * f[i][0];
                    v[1] += a * f[i][1];
                    v[2] += a * f[i][2];
                }
            });
    }

    fn drift(&mut self, h: f64) {
        let v = &self.sys.vel;
        self.sys
            .pos
            .par_chunks_mut(CHUNK * 8)
            .enumerate()
            .for_each(|(c, ps)| {
                for (k, p) in ps.iter_mut().enumerate() {
                    let i = c * CHUNK * 8 + k;
                    p[0] += h * v[i][0];
                    p[1] += h * v[i][1];
                    p[2] += h * v[i][2];
                }
            });
    }

    fn ornstein_uhlenbeck(&mut self, gamma: f64, dt: f64) {
        let c1 = (-gamma * dt).exp();
        let c2 = (1.0 - c1 * c1).max(0.0);
        let (kt, seed, step) = (self.settings.kt, self.settings.seed, self.step);
        let (im, tag) = (&self.inv_mass, &self.sys.tag);
        self.sys
            .vel
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, vs)| {
                for (k, v) in vs.iter_mut().enumerate() {
                    let i = c * CHUNK + k;
                    let s = (c2 * kt * im[i]).sqrt();
                    let xi = langevin_normals(seed, tag[i], step);
                    for d in 0..3 {
                        v[d] = c1 * v[d] + s * xi[d];
                    }
                }
            });
    }

    fn wrap(&mut self) {
        let l = self.sys.box_len;
        let s = &mut self.sys;
        s.pos
            .par_chunks_mut(CHUNK * 8)
            .zip(s.image.par_chunks_mut(CHUNK * 8))
            .for_each(|(ps, imgs)| {
                for (p, img) in ps.iter_mut().zip(imgs) {
                    for k in 0..3 {
                        if p[k] >= l[k] || p[k] < 0.0 {
                            let sh = (p[k] / l[k]).floor();
                            p[k] -= sh * l[k];
                            if p[k] >= l[k] {
                                p[k] -= l[k];
                            }
                            if p[k] < 0.0 {
                                p[k] = 0.0;
                            }
                            img[k] += sh as i32;
                        }
                    }
                }
            });
    }

    /// Total momentum Σ m v (fixed-chunk reduction).
    pub fn momentum(&self) -> [f64; 3] {
        let v = &self.sys.vel;
        let im = &self.inv_mass;
        let parts: Vec<[f64; 3]> = self.pool.install(|| {
            (0..v.len().div_ceil(CHUNK))
                .into_par_iter()
                .map(|c| {
                    let mut p = [0.0; 3];
                    for i in c * CHUNK..((c + 1) * CHUNK).min(v.len()) {
                        let m = 1.0 / im[i];
                        for k in 0..3 {
                            p[k] += m * v[i][k];
                        }
                    }
                    p
                })
                .collect()
        });
        parts
            .iter()
            .fold([0.0; 3], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2]])
    }

    /// Recompute forces after velocities were changed from outside (e.g. by an MPC collision)
    /// when the forces depend on velocities (DPD); a no-op otherwise.
    pub fn velocities_changed(&mut self) -> Result<()> {
        let velocity_dependent = matches!(self.ff.pair, PairStyle::Dpd(_))
            || matches!(self.thermostat, MdThermostat::Dpd { .. });
        if velocity_dependent {
            self.compute_forces()?;
        }
        Ok(())
    }
}

fn check_dpd(gamma: f64, cutoff: f64, exponent: f64, field: &str) -> Result<()> {
    if !(gamma.is_finite() && gamma >= 0.0) {
        return Err(cfg_err(
            &format!("{field}.gamma"),
            format!("must be finite and ≥ 0 (got {gamma})"),
            "give a friction such as 4.5",
        ));
    }
    if !(cutoff.is_finite() && cutoff > 0.0) {
        return Err(cfg_err(
            &format!("{field}.cutoff"),
            format!("must be finite and > 0 (got {cutoff})"),
            "give a cutoff such as 1.0",
        ));
    }
    if !(exponent.is_finite() && exponent > 0.0) {
        return Err(cfg_err(
            &format!("{field}.exponent"),
            format!("must be finite and > 0 (got {exponent})"),
            "use 1.0 for the standard Groot–Warren weight (0.5 or 0.25 for softer ones)",
        ));
    }
    Ok(())
}
