// Cell sums while binning, the device side of CellSumMethod (src/backend/cuda/cell_sums.rs),
// used by the pass-1 kernels of stream.cu: block and warp reductions, per-particle / warp /
// block-aggregated atomics into the cells, and loading a cell's collision parameters.
#pragma once
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#include "mpc.cuh"
#endif

__device__ __forceinline__ double mpc_warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        x += __shfl_down_sync(0xffffffffu, x, o);
    }
    return x;
}

// Fixed-point sums (src/fixed_sums.rs). With p.fixed a term x of a cell sum of kind k (MPC_FIX_*)
// travels as the bits of the 64-bit integer round(x * 2^e_k) in a double's place, adds as an
// integer (associative: the same bits in any order of warps, blocks, slabs and GPUs) and is read
// back as q * 2^-e_k; the CPU converts with the same two roundings (fixed_sums::to_fixed,
// from_fixed). Without p.fixed a term is itself and adds in f64 (MPCBOX_CELL_SUMS=float).
__device__ __forceinline__ double mpc_term_as(bool fixed, double scale, double x) {
    return fixed ? __longlong_as_double(__double2ll_rn(x * scale)) : x;
}

__device__ __forceinline__ double mpc_term(const MpcParams &p, int kind, double x) {
    return mpc_term_as(p.fixed, p.fix_scale[kind], x);
}

// A count as a term: the integer itself (fixed) or as a double.
__device__ __forceinline__ double mpc_count_term(const MpcParams &p, unsigned int n) {
    return p.fixed ? __longlong_as_double((long long)n) : (double)n;
}

// a + b in the sums' arithmetic (unsigned: two's-complement wrap, no signed overflow).
__device__ __forceinline__ double mpc_add_as(bool fixed, double a, double b) {
    if (fixed) {
        unsigned long long q = (unsigned long long)__double_as_longlong(a) + (unsigned long long)__double_as_longlong(b);
        return __longlong_as_double((long long)q);
    }
    return a + b;
}

__device__ __forceinline__ double mpc_term_add(const MpcParams &p, double a, double b) {
    return mpc_add_as(p.fixed, a, b);
}

// *addr += x in the sums' arithmetic (global or shared memory).
__device__ __forceinline__ void mpc_term_atomic(const MpcParams &p, double *addr, double x) {
    if (p.fixed) {
        atomicAdd((unsigned long long *)addr, (unsigned long long)__double_as_longlong(x));
    } else {
        atomicAdd(addr, x);
    }
}

// A stored cell sum of kind k as a double.
__device__ __forceinline__ double mpc_sum_value(const MpcParams &p, int kind, double stored) {
    return p.fixed ? __ll2double_rn(__double_as_longlong(stored)) * p.fix_inv[kind] : stored;
}

// A term of a global sum (the step report, the moments, wall momentum) of kind k (MPC_GLOBAL_*)
// rounded onto its grid of 2^-e_k: f64 sums of such terms stay below 2^53 steps and are exact,
// in any order (fixed_sums::FixedScales::global_term).
__device__ __forceinline__ double mpc_global_term(const MpcParams &p, int kind, double x) {
    return p.fixed ? rint(x * p.global_scale[kind]) * p.global_inv[kind] : x;
}

// Sum x over the block and add the result to copy blockIdx.x % MPC_SPREAD of *target, the copies
// `stride` doubles apart (one atomic per block; the host adds the copies). Every thread of the
// block must call it.
__device__ void mpc_block_add(double x, double *target, unsigned int stride) {
    __shared__ double part[32];
    int lane = threadIdx.x & 31;
    int wid = threadIdx.x >> 5;
    x = mpc_warp_sum(x);
    if (lane == 0) {
        part[wid] = x;
    }
    __syncthreads();
    if (wid == 0) {
        int nw = (blockDim.x + 31) >> 5;
        double y = lane < nw ? part[lane] : 0.0;
        y = mpc_warp_sum(y);
        if (lane == 0 && y != 0.0) {
            atomicAdd(target + (blockIdx.x % MPC_SPREAD) * stride, y);
        }
    }
    __syncthreads();
}

