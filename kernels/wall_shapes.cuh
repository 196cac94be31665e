// Wall shapes of their own files (a mirror of src/physics/walls/pore.rs and cosine.rs): the
// planar pore and the cosine walls, operation by operation (compiled with --fmad=false), and the
// f32 steps of geometry.rs. Included before walls.cuh, whose MpcWalls union holds these shapes
// and whose switches call these functions in their cases.
#pragma once

// geometry::f32_step_towards: the f32 next to x (>= 0) towards target.
__device__ __forceinline__ float mpc_f32_step_towards(float x, double target) {
    if ((double)x > target) {
        return x > 0.0f ? __uint_as_float(__float_as_uint(x) - 1u) : x;
    } else if ((double)x < target) {
        return __uint_as_float(__float_as_uint(x) + 1u);
    }
    return x;
}

// geometry::f32_step_away: the f32 next to x (> 0) away from `from`.
__device__ __forceinline__ float mpc_f32_step_away(float x, double from) {
    if ((double)x > from) {
        return __uint_as_float(__float_as_uint(x) + 1u);
    } else if ((double)x < from && x > 0.0f) {
        return __uint_as_float(__float_as_uint(x) - 1u);
    }
    return x;
}

// ---- The planar pore (PlanarPore) ----

// A pore of a box with centre (xc, yc): the block's half-length hl along x and the pore's
// half-height hh across y.
struct MpcWallPore {
    double xc, yc, hl, hh, unused0, unused1;
};

// pore::fold: d folded into [-c, c] for a period of 2c.
__device__ __forceinline__ double mpc_pore_fold(double d, double c) {
    if (d > c) {
        return d - 2.0 * c;
    } else if (d < -c) {
        return d + 2.0 * c;
    }
    return d;
}

// pore::side: +1 for d >= 0, -1 below.
__device__ __forceinline__ double mpc_pore_side(double d) { return d < 0.0 ? -1.0 : 1.0; }

// PlanarPore::offset.
__device__ __forceinline__ void mpc_pore_offset(const MpcWallPore &p, double x, double y, double *dx, double *dy) {
    *dx = mpc_pore_fold(x - p.xc, p.xc);
    *dy = mpc_pore_fold(y - p.yc, p.yc);
}

// PlanarPore::in_solid.
__device__ __forceinline__ bool mpc_pore_in_solid(const MpcWallPore &p, double dx, double dy) {
    return fabs(dx) < p.hl && fabs(dy) > p.hh;
}

// PlanarPore::plate_nearer.
__device__ __forceinline__ bool mpc_pore_plate_nearer(const MpcWallPore &p, double dx, double dy) {
    return fabs(dy) - p.hh <= p.hl - fabs(dx);
}

// The fluid-side distance components (ex, ey) of PlanarPore::signed_distance and normal.
__device__ __forceinline__ void mpc_pore_excess(const MpcWallPore &p, double dx, double dy, double *ex, double *ey) {
    double ax = fabs(dx), ay = fabs(dy);
    *ex = ax > p.hl ? ax - p.hl : 0.0;
    *ey = ay < p.hh ? p.hh - ay : 0.0;
}

// PlanarPore::signed_distance.
__device__ __forceinline__ double mpc_pore_signed_distance(const MpcWallPore &p, const double r[3]) {
    double dx, dy;
    mpc_pore_offset(p, r[0], r[1], &dx, &dy);
    if (mpc_pore_in_solid(p, dx, dy)) {
        double to_plate = fabs(dy) - p.hh;
        double to_end = p.hl - fabs(dx);
        return -(to_plate < to_end ? to_plate : to_end);
    }
    double ex, ey;
    mpc_pore_excess(p, dx, dy, &ex, &ey);
    return sqrt(ex * ex + ey * ey);
}

// PlanarPore::normal.
__device__ __forceinline__ void mpc_pore_normal(const MpcWallPore &p, const double r[3], double n[3]) {
    double dx, dy;
    mpc_pore_offset(p, r[0], r[1], &dx, &dy);
    n[2] = 0.0;
    if (!mpc_pore_in_solid(p, dx, dy)) {
        double ex, ey;
        mpc_pore_excess(p, dx, dy, &ex, &ey);
        double d = sqrt(ex * ex + ey * ey);
        if (d > 0.0) {
            n[0] = mpc_pore_side(dx) * ex / d;
            n[1] = -mpc_pore_side(dy) * ey / d;
            return;
        }
    }
    if (mpc_pore_plate_nearer(p, dx, dy)) {
        n[0] = 0.0;
        n[1] = -mpc_pore_side(dy);
    } else {
        n[0] = mpc_pore_side(dx);
        n[1] = 0.0;
    }
}

