// The GPU MD engine's boundary and random numbers (mirrors of src/md/boundary.rs and
// src/md/random.rs): minimum images and wrapping in a periodic box, sheared by Lees-Edwards
// boundaries or not, the Philox normals of the Langevin step and the DPD pair noise. Compiled
// after rng.cuh and before md.cu, in one translation unit (backend::cuda::kernels::md_source).
#ifndef MPCBOX_NVRTC
#include "rng.cuh"
#endif

// ---- boundary and random numbers (md/boundary.rs, md/random.rs) ----

// boundary::min_image
__device__ __forceinline__ double md_min_image(double d, double l, double half) {
    if (d > half) {
        d -= l;
    } else if (d < -half) {
        d += l;
    }
    return d;
}

// PeriodicBox::delta_image: the minimum-image separation pi - r_j into d, across the y boundary
// to j's Lees-Edwards image (x shifted by `off`, the offset reduced to (-Lx/2, Lx/2]); *img gets
// that image (+1 above, -1 below, 0). Returns |d|^2.
// md_delta_image to a position already loaded (rj), so that a loop can load several first.
__device__ __forceinline__ double md_delta_to(const double pi[3], const double rj[3], const double l[3],
                                              const double hl[3], double off, double d[3], double *img) {
    double dx = pi[0] - rj[0];
    double dy = pi[1] - rj[1];
    *img = 0.0;
    if (dy > hl[1]) {
        dy -= l[1];
        dx -= off;
        *img = 1.0;
    } else if (dy < -hl[1]) {
        dy += l[1];
        dx += off;
        *img = -1.0;
    }
    d[0] = md_min_image(dx, l[0], hl[0]);
    d[1] = dy;
    d[2] = md_min_image(pi[2] - rj[2], l[2], hl[2]);
    return d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
}

__device__ __forceinline__ double md_delta_image(const double pi[3], const double *pos, unsigned int j,
                                                 const double l[3], const double hl[3], double off, double d[3],
                                                 double *img) {
    double rj[3] = {pos[3 * j], pos[3 * j + 1], pos[3 * j + 2]};
    return md_delta_to(pi, rj, l, hl, off, d, img);
}

// PeriodicBox::delta
__device__ __forceinline__ double md_delta(const double pi[3], const double *pos, unsigned int j, const double l[3],
                                           const double hl[3], double off, double d[3]) {
    double img;
    return md_delta_image(pi, pos, j, l, hl, off, d, &img);
}

// settings::add_outer: the tensor (xx, yy, zz, xy, xz, yz) of d (x) (s d) added into t.
__device__ __forceinline__ void md_add_outer(double t[6], double s, const double d[3]) {
    t[0] += s * d[0] * d[0];
    t[1] += s * d[1] * d[1];
    t[2] += s * d[2] * d[2];
    t[3] += s * d[0] * d[1];
    t[4] += s * d[0] * d[2];
    t[5] += s * d[1] * d[2];
}

// random::normals3 (Marsaglia polar, det_ln) with a precomputed key.
__device__ void md_normals3(unsigned int k0, unsigned int k1, unsigned int tag, mpc_u64 step, double out[3]) {
    int got = 0;
    unsigned int attempt = 0;
    while (got < 3) {
        MpcWords4 c;
        c.w[0] = tag;
        c.w[1] = attempt;
        c.w[2] = (unsigned int)step;
        c.w[3] = (unsigned int)(step >> 32);
        MpcWords4 w = mpc_philox4x32_10(c, k0, k1);
        attempt += 1;
        double v1 = 2.0 * mpc_u01_from_words(w.w[0], w.w[1]) - 1.0;
        double v2 = 2.0 * mpc_u01_from_words(w.w[2], w.w[3]) - 1.0;
        double s = v1 * v1 + v2 * v2;
        if (s < 1.0 && s > 0.0) {
            double f = sqrt(-2.0 * mpc_det_ln(s) / s);
            out[got] = v1 * f;
            got += 1;
            if (got < 3) {
                out[got] = v2 * f;
                got += 1;
            }
        }
    }
}

