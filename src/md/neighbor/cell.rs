//! Cell lists: particle indices grouped by cell with a counting sort (counts, exclusive prefix
//! sum, stable scatter), so that members of a cell are in ascending index order.

use rayon::prelude::*;

use super::CHUNK;

/// Cells of a cell list over the box: counting sort of particle indices by cell.
#[derive(Clone, Debug, Default)]
pub struct CellList {
    pub dims: [usize; 3],
    pub cell_len: [f64; 3],
    /// `start[c]..start[c + 1]` indexes `members` for cell c (exclusive prefix sum of counts).
    pub start: Vec<u32>,
    /// Particle indices grouped by cell, ascending within a cell (stable scatter).
    pub members: Vec<u32>,
    cell_of: Vec<u32>,
}

impl CellList {
    /// Cells of at least `min_len` per edge; None when fewer than 3 fit along some edge.
    pub fn dims_for(box_len: [f64; 3], min_len: f64) -> Option<[usize; 3]> {
        Self::dims_at_least(box_len, min_len, 3)
    }

    /// Cells of at least `min_len` per edge; None when fewer than `min_dims` fit along some edge.
    pub fn dims_at_least(box_len: [f64; 3], min_len: f64, min_dims: usize) -> Option<[usize; 3]> {
        let mut d = [0usize; 3];
        for k in 0..3 {
            d[k] = (box_len[k] / min_len).floor() as usize;
            if d[k] < min_dims {
                return None;
            }
        }
        Some(d)
    }

    /// The cells for Verlet lists of radius `r_list`: at least r_list/2 wide, so that the
    /// 5×5×5 stencil around a particle's cell covers the list sphere with fewer candidates
    /// than 27 cells of width r_list. None when the box holds fewer than 5 such cells per edge
    /// (edge < 2.5 r_list); then all pairs are used.
    pub fn dims_for_list(box_len: [f64; 3], r_list: f64) -> Option<[usize; 3]> {
        Self::dims_at_least(box_len, 0.5 * r_list, 5)
    }

    #[inline(always)]
    fn coord(x: f64, cell_len: f64, dim: usize) -> usize {
        let c = (x / cell_len) as isize;
        c.clamp(0, dim as isize - 1) as usize
    }

    /// Bin `pos` (wrapped) into `dims` cells: counts, exclusive prefix sum, stable scatter.
    pub fn build(&mut self, pos: &[[f64; 3]], box_len: [f64; 3], dims: [usize; 3]) {
        self.dims = dims;
        for k in 0..3 {
            self.cell_len[k] = box_len[k] / dims[k] as f64;
        }
        self.bin(pos);
        self.counting_sort(dims[0] * dims[1] * dims[2], pos.len());
    }

    /// The cell of every particle.
    fn bin(&mut self, pos: &[[f64; 3]]) {
        let (cl, d) = (self.cell_len, self.dims);
        self.cell_of.resize(pos.len(), 0);
        self.cell_of
            .par_chunks_mut(CHUNK * 8)
            .zip(pos.par_chunks(CHUNK * 8))
            .for_each(|(out, p)| {
                for (o, x) in out.iter_mut().zip(p) {
                    let ix = Self::coord(x[0], cl[0], d[0]);
                    let iy = Self::coord(x[1], cl[1], d[1]);
                    let iz = Self::coord(x[2], cl[2], d[2]);
                    *o = ((iz * d[1] + iy) * d[0] + ix) as u32;
                }
            });
    }

    /// Counts, exclusive prefix sum, stable scatter of `n` particles into `nc` cells.
    fn counting_sort(&mut self, nc: usize, n: usize) {
        self.start.clear();
        self.start.resize(nc + 1, 0);
        for &c in &self.cell_of {
            self.start[c as usize + 1] += 1;
        }
        for c in 0..nc {
            self.start[c + 1] += self.start[c];
        }
        let mut fill: Vec<u32> = self.start[..nc].to_vec();
        self.members.resize(n, 0);
        for (i, &c) in self.cell_of.iter().enumerate() {
            let f = &mut fill[c as usize];
            self.members[*f as usize] = i as u32;
            *f += 1;
        }
    }

    pub fn cell_of(&self) -> &[u32] {
        &self.cell_of
    }
}
