// Walls (a mirror of src/physics/walls/): the shapes as a tagged union in the kernel
// parameters, with the formulas of shapes.rs (signed distance, normal, wall velocity, time of
// impact of a straight path, cut cells, f32 positions kept in the fluid), operation by
// operation (compiled with --fmad=false); the bounce-back path and the virtual particles are in
// wall_stream.cuh. Included before mpc.cuh, whose MpcParams holds an
// MpcWalls; the callers there and in cells.cu pass the run constants they need.
#pragma once
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#include "wall_shapes.cuh"
#include "wall_field.cuh"
#endif

// The walls' code is compiled in only with MPC_WALLS set (the kernels of runs with walls,
// kernels.rs walls_source); without it the kernels are those of a periodic box.
#ifndef MPC_WALLS
#define MPC_WALLS 0
#endif
// The walls' shape: the run's constant where the kernels were compiled for one shape
// (MPC_WALLS_SHAPE, kernels.rs walls_source), so that only that shape's code is generated and
// the streaming kernels keep their registers; else read from the parameters.
#ifdef MPC_WALLS_SHAPE
#define MPC_WALL_KIND(w) ((void)(w), (unsigned int)(MPC_WALLS_SHAPE))
#else
#define MPC_WALL_KIND(w) ((w).kind)
#endif

// MPC_WALLS_NONE, _SLIT, _PIPE, _SLIT_Z, _SPHERE, _OBSTACLE, _PORE, _COSINE, _FIELD: the header generated
// by src/backend/cuda/contract.rs; the pore's and the cosine walls' formulas are in wall_shapes.cuh,
// the data walls' in wall_field.cuh.
// Every shape dispatch is a switch with a case per shape that traps on a code it does not know
// (default: __trap()), never falls through to another shape's physics.
#define MPC_MAX_BOUNCES 32
// MPC_WALLS_REACH_MARGIN (generated from walls::geometry::REACH_MARGIN): how much farther than it
// can travel in a step a particle must be from the walls to skip the walls' path.

// Plates normal to y (MPC_WALLS_SLIT) or z (MPC_WALLS_SLIT_Z) at bottom and top along that
// axis, moving along x with u_bottom and u_top; bottom_f32, top_f32: the smallest and largest
// f32 in [bottom, top] (exact as doubles).
struct MpcWallSlit {
    double bottom, top, u_bottom, u_top, bottom_f32, top_f32;
};

// A pipe along x: axis at (yc, zc), radius r, wall moving along x with u.
struct MpcWallPipe {
    double yc, zc, r, u, unused0, unused1;
};

// A sphere at rest: centre (xc, yc, zc), radius r; the fluid inside it (MPC_WALLS_SPHERE) or
// outside it (MPC_WALLS_OBSTACLE); along_z = 1: a cylinder along z through the centre (the
// distance in x and y only). src/physics/walls/sphere.rs.
struct MpcWallSphere {
    double xc, yc, zc, r, along_z, unused;
};

// Mirrors `WallParams` in src/backend/cuda/params.rs (#[repr(C)], 88 bytes).
struct MpcWalls {
    unsigned int kind;  // MPC_WALLS_*
    unsigned int no_slip;
    unsigned int fill;  // particles per cell M
    unsigned int pad;
    double *momentum;   // the step report's momentum given to each surface, [2][3]
    const float *grid;  // a distance field's node values (MPC_WALLS_FIELD), else null
    // Walls::cell_clearances: a byte per global cell, q with q / MPC_WALLS_CLEARANCE_STEPS a
    // lower bound of the clearance over the cell (the pore, the cosine walls, a field), else null
    const unsigned char *clearance;
    union {
        double raw[6];
        MpcWallSlit slit;
        MpcWallPipe pipe;
        MpcWallSphere sphere;
        MpcWallPore pore;
        MpcWallCosine cosine;
        MpcWallField field;  // the nodes at `grid` (wall_field.cuh)
    };
};

// Slit::axis for the two slit codes only (callers are in their cases): 1 y, 2 z. Components
// are picked by a select, not r[axis], so that the arrays stay in registers.
__device__ __forceinline__ bool mpc_slit_normal_is_z(const MpcWalls &w) { return MPC_WALL_KIND(w) == MPC_WALLS_SLIT_Z; }
__device__ __forceinline__ double mpc_slit_coordinate(const MpcWalls &w, const double r[3]) {
    return mpc_slit_normal_is_z(w) ? r[2] : r[1];
}

