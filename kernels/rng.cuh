// Per-cell random numbers on the GPU: a line-by-line mirror of src/rng.rs.
//
// Philox4x32-10 keyed by the run seed, counter [block, cell, step_lo, (step_hi & 0xffff) |
// purpose << 16]; everything after the raw words uses only IEEE-exact operations and det_ln, and
// the module is compiled with --fmad=false, so every draw equals the CPU's bit for bit.
// Changing the order of operations here or in src/rng.rs means changing it in both.
#pragma once

#define MPC_PHILOX_M0 0xD2511F53u
#define MPC_PHILOX_M1 0xCD9E8D57u
#define MPC_PHILOX_W0 0x9E3779B9u
#define MPC_PHILOX_W1 0xBB67AE85u
// The streams' purposes (MPC_PURPOSE_*): from the generated header (rng::CellStreamPurpose).

typedef unsigned long long mpc_u64;

struct MpcWords4 {
    unsigned int w[4];
};

__device__ __forceinline__ MpcWords4 mpc_philox4x32_10(MpcWords4 c, unsigned int k0, unsigned int k1) {
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += MPC_PHILOX_W0;
            k1 += MPC_PHILOX_W1;
        }
        unsigned int hi0 = __umulhi(MPC_PHILOX_M0, c.w[0]);
        unsigned int lo0 = MPC_PHILOX_M0 * c.w[0];
        unsigned int hi1 = __umulhi(MPC_PHILOX_M1, c.w[2]);
        unsigned int lo1 = MPC_PHILOX_M1 * c.w[2];
        MpcWords4 n;
        n.w[0] = hi1 ^ c.w[1] ^ k0;
        n.w[1] = lo1;
        n.w[2] = hi0 ^ c.w[3] ^ k1;
        n.w[3] = lo0;
        c = n;
    }
    return c;
}

// A uniform double in [0, 1) with 53 random bits, from two 32-bit words.
__device__ __forceinline__ double mpc_u01_from_words(unsigned int a, unsigned int b) {
    mpc_u64 bits = (((mpc_u64)(a >> 5)) << 26) | ((mpc_u64)(b >> 6));
    return (double)bits * (1.0 / 9007199254740992.0);
}

#define MPC_LN2_HI 6.93147180369123816490e-01
#define MPC_LN2_LO 1.90821492927058770002e-10
#define MPC_SQRT_HALF 0.70710678118654752440
#define MPC_F64_MIN_POSITIVE 2.2250738585072014e-308

