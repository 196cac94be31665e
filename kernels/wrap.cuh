// Periodic wrapping (a mirror of physics::wrap_f64 and wrap_coordinate), first in both the
// fluid's and the MD engine's units, so that the distance field's projections (wall_field.cuh)
// and the fluid's step (mpc.cuh) share one copy.
#pragma once

// physics::wrap_f64: x in [0, l); a coordinate already there as it is (no division: the common
// case).
__device__ __forceinline__ double mpc_wrap_f64(double x, double l) {
    if (x >= 0.0 && x < l) {
        return x;
    }
    double r = x - l * floor(x / l);
    if (r < 0.0) {
        r += l;
    }
    if (r >= l) {
        r -= l;
    }
    return r;
}

// physics::wrap_coordinate: wrapped and stored as f32 (a value that rounds up to l becomes 0).
__device__ __forceinline__ float mpc_wrap_coordinate(double x, double l) {
    float f = (float)mpc_wrap_f64(x, l);
    if (f >= (float)l) {
        return 0.0f;
    }
    return f;
}
