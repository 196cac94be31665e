//! Fixed-point sums: the cell sums (and every other reduction that feeds the trajectory or the
//! observables) added as integers, so that their value does not depend on the order of the
//! additions: the same run gives the same bits on the CPU with any thread or slab count, on one
//! GPU, on slabs over GPUs and over MPI ranks (docs/determinism.md).
//!
//! A leaf module: it takes plain numbers ([`SumRange`]), so `config` can check a run's range
//! before anything is allocated and `physics` can carry the scales without importing each other.
//!
//! * **Cell sums** are 64-bit integers: each particle's term `x` enters as `round(x · 2^e)` (round
//!   to nearest, ties to even: `round_ties_even` here, `__double2ll_rn` on the GPU), the cell adds
//!   the integers (wrapping addition is associative; the range below keeps it from wrapping) and
//!   the cell pass reads `q as f64 · 2^−e` (`__ll2double_rn` on the GPU): both conversions are
//!   exact operations on the same inputs, so the CPU and the GPU get the same bits.
//! * **Global sums** (the step report, the moments) are 53-bit fixed point held in f64: each
//!   term is rounded to a multiple of `2^−e` with every partial sum below `2^53 · 2^−e`, so f64
//!   additions of them are exact, in any order, over threads, blocks, GPUs and ranks.
//!
//! The exponent of each kind of sum is the largest that keeps the largest plausible sum of one
//! cell (or of the whole box) below `2^62` (`2^52`) units, from the run's parameters: particle
//! mass, kT, particles per cell, the imposed flow's speeds and the solutes' masses.

/// What a cell sum adds (its scale is chosen per kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumKind {
    /// Σ m v (and MPC-AT's Σ m ξ).
    Momentum = 0,
    /// Σ m v².
    Energy = 1,
    /// Σ m of the solutes.
    Mass = 2,
    /// Particle counts (scale 1: the integers themselves).
    Count = 3,
    /// Σ m r, r relative to the cell centre.
    Moment = 4,
    /// Σ m r⊗r.
    Second = 5,
    /// Σ m r⊗v, Σ m r × (v − ξ).
    Angular = 6,
}

/// Scales of cell sums (the kernels' `MPC_FIX_KINDS`): the seven kinds and a spare of scale 1,
/// so that the parameter struct's arrays fill whole 64-byte lines.
pub const CELL_KINDS: usize = 8;

/// What the global sums add (the step report, the moments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalKind {
    /// Σ m v, collisional stress Σ m Δv (y − y_cell), wall momentum.
    Momentum = 0,
    /// Σ m v², E_rel, kinetic stress Σ m v_y (v_x − u).
    Energy = 1,
    /// Σ v (the velocity profile).
    Velocity = 2,
}

/// Grids of global sums (the kernels' `MPC_GLOBAL_KINDS`): the three kinds and a spare.
pub const GLOBAL_KINDS: usize = 4;

/// Gaussian tails are cut at this many thermal speeds (a 32σ component has probability
/// e^−512 per draw: never, over any run).
pub const THERMAL_SIGMAS: f64 = 32.0;
/// Fluid particles one cell may hold, beyond which the range is not promised: 4 M + 64
/// (the Poisson tail at 4 M + 64 is below 10⁻⁴⁰ for any M).
pub fn fluid_capacity(particles_per_cell: u32) -> f64 {
    4.0 * particles_per_cell as f64 + 64.0
}
/// Solutes of the largest mass one cell may hold within the range.
pub const SOLUTES_PER_CELL: f64 = 16.0;
/// The heaviest solute a run accepts without an MD config naming heavier beads, in fluid
/// masses.
pub const SOLUTE_MASS_RATIO: f64 = 64.0;

/// Cell sums need at least this resolution (in units of the kind's thermal value:
/// sqrt(m kT) for momenta, kT for energies, m for masses, m a^2 …): 2^−30 of it.
pub const MIN_RESOLUTION_BITS: i32 = 30;

/// The run's parameters that bound its sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SumRange {
    pub mass: f64,
    pub kt: f64,
    pub particles_per_cell: u32,
    pub cells: [u32; 3],
    /// The largest solute mass the run takes (at least [`SOLUTE_MASS_RATIO`] · mass).
    pub solute_mass: f64,
    /// The fastest flow a cell may see: the imposed speeds and, for a body force, the grid's
    /// speed limit min(L) / (2 h).
    pub flow_speed: f64,
    /// The imposed speeds alone: 1.5 γ̇ Ly (shear and the LE image offset) and wall speeds (the
    /// global sums' grids; a body-driven flow is taken to stay within a few thermal speeds).
    pub imposed_speed: f64,
}

