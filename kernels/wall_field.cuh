// Walls given as data (a mirror of src/physics/walls/field.rs): a signed distance on a
// periodic grid of nx x ny x nz nodes `spacing` apart (node (i, j, k) at ((i + 1/2) s, ...),
// f32 values in C order at `grid`), interpolated trilinearly; its gradient, the time of impact
// of a straight path (samples of at most a quarter spacing, then bisection), cut cells (the
// vertices of the cell's partition by the grid planes) and f32 positions projected back into
// the fluid, operation by operation (compiled with --fmad=false). Included before walls.cuh,
// whose MpcWalls holds an MpcWallField.
#pragma once

// DistanceField::{spacing, nodes, slope}: nx, ny, nz as exact doubles.
struct MpcWallField {
    double spacing, nx, ny, nz, slope, unused;
};

// field::SAMPLES_PER_SPACING, MAX_ROOT_STEPS, ROOT_TOLERANCE, MAX_PROJECTIONS.
#define MPC_FIELD_SAMPLES_PER_SPACING 4.0
#define MPC_FIELD_MAX_ROOT_STEPS 100
#define MPC_FIELD_ROOT_TOLERANCE 1e-12
#define MPC_FIELD_MAX_PROJECTIONS 8

// DistanceField::locate: the lower node index along one axis, the next one (periodic) and the
// fraction.
__device__ __forceinline__ void mpc_field_locate(double x, double s, double n, long long *i, long long *j,
                                                 double *f) {
    double u = x / s - 0.5;
    double fl = floor(u);
    *f = u - fl;
    long long nn = (long long)n;
    long long k = (long long)fl;
    // the point lies in the box or a step outside it, so one wrap is the floored modulo; the
    // 64-bit remainder (dozens of instructions, three per read) only for a point further out
    if (k < 0) {
        k += nn;
    } else if (k >= nn) {
        k -= nn;
    }
    if (k < 0 || k >= nn) {
        k = (long long)fl % nn;
        if (k < 0) {
            k += nn;
        }
    }
    *i = k;
    *j = k + 1 == nn ? 0 : k + 1;
}

// DistanceField::stencil: the 8 node values about r (index dx*4 + dy*2 + dz), fractions f.
// On a GPU the nodes lie in the cells' order (x fastest, then z, then y: WallDataOnHost), so
// the threads of a warp, whose particles lie in neighbouring cells along x, read neighbouring
// nodes.
__device__ __forceinline__ void mpc_field_stencil(const MpcWallField &w, const float *grid, const double r[3],
                                                  double v[8], double f[3]) {
    long long i[2], j[2], k[2];
    mpc_field_locate(r[0], w.spacing, w.nx, &i[0], &i[1], &f[0]);
    mpc_field_locate(r[1], w.spacing, w.ny, &j[0], &j[1], &f[1]);
    mpc_field_locate(r[2], w.spacing, w.nz, &k[0], &k[1], &f[2]);
    long long nx = (long long)w.nx, nz = (long long)w.nz;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        long long a = i[c >> 2], b = j[(c >> 1) & 1], d = k[c & 1];
        v[c] = (double)__ldg(grid + a + nx * (d + nz * b));
    }
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

// WallShape::signed_distance.
__device__ __forceinline__ double mpc_field_distance(const MpcWallField &w, const float *grid, const double r[3]) {
    double v[8], f[3];
    mpc_field_stencil(w, grid, r, v, f);
    return mpc_field_trilinear(v, f);
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
__device__ __forceinline__ bool mpc_field_partition(double s, double a, unsigned int m, double *out) {
    if (m == 0u) {
        *out = a;
        return true;
    }
    double first = floor(a / s - 0.5) + 1.0;
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

// WallShape::cuts_cell for [lo, lo + 1).
__device__ __forceinline__ bool mpc_field_cuts_cell(const MpcWallField &w, const float *grid, const double lo[3]) {
    double centre[3] = {lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5};
    double dc = mpc_field_distance(w, grid, centre);
    if (fabs(dc) > w.slope * sqrt(0.75)) {
        return false;
    }
    bool neg = false, pos = false;
    double p[3];
    for (unsigned int a = 0; mpc_field_partition(w.spacing, lo[0], a, &p[0]); ++a) {
        for (unsigned int b = 0; mpc_field_partition(w.spacing, lo[1], b, &p[1]); ++b) {
            for (unsigned int c = 0; mpc_field_partition(w.spacing, lo[2], c, &p[2]); ++c) {
                double d = mpc_field_distance(w, grid, p);
                neg = neg || d < 0.0;
                pos = pos || d > 0.0;
                if (neg && pos) {
                    return true;
                }
            }
        }
    }
    return false;
}

// physics::wrap_coordinate (mpc.cuh has its twin, included after this file).
__device__ __forceinline__ float mpc_field_wrap(double x, double l) {
    double r = x - l * floor(x / l);
    if (r < 0.0) {
        r += l;
    }
    if (r >= l) {
        r -= l;
    }
    float f = (float)r;
    return f >= (float)l ? 0.0f : f;
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
            q[k] = mpc_field_wrap(r[k] + n[k] * step, len[k]);
        }
    }
}
