// Per-block sums into one address against sums spread over 32 copies (MPC_SPREAD): 655,360
// blocks of 256 threads (256³ cells × 10 particles) each read three doubles per thread, reduce
// them over the block and add the block's sum with one atomic, into one address or into copy
// blockIdx % 32; "no atomic" stores the block sum instead. ARCHITECTURE.md ("One MPC step")
// says what it showed: the spread copies of the report.
// Build and run on the device: nvcc -O3 -arch=sm_90 -o block_sums bench/cuda/block_sums.cu && ./block_sums
#include <cstdio>
#include <cuda_runtime.h>

__device__ double warp_sum(double x) {
    for (int o = 16; o; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// SPREAD 0: a plain store of the block sum; 1: one address; > 1: copy blockIdx % SPREAD.
template <int SPREAD>
__device__ void block_add(double x, double *t) {
    __shared__ double part[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    x = warp_sum(x);
    if (lane == 0) part[wid] = x;
    __syncthreads();
    if (wid == 0) {
        double y = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
        y = warp_sum(y);
        if (lane == 0) {
            if (SPREAD == 0) t[0] = y;
            else atomicAdd(t + (SPREAD > 1 ? blockIdx.x % SPREAD : 0), y);
        }
    }
    __syncthreads();
}

template <int SPREAD, int WORDS>
__global__ void sums(unsigned n, const double *vx, const double *vy, const double *vz, double *out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    double a = 0, b = 0, c = 0;
    if (i < n) { a = vx[i]; b = vy[i]; c = vz[i]; }
    double s[4] = {a, b, c, a * a + b * b + c * c};
    for (int w = 0; w < WORDS; ++w) block_add<SPREAD>(s[w], out + w * 64);
}

template <int S, int W>
float time_ms(unsigned n, double *x, double *y, double *z, double *o) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    sums<S, W><<<(n + 255) / 256, 256>>>(n, x, y, z, o);  // warm-up
    cudaEventRecord(e0);
    for (int r = 0; r < 5; ++r) sums<S, W><<<(n + 255) / 256, 256>>>(n, x, y, z, o);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    return ms / 5;
}

int main() {
    unsigned n = 167772160;
    double *x, *y, *z, *o;
    cudaMalloc(&x, 8ull * n);
    cudaMalloc(&y, 8ull * n);
    cudaMalloc(&z, 8ull * n);
    cudaMalloc(&o, 8 * 4096);
    cudaMemset(x, 0, 8ull * n);
    cudaMemset(y, 0, 8ull * n);
    cudaMemset(z, 0, 8ull * n);
    printf("n=%u blocks=%u\n", n, (n + 255) / 256);
    printf("1 word, one address : %.3f ms\n", time_ms<1, 1>(n, x, y, z, o));
    printf("1 word, spread 32   : %.3f ms\n", time_ms<32, 1>(n, x, y, z, o));
    printf("1 word, no atomic   : %.3f ms\n", time_ms<0, 1>(n, x, y, z, o));
    printf("4 words, one address: %.3f ms\n", time_ms<1, 4>(n, x, y, z, o));
    printf("4 words, spread 32  : %.3f ms\n", time_ms<32, 4>(n, x, y, z, o));
    printf("4 words, no atomic  : %.3f ms\n", time_ms<0, 4>(n, x, y, z, o));
    printf("error: %s\n", cudaGetErrorString(cudaGetLastError()));
}
