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
