// Reductions for observables (src/backend/cuda/observe.rs).
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

// Physics::profile_bins: the cells along a slit's normal, Ly otherwise.
__device__ __forceinline__ unsigned int mpc_profile_bins(const MpcParams &p) {
    switch (p.walls.kind) {
        case MPC_WALLS_NONE:
        case MPC_WALLS_SLIT:
        case MPC_WALLS_PIPE:
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
    switch (p.walls.kind) {
        case MPC_WALLS_NONE:
        case MPC_WALLS_SLIT:
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

// Moments: out[0..3] += m v, out[3] += 1/2 m v^2; vx profile over mpc_profile_bins(p) bins
// (Physics::profile_bin). With use_shared the bins are first summed in dynamic shared memory (as
// many doubles + u64).
extern "C" __global__ void mpc_moments(MpcParams p, const float *__restrict__ py, const float *__restrict__ pz,
                                       const double *__restrict__ vx,
                                       const double *__restrict__ vy, const double *__restrict__ vz,
                                       const unsigned int *__restrict__ cellw, double *out,
                                       double *prof_sum, unsigned long long *prof_cnt, unsigned int use_shared) {
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
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    bool live = mpc_live(p, cellw, i);
    unsigned int b = 0;
    if (live) {
        double m = p.mass;
        double v0 = vx[i], v1 = vy[i], v2 = vz[i];
        s0 = m * v0;
        s1 = m * v1;
        s2 = m * v2;
        s3 = 0.5 * m * (v0 * v0 + v1 * v1 + v2 * v2);
        b = mpc_profile_bin(p, py[i], pz[i]);
    }
    // Lanes in the same bin add up first (particles in cell order share a bin along whole
    // warps, and 32 atomics on one address serialise): one atomic per bin and warp.
    double bs[6];
    if (mpc_warp_reduce_cell(live, b, 1.0, live ? vx[i] : 0.0, 0.0, 0.0, bs) && live) {
        unsigned long long cnt = (unsigned long long)bs[5];
        if (use_shared) {
            atomicAdd(ssum + b, bs[0]);
            atomicAdd(scnt + b, cnt);
        } else {
            atomicAdd(prof_sum + b, bs[0]);
            atomicAdd(prof_cnt + b, cnt);
        }
    }
    mpc_block_add(s0, out + 0);
    mpc_block_add(s1, out + 1);
    mpc_block_add(s2, out + 2);
    mpc_block_add(s3, out + 3);
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
