//! Full Verlet lists with a skin: each pair is in both particles' lists, stored per chunk of
//! [`CHUNK`] particles, built from a [`CellList`] and rebuilt when some particle has moved more
//! than skin/2. Under Lees-Edwards shear the rows of cells reached across the y boundary are
//! scanned around x ∓ δ, where the sheared images of the neighbours sit, and displacements are
//! measured relative to the imposed flow (`PeriodicBox::flow_displacement2`).

use rayon::prelude::*;

use super::{CellList, CHUNK};
use crate::md::boundary::PeriodicBox;

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
    /// The Lees-Edwards offset δ in [0, Lx) at the last build.
    pub built_offset: f64,
}

/// The cells around a particle's cell that a list build scans: per axis, the offsets
/// 0..=2·reach shifted by −reach (mod the cell count).
struct Stencil<'a> {
    cells: &'a CellList,
    ox: Vec<usize>,
    oy: Vec<usize>,
    oz: Vec<usize>,
    /// Sheared box: rows reached across the y boundary are scanned along all of x.
    sheared: bool,
    reach_y: usize,
    r_list: f64,
}

impl<'a> Stencil<'a> {
    /// Every cell within `r_list` of a cell. The cell list needs at least 2·reach + 1 cells
    /// per edge so that no cell is visited twice.
    fn new(cells: &'a CellList, r_list: f64, sheared: bool) -> Stencil<'a> {
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
        Stencil {
            cells,
            ox: offsets(0),
            oy: offsets(1),
            oz: offsets(2),
            sheared,
            reach_y: reach[1],
            r_list,
        }
    }

    /// Whether row iy + o − reach (o the index into `oy`) lies across the y boundary.
    #[inline(always)]
    fn crosses_y(&self, iy: usize, o: usize) -> bool {
        let t = iy + o;
        t < self.reach_y || t - self.reach_y >= self.cells.dims[1]
    }

    /// The cells of a row reached across the y boundary that can hold neighbours of a particle
    /// at x: j's image sits at x_j + δ (row above, `above`) or x_j − δ, so only the cells within
    /// r_list of x ∓ δ, one more each side (cell coordinates are clamped). The whole row when
    /// that wraps onto itself, or when the y edge has under 2·reach + 3 cells (a pair in such a
    /// row may then be nearer without the image). `md_list_sheared_row` on the GPU.
    fn sheared_row(&self, x: f64, above: bool, bx: &PeriodicBox) -> impl Iterator<Item = usize> {
        let cells = self.cells;
        let n = cells.dims[0] as i64;
        let shift = if above {
            bx.image_offset()
        } else {
            -bx.image_offset()
        };
        let xc = x - shift;
        let lo = ((xc - self.r_list) / cells.cell_len[0]).floor() as i64 - 1;
        let hi = ((xc + self.r_list) / cells.cell_len[0]).floor() as i64 + 1;
        let (lo, hi) = if hi - lo + 1 >= n || cells.dims[1] < 2 * self.reach_y + 3 {
            (0, n - 1)
        } else {
            (lo, hi)
        };
        (lo..=hi).map(move |c| c.rem_euclid(n) as usize)
    }

    /// Append the neighbours of particle i (within r_list, i excluded) to `buf[len..]`,
    /// growing `buf` as needed; returns the new length. Written branch-free: every candidate
    /// is stored, the length only advances for those inside r_list.
    #[inline(always)]
    fn scan(
        &self,
        i: usize,
        pos: &[[f64; 3]],
        bx: &PeriodicBox,
        rl2: f64,
        buf: &mut Vec<u32>,
        mut len: usize,
    ) -> usize {
        let cells = self.cells;
        let d = cells.dims;
        let xi = pos[i];
        let ci = cells.cell_of()[i] as usize;
        let (ix, iy, iz) = (ci % d[0], (ci / d[0]) % d[1], ci / (d[0] * d[1]));
        // ix + dx < 2 d: wrap with a compare instead of a division
        let wrap = |a: usize, n: usize| if a >= n { a - n } else { a };
        // scan one cell: every member is stored, the length advances for those inside r_list
        let mut cell = |cc: usize, len: &mut usize| {
            let s = cells.start[cc] as usize;
            let e = cells.start[cc + 1] as usize;
            if buf.len() < *len + (e - s) {
                buf.resize(2 * buf.len() + (e - s), 0);
            }
            for &j in &cells.members[s..e] {
                let r2 = bx.distance2(xi, pos[j as usize]);
                buf[*len] = j;
                *len += ((r2 < rl2) & (j as usize != i)) as usize;
            }
        };
        for &dz in &self.oz {
            let z = wrap(iz + dz, d[2]);
            for (o, &dy) in self.oy.iter().enumerate() {
                let y = wrap(iy + dy, d[1]);
                let row = (z * d[1] + y) * d[0];
                if self.sheared && self.crosses_y(iy, o) {
                    for x in self.sheared_row(xi[0], iy + o >= self.reach_y, bx) {
                        cell(row + x, &mut len);
                    }
                    continue;
                }
                for &dx in &self.ox {
                    cell(row + wrap(ix + dx, d[0]), &mut len);
                }
            }
        }
        len
    }
}

impl VerletList {
    /// Build from a cell list: every cell within `r_list` of particle i's cell is scanned
    /// (27 cells when cells are r_list wide, 125 when they are r_list/2 wide). The cell list
    /// needs at least 2·reach + 1 cells per edge so that no cell is visited twice.
    pub fn build(&mut self, pos: &[[f64; 3]], box_len: [f64; 3], cells: &CellList, r_list: f64) {
        self.build_in(pos, &PeriodicBox::new(box_len), false, cells, r_list);
    }

