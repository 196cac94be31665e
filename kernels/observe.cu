// Reductions for observables (src/backend/cuda/observe.rs).
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

// Physics::profile_bins: the cells along a slit's normal, Ly otherwise (y layers about a sphere,
// across a pore or cosine walls).
__device__ __forceinline__ unsigned int mpc_profile_bins(const MpcParams &p) {
    switch (MPC_WALL_KIND(p.walls)) {
        case MPC_WALLS_NONE:
        case MPC_WALLS_SLIT:
        case MPC_WALLS_PIPE:
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE:
        case MPC_WALLS_PORE:
        case MPC_WALLS_COSINE:
        case MPC_WALLS_FIELD:
            return p.cells[1];
        case MPC_WALLS_SLIT_Z:
            return p.cells[2];
        default:
            __trap();
            return 1u;
    }
}

// Physics::profile_bin: the layer across a slit (y or z) or of a periodic box (y), or in a
// pipe the distance from the axis in whole cells.
__device__ __forceinline__ unsigned int mpc_profile_bin(const MpcParams &p, float y, float z) {
    unsigned int b;
    switch (MPC_WALL_KIND(p.walls)) {
        case MPC_WALLS_NONE:
        case MPC_WALLS_SLIT:
        case MPC_WALLS_SPHERE:
        case MPC_WALLS_OBSTACLE:
        case MPC_WALLS_PORE:
        case MPC_WALLS_COSINE:
        case MPC_WALLS_FIELD:
            b = (unsigned int)y;
            break;
        case MPC_WALLS_SLIT_Z:
            b = (unsigned int)z;
            break;
        case MPC_WALLS_PIPE: {
            double dy = (double)y - p.walls.pipe.yc;
            double dz = (double)z - p.walls.pipe.zc;
            b = (unsigned int)sqrt(dy * dy + dz * dz);
            break;
        }
        default:
            __trap();
            b = 0u;
    }
    unsigned int bins = mpc_profile_bins(p);
    return b > bins - 1 ? bins - 1 : b;
}

// A warp's lanes whose profile run ends (`flush`) hand it over: runs of the same bin are added
// up across the warp first, then one lane per bin adds the sum to the block's bins in shared
// memory (use_shared) or to the global profile. All 32 lanes must call it.
__device__ __forceinline__ void mpc_profile_flush(const MpcParams &p, bool flush, unsigned int bin, double sum,
                                                  double count,
                                                  double *ssum, unsigned long long *scnt, double *prof_sum,
                                                  unsigned long long *prof_cnt, unsigned int use_shared) {
    double bs[6];
    // mass 1, in f64 (sums of terms on the fixed-point grid are exact): bs[0] = the runs' vx
    // sums, bs[1] = their counts
    if (mpc_warp_reduce_cell(p, false, flush, bin, 1.0, sum, count, 0.0, bs)) {
        unsigned long long cnt = (unsigned long long)bs[1];
        if (use_shared) {
            atomicAdd(ssum + bin, bs[0]);
            atomicAdd(scnt + bin, cnt);
        } else {
            atomicAdd(prof_sum + bin, bs[0]);
            atomicAdd(prof_cnt + bin, cnt);
        }
    }
}

#define MPC_NO_BIN 0xffffffffu

