// Kernels of the CUDA backend (src/backend/cuda). The host prepends rng.cuh and mpc.cuh and
// compiles this with NVRTC (--fmad=false, -DMPCBOX_NVRTC) once per process.
//
// One step with the default "atomics" cell-sum method:
//   memset(cells) -> mpc_stream_bin_atomic (stream, bin, f64 atomicAdd of the cell sums)
//   -> [mpc_solute_bin] -> mpc_cell_params (in place: sums -> parameters)
//   -> mpc_collide -> [mpc_solute_collide] -> [reorder: count, scan, scatter, sort, gather].
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

// Sum x over the block and add the result to *target (one atomic per block). Every thread of
// the block must call it.
__device__ void mpc_block_add(double x, double *target) {
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
            atomicAdd(target, y);
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

__device__ __forceinline__ void mpc_add_to_cell(double *cells, unsigned int cell, double m, double v0, double v1,
                                                double v2) {
    double *c = cells + (size_t)cell * MPC_CELL_STRIDE;
    atomicAdd(c + 0, m * v0);
    atomicAdd(c + 1, m * v1);
    atomicAdd(c + 2, m * v2);
    atomicAdd(c + 4, m * (v0 * v0 + v1 * v1 + v2 * v2));
    atomicAdd(c + MPC_SUM_FLUID_COUNT, 1.0);
}

__device__ __forceinline__ void mpc_add_solute_to_cell(double *cells, unsigned int cell, double m, double v0,
                                                       double v1, double v2) {
    double *c = cells + (size_t)cell * MPC_CELL_STRIDE;
    atomicAdd(c + 0, m * v0);
    atomicAdd(c + 1, m * v1);
    atomicAdd(c + 2, m * v2);
    atomicAdd(c + MPC_SUM_SOLUTE_MASS, m);
    atomicAdd(c + 4, m * (v0 * v0 + v1 * v1 + v2 * v2));
    atomicAdd(c + MPC_SUM_SOLUTE_COUNT, 1.0);
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

// Slab mode: where particles that leave this GPU's layers go. Passed by value to the pass-1
// kernels; unused (zero) on one GPU.
#define MPC_RECORD_WORDS 5
struct MpcMigration {
    unsigned long long *send[2];  // to the lower / upper neighbour, MPC_RECORD_WORDS u64 each
    unsigned int *counters;      // [sent down, sent up, free-slot stack top, overflow flags]
    unsigned int *holes;         // stack of free particle slots
    const unsigned int *ids;     // global particle ids
    unsigned int send_capacity;
    unsigned int pad;
};

// Reserve one slot of counter *c for each calling lane: the lanes that call together with the
// same key take consecutive slots with one atomic (emigrants are clustered near the slab
// borders, so per-lane atomics on the same three counters would serialise).
__device__ __forceinline__ unsigned int mpc_warp_reserve(unsigned int *c, unsigned int key) {
    unsigned int active = __activemask();
    unsigned int peers = __match_any_sync(active, key);
    unsigned int lane = threadIdx.x & 31;
    int leader = __ffs(peers) - 1;
    unsigned int base = 0;
    if ((int)lane == leader) {
        base = atomicAdd(c, (unsigned int)__popc(peers));
    }
    base = __shfl_sync(peers, base, leader);
    return base + __popc(peers & ((1u << lane) - 1u));
}

// The side (0 down, 1 up) on which global cell gc lies, outside this slab: the nearer one,
// periodically in y.
__device__ __forceinline__ unsigned int mpc_emigration_side(const MpcParams &p, unsigned int gc) {
    unsigned int layer = p.cells[0] * p.cells[2];
    unsigned int iy = gc / layer;
    unsigned int lo = p.cell_offset / layer;
    unsigned int hi = lo + p.n_cells / layer;
    unsigned int ly = p.cells[1];
    unsigned int down, up;  // layers to cross going down / up
    if (iy < lo) {
        down = lo - iy;
        up = iy + ly - hi + 1;
    } else {
        up = iy - hi + 1;
        down = lo + ly - iy;
    }
    return down <= up ? 0u : 1u;
}

// Pack particle i (position x, y, z, velocity v) for the neighbour on side `side` and push its
// slot onto the free-slot stack. Not inlined, with scalar arguments: the rare path must not
// cost the pass-1 kernels registers or local memory.
__device__ __noinline__ void mpc_emigrate(unsigned long long *send, unsigned int *counters, unsigned int *holes,
                                          unsigned int id, unsigned int capacity, unsigned int side,
                                          unsigned int i, float x, float y, float z, double v0, double v1,
                                          double v2) {
    unsigned int slot = mpc_warp_reserve(counters + side, side);
    if (slot < capacity) {
        unsigned long long *r = send + (size_t)slot * MPC_RECORD_WORDS;
        r[0] = (unsigned long long)__double_as_longlong(v0);
        r[1] = (unsigned long long)__double_as_longlong(v1);
        r[2] = (unsigned long long)__double_as_longlong(v2);
        r[3] = (unsigned long long)__float_as_uint(x) | ((unsigned long long)__float_as_uint(y) << 32);
        r[4] = (unsigned long long)__float_as_uint(z) | ((unsigned long long)id << 32);
    } else {
        atomicOr(counters + 3, 1u);
    }
    holes[mpc_warp_reserve(counters + 2, 0u)] = i;
}

// The common part of every pass-1 kernel: particle i, with position pos and velocity v (as
// loaded, or just collided by the fused kernel), is streamed, stored back and binned on the
// shifted grid; its cell word goes to cellw[i]. *kin gets its kinetic stress when measured, wv
// the velocity (LE image offset included) it adds to its cell. In slab mode a particle whose
// cell another GPU owns emigrates; then *stays is false. loc.cell is the local cell.
__device__ __forceinline__ MpcLocation mpc_stream_store_bin(const MpcParams &p, const MpcMigration &m,
                                                            unsigned int i, float pos[3], double v[3],
                                                            float *__restrict__ px, float *__restrict__ py,
                                                            float *__restrict__ pz, double *__restrict__ vx,
                                                            double *__restrict__ vy, double *__restrict__ vz,
                                                            unsigned int *__restrict__ cellw, double *kin,
                                                            double wv[3], bool *stays) {
    if (p.measure_stress) {
        *kin = mpc_kinetic_stress(p, (double)pos[1], v);
    }
    mpc_stream(p, pos, v);
    px[i] = pos[0];
    py[i] = pos[1];
    pz[i] = pos[2];
    vx[i] = v[0];
    vy[i] = v[1];
    vz[i] = v[2];
    MpcLocation loc = mpc_locate(p, (double)pos[0], (double)pos[1], (double)pos[2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    *stays = c != MPC_DEAD;
    if (!*stays) {
        unsigned int side = mpc_emigration_side(p, loc.cell);
        mpc_emigrate(side ? m.send[1] : m.send[0], m.counters, m.holes, m.ids[i], m.send_capacity, side, i, pos[0], pos[1], pos[2],
                     v[0], v[1], v[2]);
        cellw[i] = MPC_DEAD;
        return loc;
    }
    loc.cell = c;
    cellw[i] = mpc_pack_cell(c, loc.image);
    wv[0] = v[0] + mpc_image_velocity(p, loc.image);
    wv[1] = v[1];
    wv[2] = v[2];
    return loc;
}

// Whether slot i holds a particle (always below n_fluid on one GPU; slab mode has free slots).
__device__ __forceinline__ bool mpc_live(const MpcParams &p, const unsigned int *cellw, unsigned int i) {
    return i < p.n_fluid && !(p.slab && cellw[i] == MPC_DEAD);
}

// Pass 1 (atomics method): stream each fluid particle, bin it on the shifted grid, store its
// cell word, add it to its cell's sums. report[2] += kinetic stress when measured.
extern "C" __global__ void mpc_stream_bin_atomic(MpcParams p, float *__restrict__ px, float *__restrict__ py,
                                                 float *__restrict__ pz, double *__restrict__ vx,
                                                 double *__restrict__ vy, double *__restrict__ vz,
                                                 unsigned int *__restrict__ cellw, double *cells, double *report,
                                                 MpcMigration m) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double kin = 0.0;
    if (mpc_live(p, cellw, i)) {
        float pos[3] = {px[i], py[i], pz[i]};
        double v[3] = {vx[i], vy[i], vz[i]};
        double wv[3];
        bool stays;
        MpcLocation loc = mpc_stream_store_bin(p, m, i, pos, v, px, py, pz, vx, vy, vz, cellw, &kin, wv, &stays);
        if (stays) {
            mpc_add_to_cell(cells, loc.cell, p.mass, wv[0], wv[1], wv[2]);
        }
    }
    if (p.measure_stress) {
        mpc_block_add(kin, report + 2);
    }
}

// Warp reduction of the six cell-sum terms over the lanes that bin into the same cell (NVIDIA's
// reduce_peers: __match_any_sync, then a shuffle tree). Returns true on the lowest lane of each
// group, which then holds the group's sums in s[0..6]. All 32 lanes must call it.
__device__ __forceinline__ bool mpc_warp_reduce_cell(bool valid, unsigned int cell, double m, double v0, double v1,
                                                     double v2, double s[6]) {
    const unsigned int full = 0xffffffffu;
    unsigned int key = valid ? cell : 0xffffffffu;
    unsigned int peers = __match_any_sync(full, key);
    unsigned int lane = threadIdx.x & 31;
    unsigned int below = peers & ((1u << lane) - 1u);
    bool leader = below == 0;
    unsigned int rel = __popc(below);
    unsigned int up = lane == 31 ? 0u : (peers & ~((2u << lane) - 1u));
    double s0 = m * v0, s1 = m * v1, s2 = m * v2, s3 = m;
    double s4 = m * (v0 * v0 + v1 * v1 + v2 * v2), s5 = 1.0;
    while (__any_sync(full, up != 0)) {
        int next = __ffs(up);
        int src = next ? next - 1 : (int)lane;
        double t0 = __shfl_sync(full, s0, src);
        double t1 = __shfl_sync(full, s1, src);
        double t2 = __shfl_sync(full, s2, src);
        double t4 = __shfl_sync(full, s4, src);
        double t5 = __shfl_sync(full, s5, src);
        if (next) {
            s0 += t0;
            s1 += t1;
            s2 += t2;
            s4 += t4;
            s5 += t5;
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
__device__ __forceinline__ void mpc_add_to_cell_warp(double *cells, bool valid, unsigned int cell, double m,
                                                     double v0, double v1, double v2) {
    double s[6];
    if (mpc_warp_reduce_cell(valid, cell, m, v0, v1, v2, s)) {
        double *c = cells + (size_t)cell * MPC_CELL_STRIDE;
        atomicAdd(c + 0, s[0]);
        atomicAdd(c + 1, s[1]);
        atomicAdd(c + 2, s[2]);
        atomicAdd(c + 4, s[4]);
        atomicAdd(c + MPC_SUM_FLUID_COUNT, s[5]);
    }
}

// Block-aggregated cell sums (talk 003's partial cell lists in shared memory, as sums): warp
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
    if (mpc_warp_reduce_cell(valid, cell, m, v0, v1, v2, s)) {
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
                atomicAdd(vals + 6 * slot + k, s[k]);
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
                    atomicAdd(g + j, vals[6 * k + j]);
                }
            }
        }
    }
}

// The common end of the warp-aggregated pass-1 kernels: every lane (valid or not, for the
// warp and block collectives) adds its contribution to its cell, then the block's kinetic stress.
__device__ __forceinline__ void mpc_sum_and_report(const MpcParams &p, double *cells, bool valid, unsigned int cell,
                                                   const double wv[3], unsigned int agg, double kin,
                                                   double *report) {
    if (agg) {
        mpc_add_to_cell_block(p, cells, valid, cell, p.mass, wv[0], wv[1], wv[2]);
    } else {
        mpc_add_to_cell_warp(cells, valid, cell, p.mass, wv[0], wv[1], wv[2]);
    }
    if (p.measure_stress) {
        mpc_block_add(kin, report + 2);
    }
}

// Pass 1, "warp" method: as mpc_stream_bin_atomic with warp-aggregated atomics.
// agg = 0: warp aggregation; 1: warp + block (shared-memory hash) aggregation.
extern "C" __global__ void mpc_stream_bin_warp(MpcParams p, float *__restrict__ px, float *__restrict__ py,
                                               float *__restrict__ pz, double *__restrict__ vx,
                                               double *__restrict__ vy, double *__restrict__ vz,
                                               unsigned int *__restrict__ cellw, double *cells, double *report,
                                               unsigned int agg, MpcMigration m) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double kin = 0.0;
    bool valid = mpc_live(p, cellw, i);
    unsigned int cell = 0;
    double wv[3] = {0.0, 0.0, 0.0};
    if (valid) {
        float pos[3] = {px[i], py[i], pz[i]};
        double v[3] = {vx[i], vy[i], vz[i]};
        MpcLocation loc = mpc_stream_store_bin(p, m, i, pos, v, px, py, pz, vx, vy, vz, cellw, &kin, wv, &valid);
        cell = loc.cell;
    }
    mpc_sum_and_report(p, cells, valid, cell, wv, agg, kin, report);
}

// "fused" method: the collision of step n (params pc, cell parameters in cells_prev) and the
// streaming + binning + warp-aggregated sums of step n+1 (params p, sums into cells_next) in one
// pass over the particles. Only used when step n's collisional stress is not measured.
extern "C" __global__ void mpc_collide_stream_bin(MpcParams pc, MpcParams p, float *__restrict__ px,
                                                  float *__restrict__ py, float *__restrict__ pz,
                                                  double *__restrict__ vx, double *__restrict__ vy,
                                                  double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                  const double *__restrict__ cells_prev, double *cells_next,
                                                  double *report, unsigned int agg, MpcMigration m) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double kin = 0.0;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    bool valid = w != MPC_DEAD;
    unsigned int cell = 0;
    double wv[3] = {0.0, 0.0, 0.0};
    if (valid) {
        double cp[8];
        mpc_load_params(cells_prev, mpc_cell_of(w), cp);
        float pos[3] = {px[i], py[i], pz[i]};
        double v0[3] = {vx[i], vy[i], vz[i]};
        double v[3];
        mpc_collide(pc, cp, mpc_image_of(w), v0, v);
        MpcLocation loc = mpc_stream_store_bin(p, m, i, pos, v, px, py, pz, vx, vy, vz, cellw, &kin, wv, &valid);
        cell = loc.cell;
    }
    mpc_sum_and_report(p, cells_next, valid, cell, wv, agg, kin, report);
}

