// The virtual particles of cut cells under the collision rules beside plain SRD: a mirror of
// src/physics/walls/rule_fill.rs, operation by operation (compiled with --fmad=false), used by
// the rules' cell pass in rules.cu. MPC-AT adds the virtual particles' Σ m ξ to walls.cuh's
// Gaussian fill; the +a rules draw each virtual particle (a place in the wall part of the
// cell, a velocity, a draw) for their extended sums. Compiled in only with MPC_WALLS.
#pragma once
#ifndef MPCBOX_NVRTC
#include "wall_stream.cuh"
#include "rules.cuh"
#endif

#if MPC_WALLS
// MPC_PLACEMENT_TRIES (rule_fill::PLACEMENT_TRIES): the generated header of contract.rs.

// Walls::virtual_position: a point of the cell [lo, lo + 1) inside the wall (rejection), or
// the last point tried moved onto the surface along the normal.
__device__ __forceinline__ void mpc_walls_virtual_position(const MpcWalls &w, const double lo[3], MpcCellStream *s,
                                                           double r[3]) {
    r[0] = lo[0];
    r[1] = lo[1];
    r[2] = lo[2];
    for (int k = 0; k < MPC_PLACEMENT_TRIES; ++k) {
        r[0] = lo[0] + mpc_uniform(s);
        r[1] = lo[1] + mpc_uniform(s);
        r[2] = lo[2] + mpc_uniform(s);
        if (mpc_walls_signed_distance(w, r) < 0.0) {
            return;
        }
    }
    double d = mpc_walls_signed_distance(w, r);
    double n[3];
    mpc_walls_normal(w, r, n);
    r[0] = r[0] - d * n[0];
    r[1] = r[1] - d * n[1];
    r[2] = r[2] - d * n[2];
}

// Walls::fill_rule_cell for the +a rules: the M - n virtual particles of global cell gc of a
// grid of nx x . x nz cells shifted by (sx, sy, sz) one by one into the plain sums s = [px, py,
// pz, mass, mv2, count] and the extended sums e. Returns the surface they move with, or -1 for
// a cell that gets none. Not inlined, the run constants by value (a reference to the kernel's
// MpcParams would copy it all to the stack of every thread).
template <unsigned int RULE>
__device__ __noinline__ int mpc_walls_fill_angular(MpcWalls w, unsigned long long seed, unsigned long long step,
                                                   unsigned int gc, unsigned int nx, unsigned int nz, double sx,
                                                   double sy, double sz, double mass, double kt, double *s,
                                                   double *e) {
    unsigned int n = (unsigned int)s[5];
    if (!w.no_slip || n == 0u || n >= w.fill) {
        return -1;
    }
    unsigned int ix = gc % nx;
    unsigned int rest = gc / nx;
    unsigned int iz = rest % nz;
    unsigned int iy = rest / nz;
    double lo[3] = {(double)ix - sx, (double)iy - sy, (double)iz - sz};
    if (!mpc_walls_cuts_cell(w, lo)) {
        return -1;
    }
    double centre[3] = {lo[0] + 0.5, lo[1] + 0.5, lo[2] + 0.5};
    double uw[3];
    mpc_walls_velocity(w, centre, uw);
    double sigma = sqrt(kt / mass);
    double m = mass;
    MpcCellStream st = mpc_cell_stream(seed, step, gc, MPC_PURPOSE_WALL_FILL);
    for (unsigned int j = n; j < w.fill; ++j) {
        double r[3];
        mpc_walls_virtual_position(w, lo, &st, r);
        double rel[3] = {r[0] - centre[0], r[1] - centre[1], r[2] - centre[2]};
        double v[3];
        v[0] = uw[0] + sigma * mpc_normal(&st);
        v[1] = uw[1] + sigma * mpc_normal(&st);
        v[2] = uw[2] + sigma * mpc_normal(&st);
        double xi[3] = {0.0, 0.0, 0.0};
        if (mpc_rule_draws(RULE)) {
            xi[0] = sigma * mpc_normal(&st);
            xi[1] = sigma * mpc_normal(&st);
            xi[2] = sigma * mpc_normal(&st);
        }
        // CellSums::add, then RuleSums::add
        s[0] += m * v[0];
        s[1] += m * v[1];
        s[2] += m * v[2];
        s[3] += m;
        s[4] += m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        s[5] += 1.0;
        double t[MPC_RULE_SUMS_MAX];
#pragma unroll
        for (int k = 0; k < MPC_RULE_SUMS_MAX; ++k) {
            t[k] = 0.0;
        }
        mpc_rule_terms<RULE>(m, v, rel, xi, t);
#pragma unroll
        for (int k = 0; k < MPC_RULE_SUMS_MAX; ++k) {
            if (k < mpc_rule_len(RULE)) {
                e[k] += t[k];
            }
        }
    }
    return (int)mpc_walls_surface(w, centre);
}

