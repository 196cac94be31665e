// Pass 1 (src/backend/cuda/stream.rs): stream, store, bin on the shifted grid and sum into the
// cells, one kernel per cell-sum method; the "fused" kernel also applies the previous step's
// collision. One step with the "atomics" method:
//   memset(cells) -> mpc_stream_bin_atomic -> [mpc_solute_bin] -> mpc_cell_params
//   -> mpc_collide -> [mpc_solute_collide] -> [reorder: count, scan, scatter, sort, gather].
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#include "migrate.cuh"
#endif

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
#if MPC_WALLS
    // i opaque from here: the stores' addresses are computed anew, not kept (12 registers)
    // across the streaming, which spilled them where the walls' code needs the registers (the
    // kernels without walls are left as they were)
    asm("" : "+r"(i));
#endif
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
        mpc_emigrate(side ? m.send[1] : m.send[0], m.counters, m.holes, m.ids ? m.ids[i] : 0u, m.send_capacity, side, i, pos[0], pos[1], pos[2],
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
            mpc_add_to_cell(p, cells, loc.cell, p.mass, wv[0], wv[1], wv[2]);
        }
    }
    if (p.measure_stress) {
        mpc_block_add(mpc_global_term(p, MPC_GLOBAL_ENERGY, kin), report + 2, MPC_REPORT_WORDS);
    }
}

// Minimum resident blocks of 256 threads per multiprocessor for the pass-1 kernels (caps their
// registers): pass 1 waits on memory, so more warps in flight hide more latency.
#ifndef MPC_PASS1_MIN_BLOCKS
#define MPC_PASS1_MIN_BLOCKS 4
#endif
#define MPC_PASS1_BOUNDS __launch_bounds__(256, MPC_PASS1_MIN_BLOCKS)

// Pass 1, "warp" and "shared" methods: as mpc_stream_bin_atomic with warp-aggregated atomics,
// BLOCK adding the shared-memory (hash) aggregation per block.
template <bool BLOCK>
__device__ __forceinline__ void mpc_stream_bin_aggregated(MpcParams p, float *__restrict__ px,
                                                          float *__restrict__ py, float *__restrict__ pz,
                                                          double *__restrict__ vx, double *__restrict__ vy,
                                                          double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                          double *cells, double *report, MpcMigration m) {
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
    mpc_sum_and_report<BLOCK>(p, cells, valid, cell, wv, kin, report);
}

extern "C" __global__ void MPC_PASS1_BOUNDS mpc_stream_bin_warp(MpcParams p, float *__restrict__ px, float *__restrict__ py, float *__restrict__ pz,
                        double *__restrict__ vx, double *__restrict__ vy, double *__restrict__ vz,
                        unsigned int *__restrict__ cellw, double *cells, double *report, MpcMigration m) {
    mpc_stream_bin_aggregated<false>(p, px, py, pz, vx, vy, vz, cellw, cells, report, m);
}

extern "C" __global__ void mpc_stream_bin_shared(MpcParams p, float *__restrict__ px, float *__restrict__ py,
                                                 float *__restrict__ pz, double *__restrict__ vx,
                                                 double *__restrict__ vy, double *__restrict__ vz,
                                                 unsigned int *__restrict__ cellw, double *cells, double *report,
                                                 MpcMigration m) {
    mpc_stream_bin_aggregated<true>(p, px, py, pz, vx, vy, vz, cellw, cells, report, m);
}

// "fused" methods: the collision of step n (params pc, cell parameters in cells_prev) and the
// streaming + binning + aggregated sums of step n+1 (params p, sums into cells_next) in one
// pass over the particles. Only used when step n's collisional stress is not measured.
template <bool BLOCK>
__device__ __forceinline__ void mpc_collide_stream_bin_body(MpcParams pc, MpcParams p, float *__restrict__ px,
                                                            float *__restrict__ py, float *__restrict__ pz,
                                                            double *__restrict__ vx, double *__restrict__ vy,
                                                            double *__restrict__ vz,
                                                            unsigned int *__restrict__ cellw,
                                                            const double *__restrict__ cells_prev,
                                                            double *cells_next, double *report, MpcMigration m) {
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
    mpc_sum_and_report<BLOCK>(p, cells_next, valid, cell, wv, kin, report);
}

extern "C" __global__ void MPC_PASS1_BOUNDS mpc_collide_stream_bin(MpcParams pc, MpcParams p, float *__restrict__ px, float *__restrict__ py,
                           float *__restrict__ pz, double *__restrict__ vx, double *__restrict__ vy,
                           double *__restrict__ vz, unsigned int *__restrict__ cellw,
                           const double *__restrict__ cells_prev, double *cells_next, double *report,
                           MpcMigration m) {
    mpc_collide_stream_bin_body<false>(pc, p, px, py, pz, vx, vy, vz, cellw, cells_prev, cells_next, report, m);
}

extern "C" __global__ void mpc_collide_stream_bin_shared(MpcParams pc, MpcParams p, float *__restrict__ px,
                                                         float *__restrict__ py, float *__restrict__ pz,
                                                         double *__restrict__ vx, double *__restrict__ vy,
                                                         double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                                         const double *__restrict__ cells_prev,
                                                         double *cells_next, double *report, MpcMigration m) {
    mpc_collide_stream_bin_body<true>(pc, p, px, py, pz, vx, vy, vz, cellw, cells_prev, cells_next, report, m);
}

// List method: every cell's list head set to the empty list (value 0xffffffff) before pass 1.
extern "C" __global__ void mpc_fill_u32(unsigned int *dst, unsigned int value, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = value;
    }
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
        mpc_block_add(mpc_global_term(p, MPC_GLOBAL_ENERGY, kin), report + 2, MPC_REPORT_WORDS);
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
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s4 = 0.0;  // zero bits: 0 in either arithmetic
    unsigned int sn = 0;
    double m = p.mass;
    unsigned int j = head[c];
    while (j != 0xffffffffu) {
        int image = mpc_image_of(__ldg(cellw + j));
        double v0 = __ldg(vx + j) + mpc_image_velocity(p, image);
        double v1 = __ldg(vy + j);
        double v2 = __ldg(vz + j);
        s0 = mpc_term_add(p, s0, mpc_term(p, MPC_FIX_MOMENTUM, m * v0));
        s1 = mpc_term_add(p, s1, mpc_term(p, MPC_FIX_MOMENTUM, m * v1));
        s2 = mpc_term_add(p, s2, mpc_term(p, MPC_FIX_MOMENTUM, m * v2));
        s4 = mpc_term_add(p, s4, mpc_term(p, MPC_FIX_ENERGY, m * (v0 * v0 + v1 * v1 + v2 * v2)));
        sn += 1;
        j = __ldg(next + j);
    }
    double *o = cells + (size_t)c * MPC_CELL_STRIDE;
    o[0] = s0;
    o[1] = s1;
    o[2] = s2;
    o[MPC_SUM_SOLUTE_MASS] = 0.0;
    o[4] = s4;
    o[MPC_SUM_FLUID_COUNT] = mpc_count_term(p, sn);
    o[MPC_SUM_SOLUTE_COUNT] = 0.0;
}