// Pass 1 without the sums (list method): stream, bin, store the cell word and push the particle
// onto its cell's linked list (head[cell], next[i]).
extern "C" __global__ void mpc_stream_bin_list(MpcParams p, float *__restrict__ px, float *__restrict__ py,
                                               float *__restrict__ pz, double *__restrict__ vx,
                                               double *__restrict__ vy, double *__restrict__ vz,
                                               unsigned int *__restrict__ cellw, unsigned int *head,
                                               unsigned int *__restrict__ next, double *report) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double kin = 0.0;
    if (i < p.n_fluid) {
        float pos[3] = {px[i], py[i], pz[i]};
        double v[3] = {vx[i], vy[i], vz[i]};
        double wv[3];
        bool stays;  // one GPU only: every particle stays
        MpcMigration none = {};
        MpcLocation loc = mpc_stream_store_bin(p, none, i, pos, v, px, py, pz, vx, vy, vz, cellw, &kin, wv, &stays);
        next[i] = atomicExch(head + loc.cell, i);
    }
    if (p.measure_stress) {
        mpc_block_add(kin, report + 2);
    }
}

// List method, per cell: walk the cell's list summing its fluid particles into cells[c*8..].
// Solutes are added afterwards by mpc_solute_bin (atomics); cells must be zeroed before.
extern "C" __global__ void mpc_list_sums(MpcParams p, const unsigned int *__restrict__ head,
                                         const unsigned int *__restrict__ next, const double *__restrict__ vx,
                                         const double *__restrict__ vy, const double *__restrict__ vz,
                                         const unsigned int *__restrict__ cellw, double *cells) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= p.n_cells) {
        return;
    }
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s4 = 0.0, sn = 0.0;
    double m = p.mass;
    unsigned int j = head[c];
    while (j != 0xffffffffu) {
        int image = mpc_image_of(__ldg(cellw + j));
        double v0 = __ldg(vx + j) + mpc_image_velocity(p, image);
        double v1 = __ldg(vy + j);
        double v2 = __ldg(vz + j);
        s0 += m * v0;
        s1 += m * v1;
        s2 += m * v2;
        s4 += m * (v0 * v0 + v1 * v1 + v2 * v2);
        sn += 1.0;
        j = __ldg(next + j);
    }
    double *o = cells + (size_t)c * MPC_CELL_STRIDE;
    o[0] = s0;
    o[1] = s1;
    o[2] = s2;
    o[MPC_SUM_SOLUTE_MASS] = 0.0;
    o[4] = s4;
    o[MPC_SUM_FLUID_COUNT] = sn;
    o[MPC_SUM_SOLUTE_COUNT] = 0.0;
}

