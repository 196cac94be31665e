#!/usr/bin/env bash
# Device run N (one GPU): the rank crossing after persistent buffers and the split timers.
# (1) OpenMPI's default binding (one core per rank at 2 ranks) is detected and warned about;
# (2) one process with 2 slabs on GPU 0 against 2 ranks sharing GPU 0, unbound, 256³ × 10 per
# slab, then the same at 128³ × 10.
set -u
source .mpi/env.sh
nvidia-smi -L
B=.gpu/mpi/mpcbox-bench-ranks
echo "== default binding (small box): the warning =="
mpirun -np 2 $B --gpus 0 --weak 32 --steps 5 --warmup 2 2>&1 | grep -E "warning|initial state" | head -3
for W in 256 128; do
  echo "== weak $W: 1 process, 2 slabs on GPU 0 =="
  $B --gpus 0 --slabs 2 --weak $W 2>&1 | tail -3
  echo "== weak $W: 2 ranks sharing GPU 0 (--bind-to none) =="
  mpirun -np 2 --bind-to none $B --gpus 0 --weak $W 2>&1 | tail -4
done
