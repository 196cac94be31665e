// Collision rules beside plain SRD (src/backend/cuda/rules.rs): pass 1 with the extended cell
// sums (and, fused, the previous step's collision), the cell pass, the collision, the solutes.
// Two sets of kernels run the templates of rules.cuh and rule_sums.cuh: one per rule
// (mpc_rules_*_srd_a, _at, _at_a: each compiled for its rule alone, so it carries only that
// rule's registers; the default) and one taking the rule code at run time (the first version;
// `MPCBOX_RULES_KERNELS=generic`, and the block-aggregation methods and the solutes, which
// are not hot). Both take the same arguments. The plain SRD kernels stay as they are. Pass 1
// shares its streaming and binning (mpc_stream_store_bin, mpc_live) with stream.cu.
#ifndef MPCBOX_NVRTC
#include "rule_sums.cuh"
#include "wall_rules.cuh"
#include "migrate.cuh"
#endif

// Minimum resident blocks of 256 threads per multiprocessor for the per-particle rule kernels
// (a register cap: 4 = 64 registers, 32 warps per SM, MPC-AT+a's fused pass spills 104 B; 3 = 80
// registers without spills, 24 warps; 1 lets MPC-AT+a's fused pass take 98, 16 warps). 4 was
// fastest at 256³ in `mpcbox-bench rules` (the +a and AT rules a few per cent faster than with 3,
// MPC-AT+a equal: more resident warps hide more latency than the spills cost). Tuning knob:
// MPCBOX_NVRTC_OPTIONS="-DMPC_RULES_MIN_BLOCKS=n". The bound of 256 threads per block is what
// the staging in shared memory (48 KB per block) is sized for.
#ifndef MPC_RULES_MIN_BLOCKS
#define MPC_RULES_MIN_BLOCKS 4
#endif
#define MPC_RULES_BOUNDS __launch_bounds__(256, MPC_RULES_MIN_BLOCKS)

// Every kernel of one kind takes the same arguments, per rule or with the rule at run time.
#define MPC_RULES_PASS1_PARAMS                                                                                  \
    MpcParams p, unsigned int rule, float *__restrict__ px, float *__restrict__ py, float *__restrict__ pz,     \
        double *__restrict__ vx, double *__restrict__ vy, double *__restrict__ vz,                             \
        unsigned int *__restrict__ cellw, double *cells, double *ext, double *report, MpcMigration m
#define MPC_RULES_PASS1_ARGS p, rule, px, py, pz, vx, vy, vz, cellw, cells, ext, report, m
#define MPC_RULES_FUSED_PARAMS                                                                                  \
    MpcParams pc, MpcParams p, unsigned int rule, float *__restrict__ px, float *__restrict__ py,               \
        float *__restrict__ pz, double *__restrict__ vx, double *__restrict__ vy, double *__restrict__ vz,     \
        unsigned int *__restrict__ cellw, const double *__restrict__ cells_prev,                               \
        const double *__restrict__ ext_prev, double *cells_next, double *ext_next, double *report, MpcMigration m
#define MPC_RULES_FUSED_ARGS \
    pc, p, rule, px, py, pz, vx, vy, vz, cellw, cells_prev, ext_prev, cells_next, ext_next, report, m
#define MPC_RULES_CELL_PARAMS \
    MpcParams p, unsigned int rule, double *cells, double *ext, double *report, const unsigned int *listed
#define MPC_RULES_CELL_ARGS p, rule, cells, ext, report, listed
#define MPC_RULES_COLLIDE_PARAMS                                                                                \
    MpcParams p, unsigned int rule, const float *__restrict__ px, const float *__restrict__ py,                 \
        const float *__restrict__ pz, double *__restrict__ vx, double *__restrict__ vy,                         \
        double *__restrict__ vz, const unsigned int *__restrict__ cellw, const double *__restrict__ cells,     \
        const double *__restrict__ ext, double *report
#define MPC_RULES_COLLIDE_ARGS p, rule, px, py, pz, vx, vy, vz, cellw, cells, ext, report