/// Why a run's sums cannot be fixed point: the kind whose resolution would be too coarse.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RangeError {
    pub kind: SumKind,
    /// Resolution over the kind's thermal unit.
    pub resolution: f64,
}

/// The scales (powers of two) of a run's fixed-point sums and their inverses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FixedScales {
    /// Per [`SumKind`]: a term x enters a cell sum as round(x · cell[kind]).
    pub cell: [f64; CELL_KINDS],
    pub cell_inv: [f64; CELL_KINDS],
    /// Per [`GlobalKind`]: a term x enters a global sum as round(x · global[kind]) / global[kind].
    pub global: [f64; GLOBAL_KINDS],
    pub global_inv: [f64; GLOBAL_KINDS],
    /// The heaviest solute the range holds (a heavier one is refused when handed over).
    pub max_solute_mass: f64,
}

impl SumRange {
    /// The largest speed a particle's term may carry.
    pub fn max_speed(&self) -> f64 {
        THERMAL_SIGMAS * (self.kt / self.mass).sqrt() + self.flow_speed
    }

    /// The largest mass one cell may hold: fluid capacity and the heaviest solutes.
    pub fn cell_mass(&self) -> f64 {
        self.mass * fluid_capacity(self.particles_per_cell)
            + SOLUTES_PER_CELL * self.solute_mass.max(SOLUTE_MASS_RATIO * self.mass)
    }

    /// The largest |sum| of one cell, per kind (positions relative to the cell centre are at
    /// most one cell in each component).
    fn cell_bounds(&self) -> [f64; CELL_KINDS] {
        let (m, v) = (self.cell_mass(), self.max_speed());
        let count = fluid_capacity(self.particles_per_cell) + SOLUTES_PER_CELL;
        [m * v, m * v * v, m, count, m, m, 4.0 * m * v, 1.0]
    }

    /// Each kind's thermal unit (what its resolution is measured against).
    fn units(&self) -> [f64; CELL_KINDS] {
        let m = self.mass;
        let p = (m * self.kt).sqrt();
        [p, self.kt, m, 1.0, m, m, p, 1.0]
    }
}

/// The largest power of two s with bound · s ≤ 2^bits (clamped to the f64 range).
fn scale_below(bound: f64, bits: i32) -> f64 {
    let e = (bits as f64 - bound.max(f64::MIN_POSITIVE).log2()).floor();
    2f64.powi(e.clamp(-1000.0, 1000.0) as i32)
}

impl FixedScales {
    /// The scales of a run, or the kind whose resolution would be coarser than
    /// 2^−[`MIN_RESOLUTION_BITS`] of its thermal unit.
    pub fn new(r: &SumRange) -> Result<FixedScales, RangeError> {
        let bounds = r.cell_bounds();
        let units = r.units();
        let mut cell = [1.0; CELL_KINDS];
        for k in 0..=SumKind::Angular as usize {
            if k != SumKind::Count as usize {
                cell[k] = scale_below(bounds[k], 62);
            }
        }
        const KINDS: [SumKind; 7] = [
            SumKind::Momentum,
            SumKind::Energy,
            SumKind::Mass,
            SumKind::Count,
            SumKind::Moment,
            SumKind::Second,
            SumKind::Angular,
        ];
        for kind in KINDS {
            let k = kind as usize;
            let resolution = 1.0 / (cell[k] * units[k]);
            let fine = resolution <= 2f64.powi(-MIN_RESOLUTION_BITS);
            if kind != SumKind::Count && !fine {
                return Err(RangeError { kind, resolution });
            }
        }
        // the whole box: Σ |term| over twice the fluid's particles (solutes up to as much mass
        // again) moving at the flow speed plus a thermal speed, four times over for momenta
        // (kinetic energies: the flow's plus four times kT per particle); a sum past this
        // bound is still an f64 sum, exact no more but never wrapped
        let n_cells: f64 = r.cells.iter().map(|&l| l as f64).product();
        let particles = 2.0 * n_cells * r.particles_per_cell as f64;
        let (f, sigma2) = (r.imposed_speed, r.kt / r.mass);
        let speed = f + sigma2.sqrt();
        let bounds = [
            particles * r.mass * 4.0 * speed,
            particles * r.mass * (f * f + 4.0 * sigma2),
            particles * 4.0 * speed,
            particles,
        ];
        let global = bounds.map(|b| scale_below(b, 52));
        Ok(FixedScales {
            cell,
            cell_inv: cell.map(|s| 1.0 / s),
            global,
            global_inv: global.map(|s| 1.0 / s),
            max_solute_mass: r.solute_mass.max(SOLUTE_MASS_RATIO * r.mass),
        })
    }

