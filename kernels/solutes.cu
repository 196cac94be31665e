// Solutes in the collision (src/backend/cuda/coupled.rs, device_solutes.rs): binning with
// their masses and Lees-Edwards images, and their collision.
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

// Solutes: bin on the shifted grid (f64 positions, anywhere: wrapped through Lees-Edwards
// periods) and add to the cell sums. The cell goes to scell, the image (any number of periods)
// to simage.
extern "C" __global__ void mpc_solute_bin(MpcParams p, const double *__restrict__ spos,
                                          const double *__restrict__ svel, const double *__restrict__ smass,
                                          unsigned int *__restrict__ scell, int *__restrict__ simage,
                                          double *cells) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_solutes) {
        return;
    }
    MpcLocation loc = mpc_locate_solute(p, spos[3 * i], spos[3 * i + 1], spos[3 * i + 2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    scell[i] = c;
    simage[i] = loc.image;
    if (c == MPC_DEAD) {  // slab mode: another GPU owns this solute's cell
        return;
    }
    loc.cell = c;
    double w0 = svel[3 * i] + mpc_image_velocity(p, loc.image);
    mpc_add_solute_to_cell(cells, loc.cell, smass[i], w0, svel[3 * i + 1], svel[3 * i + 2]);
}


extern "C" __global__ void mpc_solute_collide(MpcParams p, const unsigned int *__restrict__ scell,
                                              const int *__restrict__ simage, const double *__restrict__ cells,
                                              double *__restrict__ svel) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_solutes) {
        return;
    }
    unsigned int c = scell[i];
    if (c == MPC_DEAD) {
        // slab mode: the owning GPU writes this solute; the host adds the GPUs' outputs
        svel[3 * i] = 0.0;
        svel[3 * i + 1] = 0.0;
        svel[3 * i + 2] = 0.0;
        return;
    }
    double cp[8];
    mpc_load_params(cells, c, cp);
    double v[3] = {svel[3 * i], svel[3 * i + 1], svel[3 * i + 2]};
    double u[3];
    mpc_collide(p, cp, simage[i], v, u);
    svel[3 * i] = u[0];
    svel[3 * i + 1] = u[1];
    svel[3 * i + 2] = u[2];
}

extern "C" __global__ void mpc_check_solutes(const double *__restrict__ spos, const double *__restrict__ svel,
                                             const double *__restrict__ smass, unsigned int n, double limit,
                                             unsigned int *first_bad) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    double x = spos[3 * i], y = spos[3 * i + 1], z = spos[3 * i + 2];
    if (!(isfinite(x) && isfinite(y) && isfinite(z))) {
        atomicMin(first_bad + 0, i);
    } else if (fabs(x) > limit || fabs(y) > limit || fabs(z) > limit) {
        atomicMin(first_bad + 1, i);
    }
    double a = svel[3 * i], b = svel[3 * i + 1], c = svel[3 * i + 2];
    if (!(isfinite(a) && isfinite(b) && isfinite(c))) {
        atomicMin(first_bad + 2, i);
    }
    double m = smass[i];
    if (!(isfinite(m) && m > 0.0)) {
        atomicMin(first_bad + 3, i);
    }
}

// Several GPUs, solutes held on one of them: each GPU collides the solutes in its own cells and
// writes their velocities straight into the home GPU's array (peer memory over NVLink); the
// solutes of other GPUs' cells are left alone (their owner writes them).
extern "C" __global__ void mpc_solute_collide_owned(MpcParams p, const unsigned int *__restrict__ scell,
                                                    const int *__restrict__ simage,
                                                    const double *__restrict__ cells, double *svel) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n_solutes) {
        return;
    }
    unsigned int c = scell[i];
    if (c == MPC_DEAD) {
        return;
    }
    double cp[8];
    mpc_load_params(cells, c, cp);
    double v[3] = {svel[3 * i], svel[3 * i + 1], svel[3 * i + 2]};
    double u[3];
    mpc_collide(p, cp, simage[i], v, u);
    svel[3 * i] = u[0];
    svel[3 * i + 1] = u[1];
    svel[3 * i + 2] = u[2];
}
