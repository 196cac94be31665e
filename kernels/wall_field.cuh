// Walls given as data (a mirror of src/physics/walls/field.rs): a signed distance on a
// periodic grid of nx x ny x nz nodes `spacing` apart (node (i, j, k) at ((i + 1/2) s, ...),
// f32 values at `grid` in the cells' order), interpolated trilinearly; its gradient, the time
// of impact of a straight path (samples of at most a quarter spacing, then Illinois regula
// falsi), cut cells (the
// vertices of the cell's partition by the grid planes) and f32 positions projected back into
// the fluid, operation by operation (compiled with --fmad=false). Included before walls.cuh,
// whose MpcWalls holds an MpcWallField.
#pragma once
#ifndef MPCBOX_NVRTC
#include "wrap.cuh"
#endif

// DistanceField::{spacing, nodes, slope, inv_spacing}: nx, ny, nz as exact doubles.
struct MpcWallField {
    double spacing, nx, ny, nz, slope, inv_spacing;
};

// field::SAMPLES_PER_SPACING, MAX_ROOT_STEPS, ROOT_TOLERANCE, MAX_PROJECTIONS.
#define MPC_FIELD_SAMPLES_PER_SPACING 4.0
#define MPC_FIELD_MAX_ROOT_STEPS 100
#define MPC_FIELD_ROOT_TOLERANCE 1e-12
#define MPC_FIELD_MAX_PROJECTIONS 8

// One axis of a point located on the grid: the lower node, the next one (periodic), the fraction.
struct MpcFieldAxis {
    unsigned int i, j;
    double f;
};

// DistanceField::locate: x on an axis of n nodes (as an exact double), 1 / spacing `inv`.
__device__ __forceinline__ MpcFieldAxis mpc_field_locate(double x, double inv, double n) {
    double u = x * inv - 0.5;
    double fl = floor(u);
    double k = fl;
    // the point lies in the box or a step outside it, so one wrap is the floored modulo; a
    // point further out takes it in f64, exact for these integers (a 64-bit integer remainder
    // is dozens of instructions)
    if (k < 0.0) {
        k += n;
    } else if (k >= n) {
        k -= n;
    }
    if (k < 0.0 || k >= n) {
        k = fl - n * floor(fl / n);
        k = k < 0.0 ? k + n : (k >= n ? k - n : k);
    }
    unsigned int i = (unsigned int)k;
    return {i, i + 1u == (unsigned int)n ? 0u : i + 1u, u - fl};
}

// The node value at (a, b, d) of a grid of nx x . x nz nodes in the cells' order (x fastest,
// then z, then y).
__device__ __forceinline__ double mpc_field_node(const float *grid, size_t nx, size_t nz, unsigned int a,
                                                 unsigned int b, unsigned int d) {
    return (double)__ldg(grid + a + nx * (d + nz * (size_t)b));
}

// DistanceField::stencil of a point located as (x, y, z): the 8 node values (index
// dx*4 + dy*2 + dz) and the fractions. On a GPU the nodes lie in the cells' order, so the
// threads of a warp, whose particles lie in neighbouring cells along x, read neighbouring nodes.
__device__ __forceinline__ void mpc_field_stencil_at(const float *grid, size_t nx, size_t nz, MpcFieldAxis x,
                                                     MpcFieldAxis y, MpcFieldAxis z, double v[8], double f[3]) {
    f[0] = x.f;
    f[1] = y.f;
    f[2] = z.f;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        v[c] = mpc_field_node(grid, nx, nz, (c & 4) ? x.j : x.i, (c & 2) ? y.j : y.i, (c & 1) ? z.j : z.i);
    }
}

// DistanceField::stencil: the 8 node values about r, fractions f.
__device__ __forceinline__ void mpc_field_stencil(const MpcWallField &w, const float *grid, const double r[3],
                                                  double v[8], double f[3]) {
    mpc_field_stencil_at(grid, (size_t)w.nx, (size_t)w.nz, mpc_field_locate(r[0], w.inv_spacing, w.nx),
                         mpc_field_locate(r[1], w.inv_spacing, w.ny), mpc_field_locate(r[2], w.inv_spacing, w.nz),
                         v, f);
}

