// Validation of device-resident solutes (src/backend/cuda/device_solutes.rs): the first index
// of each kind of bad value, before the fluid moves (mpc_solute_values_bad, solutes.cu; the
// binning runs the same check where it bins before pass 1).
#ifndef MPCBOX_NVRTC
#include "solutes.cu"
#endif

// first_bad[k] = the lowest solute index with a non-finite position (k = 0), a coordinate beyond
// `limit` (1), a non-finite velocity (2), a mass that is not finite, > 0 and at most `mass_cap`
// (3); untouched (0xffffffff) where none. Over the n solutes, or over the n listed in `subset` (null: all).
extern "C" __global__ void mpc_check_solutes(const double *__restrict__ spos, const double *__restrict__ svel,
                                             const double *__restrict__ smass, unsigned int n, double limit,
                                             double mass_cap, unsigned int *first_bad, const unsigned int *__restrict__ subset) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) {
        return;
    }
    unsigned int i = subset ? subset[t] : t;
    double r[3] = {spos[3 * i], spos[3 * i + 1], spos[3 * i + 2]};
    double v[3] = {svel[3 * i], svel[3 * i + 1], svel[3 * i + 2]};
    mpc_solute_values_bad(r, v, smass[i], limit, mass_cap, i, first_bad);
}
