// Kernels of the GPU MD engine (src/md/gpu/): a mirror of the CPU computes in src/md/. The host
// prepends rng.cuh, walls.cuh and md_boundary.cuh (appends md_walls.cu) and compiles this with
// NVRTC (--fmad=false, -DMPCBOX_NVRTC), so every per-pair and per-particle expression rounds
// exactly as the Rust code. Only the order in which a particle
// sums its neighbours differs from the CPU (the neighbour lists are built in cell order here),
// so forces agree with the CPU engine to rounding.
//
// Layout: positions, velocities and forces are interleaved xyz (as System::pos); the Verlet list
// is column-major (neighbour k of particle i at list[k * n + i]) for coalesced reads.
//
// One step: md_first_half (kick, drift [, O-U, drift], wrap, displacement check; its _plain form
// without Langevin, shear or sends) -> [rebuild: md_cell_bin, md_cell_sort, md_build_list] ->
// md_forces (or a form compiled for fewer terms, md_forces.cu) -> md_second_half (kick).
//
// Sections, each launched from the Rust file named in its heading (the periodic and Lees-Edwards
// boundary and the random numbers, md/boundary.rs and md/random.rs, are in md_boundary.cuh):
// integration (md/gpu/integrate.rs), neighbour lists (md/gpu/neighbor.rs); the forces
// (md/gpu/forces.rs) follow in md_forces.cu.
#ifndef MPCBOX_NVRTC
#include "md_boundary.cuh"
#include "md_items.cuh"
#endif

// flags[0]: some particle moved more than skin/2 since the last list build
// flags[1]: the largest cell occupancy seen when binning (cell capacity overflow if > cap)
// flags[2]: the largest neighbour count seen when building (overflow if > max_neigh)
// flags[3]: a FENE bond is broken; flags[4], flags[5]: its tags
// flags[8]: (decomposed engine) a bond reaches further in y than the slab halo; flags[9], [10]: tags
// flags[11]: (decomposed engine) the length of the slab's work list filled by md_build_list
// flags[12]: (decomposed engine) the length of the slab's collider list filled by md_build_list
// (MD_FLAG_* name these words; the generated header defines them from src/backend/cuda/contract.rs)

struct MdPairLj {
    double lj1, lj2, lj3, lj4, rc2, shift;
};

// ---- integration (launched from md/gpu/integrate.rs; the CPU steps are md/integrate.rs) ----

// integrate::kick(dt/2); drift(dt) or drift(dt/2), ornstein_uhlenbeck, drift(dt/2); wrap; and the
// list criterion against the positions of the last list build (Md::list_is_stale): skin/2, or
// under shear 2 |d rho| + |strain| r_cut > skin (d rho relative to the imposed flow). `step` is the step count before the increment (as in
// Md::step). With kicks = 2 the previous step's closing kick (md_second_half, the same forces)
// comes first, rounded as that kernel would: one pass over the particles instead of two.
// Decomposed: the particle's record goes to each link of `sends` whose band holds it before or
// after the drift (as md_slab_pack's MD_SEND_DRIFTED would send it, without that launch).
// PLAIN (md_first_half_plain): no Langevin drift, no shear, no sends, no y_prev, whatever the
// arguments say; the kernel without their code keeps fewer registers.
#define MD_FIRST_HALF_PARAMS                                                                                    \
    unsigned int n, double *pos, double *vel, const double *force, const double *inv_mass, int *image,         \
        const unsigned int *tag, const double *built_at, unsigned int *flags, double dt, int langevin, double c1, \
        double c2, double kt, unsigned int lk0, unsigned int lk1, mpc_u64 step, double lx, double ly, double lz,   \
        double quarter_skin2, double skin, MdShear le, double own_lo, double own_hi, double *y_prev,              \
        unsigned int m, const unsigned int *work, int kicks, MdSends sends
#define MD_FIRST_HALF_ARGS                                                                                     \
    n, pos, vel, force, inv_mass, image, tag, built_at, flags, dt, langevin, c1, c2, kt, lk0, lk1, step, lx, ly,  \
        lz, quarter_skin2, skin, le, own_lo, own_hi, y_prev, m, work, kicks, sends