__device__ __forceinline__ double mpc_field_lerp(double a, double b, double t) { return a + (b - a) * t; }

// field::trilinear.
__device__ __forceinline__ double mpc_field_trilinear(const double v[8], const double f[3]) {
    double c00 = mpc_field_lerp(v[0], v[4], f[0]);
    double c10 = mpc_field_lerp(v[2], v[6], f[0]);
    double c01 = mpc_field_lerp(v[1], v[5], f[0]);
    double c11 = mpc_field_lerp(v[3], v[7], f[0]);
    double c0 = mpc_field_lerp(c00, c10, f[1]);
    double c1 = mpc_field_lerp(c01, c11, f[1]);
    return mpc_field_lerp(c0, c1, f[2]);
}

// The interpolated distance is one out-of-line function, called by the reach test, the root
// search, the cut-cell test and the projections: one copy of its code in a kernel instead of
// one per use. Inlined, the streaming kernel's code was so large that its warps waited for
// instructions (docs/walls.md: pass 1 of the porous sample took a tenth longer).
// MPC_FIELD_CALLS=0 inlines it, for A/B runs through MPCBOX_NVRTC_OPTIONS.
#ifndef MPC_FIELD_CALLS
#define MPC_FIELD_CALLS 1
#endif
#if MPC_FIELD_CALLS
#define MPC_FIELD_VALUE_FN __device__ __noinline__
#else
#define MPC_FIELD_VALUE_FN __device__ __forceinline__
#endif

// The interpolant at (x, y, z) of the field of nx x ny x nz nodes, 1 / spacing `inv`.
MPC_FIELD_VALUE_FN double mpc_field_value(const float *grid, double inv, double nx, double ny, double nz, double x,
                                          double y, double z) {
    double v[8], f[3];
    mpc_field_stencil_at(grid, (size_t)nx, (size_t)nz, mpc_field_locate(x, inv, nx), mpc_field_locate(y, inv, ny),
                         mpc_field_locate(z, inv, nz), v, f);
    return mpc_field_trilinear(v, f);
}

// WallShape::signed_distance.
__device__ __forceinline__ double mpc_field_distance(const MpcWallField &w, const float *grid, const double r[3]) {
    return mpc_field_value(grid, w.inv_spacing, w.nx, w.ny, w.nz, r[0], r[1], r[2]);
}

// DistanceField::gradient.
__device__ __forceinline__ void mpc_field_gradient(const MpcWallField &w, const float *grid, const double r[3],
                                                   double g[3]) {
    double v[8], f[3];
    mpc_field_stencil(w, grid, r, v, f);
    double gx = mpc_field_lerp(mpc_field_lerp(v[4] - v[0], v[6] - v[2], f[1]),
                               mpc_field_lerp(v[5] - v[1], v[7] - v[3], f[1]), f[2]);
    double gy = mpc_field_lerp(mpc_field_lerp(v[2] - v[0], v[6] - v[4], f[0]),
                               mpc_field_lerp(v[3] - v[1], v[7] - v[5], f[0]), f[2]);
    double gz = mpc_field_lerp(mpc_field_lerp(v[1] - v[0], v[5] - v[4], f[0]),
                               mpc_field_lerp(v[3] - v[2], v[7] - v[6], f[0]), f[1]);
    g[0] = gx / w.spacing;
    g[1] = gy / w.spacing;
    g[2] = gz / w.spacing;
}

// WallShape::normal.
__device__ __forceinline__ void mpc_field_normal(const MpcWallField &w, const float *grid, const double r[3],
                                                 double n[3]) {
    double g[3];
    mpc_field_gradient(w, grid, r, g);
    double m = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
    if (m > 0.0) {
        n[0] = g[0] / m;
        n[1] = g[1] / m;
        n[2] = g[2] / m;
    } else {
        n[0] = 0.0;
        n[1] = 1.0;
        n[2] = 0.0;
    }
}

