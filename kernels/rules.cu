// Collision rules beside plain SRD (src/backend/cuda/rules.rs): pass 1 with the extended cell
// sums (and, fused, the previous step's collision), the cell pass, the collision, the solutes.
// Each kernel takes the rule code (uniform over the grid) and runs the rule's instantiation of
// the templates in rules.cuh; the plain SRD kernels stay as they are. Pass 1 shares its
// streaming and binning (mpc_stream_store_bin, mpc_live) with stream.cu, earlier in the unit.
#ifndef MPCBOX_NVRTC
#include "rules.cuh"
#include "migrate.cuh"
#endif

// Pass 1 of slot i under RULE: stream the velocity v from position pos (valid slots), store,
// bin, add the plain sums (BLOCK: with the shared-memory aggregation per block) and the
// extended sums (warp-aggregated). All threads must call it.
template <unsigned int RULE, bool BLOCK>
__device__ __forceinline__ void mpc_rules_bin(const MpcParams &p, const MpcMigration &m, unsigned int i, bool valid,
                                              float pos[3], double v[3], float *__restrict__ px,
                                              float *__restrict__ py, float *__restrict__ pz,
                                              double *__restrict__ vx, double *__restrict__ vy,
                                              double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                              double *cells, double *ext, double *report) {
    double kin = 0.0;
    unsigned int cell = 0;
    double wv[3] = {0.0, 0.0, 0.0};
    double t[MPC_RULE_SUMS_MAX];
#pragma unroll
    for (int k = 0; k < MPC_RULE_SUMS_MAX; ++k) {
        t[k] = 0.0;
    }
    if (valid) {
        MpcLocation loc = mpc_stream_store_bin(p, m, i, pos, v, px, py, pz, vx, vy, vz, cellw, &kin, wv, &valid);
        cell = loc.cell;
        if (valid) {
            mpc_u64 key = mpc_fluid_particle_key(pos[0], pos[1], pos[2]);
            mpc_rule_particle_terms<RULE>(p, loc.cell + p.cell_offset, key, p.mass, loc, wv, t);
        }
    }
    mpc_sum_and_report<BLOCK>(p, cells, valid, cell, wv, kin, report);
    mpc_rule_add_warp<RULE>(ext, valid, cell, t);
}

// Pass 1 under a rule (every method that sums in pass 1, or fused with nothing pending): as
// mpc_stream_bin_warp / mpc_stream_bin_shared, plus the rule's extended sums into ext. The
// block aggregation is its own instantiation, so the warp kernels reserve no shared memory.
template <bool BLOCK>
__device__ __forceinline__ void mpc_rules_stream_bin_body(MpcParams p, unsigned int rule, float *__restrict__ px,
                                                          float *__restrict__ py, float *__restrict__ pz,
                                                          double *__restrict__ vx, double *__restrict__ vy,
                                                          double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                          double *cells, double *ext, double *report,
                                                          MpcMigration m) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool valid = mpc_live(p, cellw, i);
    float pos[3] = {0.0f, 0.0f, 0.0f};
    double v[3] = {0.0, 0.0, 0.0};
    if (valid) {
        pos[0] = px[i];
        pos[1] = py[i];
        pos[2] = pz[i];
        v[0] = vx[i];
        v[1] = vy[i];
        v[2] = vz[i];
    }
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_bin<MPC_RULE_SRD_A, BLOCK>(p, m, i, valid, pos, v, px, py, pz, vx, vy, vz, cellw, cells, ext,
                                                 report);
            break;
        case MPC_RULE_AT:
            mpc_rules_bin<MPC_RULE_AT, BLOCK>(p, m, i, valid, pos, v, px, py, pz, vx, vy, vz, cellw, cells, ext,
                                              report);
            break;
        default:
            mpc_rules_bin<MPC_RULE_AT_A, BLOCK>(p, m, i, valid, pos, v, px, py, pz, vx, vy, vz, cellw, cells, ext,
                                                report);
            break;
    }
}