// Solutes: bin on the shifted grid (f64 positions, anywhere: wrapped through Lees-Edwards
// periods) and add to the cell sums. The cell goes to scell, the image (any number of periods)
// to simage.
extern "C" __global__ void mpc_solute_bin(MpcParams p, const double *__restrict__ spos,
                                          const double *__restrict__ svel, const double *__restrict__ smass,
                                          unsigned int *__restrict__ scell, int *__restrict__ simage,
                                          double *cells) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_solutes) {
        return;
    }
    MpcLocation loc = mpc_locate_solute(p, spos[3 * i], spos[3 * i + 1], spos[3 * i + 2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    scell[i] = c;
    simage[i] = loc.image;
    if (c == MPC_DEAD) {  // slab mode: another GPU owns this solute's cell
        return;
    }
    loc.cell = c;
    double w0 = svel[3 * i] + mpc_image_velocity(p, loc.image);
    mpc_add_solute_to_cell(cells, loc.cell, smass[i], w0, svel[3 * i + 1], svel[3 * i + 2]);
}

// Pass 3, one thread per cell: sums -> collision parameters, in place.
// report[0] += relative energy, report[1] += (Nc - 1) over cells with Nc >= 2.
extern "C" __global__ void mpc_cell_params(MpcParams p, double *cells, double *report) {
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
        double out[8];
        mpc_cell_params(p, c + p.cell_offset, s, out);  // draws keyed by the global cell
        double2 *o2 = (double2 *)o;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            o2[k] = make_double2(out[2 * k], out[2 * k + 1]);
        }
    }
    mpc_block_add(e_rel, report + 0);
    mpc_block_add(dof, report + 1);
}

