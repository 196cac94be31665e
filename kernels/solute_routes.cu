// Solutes from outside routed to the slabs that own their cells (src/backend/cuda/multi/solute_routes.rs):
// every solute is checked and located once, packed
// into its owning slab's region of a staging buffer on the GPU that holds it, and its collided
// velocity comes back and is gathered into the caller's array (or scattered, region by region). Each slab then bins and
// collides only its own solutes, from a compact copy in its own GPU's memory.
#ifndef MPCBOX_NVRTC
#include "mpc.cuh"
#endif

// The most slabs one routing serves (the host refuses more before anything runs).
#define MPC_ROUTE_MAX_SLABS 64
#define MPC_ROUTE_NONE 0xffffffffu

// The slab of `bounds` (first layer of each of the g slabs, then Ly) that owns layer iy.
__device__ __forceinline__ unsigned int mpc_route_slab(const unsigned int *bounds, unsigned int g,
                                                       unsigned int iy) {
    unsigned int k = 0;
    while (k + 1 < g && bounds[k + 1] <= iy) {
        ++k;
    }
    return k;
}

// Bad values are recorded as first_bad[k] = max of (0xffffffff - index), so that zeroed memory
// means none and the host reads the lowest bad index as 0xffffffff - first_bad[k]: k = 0 a
// non-finite position, 1 a coordinate beyond `limit`, 2 a non-finite velocity, 3 a mass that
// is not finite, > 0 and at most p.solute_mass_cap. A bad value stops the step before any solute is collided.
__device__ __forceinline__ void mpc_route_bad(unsigned int *first_bad, unsigned int k, unsigned int i) {
    atomicMax(first_bad + k, 0xffffffffu - i);
}

// The slab owning the cell of the solute at (x, y, z) on step p's shifted grid, or
// MPC_ROUTE_NONE for a bad position (recorded).
__device__ __forceinline__ unsigned int mpc_route_owner(const MpcParams &p, const double *spos, unsigned int i,
                                                        double limit, const unsigned int *bounds, unsigned int g,
                                                        unsigned int *first_bad) {
    double x = spos[3 * i], y = spos[3 * i + 1], z = spos[3 * i + 2];
    if (!(isfinite(x) && isfinite(y) && isfinite(z))) {
        mpc_route_bad(first_bad, 0, i);
        return MPC_ROUTE_NONE;
    }
    if (fabs(x) > limit || fabs(y) > limit || fabs(z) > limit) {
        mpc_route_bad(first_bad, 1, i);
        return MPC_ROUTE_NONE;
    }
    MpcLocation loc = mpc_locate_solute(p, x, y, z);
    return mpc_route_slab(bounds, g, loc.cell / (p.cells[0] * p.cells[2]));
}

// Slots in counter[key] (shared or global memory) for the lanes of this warp that hold `key`
// (the lanes in `mask`, every one of which calls this): one atomic per distinct key; returns
// this lane's slot, so lanes of one key get consecutive slots.
__device__ __forceinline__ unsigned int mpc_route_reserve(unsigned int *counter, unsigned int key, unsigned int mask) {
    unsigned int peers = __match_any_sync(mask, key);
    unsigned int lane = threadIdx.x & 31u;
    int leader = __ffs(peers) - 1;
    unsigned int base = 0;
    if ((int)lane == leader) {
        base = atomicAdd(counter + key, (unsigned int)__popc(peers));
    }
    base = __shfl_sync(peers, base, leader);
    return base + (unsigned int)__popc(peers & ((1u << lane) - 1u));
}

// Solutes a thread takes per tile of the packing (its launch has blockDim * this per tile).
#define MPC_ROUTE_TILE_ITEMS 4

// Pass 1, the check: counts[k] += the solutes whose cell slab k owns; bad positions,
// velocities and masses recorded (the host reads them before the fluid moves). Each block
// counts in shared memory over a grid-stride range and adds its counts once at the end: one
// global atomic per slab and block, not per warp (those all hit the same few counters).
extern "C" __global__ void mpc_route_count(MpcParams p, const double *__restrict__ spos,
                                           const double *__restrict__ svel, const double *__restrict__ smass,
                                           unsigned int n, double limit, const unsigned int *__restrict__ bounds,
                                           unsigned int g, unsigned int *counts, unsigned int *first_bad) {
    __shared__ unsigned int block_counts[MPC_ROUTE_MAX_SLABS];
    for (unsigned int k = threadIdx.x; k < g; k += blockDim.x) {
        block_counts[k] = 0;
    }
    __syncthreads();
    // the same trip count for the whole block: every lane reaches the ballot
    for (unsigned int base = blockIdx.x * blockDim.x; base < n; base += gridDim.x * blockDim.x) {
        unsigned int i = base + threadIdx.x;
        unsigned int key = MPC_ROUTE_NONE;
        if (i < n) {
            key = mpc_route_owner(p, spos, i, limit, bounds, g, first_bad);
            double a = svel[3 * i], b = svel[3 * i + 1], c = svel[3 * i + 2];
            if (!(isfinite(a) && isfinite(b) && isfinite(c))) {
                mpc_route_bad(first_bad, 2, i);
            }
            double m = smass[i];
            if (!mpc_solute_mass_good(m, p.solute_mass_cap)) {
                mpc_route_bad(first_bad, 3, i);
            }
        }
        unsigned int mask = __ballot_sync(0xffffffffu, key != MPC_ROUTE_NONE);
        if (key != MPC_ROUTE_NONE) {
            mpc_route_reserve(block_counts, key, mask);
        }
    }
    __syncthreads();
    for (unsigned int k = threadIdx.x; k < g; k += blockDim.x) {
        if (block_counts[k] != 0) {
            atomicAdd(counts + k, block_counts[k]);
        }
    }
}

