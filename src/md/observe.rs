//! Observables and trajectories: radius of gyration of chains, centre-of-mass MSD of chains,
//! extended-XYZ frames (OVITO reads them directly).

use std::collections::BTreeMap;
use std::io::Write;

use super::rheology::ChainGroups;
use super::system::System;

/// Centre of mass (unwrapped) and Rg² of every molecule with id > 0, by molecule id. Each
/// molecule's sums run over its members in index order (`ChainGroups`, a counting sort: a map
/// of vectors took about a second per sample at 1.6 M beads); the GPU engine's
/// `md_chain_geometry` does the same arithmetic in the same order.
pub fn chain_geometry(sys: &System) -> BTreeMap<u32, ([f64; 3], f64)> {
    let g = ChainGroups::of(sys);
    g.offsets
        .windows(2)
        .map(|w| {
            let members = &g.members[w[0]..w[1]];
            let (mut mt, mut s) = (0.0, [0.0; 3]);
            for &i in members {
                let m = sys.mass(i);
                mt += m;
                for (s, x) in s.iter_mut().zip(sys.unwrapped(i)) {
                    *s += m * x;
                }
            }
            let com = [s[0] / mt, s[1] / mt, s[2] / mt];
            let mut rg2 = 0.0;
            for &i in members {
                let u = sys.unwrapped(i);
                let m = sys.mass(i);
                rg2 += m
                    * ((u[0] - com[0]).powi(2) + (u[1] - com[1]).powi(2) + (u[2] - com[2]).powi(2));
            }
            (sys.mol[members[0]], (com, rg2 / mt))
        })
        .collect()
}

/// Chain observables over time: mean Rg and the MSD of chain centres of mass from the start.
#[derive(Clone, Debug, Default)]
pub struct ChainObserver {
    start: BTreeMap<u32, [f64; 3]>,
}

/// One row of chain observables.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ChainSample {
    pub chains: usize,
    /// Mean over chains of Rg.
    pub rg_mean: f64,
    /// Mean over chains of Rg².
    pub rg2_mean: f64,
    /// Mean over chains of |R_cm(t) − R_cm(0)|².
    pub com_msd: f64,
    /// Largest bond length in the system (chains intact while below the FENE R0).
    pub max_bond: f64,
}

impl ChainObserver {
    pub fn new(sys: &System) -> Self {
        ChainObserver {
            start: chain_geometry(sys)
                .into_iter()
                .map(|(m, (c, _))| (m, c))
                .collect(),
        }
    }

    /// An observer whose reference centres of mass are `start` (a resumed run's).
    pub fn from_start(start: BTreeMap<u32, [f64; 3]>) -> Self {
        ChainObserver { start }
    }

    /// The reference centres of mass, by molecule id.
    pub fn start(&self) -> &BTreeMap<u32, [f64; 3]> {
        &self.start
    }

    pub fn sample(&self, sys: &System) -> ChainSample {
        let g: Vec<_> = chain_geometry(sys)
            .into_iter()
            .map(|(mol, (com, rg2))| (mol, com, rg2))
            .collect();
        self.sample_of(&g, max_bond_length(sys))
    }

    /// The sample of chains given as (molecule id, centre of mass, Rg²) in increasing id, and
    /// the largest bond length: the means in that order (the GPU engine's reductions end here).
    pub fn sample_of(&self, chains: &[(u32, [f64; 3], f64)], max_bond: f64) -> ChainSample {
        let n = chains.len();
        let mut s = ChainSample {
            chains: n,
            max_bond,
            ..Default::default()
        };
        for (mol, com, rg2) in chains {
            s.rg_mean += rg2.sqrt() / n as f64;
            s.rg2_mean += rg2 / n as f64;
            if let Some(c0) = self.start.get(mol) {
                s.com_msd += ((com[0] - c0[0]).powi(2)
                    + (com[1] - c0[1]).powi(2)
                    + (com[2] - c0[2]).powi(2))
                    / n as f64;
            }
        }
        s
    }
}

/// Largest bond length (minimum image, sheared across y) of the system.
pub fn max_bond_length(sys: &System) -> f64 {
    if sys.bonds.is_empty() {
        return 0.0;
    }
    // tags index a dense table (a hash map of every tag took most of a second at 1.6 M)
    let top = sys.tag.iter().copied().max().unwrap_or(0) as usize;
    let mut index = vec![usize::MAX; top + 1];
    for (i, &t) in sys.tag.iter().enumerate() {
        index[t as usize] = i;
    }
    let bx = sys.periodic_box();
    let mut m: f64 = 0.0;
    for b in &sys.bonds {
        let (i, j) = (index[b.a as usize], index[b.b as usize]);
        m = m.max(bx.distance2(sys.pos[i], sys.pos[j]).sqrt());
    }
    m
}

