// The collision rules beside plain SRD (MPC-AT, MPC-AT+a, SRD+a) on one particle or one cell: a
// mirror of src/physics/rules.rs, operation by operation (compiled with --fmad=false). Their
// cell sums are in rule_sums.cuh, the kernels in rules.cu (src/backend/cuda/rules.rs).
#pragma once
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#include "mpc.cuh"
#include "cell_sums.cuh"
#endif

// Rule codes (Rule::code).
#define MPC_RULE_SRD_A 1u
#define MPC_RULE_AT 2u
#define MPC_RULE_AT_A 3u
// The +a rules' parameters [ω, C] overwrite the first six extended sums of their cell.
#define MPC_RULE_PARAMS 6

// Extended sums per cell (Rule::sums_len). Layout as in rules.rs:
//   SRD+a:    [0..3) Σ m r, [3..9) Σ m r⊗r (xx, yy, zz, xy, xz, yz), [9..18) Σ m r⊗v
//   MPC-AT+a: [0..3) Σ m r, [3..9) Σ m r⊗r, [9..12) Σ m r × (v − ξ), [12..15) Σ m ξ
//   MPC-AT:   [0..3) Σ m ξ
__host__ __device__ constexpr int mpc_rule_len(unsigned int rule) {
    return rule == MPC_RULE_SRD_A ? 18 : rule == MPC_RULE_AT ? 3 : rule == MPC_RULE_AT_A ? 15 : 0;
}
__host__ __device__ constexpr bool mpc_rule_angular(unsigned int rule) {
    return rule == MPC_RULE_SRD_A || rule == MPC_RULE_AT_A;
}
__host__ __device__ constexpr bool mpc_rule_draws(unsigned int rule) {
    return rule == MPC_RULE_AT || rule == MPC_RULE_AT_A;
}
__host__ __device__ constexpr int mpc_rule_draw_momentum(unsigned int rule) { return rule == MPC_RULE_AT_A ? 12 : 0; }
// The buffer's stride: the sums padded to whole 32-byte sectors (the staged atomics of
// rule_sums.cuh then touch as few sectors as possible), 16-byte aligned for double2 loads.
// Must equal ext_stride in src/backend/cuda/rules.rs.
__host__ __device__ constexpr int mpc_rule_stride(unsigned int rule) {
    return rule == MPC_RULE_SRD_A ? 20 : rule == MPC_RULE_AT ? 4 : rule == MPC_RULE_AT_A ? 16 : 0;
}
#define MPC_RULE_MASS_MOMENT 0
#define MPC_RULE_SECOND_MOMENT 3
#define MPC_RULE_POSITION_VELOCITY 9
#define MPC_RULE_ANGULAR 9
#define MPC_RULE_SUMS_MAX 18

// rules::cross.
__device__ __forceinline__ void mpc_cross(const double a[3], const double b[3], double out[3]) {
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

// rules::rotate: r rotated by (cos c, sin s) about the unit axis n.
__device__ __forceinline__ void mpc_rotate(const double n[3], double c, double s, const double r[3], double out[3]) {
    double d = n[0] * r[0] + n[1] * r[1] + n[2] * r[2];
    double par[3] = {d * n[0], d * n[1], d * n[2]};
    double cr[3];
    mpc_cross(n, r, cr);
    out[0] = par[0] + c * (r[0] - par[0]) + s * cr[0];
    out[1] = par[1] + c * (r[1] - par[1]) + s * cr[1];
    out[2] = par[2] + c * (r[2] - par[2]) + s * cr[2];
}

// Physics::rule_draw: three normals of the particle's stream times sqrt(kT/m).
__device__ __forceinline__ void mpc_rule_draw(const MpcParams &p, unsigned int cell, mpc_u64 key, double m,
                                              double xi[3]) {
    MpcCellStream s = mpc_particle_cell_stream(p.seed, p.step, cell, key);
    double g[3];
    mpc_normal3(&s, g);
    double sc = sqrt(p.kt / m);
    xi[0] = sc * g[0];
    xi[1] = sc * g[1];
    xi[2] = sc * g[2];
}

// rules::rule_terms: one particle's extended sums (mass m, velocity v with the LE offset,
// position r relative to the cell centre, draw xi).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_terms(double m, const double v[3], const double r[3], const double xi[3],
                                               double t[MPC_RULE_SUMS_MAX]) {
    double mr[3] = {m * r[0], m * r[1], m * r[2]};
    if (mpc_rule_angular(RULE)) {
        t[MPC_RULE_MASS_MOMENT] = mr[0];
        t[MPC_RULE_MASS_MOMENT + 1] = mr[1];
        t[MPC_RULE_MASS_MOMENT + 2] = mr[2];
        t[MPC_RULE_SECOND_MOMENT] = mr[0] * r[0];
        t[MPC_RULE_SECOND_MOMENT + 1] = mr[1] * r[1];
        t[MPC_RULE_SECOND_MOMENT + 2] = mr[2] * r[2];
        t[MPC_RULE_SECOND_MOMENT + 3] = mr[0] * r[1];
        t[MPC_RULE_SECOND_MOMENT + 4] = mr[0] * r[2];
        t[MPC_RULE_SECOND_MOMENT + 5] = mr[1] * r[2];
    }
    if (RULE == MPC_RULE_SRD_A) {
#pragma unroll
        for (int a = 0; a < 3; ++a) {
#pragma unroll
            for (int b = 0; b < 3; ++b) {
                t[MPC_RULE_POSITION_VELOCITY + 3 * a + b] = mr[a] * v[b];
            }
        }
    }
    if (mpc_rule_draws(RULE)) {
        const int d = mpc_rule_draw_momentum(RULE);
        t[d] = m * xi[0];
        t[d + 1] = m * xi[1];
        t[d + 2] = m * xi[2];
        if (RULE == MPC_RULE_AT_A) {
            double w[3] = {v[0] - xi[0], v[1] - xi[1], v[2] - xi[2]};
            mpc_cross(mr, w, t + MPC_RULE_ANGULAR);
        }
    }
}

