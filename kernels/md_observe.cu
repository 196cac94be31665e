// Reductions of the GPU MD engine for observables (launched from md/gpu/observe.rs; the CPU
// computes are md/rheology.rs and the energy sums of md/engine): per chunk of `chunk` particles
// (md::neighbor::CHUNK) summed in index order, or per chain, exactly as the CPU sums them, so the
// host only adds a few partial sums in the same order and nothing per particle crosses PCIe.
#ifndef MPCBOX_NVRTC
#include "md_boundary.cuh"
#include "md_items.cuh"
#endif

// Per chunk c of particles: out[MD_ENERGY_WORDS c + w], w = 0 pair energy, 1 bond energy, 2 pair
// virial, 3 bond virial, 4 wall energy, 5..10 the virial tensor (xx, yy, zz, xy, xz, yz); every
// per-particle term as md_forces / md_wall_forces left it (pairs and bonds from both sides).
// MD_ENERGY_WORDS: from the generated header.
extern "C" __global__ void md_chunk_energy(unsigned int n, unsigned int chunk, const double *e_pair,
                                           const double *e_bond, const double *w_pair, const double *w_bond,
                                           const double *e_wall, const double *w_tensor, double *out) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long lo = (unsigned long long)c * chunk;
    if (lo >= n) {
        return;
    }
    unsigned long long hi = lo + chunk < n ? lo + chunk : n;
    double s[MD_ENERGY_WORDS];
    for (int w = 0; w < MD_ENERGY_WORDS; ++w) {
        s[w] = 0.0;
    }
    for (unsigned long long i = lo; i < hi; ++i) {
        s[0] += e_pair[i];
        s[1] += e_bond[i];
        s[2] += w_pair[i];
        s[3] += w_bond[i];
        s[4] += e_wall[i];
        for (int k = 0; k < 6; ++k) {
            s[5 + k] += w_tensor[6 * i + k];
        }
    }
    for (int w = 0; w < MD_ENERGY_WORDS; ++w) {
        out[(unsigned long long)MD_ENERGY_WORDS * c + w] = s[w];
    }
}

// rheology::kinetic_tensor per chunk c: out[6 c + k] = sum of m c (x) c over the chunk's particles
// this engine owns (md_owns: all of them when not decomposed), with c the velocity relative to the
// imposed flow, v - rate (y - Ly/2) x.
extern "C" __global__ void md_chunk_kinetic(unsigned int n, unsigned int chunk, const double *pos,
                                            const double *vel, const double *mass, double rate, double half_ly,
                                            double own_lo, double own_hi, double *out) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long lo = (unsigned long long)c * chunk;
    if (lo >= n) {
        return;
    }
    unsigned long long hi = lo + chunk < n ? lo + chunk : n;
    double t[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (unsigned long long i = lo; i < hi; ++i) {
        if (!md_owns(pos[3 * i + 1], 2.0 * half_ly, own_lo, own_hi)) {
            continue;
        }
        double d[3] = {vel[3 * i] - rate * (pos[3 * i + 1] - half_ly), vel[3 * i + 1], vel[3 * i + 2]};
        md_add_outer(t, mass[i], d);
    }
    for (int k = 0; k < 6; ++k) {
        out[6ull * c + k] = t[k];
    }
}

// How the chain kernels unwrap a bead (`MdUnwrapFrame` of src/md/gpu/observe.rs): the box
// edges, and under shear (sheared != 0) the total Lees-Edwards offset D.
struct MdUnwrapFrame {
    double l[3];
    double total_offset;
    int sheared;
    int pad;
};

// System::unwrapped: pos + image L, and under shear image_y D along x.
__device__ __forceinline__ void md_unwrapped(const double *pos, const int *image, unsigned int i,
                                             const MdUnwrapFrame &f, double u[3]) {
    for (int k = 0; k < 3; ++k) {
        u[k] = pos[3 * i + k] + (double)image[3 * i + k] * f.l[k];
    }
    if (f.sheared) {
        u[0] += (double)image[3 * i + 1] * f.total_offset;
    }
}