// Pass 4, one thread per fluid particle: collide. report[3] += collisional stress when measured.
extern "C" __global__ void mpc_collide(MpcParams p, const float *__restrict__ px, const float *__restrict__ py,
                                       const float *__restrict__ pz, double *__restrict__ vx,
                                       double *__restrict__ vy, double *__restrict__ vz,
                                       const unsigned int *__restrict__ cellw, const double *__restrict__ cells,
                                       double *report) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double coll = 0.0;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    if (w != MPC_DEAD) {
        double cp[8];
        mpc_load_params(cells, mpc_cell_of(w), cp);
        double v[3] = {vx[i], vy[i], vz[i]};
        double u[3];
        mpc_collide(p, cp, mpc_image_of(w), v, u);
        if (p.measure_stress && cp[7] != 0.0) {
            MpcLocation loc = mpc_locate(p, (double)px[i], (double)py[i], (double)pz[i]);
            coll = p.mass * (u[0] - v[0]) * loc.y_in_cell;
        }
        vx[i] = u[0];
        vy[i] = u[1];
        vz[i] = u[2];
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3);
    }
}

extern "C" __global__ void mpc_solute_collide(MpcParams p, const unsigned int *__restrict__ scell,
                                              const int *__restrict__ simage, const double *__restrict__ cells,
                                              double *__restrict__ svel) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_solutes) {
        return;
    }
    unsigned int c = scell[i];
    if (c == MPC_DEAD) {
        // slab mode: the owning GPU writes this solute; the host adds the GPUs' outputs
        svel[3 * i] = 0.0;
        svel[3 * i + 1] = 0.0;
        svel[3 * i + 2] = 0.0;
        return;
    }
    double cp[8];
    mpc_load_params(cells, c, cp);
    double v[3] = {svel[3 * i], svel[3 * i + 1], svel[3 * i + 2]};
    double u[3];
    mpc_collide(p, cp, simage[i], v, u);
    svel[3 * i] = u[0];
    svel[3 * i + 1] = u[1];
    svel[3 * i + 2] = u[2];
}