extern "C" __global__ void mpc_rules_stream_bin(MpcParams p, unsigned int rule, float *__restrict__ px,
                                                float *__restrict__ py, float *__restrict__ pz,
                                                double *__restrict__ vx, double *__restrict__ vy,
                                                double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                double *cells, double *ext, double *report, MpcMigration m) {
    mpc_rules_stream_bin_body<false>(p, rule, px, py, pz, vx, vy, vz, cellw, cells, ext, report, m);
}

extern "C" __global__ void mpc_rules_stream_bin_shared(MpcParams p, unsigned int rule, float *__restrict__ px,
                                                       float *__restrict__ py, float *__restrict__ pz,
                                                       double *__restrict__ vx, double *__restrict__ vy,
                                                       double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                       double *cells, double *ext, double *report, MpcMigration m) {
    mpc_rules_stream_bin_body<true>(p, rule, px, py, pz, vx, vy, vz, cellw, cells, ext, report, m);
}

// Fused pass under RULE: collide slot i with step n's parameters (pc, cells_prev, ext_prev),
// then pass 1 of step n+1 into cells_next and ext_next.
template <unsigned int RULE, bool BLOCK>
__device__ __forceinline__ void mpc_rules_collide_bin(const MpcParams &pc, const MpcParams &p, const MpcMigration &m,
                                                      unsigned int i, unsigned int w, float *__restrict__ px,
                                                      float *__restrict__ py, float *__restrict__ pz,
                                                      double *__restrict__ vx, double *__restrict__ vy,
                                                      double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                      const double *__restrict__ cells_prev,
                                                      const double *__restrict__ ext_prev, double *cells_next,
                                                      double *ext_next, double *report) {
    bool valid = w != MPC_DEAD;
    float pos[3] = {0.0f, 0.0f, 0.0f};
    double v[3] = {0.0, 0.0, 0.0};
    if (valid) {
        pos[0] = px[i];
        pos[1] = py[i];
        pos[2] = pz[i];
        double v0[3] = {vx[i], vy[i], vz[i]};
        double cp[8];
        mpc_rule_collide_fluid<RULE>(pc, cells_prev, ext_prev, w, pos, v0, v, cp);
    }
    mpc_rules_bin<RULE, BLOCK>(p, m, i, valid, pos, v, px, py, pz, vx, vy, vz, cellw, cells_next, ext_next, report);
}

// "fused" methods under a rule: the collision of step n and pass 1 of step n+1 in one pass.
template <bool BLOCK>
__device__ __forceinline__ void mpc_rules_collide_stream_bin_body(
    MpcParams pc, MpcParams p, unsigned int rule, float *__restrict__ px, float *__restrict__ py,
    float *__restrict__ pz, double *__restrict__ vx, double *__restrict__ vy, double *__restrict__ vz,
    unsigned int *__restrict__ cellw, const double *__restrict__ cells_prev, const double *__restrict__ ext_prev,
    double *cells_next, double *ext_next, double *report, MpcMigration m) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_collide_bin<MPC_RULE_SRD_A, BLOCK>(pc, p, m, i, w, px, py, pz, vx, vy, vz, cellw, cells_prev,
                                                         ext_prev, cells_next, ext_next, report);
            break;
        case MPC_RULE_AT:
            mpc_rules_collide_bin<MPC_RULE_AT, BLOCK>(pc, p, m, i, w, px, py, pz, vx, vy, vz, cellw, cells_prev,
                                                      ext_prev, cells_next, ext_next, report);
            break;
        default:
            mpc_rules_collide_bin<MPC_RULE_AT_A, BLOCK>(pc, p, m, i, w, px, py, pz, vx, vy, vz, cellw, cells_prev,
                                                        ext_prev, cells_next, ext_next, report);
            break;
    }
}