// pore::slab: entry and exit times of p + v t through [lo, hi]; false if it stays outside.
__device__ __forceinline__ bool mpc_pore_slab(double p, double v, double lo, double hi, double *enter, double *leave) {
    if (v == 0.0) {
        if (p < lo || p > hi) {
            return false;
        }
        *enter = -__longlong_as_double(0x7ff0000000000000LL);
        *leave = __longlong_as_double(0x7ff0000000000000LL);
        return true;
    }
    double a = (lo - p) / v;
    double b = (hi - p) / v;
    *enter = a < b ? a : b;
    *leave = a < b ? b : a;
    return true;
}

// PlanarPore::block_entry: the entry and exit times of the block shifted by sx along x.
__device__ __forceinline__ bool mpc_pore_block_entry(const MpcWallPore &p, double dx, double dy, const double v[3],
                                                     double sx, double *enter, double *leave) {
    double x0, x1;
    if (!mpc_pore_slab(dx, v[0], sx - p.hl, sx + p.hl, &x0, &x1)) {
        return false;
    }
    double far = 2.0 * p.yc - p.hh;
    bool found = false;
    for (int half = 0; half < 2; ++half) {
        double lo = half == 0 ? p.hh : -far;
        double hi = half == 0 ? far : -p.hh;
        double y0, y1;
        if (mpc_pore_slab(dy, v[1], lo, hi, &y0, &y1)) {
            double e = x0 > y0 ? x0 : y0;
            double x = x1 < y1 ? x1 : y1;
            if (e <= x && x >= 0.0 && (!found || e < *enter)) {
                *enter = e;
                *leave = x;
                found = true;
            }
        }
    }
    return found;
}

// PlanarPore::time_of_impact before the step's limit: the first t >= 0, or -1.
__device__ __forceinline__ double mpc_pore_time_of_impact(const MpcWallPore &p, const double r[3], const double v[3]) {
    if (v[0] == 0.0 && v[1] == 0.0) {
        return -1.0;
    }
    double dx, dy;
    mpc_pore_offset(p, r[0], r[1], &dx, &dy);
    double period = 2.0 * p.xc;
    double first = -1.0;
    for (int k = 0; k < 3; ++k) {
        double sx = k == 0 ? -period : (k == 1 ? 0.0 : period);
        double enter, leave;
        if (mpc_pore_block_entry(p, dx, dy, v, sx, &enter, &leave)) {
            double t;
            if (enter >= 0.0) {
                t = enter;
            } else if (-enter <= leave) {
                t = 0.0;
            } else {
                continue;
            }
            if (first < 0.0 || t < first) {
                first = t;
            }
        }
    }
    return first;
}

// PlanarPore::cuts_cell.
__device__ __forceinline__ bool mpc_pore_cuts_cell(const MpcWallPore &p, const double lo[3]) {
    double x0 = lo[0] - p.xc, y0 = lo[1] - p.yc;
    double x1 = x0 + 1.0, y1 = y0 + 1.0;
    bool meets = x0 < p.hl && x1 > -p.hl && (y1 > p.hh || y0 < -p.hh);
    bool inside = x0 >= -p.hl && x1 <= p.hl && (y0 >= p.hh || y1 <= -p.hh);
    return meets && !inside;
}

// PlanarPore::keep_inside on (x, y); z is left alone.
__device__ __forceinline__ void mpc_pore_keep_inside(const MpcWallPore &p, float *x, float *y) {
    double dx, dy;
    mpc_pore_offset(p, (double)*x, (double)*y, &dx, &dy);
    if (!mpc_pore_in_solid(p, dx, dy)) {
        return;
    }
    bool plate = mpc_pore_plate_nearer(p, dx, dy);
    if (plate) {
        *y = (float)(p.yc + mpc_pore_side(dy) * p.hh);
    } else {
        *x = (float)(p.xc + mpc_pore_side(dx) * p.hl);
    }
    for (int k = 0; k < 8; ++k) {
        mpc_pore_offset(p, (double)*x, (double)*y, &dx, &dy);
        if (!mpc_pore_in_solid(p, dx, dy)) {
            break;
        }
        if (plate) {
            *y = mpc_f32_step_towards(*y, p.yc);
        } else {
            *x = mpc_f32_step_away(*x, p.xc);
        }
    }
}

// ---- The cosine walls (CosineWalls) ----

// Walls at yc +- hh + a cos(2 pi x / period) (the lower one -a cos when expansion = 1).
struct MpcWallCosine {
    double yc, hh, a, period, expansion, unused;
};

#define MPC_TWO_PI 6.283185307179586
// cosine::CONTACT_TOLERANCE and MAX_CONTACT_STEPS.
#define MPC_COSINE_CONTACT_TOLERANCE 1e-12
#define MPC_COSINE_MAX_CONTACT_STEPS 64

