//! How the box is cut into y slabs (one per GPU, several per GPU, or the CPU's slabs): whole cell
//! layers, as even as possible in the work each slab holds.
//!
//! Without walls every layer holds the same work, so the layers are shared evenly. Between walls
//! a layer's work is its fluid (the particles streamed, binned and collided), its cells (the cell
//! pass and the memsets run over solid cells too) and its surface (particles near a wall search
//! for their impact, cut cells are filled with virtual particles): a pipe's middle layers hold
//! 1.5 times the fluid of its outer ones, a cosine channel's outer quarters hold none, and a
//! porous bed's layers cost more than an open layer's. Equal layers then leave the step as slow
//! as the fullest slab's, whatever the fluid of the others (docs/walls.md has the measurements),
//! so the layers are shared by their work instead.
//! The bounds depend only on the config: every rank computes the same ones, a resume on another
//! GPU count cuts the same box again, and since the sums are exact in any order (fixed point), the
//! cut never changes the results.

use crate::physics::Physics;

/// The work of a layer's cells beside its fluid, as a share of a full fluid layer's: the cell
/// pass and the memsets touch each cell's sums (64-128 bytes) once or twice a step, the fluid
/// pass moves M = 10 particles of 32 bytes per cell several times.
pub const CELL_WORK: f64 = 0.1;

/// The extra work of the band within a cell of a wall surface, per unit of its volume, as a
/// share of a full fluid layer's: a distance field's (a root search over trilinear reads for
/// every particle that may hit, up to 27 field reads per cut cell), fitted to the measured cost
/// of the walls bench's porous sample on one GPU (its band is about a ninth of the volume) and
/// of its porous bed on two (docs/walls.md). The analytic shapes' (closed-form impacts) is lost
/// in the noise: a cosine channel's cost per particle on one GPU is its solid cells' work.
pub const FIELD_SURFACE_WORK: f64 = 8.0;
pub const SHAPE_SURFACE_WORK: f64 = 0.0;

/// Sample points per layer along x and along z (fewer where the box is narrower) and across the
/// layer's height, for its fluid share.
const SAMPLES_ALONG: usize = 64;
const SAMPLES_ACROSS: usize = 2;

/// The first layer of each of `g` slabs of `ly` layers (as even as possible), then `ly`.
pub fn slab_bounds(ly: u32, g: usize) -> Vec<u32> {
    (0..=g)
        .map(|k| (k as u64 * ly as u64 / g as u64) as u32)
        .collect()
}

/// The fewest layers a slab may have: a particle must never cross a whole neighbour slab in
/// one step (streaming by up to 12 thermal speeds, body force, and one cell of grid shift).
pub fn min_slab_layers(phys: &Physics) -> u32 {
    let sigma = (phys.kt / phys.mass).sqrt();
    let reach = 12.0 * sigma * phys.h + 0.5 * phys.acceleration[1].abs() * phys.h * phys.h;
    (reach.ceil() as u32 + 2).max(3)
}

/// The slabs of the box of `phys` for `g` slabs: [`slab_bounds`] without walls (or with
/// `MPCBOX_SLAB_CUT=even`); between walls [`balanced_bounds`] of each layer's work (its fluid
/// share, [`CELL_WORK`] and, for a distance field, [`FIELD_SURFACE_WORK`] per share near the
/// surface), no slab thinner than [`min_slab_layers`] (nor than the even cut's thinnest, so that
/// any box the even cut fits is cut).
pub fn slab_bounds_for(phys: &Physics, g: usize) -> Vec<u32> {
    let ly = phys.cells[1];
    let even = crate::knobs::knobs().is("MPCBOX_SLAB_CUT", "even");
    let Some(walls) = phys.walls.as_ref().filter(|_| !even) else {
        return slab_bounds(ly, g);
    };
    let surface = match walls.shape {
        crate::physics::walls::Shape::Field(_) => {
            weight("MPCBOX_SLAB_SURFACE_WORK", FIELD_SURFACE_WORK)
        }
        _ => SHAPE_SURFACE_WORK,
    };
    let cells = weight("MPCBOX_SLAB_CELL_WORK", CELL_WORK);
    let work: Vec<f64> = shares_per_layer(&walls.shape, phys.cells)
        .into_iter()
        .map(|s| s.fluid + cells + surface * s.near_surface)
        .collect();
    let min_layers = min_slab_layers(phys).min(ly / g as u32).max(1);
    balanced_bounds(&work, g, min_layers)
}