// rheology::conformation of one chain per thread: the chain's members (indices, increasing) are
// members[offsets[c] .. offsets[c + 1]], ends[2 c], ends[2 c + 1] its first and last bead by atom
// id. out[12 c + k]: the mass-weighted gyration tensor (k < 6) and R (x) R of the end-to-end vector.
extern "C" __global__ void md_chain_conformation(unsigned int chains, const unsigned int *offsets,
                                                 const unsigned int *members, const unsigned int *ends,
                                                 const double *pos, const int *image, const double *mass,
                                                 MdUnwrapFrame f, double *out) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= chains) {
        return;
    }
    unsigned int lo = offsets[c], hi = offsets[c + 1];
    double mt = 0.0;
    for (unsigned int k = lo; k < hi; ++k) {
        mt += mass[members[k]];
    }
    double com[3] = {0.0, 0.0, 0.0};
    for (unsigned int k = lo; k < hi; ++k) {
        unsigned int i = members[k];
        double u[3];
        md_unwrapped(pos, image, i, f, u);
        for (int a = 0; a < 3; ++a) {
            com[a] += mass[i] * u[a] / mt;
        }
    }
    double g[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (unsigned int k = lo; k < hi; ++k) {
        unsigned int i = members[k];
        double u[3];
        md_unwrapped(pos, image, i, f, u);
        double d[3] = {u[0] - com[0], u[1] - com[1], u[2] - com[2]};
        md_add_outer(g, mass[i] / mt, d);
    }
    double first[3], last[3];
    md_unwrapped(pos, image, ends[2 * c], f, first);
    md_unwrapped(pos, image, ends[2 * c + 1], f, last);
    double r[3] = {last[0] - first[0], last[1] - first[1], last[2] - first[2]};
    double ree[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    md_add_outer(ree, 1.0, r);
    for (int k = 0; k < 6; ++k) {
        out[12ull * c + k] = g[k];
        out[12ull * c + 6 + k] = ree[k];
    }
}

// observe::chain_geometry of one chain per thread (ChainGroups' order, members increasing):
// out[4 c .. 4 c + 2] the chain's centre of mass (unwrapped), out[4 c + 3] its Rg², in the CPU's
// arithmetic and order, so the md.csv columns do not need the beads on the host.
extern "C" __global__ void md_chain_geometry(unsigned int chains, const unsigned int *offsets,
                                             const unsigned int *members, const double *pos, const int *image,
                                             const double *mass, MdUnwrapFrame f, double *out) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= chains) {
        return;
    }
    unsigned int lo = offsets[c], hi = offsets[c + 1];
    double mt = 0.0;
    double s[3] = {0.0, 0.0, 0.0};
    for (unsigned int k = lo; k < hi; ++k) {
        unsigned int i = members[k];
        double u[3];
        md_unwrapped(pos, image, i, f, u);
        double m = mass[i];
        mt += m;
        for (int a = 0; a < 3; ++a) {
            s[a] += m * u[a];
        }
    }
    double com[3] = {s[0] / mt, s[1] / mt, s[2] / mt};
    double rg2 = 0.0;
    for (unsigned int k = lo; k < hi; ++k) {
        unsigned int i = members[k];
        double u[3];
        md_unwrapped(pos, image, i, f, u);
        double d0 = u[0] - com[0], d1 = u[1] - com[1], d2 = u[2] - com[2];
        rg2 += mass[i] * (d0 * d0 + d1 * d1 + d2 * d2);
    }
    out[4ull * c] = com[0];
    out[4ull * c + 1] = com[1];
    out[4ull * c + 2] = com[2];
    out[4ull * c + 3] = rg2 / mt;
}

// observe::max_bond_length, squared: the largest |r_i - r_j|² (PeriodicBox::delta) over every
// particle's bond partners, so every bond from both ends (the sheared minimum image is
// antisymmetric: the same square). Each block writes its largest into out[blockIdx.x]; the host
// takes the largest of those and its root. blockDim a multiple of 32, at most 1024.
extern "C" __global__ void md_bond_max2(unsigned int n, const double *pos, const unsigned int *bond_off,
                                        const unsigned int *bond_j, double lx, double ly, double lz, double off,
                                        double *out) {
    __shared__ double warp_max[32];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    double r = 0.0;
    if (i < n) {
        double l[3] = {lx, ly, lz};
        double hl[3] = {lx / 2.0, ly / 2.0, lz / 2.0};
        double pi[3] = {pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]};
        for (unsigned int k = bond_off[i]; k < bond_off[i + 1]; ++k) {
            double d[3];
            r = fmax(r, md_delta(pi, pos, bond_j[k], l, hl, off, d));
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        r = fmax(r, __shfl_down_sync(0xffffffffu, r, o));
    }
    if ((threadIdx.x & 31u) == 0) {
        warp_max[threadIdx.x >> 5] = r;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        r = threadIdx.x < (blockDim.x >> 5) ? warp_max[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) {
            r = fmax(r, __shfl_down_sync(0xffffffffu, r, o));
        }
        if (threadIdx.x == 0) {
            out[blockIdx.x] = r;
        }
    }
}

// integrate::chunk_kinetic_energy and chunk_momentum per chunk c of particles (index order):
// out[4 c] = sum of 0.5 / inv_mass v², out[4 c + 1 .. 4 c + 3] = sum of (1 / inv_mass) v, as the CPU
// forms each term, so a row of md.csv does not download the velocities.
extern "C" __global__ void md_chunk_ke_momentum(unsigned int n, unsigned int chunk, const double *vel,
                                                const double *inv_mass, double *out) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long lo = (unsigned long long)c * chunk;
    if (lo >= n) {
        return;
    }
    unsigned long long hi = lo + chunk < n ? lo + chunk : n;
    double e = 0.0;
    double p[3] = {0.0, 0.0, 0.0};
    for (unsigned long long i = lo; i < hi; ++i) {
        double u0 = vel[3 * i], u1 = vel[3 * i + 1], u2 = vel[3 * i + 2];
        e += 0.5 / inv_mass[i] * (u0 * u0 + u1 * u1 + u2 * u2);
        double m = 1.0 / inv_mass[i];
        p[0] += m * u0;
        p[1] += m * u1;
        p[2] += m * u2;
    }
    out[4ull * c] = e;
    out[4ull * c + 1] = p[0];
    out[4ull * c + 2] = p[1];
    out[4ull * c + 3] = p[2];
}