// cosine::cos_sin_turns: (cos 2 pi u, sin 2 pi u) from the Taylor polynomials of cosine::COS
// and cosine::SIN (the same literals) about the nearest quarter turn.
__device__ __forceinline__ void mpc_cos_sin_turns(double u, double *cu, double *su) {
    const double cc[9] = {1.0,
                          -0.5,
                          0.041666666666666664,
                          -0.001388888888888889,
                          2.48015873015873e-05,
                          -2.755731922398589e-07,
                          2.08767569878681e-09,
                          -1.1470745597729725e-11,
                          4.779477332387385e-14};
    const double sc[9] = {1.0,
                          -0.16666666666666666,
                          0.008333333333333333,
                          -0.0001984126984126984,
                          2.7557319223985893e-06,
                          -2.505210838544172e-08,
                          1.6059043836821613e-10,
                          -7.647163731819816e-13,
                          2.8114572543455206e-15};
    double q = floor(4.0 * u + 0.5);
    double r = (u - 0.25 * q) * MPC_TWO_PI;
    double r2 = r * r;
    double c = cc[8];
    double s = sc[8];
#pragma unroll
    for (int k = 7; k >= 0; --k) {
        c = c * r2 + cc[k];
        s = s * r2 + sc[k];
    }
    s = r * s;
    switch ((long long)q & 3) {
        case 0:
            *cu = c;
            *su = s;
            break;
        case 1:
            *cu = -s;
            *su = c;
            break;
        case 2:
            *cu = -c;
            *su = -s;
            break;
        default:
            *cu = s;
            *su = -c;
    }
}

// CosineWalls::lower_sign.
__device__ __forceinline__ double mpc_cosine_lower_sign(const MpcWallCosine &w) {
    return w.expansion != 0.0 ? -1.0 : 1.0;
}

// CosineWalls::walls_at: y_bottom, y_top and their slopes at x.
__device__ __forceinline__ void mpc_cosine_walls_at(const MpcWallCosine &w, double x, double *yb, double *yt,
                                                    double *db, double *dt) {
    double c, s;
    mpc_cos_sin_turns(x / w.period, &c, &s);
    double k = MPC_TWO_PI / w.period;
    double sb = mpc_cosine_lower_sign(w);
    double wave = w.a * c;
    double slope = -(w.a * k) * s;
    *yb = w.yc - w.hh + sb * wave;
    *yt = w.yc + w.hh + wave;
    *db = sb * slope;
    *dt = slope;
}

// CosineWalls::distances: the scaled gaps b (lower) and t (upper), the nearer wall, the slopes.
__device__ __forceinline__ unsigned int mpc_cosine_distances(const MpcWallCosine &w, const double r[3], double *b,
                                                             double *t, double *db, double *dt) {
    double yb, yt;
    mpc_cosine_walls_at(w, r[0], &yb, &yt, db, dt);
    double gb = r[1] - yb;
    double gt = yt - r[1];
    *b = gb / sqrt(1.0 + *db * *db);
    *t = gt / sqrt(1.0 + *dt * *dt);
    return *b < *t ? 0u : 1u;
}

// CosineWalls::signed_distance.
__device__ __forceinline__ double mpc_cosine_signed_distance(const MpcWallCosine &w, const double r[3]) {
    double b, t, db, dt;
    mpc_cosine_distances(w, r, &b, &t, &db, &dt);
    return b < t ? b : t;
}

// CosineWalls::normal.
__device__ __forceinline__ void mpc_cosine_normal(const MpcWallCosine &w, const double r[3], double n[3]) {
    double b, t, db, dt;
    unsigned int wall = mpc_cosine_distances(w, r, &b, &t, &db, &dt);
    if (wall == 0u) {
        double m = sqrt(1.0 + db * db);
        n[0] = -db / m;
        n[1] = 1.0 / m;
    } else {
        double m = sqrt(1.0 + dt * dt);
        n[0] = dt / m;
        n[1] = -1.0 / m;
    }
    n[2] = 0.0;
}

// CosineWalls::gap_along: wall `wall`'s vertical gap along r + v t, and its rate.
__device__ __forceinline__ void mpc_cosine_gap_along(const MpcWallCosine &w, unsigned int wall, const double r[3],
                                                     const double v[3], double t, double *value, double *rate) {
    double x = r[0] + v[0] * t;
    double y = r[1] + v[1] * t;
    double yb, yt, db, dt;
    mpc_cosine_walls_at(w, x, &yb, &yt, &db, &dt);
    if (wall == 0u) {
        *value = y - yb;
        *rate = v[1] - db * v[0];
    } else {
        *value = yt - y;
        *rate = dt * v[0] - v[1];
    }
}

