// Wall forces of the GPU MD engine (launched from src/md/gpu/forces.rs; the CPU compute is
// src/md/walls.rs): the WCA potential in the distance to the fluid's walls (walls.cuh: the same
// shapes and formulas as the fluid's bounce-back), added to the forces after md_forces.
#ifndef MPCBOX_NVRTC
#include "walls.cuh"
#include "md.cu"
#endif

// flags[6]: a bead reached a wall surface; flags[7]: its tag
// (MD_FLAG_WALL, from the generated header)

// WallPotential::force for particle i: adds the force, and (when energy) writes its energy to
// e_wall[i] (zero beyond the cutoff). A bead on or beyond the surface raises MD_FLAG_WALL.
extern "C" __global__ void md_wall_forces(unsigned int n, const double *pos, double *force, MpcWalls w,
                                          double epsilon, double sigma, double cutoff, int energy,
                                          double *e_wall, const unsigned int *tag, unsigned int *flags,
                                          double ly, double own_lo, double own_hi, unsigned int m,
                                          const unsigned int *work) {
    unsigned int i;
    if (!md_item(m, work, &i)) {
        return;
    }
    if (!md_owns(pos[3 * i + 1], ly, own_lo, own_hi)) {
        if (energy) {
            e_wall[i] = 0.0;
        }
        return;
    }
    double p[3] = {pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]};
    double d = mpc_walls_signed_distance(w, p);
    double e = 0.0;
    if (d < cutoff) {
        if (d <= 0.0) {
            if (atomicExch(&flags[MD_FLAG_WALL], 1u) == 0u) {
                flags[MD_FLAG_WALL + 1] = tag[i];
            }
        } else {
            double nrm[3];
            mpc_walls_normal(w, p, nrm);
            double inv = 1.0 / d;
            double sr = sigma * inv;
            double sr2 = sr * sr;
            double sr6 = sr2 * sr2 * sr2;
            double fmag = 24.0 * epsilon * inv * (2.0 * sr6 * sr6 - sr6);
            e = 4.0 * epsilon * (sr6 * sr6 - sr6) + epsilon;
            for (int k = 0; k < 3; ++k) {
                force[3 * i + k] += fmag * nrm[k];
            }
        }
    }
    if (energy) {
        e_wall[i] = e;
    }
}
