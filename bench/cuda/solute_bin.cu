// What bounds the binning and collision of solutes in random order (mpc_solute_bin,
// mpc_solute_collide_owned): variants of the same work, timed alone.
//   nvcc -O3 -arch=sm_90 bench/cuda/solute_bin.cu -o /tmp/solute_bin && /tmp/solute_bin
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define L 256u
#define DEAD 0xffffffffu

__device__ __forceinline__ unsigned int cell_of(double x, double y, double z) {
    unsigned int ix = (unsigned int)floor(x), iy = (unsigned int)floor(y), iz = (unsigned int)floor(z);
    return ix + L * (iz + L * iy);
}
__device__ __forceinline__ void red(double *a, double x) {
    atomicAdd((unsigned long long *)a, (unsigned long long)__double2ll_rn(x * 1048576.0));
}
// the six adds of mpc_add_solute_to_cell (words 0-4 and 6 of the 64-byte record: two 32-byte
// sectors), or with ONE_SECTOR only the first four (one sector: what fewer sectors would save)
__device__ __forceinline__ void red6(double *cells, unsigned int c, double m, double v0, double v1, double v2,
                                     bool one_sector) {
    double *o = cells + (size_t)c * 8;
    red(o + 0, m * v0);
    red(o + 1, m * v1);
    red(o + 2, m * v2);
    red(o + 3, m);
    if (!one_sector) {
        red(o + 4, m * (v0 * v0 + v1 * v1 + v2 * v2));
        atomicAdd((unsigned long long *)(o + 6), 1ull);
    }
}

// as mpc_solute_bin: position, locate, then velocity and mass behind the dead-cell test
__global__ void bin_now(unsigned int n, const double *__restrict__ pos, const double *__restrict__ vel,
                        const double *__restrict__ mass, unsigned int *scell, int *simage, double *cells,
                        const unsigned int *dead) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    unsigned int c = cell_of(pos[3 * t], pos[3 * t + 1], pos[3 * t + 2]);
    if (c == *dead) c = DEAD;  // opaque to the compiler, as mpc_local_cell
    scell[t] = c;
    simage[t] = 0;
    if (c == DEAD) return;
    red6(cells, c, mass[t], vel[3 * t], vel[3 * t + 1], vel[3 * t + 2], false);
}

// solute t's values, all loaded at once, tested as mpc_check_solutes tests them
struct Solute {
    double x, y, z, a, b, c, m;
};
__device__ __forceinline__ Solute load_and_check(unsigned int t, const double *__restrict__ pos,
                                                 const double *__restrict__ vel, const double *__restrict__ mass,
                                                 unsigned int *bad) {
    Solute s = {pos[3 * t], pos[3 * t + 1], pos[3 * t + 2], vel[3 * t], vel[3 * t + 1], vel[3 * t + 2], mass[t]};
    if (!(isfinite(s.x) && isfinite(s.y) && isfinite(s.z) && isfinite(s.a) && isfinite(s.b) && isfinite(s.c) &&
          s.m > 0.0)) {
        atomicMin(bad, t);
    }
    return s;
}

// every load first, the check fused
template <bool ONE_SECTOR, bool ATOMICS>
__global__ void bin_loads_first(unsigned int n, const double *__restrict__ pos, const double *__restrict__ vel,
                                const double *__restrict__ mass, unsigned int *scell, int *simage, double *cells,
                                const unsigned int *dead, unsigned int *bad) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    Solute s = load_and_check(t, pos, vel, mass, bad);
    unsigned int c = cell_of(s.x, s.y, s.z);
    if (c == *dead) c = DEAD;
    scell[t] = c;
    simage[t] = 0;
    if (c == DEAD || !ATOMICS) return;
    red6(cells, c, s.m, s.a, s.b, s.c, ONE_SECTOR);
}

__global__ void check_only(unsigned int n, const double *__restrict__ pos, const double *__restrict__ vel,
                           const double *__restrict__ mass, unsigned int *bad) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) load_and_check(t, pos, vel, mass, bad);
}