// Slab mode: unpack `count` particles received from a neighbour (records as in mpc_emigrate).
// Arrival j = first + k fills free slot holes[hole_top - 1 - j] while j < fill, then appends
// at n_old + (j - fill). Each is binned with the step's plan and added to the cell sums; one
// whose cell this GPU does not own (it crossed more than a neighbour's slab) sets flag 2.
extern "C" __global__ void mpc_immigrate(MpcParams p, const unsigned long long *__restrict__ recv, unsigned int count,
                                         unsigned int first, unsigned int fill, unsigned int hole_top,
                                         unsigned int n_old, float *__restrict__ px, float *__restrict__ py,
                                         float *__restrict__ pz, double *__restrict__ vx, double *__restrict__ vy,
                                         double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                         unsigned int *__restrict__ ids, const unsigned int *__restrict__ holes,
                                         double *cells, unsigned int *counters) {
    unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) {
        return;
    }
    unsigned int j = first + k;
    unsigned int slot = j < fill ? holes[hole_top - 1 - j] : n_old + (j - fill);
    const unsigned long long *r = recv + (size_t)k * MPC_RECORD_WORDS;
    double v[3] = {__longlong_as_double((long long)r[0]), __longlong_as_double((long long)r[1]),
                   __longlong_as_double((long long)r[2])};
    float pos[3] = {__uint_as_float((unsigned int)r[3]), __uint_as_float((unsigned int)(r[3] >> 32)),
                    __uint_as_float((unsigned int)r[4])};
    px[slot] = pos[0];
    py[slot] = pos[1];
    pz[slot] = pos[2];
    vx[slot] = v[0];
    vy[slot] = v[1];
    vz[slot] = v[2];
    ids[slot] = (unsigned int)(r[4] >> 32);
    MpcLocation loc = mpc_locate(p, (double)pos[0], (double)pos[1], (double)pos[2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    if (c == MPC_DEAD) {
        atomicOr(counters + 3, 2u);
        c = 0;
    }
    cellw[slot] = mpc_pack_cell(c, loc.image);
    mpc_add_to_cell(cells, c, p.mass, v[0] + mpc_image_velocity(p, loc.image), v[1], v[2]);
}

// Moments: out[0..3] += m v, out[3] += 1/2 m v^2; vx(y) profile over Ly bins. With
// use_shared the bins are first summed in dynamic shared memory (Ly doubles + Ly u64).
extern "C" __global__ void mpc_moments(MpcParams p, const float *__restrict__ py, const double *__restrict__ vx,
                                       const double *__restrict__ vy, const double *__restrict__ vz,
                                       const unsigned int *__restrict__ cellw, double *out,
                                       double *prof_sum, unsigned long long *prof_cnt, unsigned int use_shared) {
    extern __shared__ double smem[];
    unsigned int ly = p.cells[1];
    double *ssum = smem;
    unsigned long long *scnt = (unsigned long long *)(smem + ly);
    if (use_shared) {
        for (unsigned int b = threadIdx.x; b < ly; b += blockDim.x) {
            ssum[b] = 0.0;
            scnt[b] = 0;
        }
        __syncthreads();
    }
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    if (mpc_live(p, cellw, i)) {
        double m = p.mass;
        double v0 = vx[i], v1 = vy[i], v2 = vz[i];
        s0 = m * v0;
        s1 = m * v1;
        s2 = m * v2;
        s3 = 0.5 * m * (v0 * v0 + v1 * v1 + v2 * v2);
        unsigned int b = (unsigned int)py[i];
        if (b > ly - 1) {
            b = ly - 1;
        }
        if (use_shared) {
            atomicAdd(ssum + b, v0);
            atomicAdd(scnt + b, 1ull);
        } else {
            atomicAdd(prof_sum + b, v0);
            atomicAdd(prof_cnt + b, 1ull);
        }
    }
    mpc_block_add(s0, out + 0);
    mpc_block_add(s1, out + 1);
    mpc_block_add(s2, out + 2);
    mpc_block_add(s3, out + 3);
    if (use_shared) {
        for (unsigned int b = threadIdx.x; b < ly; b += blockDim.x) {
            if (scnt[b] != 0) {
                atomicAdd(prof_sum + b, ssum[b]);
                atomicAdd(prof_cnt + b, scnt[b]);
            }
        }
    }
}

// ---- reorder by cell: counting sort ----

// The reorder key of a slot: its cell; free slots (slab mode) sort last, into bin ncells.
__device__ __forceinline__ unsigned int mpc_sort_key(unsigned int w, unsigned int ncells) {
    return w == MPC_DEAD ? ncells : mpc_cell_of(w);
}

// Counts per cell, one atomic per group of warp lanes with the same cell (all lanes call).
extern "C" __global__ void mpc_count_cells(const unsigned int *__restrict__ cellw, unsigned int *counts,
                                           unsigned int n, unsigned int ncells) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int key = i < n ? mpc_sort_key(cellw[i], ncells) : 0xffffffffu;
    unsigned int peers = __match_any_sync(0xffffffffu, key);
    unsigned int lane = threadIdx.x & 31;
    if (i < n && (peers & ((1u << lane) - 1u)) == 0) {
        atomicAdd(counts + key, (unsigned int)__popc(peers));
    }
}

