//! Rheology of the solutes: their stress from the MD forces and velocities, and the
//! conformation of chains (gyration tensor, orientation angle, end-to-end vector) that shear
//! studies report. Tensors are (xx, yy, zz, xy, xz, yz).
//!
//! Stress bookkeeping of a coupled run (every x-momentum flux across y planes counted once):
//! the fluid's streaming (`Physics::kinetic_stress`), the MPC collision of fluid and solutes
//! together (Σ Δp_x (y − y_cell) over every particle of a cell, solutes included: the
//! backends' collisional sum), the solutes' motion (kinetic term below, relative to the
//! imposed flow) and the forces between solutes (virial term below: pair and bond forces,
//! and DPD dissipative and random forces when DPD is on). The collision exchanges momentum
//! between fluid and solutes only inside a cell, which the virial never sees, and the MD
//! forces act only between solutes, which the collision never sees.

use serde::{Deserialize, Serialize};

use super::neighbor::CHUNK;
use super::settings::add_outer;
use super::system::System;
use crate::stats::Series;

/// The solutes' pressure tensor P = (K + W)/V: K = Σ m c ⊗ c with c = v − γ̇ (y − Ly/2) x̂
/// (the velocity relative to the imposed flow; γ̇ = 0 without shear), W the virial tensor
/// Σ r_ij ⊗ F_ij of the last force evaluation. The shear stress is σ_xy = −P_xy, and the
/// solutes' share of the viscosity −P_xy / γ̇.
pub fn pressure_tensor(sys: &System, shear_rate: f64, virial: [f64; 6]) -> [f64; 6] {
    pressure_from(sys, kinetic_tensor(sys, shear_rate), virial)
}

/// P = (K + W)/V from the kinetic tensor K ([`kinetic_tensor`]) and the virial tensor W.
pub fn pressure_from(sys: &System, kinetic: [f64; 6], virial: [f64; 6]) -> [f64; 6] {
    let vol = sys.volume();
    [0, 1, 2, 3, 4, 5].map(|a| (kinetic[a] + virial[a]) / vol)
}

/// K = Σ m c ⊗ c, c = v − γ̇ (y − Ly/2) x̂, summed per chunk of [`CHUNK`] particles in index
/// order and then over chunks: the order of the GPU engine's `md_chunk_kinetic`, so both
/// engines give the same bits for the same state.
pub fn kinetic_tensor(sys: &System, shear_rate: f64) -> [f64; 6] {
    let half_ly = 0.5 * sys.box_len[1];
    let mut k = [0.0; 6];
    for lo in (0..sys.len()).step_by(CHUNK) {
        let mut part = [0.0; 6];
        for i in lo..(lo + CHUNK).min(sys.len()) {
            let v = sys.vel[i];
            let c = [v[0] - shear_rate * (sys.pos[i][1] - half_ly), v[1], v[2]];
            add_outer(&mut part, sys.mass(i), &c);
        }
        for a in 0..6 {
            k[a] += part[a];
        }
    }
    k
}

/// The conformation of chains (molecules with id > 0), averaged over chains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conformation {
    pub chains: usize,
    /// Mean gyration tensor G = ⟨(r − r_cm) ⊗ (r − r_cm)⟩ (mass weighted) of a chain.
    pub gyration: [f64; 6],
    /// Mean R ⊗ R of the end-to-end vector R (last minus first bead by atom id).
    pub end_to_end: [f64; 6],
    /// The orientation angle χ of the mean gyration tensor, in degrees: the angle between its
    /// principal axis in the xy plane and the flow, tan 2χ = 2 G_xy / (G_xx − G_yy), in
    /// (−90°, 90°]. Time-averaged it tends to 45° as Wi → 0 and falls towards 0 as the flow
    /// aligns the chains; an instantaneous value at rest is anywhere.
    pub orientation_angle_deg: f64,
}

impl Conformation {
    /// Mean Rg² (the trace of G).
    pub fn rg2(&self) -> f64 {
        self.gyration[0] + self.gyration[1] + self.gyration[2]
    }

    /// Mean |R|².
    pub fn end_to_end2(&self) -> f64 {
        self.end_to_end[0] + self.end_to_end[1] + self.end_to_end[2]
    }

    /// tan 2χ = 2 G_xy / (G_xx − G_yy).
    pub fn tan_2chi(&self) -> f64 {
        2.0 * self.gyration[3] / (self.gyration[0] - self.gyration[1])
    }
}