// Pass 1 of slot i under RULE: stream the velocity v from position pos (valid slots), store,
// bin, add the plain and extended sums (staged, or with the block aggregation per BLOCK, or
// per MPC_RULE_FLUSH=0 as the first version). All threads must call it.
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
    if constexpr (BLOCK || MPC_RULE_FLUSH == 0) {
        mpc_sum_and_report<BLOCK>(p, cells, valid, cell, wv, kin, report);
        mpc_rule_add_warp<RULE>(p, ext, valid, cell, t);
    } else {
        mpc_rule_sums_staged<RULE>(p, cells, ext, valid, cell, p.mass, wv, t);
        if (p.measure_stress) {
            mpc_block_add(mpc_global_term(p, MPC_GLOBAL_ENERGY, kin), report + 2, MPC_REPORT_WORDS);
        }
    }
}

// Pass 1 under RULE (every method that sums in pass 1, or fused with nothing pending): as
// mpc_stream_bin_warp / mpc_stream_bin_shared, plus the rule's extended sums into ext.
template <unsigned int RULE, bool BLOCK>
__device__ __forceinline__ void mpc_rules_stream_bin_rule(MPC_RULES_PASS1_PARAMS) {
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
    mpc_rules_bin<RULE, BLOCK>(p, m, i, valid, pos, v, px, py, pz, vx, vy, vz, cellw, cells, ext, report);
}

template <bool BLOCK>
__device__ __forceinline__ void mpc_rules_stream_bin_any(MPC_RULES_PASS1_PARAMS) {
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_stream_bin_rule<MPC_RULE_SRD_A, BLOCK>(MPC_RULES_PASS1_ARGS);
            break;
        case MPC_RULE_AT:
            mpc_rules_stream_bin_rule<MPC_RULE_AT, BLOCK>(MPC_RULES_PASS1_ARGS);
            break;
        case MPC_RULE_AT_A:
            mpc_rules_stream_bin_rule<MPC_RULE_AT_A, BLOCK>(MPC_RULES_PASS1_ARGS);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
    }
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_stream_bin(MPC_RULES_PASS1_PARAMS) {
    mpc_rules_stream_bin_any<false>(MPC_RULES_PASS1_ARGS);
}

