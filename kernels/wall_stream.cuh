// The streaming and the collision's side of the walls (a mirror of src/physics/walls/mod.rs):
// the bounce-back path of Physics::stream_walled and the virtual particles of Walls::fill_cell,
// on the shape dispatch of walls.cuh, operation by operation (compiled with --fmad=false). The
// fluid kernels' unit only (the MD engine's needs the shapes alone).

#pragma once
#ifndef MPCBOX_NVRTC
#include "walls.cuh"
#include "report.cuh"
#endif

// walls::advance: r += v t + a t^2 / 2, v += a t.
__device__ __forceinline__ void mpc_walls_advance(double r[3], double v[3], const double a[3], double t) {
    double tt = 0.5 * t * t;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        r[k] = r[k] + v[k] * t + a[k] * tt;
        v[k] = v[k] + a[k] * t;
    }
}

// Walls::cell_clearances: the stored lower bound of the clearance over the unit cell that
// holds r, in a box of n cells (0, so the full path, outside the box or without the table).
__device__ __forceinline__ double mpc_walls_cell_clearance(const MpcWalls &w, const unsigned int n[3],
                                                           const double r[3]) {
    if (w.clearance == nullptr || !(r[0] >= 0.0 && r[1] >= 0.0 && r[2] >= 0.0)) {
        return 0.0;
    }
    unsigned int ix = (unsigned int)r[0], iy = (unsigned int)r[1], iz = (unsigned int)r[2];
    if (ix >= n[0] || iy >= n[1] || iz >= n[2]) {
        return 0.0;
    }
    unsigned char q = __ldg(w.clearance + ix + (size_t)n[0] * (iz + (size_t)n[2] * iy));
    return (double)q * (1.0 / MPC_WALLS_CLEARANCE_STEPS);
}

// WallShape::clearance and the shortcut of Physics::stream_walled: whether a particle at r moving
// at v under acceleration a stays out of reach of the walls over a step h in a box of n cells:
// its clearance (a lower bound of its distance to the solid) exceeds how far it can go,
// |v| h + |a| h^2 / 2, by a margin that covers the rounding of the time of impact and of the
// f32 store. Such a particle's path (mpc_walls_path) has no impact, so it is the plain advance
// over h, and mpc_walls_keep_inside leaves it where it is: the caller skips both (the same
// bits, without an out-of-line call per particle). The clearance is the signed distance where
// that is Euclidean (slits, pipe, spheres, cylinders, the pore), the vertical gap over
// sqrt(1 + L^2) between cosine walls of slope at most L, and for a distance field first the
// bound stored for the particle's cell (a byte read in the cells' order clears the bulk), then
// the interpolated distance over the field's slope bound; other shapes are never out of reach.
__device__ __forceinline__ bool mpc_walls_out_of_reach(const MpcWalls &w, const unsigned int n[3], double h,
                                                      const double a[3], const double r[3], const double v[3]) {
    double speed = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    double accel = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
    double reach = speed * h + 0.5 * accel * h * h + MPC_WALLS_REACH_MARGIN;
    double clearance;
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z:
        case MPC_WALLS_PIPE:
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE:
        case MPC_WALLS_PORE:
            clearance = mpc_walls_signed_distance(w, r);
            break;
        case MPC_WALLS_COSINE: {
            double yb, yt, db, dt;
            mpc_cosine_walls_at(w.cosine, r[0], &yb, &yt, &db, &dt);
            double gap = fmin(r[1] - yb, yt - r[1]);
            double slope = fabs(w.cosine.a) * (MPC_TWO_PI / w.cosine.period);
            clearance = gap / sqrt(1.0 + slope * slope);
            break;
        }
        case MPC_WALLS_FIELD:
            if (mpc_walls_cell_clearance(w, n, r) > reach) {
                return true;
            }
            clearance = mpc_field_distance(w.field, w.grid, r) / w.field.slope;
            break;
        default:
            return false;
    }
    return clearance > reach;
}

// Position and velocity after a streaming step.
struct MpcPath {
    double r[3];
    double v[3];
};