// as mpc_solute_collide_owned: cell word, then the cell's 64 bytes, velocity and mass
template <bool EARLY>
__global__ void collide(unsigned int n, const unsigned int *__restrict__ scell, const int *__restrict__ simage,
                        const double *__restrict__ cells, double *vel, const double *__restrict__ mass,
                        double *out) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    double v0, v1, v2, m = 1.0;
    if (EARLY) { v0 = vel[3 * t]; v1 = vel[3 * t + 1]; v2 = vel[3 * t + 2]; }
    unsigned int c = scell[t];
    int im = simage[t];
    if (c == DEAD) return;
    const double2 *cp2 = (const double2 *)(cells + (size_t)c * 8);
    double cp[8];
    for (int k = 0; k < 4; ++k) { double2 q = __ldg(cp2 + k); cp[2 * k] = q.x; cp[2 * k + 1] = q.y; }
    if (!EARLY) { v0 = vel[3 * t]; v1 = vel[3 * t + 1]; v2 = vel[3 * t + 2]; m = mass[t]; }
    double u0 = v0 - cp[0] + im, u1 = v1 - cp[1], u2 = v2 - cp[2];
    vel[3 * t] = cp[0] + cp[3] * u0 + cp[4] * u1 + m * cp[7];
    vel[3 * t + 1] = cp[1] + cp[5] * u1 + cp[6] * u2;
    vel[3 * t + 2] = cp[2] + cp[3] * u2 + cp[6] * u0;
}


