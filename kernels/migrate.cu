// Slab mode (src/backend/cuda/multi/migrate.rs): unpacking the particles a neighbouring GPU sent.
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#include "migrate.cuh"
#include "rule_sums.cuh"
#endif

// Slab mode: unpack `count` particles received from a neighbour (records as in mpc_emigrate).
// Arrival j = first + k fills free slot holes[hole_top - 1 - j] while j < fill, then appends
// at n_old + (j - fill). Each is binned with the step's plan and added to the cell sums; one
// whose cell this GPU does not own (it crossed more than a neighbour's slab) sets flag 2.
// Without labels (ids null: particles identified by place) no id is kept.
// Under a collision rule beside plain SRD (rule != 0) the arrivals' extended sums go to ext.
extern "C" __global__ void mpc_immigrate(MpcParams p, const unsigned long long *__restrict__ recv, unsigned int count,
                                         unsigned int first, unsigned int fill, unsigned int hole_top,
                                         unsigned int n_old, float *__restrict__ px, float *__restrict__ py,
                                         float *__restrict__ pz, double *__restrict__ vx, double *__restrict__ vy,
                                         double *__restrict__ vz, unsigned int *__restrict__ cellw,
                                         unsigned int *__restrict__ ids, const unsigned int *__restrict__ holes,
                                         double *cells, unsigned int *counters, unsigned int rule,
                                         double *ext) {
    unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) {
        return;
    }
    unsigned int j = first + k;
    unsigned int slot = j < fill ? holes[hole_top - 1 - j] : n_old + (j - fill);
    const unsigned long long *r = recv + (size_t)k * MPC_RECORD_WORDS;
    double v[3] = {__longlong_as_double((long long)r[0]), __longlong_as_double((long long)r[1]),
                   __longlong_as_double((long long)r[2])};
    float pos[3] = {__uint_as_float((unsigned int)r[3]), __uint_as_float((unsigned int)(r[3] >> 32)),
                    __uint_as_float((unsigned int)r[4])};
    px[slot] = pos[0];
    py[slot] = pos[1];
    pz[slot] = pos[2];
    vx[slot] = v[0];
    vy[slot] = v[1];
    vz[slot] = v[2];
    if (ids) {
        ids[slot] = (unsigned int)(r[4] >> 32);
    }
    MpcLocation loc = mpc_locate(p, (double)pos[0], (double)pos[1], (double)pos[2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    if (c == MPC_DEAD) {
        atomicOr(counters + 3, 2u);
        c = 0;
    }
    cellw[slot] = mpc_pack_cell(c, loc.image);
    double w0 = v[0] + mpc_image_velocity(p, loc.image);
    mpc_add_to_cell(p, cells, c, p.mass, w0, v[1], v[2]);
    if (rule) {
        double wv[3] = {w0, v[1], v[2]};
        mpc_rule_add_arrival(p, rule, ext, c, loc.cell, loc, pos, wv);
    }
}
