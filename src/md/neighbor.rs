//! Neighbour search: cell lists by counting sort with a prefix sum, full Verlet lists with a
//! skin (each pair appears in both particles' lists, so every particle sums its own force and
//! no two threads ever write the same element), Morton (Z-curve) ordering, and the O(N²)
//! all-pairs path for small systems.

use rayon::prelude::*;

/// Particles per parallel work item. Fixed, so list contents and every reduction are the same
/// for any thread count.
pub const CHUNK: usize = 512;

/// How neighbours are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum NeighborMode {
    /// All pairs when [`prefer_all_pairs`] says so (N below [`ALL_PAIRS_CROSSOVER`] times
    /// the list neighbours per particle) or when a box edge is under 2.5 list radii; cell lists
    /// + Verlet lists otherwise.
    #[default]
    Auto,
    /// Cell lists + Verlet lists (falls back to all pairs when a box edge is under 2.5 list radii).
    Verlet,
    /// Every pair, every step, no list.
    AllPairs,
}

/// Measured crossover (`mpcbox-bench-md --crossover`, LJ liquid ρ* = 0.8442, skin 0.3, rc 1.5
/// and 2.5, 2-core development machine): with N = x · (particles within rc + skin of one
/// particle), Verlet lists were 3.6× faster at x = 5.2, 5.2× at x = 6.4 and 9× at x = 11; the
/// ratio grows about as 0.7·x, so all pairs only win below x ≈ 1.4–1.5, i.e. for boxes that
/// are barely larger than the list sphere (where lists usually cannot be built anyway).
pub const ALL_PAIRS_CROSSOVER: f64 = 1.5;

/// Whether the all-pairs path is expected to be faster for `n` particles at number density
/// `density` with list radius `r_list`.
pub fn prefer_all_pairs(n: usize, density: f64, r_list: f64) -> bool {
    let per_particle = 4.0 / 3.0 * std::f64::consts::PI * r_list.powi(3) * density;
    (n as f64) < ALL_PAIRS_CROSSOVER * per_particle.max(1.0)
}

/// Minimum-image difference along one axis (|d| ≤ L/2 for wrapped inputs). Symmetric:
/// mi(−d) = −mi(d) exactly, so pair forces are exactly antisymmetric.
#[inline(always)]
pub fn min_image(mut d: f64, l: f64, half: f64) -> f64 {
    if d > half {
        d -= l;
    } else if d < -half {
        d += l;
    }
    d
}

/// Cells of a cell list over the box: counting sort of particle indices by cell.
#[derive(Clone, Debug, Default)]
pub struct CellList {
    pub dims: [usize; 3],
    pub cell_len: [f64; 3],
    /// start[c]..start[c + 1] indexes `members` for cell c (exclusive prefix sum of counts).
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
        let nc = dims[0] * dims[1] * dims[2];
        let (cl, d) = (self.cell_len, dims);
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
        // counting sort: counts, exclusive prefix sum, scatter
        self.start.clear();
        self.start.resize(nc + 1, 0);
        for &c in &self.cell_of {
            self.start[c as usize + 1] += 1;
        }
        for c in 0..nc {
            self.start[c + 1] += self.start[c];
        }
        let mut fill: Vec<u32> = self.start[..nc].to_vec();
        self.members.resize(pos.len(), 0);
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

/// The neighbours of one chunk of [`CHUNK`] particles, CSR: neighbours of the chunk's k-th
/// particle are `list[offset[k]..offset[k + 1]]`. Buffers persist across rebuilds, so a
/// rebuild neither allocates nor copies once the lists have reached their size.
#[derive(Clone, Debug, Default)]
pub struct ChunkList {
    pub offset: Vec<u32>,
    pub list: Vec<u32>,
}

/// A full Verlet list (each pair in both particles' lists), stored per chunk of particles.
#[derive(Clone, Debug, Default)]
pub struct VerletList {
    pub chunks: Vec<ChunkList>,
    /// Positions when the list was built (for the skin/2 displacement criterion).
    pub built_at: Vec<[f64; 3]>,
    pub r_list: f64,
    pub builds: u64,
}

impl VerletList {
    /// Build from a cell list: every cell within `r_list` of particle i's cell is scanned
    /// (27 cells when cells are r_list wide, 125 when they are r_list/2 wide). The cell list
    /// needs at least 2·reach + 1 cells per edge so that no cell is visited twice.
    pub fn build(&mut self, pos: &[[f64; 3]], box_len: [f64; 3], cells: &CellList, r_list: f64) {
        let n = pos.len();
        let rl2 = r_list * r_list;
        let half = [box_len[0] / 2.0, box_len[1] / 2.0, box_len[2] / 2.0];
        let d = cells.dims;
        let reach =
            [0, 1, 2].map(|k| (r_list / cells.cell_len[k] - 1e-12).ceil().max(1.0) as usize);
        for k in 0..3 {
            assert!(d[k] > 2 * reach[k], "cell list too coarse for the stencil");
        }
        let offsets = |k: usize| -> Vec<usize> {
            (0..=2 * reach[k])
                .map(|o| (o + d[k] - reach[k]) % d[k])
                .collect()
        };
        let (ox, oy, oz) = (offsets(0), offsets(1), offsets(2));
        let cell_of = cells.cell_of();
        self.chunks
            .resize_with(n.div_ceil(CHUNK), ChunkList::default);
        self.chunks.par_iter_mut().enumerate().for_each(|(c, ch)| {
            let lo = c * CHUNK;
            let hi = (lo + CHUNK).min(n);
            // written branch-free: every candidate is stored, the length only advances
            // for those inside r_list
            let cap = ch.list.capacity().max((hi - lo) * 96);
            ch.list.resize(cap, 0);
            let buf = &mut ch.list;
            let mut len = 0usize;
            ch.offset.clear();
            ch.offset.push(0);
            for i in lo..hi {
                let xi = pos[i];
                let ci = cell_of[i] as usize;
                let (ix, iy, iz) = (ci % d[0], (ci / d[0]) % d[1], ci / (d[0] * d[1]));
                // ix + dx < 2 d: wrap with a compare instead of a division
                let wrap = |a: usize, n: usize| if a >= n { a - n } else { a };
                for &dz in &oz {
                    let z = wrap(iz + dz, d[2]);
                    for &dy in &oy {
                        let y = wrap(iy + dy, d[1]);
                        let row = (z * d[1] + y) * d[0];
                        for &dx in &ox {
                            let cc = row + wrap(ix + dx, d[0]);
                            let s = cells.start[cc] as usize;
                            let e = cells.start[cc + 1] as usize;
                            if buf.len() < len + (e - s) {
                                buf.resize(2 * buf.len() + (e - s), 0);
                            }
                            for &j in &cells.members[s..e] {
                                let xj = pos[j as usize];
                                let rx = min_image(xi[0] - xj[0], box_len[0], half[0]);
                                let ry = min_image(xi[1] - xj[1], box_len[1], half[1]);
                                let rz = min_image(xi[2] - xj[2], box_len[2], half[2]);
                                let r2 = rx * rx + ry * ry + rz * rz;
                                buf[len] = j;
                                len += ((r2 < rl2) & (j as usize != i)) as usize;
                            }
                        }
                    }
                }
                ch.offset.push(len as u32);
            }
            buf.truncate(len);
        });
        self.built_at.clear();
        self.built_at.extend_from_slice(pos);
        self.r_list = r_list;
        self.builds += 1;
    }

