/* Device-resident solutes from C/CUDA: the MD side keeps its particles in GPU memory and hands
 * mpcbox device pointers and its stream; nothing crosses PCIe. A toy MD loop (free flight on
 * the GPU) and 20 MPC collisions; checks that fluid + solute momentum is conserved.
 * Build (on a machine with CUDA):
 *   nvcc demo_device.cu -I../include -L<target dir> -lmpcbox_coupling -o demo_device */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "mpcbox.h"

#define N 4096

__global__ void drift(double *pos, const double *vel, double dt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 3 * n) pos[i] += dt * vel[i];
}

static double total_px(MpcboxSolvent *s, const double *d_vel, const double *mass, cudaStream_t st) {
    static double vel[3 * N];
    cudaMemcpyAsync(vel, d_vel, sizeof vel, cudaMemcpyDeviceToHost, st);
    cudaStreamSynchronize(st);
    MpcboxObservables o;
    if (mpcbox_observables(s, &o) != MPCBOX_STATUS_OK) return NAN;
    double p = o.momentum[0];
    for (int i = 0; i < N; i++) p += mass[i] * vel[3 * i];
    return p;
}

int main(void) {
    MpcboxSolvent *s = mpcbox_create_from_ron(
        "(cells: (32, 32, 32), particles_per_cell: 10, time_step: 0.1,"
        " collision: Srd(angle_deg: 130.0), seed: 5, steps: 100, device: Cuda([0]))");
    if (!s) { fprintf(stderr, "create failed: %s\n", mpcbox_last_error()); return 1; }
    static double pos[3 * N], vel[3 * N], mass[N];
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++) {
            pos[3 * i + k] = 32.0 * ((i * (k + 7) * 2654435761u) % 1000) / 1000.0;
            vel[3 * i + k] = 0.2 * ((i + k) % 5 - 2);
        }
        mass[i] = 10.0;
    }
    double *d_pos, *d_vel, *d_mass;
    cudaStream_t st;
    cudaStreamCreate(&st);
    cudaMalloc(&d_pos, sizeof pos); cudaMalloc(&d_vel, sizeof vel); cudaMalloc(&d_mass, sizeof mass);
    cudaMemcpy(d_pos, pos, sizeof pos, cudaMemcpyHostToDevice);
    cudaMemcpy(d_vel, vel, sizeof vel, cudaMemcpyHostToDevice);
    cudaMemcpy(d_mass, mass, sizeof mass, cudaMemcpyHostToDevice);

    double p0 = total_px(s, d_vel, mass, st);
    for (int step = 0; step < 20; step++) {
        drift<<<(3 * N + 255) / 256, 256, 0, st>>>(d_pos, d_vel, 0.1, N); /* the "MD" */
        if (mpcbox_step_device(s, N, d_pos, d_vel, d_mass, st) != MPCBOX_STATUS_OK) {
            fprintf(stderr, "step failed: %s\n", mpcbox_last_error());
            return 1;
        }
    }
    double p1 = total_px(s, d_vel, mass, st);
    double scale = 327680.0 + 10.0 * N;
    printf("x momentum %.12f -> %.12f\n", p0, p1);
    if (!(fabs(p1 - p0) < 1e-12 * scale)) { fprintf(stderr, "momentum not conserved\n"); return 1; }

    /* A host array is refused, naming the array, and nothing changes. */
    int rc = mpcbox_step_device(s, N, pos, d_vel, d_mass, st);
    if (rc != MPCBOX_STATUS_SOLUTE) { fprintf(stderr, "host pointer accepted (%d)\n", rc); return 1; }
    printf("host pointer refused: %s\n", mpcbox_last_error());
    mpcbox_free(s);
    cudaFree(d_pos); cudaFree(d_vel); cudaFree(d_mass);
    printf("device-resident coupling from C: momentum conserved\n");
    return 0;
}
