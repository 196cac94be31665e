// The MD engine decomposed over the fluid's y slabs (launched from src/md/gpu/slabs/exchange.rs).
// Every slab keeps all particles at their global index, but only those in its halo band (its
// layers +/- the halo) are current; a particle leaving the band is sent once more, so a stale
// copy always lies outside the band. md_slab_pack collects the particles a neighbour needs into
// records; md_slab_unpack writes them at their indices on the neighbour.
#ifndef MPCBOX_NVRTC
#include "md.cu"
#endif

// Records: MD_SLAB_WORDS and md_write_record in md_items.cuh (md_first_half writes them too).

// What a slab sends (SlabSend in exchange.rs):
// 0: particles it owned at the step's start (y_prev) that are in the band before or after the drift
// 1: particles it owns now that are in the band
// 2: particles whose velocity its collision changed (differs from vel_before) that are in the band
// (MD_SEND_*, from the generated header)

__device__ __forceinline__ bool md_bits_differ(double a, double b) {
    return __double_as_longlong(a) != __double_as_longlong(b);
}

// Records of the particles `mode` selects for the band [band_lo, band_hi) into `out` (capacity
// `cap` records); `count` (zero on entry) ends as the number selected, possibly above cap (the
// host then grows the buffer and packs again). `count` is a word of the sender's flags. Over the
// slab's work list (`work`, m items) for the modes that send only particles the slab owns (all
// candidates of its last list build), over all n otherwise (work null, m = n).
extern "C" __global__ void md_slab_pack(unsigned int n, int mode, const double *pos, const double *vel,
                                        const int *image, const double *built_at, const double *force,
                                        const double *y_prev, const double *vel_before, double ly, double own_lo,
                                        double own_hi, double band_lo, double band_hi, unsigned int cap,
                                        double *out, unsigned int *count, unsigned int m,
                                        const unsigned int *work) {
    unsigned int i;
    if (!md_item(m, work, &i)) {
        return;
    }
    double y = pos[3 * i + 1];
    bool send;
    switch (mode) {
    case MD_SEND_DRIFTED: {
        double y0 = y_prev[i];
        send = md_owns(y0, ly, own_lo, own_hi) &&
               (md_in_band(y0, ly, band_lo, band_hi) || md_in_band(y, ly, band_lo, band_hi));
        break;
    }
    case MD_SEND_OWNED:
        send = md_owns(y, ly, own_lo, own_hi) && md_in_band(y, ly, band_lo, band_hi);
        break;
    case MD_SEND_COLLIDED:
        send = (md_bits_differ(vel[3 * i], vel_before[3 * i]) || md_bits_differ(vel[3 * i + 1], vel_before[3 * i + 1]) ||
                md_bits_differ(vel[3 * i + 2], vel_before[3 * i + 2])) &&
               md_in_band(y, ly, band_lo, band_hi);
        break;
    default:
        __trap();
    }
    if (!send) {
        return;
    }
    unsigned int slot = md_warp_slot(count);
    if (slot >= cap) {
        return;
    }
    md_write_record(out + (size_t)slot * MD_SLAB_WORDS, i, pos, vel, image, built_at, force);
}

// Write min(*count, limit) records at their particles' indices (one thread per slot of the
// `limit` copied; the count comes with them).
extern "C" __global__ void md_slab_unpack(const unsigned int *count, unsigned int limit, const double *rec,
                                          double *pos, double *vel, int *image, double *built_at, double *force) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int m = *count < limit ? *count : limit;
    if (t >= m) {
        return;
    }
    const double *r = rec + (size_t)t * MD_SLAB_WORDS;
    unsigned int i = (unsigned int)r[0];
    for (int k = 0; k < 3; ++k) {
        pos[3 * i + k] = r[1 + k];
        vel[3 * i + k] = r[4 + k];
        image[3 * i + k] = (int)r[7 + k];
        built_at[3 * i + k] = r[10 + k];
        force[3 * i + k] = r[13 + k];
    }
}

// out[i] = vel[i] (three values) for each particle i of the slab's list (`work`, m items): the
// velocities before a collision, against which md_slab_pack (MD_SEND_COLLIDED, over the same
// list) finds the ones the collision changed.
extern "C" __global__ void md_slab_snapshot_velocities(unsigned int m, const unsigned int *work, const double *vel,
                                                       double *out) {
    unsigned int i;
    if (!md_item(m, work, &i)) {
        return;
    }
    for (int k = 0; k < 3; ++k) {
        out[3 * i + k] = vel[3 * i + k];
    }
}