extern "C" __global__ void mpc_rules_stream_bin_shared(MPC_RULES_PASS1_PARAMS) {
    mpc_rules_stream_bin_any<true>(MPC_RULES_PASS1_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_stream_bin_srd_a(MPC_RULES_PASS1_PARAMS) {
    mpc_rules_stream_bin_rule<MPC_RULE_SRD_A, false>(MPC_RULES_PASS1_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_stream_bin_at(MPC_RULES_PASS1_PARAMS) {
    mpc_rules_stream_bin_rule<MPC_RULE_AT, false>(MPC_RULES_PASS1_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_stream_bin_at_a(MPC_RULES_PASS1_PARAMS) {
    mpc_rules_stream_bin_rule<MPC_RULE_AT_A, false>(MPC_RULES_PASS1_ARGS);
}

// Fused pass under RULE: collide slot i with step n's parameters (pc, cells_prev, ext_prev),
// then pass 1 of step n+1 into cells_next and ext_next.
template <unsigned int RULE, bool BLOCK>
__device__ __forceinline__ void mpc_rules_collide_stream_bin_rule(MPC_RULES_FUSED_PARAMS) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    bool valid = w != MPC_DEAD;
    float pos[3] = {0.0f, 0.0f, 0.0f};
    double v[3] = {0.0, 0.0, 0.0};
    if (valid) {
        pos[0] = px[i];
        pos[1] = py[i];
        pos[2] = pz[i];
        double v0[3], cp[8];
        mpc_rule_collide_fluid<RULE>(pc, cells_prev, ext_prev, w, pos, vx, vy, vz, i, false, v0, v, cp);
    }
    mpc_rules_bin<RULE, BLOCK>(p, m, i, valid, pos, v, px, py, pz, vx, vy, vz, cellw, cells_next, ext_next, report);
}

// "fused" methods under a rule: the collision of step n and pass 1 of step n+1 in one pass.
template <bool BLOCK>
__device__ __forceinline__ void mpc_rules_collide_stream_bin_any(MPC_RULES_FUSED_PARAMS) {
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_collide_stream_bin_rule<MPC_RULE_SRD_A, BLOCK>(MPC_RULES_FUSED_ARGS);
            break;
        case MPC_RULE_AT:
            mpc_rules_collide_stream_bin_rule<MPC_RULE_AT, BLOCK>(MPC_RULES_FUSED_ARGS);
            break;
        case MPC_RULE_AT_A:
            mpc_rules_collide_stream_bin_rule<MPC_RULE_AT_A, BLOCK>(MPC_RULES_FUSED_ARGS);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
    }
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_stream_bin(MPC_RULES_FUSED_PARAMS) {
    mpc_rules_collide_stream_bin_any<false>(MPC_RULES_FUSED_ARGS);
}

extern "C" __global__ void mpc_rules_collide_stream_bin_shared(MPC_RULES_FUSED_PARAMS) {
    mpc_rules_collide_stream_bin_any<true>(MPC_RULES_FUSED_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_stream_bin_srd_a(MPC_RULES_FUSED_PARAMS) {
    mpc_rules_collide_stream_bin_rule<MPC_RULE_SRD_A, false>(MPC_RULES_FUSED_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_stream_bin_at(MPC_RULES_FUSED_PARAMS) {
    mpc_rules_collide_stream_bin_rule<MPC_RULE_AT, false>(MPC_RULES_FUSED_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_stream_bin_at_a(MPC_RULES_FUSED_PARAMS) {
    mpc_rules_collide_stream_bin_rule<MPC_RULE_AT_A, false>(MPC_RULES_FUSED_ARGS);
}

// Cell c under RULE: plain sums s and extended sums in ext to the parameters, in place; WALLED:
// with the walls' virtual particles where the shifted grid's cell is cut (the cells
// mpc_rules_cut_cell_params takes; the rest skip the fill and its registers).
template <unsigned int RULE, bool WALLED>
__device__ __forceinline__ void mpc_rules_cell(const MpcParams &p, unsigned int c, const double s[6], double *o,
                                               double *ext) {
    double2 *x = (double2 *)(ext + (size_t)c * mpc_rule_stride(RULE));
    double e[MPC_RULE_SUMS_MAX];
#pragma unroll
    for (int k = 0; k < MPC_RULE_SUMS_MAX / 2; ++k) {
        double2 a = 2 * k < mpc_rule_len(RULE) ? x[k] : make_double2(0.0, 0.0);
        e[2 * k] = mpc_sum_value(p, mpc_rule_sum_kind(RULE, 2 * k), a.x);
        e[2 * k + 1] = mpc_sum_value(p, mpc_rule_sum_kind(RULE, 2 * k + 1), a.y);
    }
    double out[8], ap[MPC_RULE_PARAMS];
    // draws keyed by the global cell
#if MPC_WALLS
    if (WALLED) {
        mpc_rules_walled_cell_params<RULE>(p, c + p.cell_offset, s, e, out, ap);
    } else {
        mpc_rule_cell_params<RULE>(p, c + p.cell_offset, s, e, out, ap);
    }
#else
    mpc_rule_cell_params<RULE>(p, c + p.cell_offset, s, e, out, ap);
#endif
    mpc_store_cell_params(o, out);
    if (mpc_rule_angular(RULE)) {
#pragma unroll
        for (int k = 0; k < MPC_RULE_PARAMS / 2; ++k) {
            x[k] = make_double2(ap[2 * k], ap[2 * k + 1]);
        }
    }
}

// Pass 3 under RULE, one thread per cell (as mpc_cell_params: every cell but the listed ones,
// whose parameters mpc_rules_cut_cell_params makes after it): report[0] += relative energy,
// report[1] += (Nc - 1) over cells with Nc >= 2.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_cell_params_rule(MPC_RULES_CELL_PARAMS) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    double e_rel = 0.0, dof = 0.0;
    // an empty cell's plain and extended sums are zeros, and so are its parameters
    if (c < p.n_cells && !mpc_cell_is_empty(cells + (size_t)c * MPC_CELL_STRIDE)) {
        double *o = cells + (size_t)c * MPC_CELL_STRIDE;
        double s[6];
        mpc_read_cell_sums(p, o, s);
        if (s[5] >= 2.0) {
            e_rel = mpc_global_term(p, MPC_GLOBAL_ENERGY, mpc_relative_energy(s));
            dof = s[5] - 1.0;
        }
        if (!mpc_cell_is_listed(listed, c)) {
            mpc_rules_cell<RULE, false>(p, c, s, o, ext);
        }
    }
    mpc_block_add(e_rel, report + 0, MPC_REPORT_WORDS);
    mpc_block_add(dof, report + 1, MPC_REPORT_WORDS);
}

// Pass 3 between no-slip walls under RULE, after the cell pass: one thread per listed local
// cell (as mpc_cut_cell_params). Empty in a unit without walls.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_cut_cell_params_rule(const MpcParams &p, double *cells, double *ext,
                                                               const unsigned int *list, unsigned int count) {
#if MPC_WALLS
    unsigned int c;
    double s[6];
    if (mpc_listed_cell_sums(p, cells, list, count, &c, s)) {
        mpc_rules_cell<RULE, true>(p, c, s, cells + (size_t)c * MPC_CELL_STRIDE, ext);
    }
#endif
}

extern "C" __global__ void mpc_rules_cut_cell_params(MpcParams p, unsigned int rule, double *cells, double *ext,
                                                     const unsigned int *list, unsigned int count) {
    switch (rule) {  // uniform over the grid
        case MPC_RULE_SRD_A:
            mpc_rules_cut_cell_params_rule<MPC_RULE_SRD_A>(p, cells, ext, list, count);
            break;
        case MPC_RULE_AT:
            mpc_rules_cut_cell_params_rule<MPC_RULE_AT>(p, cells, ext, list, count);
            break;
        case MPC_RULE_AT_A:
            mpc_rules_cut_cell_params_rule<MPC_RULE_AT_A>(p, cells, ext, list, count);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
    }
}

extern "C" __global__ void mpc_rules_cell_params(MPC_RULES_CELL_PARAMS) {
    switch (rule) {  // uniform over the grid: every thread of a block joins the same reductions
        case MPC_RULE_SRD_A:
            mpc_rules_cell_params_rule<MPC_RULE_SRD_A>(MPC_RULES_CELL_ARGS);
            break;
        case MPC_RULE_AT:
            mpc_rules_cell_params_rule<MPC_RULE_AT>(MPC_RULES_CELL_ARGS);
            break;
        case MPC_RULE_AT_A:
            mpc_rules_cell_params_rule<MPC_RULE_AT_A>(MPC_RULES_CELL_ARGS);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
    }
}

extern "C" __global__ void mpc_rules_cell_params_srd_a(MPC_RULES_CELL_PARAMS) {
    mpc_rules_cell_params_rule<MPC_RULE_SRD_A>(MPC_RULES_CELL_ARGS);
}

extern "C" __global__ void mpc_rules_cell_params_at(MPC_RULES_CELL_PARAMS) {
    mpc_rules_cell_params_rule<MPC_RULE_AT>(MPC_RULES_CELL_ARGS);
}

extern "C" __global__ void mpc_rules_cell_params_at_a(MPC_RULES_CELL_PARAMS) {
    mpc_rules_cell_params_rule<MPC_RULE_AT_A>(MPC_RULES_CELL_ARGS);
}

// Pass 4 under RULE, one thread per fluid slot (as mpc_collide). report[3] += collisional
// stress when measured.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_collide_rule(MPC_RULES_COLLIDE_PARAMS) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double coll = 0.0;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    if (w != MPC_DEAD) {
        float pos[3] = {px[i], py[i], pz[i]};
        double v[3], u[3], cp[8];
        mpc_rule_collide_fluid<RULE>(p, cells, ext, w, pos, vx, vy, vz, i, p.measure_stress != 0, v, u, cp);
        vx[i] = u[0];
        vy[i] = u[1];
        vz[i] = u[2];
        if (p.measure_stress && cp[7] != 0.0) {
            MpcLocation loc = mpc_locate(p, (double)pos[0], (double)pos[1], (double)pos[2]);
            coll = mpc_global_term(p, MPC_GLOBAL_MOMENTUM, p.mass * (u[0] - v[0]) * loc.y_in_cell);
        }
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3, MPC_REPORT_WORDS);
    }
}

extern "C" __global__ void mpc_rules_collide(MPC_RULES_COLLIDE_PARAMS) {
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_collide_rule<MPC_RULE_SRD_A>(MPC_RULES_COLLIDE_ARGS);
            break;
        case MPC_RULE_AT:
            mpc_rules_collide_rule<MPC_RULE_AT>(MPC_RULES_COLLIDE_ARGS);
            break;
        case MPC_RULE_AT_A:
            mpc_rules_collide_rule<MPC_RULE_AT_A>(MPC_RULES_COLLIDE_ARGS);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
    }
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_srd_a(MPC_RULES_COLLIDE_PARAMS) {
    mpc_rules_collide_rule<MPC_RULE_SRD_A>(MPC_RULES_COLLIDE_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_at(MPC_RULES_COLLIDE_PARAMS) {
    mpc_rules_collide_rule<MPC_RULE_AT>(MPC_RULES_COLLIDE_ARGS);
}

extern "C" __global__ void MPC_RULES_BOUNDS mpc_rules_collide_at_a(MPC_RULES_COLLIDE_PARAMS) {
    mpc_rules_collide_rule<MPC_RULE_AT_A>(MPC_RULES_COLLIDE_ARGS);
}

// Solute i under RULE: its extended sums in local cell c (global gcell).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rules_solute_sums(const MpcParams &p, unsigned int c, unsigned int gcell,
                                                      const MpcLocation &loc, const double x[3], double m,
                                                      const double wv[3], double *ext) {
    double t[MPC_RULE_SUMS_MAX];
    mpc_u64 key = mpc_solute_particle_key(x[0], x[1], x[2]);
    mpc_rule_particle_terms<RULE>(p, gcell, key, m, loc, wv, t);
    mpc_rule_add_atomic<RULE>(p, ext, c, t);
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
    mpc_add_solute_to_cell(p, cells, c, m, wv[0], wv[1], wv[2]);
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rules_solute_sums<MPC_RULE_SRD_A>(p, c, loc.cell, loc, x, m, wv, ext);
            break;
        case MPC_RULE_AT:
            mpc_rules_solute_sums<MPC_RULE_AT>(p, c, loc.cell, loc, x, m, wv, ext);
            break;
        case MPC_RULE_AT_A:
            mpc_rules_solute_sums<MPC_RULE_AT_A>(p, c, loc.cell, loc, x, m, wv, ext);
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
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
            case MPC_RULE_AT_A:
                mpc_rules_solute_velocity<MPC_RULE_AT_A>(p, c, simage[i], x, smass[i], cells, ext, v, w);
                break;
            default:  // a code no kernel knows: stop rather than run another rule
                __trap();
        }
        if (p.measure_stress && cells[(size_t)c * MPC_CELL_STRIDE + 7] != 0.0) {
            MpcLocation loc = mpc_locate_solute(p, x[0], x[1], x[2]);
            coll = mpc_global_term(p, MPC_GLOBAL_MOMENTUM, smass[i] * (w[0] - v[0]) * loc.y_in_cell);
        }
        svel[3 * i] = w[0];
        svel[3 * i + 1] = w[1];
        svel[3 * i + 2] = w[2];
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3, MPC_REPORT_WORDS);
    }
}
