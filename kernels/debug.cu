// Debug entry points for the tests (src/backend/cuda/debug.rs): draws, det_ln, initial particles.
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#include "mpc.cuh"
#include "rules.cuh"
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

// MPC-AT's draws (Physics::rule_draw) of particles with keys keys[i] and masses masses[i] in
// global cells cells[i] at (seed, step) for temperature kt.
extern "C" __global__ void mpc_debug_at_draws(unsigned long long seed, unsigned long long step,
                                              const unsigned int *__restrict__ cells,
                                              const unsigned long long *__restrict__ keys,
                                              const double *__restrict__ masses, double kt, double *draws,
                                              unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    MpcParams p = {};
    p.seed = seed;
    p.step = step;
    p.kt = kt;
    double xi[3];
    mpc_rule_draw(p, cells[i], keys[i], masses[i], xi);
    draws[3 * i] = xi[0];
    draws[3 * i + 1] = xi[1];
    draws[3 * i + 2] = xi[2];
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
