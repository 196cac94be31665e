// Pass 4 (src/backend/cuda/collide.rs): the collision of the fluid particles.
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

// Pass 4, one thread per fluid particle: collide. report[3] += collisional stress when measured.
extern "C" __global__ void mpc_collide(MpcParams p, const float *__restrict__ px, const float *__restrict__ py,
                                       const float *__restrict__ pz, double *__restrict__ vx,
                                       double *__restrict__ vy, double *__restrict__ vz,
                                       const unsigned int *__restrict__ cellw, const double *__restrict__ cells,
                                       double *report) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double coll = 0.0;
    unsigned int w = i < p.n_fluid ? cellw[i] : MPC_DEAD;
    if (w != MPC_DEAD) {
        double cp[8];
        mpc_load_params(cells, mpc_cell_of(w), cp);
        double v[3] = {vx[i], vy[i], vz[i]};
        double u[3];
        mpc_collide(p, cp, mpc_image_of(w), v, u);
        if (p.measure_stress && cp[7] != 0.0) {
            MpcLocation loc = mpc_locate(p, (double)px[i], (double)py[i], (double)pz[i]);
            coll = mpc_global_term(p, MPC_GLOBAL_MOMENTUM, p.mass * (u[0] - v[0]) * loc.y_in_cell);
        }
        vx[i] = u[0];
        vy[i] = u[1];
        vz[i] = u[2];
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3, MPC_REPORT_WORDS);
    }
}