/// Append one extended-XYZ frame: unwrapped positions, velocities, ids and molecule ids,
/// sorted by id so that frames line up.
pub fn write_xyz_frame<W: Write>(out: &mut W, sys: &System, time: f64) -> std::io::Result<()> {
    let l = sys.box_len;
    let mut order: Vec<usize> = (0..sys.len()).collect();
    order.sort_unstable_by_key(|&i| sys.tag[i]);
    writeln!(out, "{}", sys.len())?;
    writeln!(
        out,
        "Lattice=\"{} 0 0 0 {} 0 0 0 {}\" Origin=\"0 0 0\" Properties=species:S:1:pos:R:3:velo:R:3:id:I:1:molecule:I:1 Time={time} pbc=\"T T T\"",
        l[0], l[1], l[2]
    )?;
    for i in order {
        let u = sys.unwrapped(i);
        let v = sys.vel[i];
        writeln!(
            out,
            "T{} {:.6} {:.6} {:.6} {:.6} {:.6} {:.6} {} {}",
            sys.typ[i] + 1,
            u[0],
            u[1],
            u[2],
            v[0],
            v[1],
            v[2],
            sys.tag[i],
            sys.mol[i]
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::md::boundary::LeesEdwards;
    use crate::md::system::Bond;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Molecules with gaps in their ids, members scattered in the index order, two masses,
    /// images in every direction under Lees-Edwards shear, bonds along each molecule.
    fn scattered_molecules() -> System {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(5);
        let n = 600;
        let mut sys = System {
            box_len: [7.0, 9.0, 5.0],
            pos: Vec::new(),
            vel: Vec::new(),
            image: Vec::new(),
            typ: Vec::new(),
            tag: Vec::new(),
            mol: Vec::new(),
            type_mass: vec![1.0, 3.5],
            bonds: Vec::new(),
            lees_edwards: LeesEdwards::at(23.7, 0.4, 7.0),
        };
        for i in 0..n {
            sys.pos.push([
                r.random::<f64>() * 7.0,
                r.random::<f64>() * 9.0,
                r.random::<f64>() * 5.0,
            ]);
            sys.vel.push([0.0; 3]);
            sys.image.push([
                r.random_range(-2..3),
                r.random_range(-2..3),
                r.random_range(-1..2),
            ]);
            sys.typ.push(r.random_range(0..2));
            sys.tag.push(3 * i as u32 + 7);
            // ids 0 (free), then 2, 5, 8, ... in a scattered order
            let m = r.random_range(0..40u32);
            sys.mol.push(if m == 0 { 0 } else { 3 * m + 2 });
        }
        for i in 1..n {
            if sys.mol[i] != 0 && sys.mol[i] == sys.mol[i - 1] {
                sys.bonds.push(Bond {
                    a: sys.tag[i],
                    b: sys.tag[i - 1],
                    kind: 0,
                });
            }
        }
        sys
    }

    /// The chain columns as they were computed before the counting sort (a map of molecules,
    /// members in index order; a map of every tag): the reference of the same bits.
    #[test]
    fn the_chain_columns_are_those_of_a_map_of_molecules() {
        let sys = scattered_molecules();
        let mut acc: BTreeMap<u32, (f64, [f64; 3], Vec<usize>)> = BTreeMap::new();
        for i in 0..sys.len() {
            if sys.mol[i] == 0 {
                continue;
            }
            let (m, u) = (sys.mass(i), sys.unwrapped(i));
            let e = acc.entry(sys.mol[i]).or_insert((0.0, [0.0; 3], Vec::new()));
            e.0 += m;
            for (s, x) in e.1.iter_mut().zip(u) {
                *s += m * x;
            }
            e.2.push(i);
        }
        let reference: BTreeMap<u32, ([f64; 3], f64)> = acc
            .into_iter()
            .map(|(mol, (mt, s, members))| {
                let com = [s[0] / mt, s[1] / mt, s[2] / mt];
                let mut rg2 = 0.0;
                for &i in &members {
                    let u = sys.unwrapped(i);
                    rg2 += sys.mass(i)
                        * ((u[0] - com[0]).powi(2)
                            + (u[1] - com[1]).powi(2)
                            + (u[2] - com[2]).powi(2));
                }
                (mol, (com, rg2 / mt))
            })
            .collect();
        assert!(reference.len() > 30);
        assert_eq!(chain_geometry(&sys), reference);
        let index: std::collections::HashMap<u32, usize> =
            sys.tag.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let bx = sys.periodic_box();
        let longest = sys
            .bonds
            .iter()
            .map(|b| {
                bx.distance2(sys.pos[index[&b.a]], sys.pos[index[&b.b]])
                    .sqrt()
            })
            .fold(0.0, f64::max);
        assert!(!sys.bonds.is_empty() && longest > 0.0);
        assert_eq!(max_bond_length(&sys), longest);
        // the sample from the columns, against a start 0.3 away along x for every chain
        let start: BTreeMap<u32, [f64; 3]> = reference
            .iter()
            .map(|(&m, (c, _))| (m, [c[0] - 0.3, c[1], c[2]]))
            .collect();
        let s = ChainObserver::from_start(start).sample(&sys);
        assert_eq!(s.chains, reference.len());
        assert!((s.com_msd - 0.09).abs() < 1e-12, "{s:?}");
        let rg2 = reference.values().map(|v| v.1).sum::<f64>() / reference.len() as f64;
        assert!((s.rg2_mean - rg2).abs() < 1e-12 * rg2, "{s:?}");
    }
}
