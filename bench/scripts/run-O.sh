#!/usr/bin/env bash
# Device run O (one GPU): packets between ranks copied straight into pinned MPI messages and
# uploaded from pinned memory. The GPU rank tests again (correctness of that path), then one
# process with 2 slabs on GPU 0 against 2 ranks sharing GPU 0 (unbound), 256³ and 128³ × 10
# per slab.
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
nvidia-smi -L
T=$(ls .gpu/tests/suite-* | head -1)
echo "== mpi_gpu (ignored: GPU) =="
$T --ignored --test-threads 1 mpi_gpu:: 2>&1 | tail -8
B=.gpu/mpi/mpcbox-bench-ranks
for W in 256 128; do
  echo "== weak $W: 1 process, 2 slabs on GPU 0 =="
  $B --gpus 0 --slabs 2 --weak $W 2>&1 | tail -1
  echo "== weak $W: 2 ranks sharing GPU 0 (--bind-to none) =="
  mpirun -np 2 --bind-to none $B --gpus 0 --weak $W 2>&1 | tail -3
done
