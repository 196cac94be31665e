// Walls (a mirror of src/physics/walls/): the shapes as a tagged union in the kernel
// parameters, with the formulas of shapes.rs (signed distance, normal, wall velocity, time of
// impact of a straight path, cut cells, f32 positions kept in the fluid), the bounce-back path
// of Physics::stream_walled and the virtual particles of Walls::fill_cell, operation by
// operation (compiled with --fmad=false). Included before mpc.cuh, whose MpcParams holds an
// MpcWalls; the callers there and in cells.cu pass the run constants they need.
#pragma once
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#endif

// The walls' code is compiled in only with MPC_WALLS set (the kernels of runs with walls,
// kernels.rs walls_source); without it the kernels are those of a periodic box.
#ifndef MPC_WALLS
#define MPC_WALLS 0
#endif

#define MPC_WALLS_NONE 0u
#define MPC_WALLS_SLIT 1u
#define MPC_WALLS_PIPE 2u
#define MPC_PURPOSE_WALL_FILL 8u
#define MPC_MAX_BOUNCES 32

// Plates normal to y at y0 and y1 moving along x with u0 and u1; y0f, y1f: the smallest and
// largest f32 in [y0, y1] (exact as doubles).
struct MpcWallSlit {
    double y0, y1, u0, u1, y0f, y1f;
};

// A pipe along x: axis at (yc, zc), radius r, wall moving along x with u.
struct MpcWallPipe {
    double yc, zc, r, u, unused0, unused1;
};

// Mirrors `WallParams` in src/backend/cuda/params.rs (#[repr(C)], 72 bytes).
struct MpcWalls {
    unsigned int kind;  // MPC_WALLS_*
    unsigned int no_slip;
    unsigned int fill;  // particles per cell M
    unsigned int pad;
    double *momentum;   // the step report's momentum given to each surface, [2][3]
    union {
        double raw[6];
        MpcWallSlit slit;
        MpcWallPipe pipe;
    };
};

// Slit::lower: nearer the bottom plate.
__device__ __forceinline__ bool mpc_slit_lower(const MpcWallSlit &s, double y) {
    return y < 0.5 * (s.y0 + s.y1);
}

// WallShape::surface.
__device__ __forceinline__ unsigned int mpc_walls_surface(const MpcWalls &w, const double r[3]) {
    if (w.kind == MPC_WALLS_SLIT) {
        return mpc_slit_lower(w.slit, r[1]) ? 0u : 1u;
    }
    return 0u;
}

// WallShape::wall_velocity.
__device__ __forceinline__ void mpc_walls_velocity(const MpcWalls &w, const double r[3], double u[3]) {
    if (w.kind == MPC_WALLS_SLIT) {
        u[0] = mpc_walls_surface(w, r) == 0u ? w.slit.u0 : w.slit.u1;
    } else {
        u[0] = w.pipe.u;
    }
    u[1] = 0.0;
    u[2] = 0.0;
}

// WallShape::normal (into the fluid).
__device__ __forceinline__ void mpc_walls_normal(const MpcWalls &w, const double r[3], double n[3]) {
    n[0] = 0.0;
    if (w.kind == MPC_WALLS_SLIT) {
        n[1] = mpc_slit_lower(w.slit, r[1]) ? 1.0 : -1.0;
        n[2] = 0.0;
        return;
    }
    double dy = r[1] - w.pipe.yc;
    double dz = r[2] - w.pipe.zc;
    double d = sqrt(dy * dy + dz * dz);
    if (d > 0.0) {
        n[1] = -dy / d;
        n[2] = -dz / d;
    } else {
        n[1] = -1.0;
        n[2] = 0.0;
    }
}

// WallShape::signed_distance (> 0 in the fluid).
__device__ __forceinline__ double mpc_walls_signed_distance(const MpcWalls &w, const double r[3]) {
    if (w.kind == MPC_WALLS_SLIT) {
        double a = r[1] - w.slit.y0;
        double b = w.slit.y1 - r[1];
        return a < b ? a : b;
    }
    double dy = r[1] - w.pipe.yc;
    double dz = r[2] - w.pipe.zc;
    return w.pipe.r - sqrt(dy * dy + dz * dz);
}

