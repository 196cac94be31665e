// Host cost of the CUDA driver calls the slab MD exchange makes, on this machine: each call
// timed on the host over many repetitions (queued, not waited for, except where noted), so that
// the exchange's measured time can be set against the platform's own call costs.
// Build and run on the device: nvcc -O2 -o api_calls bench/cuda/api_calls.cu -lcuda && ./api_calls
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void tiny(unsigned int *x, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] += 1;
    }
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#define CHECK(x)                                                                                             \
    do {                                                                                                     \
        cudaError_t e = (x);                                                                                 \
        if (e != cudaSuccess) {                                                                              \
            std::printf("%s: %s\n", #x, cudaGetErrorString(e));                                              \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main() {
    const int reps = 20000;
    unsigned int *a, *b, *host;
    CHECK(cudaMalloc(&a, 1 << 20));
    CHECK(cudaMalloc(&b, 1 << 20));
    CHECK(cudaMallocHost(&host, 4096));
    cudaStream_t s0, s1;
    CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    tiny<<<1, 32, 0, s0>>>(a, 32);
    CHECK(cudaStreamSynchronize(s0));
    struct Case {
        const char *name;
        int what;
    } cases[] = {{"kernel launch (1 block)", 0},        {"memcpy device to device, 4 B", 1},
                 {"memcpy device to device, 256 KiB", 2}, {"memset, 128 B", 3},
                 {"event record", 4},                    {"stream wait for event", 5},
                 {"memcpy device to pinned host, 128 B", 6},
                 {"launch + synchronize (round trip)", 7}};
    std::printf("| call | µs per call (host) |\n|---|---|\n");
    for (const Case &c : cases) {
        int n = c.what == 7 ? 2000 : reps;
        CHECK(cudaDeviceSynchronize());
        double spent = 0.0, t = now_us();
        for (int k = 0; k < n; ++k) {
            switch (c.what) {
            case 0: tiny<<<1, 32, 0, s0>>>(a, 32); break;
            case 1: cudaMemcpyAsync(b, a, 4, cudaMemcpyDeviceToDevice, s0); break;
            case 2: cudaMemcpyAsync(b, a, 1 << 18, cudaMemcpyDeviceToDevice, s0); break;
            case 3: cudaMemsetAsync(a, 0, 128, s0); break;
            case 4: cudaEventRecord(ev, s0); break;
            case 5: cudaStreamWaitEvent(s1, ev, 0); break;
            case 6: cudaMemcpyAsync(host, a, 128, cudaMemcpyDeviceToHost, s0); break;
            case 7:
                tiny<<<1, 32, 0, s0>>>(a, 32);
                cudaStreamSynchronize(s0);
                break;
            }
            if (c.what != 7 && k % 1000 == 999) {
                // keep the queue short, outside the timed calls: time the calls, not a full
                // queue's stalls or the GPU's work
                spent += now_us() - t;
                cudaStreamSynchronize(s0);
                cudaStreamSynchronize(s1);
                t = now_us();
            }
        }
        spent += now_us() - t;
        CHECK(cudaDeviceSynchronize());
        std::printf("| %s | %.2f |\n", c.name, spent / n);
    }
    return 0;
}