extern "C" __global__ void mpc_rules_collide_stream_bin(MpcParams pc, MpcParams p, unsigned int rule,
                                                        float *__restrict__ px, float *__restrict__ py,
                                                        float *__restrict__ pz, double *__restrict__ vx,
                                                        double *__restrict__ vy, double *__restrict__ vz,
                                                        unsigned int *__restrict__ cellw,
                                                        const double *__restrict__ cells_prev,
                                                        const double *__restrict__ ext_prev, double *cells_next,
                                                        double *ext_next, double *report, MpcMigration m) {
    mpc_rules_collide_stream_bin_body<false>(pc, p, rule, px, py, pz, vx, vy, vz, cellw, cells_prev, ext_prev,
                                             cells_next, ext_next, report, m);
}

extern "C" __global__ void mpc_rules_collide_stream_bin_shared(MpcParams pc, MpcParams p, unsigned int rule,
                                                               float *__restrict__ px, float *__restrict__ py,
                                                               float *__restrict__ pz, double *__restrict__ vx,
                                                               double *__restrict__ vy, double *__restrict__ vz,
                                                               unsigned int *__restrict__ cellw,
                                                               const double *__restrict__ cells_prev,
                                                               const double *__restrict__ ext_prev,
                                                               double *cells_next, double *ext_next, double *report,
                                                               MpcMigration m) {
    mpc_rules_collide_stream_bin_body<true>(pc, p, rule, px, py, pz, vx, vy, vz, cellw, cells_prev, ext_prev,
                                            cells_next, ext_next, report, m);
}

// Cell c under RULE: plain sums s and extended sums in ext to the parameters, in place.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_cell(const MpcParams &p, unsigned int c, const double s[6], double *o,
                                               double *ext) {
    double *x = ext + (size_t)c * mpc_rule_len(RULE);
    double e[MPC_RULE_SUMS_MAX];
#pragma unroll
    for (int k = 0; k < MPC_RULE_SUMS_MAX; ++k) {
        e[k] = k < mpc_rule_len(RULE) ? x[k] : 0.0;
    }
    double out[8], ap[MPC_RULE_PARAMS];
    mpc_rule_cell_params<RULE>(p, c + p.cell_offset, s, e, out, ap);  // draws keyed by the global cell
    double2 *o2 = (double2 *)o;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        o2[k] = make_double2(out[2 * k], out[2 * k + 1]);
    }
    if (mpc_rule_angular(RULE)) {
#pragma unroll
        for (int k = 0; k < MPC_RULE_PARAMS; ++k) {
            x[k] = ap[k];
        }
    }
}

// Pass 3 under a rule, one thread per cell (as mpc_cell_params): report[0] += relative energy,
// report[1] += (Nc - 1) over cells with Nc >= 2.
extern "C" __global__ void mpc_rules_cell_params(MpcParams p, unsigned int rule, double *cells, double *ext,
                                                 double *report) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    double e_rel = 0.0, dof = 0.0;
    if (c < p.n_cells) {
        double *o = cells + (size_t)c * MPC_CELL_STRIDE;
        double s[6];
        double2 a = ((double2 *)o)[0], b = ((double2 *)o)[1], d = ((double2 *)o)[2], e = ((double2 *)o)[3];
        s[0] = a.x;
        s[1] = a.y;
        s[2] = b.x;
        s[3] = p.mass * d.y + b.y;  // fluid mass + solute mass
        s[4] = d.x;
        s[5] = d.y + e.x;  // fluid + solute count
        if (s[5] >= 2.0) {
            e_rel = mpc_relative_energy(s);
            dof = s[5] - 1.0;
        }
        switch (rule) {
            case MPC_RULE_SRD_A:
                mpc_rules_cell<MPC_RULE_SRD_A>(p, c, s, o, ext);
                break;
            case MPC_RULE_AT:
                mpc_rules_cell<MPC_RULE_AT>(p, c, s, o, ext);
                break;
            default:
                mpc_rules_cell<MPC_RULE_AT_A>(p, c, s, o, ext);
                break;
        }
    }
    mpc_block_add(e_rel, report + 0);
    mpc_block_add(dof, report + 1);
}

