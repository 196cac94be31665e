// The MPC-SRD step on one particle or one cell: a mirror of src/physics.rs (Physics::stream,
// locate, cell_params, collide, kinetic_stress), operation by operation. f32 positions, f64
// velocities. Compiled with --fmad=false so that the arithmetic rounds exactly as in Rust.
#pragma once
#ifndef MPCBOX_NVRTC
#include "report.cuh"
#include "wall_stream.cuh"
#include "wrap.cuh"
#endif

// Run constants plus the plan of one step. Layout mirrors `KernelParams` in
// src/backend/cuda/params.rs (#[repr(C)]): keep both in sync.
struct MpcParams {
    double length[3];
    double h;
    double mass;
    double kt;
    double cos_angle;
    double sin_angle;
    double accel[3];
    double shear_rate;
    double le_velocity;
    double shift[3];
    double le_offset;
    unsigned long long seed;
    unsigned long long step;
    unsigned int cells[3];
    unsigned int thermostat;
    unsigned int measure_stress;
    unsigned int n_fluid;
    unsigned int n_solutes;
    unsigned int n_cells;
    // Slab mode (several GPUs): this GPU holds the global cells [cell_offset, cell_offset +
    // n_cells), whole y layers; slab = 0 on one GPU (cell_offset 0, every cell).
    unsigned int cell_offset;
    unsigned int slab;
    // Walls (kind MPC_WALLS_NONE for a periodic box): walls.cuh.
    MpcWalls walls;
    // Fixed-point sums (src/fixed_sums.rs, cell_sums.cuh): with fixed != 0 a cell sum of kind
    // k adds round(x * fix_scale[k]) as a 64-bit integer, read back times fix_inv[k]; a global
    // sum's terms are rounded onto grids of global_inv[k].
    double fix_scale[MPC_FIX_KINDS];
    double fix_inv[MPC_FIX_KINDS];
    double global_scale[MPC_GLOBAL_KINDS];
    double global_inv[MPC_GLOBAL_KINDS];
    unsigned int fixed;
    unsigned int fixed_pad;
    // The heaviest solute the cell sums hold (FixedScales::max_solute_mass; infinity for f64
    // sums): a heavier one is refused by the value tests (mpc_solute_values_bad).
    double solute_mass_cap;
};

// Doubles per cell in the cell buffer: raw sums during binning (layout in cell_sums.cuh),
// overwritten in place by the parameters [ux, uy, uz, ax, ay, az, scale, active].
#define MPC_CELL_STRIDE 8
// The cell index takes the low 30 bits of a particle's cell word, the LE image + 1 the top 2.
#define MPC_CELL_MASK 0x3fffffffu
#define MPC_IMAGE_SHIFT 30
// The cell word of a free slot in slab mode (a particle that left for another GPU): its image
// bits (3) never occur in a live particle's word.
#define MPC_DEAD 0xffffffffu

__device__ __forceinline__ unsigned int mpc_pack_cell(unsigned int cell, int image) {
    return cell | ((unsigned int)(image + 1) << MPC_IMAGE_SHIFT);
}
__device__ __forceinline__ unsigned int mpc_cell_of(unsigned int w) { return w & MPC_CELL_MASK; }
__device__ __forceinline__ int mpc_image_of(unsigned int w) { return (int)(w >> MPC_IMAGE_SHIFT) - 1; }

// The index of global cell gc in this GPU's cell buffer, or MPC_DEAD when another GPU owns it.
__device__ __forceinline__ unsigned int mpc_local_cell(const MpcParams &p, unsigned int gc) {
    if (!p.slab) {
        return gc;
    }
    unsigned int c = gc - p.cell_offset;  // wraps around for cells below the slab
    return c < p.n_cells ? c : MPC_DEAD;
}

__device__ __forceinline__ unsigned int mpc_clamp_index(double s, unsigned int n) {
    double i = floor(s);
    if (i < 0.0) {
        return 0;
    } else if (i >= (double)n) {
        return n - 1;
    } else {
        return (unsigned int)i;
    }
}

__device__ __forceinline__ double mpc_flow_velocity(const MpcParams &p, double y) {
    return p.shear_rate * (y - 0.5 * p.length[1]);
}

// The end of Physics::stream_walled: f32 position and velocity.
struct MpcStreamed {
    double v[3];
    float r[3];
};