// Slit::lower: nearer the bottom plate (x the coordinate along the normal).
__device__ __forceinline__ bool mpc_slit_lower(const MpcWallSlit &s, double x) {
    return x < 0.5 * (s.bottom + s.top);
}

// Sphere::in_fluid etc.: the sign of the fluid side (+1 inside the sphere, -1 outside).
__device__ __forceinline__ bool mpc_sphere_fluid_inside(const MpcWalls &w) { return MPC_WALL_KIND(w) == MPC_WALLS_SPHERE; }

// Sphere::offset and Sphere::excess.
__device__ __forceinline__ void mpc_sphere_offset(const MpcWallSphere &s, const double r[3], double d[3]) {
    d[0] = r[0] - s.xc;
    d[1] = r[1] - s.yc;
    d[2] = s.along_z != 0.0 ? 0.0 : r[2] - s.zc;
}
__device__ __forceinline__ double mpc_sphere_excess(const MpcWallSphere &s, const double d[3]) {
    return d[0] * d[0] + d[1] * d[1] + d[2] * d[2] - s.r * s.r;
}

// WallShape::closed_axes for y (axis 1) and z (axis 2): no periodic wrapping there (x is
// wrapped for every shape: a sphere with the fluid inside keeps it within the box).
__device__ __forceinline__ bool mpc_walls_close_axis(const MpcWalls &w, int axis) {
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
            return axis == 1;
        case MPC_WALLS_SLIT_Z:
            return axis == 2;
        case MPC_WALLS_PIPE:
            return axis == 1 || axis == 2;
        case MPC_WALLS_SPHERE:
            return axis == 1 || (axis == 2 && w.sphere.along_z == 0.0);
        case MPC_WALLS_OBSTACLE:
        case MPC_WALLS_PORE:
        case MPC_WALLS_FIELD:
            return false;
        case MPC_WALLS_COSINE:
            return axis == 1;
        default:
            __trap();
            return false;
    }
}

// WallShape::surface.
__device__ __forceinline__ unsigned int mpc_walls_surface(const MpcWalls &w, const double r[3]) {
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z:
            return mpc_slit_lower(w.slit, mpc_slit_coordinate(w, r)) ? 0u : 1u;
        case MPC_WALLS_PIPE:
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE:
        case MPC_WALLS_FIELD:
            return 0u;
        case MPC_WALLS_PORE: {
            double dx, dy;
            mpc_pore_offset(w.pore, r[0], r[1], &dx, &dy);
            return dy < 0.0 ? 0u : 1u;
        }
        case MPC_WALLS_COSINE: {
            double b, t, db, dt;
            return mpc_cosine_distances(w.cosine, r, &b, &t, &db, &dt);
        }
        default:
            __trap();
            return 0u;
    }
}

// WallShape::wall_velocity.
__device__ __forceinline__ void mpc_walls_velocity(const MpcWalls &w, const double r[3], double u[3]) {
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z:
            u[0] = mpc_walls_surface(w, r) == 0u ? w.slit.u_bottom : w.slit.u_top;
            break;
        case MPC_WALLS_PIPE:
            u[0] = w.pipe.u;
            break;
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE:
        case MPC_WALLS_PORE:
        case MPC_WALLS_COSINE:
        case MPC_WALLS_FIELD:
            u[0] = 0.0;
            break;
        default:
            __trap();
    }
    u[1] = 0.0;
    u[2] = 0.0;
}

// WallShape::normal (into the fluid).
__device__ __forceinline__ void mpc_walls_normal(const MpcWalls &w, const double r[3], double n[3]) {
    n[0] = 0.0;
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z: {
            double s = mpc_slit_lower(w.slit, mpc_slit_coordinate(w, r)) ? 1.0 : -1.0;
            bool z = mpc_slit_normal_is_z(w);
            n[1] = z ? 0.0 : s;
            n[2] = z ? s : 0.0;
            return;
        }
        case MPC_WALLS_PIPE: {
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
            return;
        }
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE: {
            double d[3];
            mpc_sphere_offset(w.sphere, r, d);
            double rho = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            double s = mpc_sphere_fluid_inside(w) ? -1.0 : 1.0;
            if (rho > 0.0) {
                n[0] = s * d[0] / rho;
                n[1] = s * d[1] / rho;
                n[2] = s * d[2] / rho;
            } else {
                n[0] = 0.0;
                n[1] = s;
                n[2] = 0.0;
            }
            return;
        }
        case MPC_WALLS_PORE:
            mpc_pore_normal(w.pore, r, n);
            return;
        case MPC_WALLS_COSINE:
            mpc_cosine_normal(w.cosine, r, n);
            return;
        case MPC_WALLS_FIELD:
            mpc_field_normal(w.field, w.grid, r, n);
            return;
        default:
            __trap();
    }
}

