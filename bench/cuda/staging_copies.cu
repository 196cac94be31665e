// Whether this host can fill pinned staging while the GPU's DMA reads other pinned memory (what
// bounds pageable solute arrays, which go up through the staging: docs/coupling-costs.md, "Pageable
// host arrays: what bounds them"): the host's copy alone, then beside a DMA up and, the other
// way, out of the staging beside a DMA down; 1 GiB each, into write-combined and cached pages.
//   nvcc -O2 -std=c++17 bench/cuda/staging_copies.cu -o /tmp/staging_copies && /tmp/staging_copies
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// memcpy of n bytes split over `threads` threads (each its contiguous share)
static void parallel_copy(char *dst, const char *src, size_t n, int threads) {
    std::vector<std::thread> pool;
    size_t share = (n + threads - 1) / threads;
    for (int t = 0; t < threads; ++t) {
        size_t a = t * share, b = std::min(n, a + share);
        if (a < b) pool.emplace_back([=] { memcpy(dst + a, src + a, b - a); });
    }
    for (auto &t : pool) t.join();
}

int main() {
    const size_t n = 1ull << 30;
    char *pageable = (char *)malloc(n), *pageable2 = (char *)malloc(n);
    char *write_combined, *cached, *dma_host, *dev;
    if (!pageable || !pageable2 || cudaHostAlloc(&write_combined, n, cudaHostAllocWriteCombined) != cudaSuccess ||
        cudaHostAlloc(&cached, n, 0) != cudaSuccess || cudaHostAlloc(&dma_host, n, 0) != cudaSuccess ||
        cudaMalloc(&dev, n) != cudaSuccess) {
        printf("allocation failed\n");
        return 1;
    }
    // every page touched before timing
    memset(pageable, 1, n);
    memset(pageable2, 2, n);
    memset(write_combined, 0, n);
    memset(cached, 0, n);
    memset(dma_host, 3, n);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto dma = [&](bool up) {
        auto t = Clock::now();
        if (up) {
            cudaMemcpyAsync(dev, dma_host, n, cudaMemcpyHostToDevice, s);
        } else {
            cudaMemcpyAsync(dma_host, dev, n, cudaMemcpyDeviceToHost, s);
        }
        cudaStreamSynchronize(s);
        return n / seconds_since(t) / 1e9;
    };
    dma(true);
    dma(false);
    printf("DMA alone: up %.1f GB/s, down %.1f GB/s\n", dma(true), dma(false));
    for (int threads : {4, 8, 16}) {
        for (int pages = 0; pages < 2; ++pages) {
            char *staging = pages ? cached : write_combined;
            parallel_copy(staging, pageable, n, threads);
            auto t = Clock::now();
            parallel_copy(staging, pageable, n, threads);
            double alone = n / seconds_since(t) / 1e9;
            double up = 0, into = 0, down = 0, out = 0;
            std::thread d1([&] { up = dma(true); });
            t = Clock::now();
            parallel_copy(staging, pageable2, n, threads);
            into = n / seconds_since(t) / 1e9;
            d1.join();
            std::thread d2([&] { down = dma(false); });
            t = Clock::now();
            parallel_copy(pageable2, staging, n, threads);
            out = n / seconds_since(t) / 1e9;
            d2.join();
            printf("%2d threads, %-14s staging: copy in alone %.1f GB/s; beside a DMA up: copy %.1f, DMA %.1f; "
                   "copy out beside a DMA down: copy %.1f, DMA %.1f\n",
                   threads, pages ? "cached" : "write-combined", alone, into, up, out, down);
        }
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