// Physics::stream_walled: the bounce-back path (mpc_walls_path), the open axes wrapped (box
// lengths lx, ly, lz), the position kept in the fluid. Not inlined, arguments and result by
// value: the pass-1 kernels make this one call, only near the walls. Values live across a call
// must survive everything the callee clobbers, so position and velocity come back as its
// result rather than being held (spilled) across separate path and keep_inside calls.
__device__ __noinline__ MpcStreamed mpc_stream_walled(MpcWalls w, double h, double ax, double ay, double az,
                                                      double mass, double grid, double lx, double ly, double lz,
                                                      float x, float y, float z, double v0, double v1, double v2) {
    MpcPath q = mpc_walls_path(w, h, ax, ay, az, mass, (double)x, (double)y, (double)z, v0, v1, v2, grid);
    float wx = mpc_wrap_coordinate(q.r[0], lx);
    float wy = mpc_walls_close_axis(w, 1) ? (float)q.r[1] : mpc_wrap_coordinate(q.r[1], ly);
    float wz = mpc_walls_close_axis(w, 2) ? (float)q.r[2] : mpc_wrap_coordinate(q.r[2], lz);
    MpcPos3f kept = mpc_walls_keep_inside(w, wx, wy, wz);
    return {{q.v[0], q.v[1], q.v[2]}, {kept.x, kept.y, kept.z}};
}

// Physics::stream: returns the new position in pos and velocity in v.
__device__ __forceinline__ void mpc_stream(const MpcParams &p, float pos[3], double v[3]) {
#if MPC_WALLS
    if (MPC_WALL_KIND(p.walls) != MPC_WALLS_NONE) {
        double r0[3] = {(double)pos[0], (double)pos[1], (double)pos[2]};
        if (mpc_walls_out_of_reach(p.walls, p.cells, p.h, p.accel, r0, v)) {
            // far from the walls: the path without an impact, whose end is in the fluid
            mpc_walls_advance(r0, v, p.accel, p.h);
            pos[0] = mpc_wrap_coordinate(r0[0], p.length[0]);
            pos[1] = mpc_walls_close_axis(p.walls, 1) ? (float)r0[1] : mpc_wrap_coordinate(r0[1], p.length[1]);
            pos[2] = mpc_walls_close_axis(p.walls, 2) ? (float)r0[2] : mpc_wrap_coordinate(r0[2], p.length[2]);
            return;
        }
        MpcStreamed q = mpc_stream_walled(p.walls, p.h, p.accel[0], p.accel[1], p.accel[2], p.mass,
                                          p.fixed ? p.global_scale[MPC_GLOBAL_MOMENTUM] : 0.0, p.length[0],
                                          p.length[1], p.length[2], pos[0], pos[1], pos[2], v[0], v[1], v[2]);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            v[k] = q.v[k];
            pos[k] = q.r[k];
        }
        return;
    }
#endif
    double h = p.h;
    double hh = 0.5 * h * h;
    double x = (double)pos[0] + v[0] * h + p.accel[0] * hh;
    double y = (double)pos[1] + v[1] * h + p.accel[1] * hh;
    double z = (double)pos[2] + v[2] * h + p.accel[2] * hh;
    v[0] = v[0] + p.accel[0] * h;
    v[1] = v[1] + p.accel[1] * h;
    v[2] = v[2] + p.accel[2] * h;
    double ly = p.length[1];
    int crossings = 0;
    double yw = y;
    if (y >= ly) {
        crossings = 1;
        yw = y - ly;
    } else if (y < 0.0) {
        crossings = -1;
        yw = y + ly;
    }
    float yf = (float)yw;
    if (yf >= (float)ly) {
        crossings += 1;
        yf = 0.0f;
    }
    if (crossings != 0) {
        double c = (double)crossings;
        x -= c * p.le_offset;
        v[0] -= c * p.le_velocity;
    }
    pos[0] = mpc_wrap_coordinate(x, p.length[0]);
    pos[1] = yf;
    pos[2] = mpc_wrap_coordinate(z, p.length[2]);
}

struct MpcLocation {
    unsigned int cell;
    int image;
    double y_in_cell;
    // x, z relative to the cell centre (the angular-momentum rules, rules.cuh)
    double x_in_cell;
    double z_in_cell;
};

// Physics::locate.
__device__ __forceinline__ MpcLocation mpc_locate(const MpcParams &p, double px, double py, double pz) {
    double lx = p.length[0], ly = p.length[1], lz = p.length[2];
    double ys = py + p.shift[1];
    int image = 0;
    if (ys >= ly) {
        ys -= ly;
        image = -1;
    } else if (ys < 0.0) {
        ys += ly;
        image = 1;
    }
    double xs = mpc_wrap_f64(px + p.shift[0] + (double)image * p.le_offset, lx);
    double zs = mpc_wrap_f64(pz + p.shift[2], lz);
    unsigned int ix = mpc_clamp_index(xs, p.cells[0]);
    unsigned int iy = mpc_clamp_index(ys, p.cells[1]);
    unsigned int iz = mpc_clamp_index(zs, p.cells[2]);
    MpcLocation loc;
    loc.cell = (iy * p.cells[2] + iz) * p.cells[0] + ix;
    loc.image = image;
    loc.y_in_cell = ys - ((double)iy + 0.5);
    loc.x_in_cell = xs - ((double)ix + 0.5);
    loc.z_in_cell = zs - ((double)iz + 0.5);
    return loc;
}

