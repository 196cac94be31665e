// Reordering the fluid by cell (src/backend/cuda/reorder.rs): a counting sort whose
// permutation equals the CPU backend's.
#ifndef MPCBOX_NVRTC
#include "mpc.cuh"
#endif

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
