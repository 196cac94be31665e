//! Interaction parameters: pair styles (LJ, WCA, DPD), bond styles (harmonic, FENE), the
//! thermostat, and the counter-based random numbers of DPD and Langevin.

use crate::error::ConfigError;
use crate::rng::{det_ln, philox4x32_10, philox_key, splitmix64, u01_from_words};

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
        for &(i, j, eps, sig, rc) in entries {
            if i >= n_types || j >= n_types {
                return Err(ConfigError {
                    field: "md.pair.Lj.coeffs".into(),
                    problem: format!(
                        "entry for types ({}, {}) but the system has {n_types} type(s)",
                        i + 1,
                        j + 1
                    ),
                    fix: "use 1-based types that exist in the system".into(),
                });
            }
            for (name, v) in [("epsilon", eps), ("sigma", sig), ("cutoff", rc)] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(ConfigError {
                        field: format!("md.pair.Lj.coeffs ({}, {}).{name}", i + 1, j + 1),
                        problem: format!("must be finite and > 0 (got {v})"),
                        fix: "give positive LJ parameters, e.g. epsilon 1.0, sigma 1.0, cutoff 2.5"
                            .into(),
                    });
                }
            }
            let p = LjPair::new(eps, sig, rc, shifted);
            pairs[i * n_types + j] = Some(p);
            pairs[j * n_types + i] = Some(p);
            max_cutoff = max_cutoff.max(rc);
        }
        let mut out = Vec::with_capacity(pairs.len());
        for (k, p) in pairs.into_iter().enumerate() {
            match p {
                Some(p) => out.push(p),
                None => {
                    return Err(ConfigError {
                        field: "md.pair.Lj.coeffs".into(),
                        problem: format!(
                            "no coefficients for type pair ({}, {})",
                            k / n_types + 1,
                            k % n_types + 1
                        ),
                        fix: "add an entry (i, j, epsilon, sigma, cutoff) for every type pair"
                            .into(),
                    })
                }
            }
        }
        Ok(LjTable {
            n: n_types,
            pairs: out,
            max_cutoff,
        })
    }
}

/// DPD (Groot–Warren): F = [a (1 − r/rc) − γ w_D (e·v) + σ w_R θ/√dt] e, w_R = (1 − r/rc)^s,
/// w_D = w_R², σ² = 2 γ kT. θ has zero mean and unit variance.
#[derive(Clone, Debug, PartialEq)]
pub struct DpdParams {
    pub n: usize,
    /// Conservative amplitude a_ij (row-major n × n).
    pub a: Vec<f64>,
    pub gamma: f64,
    pub cutoff: f64,
    /// Exponent s of the random weight w_R = (1 − r/rc)^s (1 is the standard weight).
    pub exponent: f64,
}

impl DpdParams {
    pub fn uniform(n_types: usize, a: f64, gamma: f64, cutoff: f64, exponent: f64) -> Self {
        DpdParams {
            n: n_types,
            a: vec![a; n_types * n_types],
            gamma,
            cutoff,
            exponent,
        }
    }

    /// w_R at r (0 ≤ r < rc).
    #[inline(always)]
    pub fn weight_r(&self, r: f64) -> f64 {
        let x = 1.0 - r / self.cutoff;
        if self.exponent == 1.0 {
            x
        } else if self.exponent == 0.5 {
            x.sqrt()
        } else if self.exponent == 2.0 {
            x * x
        } else {
            x.powf(self.exponent)
        }
    }
}

/// The non-bonded interaction of the whole system.
#[derive(Clone, Debug, PartialEq)]
pub enum PairStyle {
    None,
    Lj(LjTable),
    /// Full DPD: conservative, dissipative and random forces (DPD is its own thermostat).
    Dpd(DpdParams),
}

impl PairStyle {
    pub fn cutoff(&self) -> f64 {
        match self {
            PairStyle::None => 0.0,
            PairStyle::Lj(t) => t.max_cutoff,
            PairStyle::Dpd(d) => d.cutoff,
        }
    }
}

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