// One particle's extended sums from its location and velocity: the position relative to the
// cell centre, and for MPC-AT its draw in global cell gcell with key `key` (a position hash).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_particle_terms(const MpcParams &p, unsigned int gcell, mpc_u64 key, double m,
                                                        const MpcLocation &loc, const double wv[3],
                                                        double t[MPC_RULE_SUMS_MAX]) {
    double r[3] = {loc.x_in_cell, loc.y_in_cell, loc.z_in_cell};
    double xi[3] = {0.0, 0.0, 0.0};
    if (mpc_rule_draws(RULE)) {
        mpc_rule_draw(p, gcell, key, m, xi);
    }
    mpc_rule_terms<RULE>(m, wv, r, xi, t);
}

// rules::solve_inertia: Δω = I⁻¹ ΔL, i = [xx, yy, zz, xy, xz, yz]; particles on a line: 2 ΔL / tr.
__device__ __forceinline__ void mpc_solve_inertia(const double i[6], const double dl[3], double w[3]) {
    double a = i[0], b = i[1], c = i[2], d = i[3], e = i[4], f = i[5];
    double c00 = b * c - f * f;
    double c11 = a * c - e * e;
    double c22 = a * b - d * d;
    double c01 = e * f - d * c;
    double c02 = d * f - e * b;
    double c12 = d * e - a * f;
    double det = a * c00 + d * c01 + e * c02;
    double tr = a + b + c;
    double third = tr / 3.0;
    if (det > 1e-6 * (third * third * third)) {
        w[0] = (c00 * dl[0] + c01 * dl[1] + c02 * dl[2]) / det;
        w[1] = (c01 * dl[0] + c11 * dl[1] + c12 * dl[2]) / det;
        w[2] = (c02 * dl[0] + c12 * dl[1] + c22 * dl[2]) / det;
    } else if (tr > 0.0) {
        double k = 2.0 / tr;
        w[0] = k * dl[0];
        w[1] = k * dl[1];
        w[2] = k * dl[2];
    } else {
        w[0] = 0.0;
        w[1] = 0.0;
        w[2] = 0.0;
    }
}

// rules::inertia_about_com: C (relative to the cell centre) and the inertia tensor about it.
__device__ __forceinline__ void mpc_inertia_about_com(double mass, const double *e, double com[3], double inertia[6]) {
    double inv_m = 1.0 / mass;
    double mr[3] = {e[MPC_RULE_MASS_MOMENT], e[MPC_RULE_MASS_MOMENT + 1], e[MPC_RULE_MASS_MOMENT + 2]};
    com[0] = mr[0] * inv_m;
    com[1] = mr[1] * inv_m;
    com[2] = mr[2] * inv_m;
    const double *s = e + MPC_RULE_SECOND_MOMENT;
    double sxx = s[0] - com[0] * mr[0];
    double syy = s[1] - com[1] * mr[1];
    double szz = s[2] - com[2] * mr[2];
    double sxy = s[3] - com[0] * mr[1];
    double sxz = s[4] - com[0] * mr[2];
    double syz = s[5] - com[1] * mr[2];
    double tr = sxx + syy + szz;
    inertia[0] = tr - sxx;
    inertia[1] = tr - syy;
    inertia[2] = tr - szz;
    inertia[3] = -sxy;
    inertia[4] = -sxz;
    inertia[5] = -syz;
}

