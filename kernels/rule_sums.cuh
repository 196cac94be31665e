// The cell sums of pass 1 under a collision rule beside plain SRD (kernels/rules.cu): the plain
// sums (cell_sums.cuh's layout) and the rule's extended sums (rules.cuh's layout) of the lanes
// of a warp, added to their cells with atomics (64-bit fixed point, or f64 with
// MPCBOX_CELL_SUMS=float: cell_sums.cuh's mpc_term), and the per-particle atomics of solutes and
// arrivals from other GPUs. How the warp adds them is MPC_RULE_FLUSH (a tuning knob, set
// through MPCBOX_NVRTC_OPTIONS="-DMPC_RULE_FLUSH=n"; every choice gives the same sums up to
// the order of the additions):
//   0: the first version: the lanes of a cell are reduced (plain and extended sums each with
//      their own warp tree) and the cell's lowest lane adds each sum with its own atomic, so
//      one warp instruction touches up to 32 different cells (one L2 request per lane);
//   1 (default): one warp tree for all the sums, then each cell's lowest lane stages its sums
//      in shared memory and the warp adds them with consecutive lanes on consecutive doubles
//      of a cell: the atomics of one instruction fall into a few 32-byte sectors;
//   2: no warp tree: every particle stages its terms and the warp adds them as in 1 (more
//      atomics, no shuffles).
#pragma once
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#include "rules.cuh"
#endif

#ifndef MPC_RULE_FLUSH
#define MPC_RULE_FLUSH 1
#endif

// The lanes of a warp that bin into the same cell as a reduction tree: the shuffle pattern of
// mpc_warp_reduce_cell, computed once (src lane of each round in 5 bits, whether to add in a
// bit), then applied to any number of values with mpc_tree_sum. All 32 lanes must call both.
struct MpcWarpTree {
    unsigned int src;
    unsigned int take;
    int rounds;
    bool leader;
    // lanes in the group (its particle count)
    unsigned int count;
};

__device__ __forceinline__ MpcWarpTree mpc_warp_tree(bool valid, unsigned int cell) {
    const unsigned int full = 0xffffffffu;
    unsigned int key = valid ? cell : 0xffffffffu;
    unsigned int peers = __match_any_sync(full, key);
    unsigned int lane = threadIdx.x & 31;
    unsigned int below = peers & ((1u << lane) - 1u);
    unsigned int rel = __popc(below);
    unsigned int up = lane == 31 ? 0u : (peers & ~((2u << lane) - 1u));
    MpcWarpTree t;
    t.src = 0;
    t.take = 0;
    t.rounds = 0;
    t.leader = valid && below == 0;
    t.count = __popc(peers);
    while (__any_sync(full, up != 0)) {
        int next = __ffs(up);
        unsigned int src = next ? (unsigned int)(next - 1) : lane;
        t.src |= src << (5 * t.rounds);
        if (next) {
            t.take |= 1u << t.rounds;
        }
        unsigned int done = __ballot_sync(full, rel & 1u);
        up &= ~done;
        rel >>= 1;
        t.rounds += 1;
    }
    return t;
}

// The sum of x over the lane's cell group, on the group's lowest lane (rounds are warp-uniform),
// in the sums' arithmetic.
__device__ __forceinline__ double mpc_tree_sum(const MpcParams &p, const MpcWarpTree &t, double x) {
#pragma unroll
    for (int k = 0; k < 5; ++k) {
        if (k < t.rounds) {
            double y = __shfl_sync(0xffffffffu, x, (t.src >> (5 * k)) & 31u);
            if ((t.take >> k) & 1u) {
                x = mpc_term_add(p, x, y);
            }
        }
    }
    return x;
}

// MPC_RULE_FLUSH=0: warp-aggregated extended sums, one lane per cell and warp adds each of the
// group's terms with its own atomic. All 32 lanes must call it (invalid lanes add nothing).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_add_warp(const MpcParams &p, double *ext, bool valid, unsigned int cell,
                                                  const double t[MPC_RULE_SUMS_MAX]) {
    MpcWarpTree tree = mpc_warp_tree(valid, cell);
    double *c = ext + (size_t)cell * mpc_rule_stride(RULE);
#pragma unroll
    for (int k = 0; k < mpc_rule_len(RULE); ++k) {
        double s = mpc_tree_sum(p, tree, mpc_term(p, mpc_rule_sum_kind(RULE, k), t[k]));
        if (tree.leader) {
            mpc_term_atomic(p, c + k, s);
        }
    }
}

// Staging for MPC_RULE_FLUSH 1 and 2: per warp of a 256-thread block (the kernels that stage
// carry __launch_bounds__(256)), a row per owner lane (a cell's leader, or every particle) of
// the 5 plain and at most 18 extended sums, and the row's cell. The row length is odd, so the
// owners that store value k of their rows hit distinct banks. File scope: the kernel that runs
// every rule (the run-time rule argument) holds one buffer, not one per rule. 48 KB per block.
#define MPC_STAGE_WARPS 8
#define MPC_STAGE_ROW 23
__shared__ double mpc_rule_stage[MPC_STAGE_WARPS * 32 * MPC_STAGE_ROW];
__shared__ unsigned int mpc_rule_stage_cell[MPC_STAGE_WARPS * 32];

