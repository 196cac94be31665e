// The MD engine's particle selection (prepended to md.cu): ownership and bands of the engine
// decomposed over y slabs (src/md/gpu/slabs/), the work-list item of a thread, and warp-aggregated
// atomics on the flag words.
#pragma once

// Ownership in the engine decomposed over the fluid's y slabs (md/gpu/slabs.rs): a slab integrates
// the particles with y in [lo, hi) (whole cell layers; lo = -inf, hi = inf when not decomposed).
// y is wrapped into [0, ly) first, so that a wrap rounding to ly lands in the first slab and every
// particle has exactly one owner; NaN is owned everywhere (it then fails the usual checks).
__device__ __forceinline__ bool md_owns(double y, double ly, double lo, double hi) {
    if (y >= ly) {
        y -= ly;
    } else if (y < 0.0) {
        y += ly;
    }
    return !(y < lo) && !(y >= hi);
}

// Whether y lies in the periodic band [lo, hi) of a box ly tall (everywhere when hi - lo >= ly).
// NaN lies in every band, as it is owned everywhere: every slab then works on it and its bonds
// or energy report the instability as on one slab.
__device__ __forceinline__ bool md_in_band(double y, double ly, double lo, double hi) {
    if (!(hi - lo < ly)) {
        return true;
    }
    double t = y - lo;
    t -= ly * floor(t / ly);
    return !(t >= hi - lo);
}

// The items of a kernel launched over fewer threads than items (md/gpu/mod.rs `items_grid`):
// this thread's t, then every whole grid further on. A few blocks per multiprocessor leave the
// rest of its registers to the fluid's streaming, which runs beside the MD steps.
#define MD_FOR_ITEMS(t, m) \
    for (unsigned int t = blockIdx.x * blockDim.x + threadIdx.x; t < (m); t += gridDim.x * blockDim.x)

// The particle of item t: work[t] over a slab's work list, else t.
__device__ __forceinline__ unsigned int md_item_of(unsigned int t, const unsigned int *work) {
    return work ? work[t] : t;
}

// The particle of this thread: work[t] over a slab's work list (the particles within skin/2 of
// its layers at the last list build, the only ones it can own before the next), else t; false
// past the m items.
__device__ __forceinline__ bool md_item(unsigned int m, const unsigned int *work, unsigned int *i) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) {
        return false;
    }
    *i = md_item_of(t, work);
    return true;
}

// atomicMax(addr, v) with one atomic per group of lanes calling together: the same address from
// every thread would serialise in L2 (a list build raised it from every particle).
__device__ __forceinline__ void md_warp_max(unsigned int *addr, unsigned int v) {
#if __CUDA_ARCH__ >= 800
    unsigned int active = __activemask();
    unsigned int top = __reduce_max_sync(active, v);
    if ((int)(threadIdx.x & 31) == __ffs(active) - 1) {
        atomicMax(addr, top);
    }
#else
    atomicMax(addr, v);
#endif
}

// One slot of counter *c for each calling lane, consecutive within the lanes calling together,
// with one atomic per group (as mpc_warp_reserve of migrate.cuh, for a single counter).
__device__ __forceinline__ unsigned int md_warp_slot(unsigned int *c) {
    unsigned int active = __activemask();
    unsigned int lane = threadIdx.x & 31;
    int leader = __ffs(active) - 1;
    unsigned int base = 0;
    if ((int)lane == leader) {
        base = atomicAdd(c, (unsigned int)__popc(active));
    }
    base = __shfl_sync(active, base, leader);
    return base + __popc(active & ((1u << lane) - 1u));
}

// One record of the decomposed engine's exchanges: index, position, velocity, image (as
// doubles: exact), build position, force.
// (MD_SLAB_WORDS, like MD_FUSED_SENDS below, from the generated header.)

// Write particle i's record at r.
__device__ __forceinline__ void md_write_record(double *r, unsigned int i, const double *pos, const double *vel,
                                                const int *image, const double *built_at, const double *force) {
    r[0] = (double)i;
    for (int k = 0; k < 3; ++k) {
        r[1 + k] = pos[3 * i + k];
        r[4 + k] = vel[3 * i + k];
        r[7 + k] = (double)image[3 * i + k];
        r[10 + k] = built_at[3 * i + k];
        r[13 + k] = force[3 * i + k];
    }
}

// The drift's exchange packed by md_first_half itself (the decomposed engine's neighbour links
// of one sender, at most MD_FUSED_SENDS): for link k the receiver's band, the room in records
// of its send buffer `out`, and its count word (zero on entry). `links` = 0: none.
struct MdSends {
    unsigned int links;
    unsigned int pad;
    double band_lo[MD_FUSED_SENDS];
    double band_hi[MD_FUSED_SENDS];
    unsigned int cap[MD_FUSED_SENDS];
    unsigned int *count[MD_FUSED_SENDS];
    double *out[MD_FUSED_SENDS];
};
