//! DPD pair forces: the full pair style (conservative, dissipative and random) and the
//! thermostat-only variant (LAMMPS `dpd/tstat`: dissipative and random forces only).

use super::{add_pair_tensor, run_pair_kernel, PairKernel, PairSums};
use crate::md::boundary::PeriodicBox;
use crate::md::neighbor::NeighborSource;
use crate::md::random::{dpd_key, dpd_theta};
use crate::md::settings::MdSettings;
use crate::md::system::System;

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

/// The amplitude σ/√dt = √(2 γ kT)/√dt of the DPD random force (pair style and thermostat).
#[inline]
pub fn noise_amplitude(gamma: f64, kt: f64, dt: f64) -> f64 {
    (2.0 * gamma * kt).sqrt() / dt.sqrt()
}

/// DPD pair forces; `conservative` false is the thermostat-only variant (no a_ij term).
struct DpdKernel<'a> {
    sys: &'a System,
    p: &'a DpdParams,
    conservative: bool,
    bx: PeriodicBox,
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
    fn pair<const ENERGY: bool>(
        &self,
        &i: &usize,
        j: usize,
        acc: &mut [f64; 3],
        tensor: &mut [f64; 6],
    ) -> (f64, f64) {
        let (sys, p) = (self.sys, self.p);
        let (d, image) = self.bx.delta_image(sys.pos[i], sys.pos[j]);
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let rc = p.cutoff;
        if r2 >= rc * rc || r2 == 0.0 {
            return (0.0, 0.0);
        }
        let r = r2.sqrt();
        let wc = 1.0 - r / rc;
        let wr = p.weight_r(r);
        let (vi, mut vj) = (sys.vel[i], sys.vel[j]);
        if image != 0.0 {
            // j's Lees-Edwards image moves with the flow of its period: γ̇ Ly faster above
            vj[0] += image * self.bx.lees_edwards().velocity;
        }
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
        if ENERGY {
            add_pair_tensor(tensor, fr, &d);
        }
        (e, w)
    }
}

/// DPD forces of every particle at MD step `step` added into `force`; returns the energy and
/// virial of the conservative part (zeros for the thermostat-only variant) and the virial
/// tensor of all DPD forces.
pub(crate) fn dpd_pass(
    force: &mut [[f64; 3]],
    neigh: NeighborSource<'_>,
    sys: &System,
    p: &DpdParams,
    conservative: bool,
    settings: &MdSettings,
    step: u64,
) -> PairSums {
    let k = DpdKernel {
        sys,
        p,
        conservative,
        bx: sys.periodic_box(),
        noise: noise_amplitude(p.gamma, settings.kt, settings.dt),
        key: dpd_key(settings.seed),
        step,
    };
    run_pair_kernel(force, neigh, &k, true)
}
