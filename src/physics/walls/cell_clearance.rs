//! The clearance of each cell, made once per run (the geometry does not move). A distance
//! field's clearance at a point is a trilinear read of 8 nodes; the GPUs' streaming reads a byte
//! per cell first, in the particles' order, and only a particle that byte does not clear reads
//! the field. Either way a particle out of reach skips the walls' path, which ends in the same
//! bits as the shortcut wherever both apply.

use rayon::prelude::*;

use super::{Shape, WallShape, Walls};

/// Steps of the stored clearance per cell: a byte holds 0 to 255/64 ≈ 4 cells, far beyond what a
/// particle travels in a step, in steps far below it. The kernels read it as
/// `MPC_WALLS_CLEARANCE_STEPS` (`backend::cuda::contract`).
pub const CLEARANCE_STEPS: f64 = 64.0;

impl Walls {
    /// Whether the GPUs' streaming reads the clearance per cell ([`Walls::cell_clearances`])
    /// before each particle's own: a distance field (the analytic shapes' clearances are a few
    /// operations on registers, cheaper than the read).
    pub fn clearance_per_cell(&self) -> bool {
        matches!(self.shape, Shape::Field(_))
    }

    /// For the shapes of [`Walls::clearance_per_cell`], one byte per global cell of a box of
    /// `cells` cells (the cells' order, x fastest, then z, then y): `q` with `q / 64` a lower
    /// bound of the clearance over the unit cell (0 where the cell touches the solid).
    pub fn cell_clearances(&self, cells: [u32; 3]) -> Option<Vec<u8>> {
        self.clearance_per_cell()
            .then(|| self.clearance_table(cells))
    }

    /// [`Walls::cell_clearances`] for any shape (0 where a shape has no clearance).
    fn clearance_table(&self, cells: [u32; 3]) -> Vec<u8> {
        let [nx, ny, nz] = cells.map(|n| n as usize);
        let layer = |iy: usize| -> Vec<u8> {
            let mut out = Vec::with_capacity(nx * nz);
            for iz in 0..nz {
                for ix in 0..nx {
                    let lo = [ix as f64, iy as f64, iz as f64];
                    let bound = self.shape.cell_clearance(lo).unwrap_or(0.0);
                    out.push(quantize_down(bound));
                }
            }
            out
        };
        let layers: Vec<Vec<u8>> = crate::host_pool::install(nx * ny * nz, || {
            (0..ny).into_par_iter().map(layer).collect()
        });
        layers.concat()
    }
}

/// The largest step count `q` ≤ 255 with `q / CLEARANCE_STEPS ≤ bound` (0 for a bound ≤ 0 or
/// NaN).
fn quantize_down(bound: f64) -> u8 {
    let q = (bound * CLEARANCE_STEPS).floor();
    if q >= 255.0 {
        255
    } else if q >= 1.0 {
        q as u8
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::reach_tests::walled;
    use super::*;
    use crate::rng::CellStream;

    /// The stored clearance of every cell is a lower bound of the clearance at any point of
    /// the cell in the fluid (random points, the corners), for every shape; for a distance
    /// field, most fluid cells are more than half a cell clear.
    #[test]
    fn a_cells_clearance_bounds_the_clearance_of_its_points() {
        let mut s = CellStream::for_particle(11, 0);
        let mut tested = 0;
        for (name, phys, walls) in walled() {
            assert_eq!(
                walls.cell_clearances(phys.cells).is_some(),
                walls.clearance_per_cell(),
                "{name}"
            );
            let table = walls.clearance_table(phys.cells);
            let [nx, _, nz] = phys.cells;
            assert_eq!(table.len(), phys.n_cells(), "{name}");
            for (g, &q) in table.iter().enumerate() {
                let g = g as u32;
                let lo = [g % nx, g / (nx * nz), g / nx % nz].map(|c| c as f64);
                let stored = q as f64 / CLEARANCE_STEPS;
                let mut points: Vec<[f64; 3]> = (0..8)
                    .map(|k| [0, 1, 2].map(|a| lo[a] + ((k >> a) & 1) as f64 * (1.0 - 1e-12)))
                    .collect();
                points.extend((0..6).map(|_| lo.map(|x| x + s.uniform())));
                for r in points {
                    let c = walls.shape.clearance(r).unwrap();
                    // particles are in the fluid (clearance ≥ 0); in the solid the bound is 0
                    assert!(
                        stored <= c.max(0.0),
                        "{name}: cell {lo:?} stores {stored}, {r:?} has {c}"
                    );
                }
            }
            let clear = table
                .iter()
                .filter(|&&q| q as f64 / CLEARANCE_STEPS > 0.5)
                .count();
            let fluid = (0..table.len() as u32)
                .filter(|g| {
                    let lo = [g % nx, g / (nx * nz), g / nx % nz].map(|c| c as f64 + 0.5);
                    walls.shape.clearance(lo).unwrap() > 0.0
                })
                .count();
            // where the GPUs use it, the table clears most of the bulk
            assert!(
                !walls.clearance_per_cell() || clear * 2 > fluid,
                "{name}: {clear} of {fluid} fluid cells clear"
            );
            tested += 1;
        }
        assert_eq!(tested, 10, "every benchmark shape and the sphere");
    }

    #[test]
    fn quantized_clearances_round_down() {
        assert_eq!(quantize_down(-0.3), 0);
        assert_eq!(quantize_down(f64::NAN), 0);
        assert_eq!(quantize_down(0.5), 32);
        assert_eq!(quantize_down(0.5 - 1e-12), 31);
        assert_eq!(quantize_down(100.0), 255);
    }
}