// Physics::locate_solute: a solute anywhere (unwrapped MD coordinates) is brought into the
// box through whole periods in y as its Lees-Edwards image, then binned; the image counts
// every period, so it can exceed the 2 bits a fluid particle's cell word holds.
__device__ __forceinline__ MpcLocation mpc_locate_solute(const MpcParams &p, double px, double py, double pz) {
    double ly = p.length[1];
    double periods = floor(py / ly);
    double y = py - periods * ly;
    double x = px - periods * p.le_offset;
    MpcLocation loc = mpc_locate(p, x, y, pz);
    loc.image -= (int)periods;
    return loc;
}

// Whether a solute's mass is one the cell sums take: finite, > 0 and at most `cap` (the
// fixed-point sums' cap, or infinity).
__device__ __forceinline__ bool mpc_solute_mass_good(double m, double cap) {
    return isfinite(m) && m > 0.0 && m <= cap;
}

__device__ __forceinline__ double mpc_image_velocity(const MpcParams &p, int image) {
    return (double)image * p.le_velocity;
}

// Physics::kinetic_stress.
__device__ __forceinline__ double mpc_kinetic_stress(const MpcParams &p, double y_start, const double v[3]) {
    double y_mid = y_start + 0.5 * v[1] * p.h;
    return p.mass * v[1] * (v[0] - mpc_flow_velocity(p, y_mid));
}

// CellSums::relative_energy from the raw sums [px, py, pz, m, mv2, count].
__device__ __forceinline__ double mpc_relative_energy(const double s[6]) {
    if (s[5] < 2.0) {
        return 0.0;
    }
    double p2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
    return 0.5 * (s[4] - p2 / s[3]);
}

// Physics::cell_params: sums in s[0..6], parameters out in out[0..8].
__device__ __forceinline__ void mpc_cell_params(const MpcParams &p, unsigned int cell, const double s[6], double out[8]) {
    unsigned int count = (unsigned int)s[5];
    if (count < 2) {
        for (int k = 0; k < 8; ++k) {
            out[k] = 0.0;
        }
        return;
    }
    double inv_m = 1.0 / s[3];
    out[0] = s[0] * inv_m;
    out[1] = s[1] * inv_m;
    out[2] = s[2] * inv_m;
    double axis[3];
    mpc_cell_rotation_axis(p.seed, p.step, cell, axis);
    out[3] = axis[0];
    out[4] = axis[1];
    out[5] = axis[2];
    double scale = 1.0;
    if (p.thermostat) {
        double e_rel = mpc_relative_energy(s);
        if (e_rel > 0.0) {
            double target = mpc_cell_thermostat_energy(p.seed, p.step, cell, count, p.kt);
            scale = sqrt(target / e_rel);
        }
    }
    out[6] = scale;
    out[7] = 1.0;
}

// Physics::collide: cp = [ux, uy, uz, ax, ay, az, scale, active].
__device__ __forceinline__ void mpc_collide(const MpcParams &p, const double cp[8], int image, const double v[3],
                                            double w[3]) {
    if (cp[7] == 0.0) {
        w[0] = v[0];
        w[1] = v[1];
        w[2] = v[2];
        return;
    }
    double off = mpc_image_velocity(p, image);
    double u0 = cp[0], u1 = cp[1], u2 = cp[2];
    double n0 = cp[3], n1 = cp[4], n2 = cp[5];
    double r0 = v[0] + off - u0;
    double r1 = v[1] - u1;
    double r2 = v[2] - u2;
    double d = n0 * r0 + n1 * r1 + n2 * r2;
    double par0 = d * n0, par1 = d * n1, par2 = d * n2;
    double cr0 = n1 * r2 - n2 * r1;
    double cr1 = n2 * r0 - n0 * r2;
    double cr2 = n0 * r1 - n1 * r0;
    double c = p.cos_angle, s = p.sin_angle, f = cp[6];
    double rot0 = par0 + c * (r0 - par0) + s * cr0;
    double rot1 = par1 + c * (r1 - par1) + s * cr1;
    double rot2 = par2 + c * (r2 - par2) + s * cr2;
    w[0] = u0 + f * rot0 - off;
    w[1] = u1 + f * rot1;
    w[2] = u2 + f * rot2;
}