// The plain sums s (6) and the extended sums e of a cell copied from src_s, src_e.
__device__ __forceinline__ void mpc_copy_sums(double s[6], double e[MPC_RULE_SUMS_MAX], const double *src_s,
                                              const double *src_e) {
#pragma unroll
    for (int k = 0; k < 6; ++k) {
        s[k] = src_s[k];
    }
#pragma unroll
    for (int k = 0; k < MPC_RULE_SUMS_MAX; ++k) {
        e[k] = src_e[k];
    }
}

// The +a rules' fill of the sums s, e (registers in the caller): a copy on the stack passed to
// mpc_walls_fill_angular only for a cell its first test lets through (0 < n < M, no-slip).
template <unsigned int RULE>
__device__ __forceinline__ int mpc_walls_fill_angular_sums(const MpcParams &p, unsigned int gc, double s[6],
                                                           double e[MPC_RULE_SUMS_MAX]) {
    unsigned int n = (unsigned int)s[5];
    if (!p.walls.no_slip || n == 0u || n >= p.walls.fill) {
        return -1;
    }
    double fs[6], fe[MPC_RULE_SUMS_MAX];
    mpc_copy_sums(fs, fe, s, e);
    int surface = mpc_walls_fill_angular<RULE>(p.walls, p.seed, p.step, gc, p.cells[0], p.cells[2], p.shift[0],
                                               p.shift[1], p.shift[2], p.mass, p.kt, fs, fe);
    mpc_copy_sums(s, e, fs, fe);
    return surface;
}

// The virtual particles' Σ m ξ of MPC-AT: three more normals of the fill's stream, after its
// three (MBS, which would draw more, is refused with MPC-AT), times sqrt(nv m kT) for nv
// virtual particles. Not inlined, arguments and result by value (cut cells only).
struct MpcFillXi {
    double x[3];
};
__device__ __noinline__ MpcFillXi mpc_walls_fill_at_xi(unsigned long long seed, unsigned long long step,
                                                       unsigned int gc, unsigned int nv, double mass, double kt) {
    MpcCellStream st = mpc_cell_stream(seed, step, gc, MPC_PURPOSE_WALL_FILL);
    mpc_normal(&st);
    mpc_normal(&st);
    mpc_normal(&st);
    double spread = sqrt((double)nv * mass * kt);
    MpcFillXi xi;
    for (int k = 0; k < 3; ++k) {
        xi.x[k] = spread * mpc_normal(&st);
    }
    return xi;
}