// Collide fluid slot i (cell word w) under RULE; returns whether its cell collided.
template <unsigned int RULE>
__device__ __forceinline__ bool mpc_rules_collide_slot(const MpcParams &p, unsigned int i, unsigned int w,
                                                       const float pos[3], double *__restrict__ vx,
                                                       double *__restrict__ vy, double *__restrict__ vz,
                                                       const double *__restrict__ cells,
                                                       const double *__restrict__ ext, double du[1]) {
    double v[3] = {vx[i], vy[i], vz[i]};
    double u[3], cp[8];
    mpc_rule_collide_fluid<RULE>(p, cells, ext, w, pos, v, u, cp);
    du[0] = u[0] - v[0];
    vx[i] = u[0];
    vy[i] = u[1];
    vz[i] = u[2];
    return cp[7] != 0.0;
}

// Pass 4 under a rule, one thread per fluid slot (as mpc_collide). report[3] += collisional
// stress when measured.
extern "C" __global__ void mpc_rules_collide(MpcParams p, unsigned int rule, const float *__restrict__ px,
                                             const float *__restrict__ py, const float *__restrict__ pz,
                                             double *__restrict__ vx, double *__restrict__ vy,
                                             double *__restrict__ vz, const unsigned int *__restrict__ cellw,
                                             const double *__restrict__ cells, const double *__restrict__ ext,
                                             double *report) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double coll = 0.0;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    if (w != MPC_DEAD) {
        float pos[3] = {px[i], py[i], pz[i]};
        double du[1];
        bool active;
        switch (rule) {
            case MPC_RULE_SRD_A:
                active = mpc_rules_collide_slot<MPC_RULE_SRD_A>(p, i, w, pos, vx, vy, vz, cells, ext, du);
                break;
            case MPC_RULE_AT:
                active = mpc_rules_collide_slot<MPC_RULE_AT>(p, i, w, pos, vx, vy, vz, cells, ext, du);
                break;
            default:
                active = mpc_rules_collide_slot<MPC_RULE_AT_A>(p, i, w, pos, vx, vy, vz, cells, ext, du);
                break;
        }
        if (p.measure_stress && active) {
            MpcLocation loc = mpc_locate(p, (double)pos[0], (double)pos[1], (double)pos[2]);
            coll = p.mass * du[0] * loc.y_in_cell;
        }
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3);
    }
}

// Solute i under RULE: its extended sums in local cell c (global gcell).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_solute_sums(const MpcParams &p, unsigned int c, unsigned int gcell,
                                                      const MpcLocation &loc, const double x[3], double m,
                                                      const double wv[3], double *ext) {
    double t[MPC_RULE_SUMS_MAX];
    mpc_u64 key = mpc_solute_particle_key(x[0], x[1], x[2]);
    mpc_rule_particle_terms<RULE>(p, gcell, key, m, loc, wv, t);
    mpc_rule_add_atomic<RULE>(ext, c, t);
}

// Solutes under a rule: as mpc_solute_bin, plus the extended sums (one atomic per term).
extern "C" __global__ void mpc_rules_solute_bin(MpcParams p, unsigned int rule, const double *__restrict__ spos,
                                                const double *__restrict__ svel, const double *__restrict__ smass,
                                                unsigned int *__restrict__ scell, int *__restrict__ simage,
                                                double *cells, double *ext) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_solutes) {
        return;
    }
    double x[3] = {spos[3 * i], spos[3 * i + 1], spos[3 * i + 2]};
    MpcLocation loc = mpc_locate_solute(p, x[0], x[1], x[2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    scell[i] = c;
    simage[i] = loc.image;
    if (c == MPC_DEAD) {  // slab mode: another GPU owns this solute's cell
        return;
    }
    double m = smass[i];
    double wv[3] = {svel[3 * i] + mpc_image_velocity(p, loc.image), svel[3 * i + 1], svel[3 * i + 2]};
    mpc_add_solute_to_cell(cells, c, m, wv[0], wv[1], wv[2]);
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_solute_sums<MPC_RULE_SRD_A>(p, c, loc.cell, loc, x, m, wv, ext);
            break;
        case MPC_RULE_AT:
            mpc_rules_solute_sums<MPC_RULE_AT>(p, c, loc.cell, loc, x, m, wv, ext);
            break;
        default:
            mpc_rules_solute_sums<MPC_RULE_AT_A>(p, c, loc.cell, loc, x, m, wv, ext);
            break;
    }
}