// Physics::srd_angular_change: L_C(v) − f L_C(R w) from T = Σ m (r − C)⊗v (cp: axis, scale).
__device__ __forceinline__ void mpc_srd_angular_change(const MpcParams &p, const double cp[8], const double com[3],
                                                       const double mom[3], const double *e, double dl[3]) {
    double t[3][3];
    double rt[3][3];
    double n[3] = {cp[3], cp[4], cp[5]};
#pragma unroll
    for (int b = 0; b < 3; ++b) {
        const double *s = e + MPC_RULE_POSITION_VELOCITY + 3 * b;
        t[b][0] = s[0] - com[b] * mom[0];
        t[b][1] = s[1] - com[b] * mom[1];
        t[b][2] = s[2] - com[b] * mom[2];
        mpc_rotate(n, p.cos_angle, p.sin_angle, t[b], rt[b]);
    }
    double lv[3] = {t[1][2] - t[2][1], t[2][0] - t[0][2], t[0][1] - t[1][0]};
    double lr[3] = {rt[1][2] - rt[2][1], rt[2][0] - rt[0][2], rt[0][1] - rt[1][0]};
    double f = cp[6];
    dl[0] = lv[0] - f * lr[0];
    dl[1] = lv[1] - f * lr[1];
    dl[2] = lv[2] - f * lr[2];
}

// Physics::rule_cell_params for global cell gcell: plain sums s = [Σ m v (3), Σ m, Σ m v², N],
// extended sums e. Out: cp = [u (3), axis (SRD+a) or mean draw (MPC-AT) (3), scale, active]
// and ap = [ω (3), C (3)] for the +a rules.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_cell_params(const MpcParams &p, unsigned int gcell, const double s[6],
                                                     const double *e, double cp[8], double ap[MPC_RULE_PARAMS]) {
#pragma unroll
    for (int k = 0; k < MPC_RULE_PARAMS; ++k) {
        ap[k] = 0.0;
    }
    if ((unsigned int)s[5] < 2) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            cp[k] = 0.0;
        }
        return;
    }
    double inv_m = 1.0 / s[3];
    double mom[3] = {s[0], s[1], s[2]};
    if (mpc_rule_draws(RULE)) {
        const int d = mpc_rule_draw_momentum(RULE);
        cp[0] = mom[0] * inv_m;
        cp[1] = mom[1] * inv_m;
        cp[2] = mom[2] * inv_m;
        cp[3] = e[d] * inv_m;
        cp[4] = e[d + 1] * inv_m;
        cp[5] = e[d + 2] * inv_m;
        cp[6] = 1.0;
        cp[7] = 1.0;
    } else {
        mpc_cell_params(p, gcell, s, cp);
    }
    if (!mpc_rule_angular(RULE)) {
        return;
    }
    double com[3], inertia[6], dl[3];
    mpc_inertia_about_com(s[3], e, com, inertia);
    if (RULE == MPC_RULE_AT_A) {
        const int d = mpc_rule_draw_momentum(RULE);
        double q[3] = {mom[0] - e[d], mom[1] - e[d + 1], mom[2] - e[d + 2]};
        double cq[3];
        mpc_cross(com, q, cq);
        dl[0] = e[MPC_RULE_ANGULAR] - cq[0];
        dl[1] = e[MPC_RULE_ANGULAR + 1] - cq[1];
        dl[2] = e[MPC_RULE_ANGULAR + 2] - cq[2];
    } else {
        mpc_srd_angular_change(p, cp, com, mom, e, dl);
    }
    mpc_solve_inertia(inertia, dl, ap);
    ap[3] = com[0];
    ap[4] = com[1];
    ap[5] = com[2];
}

