// Validation of device-resident solutes (src/backend/cuda/device_solutes.rs): the first index
// of each kind of bad value, before the fluid moves.

// first_bad[k] = the lowest solute index with a non-finite position (k = 0), a coordinate beyond
// `limit` (1), a non-finite velocity (2), a mass that is not finite and > 0 (3); untouched
// (0xffffffff) where none. Over the n solutes, or over the n listed in `subset` (null: all).
extern "C" __global__ void mpc_check_solutes(const double *__restrict__ spos, const double *__restrict__ svel,
                                             const double *__restrict__ smass, unsigned int n, double limit,
                                             unsigned int *first_bad, const unsigned int *__restrict__ subset) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) {
        return;
    }
    unsigned int i = subset ? subset[t] : t;
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