// WallShape::signed_distance (> 0 in the fluid).
__device__ __forceinline__ double mpc_walls_signed_distance(const MpcWalls &w, const double r[3]) {
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z: {
            double x = mpc_slit_coordinate(w, r);
            double a = x - w.slit.bottom;
            double b = w.slit.top - x;
            return a < b ? a : b;
        }
        case MPC_WALLS_PIPE: {
            double dy = r[1] - w.pipe.yc;
            double dz = r[2] - w.pipe.zc;
            return w.pipe.r - sqrt(dy * dy + dz * dz);
        }
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE: {
            double d[3];
            mpc_sphere_offset(w.sphere, r, d);
            double rho = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            return mpc_sphere_fluid_inside(w) ? w.sphere.r - rho : rho - w.sphere.r;
        }
        case MPC_WALLS_PORE:
            return mpc_pore_signed_distance(w.pore, r);
        case MPC_WALLS_COSINE:
            return mpc_cosine_signed_distance(w.cosine, r);
        case MPC_WALLS_FIELD:
            return mpc_field_distance(w.field, w.grid, r);
        default:
            __trap();
            return 0.0;
    }
}

// WallShape::time_of_impact: the first t in [0, dt] at which r + v t leaves the fluid, or -1.
__device__ __forceinline__ double mpc_walls_time_of_impact(const MpcWalls &w, const double r[3], const double v[3],
                                                           double dt) {
    double t;
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z: {
            double x = mpc_slit_coordinate(w, r);
            double vx = mpc_slit_coordinate(w, v);
            if (vx < 0.0) {
                t = (w.slit.bottom - x) / vx;
            } else if (vx > 0.0) {
                t = (w.slit.top - x) / vx;
            } else {
                return -1.0;
            }
            break;
        }
        case MPC_WALLS_PIPE: {
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
            break;
        }
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE: {
            bool inside = mpc_sphere_fluid_inside(w);
            double d[3];
            mpc_sphere_offset(w.sphere, r, d);
            double vz = w.sphere.along_z != 0.0 ? 0.0 : v[2];
            double a = v[0] * v[0] + v[1] * v[1] + vz * vz;
            if (a == 0.0) {
                return -1.0;
            }
            double b = d[0] * v[0] + d[1] * v[1] + d[2] * vz;
            if (!inside && b >= 0.0) {
                return -1.0;
            }
            double c = mpc_sphere_excess(w.sphere, d);
            double disc = b * b - a * c;
            if (disc < 0.0) {
                return -1.0;
            }
            double sd = sqrt(disc);
            if (!inside) {
                t = c / (sd - b);
            } else if (b <= 0.0) {
                t = (sd - b) / a;
            } else {
                t = c / (-b - sd);
            }
            break;
        }
        case MPC_WALLS_PORE:
            t = mpc_pore_time_of_impact(w.pore, r, v);
            if (t < 0.0) {
                return -1.0;
            }
            break;
        case MPC_WALLS_COSINE:
            // the root search stays within dt (-1: no contact)
            return mpc_cosine_time_of_impact(w.cosine, r, v, dt);
        case MPC_WALLS_FIELD:
            // its own answer: -1 or a time in [0, dt]
            return mpc_field_time_of_impact(w.field, w.grid, r, v, dt);
        default:
            __trap();
            return -1.0;
    }
    if (t > dt) {
        return -1.0;
    }
    return t < 0.0 ? 0.0 : t;
}