/// How the MD part is thermostatted (besides a DPD pair style, which thermostats itself).
#[derive(Clone, Copy, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub enum MdThermostat {
    /// Plain velocity Verlet (NVE).
    #[default]
    None,
    /// Langevin with friction rate `damping` (1/time), integrated as BAOAB: the O step
    /// v ← e^{−γ dt} v + √(kT/m (1 − e^{−2γ dt})) ξ is exact for the Ornstein–Uhlenbeck part.
    Langevin { damping: f64 },
    /// DPD dissipative and random pair forces only (LAMMPS `dpd/tstat`), on top of the pair style.
    Dpd {
        gamma: f64,
        cutoff: f64,
        exponent: f64,
    },
}

/// Key salts: each stream family gets its own Philox key derived from the run seed, so DPD,
/// Langevin and initial-velocity draws never coincide with each other or with the MPC cell
/// streams (which use the bare run seed).
const DPD_SALT: u64 = 0x4450_445f_5041_4952;
const LANGEVIN_SALT: u64 = 0x4c41_4e47_4556_494e;
const VELOCITY_SALT: u64 = 0x5645_4c4f_4349_5459;

/// The Philox key of the DPD pair streams of a run seed.
#[inline]
pub fn dpd_key(seed: u64) -> [u32; 2] {
    philox_key(splitmix64(seed ^ DPD_SALT))
}

/// θ_ij of the DPD random force: uniform with zero mean and unit variance, from Philox with
/// counter (min tag, max tag, step, 0). Symmetric in (i, j), so both particles of a pair draw
/// the same number and Newton's third law holds exactly; independent of particle order,
/// thread count or backend.
#[inline(always)]
pub fn dpd_theta(key: [u32; 2], tag_i: u32, tag_j: u32, step: u64) -> f64 {
    let (lo, hi) = if tag_i < tag_j {
        (tag_i, tag_j)
    } else {
        (tag_j, tag_i)
    };
    let w = philox4x32_10([lo, hi, step as u32, (step >> 32) as u32], key);
    let u = u01_from_words(w[0], w[1]);
    // uniform on [−√3, √3): variance 1
    3f64.sqrt() * (2.0 * u - 1.0)
}

/// Three standard normal numbers for particle `tag` at `step` in stream `salt`
/// (Marsaglia's polar method on Philox blocks; IEEE-exact operations plus `det_ln`).
fn normals3(seed: u64, salt: u64, tag: u32, step: u64) -> [f64; 3] {
    let key = philox_key(splitmix64(seed ^ salt));
    let mut out = [0.0; 3];
    let mut got = 0;
    let mut attempt = 0u32;
    while got < 3 {
        let w = philox4x32_10([tag, attempt, step as u32, (step >> 32) as u32], key);
        attempt += 1;
        let v1 = 2.0 * u01_from_words(w[0], w[1]) - 1.0;
        let v2 = 2.0 * u01_from_words(w[2], w[3]) - 1.0;
        let s = v1 * v1 + v2 * v2;
        if s < 1.0 && s > 0.0 {
            let f = (-2.0 * det_ln(s) / s).sqrt();
            out[got] = v1 * f;
            got += 1;
            if got < 3 {
                out[got] = v2 * f;
                got += 1;
            }
        }
    }
    out
}

/// Langevin noise of one particle at one step.
#[inline]
pub fn langevin_normals(seed: u64, tag: u32, step: u64) -> [f64; 3] {
    normals3(seed, LANGEVIN_SALT, tag, step)
}

/// Initial-velocity draws of one particle.
#[inline]
pub fn velocity_normals(seed: u64, tag: u32) -> [f64; 3] {
    normals3(seed, VELOCITY_SALT, tag, 0)
}

/// Everything that defines the forces.
#[derive(Clone, Debug, PartialEq)]
pub struct ForceField {
    pub pair: PairStyle,
    /// Bond styles, indexed by bond type (0-based).
    pub bond_styles: Vec<BondStyle>,
}