// Scan, step 1: thread t sums its chunk [t*chunk, (t+1)*chunk) into partial[t].
extern "C" __global__ void mpc_scan_chunk_sums(const unsigned int *__restrict__ in, unsigned int *partial,
                                               unsigned int n, unsigned int chunk, unsigned int nchunks) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nchunks) {
        return;
    }
    unsigned long long lo = (unsigned long long)t * chunk;
    unsigned long long hi = lo + chunk;
    if (hi > n) {
        hi = n;
    }
    unsigned int s = 0;
    for (unsigned long long k = lo; k < hi; ++k) {
        s += in[k];
    }
    partial[t] = s;
}

// Scan, step 2: exclusive scan of partial[0..nchunks) by one block of 1024 threads.
extern "C" __global__ void mpc_scan_partials(unsigned int *partial, unsigned int nchunks) {
    __shared__ unsigned int tot[1024];
    unsigned int per = (nchunks + 1023) / 1024;
    unsigned int lo = threadIdx.x * per;
    unsigned int hi = lo + per < nchunks ? lo + per : nchunks;
    unsigned int s = 0;
    for (unsigned int k = lo; k < hi; ++k) {
        s += partial[k];
    }
    tot[threadIdx.x] = s;
    __syncthreads();
    // Hillis-Steele inclusive scan of tot
    for (unsigned int o = 1; o < 1024; o <<= 1) {
        unsigned int add = threadIdx.x >= o ? tot[threadIdx.x - o] : 0;
        __syncthreads();
        tot[threadIdx.x] += add;
        __syncthreads();
    }
    unsigned int run = tot[threadIdx.x] - s;
    for (unsigned int k = lo; k < hi; ++k) {
        unsigned int x = partial[k];
        partial[k] = run;
        run += x;
    }
}