// Pass 2: every routable solute into its slab's region of the staging (SoA: positions and
// velocities 3 doubles a slot, masses, and the caller's index); slab k's region starts at the
// sum of counts[0..k]; the count pass has checked every value. `cursor` starts at zero. A
// block takes tiles of blockDim * MPC_ROUTE_TILE_ITEMS solutes: the tile's solutes of each
// slab get consecutive slots (shared-memory counters, then one global atomic per slab).
// `rslot` (null: not kept) gets each solute's slot, in the caller's order, for the gather.
extern "C" __global__ void mpc_route_pack(MpcParams p, const double *__restrict__ spos,
                                          const double *__restrict__ svel, const double *__restrict__ smass,
                                          unsigned int n, double limit, const unsigned int *__restrict__ bounds,
                                          unsigned int g, const unsigned int *__restrict__ counts,
                                          unsigned int *cursor, double *__restrict__ rpos,
                                          double *__restrict__ rvel, double *__restrict__ rmass,
                                          unsigned int *__restrict__ rindex, unsigned int *__restrict__ rslot) {
    __shared__ unsigned int start[MPC_ROUTE_MAX_SLABS];
    __shared__ unsigned int tile_counts[MPC_ROUTE_MAX_SLABS];
    __shared__ unsigned int tile_base[MPC_ROUTE_MAX_SLABS];
    if (threadIdx.x == 0) {
        unsigned int s = 0;
        for (unsigned int k = 0; k < g; ++k) {
            start[k] = s;
            s += counts[k];
        }
    }
    const unsigned int tile = blockDim.x * MPC_ROUTE_TILE_ITEMS;
    for (unsigned int first = blockIdx.x * tile; first < n; first += gridDim.x * tile) {
        for (unsigned int k = threadIdx.x; k < g; k += blockDim.x) {
            tile_counts[k] = 0;
        }
        __syncthreads();
        unsigned int key[MPC_ROUTE_TILE_ITEMS];
        unsigned int local[MPC_ROUTE_TILE_ITEMS];
#pragma unroll
        for (int r = 0; r < MPC_ROUTE_TILE_ITEMS; ++r) {
            unsigned int i = first + r * blockDim.x + threadIdx.x;
            key[r] = MPC_ROUTE_NONE;
            if (i < n) {
                // the count pass has checked every position (the guard costs nothing)
                double x = spos[3 * i], y = spos[3 * i + 1], z = spos[3 * i + 2];
                if (isfinite(x) && isfinite(y) && isfinite(z) && fabs(x) <= limit && fabs(y) <= limit &&
                    fabs(z) <= limit) {
                    MpcLocation loc = mpc_locate_solute(p, x, y, z);
                    key[r] = mpc_route_slab(bounds, g, loc.cell / (p.cells[0] * p.cells[2]));
                }
            }
            unsigned int mask = __ballot_sync(0xffffffffu, key[r] != MPC_ROUTE_NONE);
            local[r] = key[r] != MPC_ROUTE_NONE ? mpc_route_reserve(tile_counts, key[r], mask) : 0;
        }
        __syncthreads();
        for (unsigned int k = threadIdx.x; k < g; k += blockDim.x) {
            tile_base[k] = tile_counts[k] != 0 ? atomicAdd(cursor + k, tile_counts[k]) : 0;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < MPC_ROUTE_TILE_ITEMS; ++r) {
            if (key[r] == MPC_ROUTE_NONE) {
                continue;
            }
            unsigned int i = first + r * blockDim.x + threadIdx.x;
            unsigned int slot = start[key[r]] + tile_base[key[r]] + local[r];
            double a = svel[3 * i], b = svel[3 * i + 1], c = svel[3 * i + 2];
            double m = smass[i];
            rpos[3 * slot] = spos[3 * i];
            rpos[3 * slot + 1] = spos[3 * i + 1];
            rpos[3 * slot + 2] = spos[3 * i + 2];
            rvel[3 * slot] = a;
            rvel[3 * slot + 1] = b;
            rvel[3 * slot + 2] = c;
            rmass[slot] = m;
            rindex[slot] = i;
            if (rslot) {
                rslot[i] = slot;
            }
        }
        __syncthreads();
    }
}

// The collided velocities of the `total` staged solutes back into the caller's array.
extern "C" __global__ void mpc_route_scatter(const double *__restrict__ rvel, const unsigned int *__restrict__ rindex,
                                             unsigned int total, double *__restrict__ svel) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) {
        return;
    }
    unsigned int i = rindex[t];
    svel[3 * i] = rvel[3 * t];
    svel[3 * i + 1] = rvel[3 * t + 1];
    svel[3 * i + 2] = rvel[3 * t + 2];
}

// The collided velocities of all n staged solutes back into the caller's array in its order:
// solute i's from its slot rslot[i]. Every sector of the caller's array is written whole by
// one warp, where the region-by-region scatter wrote each in parts at different times (a
// read-modify-write of the sector in DRAM for each part).
extern "C" __global__ void mpc_route_gather(const double *__restrict__ rvel, const unsigned int *__restrict__ rslot,
                                            unsigned int n, double *__restrict__ svel) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    unsigned int t = rslot[i];
    double a = rvel[3 * t], b = rvel[3 * t + 1], c = rvel[3 * t + 2];
    svel[3 * i] = a;
    svel[3 * i + 1] = b;
    svel[3 * i + 2] = c;
}
