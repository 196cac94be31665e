// Pass 3 (src/backend/cuda/cells.rs): per cell, the sums become the collision parameters.
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

// Pass 3, one thread per cell: sums -> collision parameters, in place.
// report[0] += relative energy, report[1] += (Nc - 1) over cells with Nc >= 2.
extern "C" __global__ void mpc_cell_params(MpcParams p, double *cells, double *report) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    double e_rel = 0.0, dof = 0.0;
    if (c < p.n_cells) {
        double *o = cells + (size_t)c * MPC_CELL_STRIDE;
        double s[6];
        double2 a = ((double2 *)o)[0], b = ((double2 *)o)[1], d = ((double2 *)o)[2], e = ((double2 *)o)[3];
        s[0] = a.x;
        s[1] = a.y;
        s[2] = b.x;
        s[3] = p.mass * d.y + b.y;  // fluid mass + solute mass
        s[4] = d.x;
        s[5] = d.y + e.x;  // fluid + solute count
        if (s[5] >= 2.0) {
            e_rel = mpc_relative_energy(s);
            dof = s[5] - 1.0;
        }
        double out[8];
        mpc_cell_params(p, c + p.cell_offset, s, out);  // draws keyed by the global cell
        double2 *o2 = (double2 *)o;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            o2[k] = make_double2(out[2 * k], out[2 * k + 1]);
        }
    }
    mpc_block_add(e_rel, report + 0);
    mpc_block_add(dof, report + 1);
}