// Scan, step 3: exclusive scan of each chunk in place, offset by its partial.
extern "C" __global__ void mpc_scan_apply(unsigned int *inout, const unsigned int *__restrict__ partial,
                                          unsigned int n, unsigned int chunk, unsigned int nchunks) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nchunks) {
        return;
    }
    unsigned long long lo = (unsigned long long)t * chunk;
    unsigned long long hi = lo + chunk;
    if (hi > n) {
        hi = n;
    }
    unsigned int run = partial[t];
    for (unsigned long long k = lo; k < hi; ++k) {
        unsigned int x = inout[k];
        inout[k] = run;
        run += x;
    }
}

// Scatter particle indices to their cell's segment; afterwards cursor[c] is the end of cell c.
// (warp-aggregated: the lowest lane of each same-cell group reserves the group's slots)
extern "C" __global__ void mpc_scatter(const unsigned int *__restrict__ cellw, unsigned int *cursor,
                                       unsigned int *__restrict__ perm, unsigned int n, unsigned int ncells) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int key = i < n ? mpc_sort_key(cellw[i], ncells) : 0xffffffffu;
    unsigned int peers = __match_any_sync(0xffffffffu, key);
    unsigned int lane = threadIdx.x & 31;
    unsigned int below = peers & ((1u << lane) - 1u);
    unsigned int leader = __ffs(peers) - 1;
    unsigned int base = 0;
    if (i < n && below == 0) {
        base = atomicAdd(cursor + key, (unsigned int)__popc(peers));
    }
    base = __shfl_sync(0xffffffffu, base, leader);
    if (i < n) {
        perm[base + __popc(below)] = i;
    }
}

// Sort each cell's segment ascending (insertion sort), so the permutation is deterministic and
// equal to the CPU backend's.
extern "C" __global__ void mpc_sort_segments(const unsigned int *__restrict__ ends, unsigned int *perm,
                                             unsigned int ncells) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncells) {
        return;
    }
    unsigned int lo = c == 0 ? 0 : ends[c - 1];
    unsigned int hi = ends[c];
    for (unsigned int k = lo + 1; k < hi; ++k) {
        unsigned int x = perm[k];
        unsigned int j = k;
        while (j > lo && perm[j - 1] > x) {
            perm[j] = perm[j - 1];
            --j;
        }
        perm[j] = x;
    }
}

extern "C" __global__ void mpc_gather_f32(const unsigned int *__restrict__ perm, const float *__restrict__ src,
                                          float *__restrict__ dst, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[perm[i]];
    }
}

extern "C" __global__ void mpc_gather_f64(const unsigned int *__restrict__ perm, const double *__restrict__ src,
                                          double *__restrict__ dst, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[perm[i]];
    }
}

// ---- debug entry points for the tests ----