// Physics::stream_walled up to the f32 store: r and v over one step h with acceleration a,
// bouncing off the walls at the exact times of impact; the momentum m (v - v') of each bounce
// is added to the report (w.momentum), on the grid of 1/grid when grid != 0 (fixed-point sums:
// mpc_global_term, MPC_GLOBAL_MOMENTUM). The caller (mpc_stream_walled, out of line) wraps the
// open axes, stores f32 and keeps the position in the fluid.
__device__ __forceinline__ MpcPath mpc_walls_path(const MpcWalls &w, double h, double ax, double ay, double az,
                                                  double mass, double r0, double r1, double r2, double v0, double v1,
                                                  double v2, double grid) {
    MpcPath q = {{r0, r1, r2}, {v0, v1, v2}};
    double *r = q.r, *v = q.v;
    const double a[3] = {ax, ay, az};
    double left = h;
    for (int bounces = 0;;) {
        double t = mpc_walls_time_of_impact(w, r, v, left);
        if (t < 0.0) {
            break;
        }
        mpc_walls_advance(r, v, a, t);
        double uw[3], nv[3];
        mpc_walls_velocity(w, r, uw);
        if (w.no_slip) {
#pragma unroll
            for (int k = 0; k < 3; ++k) {
                nv[k] = 2.0 * uw[k] - v[k];
            }
        } else {
            double n[3];
            mpc_walls_normal(w, r, n);
            double d = (v[0] - uw[0]) * n[0] + (v[1] - uw[1]) * n[1] + (v[2] - uw[2]) * n[2];
#pragma unroll
            for (int k = 0; k < 3; ++k) {
                nv[k] = v[k] - 2.0 * d * n[k];
            }
        }
        double *dst = mpc_walls_momentum_of_block(w.momentum) + 3 * mpc_walls_surface(w, r);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            double dp = mass * (v[k] - nv[k]);
            atomicAdd(dst + k, grid != 0.0 ? rint(dp * grid) * (1.0 / grid) : dp);
            v[k] = nv[k];
        }
        left -= t;
        bounces += 1;
        if (bounces == MPC_MAX_BOUNCES) {
            left = 0.0;
            break;
        }
    }
    mpc_walls_advance(r, v, a, left);
    return q;
}

// Raw cell sums [px, py, pz, mass, mv2, count], and the surface whose virtual particles were
// added (-1: none).
struct MpcFill {
    double s[6];
    int surface;
};

// Walls::fill_cell on raw sums s = [px, py, pz, mass, mv2, count] of global cell `cell` of a
// grid of nx x . x nz cells shifted by (sx, sy, sz): the virtual particles of a cut cell with
// 1 <= n < M particles. Not inlined, arguments and result by value (the cell kernel pays for
// it only between walls).
__device__ __noinline__ MpcFill mpc_walls_fill(MpcWalls w, unsigned long long seed, unsigned long long step,
                                               unsigned int cell, unsigned int nx, unsigned int nz, double sx,
                                               double sy, double sz, double mass, double kt,
                                               unsigned int thermostat, double s0, double s1, double s2,
                                               double s3, double s4, double s5) {
    MpcFill f = {{s0, s1, s2, s3, s4, s5}, -1};
    double *s = f.s;
    unsigned int n = (unsigned int)s[5];
    if (!w.no_slip || n == 0u || n >= w.fill) {
        return f;
    }
    unsigned int ix = cell % nx;
    unsigned int rest = cell / nx;
    unsigned int iz = rest % nz;
    unsigned int iy = rest / nz;
    double lo[3] = {(double)ix - sx, (double)iy - sy, (double)iz - sz};
    if (!mpc_walls_cuts_cell(w, lo)) {
        return f;
    }
    double centre[3] = {lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5};
    double uw[3];
    mpc_walls_velocity(w, centre, uw);
    unsigned int nv = w.fill - n;
    double mv = (double)nv * mass;
    double spread = sqrt(mv * kt);
    MpcCellStream st = mpc_cell_stream(seed, step, cell, MPC_PURPOSE_WALL_FILL);
    double p0 = mv * uw[0] + spread * mpc_normal(&st);
    double p1 = mv * uw[1] + spread * mpc_normal(&st);
    double p2 = mv * uw[2] + spread * mpc_normal(&st);
    s[0] += p0;
    s[1] += p1;
    s[2] += p2;
    s[3] += mv;
    s[5] += (double)nv;
    if (thermostat) {
        double mv2 = (p0 * p0 + p1 * p1 + p2 * p2) / mv;
        if (nv >= 2u) {
            mv2 += 2.0 * kt * mpc_gamma(&st, 1.5 * (double)(nv - 1u));
        }
        s[4] += mv2;
    }
    f.surface = (int)mpc_walls_surface(w, centre);
    return f;
}