// DistanceField::last_time_in_fluid: the Illinois root search of the impact in [lo, hi].
__device__ __forceinline__ double mpc_field_last_time_in_fluid(const MpcWallField &w, const float *grid,
                                                               const double r[3], const double v[3], double dt,
                                                               double lo, double d_lo, double hi, double d_hi) {
    double tolerance = MPC_FIELD_ROOT_TOLERANCE * dt;
    int moved = 0;
    for (int k = 0; k < MPC_FIELD_MAX_ROOT_STEPS; ++k) {
        if (!(hi - lo > tolerance)) {
            break;
        }
        double t = d_lo > 0.0 ? (lo * d_hi - hi * d_lo) / (d_hi - d_lo) : 0.5 * (lo + hi);
        if (!(t > lo && t < hi)) {
            t = 0.5 * (lo + hi);
            if (!(t > lo && t < hi)) {
                break;
            }
        }
        double q[3] = {r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t};
        double d = mpc_field_distance(w, grid, q);
        if (d < 0.0) {
            hi = t;
            d_hi = d;
            if (moved == -1) {
                d_lo *= 0.5;
            }
            moved = -1;
        } else {
            lo = t;
            d_lo = d;
            if (moved == 1) {
                d_hi *= 0.5;
            }
            moved = 1;
        }
    }
    return lo;
}

// WallShape::time_of_impact: t in [0, dt], or -1 for none.
__device__ __forceinline__ double mpc_field_time_of_impact(const MpcWallField &w, const float *grid,
                                                           const double r[3], const double v[3], double dt) {
    double speed = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (speed == 0.0) {
        return -1.0;
    }
    double d0 = mpc_field_distance(w, grid, r);
    if (d0 > w.slope * speed * dt + 1e-9) {
        return -1.0;
    }
    if (d0 <= 0.0) {
        double g[3];
        mpc_field_gradient(w, grid, r, g);
        if (g[0] * v[0] + g[1] * v[1] + g[2] * v[2] < 0.0) {
            return 0.0;
        }
    }
    double steps_f = ceil(speed * dt * MPC_FIELD_SAMPLES_PER_SPACING / w.spacing);
    unsigned int steps = (unsigned int)(steps_f > 1.0 ? steps_f : 1.0);
    double lo = 0.0, d_lo = d0;
    for (unsigned int k = 1; k <= steps; ++k) {
        double t = k == steps ? dt : dt * (double)k / (double)steps;
        double p[3] = {r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t};
        double d = mpc_field_distance(w, grid, p);
        if (d < 0.0) {
            return mpc_field_last_time_in_fluid(w, grid, r, v, dt, lo, d_lo, t, d);
        }
        lo = t;
        d_lo = d;
    }
    return -1.0;
}

// DistanceField::partition_coordinate: the m-th of a, the grid planes inside (a, a + 1),
// a + 1; false past the last.
__device__ __forceinline__ bool mpc_field_partition(const MpcWallField &w, double a, unsigned int m, double *out) {
    if (m == 0u) {
        *out = a;
        return true;
    }
    double s = w.spacing;
    double first = floor(a * w.inv_spacing - 0.5) + 1.0;
    double x = (first + (double)(m - 1u) + 0.5) * s;
    if (x < a + 1.0) {
        *out = x;
        return true;
    }
    if (m == 1u) {
        *out = a + 1.0;
        return true;
    }
    double previous = (first + (double)(m - 2u) + 0.5) * s;
    if (previous < a + 1.0) {
        *out = a + 1.0;
        return true;
    }
    return false;
}

// The partition points of a cell's edges held at once (a spacing of at least a quarter cell):
// each axis's points located once, not once per vertex (0: every vertex located in turn, for
// A/B runs through MPCBOX_NVRTC_OPTIONS).
#ifndef MPC_FIELD_EDGE_POINTS
#define MPC_FIELD_EDGE_POINTS 6
#endif
#define MPC_FIELD_EDGE_SLOTS (MPC_FIELD_EDGE_POINTS > 0 ? MPC_FIELD_EDGE_POINTS : 1)

