#!/usr/bin/env bash
# Device run M (one GPU): the fluid over MPI ranks on the GPU. Debian's OpenMPI runtime is
# carried as .deb files in .mpi/ (`apt-get download`, see bench/README) and unpacked here.
# The GPU rank tests (tests/suite/mpi_gpu.rs) and the CPU ones with the release MPI build,
# then the rank benchmark: one process with 2 slabs on GPU 0 against 2 ranks sharing GPU 0.
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
nvidia-smi -L
T=$(ls .gpu/tests/suite-* | head -1)
echo "== mpi_gpu (ignored: GPU) =="
$T --ignored --test-threads 1 mpi_gpu:: 2>&1 | tail -25
echo "== mpi_ranks (CPU) =="
$T --test-threads 1 mpi_ranks:: 2>&1 | tail -12
echo "== bench: 1 process, 2 slabs on GPU 0 =="
.gpu/mpi/mpcbox-bench-ranks --gpus 0 --slabs 2 --weak "${WEAK:-256}" 2>&1 | tail -4
echo "== bench: 2 ranks sharing GPU 0 =="
mpirun -np 2 --oversubscribe .gpu/mpi/mpcbox-bench-ranks --gpus 0 --weak "${WEAK:-256}" 2>&1 | tail -5
