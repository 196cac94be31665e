#!/usr/bin/env bash
# Device run V (2 × H100, nvidia-h100-x2; issue 20): the decomposed GPU MD whose links pull
# (the receiver reads the exchanged beads where the sender packed them) against copying them
# first (MPCBOX_MD_EXCHANGE=copy), on the 256³ polymer solution (32,768 chains × 50 beads,
# 100 collisions), with the host's time in the MD steps (--host-md); one GPU in the same run
# as the baseline; plain and sheared with the stress sampled every 10 collisions. The GPU tests
# of the slab MD first. Hardware reference: the GPU-to-GPU copy rate.
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
B=$OUT/bench L=$OUT/logs; mkdir -p $B $L
log() { echo "$@" | tee -a $OUT/v.log; }
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a $OUT/v.log
T=$(ls .gpu/tests/suite-* | head -1)
for f in ${TESTS-md_slabs:: gpu_multi_solutes::}; do
  n=$(echo $f | tr -d ':'); timeout 300 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  log "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70) ($(( $(date +%s) - t0 )) s)"
  grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12 | tee -a $OUT/v.log
done
timeout 60 .gpu/bin/mpcbox-bench-multi --gpus 2 --size 0 --weak 0 > $B/copy.md 2>&1
grep -iE "peer|copy" $B/copy.md | head -4 | tee -a $OUT/v.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, env, args
  log "== polymer 256³ $1 ($(( $(date +%s) - t0 )) s)"
  env $2 timeout 150 $P --cells 256 --chains 32768 --collisions 100 --host-md $3 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $OUT/v.log; grep -A6 "host's time" $B/p-$1.txt | tail -4 | tee -a $OUT/v.log
}
run 2gpu-pull "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0,1"
run 2gpu-copy "MPCBOX_MD_EXCHANGE=copy" "--device cuda:0,1"
run 1gpu "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0"
run 2gpu-pull-sheared-sampled "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0,1 --shear-rate 0.01 --sample-interval 10"
run 1gpu-sheared-sampled "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0 --shear-rate 0.01 --sample-interval 10"
run 2gpu-copy-sheared-sampled "MPCBOX_MD_EXCHANGE=copy" "--device cuda:0,1 --shear-rate 0.01 --sample-interval 10"
for f in ${TESTS2-mpi_gpu::}; do
  n=$(echo $f | tr -d ':'); timeout 200 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  log "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70) ($(( $(date +%s) - t0 )) s)"
  grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12 | tee -a $OUT/v.log
done
log "all took $(( $(date +%s) - t0 )) s"