template <bool PLAIN>
__device__ __forceinline__ void md_first_half_body(MD_FIRST_HALF_PARAMS) {
    if (PLAIN) {
        langevin = 0;
        le.sheared = 0;
        sends.links = 0;
        y_prev = nullptr;
    }
    unsigned int i;
    if (!md_item(m, work, &i)) {
        return;
    }
    // the decomposed engine: who owned i at the step's start decides who sends it on
    double y_start = pos[3 * i + 1];
    if (y_prev) {
        y_prev[i] = y_start;
    }
    if (!md_owns(y_start, ly, own_lo, own_hi)) {
        return;
    }
    double h = 0.5 * dt;
    double a = h * inv_mass[i];
    double v[3], p[3];
    for (int k = 0; k < 3; ++k) {
        v[k] = vel[3 * i + k];
        for (int kick = 0; kick < kicks; ++kick) {
            v[k] = v[k] + a * force[3 * i + k];
        }
        p[k] = pos[3 * i + k];
    }
    if (langevin) {
        for (int k = 0; k < 3; ++k) {
            p[k] += h * v[k];
        }
        double s = sqrt(c2 * kt * inv_mass[i]);
        double xi[3];
        md_normals3(lk0, lk1, tag[i], step, xi);
        for (int k = 0; k < 3; ++k) {
            v[k] = c1 * v[k] + s * xi[k];
        }
        for (int k = 0; k < 3; ++k) {
            p[k] += h * v[k];
        }
    } else {
        for (int k = 0; k < 3; ++k) {
            p[k] += dt * v[k];
        }
    }
    double l[3] = {lx, ly, lz};
    double hl[3] = {lx / 2.0, ly / 2.0, lz / 2.0};
    md_wrap(p, v, image + 3 * i, l, le);
    for (int k = 0; k < 3; ++k) {
        vel[3 * i + k] = v[k];
        pos[3 * i + k] = p[k];
    }
    for (unsigned int k = 0; k < sends.links; ++k) {
        if (md_in_band(y_start, ly, sends.band_lo[k], sends.band_hi[k]) ||
            md_in_band(p[1], ly, sends.band_lo[k], sends.band_hi[k])) {
            unsigned int slot = md_warp_slot(sends.count[k]);
            if (slot < sends.cap[k]) {
                md_write_record(sends.out[k] + (size_t)slot * MD_SLAB_WORDS, i, pos, vel, image, built_at, force);
            }
        }
    }
    bool stale;
    if (le.sheared) {
        stale = 2.0 * sqrt(md_flow_displacement2(p, built_at, i, l, hl, le)) + le.strain_slack > skin;
    } else {
        double d[3];
        stale = md_delta(p, built_at, i, l, hl, 0.0, d) > quarter_skin2;
    }
    if (stale) {
        flags[MD_FLAG_REBUILD] = 1u;
    }
}

extern "C" __global__ void md_first_half(MD_FIRST_HALF_PARAMS) {
    md_first_half_body<false>(MD_FIRST_HALF_ARGS);
}

extern "C" __global__ void md_first_half_plain(MD_FIRST_HALF_PARAMS) {
    md_first_half_body<true>(MD_FIRST_HALF_ARGS);
}

// integrate::kick(dt/2) after the forces.
extern "C" __global__ void md_second_half(unsigned int n, double *vel, const double *force, const double *inv_mass,
                                          double dt, const double *pos, double ly, double own_lo, double own_hi,
                                          unsigned int m, const unsigned int *work) {
    unsigned int i;
    if (!md_item(m, work, &i) || !md_owns(pos[3 * i + 1], ly, own_lo, own_hi)) {
        return;
    }
    double a = 0.5 * dt * inv_mass[i];
    for (int k = 0; k < 3; ++k) {
        vel[3 * i + k] += a * force[3 * i + k];
    }
}

// ---- neighbour lists (launched from md/gpu/neighbor.rs; the CPU lists are md/neighbor) ----

