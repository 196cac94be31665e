//! Neighbour lists on the GPU (the counterpart of `md::neighbor`): particles are binned into
//! cells of a fixed capacity (`md_cell_bin`), each cell's members sorted by index
//! (`md_cell_sort`, so that lists do not depend on the order of the binning atomics), and full
//! Verlet lists built from the (2 reach + 1)³ cells around each particle's cell, or from all
//! pairs in small boxes (`md_build_list`). The list is column-major: neighbour k of particle i
//! at `list[k * n + i]`. Capacities grow (and the build is repeated) when a kernel reports an
//! overflow.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchArgs, PushKernelArg};

use super::{
    drv, grid, items_grid, GpuMd, MD_FLAG_CELL_MAX, MD_FLAG_COLLIDERS, MD_FLAG_NEIGH_MAX,
    MD_FLAG_WORK, MD_NFLAGS, NULL_DEVICE_PTR,
};
use crate::error::Result;
use crate::md::neighbor::CellList;
use crate::md::system::System;

/// The device buffers and sizes of the cell and Verlet lists.
pub(super) struct DeviceLists {
    /// Members per cell.
    cell_count: CudaSlice<u32>,
    /// `cell_cap` slots per cell.
    cell_members: CudaSlice<u32>,
    cell_cap: usize,
    /// `max_neigh` × n, column-major.
    list: CudaSlice<u32>,
    /// Neighbours of each particle (at most `max_neigh`).
    nneigh: CudaSlice<u32>,
    max_neigh: usize,
    /// Cells per dimension of the list build, or None for all pairs.
    dims: Option<[usize; 3]>,
    /// The cell layers stored: `rows[1]` of them from layer `rows[0]` (a slab stores those of
    /// its band; the whole box: 0 and dims[1]).
    rows: [u32; 2],
    /// Stencil reach in cells (1: 3³ cells, 2: 5³ cells).
    reach: i32,
    /// List builds so far.
    pub builds: u64,
    /// The Lees-Edwards offset δ at the last build (0 without shear).
    pub built_offset: f64,
}

/// Particles per list-radius cube below which cells r_list wide with a 3³ stencil beat cells
/// r_list/2 wide with 5³: a particle's list build reads every stencil cell's count (125 against
/// 27) and tests its members (15.6 against 27 list cubes of them). Dilute solutes (0.3 per cube
/// in the polymer benchmark) build several times faster with the coarse cells.
const DILUTE_PER_LIST_CUBE: f64 = 4.0;

/// The cells and reach for list radius `r_list` at `density` particles per volume: r_list/2
/// wide with a 5³ stencil when they fit and the particles are dense, else r_list wide with
/// 3³; no cells (all pairs) without a cutoff or in small boxes. (The CPU engine keeps the fine
/// cells; lists hold the same pairs either way, only their order differs, which the GPU's
/// agreement with the CPU to rounding allows.)
fn cell_layout(
    box_len: [f64; 3],
    cutoff: f64,
    r_list: f64,
    density: f64,
) -> (Option<[usize; 3]>, i32) {
    if cutoff <= 0.0 {
        return (None, 1);
    }
    let coarse = CellList::dims_for(box_len, r_list);
    let dilute = density * r_list.powi(3) < DILUTE_PER_LIST_CUBE;
    match CellList::dims_for_list(box_len, r_list) {
        Some(d) if !(dilute && coarse.is_some()) => (Some(d), 2),
        _ => (coarse, 1),
    }
}