// One axis of [lo, lo + 1)'s partition located: the count, or 0 when it has more points than
// MPC_FIELD_EDGE_POINTS.
__device__ __forceinline__ unsigned int mpc_field_edge(const MpcWallField &w, double lo, double n,
                                                       MpcFieldAxis out[MPC_FIELD_EDGE_SLOTS]) {
    double p;
    unsigned int m = 0;
    for (; mpc_field_partition(w, lo, m, &p); ++m) {
        if (m == MPC_FIELD_EDGE_POINTS) {
            return 0u;
        }
        out[m] = mpc_field_locate(p, w.inv_spacing, n);
    }
    return m;
}

// Whether the values seen so far, d the last, take both signs (a cut cell).
__device__ __forceinline__ bool mpc_field_both_signs(double d, bool *neg, bool *pos) {
    *neg = *neg || d < 0.0;
    *pos = *pos || d > 0.0;
    return *neg && *pos;
}

// WallShape::cuts_cell for [lo, lo + 1): the interpolant's sign at the vertices of the cell's
// partition by the grid planes (within each grid box it is trilinear, so its extremes over the
// cell lie there), the same values in the same order as the CPU's.
__device__ __forceinline__ bool mpc_field_cuts_cell(const MpcWallField &w, const float *grid, const double lo[3]) {
    double centre[3] = {lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5};
    double dc = mpc_field_distance(w, grid, centre);
    if (fabs(dc) > w.slope * sqrt(0.75)) {
        return false;
    }
    MpcFieldAxis ax[MPC_FIELD_EDGE_SLOTS], ay[MPC_FIELD_EDGE_SLOTS], az[MPC_FIELD_EDGE_SLOTS];
    unsigned int nx = mpc_field_edge(w, lo[0], w.nx, ax);
    unsigned int ny = mpc_field_edge(w, lo[1], w.ny, ay);
    unsigned int nz = mpc_field_edge(w, lo[2], w.nz, az);
    bool neg = false, pos = false;
    if (nx != 0u && ny != 0u && nz != 0u) {
        for (unsigned int a = 0; a < nx; ++a) {
            for (unsigned int b = 0; b < ny; ++b) {
                for (unsigned int c = 0; c < nz; ++c) {
                    double v[8], f[3];
                    mpc_field_stencil_at(grid, (size_t)w.nx, (size_t)w.nz, ax[a], ay[b], az[c], v, f);
                    if (mpc_field_both_signs(mpc_field_trilinear(v, f), &neg, &pos)) {
                        return true;
                    }
                }
            }
        }
        return false;
    }
    // a finer grid: every vertex located in turn
    double p[3];
    for (unsigned int a = 0; mpc_field_partition(w, lo[0], a, &p[0]); ++a) {
        for (unsigned int b = 0; mpc_field_partition(w, lo[1], b, &p[1]); ++b) {
            for (unsigned int c = 0; mpc_field_partition(w, lo[2], c, &p[2]); ++c) {
                if (mpc_field_both_signs(mpc_field_distance(w, grid, p), &neg, &pos)) {
                    return true;
                }
            }
        }
    }
    return false;
}

// WallShape::keep_inside: along the normal onto the surface and a few f32 steps of the box
// edge beyond it, wrapped, until in the fluid.
__device__ __forceinline__ void mpc_field_keep_inside(const MpcWallField &w, const float *grid, float q[3]) {
    double len[3] = {w.nx * w.spacing, w.ny * w.spacing, w.nz * w.spacing};
    double longest = len[0] > len[1] ? len[0] : len[1];
    longest = longest > len[2] ? longest : len[2];
    double hair = 4.0 * 1.1920928955078125e-7 * longest;
    for (int it = 0; it < MPC_FIELD_MAX_PROJECTIONS; ++it) {
        double r[3] = {(double)q[0], (double)q[1], (double)q[2]};
        double d = mpc_field_distance(w, grid, r);
        if (d >= 0.0) {
            break;
        }
        double n[3];
        mpc_field_normal(w, grid, r, n);
        double step = hair - d;
        for (int k = 0; k < 3; ++k) {
            q[k] = mpc_wrap_coordinate(r[k] + n[k] * step, len[k]);
        }
    }
}