__device__ __forceinline__ unsigned int md_cell_coord(double p, double cell_len, unsigned int dim) {
    int c = (int)(p / cell_len);
    if (c < 0) {
        c = 0;
    }
    if (c >= (int)dim) {
        c = (int)dim - 1;
    }
    return (unsigned int)c;
}

// The row of global cell layer yy among the `rows` stored from layer row0 (a slab stores only
// the layers of its band; the whole box: row0 = 0, rows = dy); rows or more: not stored.
__device__ __forceinline__ unsigned int md_cell_row(unsigned int yy, unsigned int dy, unsigned int row0) {
    unsigned int r = yy + dy - row0; // in (0, 2 dy): yy and row0 are layers of the box
    return r >= dy ? r - dy : r;
}

// Cell x (less than one period outside [0, d)) wrapped into [0, d): an add or a subtract, where
// an integer remainder costs some twenty instructions, 48 times per particle in a list build.
__device__ __forceinline__ int md_cell_wrap(int x, int d) {
    return x < 0 ? x + d : (x >= d ? x - d : x);
}

// md_cell_bin's particle i.
__device__ __forceinline__ void md_cell_bin_one(unsigned int i, const double *pos, unsigned int *count,
                                                unsigned int *members, unsigned int cap, unsigned int dx,
                                                unsigned int dy, unsigned int dz, double cx, double cy, double cz,
                                                unsigned int *flags, double ly, double band_lo, double band_hi,
                                                unsigned int row0, unsigned int rows) {
    // decomposed: only the slab's band (the candidates' neighbours all lie in it)
    if (!md_in_band(pos[3 * i + 1], ly, band_lo, band_hi)) {
        return;
    }
    unsigned int a = md_cell_coord(pos[3 * i], cx, dx);
    unsigned int r = md_cell_row(md_cell_coord(pos[3 * i + 1], cy, dy), dy, row0);
    unsigned int c = md_cell_coord(pos[3 * i + 2], cz, dz);
    if (r >= rows) {
        // the host stores the band's layers with a layer to spare each side: never reached
        return;
    }
    unsigned int cell = (c * rows + r) * dx + a;
    unsigned int slot = atomicAdd(&count[cell], 1u);
    if (slot < cap) {
        members[cell * cap + slot] = i;
    } else {
        // only an overflow is reported (the host grows the cells to it): one atomic on one
        // word from every warp serialised in L2 and took most of the binning's time
        md_warp_max(&flags[MD_FLAG_CELL_MAX], slot + 1);
    }
}

// Bin particles into cells of fixed capacity; counts must be zero on entry. Cells are stored
// for the `rows` layers from row0 (decomposed: those of the slab's band).
extern "C" __global__ void md_cell_bin(unsigned int n, const double *pos, unsigned int *count, unsigned int *members,
                                       unsigned int cap, unsigned int dx, unsigned int dy, unsigned int dz, double cx,
                                       double cy, double cz, unsigned int *flags, double ly, double band_lo,
                                       double band_hi, unsigned int row0, unsigned int rows) {
    MD_FOR_ITEMS(i, n) {
        md_cell_bin_one(i, pos, count, members, cap, dx, dy, dz, cx, cy, cz, flags, ly, band_lo, band_hi, row0,
                        rows);
    }
}

// Sort each cell's members by index (insertion sort), so the lists do not depend on the order of
// the binning atomics: the GPU engine is run-to-run deterministic.
extern "C" __global__ void md_cell_sort(unsigned int ncells, const unsigned int *count, unsigned int *members,
                                        unsigned int cap) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) {
        return;
    }
    unsigned int m = count[c] < cap ? count[c] : cap;
    unsigned int *v = members + (size_t)c * cap;
    for (unsigned int a = 1; a < m; ++a) {
        unsigned int x = v[a];
        unsigned int b = a;
        while (b > 0 && v[b - 1] > x) {
            v[b] = v[b - 1];
            --b;
        }
        v[b] = x;
    }
}

