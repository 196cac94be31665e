// The per-rank exchange loops of fix mpcbox (coupling/lammps/fix_mpcbox_exchange.cpp: count,
// pack, unpack) timed alone on a host, by thread count, into page-locked or ordinary memory,
// with and without copying whole chunks (docs/coupling-costs.md, "LAMMPS: the fix's loops on
// more threads, its own"). OpenMP threads here: what the loops cost, not how threads wake.
//   nvcc -O3 -Xcompiler -fopenmp -Xcompiler -march=native bench/cuda/exchange_loops.cu \
//     -o /tmp/exchange_loops && OMP_WAIT_POLICY=passive /tmp/exchange_loops 820000
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>
#include <omp.h>
#include <cuda_runtime.h>
const int CHUNK = 64;
struct Bufs { double *pos, *vel, *mass; };
static double now() { return omp_get_wtime(); }
int main(int argc, char **argv) {
  int nlocal = argc > 1 ? atoi(argv[1]) : 820000;
  int reps = 20;
  size_t nmax = nlocal + nlocal / 10;
  double *x = (double *)malloc(nmax * 3 * 8), *v = (double *)malloc(nmax * 3 * 8);
  int *mask = (int *)malloc(nmax * 4), *type = (int *)malloc(nmax * 4);
  double type_mass[3] = {0, 1.0, 2.0};
#pragma omp parallel for
  for (size_t i = 0; i < nmax; i++) {
    for (int k = 0; k < 3; k++) { x[3 * i + k] = (i * 7 + k) % 256 + 0.5; v[3 * i + k] = 0.01 * k; }
    mask[i] = 3; type[i] = 1;
  }
  const int groupbit = 2;
  const double lo[3] = {0, 0, 0};
  for (int pinned = 0; pinned < 2; pinned++) {
    Bufs b;
    if (pinned) {
      cudaHostAlloc((void **)&b.pos, nmax * 24, 0); cudaHostAlloc((void **)&b.vel, nmax * 24, 0);
      cudaHostAlloc((void **)&b.mass, nmax * 8, 0);
    } else {
      b.pos = (double *)malloc(nmax * 24); b.vel = (double *)malloc(nmax * 24); b.mass = (double *)malloc(nmax * 8);
    }
    memset(b.pos, 0, nmax * 24); memset(b.vel, 0, nmax * 24); memset(b.mass, 0, nmax * 8);
    for (int fast = 0; fast < 2; fast++)
    for (int th : {1, 2, 4, 8, 16}) {
      if (th > omp_get_num_procs()) continue;
      omp_set_num_threads(th);
      const int chunks = (nlocal + CHUNK - 1) / CHUNK;
      std::vector<size_t> first(chunks + 1);
      std::vector<double> ctw(chunks);
      double tc = 0, tp = 0, tu = 0;
      for (int r = 0; r < reps + 2; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int c = 0; c < chunks; c++) {
          const int hi = std::min(nlocal, (c + 1) * CHUNK);
          size_t g = 0;
          for (int i = c * CHUNK; i < hi; i++) g += (mask[i] & groupbit) != 0;
          first[c + 1] = g;
        }
        first[0] = 0;
        for (int c = 0; c < chunks; c++) first[c + 1] += first[c];
        double t1 = now();
#pragma omp parallel for schedule(static)
        for (int c = 0; c < chunks; c++) {
          const int i0 = c * CHUNK, hi = std::min(nlocal, (c + 1) * CHUNK);
          size_t j = first[c];
          if (fast && first[c + 1] - j == (size_t)(hi - i0)) {
            // whole chunk in the group, unit cell
            const double *xs = x + 3 * i0, *vs = v + 3 * i0;
            double *p = b.pos + 3 * j, *q = b.vel + 3 * j;
            for (int k = 0; k < 3 * (hi - i0); k += 3) {
              p[k] = xs[k] - lo[0]; p[k + 1] = xs[k + 1] - lo[1]; p[k + 2] = xs[k + 2] - lo[2];
            }
            for (int k = 0; k < 3 * (hi - i0); k++) q[k] = vs[k];
            for (int i = i0; i < hi; i++) b.mass[j + i - i0] = type_mass[type[i]];
            continue;
          }
          for (int i = i0; i < hi; i++) {
            if (!(mask[i] & groupbit)) continue;
            for (int k = 0; k < 3; k++) { b.pos[3 * j + k] = x[3 * i + k] - lo[k]; b.vel[3 * j + k] = v[3 * i + k]; }
            b.mass[j] = type_mass[type[i]];
            j++;
          }
        }
        double t2 = now();
#pragma omp parallel for schedule(static)
        for (int c = 0; c < chunks; c++) {
          const int hi = std::min(nlocal, (c + 1) * CHUNK);
          size_t j = first[c];
          double tw = 0;
          for (int i = c * CHUNK; i < hi; i++) {
            if (!(mask[i] & groupbit)) continue;
            double dv2 = 0;
            for (int k = 0; k < 3; k++) { double a = b.vel[3 * j + k]; dv2 += v[3 * i + k] * v[3 * i + k] - a * a; v[3 * i + k] = a; }
            tw += b.mass[j] * dv2; j++;
          }
          ctw[c] = tw;
        }
        double t3 = now();
        if (r >= 2) { tc += t1 - t0; tp += t2 - t1; tu += t3 - t2; }
      }
      printf("n %d pinned %d fast %d threads %2d: count %.3f pack %.3f unpack %.3f ms\n", nlocal, pinned, fast, th,
             1e3 * tc / reps, 1e3 * tp / reps, 1e3 * tu / reps);
    }
  }
  return 0;
}
