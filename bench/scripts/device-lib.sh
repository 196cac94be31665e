# Shared by the device runs (run-U.sh and later): `source bench/scripts/device-lib.sh <log name>`.
# OpenMPI from .mpi on PATH, the MPI mpcbox for the rank tests, $B (bench output) and $L (test
# logs) under $OUT, `log` (to stdout and $OUT/<log name>), the GPUs named, and:
#   gpu_tests SECONDS FILTER...   the ignored GPU tests of each filter, one log each
#   peer_copy_reference           the GPU-to-GPU copy rate (the hardware reference)
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
B=$OUT/bench L=$OUT/logs; mkdir -p $B $L
LOG=$OUT/$1
log() { echo "$@" | tee -a $LOG; }
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a $LOG
T=$(ls .gpu/tests/suite-* | head -1)
gpu_tests() {
  local limit=$1; shift
  for f in "$@"; do
    local n=$(echo $f | tr -d ':')
    timeout $limit $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
    log "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70) ($(( $(date +%s) - t0 )) s)"
    grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12 | tee -a $LOG
  done
}
peer_copy_reference() {
  timeout 60 .gpu/bin/mpcbox-bench-multi --gpus 2 --size 0 --weak 0 > $B/copy.md 2>&1
  grep -iE "peer|copy" $B/copy.md | head -4 | tee -a $LOG
}