// one atomic per solute into the cell's record (the per-line cost)
template <unsigned int MASK>
__global__ void one_atomic(unsigned int n, const unsigned int *__restrict__ scell, double *cells) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    unsigned int c = scell[t] & MASK;
    atomicAdd((unsigned long long *)(cells + (size_t)c * 8), 1ull);
}
template <unsigned int MASK>
__global__ void six_atomics_masked(unsigned int n, const unsigned int *__restrict__ scell, const double *__restrict__ vel, double *cells) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    unsigned int c = scell[t] & MASK;
    red6(cells, c, 5.0, vel[3 * t], vel[3 * t + 1], vel[3 * t + 2], false);
}
__global__ void plain_store(unsigned int n, const unsigned int *__restrict__ scell, double *cells) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    cells[(size_t)scell[t] * 8] = 1.0;
}
// linked lists: head per cell (atomicExch), next per solute
__global__ void list_push(unsigned int n, const unsigned int *__restrict__ scell, unsigned int *head, unsigned int *next) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    next[t] = atomicExch(head + scell[t], t);
}
// per cell: walk the list, sum the solutes' terms, add them to the record (plain RMW, one thread per cell)
__global__ void list_sum(unsigned int ncell, const unsigned int *__restrict__ head, const unsigned int *__restrict__ next,
                         const double *__restrict__ vel, const double *__restrict__ mass, double *cells) {
    unsigned int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncell) return;
    unsigned int j = head[c];
    if (j == DEAD) return;
    long long s[6] = {0, 0, 0, 0, 0, 0};
    while (j != DEAD) {
        double m = __ldg(mass + j), a = __ldg(vel + 3 * j), b = __ldg(vel + 3 * j + 1), d = __ldg(vel + 3 * j + 2);
        s[0] += __double2ll_rn(m * a * 1048576.0); s[1] += __double2ll_rn(m * b * 1048576.0);
        s[2] += __double2ll_rn(m * d * 1048576.0); s[3] += __double2ll_rn(m * 1048576.0);
        s[4] += __double2ll_rn(m * (a * a + b * b + d * d) * 1048576.0); s[5] += 1;
        j = __ldg(next + j);
    }
    long long *o = (long long *)(cells + (size_t)c * 8);
    o[0] += s[0]; o[1] += s[1]; o[2] += s[2]; o[3] += s[3]; o[4] += s[4]; o[6] += s[5];
}
int main() {
    const unsigned int ncell = L * L * L, n = (unsigned int)(0.7 * ncell);
    std::vector<double> hp(3 * (size_t)n), hv(3 * (size_t)n), hm(n, 5.0);
    srand(7);
    for (size_t i = 0; i < 3 * (size_t)n; ++i) {
        hp[i] = L * (rand() / (RAND_MAX + 1.0));
        hv[i] = rand() / (RAND_MAX + 1.0) - 0.5;
    }
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    auto key = [&](size_t i) {
        return (unsigned)hp[3 * i] + L * ((unsigned)hp[3 * i + 2] + L * (unsigned)hp[3 * i + 1]);
    };
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
    std::vector<double> sp(3 * (size_t)n);
    for (size_t i = 0; i < n; ++i)
        for (int k = 0; k < 3; ++k) sp[3 * i + k] = hp[3 * order[i] + k];
    double *pos, *spos, *vel, *mass, *cells;
    unsigned int *scell, *dead, *bad;
    int *simage;
    cudaMalloc(&pos, 24 * (size_t)n); cudaMalloc(&spos, 24 * (size_t)n); cudaMalloc(&vel, 24 * (size_t)n);
    cudaMalloc(&mass, 8 * (size_t)n); cudaMalloc(&cells, 64 * (size_t)ncell);
    cudaMalloc(&scell, 4 * (size_t)n); cudaMalloc(&simage, 4 * (size_t)n);
    cudaMalloc(&dead, 4); cudaMalloc(&bad, 4);
    cudaMemcpy(pos, hp.data(), 24 * (size_t)n, cudaMemcpyHostToDevice);
    cudaMemcpy(spos, sp.data(), 24 * (size_t)n, cudaMemcpyHostToDevice);
    cudaMemcpy(vel, hv.data(), 24 * (size_t)n, cudaMemcpyHostToDevice);
    cudaMemcpy(mass, hm.data(), 8 * (size_t)n, cudaMemcpyHostToDevice);
    cudaMemset(dead, 0xff, 4); cudaMemset(bad, 0xff, 4);
    cudaMemset(cells, 0, 64 * (size_t)ncell);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    unsigned int g = (n + 255) / 256;
    auto time = [&](const char *name, auto launch) {
        for (int w = 0; w < 3; ++w) launch();
        cudaEventRecord(e0);
        const int reps = 20;
        for (int r = 0; r < reps; ++r) launch();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        printf("%-44s %8.1f us\n", name, 1000.0 * ms / reps);
    };
    printf("%u solutes, %u cells\n", n, ncell);
    time("memset of the cells (1 GiB)", [&] { cudaMemsetAsync(cells, 0, 64 * (size_t)ncell); });
    time("check (every value read once)", [&] { check_only<<<g, 256>>>(n, pos, vel, mass, bad); });
    time("bin as now (random)", [&] { bin_now<<<g, 256>>>(n, pos, vel, mass, scell, simage, cells, dead); });
    time("bin, loads first, no atomics", [&] { bin_loads_first<false, false><<<g, 256>>>(n, pos, vel, mass, scell, simage, cells, dead, bad); });
    time("bin+check, loads first, 6 atomics (random)", [&] { bin_loads_first<false, true><<<g, 256>>>(n, pos, vel, mass, scell, simage, cells, dead, bad); });
    time("bin+check, 4 atomics in one sector (random)", [&] { bin_loads_first<true, true><<<g, 256>>>(n, pos, vel, mass, scell, simage, cells, dead, bad); });
    time("bin as now (sorted)", [&] { bin_now<<<g, 256>>>(n, spos, vel, mass, scell, simage, cells, dead); });
    time("bin+check, loads first, 6 atomics (sorted)", [&] { bin_loads_first<false, true><<<g, 256>>>(n, spos, vel, mass, scell, simage, cells, dead, bad); });
    time("bin+check, 4 atomics in one sector (sorted)", [&] { bin_loads_first<true, true><<<g, 256>>>(n, spos, vel, mass, scell, simage, cells, dead, bad); });
    bin_loads_first<false, true><<<g, 256>>>(n, pos, vel, mass, scell, simage, cells, dead, bad);
    time("collide as now (random)", [&] { collide<false><<<g, 256>>>(n, scell, simage, cells, vel, mass, cells); });
    time("collide, velocity first, no mass (random)", [&] { collide<true><<<g, 256>>>(n, scell, simage, cells, vel, mass, cells); });
    unsigned int *head, *next;
    cudaMalloc(&head, 4 * (size_t)ncell); cudaMalloc(&next, 4 * (size_t)n);
    bin_loads_first<false, false><<<g, 256>>>(n, pos, vel, mass, scell, simage, cells, dead, bad);
    time("one atomic per solute, 1 GiB (random)", [&] { one_atomic<0xffffffffu><<<g, 256>>>(n, scell, cells); });
    time("one atomic per solute, 32 MiB (random)", [&] { one_atomic<0x7ffffu><<<g, 256>>>(n, scell, cells); });
    time("six atomics, 32 MiB (random)", [&] { six_atomics_masked<0x7ffffu><<<g, 256>>>(n, scell, vel, cells); });
    time("six atomics, 1 GiB (random)", [&] { six_atomics_masked<0xffffffffu><<<g, 256>>>(n, scell, vel, cells); });
    time("plain 8-byte store per solute, 1 GiB", [&] { plain_store<<<g, 256>>>(n, scell, cells); });
    time("list: heads memset (64 MiB)", [&] { cudaMemsetAsync(head, 0xff, 4 * (size_t)ncell); });
    time("list: push (random)", [&] { cudaMemsetAsync(head, 0xff, 4 * (size_t)ncell); list_push<<<g, 256>>>(n, scell, head, next); });
    time("list: sum per cell into the records", [&] { list_sum<<<(ncell + 255) / 256, 256>>>(ncell, head, next, vel, mass, cells); });
    cudaError_t err = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(err));
    return 0;
}