// Rotation axes and thermostat energies of cells[i] with counts[i] particles (energy 0 if < 2).
extern "C" __global__ void mpc_debug_cell_draws(unsigned long long seed, unsigned long long step,
                                                const unsigned int *__restrict__ cells,
                                                const unsigned int *__restrict__ counts, double kt, double *axes,
                                                double *energies, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    double a[3];
    mpc_cell_rotation_axis(seed, step, cells[i], a);
    axes[3 * i] = a[0];
    axes[3 * i + 1] = a[1];
    axes[3 * i + 2] = a[2];
    energies[i] = counts[i] >= 2 ? mpc_cell_thermostat_energy(seed, step, cells[i], counts[i], kt) : 0.0;
}

extern "C" __global__ void mpc_debug_det_ln(const double *__restrict__ x, double *y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = mpc_det_ln(x[i]);
    }
}

// Raw Philox blocks and initial particles (mirror of state::initial_particle).
extern "C" __global__ void mpc_debug_initial_particle(unsigned long long seed, double lx, double ly, double lz,
                                                      double sigma, float *pos, double *vel, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    MpcCellStream s = mpc_particle_stream(seed, i);
    pos[3 * i] = mpc_wrap_coordinate(mpc_uniform(&s) * lx, lx);
    pos[3 * i + 1] = mpc_wrap_coordinate(mpc_uniform(&s) * ly, ly);
    pos[3 * i + 2] = mpc_wrap_coordinate(mpc_uniform(&s) * lz, lz);
    vel[3 * i] = sigma * mpc_normal(&s);
    vel[3 * i + 1] = sigma * mpc_normal(&s);
    vel[3 * i + 2] = sigma * mpc_normal(&s);
}

extern "C" __global__ void mpc_fill_u32(unsigned int *dst, unsigned int value, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = value;
    }
}

// ---- initial state on the GPU (mirror of FluidState::initial, bit for bit) ----

// Positions uniform in the box and thermal velocities, each particle from its own Philox stream
// (state::initial_particle).
extern "C" __global__ void mpc_init_particles(unsigned long long seed, double lx, double ly, double lz, double sigma,
                                              float *__restrict__ px, float *__restrict__ py,
                                              float *__restrict__ pz, double *__restrict__ vx,
                                              double *__restrict__ vy, double *__restrict__ vz, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    MpcCellStream s = mpc_particle_stream(seed, i);
    px[i] = mpc_wrap_coordinate(mpc_uniform(&s) * lx, lx);
    py[i] = mpc_wrap_coordinate(mpc_uniform(&s) * ly, ly);
    pz[i] = mpc_wrap_coordinate(mpc_uniform(&s) * lz, lz);
    vx[i] = sigma * mpc_normal(&s);
    vy[i] = sigma * mpc_normal(&s);
    vz[i] = sigma * mpc_normal(&s);
}

// Per-chunk sums [sum vx, sum vy, sum vz, sum v^2/2] in the CPU's order (one thread per chunk of
// REDUCTION_CHUNK particles, sequential inside), so FluidState::mean_velocity_and_energy is
// reproduced exactly once the host adds the chunks in order.
extern "C" __global__ void mpc_chunk_sums(const double *__restrict__ vx, const double *__restrict__ vy,
                                          const double *__restrict__ vz, double *partial, unsigned int n,
                                          unsigned int chunk, unsigned int nchunks) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nchunks) {
        return;
    }
    unsigned long long lo = (unsigned long long)t * chunk;
    unsigned long long hi = lo + chunk;
    if (hi > n) {
        hi = n;
    }
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (unsigned long long i = lo; i < hi; ++i) {
        double v0 = vx[i], v1 = vy[i], v2 = vz[i];
        s0 += v0;
        s1 += v1;
        s2 += v2;
        s3 += 0.5 * (v0 * v0 + v1 * v1 + v2 * v2);
    }
    partial[4 * t] = s0;
    partial[4 * t + 1] = s1;
    partial[4 * t + 2] = s2;
    partial[4 * t + 3] = s3;
}

// v -= sub (op 0) or v *= mul (op 1).
extern "C" __global__ void mpc_shift_scale(double *v, double sub, double mul, unsigned int op, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        if (op == 0) {
            v[i] -= sub;
        } else {
            v[i] *= mul;
        }
    }
}

// The steady shear profile added to vx.
extern "C" __global__ void mpc_add_flow(MpcParams p, const float *__restrict__ py, double *vx) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n_fluid) {
        vx[i] += mpc_flow_velocity(p, (double)py[i]);
    }
}