// Walls::fill_rule_cell for MPC-AT: walls.cuh's Gaussian fill of the plain sums, then the
// virtual particles' Σ m ξ into the extended sums. Returns the surface or -1.
__device__ __forceinline__ int mpc_walls_fill_at(const MpcParams &p, unsigned int gc, double s[6], double *e) {
    unsigned int n = (unsigned int)s[5];
    MpcFill f = mpc_walls_fill(p.walls, p.seed, p.step, gc, p.cells[0], p.cells[2], p.shift[0], p.shift[1],
                               p.shift[2], p.mass, p.kt, p.thermostat, s[0], s[1], s[2], s[3], s[4], s[5]);
    if (f.surface < 0) {
        return -1;
    }
#pragma unroll
    for (int k = 0; k < 6; ++k) {
        s[k] = f.s[k];
    }
    MpcFillXi xi = mpc_walls_fill_at_xi(p.seed, p.step, gc, p.walls.fill - n, p.mass, p.kt);
    const int d = mpc_rule_draw_momentum(MPC_RULE_AT);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        e[d + k] += xi.x[k];
    }
    return f.surface;
}

// Walls::rule_collision_exchange: the momentum the real particles (plain sums real, extended
// sums real_e, before the fill) gain in the collision cp, ap of their filled cell.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_collision_exchange(const MpcParams &p, const double cp[8],
                                                             const double ap[MPC_RULE_PARAMS], const double real[6],
                                                             const double *real_e, double gained[3]) {
    gained[0] = 0.0;
    gained[1] = 0.0;
    gained[2] = 0.0;
    if (cp[7] == 0.0) {
        return;
    }
    double m = real[3];
    double after[3];
    if (mpc_rule_draws(RULE)) {
        const int d = mpc_rule_draw_momentum(RULE);
        for (int k = 0; k < 3; ++k) {
            after[k] = m * (cp[k] - cp[3 + k]) + real_e[d + k];
        }
    } else {
        double rel[3] = {real[0] - m * cp[0], real[1] - m * cp[1], real[2] - m * cp[2]};
        double axis[3] = {cp[3], cp[4], cp[5]};
        double rot[3];
        mpc_rotate(axis, p.cos_angle, p.sin_angle, rel, rot);
        double f = cp[6];
        for (int k = 0; k < 3; ++k) {
            after[k] = m * cp[k] + f * rot[k];
        }
    }
    if (mpc_rule_angular(RULE)) {
        double arm[3] = {real_e[MPC_RULE_MASS_MOMENT] - m * ap[3], real_e[MPC_RULE_MASS_MOMENT + 1] - m * ap[4],
                         real_e[MPC_RULE_MASS_MOMENT + 2] - m * ap[5]};
        double om[3] = {ap[0], ap[1], ap[2]};
        double k3[3];
        mpc_cross(om, arm, k3);
        after[0] = after[0] + k3[0];
        after[1] = after[1] + k3[1];
        after[2] = after[2] + k3[2];
    }
    for (int k = 0; k < 3; ++k) {
        gained[k] = after[k] - real[k];
    }
}

// rules.rs rule_fill_and_params (CPU backend): the rule's parameters of global cell gc
// between walls, its real sums (s, e) filled with the virtual particles of a cut cell; the
// momentum the real particles gain in the collision is taken from the wall's account.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_walled_cell_params(const MpcParams &p, unsigned int gc, const double real[6],
                                                             const double *real_e, double cp[8],
                                                             double ap[MPC_RULE_PARAMS]) {
    double s[6], e[MPC_RULE_SUMS_MAX];
    mpc_copy_sums(s, e, real, real_e);
    int surface;
    switch (RULE) {
        case MPC_RULE_SRD_A:
        case MPC_RULE_AT_A:
            surface = mpc_walls_fill_angular_sums<RULE>(p, gc, s, e);
            break;
        case MPC_RULE_AT:
            surface = mpc_walls_fill_at(p, gc, s, e);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
            surface = -1;
    }
    mpc_rule_cell_params<RULE>(p, gc, s, e, cp, ap);
    if (surface >= 0) {
        double gained[3];
        mpc_rules_collision_exchange<RULE>(p, cp, ap, real, real_e, gained);
        double *dst = mpc_walls_momentum_of_block(p.walls.momentum) + 3 * surface;
        for (int k = 0; k < 3; ++k) {
            atomicAdd(dst + k, mpc_global_term(p, MPC_GLOBAL_MOMENTUM, -gained[k]));
        }
    }
}
#endif
