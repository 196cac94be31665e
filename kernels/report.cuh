// The step report's layout on the device (src/backend/cuda/observe.rs reads it): shared by
// the fluid kernels and the walls' path, which adds the momentum of each impact to it.
#pragma once

// The step report (src/backend/cuda/params.rs REPORT_WORDS, REPORT_COPIES): its words, and
// the copies the per-block sums spread over (block b adds into copy b % MPC_SPREAD, the host adds
// the copies): hundreds of thousands of blocks adding into one address serialise on it.
#define MPC_REPORT_WORDS 10
#define MPC_SPREAD 32

// The walls' momentum account (MpcWalls::momentum, the report's words 4..10 of copy 0) of
// this block: copy blockIdx.x % MPC_SPREAD. Every impact and every filled cell adds to it, and
// hundreds of thousands of them a step on one address queue one behind the other (with fixed
// sums each term is a multiple of the grid, so the copies add to the same bits in any order).
__device__ __forceinline__ double *mpc_walls_momentum_of_block(double *momentum) {
    return momentum + (blockIdx.x % MPC_SPREAD) * MPC_REPORT_WORDS;
}
