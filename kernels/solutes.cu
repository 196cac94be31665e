// Solutes in the collision (src/backend/cuda/solutes.rs): binning with their masses and
// Lees-Edwards images, and their collision (host solutes in mpcbox's buffers, or the caller's
// device-resident arrays).
#ifndef MPCBOX_NVRTC
#include "cell_sums.cuh"
#endif

// The solute of slot t: subset[t] where the caller listed the solutes that may lie in this GPU's
// cells (p.n_solutes of them), else t.
__device__ __forceinline__ unsigned int mpc_solute_of_slot(const unsigned int *subset, unsigned int t) {
    return subset ? subset[t] : t;
}

// Whether solute i's values are bad, each kind's lowest index into first_bad[k] (atomicMin):
// 0 a non-finite position, 1 a coordinate beyond `limit`, 2 a non-finite velocity, 3 a mass
// that is not finite, > 0 and at most `mass_cap` (src/backend/cuda/device_solutes.rs names them).
__device__ __forceinline__ bool mpc_solute_values_bad(const double r[3], const double v[3], double m, double limit,
                                                      double mass_cap, unsigned int i, unsigned int *first_bad) {
    bool bad = false;
    if (!(isfinite(r[0]) && isfinite(r[1]) && isfinite(r[2]))) {
        atomicMin(first_bad + 0, i);
        bad = true;
    } else if (fabs(r[0]) > limit || fabs(r[1]) > limit || fabs(r[2]) > limit) {
        atomicMin(first_bad + 1, i);
        bad = true;
    }
    if (!(isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]))) {
        atomicMin(first_bad + 2, i);
        bad = true;
    }
    if (!mpc_solute_mass_good(m, mass_cap)) {
        atomicMin(first_bad + 3, i);
        bad = true;
    }
    return bad;
}

// Solutes: bin on the shifted grid (f64 positions, anywhere: wrapped through Lees-Edwards
// periods) and add to the cell sums. The cell of slot t goes to scell[t], the image (any number
// of periods) to simage[t]; slots are solutes, or entries of `subset` (null: all solutes).
// With `first_bad` (else null) the values are checked as they are read (mpc_solute_values_bad,
// `limit` the coordinate bound): a bad solute adds nothing and its cell is MPC_DEAD, so the host
// reads first_bad before the fluid moves and refuses the step.
extern "C" __global__ void mpc_solute_bin(MpcParams p, const double *__restrict__ spos,
                                          const double *__restrict__ svel, const double *__restrict__ smass,
                                          unsigned int *__restrict__ scell, int *__restrict__ simage,
                                          double *cells, const unsigned int *__restrict__ subset,
                                          unsigned int *first_bad, double limit) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n_solutes) {
        return;
    }
    unsigned int i = mpc_solute_of_slot(subset, t);
    double r[3] = {spos[3 * i], spos[3 * i + 1], spos[3 * i + 2]};
    double v[3] = {svel[3 * i], svel[3 * i + 1], svel[3 * i + 2]};
    double m = smass[i];
    if (first_bad != nullptr && mpc_solute_values_bad(r, v, m, limit, p.solute_mass_cap, i, first_bad)) {
        scell[t] = MPC_DEAD;
        simage[t] = 0;
        return;
    }
    MpcLocation loc = mpc_locate_solute(p, r[0], r[1], r[2]);
    unsigned int c = mpc_local_cell(p, loc.cell);
    scell[t] = c;
    simage[t] = loc.image;
    if (c == MPC_DEAD) {  // slab mode: another GPU owns this solute's cell
        return;
    }
    loc.cell = c;
    double w0 = v[0] + mpc_image_velocity(p, loc.image);
    mpc_add_solute_to_cell(p, cells, loc.cell, m, w0, v[1], v[2]);
}

// One solute's collision (Physics::collide) and its share of the collisional stress,
// m (u_x - v_x) (y - y_cell) of its binned position, as the CPU's collide pass (0 when not
// measured; the mass *sm is read only then).
__device__ __forceinline__ double mpc_solute_collide_one(const MpcParams &p, unsigned int c, int image,
                                                         const double *cells, const double *spos, const double *sm,
                                                         double *sv) {
    double cp[8];
    mpc_load_params(cells, c, cp);
    double v[3] = {sv[0], sv[1], sv[2]};
    double u[3];
    mpc_collide(p, cp, image, v, u);
    double coll = 0.0;
    if (p.measure_stress && cp[7] != 0.0) {
        MpcLocation loc = mpc_locate_solute(p, spos[0], spos[1], spos[2]);
        coll = mpc_global_term(p, MPC_GLOBAL_MOMENTUM, *sm * (u[0] - v[0]) * loc.y_in_cell);
    }
    sv[0] = u[0];
    sv[1] = u[1];
    sv[2] = u[2];
    return coll;
}

// Solutes in mpcbox's buffers: collide in place (slab mode: zeros for solutes another GPU owns).
// report[3] += their collisional stress when measured (every thread reaches the block sum).
extern "C" __global__ void mpc_solute_collide(MpcParams p, const unsigned int *__restrict__ scell,
                                              const int *__restrict__ simage, const double *__restrict__ cells,
                                              double *__restrict__ svel, const double *__restrict__ spos,
                                              const double *__restrict__ smass, double *report) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double coll = 0.0;
    if (i < p.n_solutes) {
        unsigned int c = scell[i];
        if (c == MPC_DEAD) {
            // slab mode: the owning GPU writes this solute; the host adds the GPUs' outputs
            svel[3 * i] = 0.0;
            svel[3 * i + 1] = 0.0;
            svel[3 * i + 2] = 0.0;
        } else {
            coll = mpc_solute_collide_one(p, c, simage[i], cells, spos + 3 * i, smass + i, svel + 3 * i);
        }
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3, MPC_REPORT_WORDS);
    }
}

// Several GPUs, solutes held on one of them: each GPU collides the solutes in its own cells and
// writes their velocities straight into the home GPU's array (peer memory over NVLink); the
// solutes of other GPUs' cells are left alone (their owner writes them and adds their stress).
// Slots as mpc_solute_bin's (`subset` the same).
extern "C" __global__ void mpc_solute_collide_owned(MpcParams p, const unsigned int *__restrict__ scell,
                                                    const int *__restrict__ simage,
                                                    const double *__restrict__ cells, double *svel,
                                                    const double *spos, const double *smass, double *report,
                                                    const unsigned int *__restrict__ subset) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    double coll = 0.0;
    if (t < p.n_solutes && scell[t] != MPC_DEAD) {
        unsigned int i = mpc_solute_of_slot(subset, t);
        coll = mpc_solute_collide_one(p, scell[t], simage[t], cells, spos + 3 * i, smass + i, svel + 3 * i);
    }
    if (p.measure_stress) {
        mpc_block_add(coll, report + 3, MPC_REPORT_WORDS);
    }
}