    /// [`VerletList::build`] in a box that may be sheared (`sheared`: Lees-Edwards is on, even
    /// when the offset is zero now).
    pub fn build_in(
        &mut self,
        pos: &[[f64; 3]],
        bx: &PeriodicBox,
        sheared: bool,
        cells: &CellList,
        r_list: f64,
    ) {
        let n = pos.len();
        let rl2 = r_list * r_list;
        let bx = *bx;
        let stencil = Stencil::new(cells, r_list, sheared);
        self.chunks
            .resize_with(n.div_ceil(CHUNK), ChunkList::default);
        self.chunks.par_iter_mut().enumerate().for_each(|(c, ch)| {
            let lo = c * CHUNK;
            let hi = (lo + CHUNK).min(n);
            let cap = ch.list.capacity().max((hi - lo) * 96);
            ch.list.resize(cap, 0);
            let mut len = 0usize;
            ch.offset.clear();
            ch.offset.push(0);
            for i in lo..hi {
                len = stencil.scan(i, pos, &bx, rl2, &mut ch.list, len);
                ch.offset.push(len as u32);
            }
            ch.list.truncate(len);
        });
        self.built_at.clear();
        self.built_at.extend_from_slice(pos);
        self.r_list = r_list;
        self.builds += 1;
        self.built_offset = bx.lees_edwards().offset;
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
        self.max_displacement2_in(pos, &PeriodicBox::new(box_len))
    }

    /// Largest displacement² since the build relative to the imposed shear flow, `strain`
    /// = γ̇ τ since the build ([`PeriodicBox::flow_displacement2`]), over fixed chunks.
    pub fn max_flow_displacement2(&self, pos: &[[f64; 3]], bx: &PeriodicBox, strain: f64) -> f64 {
        if self.built_at.len() != pos.len() {
            return f64::INFINITY;
        }
        let (bx, off) = (*bx, self.built_offset);
        pos.par_chunks(CHUNK * 8)
            .zip(self.built_at.par_chunks(CHUNK * 8))
            .map(|(p, q)| {
                let mut m: f64 = 0.0;
                for (a, b) in p.iter().zip(q) {
                    m = m.max(bx.flow_displacement2(*a, *b, off, strain));
                }
                m
            })
            .reduce(|| 0.0, f64::max)
    }

    /// [`VerletList::max_displacement2`] in a box that may be sheared (a particle that crossed
    /// the y boundary is compared through the current offset).
    pub fn max_displacement2_in(&self, pos: &[[f64; 3]], bx: &PeriodicBox) -> f64 {
        if self.built_at.len() != pos.len() {
            return f64::INFINITY;
        }
        let bx = *bx;
        pos.par_chunks(CHUNK * 8)
            .zip(self.built_at.par_chunks(CHUNK * 8))
            .map(|(p, q)| {
                let mut m: f64 = 0.0;
                for (a, b) in p.iter().zip(q) {
                    m = m.max(bx.distance2(*a, *b));
                }
                m
            })
            .reduce(|| 0.0, f64::max)
    }
}
