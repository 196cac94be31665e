// Solutes in the collision (src/backend/cuda/solutes.rs): binning with their masses and
// Lees-Edwards images, and their collision (host solutes in mpcbox's buffers, or the caller's
// device-resident arrays).
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

// Solutes in mpcbox's buffers: collide in place (slab mode: zeros for solutes another GPU owns).
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