impl DeviceLists {
    /// Buffers with first guesses of the cell capacity (twice the mean occupancy) and the
    /// list width (1.5 times the mean neighbour count); both grow when too small. Cells are
    /// stored for the layers that hold the y band `band` (periodic; everything when None).
    pub(super) fn alloc(
        s: &Arc<CudaStream>,
        sys: &System,
        cutoff: f64,
        skin: f64,
        band: Option<[f64; 2]>,
    ) -> Result<DeviceLists> {
        let n = sys.len();
        let r_list = cutoff + skin;
        let density = n as f64 / sys.volume();
        let (dims, reach) = cell_layout(sys.box_len, cutoff, r_list, density);
        let rows = match dims {
            Some(d) => band_rows(band, d[1], sys.box_len[1]),
            None => [0, 1],
        };
        let ncells = dims.map(|d| d[0] * rows[1] as usize * d[2]).unwrap_or(1);
        let rho = density;
        let cell_cap = match dims {
            Some(d) => {
                let v =
                    sys.box_len[0] * sys.box_len[1] * sys.box_len[2] / (d[0] * d[1] * d[2]) as f64;
                ((rho * v * 2.0) as usize + 16).next_power_of_two()
            }
            None => 1,
        };
        let max_neigh = if cutoff > 0.0 {
            let v = 4.0 / 3.0 * std::f64::consts::PI * r_list.powi(3);
            ((rho * v * 1.5) as usize + 32).min(n.max(1))
        } else {
            1
        };
        let zeros = |m: usize| s.alloc_zeros::<u32>(m).map_err(drv("alloc"));
        Ok(DeviceLists {
            cell_count: zeros(ncells)?,
            cell_members: zeros(ncells * cell_cap)?,
            cell_cap,
            list: zeros((max_neigh * n).max(1))?,
            nneigh: zeros(n.max(1))?,
            max_neigh,
            dims,
            rows,
            reach,
            builds: 0,
            built_offset: 0.0,
        })
    }
}

/// The cell layers `[first, count]` of `dy` (a box `ly` tall) that hold the periodic y band
/// `band`, with a layer to spare each side for the rounding of y / cell length; all layers when
/// None or when the band covers nearly the whole box.
fn band_rows(band: Option<[f64; 2]>, dy: usize, ly: f64) -> [u32; 2] {
    let all = [0, dy as u32];
    let Some([lo, hi]) = band else {
        return all;
    };
    let cy = ly / dy as f64;
    let first = (lo / cy).floor() as i64 - 1;
    let last = (hi / cy).floor() as i64 + 1;
    let count = last - first + 1;
    if count >= dy as i64 {
        return all;
    }
    [first.rem_euclid(dy as i64) as u32, count as u32]
}

impl GpuMd {
    /// Whether forces come from cell + Verlet lists (false: all pairs).
    pub fn uses_verlet_list(&self) -> bool {
        self.lists.dims.is_some()
    }
}

impl DeviceLists {
    /// `list, nneigh` (as md_forces takes them).
    pub(super) fn push_list<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(&self.list).arg(&self.nneigh);
    }
}

/// The scalar arguments of one list build.
pub(super) struct ListGeometry {
    n: u32,
    /// Cell slots per cell.
    cap: u32,
    /// Cells per dimension ([1, 1, 1] for all pairs).
    dims: [u32; 3],
    /// Cell edge lengths.
    cell_len: [f64; 3],
    box_len: [f64; 3],
    /// Squared list radius.
    rl2: f64,
    /// 1: every particle is a candidate (no cells).
    all_pairs: i32,
    /// The stored layers ([`DeviceLists::rows`]).
    rows: [u32; 2],
    ncells: usize,
}

impl ListGeometry {
    /// Whether the build bins into cells (false: all pairs).
    pub(super) fn uses_cells(&self) -> bool {
        self.all_pairs == 0
    }

    fn new(n: usize, lists: &DeviceLists, box_len: [f64; 3], r_list: f64) -> ListGeometry {
        let (d, all_pairs) = match lists.dims {
            Some(d) => (d, 0i32),
            None => ([1, 1, 1], 1i32),
        };
        let l = box_len;
        let rows = if all_pairs == 1 { [0, 1] } else { lists.rows };
        ListGeometry {
            n: n as u32,
            cap: lists.cell_cap as u32,
            dims: [d[0] as u32, d[1] as u32, d[2] as u32],
            cell_len: [l[0] / d[0] as f64, l[1] / d[1] as f64, l[2] / d[2] as f64],
            box_len,
            rl2: r_list * r_list,
            all_pairs,
            rows,
            ncells: d[0] * rows[1] as usize * d[2],
        }
    }

    /// `cap, dx, dy, dz, cx, cy, cz` (as md_cell_bin and md_build_list take them).
    fn push_cells<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(&self.cap)
            .arg(&self.dims[0])
            .arg(&self.dims[1])
            .arg(&self.dims[2])
            .arg(&self.cell_len[0])
            .arg(&self.cell_len[1])
            .arg(&self.cell_len[2]);
    }
}

