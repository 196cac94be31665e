// Pass 3 (src/backend/cuda/cells.rs): per cell, the sums become the collision parameters.
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

#if MPC_WALLS
// cpu.rs fill_and_params: the parameters of global cell gc between walls, its real sums
// filled with the virtual particles of a cut cell (walls.cuh); the momentum the real particles
// gain in the collision (Walls::collision_exchange) is taken from the wall's account.
__device__ __forceinline__ void mpc_walled_cell_params(const MpcParams &p, unsigned int gc, const double real[6],
                                                       double out[8]) {
    MpcFill f = mpc_walls_fill(p.walls, p.seed, p.step, gc, p.cells[0], p.cells[2], p.shift[0], p.shift[1],
                               p.shift[2], p.mass, p.kt, p.thermostat, real[0], real[1], real[2], real[3],
                               real[4], real[5]);
    double s[6] = {f.s[0], f.s[1], f.s[2], f.s[3], f.s[4], f.s[5]};
    mpc_cell_params(p, gc, s, out);
    if (f.surface >= 0) {
        double inv = 1.0 / real[3];
        double mean[3] = {real[0] * inv, real[1] * inv, real[2] * inv};
        double w[3];
        mpc_collide(p, out, 0, mean, w);
        double *dst = mpc_walls_momentum_of_block(p.walls.momentum) + 3 * f.surface;
        for (int k = 0; k < 3; ++k) {
            atomicAdd(dst + k, mpc_global_term(p, MPC_GLOBAL_MOMENTUM, -(real[3] * w[k] - real[k])));
        }
    }
}
#endif

// Pass 3, one thread per cell: sums -> collision parameters, in place, for every cell but the
// empty ones (zeros already, mpc_cell_is_empty) and the listed ones (no-slip walls: those a
// wall may cut, whose fill mpc_cut_cell_params runs after this pass; the fill is not called
// here, so this pass keeps the registers of the box's).
// report[0] += relative energy, report[1] += (Nc - 1) over cells with Nc >= 2 (every cell: the
// real particles' sums, before any fill).
extern "C" __global__ void mpc_cell_params(MpcParams p, double *cells, double *report, const unsigned int *listed) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    double e_rel = 0.0, dof = 0.0;
    if (c < p.n_cells && !mpc_cell_is_empty(cells + (size_t)c * MPC_CELL_STRIDE)) {
        double *o = cells + (size_t)c * MPC_CELL_STRIDE;
        double s[6];
        mpc_read_cell_sums(p, o, s);
        if (s[5] >= 2.0) {
            e_rel = mpc_global_term(p, MPC_GLOBAL_ENERGY, mpc_relative_energy(s));
            dof = s[5] - 1.0;
        }
        if (!mpc_cell_is_listed(listed, c)) {
            double out[8];
            mpc_cell_params(p, c + p.cell_offset, s, out);  // draws keyed by the global cell
            mpc_store_cell_params(o, out);
        }
    }
    mpc_block_add(e_rel, report + 0, MPC_REPORT_WORDS);
    mpc_block_add(dof, report + 1, MPC_REPORT_WORDS);
}

// Pass 3 between no-slip walls, after mpc_cell_params: one thread per listed local cell
// (`list`, `count` of them: Walls::cells_walls_may_cut), its sums filled with the virtual
// particles where the shifted grid's cell is cut, then its parameters, in place. Empty in a
// unit without walls.
extern "C" __global__ void mpc_cut_cell_params(MpcParams p, double *cells, const unsigned int *list,
                                               unsigned int count) {
#if MPC_WALLS
    unsigned int c;
    double s[6];
    if (mpc_listed_cell_sums(p, cells, list, count, &c, s)) {
        double out[8];
        mpc_walled_cell_params(p, c + p.cell_offset, s, out);
        mpc_store_cell_params(cells + (size_t)c * MPC_CELL_STRIDE, out);
    }
#endif
}