// random::dpd_theta
__device__ __forceinline__ double md_dpd_theta(unsigned int k0, unsigned int k1, unsigned int ti, unsigned int tj,
                                               mpc_u64 step) {
    MpcWords4 c;
    c.w[0] = ti < tj ? ti : tj;
    c.w[1] = ti < tj ? tj : ti;
    c.w[2] = (unsigned int)step;
    c.w[3] = (unsigned int)(step >> 32);
    MpcWords4 w = mpc_philox4x32_10(c, k0, k1);
    double u = mpc_u01_from_words(w.w[0], w.w[1]);
    return sqrt(3.0) * (2.0 * u - 1.0);
}

// DpdParams::weight_r
__device__ __forceinline__ double md_weight_r(double r, double rc, double s) {
    double x = 1.0 - r / rc;
    if (s == 1.0) {
        return x;
    } else if (s == 0.5) {
        return sqrt(x);
    } else if (s == 2.0) {
        return x * x;
    }
#ifdef MD_FMA_CHECK
    return x;
#else
    // libdevice pow (general exponents only; it uses FMA internally): within an ulp of powf
    return pow(x, s);
#endif
}

// The Lees-Edwards state of a step (boundary::LeesEdwards): the x shift delta in [0, Lx) of a
// crossing, its velocity jump, the whole periods of the total offset (image count correction),
// the offset reduced to (-Lx/2, Lx/2] for separations, and for the list check (Md::list_is_stale)
// delta at the last build, the strain gamma-dot tau since it and |strain| r_cut (infinite: rebuild);
// all zero and sheared = 0 without shear. Layout checked in md/gpu/integrate.rs (64 bytes).
struct MdShear {
    double offset, velocity, mi_offset, built_offset, strain, strain_slack;
    long long periods;
    int sheared;
};

// PeriodicBox::flow_displacement2: the displacement since the list build relative to the imposed
// flow (a y jump over Ly/2 is a crossing that moved x by the build's offset; x modulo Lx).
__device__ __forceinline__ double md_flow_displacement2(const double p[3], const double *built, unsigned int i,
                                                        const double l[3], const double hl[3], const MdShear &le) {
    double dx = p[0] - built[3 * i];
    double dy = p[1] - built[3 * i + 1];
    if (dy > hl[1]) {
        dy -= l[1];
        dx -= le.built_offset;
    } else if (dy < -hl[1]) {
        dy += l[1];
        dx += le.built_offset;
    }
    dx -= le.strain * (p[1] - hl[1]);
    dx -= l[0] * floor(dx / l[0] + 0.5);
    double dz = md_min_image(p[2] - built[3 * i + 2], l[2], hl[2]);
    return dx * dx + dy * dy + dz * dz;
}

// PeriodicBox::wrap of one coordinate: periods removed.
__device__ __forceinline__ double md_wrap_axis(double *x, double l) {
    double sh = floor(*x / l);
    *x -= sh * l;
    if (*x >= l) {
        *x -= l;
    }
    if (*x < 0.0) {
        *x = 0.0;
    }
    return sh;
}

// PeriodicBox::wrap: y first (a crossing moves x by -sh delta, vx by -sh gamma Ly), then x, z.
__device__ __forceinline__ void md_wrap(double p[3], double v[3], int *image, const double l[3],
                                        const MdShear &le) {
    if (p[1] >= l[1] || p[1] < 0.0) {
        double sh = md_wrap_axis(&p[1], l[1]);
        image[1] += (int)sh;
        if (sh != 0.0) {
            p[0] -= sh * le.offset;
            v[0] -= sh * le.velocity;
            image[0] -= (int)((long long)sh * le.periods);
        }
    }
    for (int k = 0; k < 3; k += 2) {
        if (p[k] >= l[k] || p[k] < 0.0) {
            image[k] += (int)md_wrap_axis(&p[k], l[k]);
        }
    }
}

