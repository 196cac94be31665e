// The GPU MD engine's pair, bond and angle forces (appended to md.cu, whose flags and pair
// parameters they use): one thread per particle over its Verlet list, or all pairs.
#ifndef MPCBOX_NVRTC
#include "md.cu"
#endif

// ---- forces (launched from md/gpu/forces.rs; the CPU computes are md/pair and md/bond) ----

// Particle i and what every pass over its neighbours reads.
struct MdSite {
    unsigned int i, n, nn; // the particle, the particle count, i's neighbour count
    unsigned int ti;       // i's type
    const unsigned int *list;
    const double *pos, *vel;
    const unsigned int *typ, *tag;
    double pi[3], l[3], hl[3];
    double off, le_vel; // Lees-Edwards: image offset in (-Lx/2, Lx/2], velocity jump
};

__device__ __forceinline__ MdSite md_site(unsigned int i, unsigned int n, const double *pos, const double *vel,
                                          const unsigned int *typ, const unsigned int *tag, const unsigned int *list,
                                          const unsigned int *nneigh, double lx, double ly, double lz,
                                          double off, double le_vel) {
    MdSite s;
    s.i = i;
    s.n = n;
    s.list = list;
    s.pos = pos;
    s.vel = vel;
    s.typ = typ;
    s.tag = tag;
    s.l[0] = lx;
    s.l[1] = ly;
    s.l[2] = lz;
    s.hl[0] = lx / 2.0;
    s.hl[1] = ly / 2.0;
    s.hl[2] = lz / 2.0;
    s.pi[0] = pos[3 * i];
    s.pi[1] = pos[3 * i + 1];
    s.pi[2] = pos[3 * i + 2];
    s.nn = nneigh[i];
    s.ti = typ[i];
    s.off = off;
    s.le_vel = le_vel;
    return s;
}

// Neighbour k of the site (column-major list).
__device__ __forceinline__ unsigned int md_neighbor(const MdSite &s, unsigned int k) {
    return s.list[(size_t)k * s.n + s.i];
}

// One LJ pair (i, j), j at rj: the force added to acc, and with `energy` the pair energy, virial
// and virial tensor.
template <bool FAST>
__device__ __forceinline__ void md_lj_pair(const MdSite &s, const MdPairLj *row, const MdPairLj &p0, unsigned int j,
                                           const double rj[3], int energy, double acc[3], double *ep, double *wp,
                                           double wt[6]) {
    double d[3], img;
    double r2 = md_delta_to(s.pi, rj, s.l, s.hl, s.off, d, &img);
    MdPairLj p = FAST ? p0 : row[s.typ[j]];
    if (r2 < p.rc2) {
        double inv2 = 1.0 / r2;
        double inv6 = inv2 * inv2 * inv2;
        double fr = inv6 * (p.lj1 * inv6 - p.lj2) * inv2;
        acc[0] += fr * d[0];
        acc[1] += fr * d[1];
        acc[2] += fr * d[2];
        if (energy) {
            *ep += inv6 * (p.lj3 * inv6 - p.lj4) - p.shift;
            *wp += fr * r2;
            md_add_outer(wt, fr, d);
        }
    }
}

// The positions of particles js[0 .. N) into rj, every load issued before any is used.
template <int N>
__device__ __forceinline__ void md_load_positions(const double *pos, const unsigned int js[N], double rj[N][3]) {
#pragma unroll
    for (int u = 0; u < N; ++u) {
        for (int c = 0; c < 3; ++c) {
            rj[u][c] = pos[3 * js[u] + c];
        }
    }
}

// Neighbours are taken MD_GATHER at a time, their positions all loaded before the first is
// used: the loads of a particle's scattered neighbours then overlap instead of each waiting for
// the last (the forces' warps had stalled on them). The sums run in list order as before.
#ifndef MD_GATHER
#define MD_GATHER 4
#endif

