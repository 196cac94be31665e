//! Observables and trajectories: radius of gyration of chains, centre-of-mass MSD of chains,
//! extended-XYZ frames (OVITO reads them directly).

use std::collections::BTreeMap;
use std::io::Write;

use super::system::System;

/// Centre of mass (unwrapped) and Rg² of every molecule with id > 0, by molecule id.
pub fn chain_geometry(sys: &System) -> BTreeMap<u32, ([f64; 3], f64)> {
    let mut acc: BTreeMap<u32, (f64, [f64; 3], Vec<usize>)> = BTreeMap::new();
    for i in 0..sys.len() {
        let mol = sys.mol[i];
        if mol == 0 {
            continue;
        }
        let m = sys.mass(i);
        let u = sys.unwrapped(i);
        let e = acc.entry(mol).or_insert((0.0, [0.0; 3], Vec::new()));
        e.0 += m;
        for (s, x) in e.1.iter_mut().zip(u) {
            *s += m * x;
        }
        e.2.push(i);
    }
    acc.into_iter()
        .map(|(mol, (mt, s, members))| {
            let com = [s[0] / mt, s[1] / mt, s[2] / mt];
            let mut rg2 = 0.0;
            for &i in &members {
                let u = sys.unwrapped(i);
                let m = sys.mass(i);
                rg2 += m
                    * ((u[0] - com[0]).powi(2) + (u[1] - com[1]).powi(2) + (u[2] - com[2]).powi(2));
            }
            (mol, (com, rg2 / mt))
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
        let g = chain_geometry(sys);
        let n = g.len();
        let mut s = ChainSample {
            chains: n,
            max_bond: max_bond_length(sys),
            ..Default::default()
        };
        if n == 0 {
            return s;
        }
        for (mol, (com, rg2)) in &g {
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
    let index: std::collections::HashMap<u32, usize> =
        sys.tag.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let bx = sys.periodic_box();
    let mut m: f64 = 0.0;
    for b in &sys.bonds {
        let (i, j) = (index[&b.a], index[&b.b]);
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
