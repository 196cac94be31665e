/* A minimal MD-side loop in C: 64 solutes in an mpcbox solvent.
 * Build: cc demo.c -I../include -L<target dir> -lmpcbox_coupling -o demo */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "mpcbox.h"

#define N 64

static double total_px(MpcboxSolvent *s, const double *vel, const double *mass) {
    MpcboxObservables o;
    if (mpcbox_observables(s, &o) != MPCBOX_STATUS_OK) return NAN;
    double p = o.momentum[0];
    for (int i = 0; i < N; i++) p += mass[i] * vel[3 * i];
    return p;
}

int main(void) {
    /* Bad input gives NULL and a message naming the field. */
    MpcboxSolvent *bad = mpcbox_create_from_ron(
        "(cells: (8, 8, 8), particles_per_cell: 10, time_step: -1.0, collision: Srd(angle_deg: 130.0), steps: 1)");
    if (bad != NULL) return 1;
    printf("bad config rejected: %s\n", mpcbox_last_error());

    MpcboxSolvent *s = mpcbox_create_from_ron(
        "(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, collision: Srd(angle_deg: 130.0),"
        " seed: 5, steps: 100, device: Cpu)");
    if (s == NULL) { fprintf(stderr, "create failed: %s\n", mpcbox_last_error()); return 1; }
    double box[3];
    mpcbox_box_lengths(s, box);

    double pos[3 * N], vel[3 * N], mass[N];
    for (int i = 0; i < N; i++) {
        pos[3 * i] = box[0] * (i % 4) / 4.0 + 0.3;
        pos[3 * i + 1] = box[1] * ((i / 4) % 4) / 4.0 + 0.7;
        pos[3 * i + 2] = box[2] * (i / 16) / 4.0 + 0.1;
        vel[3 * i] = 1.0; vel[3 * i + 1] = 0.0; vel[3 * i + 2] = -0.5;
        mass[i] = 5.0;
    }
    double p0 = total_px(s, vel, mass);
    for (int step = 0; step < 20; step++) {
        int rc = mpcbox_step(s, N, pos, vel, mass);
        if (rc != MPCBOX_STATUS_OK) { fprintf(stderr, "step failed: %s\n", mpcbox_last_error()); return 1; }
    }
    double p1 = total_px(s, vel, mass);
    double drift = fabs(p1 - p0) / (5120.0 + 5.0 * N);
    printf("steps %llu, fluid particles %llu, x momentum %.12f -> %.12f\n",
           (unsigned long long)mpcbox_step_count(s), (unsigned long long)mpcbox_fluid_particles(s), p0, p1);
    if (!(drift < 1e-12)) { fprintf(stderr, "momentum not conserved: %g\n", drift); return 1; }

    /* A NaN velocity is refused and nothing changes. */
    vel[0] = NAN;
    int rc = mpcbox_step(s, N, pos, vel, mass);
    if (rc != MPCBOX_STATUS_SOLUTE) return 1;
    printf("NaN refused: %s\n", mpcbox_last_error());
    mpcbox_free(s);
    printf("momentum conserved\n");
    return 0;
}