// Moments: out[0..3] += m v, out[3] += 1/2 m v^2; vx profile over mpc_profile_bins(p) bins
// (Physics::profile_bin). Each block sums the `per_block` particles from blockIdx.x * per_block
// (a multiple of its size; a few thousand blocks in all): the per-block costs (shared bins
// zeroed and flushed, the block reductions) are paid once per tens of thousands of particles,
// not once per 256 (they made the kernel ~4x slower than its memory traffic). Each lane keeps in
// registers its momentum and energy sums and its current profile run (bin, vx sum, count): in
// cell order a lane stays in one bin for long, and it hands a run over only when its bin changes.
// With use_shared the block's bins are summed in dynamic shared memory (as many doubles + u64
// as bins) and added to the global profile at the end.
extern "C" __global__ void mpc_moments(MpcParams p, const float *__restrict__ py, const float *__restrict__ pz,
                                       const double *__restrict__ vx,
                                       const double *__restrict__ vy, const double *__restrict__ vz,
                                       const unsigned int *__restrict__ cellw, double *out,
                                       double *prof_sum, unsigned long long *prof_cnt, unsigned int use_shared,
                                       unsigned int per_block) {
    extern __shared__ double smem[];
    unsigned int bins = mpc_profile_bins(p);
    double *ssum = smem;
    unsigned long long *scnt = (unsigned long long *)(smem + bins);
    if (use_shared) {
        for (unsigned int b = threadIdx.x; b < bins; b += blockDim.x) {
            ssum[b] = 0.0;
            scnt[b] = 0;
        }
        __syncthreads();
    }
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    unsigned int run_bin = MPC_NO_BIN;
    double run_sum = 0.0, run_count = 0.0;
    unsigned long long lo = (unsigned long long)blockIdx.x * per_block;
    unsigned long long end = lo + per_block;
    unsigned long long hi = end < p.n_fluid ? end : p.n_fluid;
    // the same trip count on every lane of the block: the warp collectives need all 32
    for (unsigned long long base = lo; base < hi; base += blockDim.x) {
        unsigned long long i = base + threadIdx.x;
        bool live = i < hi && mpc_live(p, cellw, (unsigned int)i);
        unsigned int b = run_bin;
        double v0 = 0.0;
        if (live) {
            double m = p.mass;
            v0 = vx[i];
            double v1 = vy[i], v2 = vz[i];
            s0 += mpc_global_term(p, MPC_GLOBAL_MOMENTUM, m * v0);
            s1 += mpc_global_term(p, MPC_GLOBAL_MOMENTUM, m * v1);
            s2 += mpc_global_term(p, MPC_GLOBAL_MOMENTUM, m * v2);
            s3 += mpc_global_term(p, MPC_GLOBAL_ENERGY, 0.5 * m * (v0 * v0 + v1 * v1 + v2 * v2));
            b = mpc_profile_bin(p, py[i], pz[i]);
        }
        bool ends = b != run_bin && run_bin != MPC_NO_BIN;
        if (__any_sync(0xffffffffu, ends)) {
            mpc_profile_flush(p, ends, run_bin, run_sum, run_count, ssum, scnt, prof_sum, prof_cnt, use_shared);
        }
        if (b != run_bin) {
            run_bin = b;
            run_sum = 0.0;
            run_count = 0.0;
        }
        if (live) {
            run_sum += mpc_global_term(p, MPC_GLOBAL_VELOCITY, v0);
            run_count += 1.0;
        }
    }
    mpc_profile_flush(p, run_bin != MPC_NO_BIN, run_bin, run_sum, run_count, ssum, scnt, prof_sum, prof_cnt,
                      use_shared);
    if (use_shared) {
        __syncthreads();  // every lane's last run is in the shared bins
    }
    mpc_block_add(s0, out + 0, 4);
    mpc_block_add(s1, out + 1, 4);
    mpc_block_add(s2, out + 2, 4);
    mpc_block_add(s3, out + 3, 4);
    if (use_shared) {
        for (unsigned int b = threadIdx.x; b < bins; b += blockDim.x) {
            if (scnt[b] != 0) {
                atomicAdd(prof_sum + b, ssum[b]);
                atomicAdd(prof_cnt + b, scnt[b]);
            }
        }
    }
}

// Flow fields (src/fields.rs): every live particle adds (1, vx, vy, vz, v^2) to the unshifted
// cell of its position. fields holds `layers` y layers of lx * lz cells starting at global
// layer `first` - halo: on one GPU halo = 0 and every layer; on a slab halo = 1, one layer more
// on each side (a particle whose shifted cell this GPU owns can sit in the layer next to the
// slab), periodic in y; the host adds the overlaps.
extern "C" __global__ void mpc_accumulate_fields(MpcParams p, const float *__restrict__ px,
                                                 const float *__restrict__ py, const float *__restrict__ pz,
                                                 const double *__restrict__ vx, const double *__restrict__ vy,
                                                 const double *__restrict__ vz, const unsigned int *__restrict__ cellw,
                                                 double *fields, unsigned int first, unsigned int layers,
                                                 unsigned int halo) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (!mpc_live(p, cellw, i)) {
        return;
    }
    unsigned int lx = p.cells[0], ly = p.cells[1], lz = p.cells[2];
    unsigned int ix = min((unsigned int)fmaxf(px[i], 0.0f), lx - 1);
    unsigned int iy = min((unsigned int)fmaxf(py[i], 0.0f), ly - 1);
    unsigned int iz = min((unsigned int)fmaxf(pz[i], 0.0f), lz - 1);
    // layer relative to the buffer's first layer, first - halo, periodic in y
    unsigned int rel = (iy + ly + halo - first) % ly;
    if (rel >= layers) {
        return;  // cannot happen for a slab's own particles (checked on the host by the count)
    }
    double *f = fields + 5 * ((size_t)(rel * lz + iz) * lx + ix);
    double v0 = vx[i], v1 = vy[i], v2 = vz[i];
    atomicAdd(f + 0, 1.0);
    atomicAdd(f + 1, v0);
    atomicAdd(f + 2, v1);
    atomicAdd(f + 3, v2);
    atomicAdd(f + 4, v0 * v0 + v1 * v1 + v2 * v2);
}
