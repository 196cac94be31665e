//! Pair forces: the pair styles ([`lj`]: LJ and WCA; [`dpd`]: DPD as a pair style and as a
//! thermostat) and the loop that runs a pair kernel over every neighbour of every particle.
//! The GPU evaluates the same expressions in `kernels/md.cu` (`md_lj_pass`, `md_dpd_pass`).
//!
//! Determinism: each particle sums its own force over its own neighbours in list order (pairs
//! are computed twice, once from each side, with exactly antisymmetric arithmetic), and energies
//! and virials are reduced over fixed chunks of [`CHUNK`] particles added in chunk order, so the
//! result is bitwise the same for any number of threads.

pub mod dpd;
pub mod lj;

use rayon::prelude::*;

pub use dpd::DpdParams;
pub use lj::{LjPair, LjTable};

use super::neighbor::{NeighborSource, CHUNK};
use super::settings::add_outer;

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

/// A pair interaction evaluated from particle i's side: `begin` loads what i needs once,
/// `pair` adds the force of neighbour j on i into `acc` and returns (energy, virial) of the pair;
/// with `ENERGY` it also adds the pair's virial tensor r_ij ⊗ F_ij into `tensor`.
pub(crate) trait PairKernel: Sync {
    type I: Copy;
    fn begin(&self, i: usize) -> Self::I;
    fn pair<const ENERGY: bool>(
        &self,
        i: &Self::I,
        j: usize,
        acc: &mut [f64; 3],
        tensor: &mut [f64; 6],
    ) -> (f64, f64);
}

/// Sums of a pair pass (each pair counted once): energy, scalar virial, virial tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PairSums {
    pub energy: f64,
    pub virial: f64,
    pub tensor: [f64; 6],
}

/// The virial tensor of a pair force fr·d at separation d into `t` (see [`add_outer`]).
#[inline(always)]
pub(crate) fn add_pair_tensor(t: &mut [f64; 6], fr: f64, d: &[f64; 3]) {
    add_outer(t, fr, d);
}

/// Run `kernel` over every neighbour j of every i, adding into `force`; returns half the summed
/// energy, virial and virial tensor (every pair is seen twice) when `energy`, else zeros.
pub(crate) fn run_pair_kernel<K: PairKernel>(
    force: &mut [[f64; 3]],
    neigh: NeighborSource<'_>,
    kernel: &K,
    energy: bool,
) -> PairSums {
    if energy {
        pair_pass::<_, true>(force, neigh, kernel)
    } else {
        pair_pass::<_, false>(force, neigh, kernel)
    }
}

/// [`run_pair_kernel`] with the energy and virial arithmetic compiled out when `!ENERGY` (as on
/// MD steps without output).
fn pair_pass<K: PairKernel, const ENERGY: bool>(
    force: &mut [[f64; 3]],
    neigh: NeighborSource<'_>,
    kernel: &K,
) -> PairSums {
    let parts: Vec<(f64, f64, [f64; 6])> = force
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, fchunk)| {
            let mut e = 0.0;
            let mut w = 0.0;
            let mut t = [0.0; 6];
            for (k, fi) in fchunk.iter_mut().enumerate() {
                let i = c * CHUNK + k;
                let st = kernel.begin(i);
                let mut acc = [0.0; 3];
                match neigh {
                    NeighborSource::List(v) => {
                        let ch = &v.chunks[c];
                        let nb = &ch.list[ch.offset[k] as usize..ch.offset[k + 1] as usize];
                        for &j in nb {
                            let (de, dw) = kernel.pair::<ENERGY>(&st, j as usize, &mut acc, &mut t);
                            if ENERGY {
                                e += de;
                                w += dw;
                            }
                        }
                    }
                    NeighborSource::All(n) => {
                        for j in 0..n {
                            if j != i {
                                let (de, dw) = kernel.pair::<ENERGY>(&st, j, &mut acc, &mut t);
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
            (e, w, t)
        })
        .collect();
    let mut sums = PairSums::default();
    for (e, w, t) in &parts {
        sums.energy += e;
        sums.virial += w;
        for (a, b) in sums.tensor.iter_mut().zip(t) {
            *a += b;
        }
    }
    sums.energy *= 0.5;
    sums.virial *= 0.5;
    for x in &mut sums.tensor {
        *x *= 0.5;
    }
    sums
}