/// χ in degrees from a gyration tensor: ½ atan2(2 G_xy, G_xx − G_yy), the direction of its
/// principal axis in the xy plane, in (−90°, 90°]; 45° for an isotropic one (the Wi → 0 limit).
pub fn orientation_angle_deg(g: &[f64; 6]) -> f64 {
    let two_chi = (2.0 * g[3]).atan2(g[0] - g[1]);
    let chi = 0.5 * two_chi.to_degrees();
    if g[3] == 0.0 && g[0] == g[1] {
        45.0
    } else {
        chi
    }
}

/// The chains of a system (molecules with id > 0), chains in increasing id: chain c's particle
/// indices are `members[offsets[c]..offsets[c + 1]]` (increasing), `ends[c]` the indices of its
/// first and last bead by atom id. The GPU engine keeps its particle order, so it builds this
/// once and reduces every chain on the device in the same order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChainGroups {
    pub offsets: Vec<usize>,
    pub members: Vec<usize>,
    pub ends: Vec<[usize; 2]>,
}

impl ChainGroups {
    /// A counting sort over molecule ids, O(n), as a sample under shear takes it every few
    /// collisions for millions of beads (a map of vectors took ~0.1 s per sample at 1.6 M).
    pub fn of(sys: &System) -> ChainGroups {
        let max = sys.mol.iter().copied().max().unwrap_or(0) as usize;
        if max == 0 {
            return ChainGroups {
                offsets: vec![0],
                ..Default::default()
            };
        }
        let mut count = vec![0usize; max + 1];
        for &m in &sys.mol {
            count[m as usize] += 1;
        }
        count[0] = 0;
        // start[m]: where chain m's members begin; ids without members give empty chains, dropped
        let mut start = vec![0usize; max + 2];
        for m in 1..=max {
            start[m + 1] = start[m] + count[m];
        }
        let mut members = vec![0usize; start[max + 1]];
        let mut next = start.clone();
        for (i, &m) in sys.mol.iter().enumerate() {
            if m > 0 {
                members[next[m as usize]] = i;
                next[m as usize] += 1;
            }
        }
        let mut offsets = vec![0usize];
        for m in 1..=max {
            if count[m] > 0 {
                offsets.push(start[m + 1]);
            }
        }
        let ends = offsets
            .windows(2)
            .map(|w| {
                let idx = &members[w[0]..w[1]];
                let first = *idx.iter().min_by_key(|&&i| sys.tag[i]).expect("non-empty");
                let last = *idx.iter().max_by_key(|&&i| sys.tag[i]).expect("non-empty");
                [first, last]
            })
            .collect();
        ChainGroups {
            offsets,
            members,
            ends,
        }
    }

    pub fn chains(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// One chain's mass-weighted gyration tensor and R ⊗ R of its end-to-end vector (unwrapped
/// positions); `md_chain_conformation` on the GPU, operation by operation.
fn chain_terms(sys: &System, idx: &[usize], ends: [usize; 2], u: &mut Vec<[f64; 3]>) -> [f64; 12] {
    u.clear();
    u.extend(idx.iter().map(|&i| sys.unwrapped(i)));
    let mt: f64 = idx.iter().map(|&i| sys.mass(i)).sum();
    let mut com = [0.0; 3];
    for (&i, p) in idx.iter().zip(u.iter()) {
        for k in 0..3 {
            com[k] += sys.mass(i) * p[k] / mt;
        }
    }
    let mut g = [0.0; 6];
    for (&i, p) in idx.iter().zip(u.iter()) {
        let d = [p[0] - com[0], p[1] - com[1], p[2] - com[2]];
        add_outer(&mut g, sys.mass(i) / mt, &d);
    }
    let (first, last) = (sys.unwrapped(ends[0]), sys.unwrapped(ends[1]));
    let r = [0, 1, 2].map(|k| last[k] - first[k]);
    let mut ree = [0.0; 6];
    add_outer(&mut ree, 1.0, &r);
    let mut out = [0.0; 12];
    out[..6].copy_from_slice(&g);
    out[6..].copy_from_slice(&ree);
    out
}

/// The average over chains of their terms ([`chain_terms`]: gyration tensor, then R ⊗ R), in
/// chain order.
pub fn average_conformation<'a>(terms: impl ExactSizeIterator<Item = &'a [f64]>) -> Conformation {
    let chains = terms.len();
    let mut out = Conformation {
        chains,
        ..Default::default()
    };
    if chains == 0 {
        return out;
    }
    let inv = 1.0 / chains as f64;
    for t in terms {
        for k in 0..6 {
            out.gyration[k] += inv * t[k];
            out.end_to_end[k] += inv * t[6 + k];
        }
    }
    out.orientation_angle_deg = orientation_angle_deg(&out.gyration);
    out
}

/// The conformation of every chain of `sys` (unwrapped positions), averaged.
pub fn conformation(sys: &System) -> Conformation {
    let groups = ChainGroups::of(sys);
    let mut u = Vec::new();
    let terms: Vec<[f64; 12]> = (0..groups.chains())
        .map(|c| {
            let idx = &groups.members[groups.offsets[c]..groups.offsets[c + 1]];
            chain_terms(sys, idx, groups.ends[c], &mut u)
        })
        .collect();
    average_conformation(terms.iter().map(|t| t.as_slice()))
}

/// Time averages of a coupled run under shear, with block-averaged errors (`crate::stats`);
/// part of coupled checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoluteStats {
    /// −P_xy^solute / γ̇ per sample (kinetic + virial).
    pub viscosity_solute: Series,
    /// The kinetic part of it alone.
    pub viscosity_solute_kinetic: Series,
    /// The solution's viscosity per sample: fluid streaming + collision (fluid and solutes)
    /// + solutes.
    pub viscosity_solution: Series,
    /// Per sample: G_xx, G_yy, G_zz, G_xy of the mean gyration tensor.
    pub gyration: [Series; 4],
    /// Per sample: the orientation angle χ (degrees) and mean |R_ee|².
    pub orientation_angle_deg: Series,
    pub end_to_end2: Series,
}

