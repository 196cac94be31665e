#!/usr/bin/env bash
# Device run W (2 × H100, nvidia-h100-x2; issue 20): the GPU MD with its forces queued behind
# the flags' copy (speculatively) and the decomposed engine's links pulling: the GPU MD tests
# (GPU against CPU trajectories, the slab engine against the one-slab engine bit for bit), then
# the 256³ polymer solution (32,768 chains × 50 beads, 100 collisions) on 2 GPUs and on one in
# the same run, plain and sheared with the stress sampled every 10 collisions, with the host's
# time in the MD steps (--host-md). Hardware reference: the GPU-to-GPU copy rate.
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
B=$OUT/bench L=$OUT/logs; mkdir -p $B $L
log() { echo "$@" | tee -a $OUT/w.log; }
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a $OUT/w.log
T=$(ls .gpu/tests/suite-* | head -1)
tests() {
  for f in "$@"; do
    n=$(echo $f | tr -d ':'); timeout 120 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
    log "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70) ($(( $(date +%s) - t0 )) s)"
    grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12 | tee -a $OUT/w.log
  done
}
tests ${TESTS-md_gpu:: md_slabs::}
timeout 60 .gpu/bin/mpcbox-bench-multi --gpus 2 --size 0 --weak 0 > $B/copy.md 2>&1
grep -iE "peer|copy" $B/copy.md | head -4 | tee -a $OUT/w.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, args
  log "== polymer 256³ $1 ($(( $(date +%s) - t0 )) s)"
  timeout 150 $P --cells 256 --chains 32768 --collisions 100 --host-md $2 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $OUT/w.log; grep -A7 "host's time" $B/p-$1.txt | tail -5 | tee -a $OUT/w.log
}
run 2gpu "--device cuda:0,1"
run 1gpu "--device cuda:0"
run 2gpu-sheared-sampled "--device cuda:0,1 --shear-rate 0.01 --sample-interval 10"
run 1gpu-sheared-sampled "--device cuda:0 --shear-rate 0.01 --sample-interval 10"
tests ${TESTS2-mpi_gpu::the_bundled_md_decomposed_over_gpu_ranks_follows_one_process}
log "all took $(( $(date +%s) - t0 )) s"