// LjKernel over i's list: the force is assigned to f, pair energy, virial and virial tensor added
// to *ep, *wp, wt when `energy`. FAST: one type, the coefficients are loaded once and neighbour
// types not read.
template <bool FAST>
__device__ __forceinline__ void md_lj_pass(const MdSite &s, const MdPairLj *lj, unsigned int ntypes, int energy,
                                           double f[3], double *ep, double *wp, double wt[6]) {
    double acc[3] = {0.0, 0.0, 0.0};
    const MdPairLj *row = lj + (FAST ? 0 : (size_t)s.ti * ntypes);
    MdPairLj p0 = row[0];
    for (unsigned int k0 = 0; k0 < s.nn; k0 += MD_GATHER) {
        unsigned int js[MD_GATHER];
        double rj[MD_GATHER][3];
#pragma unroll
        for (int u = 0; u < MD_GATHER; ++u) {
            js[u] = k0 + u < s.nn ? md_neighbor(s, k0 + u) : s.i;
        }
        md_load_positions<MD_GATHER>(s.pos, js, rj);
#pragma unroll
        for (int u = 0; u < MD_GATHER; ++u) {
            if (k0 + u >= s.nn) {
                break;
            }
            md_lj_pair<FAST>(s, row, p0, js[u], rj[u], energy, acc, ep, wp, wt);
        }
    }
    f[0] = acc[0];
    f[1] = acc[1];
    f[2] = acc[2];
}

// One DPD pass: the pair style (conservative: with the a_ij term, energy and virial) or the
// DPD thermostat (dissipative and random forces only).
struct MdDpdPass {
    double gamma, rc, s, noise;
    int conservative;
};

// DpdKernel over i's list: the force is added to f, conservative energy and virial to *ep, *wp,
// the virial tensor of every DPD force to wt (with `energy`). Across the sheared y boundary j's
// image moves gamma Ly faster (img = +1) or slower.
__device__ __forceinline__ void md_dpd_pass(const MdSite &s, const MdDpdPass &q, const double *dpd_a,
                                            unsigned int ntypes, unsigned int dk0, unsigned int dk1, mpc_u64 step,
                                            int energy, double f[3], double *ep, double *wp, double wt[6]) {
    double vi[3] = {s.vel[3 * s.i], s.vel[3 * s.i + 1], s.vel[3 * s.i + 2]};
    unsigned int tgi = s.tag[s.i];
    double acc[3] = {0.0, 0.0, 0.0};
    for (unsigned int k = 0; k < s.nn; ++k) {
        unsigned int j = md_neighbor(s, k);
        double d[3];
        double img;
        double r2 = md_delta_image(s.pi, s.pos, j, s.l, s.hl, s.off, d, &img);
        if (r2 >= q.rc * q.rc || r2 == 0.0) {
            continue;
        }
        double r = sqrt(r2);
        double wc = 1.0 - r / q.rc;
        double wr = md_weight_r(r, q.rc, q.s);
        double vj[3] = {s.vel[3 * j], s.vel[3 * j + 1], s.vel[3 * j + 2]};
        if (img != 0.0) {
            vj[0] += img * s.le_vel;
        }
        double erv = d[0] * (vi[0] - vj[0]) + d[1] * (vi[1] - vj[1]) + d[2] * (vi[2] - vj[2]);
        double theta = md_dpd_theta(dk0, dk1, tgi, s.tag[j], step);
        double fm = -q.gamma * wr * wr * erv / r + q.noise * wr * theta;
        if (q.conservative) {
            double a = dpd_a[s.ti * ntypes + s.typ[j]];
            fm += a * wc;
            if (energy) {
                *ep += 0.5 * a * q.rc * wc * wc;
                *wp += a * wc * r;
            }
        }
        double fr = fm / r;
        acc[0] += fr * d[0];
        acc[1] += fr * d[1];
        acc[2] += fr * d[2];
        if (energy) {
            md_add_outer(wt, fr, d);
        }
    }
    f[0] += acc[0];
    f[1] += acc[1];
    f[2] += acc[2];
}

// The bond tables: CSR partners of every particle, their bond type + 1, and per type + 1 the
// style (0 harmonic, 1 FENE), k and r0.
struct MdBonds {
    const unsigned int *off, *j, *kind;
    const int *style;
    const double *k, *r0;
    double reach; // decomposed: the slab halo in y (a longer bond may see a stale partner); inf
};

