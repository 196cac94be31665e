//! Bond forces: the bond styles (harmonic, FENE), the bonded partners of every particle
//! ([`BondTopology`], shared by the CPU and GPU engines) and the bond pass of the CPU engine.
//! The GPU evaluates the same expressions in `kernels/md.cu` (`md_bond_pass`).

use std::collections::HashMap;

use rayon::prelude::*;

use super::neighbor::CHUNK;
use super::settings::add_outer;
use super::system::System;
use crate::error::ConfigError;

/// Bond potentials. Bonded pairs keep their pair interaction (the Kremer–Grest convention,
/// LAMMPS `special_bonds lj 1 1 1`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub enum BondStyle {
    /// U = ½ k (r − r0)². (LAMMPS `bond_style harmonic` writes K (r − r0)², so K = k/2.)
    Harmonic { k: f64, r0: f64 },
    /// U = −½ k R0² ln(1 − (r/R0)²), purely attractive; add WCA as the pair style for the
    /// Kremer–Grest model (k = 30 ε/σ², R0 = 1.5 σ).
    Fene { k: f64, r0: f64 },
}

/// Outcome of one bond evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BondEval {
    /// (F·r/r², U): the force on a is (F·r/r²) · (r_a − r_b).
    Ok(f64, f64),
    /// A FENE bond at or beyond its maximum extension.
    Broken,
}

impl BondStyle {
    #[inline]
    pub fn eval(&self, r2: f64) -> BondEval {
        match *self {
            BondStyle::Harmonic { k, r0 } => {
                let r = r2.sqrt();
                let dr = r - r0;
                let fr = if r > 0.0 { -k * dr / r } else { 0.0 };
                BondEval::Ok(fr, 0.5 * k * dr * dr)
            }
            BondStyle::Fene { k, r0 } => {
                let x = r2 / (r0 * r0);
                if x >= 1.0 || !x.is_finite() {
                    return BondEval::Broken;
                }
                BondEval::Ok(-k / (1.0 - x), -0.5 * k * r0 * r0 * (1.0 - x).ln())
            }
        }
    }

    pub fn validate(&self, index: usize) -> Result<(), ConfigError> {
        let (k, r0, name) = match *self {
            BondStyle::Harmonic { k, r0 } => (k, r0, "Harmonic"),
            BondStyle::Fene { k, r0 } => (k, r0, "Fene"),
        };
        let ok_r0 = if name == "Fene" {
            r0.is_finite() && r0 > 0.0
        } else {
            r0.is_finite() && r0 >= 0.0
        };
        if !k.is_finite() || k < 0.0 || !ok_r0 {
            return Err(ConfigError {
                field: format!("md.bonds[{index}] ({name})"),
                problem: format!("k = {k}, r0 = {r0}"),
                fix: "give a finite k ≥ 0 and r0 > 0 (FENE: e.g. k 30, r0 1.5)".into(),
            });
        }
        Ok(())
    }
}

/// The bonded partners of every particle in the current particle order, CSR: particle i's
/// partners (index, bond type) are `partner[offset[i]..offset[i + 1]]`, sorted, so the order
/// does not depend on the order of the bond list. Every bond appears from both sides.
#[derive(Clone, Debug, Default)]
pub struct BondTopology {
    pub offset: Vec<usize>,
    pub partner: Vec<(u32, u32)>,
}

impl BondTopology {
    /// The partners of `sys`'s particles (bonds name particles by tag).
    pub fn new(sys: &System) -> BondTopology {
        let n = sys.len();
        let mut index_of = HashMap::with_capacity(n);
        for (i, &t) in sys.tag.iter().enumerate() {
            index_of.insert(t, i as u32);
        }
        let mut count = vec![0usize; n + 1];
        for b in &sys.bonds {
            count[index_of[&b.a] as usize + 1] += 1;
            count[index_of[&b.b] as usize + 1] += 1;
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut partner = vec![(0, 0); count[n]];
        for b in &sys.bonds {
            let (ia, ib) = (index_of[&b.a], index_of[&b.b]);
            partner[fill[ia as usize]] = (ib, b.kind);
            fill[ia as usize] += 1;
            partner[fill[ib as usize]] = (ia, b.kind);
            fill[ib as usize] += 1;
        }
        // fixed order of partners, independent of the bond list order
        for i in 0..n {
            partner[count[i]..count[i + 1]].sort_unstable();
        }
        BondTopology {
            offset: count,
            partner,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.partner.is_empty()
    }

    /// The partners of particle i.
    #[inline(always)]
    pub fn partners(&self, i: usize) -> &[(u32, u32)] {
        &self.partner[self.offset[i]..self.offset[i + 1]]
    }
}

/// A FENE bond stretched to its maximum extension: the tags of its particles and its length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BrokenBond {
    pub tag_a: u32,
    pub tag_b: u32,
    pub length: f64,
}

/// Sums of a bond pass (each bond once): energy, scalar virial, virial tensor.
pub(crate) type BondSums = (f64, f64, [f64; 6]);

/// Bond forces of every particle added into `force` (each bond from both sides); returns half
/// the summed (energy, virial, virial tensor), or the first broken bond in particle order.
pub(crate) fn bond_pass(
    force: &mut [[f64; 3]],
    sys: &System,
    topology: &BondTopology,
    styles: &[BondStyle],
) -> Result<BondSums, BrokenBond> {
    let bx = sys.periodic_box();
    let parts: Vec<Result<BondSums, BrokenBond>> = force
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, fchunk)| {
            let (mut e, mut w, mut t) = (0.0, 0.0, [0.0; 6]);
            for (k, fi) in fchunk.iter_mut().enumerate() {
                let i = c * CHUNK + k;
                for &(j, kind) in topology.partners(i) {
                    let d = bx.delta(sys.pos[i], sys.pos[j as usize]);
                    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                    match styles[kind as usize].eval(r2) {
                        BondEval::Ok(fr, u) => {
                            fi[0] += fr * d[0];
                            fi[1] += fr * d[1];
                            fi[2] += fr * d[2];
                            e += u;
                            w += fr * r2;
                            add_outer(&mut t, fr, &d);
                        }
                        BondEval::Broken => {
                            return Err(BrokenBond {
                                tag_a: sys.tag[i],
                                tag_b: sys.tag[j as usize],
                                length: r2.sqrt(),
                            })
                        }
                    }
                }
            }
            Ok((e, w, t))
        })
        .collect();
    let (mut e, mut w, mut t) = (0.0, 0.0, [0.0; 6]);
    for p in parts {
        let (a, b, c) = p?;
        e += a;
        w += b;
        for k in 0..6 {
            t[k] += c[k];
        }
    }
    Ok((0.5 * e, 0.5 * w, t.map(|x| 0.5 * x)))
}