// Natural logarithm from IEEE-exact operations only (mirror of rng::det_ln).
__device__ __noinline__ double mpc_det_ln(double x) {
    if (!(x > 0.0)) {
        return __longlong_as_double(0x7ff8000000000000LL);
    }
    if (x == __longlong_as_double(0x7ff0000000000000LL)) {
        return x;
    }
    long long e = 0;
    if (x < MPC_F64_MIN_POSITIVE) {
        x *= 18014398509481984.0;  // 2^54
        e -= 54;
    }
    mpc_u64 bits = (mpc_u64)__double_as_longlong(x);
    e += (long long)((bits >> 52) & 0x7ff) - 1023;
    double m = __longlong_as_double((long long)((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL));
    if (m > 2.0 * MPC_SQRT_HALF) {
        m *= 0.5;
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double z = s * s;
    double p = 1.0 / 23.0;
    p = p * z + 1.0 / 21.0;
    p = p * z + 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    double ln_m = 2.0 * s + 2.0 * s * (z * p);
    double ef = (double)e;
    return ef * MPC_LN2_HI + (ef * MPC_LN2_LO + ln_m);
}

// mpc_det_ln of two values at once (the same operations on each, interleaved, so the two
// dependent chains overlap): for normal positive finite inputs, the only ones Box-Muller
// passes (1 - u in [2^-53, 1]); anything else goes through mpc_det_ln itself.
__device__ __forceinline__ void mpc_det_ln_pair(double x0, double x1, double *y0, double *y1) {
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    if (!(x0 >= MPC_F64_MIN_POSITIVE && x0 < inf && x1 >= MPC_F64_MIN_POSITIVE && x1 < inf)) {
        *y0 = mpc_det_ln(x0);
        *y1 = mpc_det_ln(x1);
        return;
    }
    mpc_u64 b0 = (mpc_u64)__double_as_longlong(x0);
    mpc_u64 b1 = (mpc_u64)__double_as_longlong(x1);
    long long e0 = (long long)((b0 >> 52) & 0x7ff) - 1023;
    long long e1 = (long long)((b1 >> 52) & 0x7ff) - 1023;
    double m0 = __longlong_as_double((long long)((b0 & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL));
    double m1 = __longlong_as_double((long long)((b1 & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL));
    if (m0 > 2.0 * MPC_SQRT_HALF) {
        m0 *= 0.5;
        e0 += 1;
    }
    if (m1 > 2.0 * MPC_SQRT_HALF) {
        m1 *= 0.5;
        e1 += 1;
    }
    double s0 = (m0 - 1.0) / (m0 + 1.0);
    double s1 = (m1 - 1.0) / (m1 + 1.0);
    double z0 = s0 * s0;
    double z1 = s1 * s1;
    double p0 = 1.0 / 23.0;
    double p1 = 1.0 / 23.0;
    const double c[10] = {1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0,
                          1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,  1.0 / 3.0};
#pragma unroll
    for (int k = 0; k < 10; ++k) {
        p0 = p0 * z0 + c[k];
        p1 = p1 * z1 + c[k];
    }
    double ln_m0 = 2.0 * s0 + 2.0 * s0 * (z0 * p0);
    double ln_m1 = 2.0 * s1 + 2.0 * s1 * (z1 * p1);
    double ef0 = (double)e0;
    double ef1 = (double)e1;
    *y0 = ef0 * MPC_LN2_HI + (ef0 * MPC_LN2_LO + ln_m0);
    *y1 = ef1 * MPC_LN2_HI + (ef1 * MPC_LN2_LO + ln_m1);
}

// A Philox word stream at one address (mirror of rng::CellStream).
struct MpcCellStream {
    unsigned int key0, key1;
    MpcWords4 counter;
    MpcWords4 block;
    unsigned int used;
};

__device__ __forceinline__ MpcCellStream mpc_cell_stream(mpc_u64 seed, mpc_u64 step, unsigned int cell,
                                                         unsigned int purpose) {
    MpcCellStream s;
    s.key0 = (unsigned int)seed;
    s.key1 = (unsigned int)(seed >> 32);
    s.counter.w[0] = 0;
    s.counter.w[1] = cell;
    s.counter.w[2] = (unsigned int)step;
    s.counter.w[3] = (((unsigned int)(step >> 32)) & 0xffffu) | (purpose << 16);
    s.used = 4;
    return s;
}

__device__ __forceinline__ MpcCellStream mpc_particle_stream(mpc_u64 seed, mpc_u64 index) {
    MpcCellStream s;
    s.key0 = (unsigned int)seed;
    s.key1 = (unsigned int)(seed >> 32);
    s.counter.w[0] = 0;
    s.counter.w[1] = (unsigned int)index;
    s.counter.w[2] = (unsigned int)(index >> 32);
    s.counter.w[3] = 0xffffffffu;
    s.used = 4;
    return s;
}

// CellStream::for_particle_in_cell: the cell stream of MPC-AT's draws, keyed by seed ^ key.
__device__ __forceinline__ MpcCellStream mpc_particle_cell_stream(mpc_u64 seed, mpc_u64 step, unsigned int cell,
                                                                  mpc_u64 particle_key) {
    MpcCellStream s = mpc_cell_stream(seed, step, cell, MPC_PURPOSE_ANDERSEN_VELOCITY);
    mpc_u64 k = seed ^ particle_key;
    s.key0 = (unsigned int)k;
    s.key1 = (unsigned int)(k >> 32);
    return s;
}

__device__ __forceinline__ unsigned int mpc_next_u32(MpcCellStream *s) {
    if (s->used == 4) {
        s->block = mpc_philox4x32_10(s->counter, s->key0, s->key1);
        s->counter.w[0] += 1u;
        s->used = 0;
    }
    unsigned int w;
    switch (s->used) {
        case 0: w = s->block.w[0]; break;
        case 1: w = s->block.w[1]; break;
        case 2: w = s->block.w[2]; break;
        default: w = s->block.w[3]; break;
    }
    s->used += 1;
    return w;
}

__device__ __forceinline__ double mpc_uniform(MpcCellStream *s) {
    unsigned int a = mpc_next_u32(s);
    unsigned int b = mpc_next_u32(s);
    return mpc_u01_from_words(a, b);
}

// Standard normal by Marsaglia's polar method.
__device__ __forceinline__ double mpc_normal(MpcCellStream *s) {
    for (;;) {
        double v1 = 2.0 * mpc_uniform(s) - 1.0;
        double v2 = 2.0 * mpc_uniform(s) - 1.0;
        double q = v1 * v1 + v2 * v2;
        if (q < 1.0 && q > 0.0) {
            return v1 * sqrt(-2.0 * mpc_det_ln(q) / q);
        }
    }
}

// CellStream::normal_pair: both values of an accepted polar-method pair.
__device__ __forceinline__ void mpc_normal_pair(MpcCellStream *s, double *a, double *b) {
    for (;;) {
        double v1 = 2.0 * mpc_uniform(s) - 1.0;
        double v2 = 2.0 * mpc_uniform(s) - 1.0;
        double q = v1 * v1 + v2 * v2;
        if (q < 1.0 && q > 0.0) {
            double f = sqrt(-2.0 * mpc_det_ln(q) / q);
            *a = v1 * f;
            *b = v2 * f;
            return;
        }
    }
}

#define MPC_FRAC_PI_2 1.5707963267948966192313216916397514

// rng::det_sincos_turn: sin(2 pi u) and cos(2 pi u) for u in [0, 1) from IEEE-exact operations.
__device__ __forceinline__ void mpc_det_sincos_turn(double u, double *sin_out, double *cos_out) {
    double x = 4.0 * u;
    double q = floor(x);
    double f = x - q;
    bool swap = f > 0.5;
    if (swap) {
        f = 1.0 - f;
    }
    double a = f * MPC_FRAC_PI_2;
    double z = a * a;
    double ps = 1.0 / 355687428096000.0;
    ps = ps * z - 1.0 / 1307674368000.0;
    ps = ps * z + 1.0 / 6227020800.0;
    ps = ps * z - 1.0 / 39916800.0;
    ps = ps * z + 1.0 / 362880.0;
    ps = ps * z - 1.0 / 5040.0;
    ps = ps * z + 1.0 / 120.0;
    ps = ps * z - 1.0 / 6.0;
    double sin_a = a + a * (z * ps);
    double pc = -1.0 / 6402373705728000.0;
    pc = pc * z + 1.0 / 20922789888000.0;
    pc = pc * z - 1.0 / 87178291200.0;
    pc = pc * z + 1.0 / 479001600.0;
    pc = pc * z - 1.0 / 3628800.0;
    pc = pc * z + 1.0 / 40320.0;
    pc = pc * z - 1.0 / 720.0;
    pc = pc * z + 1.0 / 24.0;
    double cos_a = 1.0 - 0.5 * z + z * (z * pc);
    double s = swap ? cos_a : sin_a;
    double c = swap ? sin_a : cos_a;
    switch ((unsigned int)q) {
        case 0: *sin_out = s; *cos_out = c; break;
        case 1: *sin_out = c; *cos_out = -s; break;
        case 2: *sin_out = -s; *cos_out = -c; break;
        default: *sin_out = -c; *cos_out = s; break;
    }
}

// MPC-AT's three normals (CellStream::normal3). MPC_AT_NORMALS=1 (default): Box-Muller, the
// CPU's draws. MPC_AT_NORMALS=0: the first version's polar method (a pair, then the first of a
// second pair), kept only to measure it against Box-Muller: its draws differ from the CPU's.
#ifndef MPC_AT_NORMALS
#define MPC_AT_NORMALS 1
#endif
__device__ __forceinline__ void mpc_normal3(MpcCellStream *s, double out[3]) {
#if MPC_AT_NORMALS
    double u1 = mpc_uniform(s);
    double u2 = mpc_uniform(s);
    double u3 = mpc_uniform(s);
    double u4 = mpc_uniform(s);
    double l1, l3;
    mpc_det_ln_pair(1.0 - u1, 1.0 - u3, &l1, &l3);
    double r1 = sqrt(-2.0 * l1);
    double r2 = sqrt(-2.0 * l3);
    double s1, c1, s2, c2;
    mpc_det_sincos_turn(u2, &s1, &c1);
    mpc_det_sincos_turn(u4, &s2, &c2);
    out[0] = r1 * c1;
    out[1] = r1 * s1;
    out[2] = r2 * c2;
#else
    double unused;
    mpc_normal_pair(s, &out[0], &out[1]);
    mpc_normal_pair(s, &out[2], &unused);
#endif
}

// Gamma(shape, 1) for shape >= 1 by Marsaglia and Tsang (2000).
__device__ __noinline__ double mpc_gamma(MpcCellStream *s, double shape) {
    double d = shape - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = mpc_normal(s);
        double v = 1.0 + c * x;
        if (v <= 0.0) {
            continue;
        }
        v = v * v * v;
        double u = mpc_uniform(s);
        double x2 = x * x;
        if (u < 1.0 - 0.0331 * (x2 * x2)) {
            return d * v;
        }
        if (mpc_det_ln(u) < 0.5 * x2 + d * (1.0 - v + mpc_det_ln(v))) {
            return d * v;
        }
    }
}

// A uniformly distributed unit vector (Marsaglia 1972).
__device__ __forceinline__ void mpc_unit_vector(MpcCellStream *s, double out[3]) {
    for (;;) {
        double x1 = 2.0 * mpc_uniform(s) - 1.0;
        double x2 = 2.0 * mpc_uniform(s) - 1.0;
        double q = x1 * x1 + x2 * x2;
        if (q < 1.0) {
            double r = 2.0 * sqrt(1.0 - q);
            out[0] = x1 * r;
            out[1] = x2 * r;
            out[2] = 1.0 - 2.0 * q;
            return;
        }
    }
}

__device__ __forceinline__ void mpc_cell_rotation_axis(mpc_u64 seed, mpc_u64 step, unsigned int cell, double out[3]) {
    MpcCellStream s = mpc_cell_stream(seed, step, cell, MPC_PURPOSE_ROTATION_AXIS);
    mpc_unit_vector(&s, out);
}

__device__ __forceinline__ double mpc_cell_thermostat_energy(mpc_u64 seed, mpc_u64 step, unsigned int cell,
                                                             unsigned int n, double kt) {
    double shape = 1.5 * ((double)n - 1.0);
    MpcCellStream s = mpc_cell_stream(seed, step, cell, MPC_PURPOSE_THERMOSTAT);
    return kt * mpc_gamma(&s, shape);
}

// rng::splitmix64.
__device__ __forceinline__ mpc_u64 mpc_splitmix64(mpc_u64 z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// rng::fluid_particle_key: a hash of the stored f32 position bits.
__device__ __forceinline__ mpc_u64 mpc_fluid_particle_key(float x, float y, float z) {
    mpc_u64 xy = (mpc_u64)__float_as_uint(x) | ((mpc_u64)__float_as_uint(y) << 32);
    return mpc_splitmix64(mpc_splitmix64(xy) ^ (mpc_u64)__float_as_uint(z));
}

#define MPC_SOLUTE_KEY_TAG 0x50177E5A11CED00DULL

// rng::solute_particle_key: a hash of the f64 position bits handed over by the caller.
__device__ __forceinline__ mpc_u64 mpc_solute_particle_key(double x, double y, double z) {
    mpc_u64 h = mpc_splitmix64((mpc_u64)__double_as_longlong(x) ^ MPC_SOLUTE_KEY_TAG);
    h = mpc_splitmix64(h ^ (mpc_u64)__double_as_longlong(y));
    return mpc_splitmix64(h ^ (mpc_u64)__double_as_longlong(z));
}
