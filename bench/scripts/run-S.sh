#!/usr/bin/env bash
# Device run S (one GPU; issue 21): checkpoints over MPI ranks. The GPU rank tests (their
# checkpoints of 3 ranks resume on 2 and 1), then a 256³ × 10 fluid on 2 ranks sharing GPU 0:
# `mpcbox run` of 2 steps ending in a checkpoint, and its resume for one more step, with the
# build before the per-rank checkpoint blocks (.gpu/base-mpi/mpcbox: the fluid gathered on rank
# 0, which writes the file; every rank reads the whole file on resume) and after it (every rank
# writes and reads its own block). Wall time, the largest resident set of any rank, the file's
# size, and the disk's own write rate in the same run (dd of 4 GiB with fsync).
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
nvidia-smi -L
L=$OUT/logs; mkdir -p $L
T=$(ls .gpu/tests/suite-* | head -1)
for f in ${TESTS-mpi_gpu::}; do
  n=$(echo $f | tr -d ':'); timeout 300 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  echo "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70)"
  grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12
done
W=/tmp/ckbench; rm -rf $W; mkdir -p $W
cat > $W/big.ron <<CFG
(cells: (${CELLS:-256}, ${CELLS:-256}, ${CELLS:-256}), particles_per_cell: 10, time_step: 0.1,
 collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 3, steps: 2, device: Cuda([0]),
 output: (observable_interval: 1, sample_interval: 1, directory: "out"))
CFG
cat > $W/timed.py <<'PY'
import resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
dt = time.time() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
print(f"rc {r.returncode}  wall {dt:.2f} s  largest rank RSS {rss:.2f} GiB")
if r.returncode:
    print(r.stderr[-2000:])
PY
for build in base-mpi mpi; do
  B=$PWD/.gpu/$build/mpcbox
  [ -x $B ] || continue
  cd $W; rm -rf out
  echo "== $build: run 2 steps + checkpoint"
  python3 timed.py mpirun -np 2 --bind-to none $B run big.ron -o out --quiet
  ls -l out/checkpoint.mpcbox | awk '{printf "checkpoint %.2f GB\n", $5/1e9}'
  echo "== $build: resume 1 step + checkpoint"
  python3 timed.py mpirun -np 2 --bind-to none $B run --resume out/checkpoint.mpcbox --steps 3 --quiet
  cd - >/dev/null
done
dd if=/dev/zero of=$W/dd.bin bs=64M count=64 conv=fsync 2>&1 | tail -1
rm -rf $W
[ -f bench/cuda/api_calls.cu ] && nvcc -O2 -o /tmp/api_calls bench/cuda/api_calls.cu && /tmp/api_calls