    /// Neighbours of particle i.
    #[inline(always)]
    pub fn neighbors(&self, i: usize) -> &[u32] {
        let ch = &self.chunks[i / CHUNK];
        let k = i % CHUNK;
        &ch.list[ch.offset[k] as usize..ch.offset[k + 1] as usize]
    }

    /// Total number of list entries.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.list.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Largest displacement² since the build (minimum image), over fixed chunks.
    pub fn max_displacement2(&self, pos: &[[f64; 3]], box_len: [f64; 3]) -> f64 {
        if self.built_at.len() != pos.len() {
            return f64::INFINITY;
        }
        let half = [box_len[0] / 2.0, box_len[1] / 2.0, box_len[2] / 2.0];
        pos.par_chunks(CHUNK * 8)
            .zip(self.built_at.par_chunks(CHUNK * 8))
            .map(|(p, q)| {
                let mut m: f64 = 0.0;
                for (a, b) in p.iter().zip(q) {
                    let dx = min_image(a[0] - b[0], box_len[0], half[0]);
                    let dy = min_image(a[1] - b[1], box_len[1], half[1]);
                    let dz = min_image(a[2] - b[2], box_len[2], half[2]);
                    m = m.max(dx * dx + dy * dy + dz * dz);
                }
                m
            })
            .reduce(|| 0.0, f64::max)
    }
}

/// Spread the low 10 bits of x to every third bit.
#[inline]
fn spread3(x: u32) -> u64 {
    let mut v = (x & 0x3ff) as u64;
    v = (v | (v << 16)) & 0x0300_00ff;
    v = (v | (v << 8)) & 0x0300_f00f;
    v = (v | (v << 4)) & 0x030c_30c3;
    v = (v | (v << 2)) & 0x0924_9249;
    v
}

/// Morton (Z-curve) key of a position on a 1024³ grid over the box.
#[inline]
pub fn morton_key(p: [f64; 3], box_len: [f64; 3]) -> u64 {
    let q = |k: usize| ((p[k] / box_len[k] * 1024.0) as i64).clamp(0, 1023) as u32;
    spread3(q(0)) | (spread3(q(1)) << 1) | (spread3(q(2)) << 2)
}

/// The permutation that sorts particles along the Z curve (ties by current index): new
/// particle k is old particle perm[k].
pub fn morton_order(pos: &[[f64; 3]], box_len: [f64; 3]) -> Vec<u32> {
    let mut keyed: Vec<(u64, u32)> = pos
        .par_iter()
        .enumerate()
        .map(|(i, &p)| (morton_key(p, box_len), i as u32))
        .collect();
    keyed.par_sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn morton_interleaves_bits() {
        assert_eq!(spread3(0b1), 0b1);
        assert_eq!(spread3(0b11), 0b1001);
        assert_eq!(spread3(0x3ff).count_ones(), 10);
        let l = [1.0; 3];
        assert!(morton_key([0.9, 0.0, 0.0], l) < morton_key([0.0, 0.9, 0.0], l));
        assert!(morton_key([0.0, 0.9, 0.0], l) < morton_key([0.0, 0.0, 0.9], l));
    }

    #[test]
    fn min_image_is_antisymmetric() {
        for d in [-4.9, -2.5, -0.1, 0.0, 0.3, 2.5, 4.99] {
            assert_eq!(min_image(-d, 5.0, 2.5), -min_image(d, 5.0, 2.5));
        }
    }
}