// Raw cell sums while binning (MPC_CELL_STRIDE doubles per cell):
//   [0..3) sum m v, [3] solute mass, [4] sum m v^2, [5] fluid count, [6] solute count.
// The fluid mass is m * (fluid count), so a fluid particle needs five atomics, not six;
// mpc_cell_params rebuilds [sum m v, mass, sum m v^2, count] from these.
#define MPC_SUM_SOLUTE_MASS 3
#define MPC_SUM_FLUID_COUNT 5
#define MPC_SUM_SOLUTE_COUNT 6

// The raw sums of cell o as [sum m v, mass, sum m v^2, count] (the layout mpc_cell_params and
// the rules' cell pass read): the fluid mass m * (fluid count) + the solute mass, as the CPU's
// physics::sums::CellAccumulator rebuilds it.
__device__ __forceinline__ void mpc_read_cell_sums(const MpcParams &p, const double *o, double s[6]) {
    double2 a = ((const double2 *)o)[0], b = ((const double2 *)o)[1], d = ((const double2 *)o)[2],
            e = ((const double2 *)o)[3];
    double fluid = mpc_sum_value(p, MPC_FIX_COUNT, d.y);
    s[0] = mpc_sum_value(p, MPC_FIX_MOMENTUM, a.x);
    s[1] = mpc_sum_value(p, MPC_FIX_MOMENTUM, a.y);
    s[2] = mpc_sum_value(p, MPC_FIX_MOMENTUM, b.x);
    s[3] = p.mass * fluid + mpc_sum_value(p, MPC_FIX_MASS, b.y);  // fluid mass + solute mass
    s[4] = mpc_sum_value(p, MPC_FIX_ENERGY, d.x);
    s[5] = fluid + mpc_sum_value(p, MPC_FIX_COUNT, e.x);  // fluid + solute count
}

// Whether the raw sums at o hold no fluid particle and no solute: every sum is then zero (the
// buffer was zeroed before the binning), and zeros are also the cell's parameters, so the cell
// pass reads only this sector of it and leaves it as it is (between walls, the solid cells).
__device__ __forceinline__ bool mpc_cell_is_empty(const double *o) {
    double2 d = ((const double2 *)o)[2], e = ((const double2 *)o)[3];
    return __double_as_longlong(d.y) == 0 && __double_as_longlong(e.x) == 0;
}

// Whether local cell c is one the walls may cut (bit c of `listed`, null without such walls):
// its parameters are mpc_cut_cell_params's.
__device__ __forceinline__ bool mpc_cell_is_listed(const unsigned int *listed, unsigned int c) {
    return listed != nullptr && ((__ldg(listed + (c >> 5)) >> (c & 31u)) & 1u) != 0u;
}

// The cut-cell passes' thread k: its listed local cell c (`list`, `count` of them:
// Walls::cells_walls_may_cut) and that cell's sums; false past the list.
__device__ __forceinline__ bool mpc_listed_cell_sums(const MpcParams &p, const double *cells,
                                                     const unsigned int *list, unsigned int count,
                                                     unsigned int *c, double s[6]) {
    unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) {
        return false;
    }
    *c = list[k];
    mpc_read_cell_sums(p, cells + (size_t)*c * MPC_CELL_STRIDE, s);
    return true;
}

// Sums -> collision parameters of one cell, in place.
__device__ __forceinline__ void mpc_store_cell_params(double *o, const double out[8]) {
    double2 *o2 = (double2 *)o;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        o2[k] = make_double2(out[2 * k], out[2 * k + 1]);
    }
}

__device__ __forceinline__ void mpc_add_to_cell(const MpcParams &p, double *cells, unsigned int cell, double m,
                                                double v0, double v1, double v2) {
    double *c = cells + (size_t)cell * MPC_CELL_STRIDE;
    mpc_term_atomic(p, c + 0, mpc_term(p, MPC_FIX_MOMENTUM, m * v0));
    mpc_term_atomic(p, c + 1, mpc_term(p, MPC_FIX_MOMENTUM, m * v1));
    mpc_term_atomic(p, c + 2, mpc_term(p, MPC_FIX_MOMENTUM, m * v2));
    mpc_term_atomic(p, c + 4, mpc_term(p, MPC_FIX_ENERGY, m * (v0 * v0 + v1 * v1 + v2 * v2)));
    mpc_term_atomic(p, c + MPC_SUM_FLUID_COUNT, mpc_count_term(p, 1u));
}