/// A weight of the work cut: its knob's percent when set (calibration runs), else `default`.
fn weight(knob: &str, default: f64) -> f64 {
    let percent = crate::knobs::knobs()
        .get(knob)
        .and_then(|v| v.parse::<u32>().ok());
    percent.map_or(default, |p| f64::from(p) / 100.0)
}

/// What a y layer holds, as shares of its volume.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerShares {
    /// In the fluid.
    pub fluid: f64,
    /// Within a cell of a wall surface, on either side.
    pub near_surface: f64,
}

/// The shares of each y layer (0..cells[1]) in the fluid and near a surface, from the walls'
/// signed distance at up to 64 × 2 × 64 points of a Kronecker sequence in the layer (irrational
/// steps, so a periodic lattice of obstacles is not aliased): accurate to about 1% of a layer,
/// enough to balance on.
pub fn shares_per_layer<S: crate::physics::walls::WallShape + Sync>(
    shape: &S,
    cells: [u32; 3],
) -> Vec<LayerShares> {
    use rayon::prelude::*;
    let (lx, lz) = (cells[0] as f64, cells[2] as f64);
    let count = SAMPLES_ALONG.min(cells[0] as usize).max(1)
        * SAMPLES_ALONG.min(cells[2] as usize).max(1)
        * SAMPLES_ACROSS;
    // the additive recurrence of the plastic number's powers (R3), as in low-discrepancy
    // sampling: fractional parts of j · (1/φ, 1/φ², 1/φ³)
    let phi = 1.324_717_957_244_746_f64;
    let step = [1.0 / phi, 1.0 / (phi * phi), 1.0 / (phi * phi * phi)];
    (0..cells[1])
        .into_par_iter()
        .map(|iy| {
            let (mut fluid, mut near) = (0usize, 0usize);
            for j in 0..count {
                let u = step.map(|s| (0.5 + s * j as f64).fract());
                let d = shape.signed_distance([u[0] * lx, iy as f64 + u[1], u[2] * lz]);
                fluid += usize::from(d > 0.0);
                near += usize::from(d.abs() < 1.0);
            }
            LayerShares {
                fluid: fluid as f64 / count as f64,
                near_surface: near as f64 / count as f64,
            }
        })
        .collect()
}

