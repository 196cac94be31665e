// Slab mode of several GPUs (src/backend/cuda/multi/migrate.rs): the migration arguments of the pass-1
// kernels and the packing of emigrants (the rare path, not inlined).
#pragma once
#ifndef MPCBOX_NVRTC
#include "mpc.cuh"
#endif

// Slab mode: where particles that leave this GPU's layers go. Passed by value to the pass-1
// kernels; unused (zero) on one GPU. MPC_RECORD_WORDS: from the generated header.
struct MpcMigration {
    unsigned long long *send[2];  // to the lower / upper neighbour, MPC_RECORD_WORDS u64 each
    unsigned int *counters;      // [sent down, sent up, free-slot stack top, overflow flags]
    unsigned int *holes;         // stack of free particle slots
    const unsigned int *ids;     // global particle ids (null: identified by place)
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