__device__ __forceinline__ void md_list_try(unsigned int i, unsigned int j, const double *pos, const double pi[3],
                                            const double l[3], const double hl[3], double off, double rl2,
                                            unsigned int *list, unsigned int n, unsigned int max_neigh,
                                            unsigned int *cnt) {
    if (j == i) {
        return;
    }
    double d[3];
    double r2 = md_delta(pi, pos, j, l, hl, off, d);
    if (r2 < rl2) {
        if (*cnt < max_neigh) {
            list[(size_t)(*cnt) * n + i] = j;
        }
        *cnt += 1;
    }
}

// The members of one cell tried as neighbours of i.
__device__ __forceinline__ void md_list_cell(unsigned int cell, const unsigned int *count,
                                             const unsigned int *members, unsigned int cap, unsigned int i,
                                             const double *pos, const double pi[3], const double l[3],
                                             const double hl[3], double off, double rl2, unsigned int *list,
                                             unsigned int n, unsigned int max_neigh, unsigned int *cnt) {
    unsigned int m = count[cell] < cap ? count[cell] : cap;
    const unsigned int *v = members + (size_t)cell * cap;
    for (unsigned int s = 0; s < m; ++s) {
        md_list_try(i, v[s], pos, pi, l, hl, off, rl2, list, n, max_neigh, cnt);
    }
}

// The cells of a row reached across the y boundary that can hold neighbours of i: those within
// `window` (r_list) of x_i - shift (shift = +off for the row above, -off below), with one more cell
// each side; the whole row when that wraps onto itself. Stencil::scan_sheared_row on the CPU.
__device__ __forceinline__ void md_list_sheared_row(unsigned int row, double shift, double window,
                                                    const unsigned int *count,
                                                    const unsigned int *members, unsigned int cap, unsigned int i,
                                                    const double *pos, const double pi[3], const double l[3],
                                                    const double hl[3], double off, double rl2, double cx,
                                                    unsigned int dx, unsigned int *list, unsigned int n,
                                                    unsigned int max_neigh, unsigned int *cnt) {
    double xc = pi[0] - shift;
    int lo = (int)floor((xc - window) / cx) - 1;
    int hi = (int)floor((xc + window) / cx) + 1;
    if (hi - lo + 1 >= (int)dx) {
        lo = 0;
        hi = (int)dx - 1;
    }
    for (int x = lo; x <= hi; ++x) {
        int xx = ((x % (int)dx) + (int)dx) % (int)dx;
        md_list_cell(row + (unsigned int)xx, count, members, cap, i, pos, pi, l, hl, off, rl2, list, n, max_neigh,
                     cnt);
    }
}

// Full Verlet list of particle i (both sides of every pair): the (2 reach + 1)^3 cells around
// i's cell (cells at least r_list / reach wide, at least 2 reach + 1 per dimension), or every
// particle when `all_pairs` (boxes narrower than 3 list radii). Under shear (`sheared`), rows
// reached across the y boundary are scanned along all of x (the image sits at x -/+ delta), as
// the CPU's Stencil::scan. Records the build positions. Decomposed: lists only for the candidates
// (within skin/2 of the slab's layers), whose indices are appended to `work` (null otherwise);
// cells are stored for `rows` layers from row0 (md_cell_bin). The particles in [coll_lo, coll_hi)
// (those that may lie in the slab's collision cells before the next build) are appended to
// `colliders` (null: none kept).
#define MD_BUILD_LIST_PARAMS                                                                                   \
    unsigned int n, const double *pos, const unsigned int *count, const unsigned int *members, unsigned int cap,  \
        unsigned int dx, unsigned int dy, unsigned int dz, double cx, double cy, double cz, double lx, double ly, \
        double lz, double rl2, int all_pairs, int reach, unsigned int *list, unsigned int *nneigh,              \
        unsigned int max_neigh, double *built_at, unsigned int *flags, double off, int sheared, double cand_lo, \
        double cand_hi, unsigned int row0, unsigned int rows, unsigned int *work, double coll_lo, double coll_hi, \
        unsigned int *colliders