/// The first layer of each of `g` slabs, then `work.len()`: slab k ends at the layer edge where
/// the work summed from layer 0 comes nearest to k/g of the whole, each slab at least
/// `min_layers` thick (`g · min_layers` must not exceed the layers). Within a layer's work of
/// the best cut; equal work gives equal slabs.
pub fn balanced_bounds(work: &[f64], g: usize, min_layers: u32) -> Vec<u32> {
    let ly = work.len() as u32;
    debug_assert!(g as u64 * min_layers as u64 <= ly as u64);
    // the work below each layer edge
    let mut sum = 0.0;
    let upto: Vec<f64> = std::iter::once(0.0)
        .chain(work.iter().map(|w| {
            sum += w.max(0.0);
            sum
        }))
        .collect();
    let total = upto[work.len()];
    let mut bounds = vec![0u32; g + 1];
    bounds[g] = ly;
    for k in 1..g {
        let target = total * k as f64 / g as f64;
        // the first edge at or past the target, or the one before it if that is nearer
        let past = upto.partition_point(|&s| s < target).min(work.len()) as u32;
        let edge = if past > 0 && target - upto[past as usize - 1] < upto[past as usize] - target {
            past - 1
        } else {
            past
        };
        let lowest = bounds[k - 1] + min_layers;
        let highest = ly - (g - k) as u32 * min_layers;
        bounds[k] = edge.clamp(lowest, highest.max(lowest));
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_work_gives_equal_slabs() {
        assert_eq!(
            balanced_bounds(&[1.0; 256], 4, 3),
            vec![0, 64, 128, 192, 256]
        );
        let b = balanced_bounds(&[0.7; 17], 3, 3);
        let thick: Vec<u32> = b.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(thick.iter().all(|&t| t == 5 || t == 6), "{b:?}");
    }

    #[test]
    fn work_in_the_middle_half_is_shared_by_all_slabs() {
        // a channel in the middle half of 256 layers: each of 4 slabs gets a quarter of it
        let work: Vec<f64> = (0..256)
            .map(|iy| if (64..192).contains(&iy) { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(balanced_bounds(&work, 4, 3), vec![0, 96, 128, 160, 256]);
    }

    #[test]
    fn no_slab_is_thinner_than_asked() {
        // all the work in 4 layers: 4 slabs of 1 layer would balance it, 5 layers is the least
        let mut work = vec![0.0; 40];
        work[20..24].fill(1.0);
        let b = balanced_bounds(&work, 4, 5);
        assert_eq!(b[0], 0);
        assert_eq!(b[4], 40);
        assert!(b.windows(2).all(|w| w[1] - w[0] >= 5), "{b:?}");
    }

    #[test]
    fn a_slit_in_y_is_fluid_between_its_plates_and_near_them_at_them() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (16, 20, 16), particles_per_cell: 5, seed: 3, time_step: 0.1, steps: 10, \
             collision: Srd(angle_deg: 130.0), walls: Some(Slit(height: Some(9.5))))",
        )
        .unwrap();
        let phys = Physics::from_config(&cfg);
        let shape = &phys.walls.as_ref().unwrap().shape;
        let share = shares_per_layer(shape, phys.cells);
        for (iy, s) in share.iter().map(|s| s.fluid).enumerate() {
            let want = match iy {
                // plates at y = 5.25 and 14.75
                6..=13 => 1.0,
                5 | 14 => 0.75,
                _ => 0.0,
            };
            assert!((s - want).abs() < 0.02, "layer {iy}: {s}, want {want}");
        }
        for (iy, s) in share.iter().map(|s| s.near_surface).enumerate() {
            // within a cell of y = 5.25 or 14.75
            let want = match iy {
                5 | 14 => 1.0,
                4 | 15 => 0.75,
                6 | 13 => 0.25,
                _ => 0.0,
            };
            assert!(
                (s - want).abs() < 0.02,
                "layer {iy} near the plates: {s}, want {want}"
            );
        }
    }

    /// The particles and cells each slab holds, as work: particles + CELL_WORK · M per cell.
    fn slab_work(cfg: &crate::config::Config, bounds: &[u32]) -> Vec<f64> {
        let st = crate::state::FluidState::initial(cfg);
        let mut n = vec![0usize; bounds.len() - 1];
        for &y in &st.pos[1] {
            n[bounds.partition_point(|&b| b as f32 <= y) - 1] += 1;
        }
        let (layer, m) = (
            (cfg.cells[0] * cfg.cells[2]) as f64,
            cfg.particles_per_cell as f64,
        );
        n.iter()
            .zip(bounds.windows(2))
            .map(|(&n, w)| n as f64 + CELL_WORK * m * layer * (w[1] - w[0]) as f64)
            .collect()
    }

    fn worst_over_mean(work: &[f64]) -> f64 {
        let mean = work.iter().sum::<f64>() / work.len() as f64;
        work.iter().cloned().fold(0.0, f64::max) / mean
    }

    #[test]
    fn the_slabs_of_a_pipe_and_a_cosine_channel_hold_even_work() {
        for walls in [
            "Pipe(radius: 47.5)",
            "CosineChannel(height: 36.0, amplitude: 9.0)",
        ] {
            let cfg = crate::config::Config::from_ron_str(&format!(
                "(cells: (8, 96, 96), particles_per_cell: 10, seed: 5, time_step: 0.1, \
                 steps: 10, collision: Srd(angle_deg: 130.0), walls: Some({walls}))"
            ))
            .unwrap();
            let phys = Physics::from_config(&cfg);
            let even = worst_over_mean(&slab_work(&cfg, &slab_bounds(96, 4)));
            let bounds = slab_bounds_for(&phys, 4);
            let balanced = worst_over_mean(&slab_work(&cfg, &bounds));
            assert!(
                even > 1.15,
                "{walls}: even slabs hold {even:.3}× the mean work"
            );
            // within about a layer of the best cut (a layer: 1/24 of a slab)
            assert!(
                balanced < 1.04,
                "{walls}: {bounds:?} hold {balanced:.3}× the mean work"
            );
        }
    }
}