__device__ __forceinline__ void mpc_add_solute_to_cell(const MpcParams &p, double *cells, unsigned int cell, double m,
                                                       double v0, double v1, double v2) {
    double *c = cells + (size_t)cell * MPC_CELL_STRIDE;
    mpc_term_atomic(p, c + 0, mpc_term(p, MPC_FIX_MOMENTUM, m * v0));
    mpc_term_atomic(p, c + 1, mpc_term(p, MPC_FIX_MOMENTUM, m * v1));
    mpc_term_atomic(p, c + 2, mpc_term(p, MPC_FIX_MOMENTUM, m * v2));
    mpc_term_atomic(p, c + MPC_SUM_SOLUTE_MASS, mpc_term(p, MPC_FIX_MASS, m));
    mpc_term_atomic(p, c + 4, mpc_term(p, MPC_FIX_ENERGY, m * (v0 * v0 + v1 * v1 + v2 * v2)));
    mpc_term_atomic(p, c + MPC_SUM_SOLUTE_COUNT, mpc_count_term(p, 1u));
}

__device__ __forceinline__ void mpc_load_params(const double *cells, unsigned int cell, double cp[8]) {
    const double2 *c = (const double2 *)(cells + (size_t)cell * MPC_CELL_STRIDE);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        double2 t = __ldg(c + k);
        cp[2 * k] = t.x;
        cp[2 * k + 1] = t.y;
    }
}


