/* One MPC box over MPI ranks, driven from C: each rank holds its own solutes (dealt by index,
 * wherever they are) and steps the shared box with them; mpcbox routes each solute to the rank
 * that owns its cell and the new velocity back.
 *
 *   cargo build --release -p mpcbox-coupling --features mpi
 *   mpicc coupling/examples/demo_ranks.c -o demo_ranks -Icoupling/include \
 *       -Ltarget/release -lmpcbox_coupling -lm -Wl,-rpath,$PWD/target/release
 *   mpirun -np 2 ./demo_ranks OUT_DIR
 *
 * Each rank writes OUT_DIR/solutes_<rank>.txt ("j vx vy vz"); rank 0 prints the momentum of
 * fluid + solutes before and after (conserved: SRD without thermostat). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpcbox.h"

#define SOLUTES 120
#define STEPS 20

static uint64_t state = 0x9e3779b97f4a7c15ull;
static double uniform(void) { /* xorshift64*, as examples/ranks_solutes.rs */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return (double)((state * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static void fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, mpcbox_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* fluid + solute momentum over all ranks */
static void momentum(struct MpcboxSolvent *s, int n, const double *vel, const double *mass,
                     double out[3]) {
    double mine[3] = {0, 0, 0};
    MpcboxObservables fluid;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) mine[k] += mass[i] * vel[3 * i + k];
    MPI_Allreduce(mine, out, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (mpcbox_observables(s, &fluid) != MPCBOX_STATUS_OK) fail("observables");
    for (int k = 0; k < 3; k++) out[k] += fluid.momentum[k];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 2) {
        fprintf(stderr, "usage: demo_ranks OUT_DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (mpcbox_use_mpi_comm(MPI_Comm_c2f(MPI_COMM_WORLD)) != MPCBOX_STATUS_OK) fail("communicator");
    struct MpcboxSolvent *s = mpcbox_create_from_ron(
        "(cells: (8, 12, 8), particles_per_cell: 5, time_step: 0.1, "
        "collision: Srd(angle_deg: 130.0), thermostat: None, seed: 21, steps: 20, device: Cpu, "
        "tuning: (reorder_interval: Some(0)))");
    if (!s) fail("create");
    /* a communicator handed over once a solvent exists is refused, naming the fix (this rank's
     * solvents already hold the box over the communicator they were built with) */
    if (mpcbox_use_mpi_comm(MPI_Comm_c2f(MPI_COMM_WORLD)) == MPCBOX_STATUS_OK ||
        !strstr(mpcbox_last_error(), "before the first solvent")) {
        fprintf(stderr, "a late communicator was not refused: %s\n", mpcbox_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (mpcbox_set_solutes_per_rank(s, 1) != MPCBOX_STATUS_OK) fail("per rank");
    double pos[3 * SOLUTES], vel[3 * SOLUTES], mass[SOLUTES];
    int index[SOLUTES], n = 0;
    for (int j = 0; j < SOLUTES; j++) {
        double p[3] = {8 * uniform(), 36 * uniform() - 12, 8 * uniform()};
        double v[3] = {uniform() - 0.5, uniform() - 0.5, uniform() - 0.5};
        double m = 1 + 4 * uniform();
        if (j % ranks != rank) continue;
        for (int k = 0; k < 3; k++) {
            pos[3 * n + k] = p[k];
            vel[3 * n + k] = v[k];
        }
        mass[n] = m;
        index[n++] = j;
    }
    double before[3], after[3];
    momentum(s, n, vel, mass, before);
    for (int step = 0; step < STEPS; step++)
        if (mpcbox_step(s, (size_t)n, pos, vel, mass) != MPCBOX_STATUS_OK) fail("step");
    momentum(s, n, vel, mass, after);
    char path[4096];
    snprintf(path, sizeof path, "%s/solutes_%d.txt", argv[1], rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "%d %.17e %.17e %.17e\n", index[i], vel[3 * i], vel[3 * i + 1], vel[3 * i + 2]);
    fclose(f);
    if (rank == 0)
        printf("momentum %.17e %.17e %.17e -> %.17e %.17e %.17e\n", before[0], before[1], before[2],
               after[0], after[1], after[2]);
    mpcbox_free(s);
    MPI_Finalize();
    return 0;
}