impl GpuMd {
    /// Build the neighbour list (growing the cell capacity / list width until it fits): the
    /// binning, sorting and filling queued together, the flags read once after them. An
    /// overflowing cell only truncates what the fill reads (it stops at the capacity), so a
    /// build whose cells overflowed is simply done again with room for them.
    pub(super) fn build_list(&mut self) -> Result<()> {
        loop {
            let g = self.launch_bin()?;
            self.launch_fill(&g)?;
            if self.build_fits(&g)? {
                self.list_built();
                return Ok(());
            }
        }
    }

    /// The first phase of a build: flags zeroed, particles binned (none without cells).
    pub(super) fn launch_bin(&mut self) -> Result<ListGeometry> {
        let r_list = self.cutoff() + self.settings.skin;
        let zero = vec![0u32; MD_NFLAGS];
        self.stream
            .memcpy_htod(&zero, &mut self.flags)
            .map_err(drv("upload"))?;
        let g = ListGeometry::new(self.n, &self.lists, self.sys.box_len, r_list);
        if g.all_pairs == 0 {
            self.bin_cells(&g)?;
        }
        Ok(g)
    }

    /// The second phase: cells sorted and the lists filled.
    pub(super) fn launch_fill(&mut self, g: &ListGeometry) -> Result<()> {
        if g.all_pairs == 0 {
            self.sort_cells(g)?;
        }
        self.fill_list(g)
    }

    /// The count and offset of a completed build.
    pub(super) fn list_built(&mut self) {
        self.lists.builds += 1;
        self.lists.built_offset = self.sys.lees_edwards.offset;
    }

    /// `md_cell_bin`.
    fn bin_cells(&mut self, g: &ListGeometry) -> Result<()> {
        let s = self.stream.clone();
        let l = &mut self.lists;
        s.memset_zeros(&mut l.cell_count).map_err(drv("memset"))?;
        let (ly, band) = (self.sys.box_len[1], self.role.band);
        let mut b = s.launch_builder(&self.k.cell_bin);
        b.arg(&g.n)
            .arg(&self.parts.pos)
            .arg(&mut l.cell_count)
            .arg(&mut l.cell_members);
        g.push_cells(&mut b);
        b.arg(&mut self.flags)
            .arg(&ly)
            .arg(&band[0])
            .arg(&band[1])
            .arg(&g.rows[0])
            .arg(&g.rows[1]);
        // SAFETY: the arguments are md_cell_bin's parameters in order and type (kernels/md.cu:
        // n, pos, count, members, cap, dx, dy, dz, cx, cy, cz, flags, ly, band_lo, band_hi,
        // row0, rows); `pos` holds 3n f64, `cell_count` ncells = dx · rows · dz u32 (zeroed
        // above) and `cell_members` ncells · cap u32; the kernel bins only i < n, clamps cell
        // coordinates into the grid, skips layers not stored and stores members only below
        // cap; `flags` holds MD_NFLAGS words. All buffers are this stream's.
        unsafe { b.launch(items_grid(self.n, self.item_blocks)) }.map_err(drv("md_cell_bin"))?;
        Ok(())
    }

    /// Whether a build's cells and lists fitted (waits for it); if not, what overflowed is
    /// raised (build again).
    pub(super) fn build_fits(&mut self, g: &ListGeometry) -> Result<bool> {
        let f = self.read_flags()?;
        let cells_fit = !g.uses_cells() || self.cells_fit(g, &f)?;
        Ok(self.lists_fit(&f)? && cells_fit)
    }

    /// Whether the binning (flags `f`) fitted the cells; if not, the capacity is raised.
    fn cells_fit(&mut self, g: &ListGeometry, f: &[u32]) -> Result<bool> {
        let l = &mut self.lists;
        if f[MD_FLAG_CELL_MAX] as usize > l.cell_cap {
            l.cell_cap = (f[MD_FLAG_CELL_MAX] as usize).next_power_of_two();
            l.cell_members = self
                .stream
                .alloc_zeros::<u32>(g.ncells * l.cell_cap)
                .map_err(drv("alloc"))?;
            return Ok(false);
        }
        Ok(true)
    }