impl SoluteStats {
    pub fn new() -> SoluteStats {
        let s = || Series::new(100);
        SoluteStats {
            viscosity_solute: s(),
            viscosity_solute_kinetic: s(),
            viscosity_solution: s(),
            gyration: [s(), s(), s(), s()],
            orientation_angle_deg: s(),
            end_to_end2: s(),
        }
    }

    /// One sample of conformation.
    pub fn push_conformation(&mut self, c: &Conformation) {
        for (k, s) in [0, 1, 2, 3].into_iter().zip(self.gyration.iter_mut()) {
            s.push(c.gyration[k]);
        }
        self.orientation_angle_deg.push(c.orientation_angle_deg);
        self.end_to_end2.push(c.end_to_end2());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::md::build::random_gas;

    /// Two straight chains (ids 7 and 3, beads interleaved with solvent particles of id 0):
    /// each chain's gyration tensor and end-to-end vector by hand, averaged over the two.
    #[test]
    fn conformation_groups_beads_by_molecule_in_any_order() {
        let mut sys = random_gas(7, [20.0; 3], 1.0, 1);
        // chain 7: beads along x at 1, 2, 3 (tags 10, 11, 12); chain 3: along y at 5, 7
        let beads = [
            (0, 3, 11, [2.0, 1.0, 1.0]),
            (1, 0, 0, [9.0, 9.0, 9.0]),
            (2, 7, 12, [3.0, 1.0, 1.0]),
            (3, 3, 20, [1.0, 5.0, 1.0]),
            (4, 7, 10, [1.0, 1.0, 1.0]),
            (5, 7, 11, [2.0, 1.0, 1.0]),
            (6, 3, 21, [1.0, 7.0, 1.0]),
        ];
        for (i, mol, tag, p) in beads {
            sys.mol[i] = mol;
            sys.tag[i] = if mol == 3 && tag == 11 { 19 } else { tag };
            sys.pos[i] = p;
        }
        // chain 3 has beads at y = 1 (tag 19), 5 (20), 7 (21), x 2, 1, 1
        let c = conformation(&sys);
        assert_eq!(c.chains, 2);
        // chain 7: G_xx = 2/3, R_ee = (2, 0, 0); chain 3: y at 1, 5, 7 → mean 13/3,
        // G_yy = ((10/3)² + (2/3)² + (8/3)²)/3 = 56/9; x at 2, 1, 1 → G_xx = 2/9,
        // G_xy = ((2/3)(−10/3) + (−1/3)(2/3) + (−1/3)(8/3))/3 = −10/9; R_ee = (−1, 6, 0)
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(
            close(c.gyration[0], 0.5 * (2.0 / 3.0 + 2.0 / 9.0)),
            "{:?}",
            c.gyration
        );
        assert!(close(c.gyration[1], 0.5 * 56.0 / 9.0), "{:?}", c.gyration);
        assert!(close(c.gyration[3], 0.5 * -10.0 / 9.0), "{:?}", c.gyration);
        assert!(
            close(c.end_to_end[0], 0.5 * (4.0 + 1.0)),
            "{:?}",
            c.end_to_end
        );
        assert!(close(c.end_to_end[1], 0.5 * 36.0), "{:?}", c.end_to_end);
        assert!(close(c.end_to_end[3], 0.5 * -6.0), "{:?}", c.end_to_end);
    }
}
