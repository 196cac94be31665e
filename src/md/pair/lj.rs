//! Lennard-Jones pair forces over a type table (WCA is LJ cut at 2^(1/6) σ and shifted).

use super::{add_pair_tensor, run_pair_kernel, PairKernel, PairSums};
use crate::error::ConfigError;
use crate::md::boundary::PeriodicBox;
use crate::md::neighbor::NeighborSource;
use crate::md::system::System;

/// One LJ type pair: U = 4ε[(σ/r)¹² − (σ/r)⁶] − shift for r < rc.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LjPair {
    /// 48 ε σ¹²
    pub lj1: f64,
    /// 24 ε σ⁶
    pub lj2: f64,
    /// 4 ε σ¹²
    pub lj3: f64,
    /// 4 ε σ⁶
    pub lj4: f64,
    pub rc2: f64,
    /// U(rc) when the energy is shifted, else 0.
    pub shift: f64,
}

impl LjPair {
    pub fn new(epsilon: f64, sigma: f64, cutoff: f64, shifted: bool) -> LjPair {
        let s6 = sigma.powi(6);
        let s12 = s6 * s6;
        let mut p = LjPair {
            lj1: 48.0 * epsilon * s12,
            lj2: 24.0 * epsilon * s6,
            lj3: 4.0 * epsilon * s12,
            lj4: 4.0 * epsilon * s6,
            rc2: cutoff * cutoff,
            shift: 0.0,
        };
        if shifted {
            let ir6 = 1.0 / (p.rc2 * p.rc2 * p.rc2);
            p.shift = ir6 * (p.lj3 * ir6 - p.lj4);
        }
        p
    }

    /// (F·r / r², U) at squared distance r2 < rc2: the force on i is (F·r/r²) · r_ij.
    #[inline(always)]
    pub fn eval(&self, r2: f64) -> (f64, f64) {
        let inv2 = 1.0 / r2;
        let inv6 = inv2 * inv2 * inv2;
        let fr = inv6 * (self.lj1 * inv6 - self.lj2) * inv2;
        let e = inv6 * (self.lj3 * inv6 - self.lj4) - self.shift;
        (fr, e)
    }
}

/// LJ parameters of every type pair (row-major n × n, symmetric).
#[derive(Clone, Debug, PartialEq)]
pub struct LjTable {
    pub n: usize,
    pub pairs: Vec<LjPair>,
    pub max_cutoff: f64,
}

fn lj_err(field: String, problem: String, fix: &str) -> ConfigError {
    ConfigError {
        field,
        problem,
        fix: fix.into(),
    }
}

impl LjTable {
    /// Every type pair with the same parameters.
    pub fn uniform(n_types: usize, epsilon: f64, sigma: f64, cutoff: f64, shifted: bool) -> Self {
        LjTable {
            n: n_types,
            pairs: vec![LjPair::new(epsilon, sigma, cutoff, shifted); n_types * n_types],
            max_cutoff: cutoff,
        }
    }

    /// WCA: rc = 2^(1/6) σ, shifted, for every type pair.
    pub fn wca(n_types: usize, epsilon: f64, sigma: f64) -> Self {
        Self::uniform(n_types, epsilon, sigma, 2f64.powf(1.0 / 6.0) * sigma, true)
    }

    /// From (type i, type j, ε, σ, rc) entries with 0-based types; every pair must be given.
    pub fn from_entries(
        n_types: usize,
        entries: &[(usize, usize, f64, f64, f64)],
        shifted: bool,
    ) -> Result<Self, ConfigError> {
        let mut pairs = vec![None; n_types * n_types];
        let mut max_cutoff: f64 = 0.0;
        for &entry in entries {
            let (i, j, eps, sig, rc) = check_entry(n_types, entry)?;
            let p = LjPair::new(eps, sig, rc, shifted);
            pairs[i * n_types + j] = Some(p);
            pairs[j * n_types + i] = Some(p);
            max_cutoff = max_cutoff.max(rc);
        }
        let mut out = Vec::with_capacity(pairs.len());
        for (k, p) in pairs.into_iter().enumerate() {
            let p = p.ok_or_else(|| {
                lj_err(
                    "md.pair.Lj.coeffs".into(),
                    format!(
                        "no coefficients for type pair ({}, {})",
                        k / n_types + 1,
                        k % n_types + 1
                    ),
                    "add an entry (i, j, epsilon, sigma, cutoff) for every type pair",
                )
            })?;
            out.push(p);
        }
        Ok(LjTable {
            n: n_types,
            pairs: out,
            max_cutoff,
        })
    }
}

/// One (i, j, ε, σ, rc) entry of [`LjTable::from_entries`]: types in range, parameters > 0.
fn check_entry(
    n_types: usize,
    entry: (usize, usize, f64, f64, f64),
) -> Result<(usize, usize, f64, f64, f64), ConfigError> {
    let (i, j, eps, sig, rc) = entry;
    if i >= n_types || j >= n_types {
        return Err(lj_err(
            "md.pair.Lj.coeffs".into(),
            format!(
                "entry for types ({}, {}) but the system has {n_types} type(s)",
                i + 1,
                j + 1
            ),
            "use 1-based types that exist in the system",
        ));
    }
    for (name, v) in [("epsilon", eps), ("sigma", sig), ("cutoff", rc)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(lj_err(
                format!("md.pair.Lj.coeffs ({}, {}).{name}", i + 1, j + 1),
                format!("must be finite and > 0 (got {v})"),
                "give positive LJ parameters, e.g. epsilon 1.0, sigma 1.0, cutoff 2.5",
            ));
        }
    }
    Ok(entry)
}

/// LJ over a type table; `SINGLE` skips the type lookup for one-type systems.
struct LjKernel<'a, const SINGLE: bool> {
    pos: &'a [[f64; 3]],
    typ: &'a [u32],
    table: &'a LjTable,
    bx: PeriodicBox,
}

impl<'a, const SINGLE: bool> LjKernel<'a, SINGLE> {
    fn new(sys: &'a System, table: &'a LjTable) -> Self {
        LjKernel {
            pos: &sys.pos,
            typ: &sys.typ,
            table,
            bx: sys.periodic_box(),
        }
    }
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
    fn pair<const ENERGY: bool>(
        &self,
        st: &Self::I,
        j: usize,
        acc: &mut [f64; 3],
        tensor: &mut [f64; 6],
    ) -> (f64, f64) {
        let d = self.bx.delta(st.0, self.pos[j]);
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
        if ENERGY {
            add_pair_tensor(tensor, fr, &d);
        }
        (e * inside, fr * r2)
    }
}

/// LJ forces of every particle added into `force`; (energy, virial) when `energy`.
pub(crate) fn lj_pass(
    force: &mut [[f64; 3]],
    neigh: NeighborSource<'_>,
    sys: &System,
    table: &LjTable,
    energy: bool,
) -> PairSums {
    if table.n == 1 {
        run_pair_kernel(force, neigh, &LjKernel::<true>::new(sys, table), energy)
    } else {
        run_pair_kernel(force, neigh, &LjKernel::<false>::new(sys, table), energy)
    }
}