// CosineWalls::first_contact: the first t in [0, dt] at which wall `wall`'s gap reaches zero,
// or -1.
__device__ __noinline__ double mpc_cosine_first_contact(MpcWallCosine w, unsigned int wall, double r0, double r1,
                                                        double v0, double v1, double dt) {
    const double r[3] = {r0, r1, 0.0};
    const double v[3] = {v0, v1, 0.0};
    double k = MPC_TWO_PI / w.period;
    double m = w.a * k * k * (v[0] * v[0]);
    double t = 0.0;
    double g, rate;
    mpc_cosine_gap_along(w, wall, r, v, t, &g, &rate);
    if (g <= 0.0) {
        return rate < 0.0 ? 0.0 : -1.0;
    }
    for (int it = 0; it < MPC_COSINE_MAX_CONTACT_STEPS; ++it) {
        if (g < MPC_COSINE_CONTACT_TOLERANCE && rate < 0.0) {
            return t;
        }
        double root = sqrt(rate * rate + 2.0 * m * g);
        double s;
        if (rate <= 0.0) {
            s = 2.0 * g / (root - rate);
        } else if (m > 0.0) {
            s = (rate + root) / m;
        } else {
            return -1.0;
        }
        t += s;
        if (!(t <= dt)) {
            return -1.0;
        }
        mpc_cosine_gap_along(w, wall, r, v, t, &g, &rate);
        if (g <= 0.0) {
            return t;
        }
    }
    return -1.0;
}

// CosineWalls::time_of_impact before the step's limit: the earlier wall's contact, or -1.
__device__ __forceinline__ double mpc_cosine_time_of_impact(const MpcWallCosine &w, const double r[3],
                                                            const double v[3], double dt) {
    double b = mpc_cosine_first_contact(w, 0u, r[0], r[1], v[0], v[1], dt);
    double t = mpc_cosine_first_contact(w, 1u, r[0], r[1], v[0], v[1], dt);
    if (b >= 0.0 && t >= 0.0) {
        return b < t ? b : t;
    }
    return b >= 0.0 ? b : t;
}

// CosineWalls::wall_range: the lowest and highest wall `wall` gets over [x0, x0 + 1].
__device__ __forceinline__ void mpc_cosine_wall_range(const MpcWallCosine &w, unsigned int wall, double x0,
                                                      double *low, double *high) {
    double u0 = x0 / w.period, u1 = (x0 + 1.0) / w.period;
    double c0, c1, s;
    mpc_cos_sin_turns(u0, &c0, &s);
    mpc_cos_sin_turns(u1, &c1, &s);
    double lo = c0 < c1 ? c0 : c1;
    double hi = c0 < c1 ? c1 : c0;
    double first = ceil(2.0 * u0);
    for (int i = 0; i < 2; ++i) {
        double j = i == 0 ? first : first + 1.0;
        if (j <= 2.0 * u1) {
            if (((long long)j & 1) == 0) {
                hi = 1.0;
            } else {
                lo = -1.0;
            }
        }
    }
    double sign = wall == 0u ? mpc_cosine_lower_sign(w) : 1.0;
    double base = wall == 0u ? w.yc - w.hh : w.yc + w.hh;
    double a = base + sign * (w.a * lo);
    double b = base + sign * (w.a * hi);
    *low = a < b ? a : b;
    *high = a < b ? b : a;
}

// CosineWalls::cuts_cell.
__device__ __forceinline__ bool mpc_cosine_cuts_cell(const MpcWallCosine &w, const double lo[3]) {
    double y0 = lo[1], y1 = lo[1] + 1.0;
    for (unsigned int wall = 0u; wall < 2u; ++wall) {
        double low, high;
        mpc_cosine_wall_range(w, wall, lo[0], &low, &high);
        if (low < y1 && y0 < high) {
            return true;
        }
    }
    return false;
}

// CosineWalls::keep_inside on y (x and z are left alone).
__device__ __forceinline__ float mpc_cosine_keep_inside(const MpcWallCosine &w, float x, float y) {
    double yb, yt, db, dt;
    mpc_cosine_walls_at(w, (double)x, &yb, &yt, &db, &dt);
    double gb = (double)y - yb;
    double gt = yt - (double)y;
    if (gb >= 0.0 && gt >= 0.0) {
        return y;
    }
    double mid = 0.5 * (yb + yt);
    float q = (float)(gb < 0.0 ? yb : yt);
    for (int k = 0; k < 8; ++k) {
        gb = (double)q - yb;
        gt = yt - (double)q;
        if (gb >= 0.0 && gt >= 0.0) {
            break;
        }
        q = mpc_f32_step_towards(q, mid);
    }
    return q;
}