// Value k of a fluid particle's row: [m v (3), m v², 1] (cell_sums.cuh's plain sums), then the
// rule's extended terms t; as terms of the sums (mpc_term).
template <unsigned int RULE>
__device__ __forceinline__ double mpc_staged_term(const MpcParams &p, int k, double m, const double wv[3],
                                                  const double t[MPC_RULE_SUMS_MAX]) {
    if (k == 4) {
        return mpc_count_term(p, 1u);
    }
    double x = k < 3 ? m * wv[k] : k == 3 ? m * (wv[0] * wv[0] + wv[1] * wv[1] + wv[2] * wv[2]) : t[k - 5];
    int kind = k < 3 ? MPC_FIX_MOMENTUM : k == 3 ? MPC_FIX_ENERGY : mpc_rule_sum_kind(RULE, k - 5);
    return mpc_term(p, kind, x);
}

// The address of value k of cell c's row: k < 5 the plain sums at their slots of the cell
// record (cell_sums.cuh: 0, 1, 2, 4, 5), then the extended sums.
template <unsigned int RULE>
__device__ __forceinline__ double *mpc_staged_target(double *cells, double *ext, size_t c, int k) {
    return k < 5 ? cells + c * MPC_CELL_STRIDE + (k < 3 ? k : k + 1) : ext + c * mpc_rule_stride(RULE) + (k - 5);
}

// MPC_RULE_FLUSH 1 and 2: the plain sums of a fluid particle of mass m, velocity wv (LE offset
// included), and its extended terms t, added to cell `cell`: each owner stages its row (with 1,
// the sums of its cell's lanes, value by value), then the warp adds the rows with consecutive
// lanes on consecutive values of a row, so the atomics of one instruction fall into a few
// 32-byte sectors. All 32 lanes must call it.
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_sums_staged(const MpcParams &p, double *cells, double *ext, bool valid,
                                                     unsigned int cell,
                                                     double m, const double wv[3], const double t[MPC_RULE_SUMS_MAX]) {
    constexpr int NV = 5 + mpc_rule_len(RULE);
    static_assert(NV <= MPC_STAGE_ROW, "a row of staged sums is longer than MPC_STAGE_ROW");
    unsigned int lane = threadIdx.x & 31u;
#if MPC_RULE_FLUSH == 1
    MpcWarpTree tree = mpc_warp_tree(valid, cell);
    bool owner = tree.leader;
#else
    bool owner = valid;
#endif
    unsigned int owners = __ballot_sync(0xffffffffu, owner);
    unsigned int slot = __popc(owners & ((1u << lane) - 1u));
    double *stage = mpc_rule_stage + (threadIdx.x >> 5) * (32 * MPC_STAGE_ROW);
    unsigned int *stage_cell = mpc_rule_stage_cell + (threadIdx.x >> 5) * 32;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        double x = mpc_staged_term<RULE>(p, k, m, wv, t);
#if MPC_RULE_FLUSH == 1
        x = k == 4 ? mpc_count_term(p, tree.count) : mpc_tree_sum(p, tree, x);
#endif
        if (owner) {
            stage[slot * MPC_STAGE_ROW + k] = x;
        }
    }
    if (owner) {
        stage_cell[slot] = cell;
    }
    __syncwarp();
    int items = __popc(owners) * NV;
    for (int q = (int)lane; q < items; q += 32) {
        int row = q / NV;
        int k = q - row * NV;
        mpc_term_atomic(p, mpc_staged_target<RULE>(cells, ext, stage_cell[row], k), stage[row * MPC_STAGE_ROW + k]);
    }
    __syncwarp();
}

// Per-particle atomics (solutes, arrivals from another GPU).
template <unsigned int RULE>
__device__ __forceinline__ void mpc_rule_add_atomic(const MpcParams &p, double *ext, unsigned int cell,
                                                    const double t[MPC_RULE_SUMS_MAX]) {
    double *c = ext + (size_t)cell * mpc_rule_stride(RULE);
#pragma unroll
    for (int k = 0; k < mpc_rule_len(RULE); ++k) {
        mpc_term_atomic(p, c + k, mpc_term(p, mpc_rule_sum_kind(RULE, k), t[k]));
    }
}

// A fluid particle arriving from another GPU (mpc_immigrate): its extended sums in local cell c
// (global gcell), velocity wv with the LE offset.
__device__ __forceinline__ void mpc_rule_add_arrival(const MpcParams &p, unsigned int rule, double *ext,
                                                     unsigned int c, unsigned int gcell, const MpcLocation &loc,
                                                     const float pos[3], const double wv[3]) {
    double t[MPC_RULE_SUMS_MAX];
    mpc_u64 key = mpc_fluid_particle_key(pos[0], pos[1], pos[2]);
    switch (rule) {
        case MPC_RULE_SRD_A:
            mpc_rule_particle_terms<MPC_RULE_SRD_A>(p, gcell, key, p.mass, loc, wv, t);
            mpc_rule_add_atomic<MPC_RULE_SRD_A>(p, ext, c, t);
            break;
        case MPC_RULE_AT:
            mpc_rule_particle_terms<MPC_RULE_AT>(p, gcell, key, p.mass, loc, wv, t);
            mpc_rule_add_atomic<MPC_RULE_AT>(p, ext, c, t);
            break;
        case MPC_RULE_AT_A:
            mpc_rule_particle_terms<MPC_RULE_AT_A>(p, gcell, key, p.mass, loc, wv, t);
            mpc_rule_add_atomic<MPC_RULE_AT_A>(p, ext, c, t);
            break;
        case MPC_RULE_SRD:  // no extended sums
            break;
        default:  // a code no kernel knows: stop rather than run another rule
            __trap();
    }
}