// Physics::rule_collide: cp and ap as written by mpc_rule_cell_params; r relative to the cell
// centre (+a), xi the draw (MPC-AT).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_collide(const MpcParams &p, const double cp[8], const double ap[6],
                                                 int image, const double v[3], const double r[3], const double xi[3],
                                                 double w[3]) {
    if (cp[7] == 0.0) {
        w[0] = v[0];
        w[1] = v[1];
        w[2] = v[2];
        return;
    }
    double off = mpc_image_velocity(p, image);
    double u0 = cp[0], u1 = cp[1], u2 = cp[2];
    double w0, w1, w2;
    if (mpc_rule_draws(RULE)) {
        w0 = u0 + (xi[0] - cp[3]);
        w1 = u1 + (xi[1] - cp[4]);
        w2 = u2 + (xi[2] - cp[5]);
    } else {
        double rel[3] = {v[0] + off - u0, v[1] - u1, v[2] - u2};
        double n[3] = {cp[3], cp[4], cp[5]};
        double rot[3];
        mpc_rotate(n, p.cos_angle, p.sin_angle, rel, rot);
        double f = cp[6];
        w0 = u0 + f * rot[0];
        w1 = u1 + f * rot[1];
        w2 = u2 + f * rot[2];
    }
    if (mpc_rule_angular(RULE)) {
        double rc[3] = {r[0] - ap[3], r[1] - ap[4], r[2] - ap[5]};
        double om[3] = {ap[0], ap[1], ap[2]};
        double k[3];
        mpc_cross(om, rc, k);
        w0 = w0 + k[0];
        w1 = w1 + k[1];
        w2 = w2 + k[2];
    }
    w[0] = w0 - off;
    w[1] = w1;
    w[2] = w2;
}

// Load the +a parameters [ω, C] of local cell c (zeros for MPC-AT, which has none).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_load_params(const double *ext, unsigned int c, double ap[MPC_RULE_PARAMS]) {
    const double2 *x = (const double2 *)(ext + (size_t)c * mpc_rule_stride(RULE));
#pragma unroll
    for (int k = 0; k < MPC_RULE_PARAMS / 2; ++k) {
        double2 a = mpc_rule_angular(RULE) ? __ldg(x + k) : make_double2(0.0, 0.0);
        ap[2 * k] = a.x;
        ap[2 * k + 1] = a.y;
    }
}

// MPC_RULES_LAZY_VELOCITY=1 (default): MPC-AT replaces the velocity of a particle whose cell
// collides, so its collision reads the velocity only where the cell does not collide (or the
// caller keeps the old one for the stress); 0: always (the first version).
#ifndef MPC_RULES_LAZY_VELOCITY
#define MPC_RULES_LAZY_VELOCITY 1
#endif

// Collide fluid slot i at stored position pos with cell word w (plan pc, parameters in cells
// and ext): its relative position (+a) and draw (MPC-AT) recomputed exactly as when it was
// binned; its velocity read from (vx, vy, vz) where the collision needs it, or always with
// keep_old (then into old_v: the collisional stress). cp gets the cell's parameters (cp[7]:
// whether the cell collided).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_collide_fluid(const MpcParams &pc, const double *cells, const double *ext,
                                                       unsigned int w, const float pos[3], const double *vx,
                                                       const double *vy, const double *vz, unsigned int i,
                                                       bool keep_old, double old_v[3], double out[3], double cp[8]) {
    unsigned int c = mpc_cell_of(w);
    mpc_load_params(cells, c, cp);
    double ap[MPC_RULE_PARAMS];
    mpc_rule_load_params<RULE>(ext, c, ap);
    old_v[0] = 0.0;
    old_v[1] = 0.0;
    old_v[2] = 0.0;
    if (keep_old || !(MPC_RULES_LAZY_VELOCITY && mpc_rule_draws(RULE)) || cp[7] == 0.0) {
        old_v[0] = vx[i];
        old_v[1] = vy[i];
        old_v[2] = vz[i];
    }
    double r[3] = {0.0, 0.0, 0.0};
    double xi[3] = {0.0, 0.0, 0.0};
    if (cp[7] != 0.0) {
        if (mpc_rule_angular(RULE)) {
            MpcLocation loc = mpc_locate(pc, (double)pos[0], (double)pos[1], (double)pos[2]);
            r[0] = loc.x_in_cell;
            r[1] = loc.y_in_cell;
            r[2] = loc.z_in_cell;
        }
        if (mpc_rule_draws(RULE)) {
            mpc_u64 key = mpc_fluid_particle_key(pos[0], pos[1], pos[2]);
            mpc_rule_draw(pc, c + pc.cell_offset, key, pc.mass, xi);
        }
    }
    mpc_rule_collide<RULE>(pc, cp, ap, mpc_image_of(w), old_v, r, xi, out);
}