// One bond of i to j (at rj) of type `kind` (BondStyle::eval): the force added to f, and with
// `energy` the energy, virial and virial tensor to *eb, *wb, wt. A FENE bond at or beyond R0
// raises MD_FLAG_BROKEN with its tags and adds nothing.
__device__ __forceinline__ void md_bond(const MdSite &s, const MdBonds &bd, unsigned int j, unsigned int kind,
                                        const double rj[3], unsigned int *flags, int energy, double f[3], double *eb,
                                        double *wb, double wt[6]) {
    double d[3], img;
    double r2 = md_delta_to(s.pi, rj, s.l, s.hl, s.off, d, &img);
    if (fabs(d[1]) > bd.reach) {
        if (atomicExch(&flags[MD_FLAG_HALO], 1u) == 0u) {
            flags[MD_FLAG_HALO + 1] = s.tag[s.i];
            flags[MD_FLAG_HALO + 2] = s.tag[j];
        }
        return;
    }
    double kk = bd.k[kind], r0 = bd.r0[kind];
    double fr, u;
    if (bd.style[kind] == 0) {
        double r = sqrt(r2);
        double dr = r - r0;
        fr = r > 0.0 ? -kk * dr / r : 0.0;
        u = 0.5 * kk * dr * dr;
    } else {
        double x = r2 / (r0 * r0);
        if (!(x < 1.0) || isinf(x)) {
            if (atomicExch(&flags[MD_FLAG_BROKEN], 1u) == 0u) {
                flags[MD_FLAG_BROKEN + 1] = s.tag[s.i];
                flags[MD_FLAG_BROKEN + 2] = s.tag[j];
            }
            return;
        }
        fr = -kk / (1.0 - x);
        // det_ln (IEEE-exact operations, within 2 ulp of ln): libdevice's log uses FMA. Only
        // for energies: it costs more than the rest of the bond
        u = energy ? -0.5 * kk * r0 * r0 * mpc_det_ln(1.0 - x) : 0.0;
    }
    f[0] += fr * d[0];
    f[1] += fr * d[1];
    f[2] += fr * d[2];
    if (energy) {
        *eb += u;
        *wb += fr * r2;
        md_add_outer(wt, fr, d);
    }
}

// The bond pass over i's partners, in CSR order (md_bond each). A chain's inner particle has
// two bonds: their partners' positions are loaded together.
#ifndef MD_BOND_GATHER
#define MD_BOND_GATHER 2
#endif

__device__ __forceinline__ void md_bond_pass(const MdSite &s, const MdBonds &bd, unsigned int *flags, int energy,
                                             double f[3], double *eb, double *wb, double wt[6]) {
    unsigned int b0 = bd.off[s.i], b1 = bd.off[s.i + 1];
    for (unsigned int bb = b0; bb < b1; bb += MD_BOND_GATHER) {
        unsigned int js[MD_BOND_GATHER], kinds[MD_BOND_GATHER];
        double rj[MD_BOND_GATHER][3];
#pragma unroll
        for (int u = 0; u < MD_BOND_GATHER; ++u) {
            bool in = bb + u < b1;
            js[u] = in ? bd.j[bb + u] : s.i;
            kinds[u] = in ? bd.kind[bb + u] : 0u;
        }
        md_load_positions<MD_BOND_GATHER>(s.pos, js, rj);
#pragma unroll
        for (int u = 0; u < MD_BOND_GATHER; ++u) {
            if (bb + u >= b1) {
                break;
            }
            md_bond(s, bd, js[u], kinds[u], rj[u], flags, energy, f, eb, wb, wt);
        }
    }
}

// All forces on particle i: the pair style (0 none, 1 LJ, 2 DPD) over i's list, then the DPD
// thermostat pass (th_on), then i's bonds, in the order of Md::compute_forces_inner. With
// `energy`, per-particle sums of pair energy/virial and bond energy/virial (each pair counted
// from both sides, halved by the host).
#define MD_FORCES_PARAMS                                                                                     \
    unsigned int n, const double *pos, const double *vel, const unsigned int *typ, const unsigned int *tag,  \
        const unsigned int *list, const unsigned int *nneigh, double lx, double ly, double lz, double le_off, \
        double le_vel, int style, unsigned int ntypes, const MdPairLj *lj, const double *dpd_a,              \
        double dpd_gamma, double dpd_rc, double dpd_s, double dpd_noise, int th_on, double th_gamma,         \
        double th_rc, double th_s, double th_noise, unsigned int dk0, unsigned int dk1, mpc_u64 step,        \
        const unsigned int *bond_off, const unsigned int *bond_j, const unsigned int *bond_kind,             \
        const int *bond_style, const double *bond_k, const double *bond_r0, double *force, int energy,       \
        double *e_pair, double *w_pair, double *e_bond, double *w_bond, double *w_tensor, unsigned int *flags, \
        double own_lo, double own_hi, double bond_reach, unsigned int m, const unsigned int *work

