// The initial state on the GPU (src/backend/cuda/init.rs), bit for bit FluidState::initial.
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#include "mpc.cuh"
#endif

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

// ---- a slab's share of the initial state on its own GPU (src/backend/cuda/init.rs) ----
// Every GPU draws any particle from its global index, so a slab keeps exactly the particles of
// FluidState::initial whose layer it owns, in ascending index, bit for bit, without the box
// on the host. A block handles MPC_INIT_TILE consecutive particles, MPC_INIT_PER_THREAD per
// thread (in order), so a block's kept particles are placed by an exclusive scan of the
// blocks' counts and, within the block, of its threads' counts.
#define MPC_INIT_PER_THREAD 8
#define MPC_INIT_THREADS 256
#define MPC_INIT_TILE (MPC_INIT_PER_THREAD * MPC_INIT_THREADS)
#define MPC_INIT_BOUNDS __launch_bounds__(MPC_INIT_THREADS)

// Particle i's position as mpc_init_particles draws it; the stream is left at its velocity.
__device__ __forceinline__ void mpc_init_position(MpcCellStream *s, double lx, double ly, double lz, float p[3]) {
    p[0] = mpc_wrap_coordinate(mpc_uniform(s) * lx, lx);
    p[1] = mpc_wrap_coordinate(mpc_uniform(s) * ly, ly);
    p[2] = mpc_wrap_coordinate(mpc_uniform(s) * lz, lz);
}

// Whether y lies in layers [y_lo, y_hi) of a box of ly_cells layers (as the host's slab
// owner: the layer of y clamped into the box).
__device__ __forceinline__ bool mpc_init_kept(float y, unsigned int y_lo, unsigned int y_hi, unsigned int ly_cells) {
    unsigned int layer = (unsigned int)fmaxf(y, 0.0f);
    if (layer > ly_cells - 1) {
        layer = ly_cells - 1;
    }
    return layer >= y_lo && layer < y_hi;
}

// The exclusive prefix of `mine` over the block's threads (in thread order) and, through
// *total, the block's sum. Every thread of the block calls it.
__device__ __forceinline__ unsigned int mpc_init_block_scan(unsigned int mine, unsigned int *total) {
    __shared__ unsigned int warp_sums[MPC_INIT_THREADS / 32];
    unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned int x = mine;
    for (unsigned int d = 1; d < 32; d <<= 1) {
        unsigned int y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) {
            x += y;
        }
    }
    if (lane == 31) {
        warp_sums[warp] = x;
    }
    __syncthreads();
    unsigned int before = 0, all = 0;
    for (unsigned int w = 0; w < MPC_INIT_THREADS / 32; ++w) {
        if (w < warp) {
            before += warp_sums[w];
        }
        all += warp_sums[w];
    }
    *total = all;
    return before + x - mine;
}

// Per block: how many of its particles lie in layers [y_lo, y_hi).
extern "C" __global__ void MPC_INIT_BOUNDS mpc_init_count(mpc_u64 seed, double lx, double ly, double lz, mpc_u64 n,
                                                          unsigned int y_lo, unsigned int y_hi, unsigned int ly_cells,
                                                          unsigned int *__restrict__ counts) {
    mpc_u64 first = (mpc_u64)blockIdx.x * MPC_INIT_TILE + (mpc_u64)threadIdx.x * MPC_INIT_PER_THREAD;
    unsigned int mine = 0;
    for (unsigned int j = 0; j < MPC_INIT_PER_THREAD; ++j) {
        mpc_u64 i = first + j;
        if (i < n) {
            MpcCellStream s = mpc_particle_stream(seed, i);
            float p[3];
            mpc_init_position(&s, lx, ly, lz, p);
            mine += mpc_init_kept(p[1], y_lo, y_hi, ly_cells) ? 1u : 0u;
        }
    }
    unsigned int total;
    mpc_init_block_scan(mine, &total);
    if (threadIdx.x == 0) {
        counts[blockIdx.x] = total;
    }
}

