//! Walls for the MD engine's solutes: a WCA potential in the distance d to the wall surface of
//! the fluid's walls (`physics::walls`: the same shapes, signed distance and normal),
//! U(d) = 4ε[(σ/d)¹² − (σ/d)⁶] + ε for d < 2^(1/6) σ, zero beyond; the force −dU/dd acts
//! along the wall normal (into the fluid). A bead that reaches the surface (d ≤ 0) is an error:
//! the MD time step is too large for the wall's stiffness. `kernels/md_walls.cu` evaluates the
//! same expressions on the GPU.
//!
//! Across the channel the MD box is made longer than the fluid's box by more than the pair
//! cutoff and skin ([`pad_box`]): beads stay between the walls, so no pair interacts through
//! the periodic boundary across a wall, and the neighbour lists need no other change.

use super::system::System;
use crate::config::Config;
use crate::physics::walls::{Shape, WallShape};

pub use crate::config::walls::SoluteWall;

/// The walls as the MD engine feels them.
#[derive(Clone, Debug, PartialEq)]
pub struct WallPotential {
    pub shape: Shape,
    pub epsilon: f64,
    pub sigma: f64,
    pub cutoff: f64,
}

/// A bead that reached a wall surface: its index and distance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WallCrossing {
    pub index: usize,
    pub distance: f64,
}

impl WallPotential {
    /// The walls of a config, for its solutes.
    pub fn from_config(cfg: &Config) -> Option<WallPotential> {
        let walls = cfg.walls.as_ref()?;
        let p = walls.solute_wall();
        Some(WallPotential {
            shape: walls.shape(cfg),
            epsilon: p.epsilon,
            sigma: p.sigma,
            cutoff: p.cutoff(),
        })
    }

    /// Force on a bead at `p` and its energy, or None beyond the cutoff; Err(d) when the
    /// bead is on or beyond the surface (d ≤ 0).
    #[inline]
    pub fn force(&self, p: [f64; 3]) -> Result<Option<([f64; 3], f64)>, f64> {
        let d = self.shape.signed_distance(p);
        if d >= self.cutoff {
            return Ok(None);
        }
        if d <= 0.0 {
            return Err(d);
        }
        let n = self.shape.normal(p);
        let inv = 1.0 / d;
        let sr = self.sigma * inv;
        let sr2 = sr * sr;
        let sr6 = sr2 * sr2 * sr2;
        let fmag = 24.0 * self.epsilon * inv * (2.0 * sr6 * sr6 - sr6);
        let e = 4.0 * self.epsilon * (sr6 * sr6 - sr6) + self.epsilon;
        Ok(Some(([fmag * n[0], fmag * n[1], fmag * n[2]], e)))
    }

    /// Whether a bead at `p` is at least `clearance` from the wall (placing chains).
    pub fn admits(&self, p: [f64; 3], clearance: f64) -> bool {
        self.shape.signed_distance(p) >= clearance
    }
}

/// Add the wall forces to `force`; the wall energy, or the first bead on or beyond a surface.
pub fn wall_pass(
    force: &mut [[f64; 3]],
    sys: &System,
    walls: &WallPotential,
) -> Result<f64, WallCrossing> {
    let mut energy = 0.0;
    for (i, f) in force.iter_mut().enumerate() {
        match walls.force(sys.pos[i]) {
            Ok(None) => {}
            Ok(Some((w, e))) => {
                f[0] += w[0];
                f[1] += w[1];
                f[2] += w[2];
                energy += e;
            }
            Err(distance) => return Err(WallCrossing { index: i, distance }),
        }
    }
    Ok(energy)
}

/// Lengthen the MD box across the channel by `pad` (pair cutoff + skin + 1): beads between the
/// walls then never see each other through the periodic boundary across a wall.
pub fn pad_box(sys: &mut System, walls: &WallPotential, pad: f64) {
    let closed = walls.shape.closed_axes();
    for (len, closed) in sys.box_len.iter_mut().zip(closed) {
        if closed {
            *len += pad;
        }
    }
}
