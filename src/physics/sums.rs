//! One cell's sums as the CPU backend forms them ([`CellAccumulator`]): f64 in the order of its
//! particles, or 64-bit fixed point (`crate::fixed_sums`), whose value does not depend on the
//! order. The fixed-point form is the GPU's (`kernels/cell_sums.cuh`): the same terms, the same
//! conversions, the mass rebuilt as m · (fluid count) + Σ solute masses, so both read the same
//! [`CellSums`] and [`RuleSums`] back.

use super::rules::{rule_terms, Rule, RuleSums, RULE_SUMS};
use super::CellSums;
use crate::fixed_sums::{FixedScales, SumKind};

/// The fixed-point sums of one cell: Σ m v, Σ m v², Σ solute mass, counts, and the rule's
/// extended sums.
#[derive(Clone, Copy, Debug, Default)]
struct FixedCell {
    momentum: [i64; 3],
    mv2: i64,
    solute_mass: i64,
    fluid: u32,
    solutes: u32,
    ext: [i64; RULE_SUMS],
}

/// A cell's sums being formed, in the run's arithmetic.
pub struct CellAccumulator<'a> {
    scales: Option<&'a FixedScales>,
    rule: Rule,
    float: CellSums,
    float_ext: RuleSums,
    fixed: FixedCell,
}

impl<'a> CellAccumulator<'a> {
    pub fn new(scales: Option<&'a FixedScales>, rule: Rule) -> CellAccumulator<'a> {
        CellAccumulator {
            scales,
            rule,
            float: CellSums::default(),
            float_ext: RuleSums::default(),
            fixed: FixedCell::default(),
        }
    }

    /// Add a particle of mass `m` and velocity `v` (LE image offset included); `solute` says
    /// whether its mass is its own (a fluid particle's is the run's m, counted).
    #[inline]
    pub fn add(&mut self, m: f64, v: [f64; 3], solute: bool) {
        let Some(s) = self.scales else {
            self.float.add(m, v);
            return;
        };
        let f = &mut self.fixed;
        for (q, vk) in f.momentum.iter_mut().zip(v) {
            *q = q.wrapping_add(s.fixed(SumKind::Momentum, m * vk));
        }
        let mv2 = m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        f.mv2 = f.mv2.wrapping_add(s.fixed(SumKind::Energy, mv2));
        if solute {
            f.solute_mass = f.solute_mass.wrapping_add(s.fixed(SumKind::Mass, m));
            f.solutes += 1;
        } else {
            f.fluid += 1;
        }
    }

    /// Add a particle's extended terms (position `r` relative to the cell centre, draw `xi`).
    #[inline]
    pub fn add_rule(&mut self, m: f64, v: [f64; 3], r: [f64; 3], xi: [f64; 3]) {
        let Some(s) = self.scales else {
            self.float_ext.add(self.rule, m, v, r, xi);
            return;
        };
        let t = rule_terms(self.rule, m, v, r, xi);
        for (k, x) in t.iter().enumerate().take(self.rule.sums_len()) {
            let q = s.fixed(self.rule.sum_kind(k), *x);
            self.fixed.ext[k] = self.fixed.ext[k].wrapping_add(q);
        }
    }

    /// The plain sums (`fluid_mass`: the run's particle mass m).
    pub fn sums(&self, fluid_mass: f64) -> CellSums {
        let Some(s) = self.scales else {
            return self.float;
        };
        let f = &self.fixed;
        CellSums {
            momentum: f.momentum.map(|q| s.value(SumKind::Momentum, q)),
            mass: fluid_mass * f.fluid as f64 + s.value(SumKind::Mass, f.solute_mass),
            mv2: s.value(SumKind::Energy, f.mv2),
            count: f.fluid + f.solutes,
        }
    }

    /// The rule's extended sums.
    pub fn rule_sums(&self) -> RuleSums {
        let Some(s) = self.scales else {
            return self.float_ext;
        };
        let mut out = RuleSums::default();
        for k in 0..self.rule.sums_len() {
            out.0[k] = s.value(self.rule.sum_kind(k), self.fixed.ext[k]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed_sums::SumRange;

    fn scales() -> FixedScales {
        FixedScales::new(&SumRange {
            mass: 1.0,
            kt: 1.0,
            particles_per_cell: 10,
            cells: [16, 16, 16],
            solute_mass: 5.0,
            flow_speed: 2.0,
            imposed_speed: 2.0,
        })
        .unwrap()
    }

    /// Mass, velocity, whether a solute, position in the cell, draw.
    type Particle = (f64, [f64; 3], bool, [f64; 3], [f64; 3]);

    /// Twelve particles (two of them solutes) with positions and draws.
    fn particles() -> Vec<Particle> {
        (0..12)
            .map(|i| {
                let x = i as f64;
                let v = [0.3 * x - 1.1, 1.7 - 0.2 * x, (0.37 * x).sin()];
                let r = [(0.1 * x).cos() * 0.5, 0.05 * x - 0.3, 0.4 - 0.06 * x];
                let xi = [0.2 * x - 1.0, 0.5, -0.1 * x];
                let solute = i % 6 == 5;
                (if solute { 5.0 } else { 1.0 }, v, solute, r, xi)
            })
            .collect()
    }

    fn sums(
        scales: Option<&FixedScales>,
        order: impl Iterator<Item = usize>,
    ) -> (CellSums, RuleSums) {
        let p = particles();
        let mut acc = CellAccumulator::new(scales, Rule::AtAngular);
        for i in order {
            let (m, v, solute, r, xi) = p[i];
            acc.add(m, v, solute);
            acc.add_rule(m, v, r, xi);
        }
        (acc.sums(1.0), acc.rule_sums())
    }

    #[test]
    fn fixed_point_sums_ignore_the_order_and_agree_with_f64_to_their_resolution() {
        let s = scales();
        let forward = sums(Some(&s), 0..12);
        let backward = sums(Some(&s), (0..12).rev());
        assert_eq!(forward, backward);
        let (float, float_ext) = sums(None, 0..12);
        let (fixed, fixed_ext) = forward;
        assert_eq!(fixed.count, 12);
        assert!((fixed.mass - float.mass).abs() <= 1e-12);
        assert!((fixed.mv2 - float.mv2).abs() <= 12.0 * s.resolution(SumKind::Energy));
        for k in 0..3 {
            let d = (fixed.momentum[k] - float.momentum[k]).abs();
            assert!(d <= 12.0 * s.resolution(SumKind::Momentum), "{k}: {d}");
        }
        for k in 0..Rule::AtAngular.sums_len() {
            let d = (fixed_ext.0[k] - float_ext.0[k]).abs();
            assert!(
                d <= 12.0 * s.resolution(Rule::AtAngular.sum_kind(k)),
                "{k}: {d}"
            );
        }
    }
}