// Collide solute i (position x, mass m, local cell c, image) under RULE into w.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_solute_velocity(const MpcParams &p, unsigned int c, int image,
                                                          const double x[3], double m, const double *cells,
                                                          const double *ext, const double v[3], double w[3]) {
    double cp[8], ap[MPC_RULE_PARAMS];
    mpc_load_params(cells, c, cp);
    mpc_rule_load_params<RULE>(ext, c, ap);
    MpcLocation loc = mpc_locate_solute(p, x[0], x[1], x[2]);
    double r[3] = {loc.x_in_cell, loc.y_in_cell, loc.z_in_cell};
    double xi[3] = {0.0, 0.0, 0.0};
    if (mpc_rule_draws(RULE)) {
        mpc_rule_draw(p, loc.cell, mpc_solute_particle_key(x[0], x[1], x[2]), m, xi);
    }
    mpc_rule_collide<RULE>(p, cp, ap, image, v, r, xi, w);
}

// Solutes under a rule: collide in place (as mpc_solute_collide; owned_only = 1 as
// mpc_solute_collide_owned: solutes of other GPUs' cells are left to their owner, else their
// velocities are zeroed for the host to add the GPUs' outputs). report[3] += their share of the
// collisional stress when measured (every thread reaches the block sum).
extern "C" __global__ void mpc_rules_solute_collide(MpcParams p, unsigned int rule, const double *spos,
                                                    const double *smass, const unsigned int *__restrict__ scell,
                                                    const int *__restrict__ simage, const double *__restrict__ cells,
                                                    const double *__restrict__ ext, double *svel,
                                                    unsigned int owned_only, double *report) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int c = i < p.n_solutes ? scell[i] : MPC_DEAD;
    double coll = 0.0;
    if (i < p.n_solutes && c == MPC_DEAD && !owned_only) {
        svel[3 * i] = 0.0;
        svel[3 * i + 1] = 0.0;
        svel[3 * i + 2] = 0.0;
    }
    if (c != MPC_DEAD) {
        double x[3] = {spos[3 * i], spos[3 * i + 1], spos[3 * i + 2]};
        double v[3] = {svel[3 * i], svel[3 * i + 1], svel[3 * i + 2]};
        double w[3];
        switch (rule) {
            case MPC_RULE_SRD_A:
                mpc_rules_solute_velocity<MPC_RULE_SRD_A>(p, c, simage[i], x, smass[i], cells, ext, v, w);
                break;
            case MPC_RULE_AT:
                mpc_rules_solute_velocity<MPC_RULE_AT>(p, c, simage[i], x, smass[i], cells, ext, v, w);
                break;
            default:
                mpc_rules_solute_velocity<MPC_RULE_AT_A>(p, c, simage[i], x, smass[i], cells, ext, v, w);
                break;
        }
        if (p.measure_stress && cells[(size_t)c * MPC_CELL_STRIDE + 7] != 0.0) {
            MpcLocation loc = mpc_locate_solute(p, x[0], x[1], x[2]);
            coll = smass[i] * (w[0] - v[0]) * loc.y_in_cell;
        }
        svel[3 * i] = w[0];
        svel[3 * i + 1] = w[1];
        svel[3 * i + 2] = w[2];
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3);
    }
}