// What a force kernel is compiled for. Each mode's unused passes (and, without energies, the
// energy terms) are left out of its code, so that it keeps fewer registers: the general kernel
// holds the DPD passes' random numbers and the energy sums in ~120 registers, which limits the
// warps that hide its neighbours' loads to a quarter of the most.
enum MdForcesMode {
    MD_FORCES_ANY = 0,       // every pair style, the DPD thermostat, bonds, energies on request
    MD_FORCES_LJ1 = 1,       // one-type LJ without thermostat or bonds, as LjKernel<SINGLE>
    MD_FORCES_LJ1_BONDS = 2, // one-type LJ and bonds, no thermostat, no energies (the polymer's step)
};

template <int MODE>
__device__ __forceinline__ void md_forces_body(unsigned int t, MD_FORCES_PARAMS) {
    constexpr bool FAST = MODE != MD_FORCES_ANY;
    if (MODE == MD_FORCES_LJ1_BONDS) {
        energy = 0;
    }
    unsigned int i = md_item_of(t, work);
    if (!md_owns(pos[3 * i + 1], ly, own_lo, own_hi)) {
        // decomposed: another slab's particle; zero terms so that the slab's sums are its own
        for (int k = 0; k < 3; ++k) {
            force[3 * i + k] = 0.0;
        }
        if (energy) {
            e_pair[i] = 0.0;
            w_pair[i] = 0.0;
            e_bond[i] = 0.0;
            w_bond[i] = 0.0;
            for (int k = 0; k < 6; ++k) {
                w_tensor[6 * i + k] = 0.0;
            }
        }
        return;
    }
    MdSite s = md_site(i, n, pos, vel, typ, tag, list, nneigh, lx, ly, lz, le_off, le_vel);
    double f[3] = {0.0, 0.0, 0.0};
    double ep = 0.0, wp = 0.0;
    double wt[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    if (FAST || style == 1) {
        md_lj_pass<FAST>(s, lj, ntypes, energy, f, &ep, &wp, wt);
    }
    double eb = 0.0, wb = 0.0;
    if (MODE == MD_FORCES_ANY) {
        if (style == 2) {
            MdDpdPass pair = {dpd_gamma, dpd_rc, dpd_s, dpd_noise, 1};
            md_dpd_pass(s, pair, dpd_a, ntypes, dk0, dk1, step, energy, f, &ep, &wp, wt);
        }
        if (th_on != 0) {
            MdDpdPass thermostat = {th_gamma, th_rc, th_s, th_noise, 0};
            md_dpd_pass(s, thermostat, dpd_a, ntypes, dk0, dk1, step, energy, f, &ep, &wp, wt);
        }
    }
    if (MODE != MD_FORCES_LJ1) {
        MdBonds bonds = {bond_off, bond_j, bond_kind, bond_style, bond_k, bond_r0, bond_reach};
        md_bond_pass(s, bonds, flags, energy, f, &eb, &wb, wt);
    }
    for (int k = 0; k < 3; ++k) {
        force[3 * i + k] = f[k];
    }
    if (energy) {
        e_pair[i] = ep;
        w_pair[i] = wp;
        e_bond[i] = eb;
        w_bond[i] = wb;
        for (int k = 0; k < 6; ++k) {
            w_tensor[6 * i + k] = wt[k];
        }
    }
}

#define MD_FORCES_ARGS                                                                                       \
    n, pos, vel, typ, tag, list, nneigh, lx, ly, lz, le_off, le_vel, style, ntypes, lj, dpd_a, dpd_gamma,      \
        dpd_rc, dpd_s, dpd_noise, th_on, th_gamma, th_rc, th_s, th_noise, dk0, dk1, step, bond_off, bond_j,  \
        bond_kind, bond_style, bond_k, bond_r0, force, energy, e_pair, w_pair, e_bond, w_bond, w_tensor,     \
        flags, own_lo, own_hi, bond_reach, m, work

extern "C" __global__ void md_forces(MD_FORCES_PARAMS) {
    MD_FOR_ITEMS(t, m) {
        md_forces_body<MD_FORCES_ANY>(t, MD_FORCES_ARGS);
    }
}

extern "C" __global__ void md_forces_lj1(MD_FORCES_PARAMS) {
    MD_FOR_ITEMS(t, m) {
        md_forces_body<MD_FORCES_LJ1>(t, MD_FORCES_ARGS);
    }
}

// `energy` is ignored (never any): steps with energies take md_forces.
extern "C" __global__ void md_forces_lj1_bonds(MD_FORCES_PARAMS) {
    MD_FOR_ITEMS(t, m) {
        md_forces_body<MD_FORCES_LJ1_BONDS>(t, MD_FORCES_ARGS);
    }
}