    /// `md_cell_sort`: each cell's members in index order.
    fn sort_cells(&mut self, g: &ListGeometry) -> Result<()> {
        let s = self.stream.clone();
        let l = &mut self.lists;
        let nc = g.ncells as u32;
        // SAFETY: md_cell_sort's parameters in order and type (ncells, count, members, cap);
        // `cell_count` holds ncells u32 and `cell_members` ncells · cap u32, the kernel
        // returns for c ≥ ncells and touches only min(count, cap) slots of cell c.
        unsafe {
            self.k.cell_sort(
                &s,
                grid(g.ncells),
                &nc,
                &l.cell_count,
                &mut l.cell_members,
                &g.cap,
            )
        }
        .map_err(drv("md_cell_sort"))?;
        Ok(())
    }

    /// `md_build_list`.
    fn fill_list(&mut self, g: &ListGeometry) -> Result<()> {
        let s = self.stream.clone();
        let l = &mut self.lists;
        let mn = l.max_neigh as u32;
        let off = self.sys.periodic_box().image_offset();
        let sheared = self.settings.shear.is_some() as i32;
        let mut b = s.launch_builder(&self.k.build_list);
        b.arg(&g.n)
            .arg(&self.parts.pos)
            .arg(&l.cell_count)
            .arg(&l.cell_members);
        g.push_cells(&mut b);
        b.arg(&g.box_len[0])
            .arg(&g.box_len[1])
            .arg(&g.box_len[2])
            .arg(&g.rl2)
            .arg(&g.all_pairs)
            .arg(&l.reach)
            .arg(&mut l.list)
            .arg(&mut l.nneigh)
            .arg(&mn)
            .arg(&mut self.parts.built_at)
            .arg(&mut self.flags)
            .arg(&off)
            .arg(&sheared)
            .arg(&self.role.candidates[0])
            .arg(&self.role.candidates[1])
            .arg(&g.rows[0])
            .arg(&g.rows[1]);
        match self.work.as_mut() {
            Some(w) => b.arg(&mut w.idx),
            None => b.arg(&NULL_DEVICE_PTR),
        };
        b.arg(&self.role.colliders[0]).arg(&self.role.colliders[1]);
        match self.colliders.as_mut() {
            Some(c) => b.arg(&mut c.idx),
            None => b.arg(&NULL_DEVICE_PTR),
        };
        // SAFETY: md_build_list's parameters in order and type (n, pos, count, members, cap,
        // dx, dy, dz, cx, cy, cz, lx, ly, lz, rl2, all_pairs, reach, list, nneigh, max_neigh,
        // built_at, flags, off, sheared, cand_lo, cand_hi, row0, rows, work, coll_lo, coll_hi,
        // colliders); `list` holds max_neigh · n u32 and the kernel writes entry k of particle
        // i only for k < max_neigh; `nneigh` holds n u32, `pos` and `built_at` 3n f64; cells
        // are read only below min(count, cap) of stored cells inside the grid; `work` and
        // `colliders` (or null) hold n u32 each and each particle appends itself at most once
        // to each.
        unsafe { b.launch(items_grid(self.n, self.item_blocks)) }.map_err(drv("md_build_list"))?;
        Ok(())
    }

    /// Whether every list fitted its width (flags `f` of the build); if not, the width is
    /// raised. The work and collider lists' lengths are taken from `f`.
    fn lists_fit(&mut self, f: &[u32]) -> Result<bool> {
        if let Some(w) = self.work.as_mut() {
            w.len = f[MD_FLAG_WORK];
        }
        if let Some(c) = self.colliders.as_mut() {
            c.len = f[MD_FLAG_COLLIDERS];
        }
        let l = &mut self.lists;
        if f[MD_FLAG_NEIGH_MAX] as usize > l.max_neigh {
            l.max_neigh = f[MD_FLAG_NEIGH_MAX] as usize + 16;
            l.list = self
                .stream
                .alloc_zeros::<u32>(l.max_neigh * self.n)
                .map_err(drv("alloc"))?;
            return Ok(false);
        }
        Ok(true)
    }
}