// Warp reduction of the six cell-sum terms over the lanes that bin into the same cell (NVIDIA's
// reduce_peers: __match_any_sync, then a shuffle tree). Returns true on the lowest lane of each
// group, which then holds the group's sums in s[0..6]: fixed-point terms when `fixed` (the cells
// pass p.fixed), else f64 (the moments' profile runs, already on their grid). All 32 lanes must
// call it.
__device__ __forceinline__ bool mpc_warp_reduce_cell(const MpcParams &p, bool fixed, bool valid, unsigned int cell,
                                                     double m, double v0, double v1, double v2, double s[6]) {
    const unsigned int full = 0xffffffffu;
    unsigned int key = valid ? cell : 0xffffffffu;
    unsigned int peers = __match_any_sync(full, key);
    unsigned int lane = threadIdx.x & 31;
    unsigned int below = peers & ((1u << lane) - 1u);
    bool leader = below == 0;
    unsigned int rel = __popc(below);
    unsigned int up = lane == 31 ? 0u : (peers & ~((2u << lane) - 1u));
    double momentum = p.fix_scale[MPC_FIX_MOMENTUM];
    double s0 = mpc_term_as(fixed, momentum, m * v0), s1 = mpc_term_as(fixed, momentum, m * v1);
    double s2 = mpc_term_as(fixed, momentum, m * v2), s3 = m;
    double s4 = mpc_term_as(fixed, p.fix_scale[MPC_FIX_ENERGY], m * (v0 * v0 + v1 * v1 + v2 * v2));
    double s5 = fixed ? __longlong_as_double(1ll) : 1.0;
    while (__any_sync(full, up != 0)) {
        int next = __ffs(up);
        int src = next ? next - 1 : (int)lane;
        double t0 = __shfl_sync(full, s0, src);
        double t1 = __shfl_sync(full, s1, src);
        double t2 = __shfl_sync(full, s2, src);
        double t4 = __shfl_sync(full, s4, src);
        double t5 = __shfl_sync(full, s5, src);
        if (next) {
            s0 = mpc_add_as(fixed, s0, t0);
            s1 = mpc_add_as(fixed, s1, t1);
            s2 = mpc_add_as(fixed, s2, t2);
            s4 = mpc_add_as(fixed, s4, t4);
            s5 = mpc_add_as(fixed, s5, t5);
        }
        unsigned int done = __ballot_sync(full, rel & 1u);
        up &= ~done;
        rel >>= 1;
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    s[4] = s4;
    s[5] = s5;
    return valid && leader;
}

// Warp-aggregated cell sums: one lane per cell and warp does the six global atomics.
__device__ __forceinline__ void mpc_add_to_cell_warp(const MpcParams &p, double *cells, bool valid,
                                                     unsigned int cell, double m, double v0, double v1, double v2) {
    double s[6];
    if (mpc_warp_reduce_cell(p, p.fixed, valid, cell, m, v0, v1, v2, s)) {
        double *c = cells + (size_t)cell * MPC_CELL_STRIDE;
        mpc_term_atomic(p, c + 0, s[0]);
        mpc_term_atomic(p, c + 1, s[1]);
        mpc_term_atomic(p, c + 2, s[2]);
        mpc_term_atomic(p, c + 4, s[4]);
        mpc_term_atomic(p, c + MPC_SUM_FLUID_COUNT, s[5]);
    }
}

// Block-aggregated cell sums (partial cell lists in shared memory, as sums): warp
// groups are reduced first, then each group leader adds into a per-block hash table of cells in
// shared memory (atomicCAS on the key, linear probing), and the block flushes one set of six
// global atomics per distinct cell. The hash is geometry aware: low x bits, then z and y parity
// bits, so the cells one block touches (a run along x in one or two rows, ±1 in y and z after
// the grid shift) land in distinct slots. Every thread of the block must call it.
#define MPC_HASH_SLOTS 512
#define MPC_EMPTY_KEY 0xffffffffu
__device__ __forceinline__ unsigned int mpc_cell_hash(const MpcParams &p, unsigned int cell) {
    unsigned int ix = cell % p.cells[0];
    unsigned int rest = cell / p.cells[0];
    unsigned int iz = rest % p.cells[2];
    unsigned int iy = rest / p.cells[2];
    return ((ix & 63u) | ((iz & 1u) << 6) | ((iy & 3u) << 7)) & (MPC_HASH_SLOTS - 1);
}

__device__ __forceinline__ void mpc_add_to_cell_block(const MpcParams &p, double *cells, bool valid,
                                                      unsigned int cell, double m, double v0, double v1, double v2) {
    __shared__ unsigned int keys[MPC_HASH_SLOTS];
    __shared__ double vals[6 * MPC_HASH_SLOTS];
    for (unsigned int k = threadIdx.x; k < MPC_HASH_SLOTS; k += blockDim.x) {
        keys[k] = MPC_EMPTY_KEY;
    }
    for (unsigned int k = threadIdx.x; k < 6 * MPC_HASH_SLOTS; k += blockDim.x) {
        vals[k] = 0.0;
    }
    __syncthreads();
    double s[6];
    if (mpc_warp_reduce_cell(p, p.fixed, valid, cell, m, v0, v1, v2, s)) {
        unsigned int slot = mpc_cell_hash(p, cell);
        for (;;) {
            unsigned int prev = atomicCAS(keys + slot, MPC_EMPTY_KEY, cell);
            if (prev == MPC_EMPTY_KEY || prev == cell) {
                break;
            }
            slot = (slot + 1) & (MPC_HASH_SLOTS - 1);
        }
#pragma unroll
        for (int k = 0; k < 6; ++k) {
            if (k != 3) {
                mpc_term_atomic(p, vals + 6 * slot + k, s[k]);
            }
        }
    }
    __syncthreads();
    for (unsigned int k = threadIdx.x; k < MPC_HASH_SLOTS; k += blockDim.x) {
        unsigned int c = keys[k];
        if (c != MPC_EMPTY_KEY) {
            double *g = cells + (size_t)c * MPC_CELL_STRIDE;
#pragma unroll
            for (int j = 0; j < 6; ++j) {
                if (j != 3) {
                    mpc_term_atomic(p, g + j, vals[6 * k + j]);
                }
            }
        }
    }
}

// The common end of the warp-aggregated pass-1 kernels: every lane (valid or not, for the
// warp and block collectives) adds its contribution to its cell, then the block's kinetic stress.
// BLOCK selects the shared-memory aggregation at compile time: its 27 KB of static shared memory
// would otherwise be reserved by the warp kernels too and halve their occupancy.
template <bool BLOCK>
__device__ __forceinline__ void mpc_sum_and_report(const MpcParams &p, double *cells, bool valid, unsigned int cell,
                                                   const double wv[3], double kin, double *report) {
    if (BLOCK) {
        mpc_add_to_cell_block(p, cells, valid, cell, p.mass, wv[0], wv[1], wv[2]);
    } else {
        mpc_add_to_cell_warp(p, cells, valid, cell, p.mass, wv[0], wv[1], wv[2]);
    }
    if (p.measure_stress) {
        mpc_block_add(mpc_global_term(p, MPC_GLOBAL_ENERGY, kin), report + 2, MPC_REPORT_WORDS);
    }
}