// WallShape::cuts_cell for the cell [lo, lo + 1).
__device__ __forceinline__ bool mpc_walls_cuts_cell(const MpcWalls &w, const double lo[3]) {
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z: {
            double l = mpc_slit_coordinate(w, lo);
            double hi = l + 1.0;
            return (l < w.slit.bottom && w.slit.bottom < hi) || (l < w.slit.top && w.slit.top < hi);
        }
        case MPC_WALLS_PIPE: {
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
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE: {
            double d0[3];
            mpc_sphere_offset(w.sphere, lo, d0);
            double near = 0.0, far = 0.0;
            int axes = w.sphere.along_z != 0.0 ? 2 : 3;
            for (int k = 0; k < axes; ++k) {
                double d = d0[k];
                double d1 = d + 1.0;
                double n = d > 0.0 ? d : (d1 < 0.0 ? -d1 : 0.0);
                double x = fabs(d), y = fabs(d1);
                double f = x > y ? x : y;
                near += n * n;
                far += f * f;
            }
            double r2 = w.sphere.r * w.sphere.r;
            return near < r2 && r2 < far;
        }
        case MPC_WALLS_PORE:
            return mpc_pore_cuts_cell(w.pore, lo);
        case MPC_WALLS_COSINE:
            return mpc_cosine_cuts_cell(w.cosine, lo);
        case MPC_WALLS_FIELD:
            return mpc_field_cuts_cell(w.field, w.grid, lo);
        default:
            __trap();
            return false;
    }
}

// Sphere::in_fluid for a stored position.
__device__ __forceinline__ bool mpc_sphere_in_fluid(const MpcWalls &w, float x, float y, float z) {
    double r[3] = {(double)x, (double)y, (double)z};
    double d[3];
    mpc_sphere_offset(w.sphere, r, d);
    double e = mpc_sphere_excess(w.sphere, d);
    return mpc_sphere_fluid_inside(w) ? e <= 0.0 : e >= 0.0;
}

// A stored position (f32).
struct MpcPos3f {
    float x, y, z;
};

// WallShape::keep_inside: a stored position rounded a hair into the wall is moved back. Not
// inlined, arguments and result by value: the pass-1 kernels pay for it only between walls.
__device__ __noinline__ MpcPos3f mpc_walls_keep_inside(MpcWalls w, float x, float y, float z) {
    MpcPos3f q = {x, y, z};
    switch (MPC_WALL_KIND(w)) {
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SLIT_Z: {
            float lo = (float)w.slit.bottom_f32, hi = (float)w.slit.top_f32;
            float c = mpc_slit_normal_is_z(w) ? q.z : q.y;
            if (c < lo) {
                c = lo;
            } else if (c > hi) {
                c = hi;
            }
            if (mpc_slit_normal_is_z(w)) {
                q.z = c;
            } else {
                q.y = c;
            }
            return q;
        }
        case MPC_WALLS_PIPE:
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
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE: {
            // Sphere::keep_inside: onto the surface, then f32 steps into the fluid
            if (mpc_sphere_in_fluid(w, q.x, q.y, q.z)) {
                return q;
            }
            double r[3] = {(double)q.x, (double)q.y, (double)q.z};
            double d[3];
            mpc_sphere_offset(w.sphere, r, d);
            double rho = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            if (rho > 0.0) {
                double k = w.sphere.r / rho;
                q.x = (float)(w.sphere.xc + d[0] * k);
                q.y = (float)(w.sphere.yc + d[1] * k);
                if (w.sphere.along_z == 0.0) {
                    q.z = (float)(w.sphere.zc + d[2] * k);
                }
            }
            bool inside = mpc_sphere_fluid_inside(w);
            bool round_z = w.sphere.along_z == 0.0;
            for (int k = 0; k < 8; ++k) {
                if (mpc_sphere_in_fluid(w, q.x, q.y, q.z)) {
                    break;
                }
                q.x = inside ? mpc_f32_step_towards(q.x, w.sphere.xc) : mpc_f32_step_away(q.x, w.sphere.xc);
                q.y = inside ? mpc_f32_step_towards(q.y, w.sphere.yc) : mpc_f32_step_away(q.y, w.sphere.yc);
                if (round_z) {
                    q.z = inside ? mpc_f32_step_towards(q.z, w.sphere.zc) : mpc_f32_step_away(q.z, w.sphere.zc);
                }
            }
            return q;
        }
        case MPC_WALLS_PORE:
            mpc_pore_keep_inside(w.pore, &q.x, &q.y);
            return q;
        case MPC_WALLS_COSINE:
            q.y = mpc_cosine_keep_inside(w.cosine, q.x, q.y);
            return q;
        case MPC_WALLS_FIELD: {
            float c[3] = {q.x, q.y, q.z};
            mpc_field_keep_inside(w.field, w.grid, c);
            q.x = c[0];
            q.y = c[1];
            q.z = c[2];
            return q;
        }
        default:
            __trap();
            return q;
    }
}