    /// Resolution of a cell sum of `kind` (its least step).
    pub fn resolution(&self, kind: SumKind) -> f64 {
        self.cell_inv[kind as usize]
    }

    /// A term of a cell sum of `kind` in fixed point.
    #[inline]
    pub fn fixed(&self, kind: SumKind, x: f64) -> i64 {
        to_fixed(x, self.cell[kind as usize])
    }

    /// A cell sum of `kind` back in f64.
    #[inline]
    pub fn value(&self, kind: SumKind, q: i64) -> f64 {
        from_fixed(q, self.cell_inv[kind as usize])
    }

    /// A term of a global sum of `kind`, rounded onto its grid (f64 sums of such terms are
    /// exact).
    #[inline]
    pub fn global_term(&self, kind: GlobalKind, x: f64) -> f64 {
        let k = kind as usize;
        (x * self.global[k]).round_ties_even() * self.global_inv[k]
    }
}

/// round(x · scale) to nearest, ties to even: `__double2ll_rn(x * scale)` on the GPU.
#[inline]
pub fn to_fixed(x: f64, scale: f64) -> i64 {
    (x * scale).round_ties_even() as i64
}

/// q · (1 / scale): `__ll2double_rn(q) * inv` on the GPU (exact for a power-of-two scale).
#[inline]
pub fn from_fixed(q: i64, inv: f64) -> f64 {
    q as f64 * inv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range() -> SumRange {
        SumRange {
            mass: 1.0,
            kt: 1.0,
            particles_per_cell: 10,
            cells: [256, 256, 256],
            solute_mass: 5.0,
            flow_speed: 1.5 * 0.05 * 256.0,
            imposed_speed: 1.5 * 0.05 * 256.0,
        }
    }

    #[test]
    fn scales_are_powers_of_two_within_range() {
        let s = FixedScales::new(&range()).unwrap();
        let r = range();
        for k in 0..CELL_KINDS {
            assert_eq!(s.cell[k].log2().fract(), 0.0);
            assert!(r.cell_bounds()[k] * s.cell[k] <= 2f64.powi(62));
            assert_eq!(s.cell[k] * s.cell_inv[k], 1.0);
        }
        // a 256³ box at M = 10 under shear: momenta to 2^−40 of sqrt(m kT) or finer
        assert!(s.resolution(SumKind::Momentum) <= 2f64.powi(-40));
        assert!(s.resolution(SumKind::Energy) <= 2f64.powi(-30));
    }

    #[test]
    fn conversions_round_to_nearest_even_and_back_exactly() {
        assert_eq!(to_fixed(2.5, 1.0), 2);
        assert_eq!(to_fixed(3.5, 1.0), 4);
        assert_eq!(to_fixed(-2.5, 1.0), -2);
        assert_eq!(from_fixed(to_fixed(0.375, 8.0), 0.125), 0.375);
    }

    #[test]
    fn integer_sums_do_not_depend_on_the_order() {
        let s = FixedScales::new(&range()).unwrap();
        let xs: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 1013) as f64 * 0.37 - 180.0)
            .collect();
        let q = |v: &[f64]| {
            v.iter()
                .map(|&x| s.fixed(SumKind::Momentum, x))
                .sum::<i64>()
        };
        let mut rev = xs.clone();
        rev.reverse();
        assert_eq!(q(&xs), q(&rev));
        let g = |v: &[f64]| {
            v.iter()
                .map(|&x| s.global_term(GlobalKind::Energy, x))
                .sum::<f64>()
        };
        assert_eq!(g(&xs).to_bits(), g(&rev).to_bits());
    }

    #[test]
    fn a_flow_beyond_the_range_is_refused() {
        let mut r = range();
        r.flow_speed = 1e12;
        let e = FixedScales::new(&r).unwrap_err();
        assert_eq!(e.kind, SumKind::Momentum);
    }
}
