//! The cells a wall may cut under some grid shift: a fixed list per run, so that a GPU's cell
//! pass runs the virtual particles' fill (a long out-of-line call whose registers would set the
//! whole pass's) only over those cells, and every other cell takes the plain pass.
//!
//! The shift s lies in [−1/2, 1/2)³, so global cell (i, j, k) covers `[i − s, i − s + 1)` per
//! axis: always inside `[i − 1/2, i + 3/2)`, which the eight unit boxes with corners at
//! `i − 1/2` or `i + 1/2` (per axis) tile. A shifted cell is cut when it holds both fluid and
//! solid ([`WallShape::cuts_cell`]); then one of the eight boxes is cut too, or two of them lie
//! wholly on different sides (a solid box and a fluid box). So a cell none of whose eight boxes
//! is cut, and whose eight boxes all lie on one side, is cut under no shift. The boxes are
//! shared between neighbouring cells: one pass over the `(n + 1)³` staggered boxes serves all.

use rayon::prelude::*;

use super::{WallShape, Walls};

/// What a unit box of the staggered lattice holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BoxSide {
    Solid,
    Fluid,
    /// Both, or a centre exactly on the surface (counted as cut: the list only has to hold
    /// every cut cell, and a few more cost nothing but their fill's test).
    Cut,
}

impl Walls {
    /// Global ids (ascending) of the cells of layers `layers` (y, of a box of `cells` cells) that
    /// the walls may cut under some grid shift: those whose sums may get virtual particles.
    /// Empty for slip walls, which add none.
    pub fn cells_walls_may_cut(&self, cells: [u32; 3], layers: std::ops::Range<u32>) -> Vec<u32> {
        let [nx, _, nz] = cells;
        if !self.no_slip || layers.is_empty() {
            return Vec::new();
        }
        let (bx, bz) = (nx as usize + 1, nz as usize + 1);
        let box_rows = layers.len() + 1;
        // the staggered boxes of lattice layer `b` (corner y = layers.start + b − 1/2)
        let side_layer = |b: usize| -> Vec<BoxSide> {
            let y = (layers.start as usize + b) as f64;
            let mut out = Vec::with_capacity(bx * bz);
            for c in 0..bz {
                for a in 0..bx {
                    let centre = [a as f64, y, c as f64];
                    let lo = centre.map(|x| x - 0.5);
                    out.push(if self.shape.cuts_cell(lo) {
                        BoxSide::Cut
                    } else {
                        let d = self.shape.signed_distance(centre);
                        if d > 0.0 {
                            BoxSide::Fluid
                        } else if d < 0.0 {
                            BoxSide::Solid
                        } else {
                            BoxSide::Cut
                        }
                    });
                }
            }
            out
        };
        let work = box_rows * bx * bz;
        let sides: Vec<Vec<BoxSide>> = crate::host_pool::install(work, || {
            (0..box_rows).into_par_iter().map(side_layer).collect()
        });
        // a cell of layer j: its eight boxes at lattice layers j and j + 1
        let cells_of_layer = |j: usize| -> Vec<u32> {
            let (lower, upper) = (&sides[j], &sides[j + 1]);
            let iy = layers.start as usize + j;
            let mut out = Vec::new();
            for iz in 0..nz as usize {
                for ix in 0..nx as usize {
                    let (mut solid, mut fluid) = (false, false);
                    let mut cut = false;
                    for layer in [lower, upper] {
                        for (dz, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                            match layer[(iz + dz) * bx + ix + dx] {
                                BoxSide::Cut => cut = true,
                                BoxSide::Solid => solid = true,
                                BoxSide::Fluid => fluid = true,
                            }
                        }
                    }
                    if cut || (solid && fluid) {
                        out.push((ix + nx as usize * (iz + nz as usize * iy)) as u32);
                    }
                }
            }
            out
        };
        let per_layer: Vec<Vec<u32>> = crate::host_pool::install(work, || {
            (0..layers.len())
                .into_par_iter()
                .map(cells_of_layer)
                .collect()
        });
        per_layer.concat()
    }
}

#[cfg(test)]
mod tests {
    use super::super::reach_tests::walled;
    use super::super::{WallShape, Walls};

    /// Every cell that the fill tests as cut, under many grid shifts and the extreme ones, is
    /// listed; and the list is a shell about the surface (not every cell), so the plain pass
    /// does take the rest.
    #[test]
    fn every_cell_a_shifted_grid_cuts_is_listed() {
        for (name, phys, walls) in walled() {
            let cells = phys.cells;
            let listed = walls.cells_walls_may_cut(cells, 0..cells[1]);
            assert!(listed.windows(2).all(|w| w[0] < w[1]), "{name}: ascending");
            let n_cells = phys.n_cells() as u32;
            assert!(
                !listed.is_empty() && (listed.len() as u32) < n_cells * 3 / 4,
                "{name}: {} of {n_cells} cells listed",
                listed.len()
            );
            let mut is_listed = vec![false; n_cells as usize];
            for &c in &listed {
                is_listed[c as usize] = true;
            }
            let mut plans: Vec<_> = (0..300).map(|step| phys.plan(step, false, false)).collect();
            for s in [-0.5, 0.0, 0.499_999_999_999] {
                let mut plan = phys.plan(0, false, false);
                plan.shift = [s; 3];
                plans.push(plan);
            }
            let mut cut = 0;
            for plan in &plans {
                for cell in 0..n_cells {
                    let lo = Walls::cell_corner(&phys, plan, cell);
                    if walls.shape.cuts_cell(lo) {
                        cut += 1;
                        assert!(
                            is_listed[cell as usize],
                            "{name}: cell {cell} cut at shift {:?} (corner {lo:?}) is not listed",
                            plan.shift
                        );
                    }
                }
            }
            assert!(cut > 0, "{name}: no cell is ever cut");
        }
    }

    /// A slab's list is the whole box's restricted to its layers; slip walls list none.
    #[test]
    fn layer_ranges_split_the_list_and_slip_walls_list_nothing() {
        for (name, phys, walls) in walled() {
            let all = walls.cells_walls_may_cut(phys.cells, 0..phys.cells[1]);
            let mut parts = Vec::new();
            for (a, b) in [(0, 5), (5, 6), (6, 6), (6, 16)] {
                parts.extend(walls.cells_walls_may_cut(phys.cells, a..b));
            }
            assert_eq!(parts, all, "{name}");
            let slip = Walls {
                no_slip: false,
                ..walls
            };
            assert!(slip
                .cells_walls_may_cut(phys.cells, 0..phys.cells[1])
                .is_empty());
        }
    }
}