#define MD_BUILD_LIST_ARGS                                                                                     \
    n, pos, count, members, cap, dx, dy, dz, cx, cy, cz, lx, ly, lz, rl2, all_pairs, reach, list, nneigh,       \
        max_neigh, built_at, flags, off, sheared, cand_lo, cand_hi, row0, rows, work, coll_lo, coll_hi, colliders

__device__ __forceinline__ void md_build_list_one(unsigned int i, MD_BUILD_LIST_PARAMS) {
    double pi[3] = {pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]};
    double l[3] = {lx, ly, lz};
    double hl[3] = {lx / 2.0, ly / 2.0, lz / 2.0};
    unsigned int cnt = 0;
    bool candidate = md_in_band(pi[1], ly, cand_lo, cand_hi);
    if (candidate && work) {
        work[md_warp_slot(&flags[MD_FLAG_WORK])] = i;
    }
    if (colliders && md_in_band(pi[1], ly, coll_lo, coll_hi)) {
        colliders[md_warp_slot(&flags[MD_FLAG_COLLIDERS])] = i;
    }
    if (!candidate) {
        // decomposed: i cannot become this slab's before the next build (it is more than skin/2
        // away in y): no list
    } else if (all_pairs) {
        for (unsigned int j = 0; j < n; ++j) {
            md_list_try(i, j, pos, pi, l, hl, off, rl2, list, n, max_neigh, &cnt);
        }
    } else {
        // the stencil's cells (reach ≤ 2 < the cells per dimension, md_cell_wrap)
        int a = (int)md_cell_coord(pi[0], cx, dx);
        int b = (int)md_cell_coord(pi[1], cy, dy);
        int c = (int)md_cell_coord(pi[2], cz, dz);
        for (int oz = -reach; oz <= reach; ++oz) {
            int zz = md_cell_wrap(c + oz, (int)dz);
            for (int oy = -reach; oy <= reach; ++oy) {
                int yy = md_cell_wrap(b + oy, (int)dy);
                unsigned int r = md_cell_row((unsigned int)yy, dy, row0);
                if (r >= rows) {
                    continue; // a layer outside the band holds no neighbour of a candidate
                }
                unsigned int row = ((unsigned int)zz * rows + r) * dx;
                if (sheared && (b + oy < 0 || b + oy >= (int)dy)) {
                    // across the y boundary j's image sits at x_j + off (row above) or x_j - off:
                    // only the cells within r_list of x_i -/+ off (one more each side for the
                    // clamped cell coordinates) can hold a neighbour. With fewer than 2 reach + 3
                    // rows a pair in such a row may be nearer without the image: whole row.
                    if ((int)dy < 2 * reach + 3) {
                        md_list_sheared_row(row, 0.0, lx, count, members, cap, i, pos, pi, l, hl, off, rl2, cx,
                                            dx, list, n, max_neigh, &cnt);
                        continue;
                    }
                    md_list_sheared_row(row, b + oy >= (int)dy ? off : -off, sqrt(rl2), count, members, cap, i,
                                        pos, pi, l, hl, off, rl2, cx, dx, list, n, max_neigh, &cnt);
                    continue;
                }
                for (int ox = -reach; ox <= reach; ++ox) {
                    int xx = md_cell_wrap(a + ox, (int)dx);
                    md_list_cell(row + (unsigned int)xx, count, members, cap, i, pos, pi, l, hl, off, rl2, list,
                                 n, max_neigh, &cnt);
                }
            }
        }
    }
    nneigh[i] = cnt < max_neigh ? cnt : max_neigh;
    if (cnt > max_neigh) {
        md_warp_max(&flags[MD_FLAG_NEIGH_MAX], cnt); // only an overflow (as md_cell_bin)
    }
    for (int k = 0; k < 3; ++k) {
        built_at[3 * i + k] = pi[k];
    }
}

extern "C" __global__ void md_build_list(MD_BUILD_LIST_PARAMS) {
    MD_FOR_ITEMS(i, n) {
        md_build_list_one(i, MD_BUILD_LIST_ARGS);
    }
}