// Chunk sums of the thermal velocities drawn here (mpc_chunk_sums without stored velocities):
// chunk first_chunk + t of REDUCTION_CHUNK particles, minus the mean (m0, m1, m2), summed in
// the CPU's order into partial[4t..4t+4]. Zero mean: the sums of the mean; the mean: those of
// the energy after it is removed.
extern "C" __global__ void mpc_init_chunk_sums(mpc_u64 seed, double lx, double ly, double lz, double sigma,
                                               mpc_u64 n, unsigned int chunk, mpc_u64 first_chunk,
                                               unsigned int nchunks, double m0, double m1, double m2,
                                               double *__restrict__ partial) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nchunks) {
        return;
    }
    mpc_u64 lo = (first_chunk + t) * (mpc_u64)chunk;
    mpc_u64 hi = lo + chunk;
    if (hi > n) {
        hi = n;
    }
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (mpc_u64 i = lo; i < hi; ++i) {
        MpcCellStream s = mpc_particle_stream(seed, i);
        float p[3];
        mpc_init_position(&s, lx, ly, lz, p);
        double v0 = sigma * mpc_normal(&s) - m0;
        double v1 = sigma * mpc_normal(&s) - m1;
        double v2 = sigma * mpc_normal(&s) - m2;
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

// The particles in layers [y_lo, y_hi), each written at offsets[block] plus its place among
// the block's kept ones: position, velocity v = (thermal - mean) * scale (when `settle`, as
// FluidState::initial for more than one particle) plus the shear profile
// shear * (y - ly / 2) (zero shear: none), and its global index into ids (null: none kept).
extern "C" __global__ void MPC_INIT_BOUNDS mpc_init_slab(mpc_u64 seed, double lx, double ly, double lz, double sigma,
                                                         mpc_u64 n, unsigned int y_lo, unsigned int y_hi,
                                                         unsigned int ly_cells, const mpc_u64 *__restrict__ offsets,
                                                         unsigned int settle, double m0, double m1, double m2,
                                                         double scale, double shear, float *__restrict__ px,
                                                         float *__restrict__ py, float *__restrict__ pz,
                                                         double *__restrict__ vx, double *__restrict__ vy,
                                                         double *__restrict__ vz, unsigned int *__restrict__ ids) {
    mpc_u64 first = (mpc_u64)blockIdx.x * MPC_INIT_TILE + (mpc_u64)threadIdx.x * MPC_INIT_PER_THREAD;
    unsigned int kept = 0, mine = 0;
    for (unsigned int j = 0; j < MPC_INIT_PER_THREAD; ++j) {
        mpc_u64 i = first + j;
        if (i < n) {
            MpcCellStream s = mpc_particle_stream(seed, i);
            float p[3];
            mpc_init_position(&s, lx, ly, lz, p);
            if (mpc_init_kept(p[1], y_lo, y_hi, ly_cells)) {
                kept |= 1u << j;
                ++mine;
            }
        }
    }
    unsigned int total;
    mpc_u64 at = offsets[blockIdx.x] + mpc_init_block_scan(mine, &total);
    for (unsigned int j = 0; j < MPC_INIT_PER_THREAD; ++j) {
        if (!(kept & (1u << j))) {
            continue;
        }
        mpc_u64 i = first + j;
        MpcCellStream s = mpc_particle_stream(seed, i);
        float p[3];
        mpc_init_position(&s, lx, ly, lz, p);
        double v[3];
        v[0] = sigma * mpc_normal(&s);
        v[1] = sigma * mpc_normal(&s);
        v[2] = sigma * mpc_normal(&s);
        if (settle) {
            v[0] = (v[0] - m0) * scale;
            v[1] = (v[1] - m1) * scale;
            v[2] = (v[2] - m2) * scale;
        }
        if (shear != 0.0) {
            v[0] += shear * ((double)p[1] - 0.5 * ly);
        }
        px[at] = p[0];
        py[at] = p[1];
        pz[at] = p[2];
        vx[at] = v[0];
        vy[at] = v[1];
        vz[at] = v[2];
        if (ids) {
            ids[at] = (unsigned int)i;
        }
        ++at;
    }
}
