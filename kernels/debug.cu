// Debug entry points for the tests (src/backend/cuda/debug.rs): draws, det_ln, initial particles.
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#include "mpc.cuh"
#endif

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
