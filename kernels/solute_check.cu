// Device-resident solutes (launched by src/backend/cuda/device_solutes.rs): check the caller's
// arrays before a step changes anything, as Solvent::check_solutes does for host arrays.
// first_bad[k] (set to 0xffffffff before the launch) receives the lowest offending index for
// k = 0: non-finite position, 1: a coordinate beyond `limit`, 2: non-finite velocity,
// 3: mass not finite or <= 0.

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