// WallShape::time_of_impact: the first t in [0, dt] at which r + v t leaves the fluid, or -1.
__device__ __forceinline__ double mpc_walls_time_of_impact(const MpcWalls &w, const double r[3], const double v[3],
                                                           double dt) {
    double t;
    if (w.kind == MPC_WALLS_SLIT) {
        if (v[1] < 0.0) {
            t = (w.slit.y0 - r[1]) / v[1];
        } else if (v[1] > 0.0) {
            t = (w.slit.y1 - r[1]) / v[1];
        } else {
            return -1.0;
        }
    } else {
        double dy = r[1] - w.pipe.yc;
        double dz = r[2] - w.pipe.zc;
        double a = v[1] * v[1] + v[2] * v[2];
        if (a == 0.0) {
            return -1.0;
        }
        double b = dy * v[1] + dz * v[2];
        double c = dy * dy + dz * dz - w.pipe.r * w.pipe.r;
        double d = b * b - a * c;
        if (d < 0.0) {
            return -1.0;
        }
        double sd = sqrt(d);
        t = b <= 0.0 ? (sd - b) / a : c / (-b - sd);
    }
    if (t > dt) {
        return -1.0;
    }
    return t < 0.0 ? 0.0 : t;
}

// WallShape::cuts_cell for the cell [lo, lo + 1).
__device__ __forceinline__ bool mpc_walls_cuts_cell(const MpcWalls &w, const double lo[3]) {
    if (w.kind == MPC_WALLS_SLIT) {
        double hi = lo[1] + 1.0;
        return (lo[1] < w.slit.y0 && w.slit.y0 < hi) || (lo[1] < w.slit.y1 && w.slit.y1 < hi);
    }
    double y0 = lo[1] - w.pipe.yc, z0 = lo[2] - w.pipe.zc;
    double y1 = y0 + 1.0, z1 = z0 + 1.0;
    double ny = y0 > 0.0 ? y0 : (y1 < 0.0 ? -y1 : 0.0);
    double nz = z0 > 0.0 ? z0 : (z1 < 0.0 ? -z1 : 0.0);
    double ay0 = fabs(y0), ay1 = fabs(y1), az0 = fabs(z0), az1 = fabs(z1);
    double fy = ay0 > ay1 ? ay0 : ay1;
    double fz = az0 > az1 ? az0 : az1;
    double r2 = w.pipe.r * w.pipe.r;
    return ny * ny + nz * nz < r2 && r2 < fy * fy + fz * fz;
}

// shapes::f32_step_towards: the f32 next to x (>= 0) towards target.
__device__ __forceinline__ float mpc_f32_step_towards(float x, double target) {
    if ((double)x > target) {
        return x > 0.0f ? __uint_as_float(__float_as_uint(x) - 1u) : x;
    } else if ((double)x < target) {
        return __uint_as_float(__float_as_uint(x) + 1u);
    }
    return x;
}

// A stored position (f32).
struct MpcPos3f {
    float x, y, z;
};

// WallShape::keep_inside: a stored position rounded a hair into the wall is moved back. Not
// inlined, arguments and result by value: the pass-1 kernels pay for it only between walls.
__device__ __noinline__ MpcPos3f mpc_walls_keep_inside(MpcWalls w, float x, float y, float z) {
    MpcPos3f q = {x, y, z};
    if (w.kind == MPC_WALLS_SLIT) {
        float lo = (float)w.slit.y0f, hi = (float)w.slit.y1f;
        if (q.y < lo) {
            q.y = lo;
        } else if (q.y > hi) {
            q.y = hi;
        }
        return q;
    }
    for (int k = 0; k < 8; ++k) {
        double dy = (double)q.y - w.pipe.yc;
        double dz = (double)q.z - w.pipe.zc;
        if (dy * dy + dz * dz - w.pipe.r * w.pipe.r <= 0.0) {
            break;
        }
        q.y = mpc_f32_step_towards(q.y, w.pipe.yc);
        q.z = mpc_f32_step_towards(q.z, w.pipe.zc);
    }
    return q;
}

// walls::advance: r += v t + a t^2 / 2, v += a t.
__device__ __forceinline__ void mpc_walls_advance(double r[3], double v[3], const double a[3], double t) {
    double tt = 0.5 * t * t;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        r[k] = r[k] + v[k] * t + a[k] * tt;
        v[k] = v[k] + a[k] * t;
    }
}

// Position and velocity after a streaming step.
struct MpcPath {
    double r[3];
    double v[3];
};

// Physics::stream_walled up to the f32 store: r and v over one step h with acceleration a,
// bouncing off the walls at the exact times of impact; the momentum m (v - v') of each bounce
// is added to the report (w.momentum). The caller wraps the open axes, stores f32 and keeps
// the position in the fluid. Not inlined, arguments and result by value (as mpc_emigrate): the
// pass-1 kernels keep their registers and pay for walls only between walls.
__device__ __noinline__ MpcPath mpc_walls_path(MpcWalls w, double h, double ax, double ay, double az, double mass,
                                               double r0, double r1, double r2, double v0, double v1, double v2) {
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
        double *dst = w.momentum + 3 * mpc_walls_surface(w, r);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            atomicAdd(dst + k, mass * (v[k] - nv[k]));
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
