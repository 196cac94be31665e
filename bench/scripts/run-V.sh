#!/usr/bin/env bash
# Device run V (2 × H100, nvidia-h100-x2; issue 20): the decomposed GPU MD whose links pull
# (the receiver reads the exchanged beads where the sender packed them) against copying them
# first (MPCBOX_MD_EXCHANGE=copy), on the 256³ polymer solution (32,768 chains × 50 beads,
# 100 collisions), with the host's time in the MD steps (--host-md); one GPU in the same run
# as the baseline; plain and sheared with the stress sampled every 10 collisions. The GPU tests
# of the slab MD first. Hardware reference: the GPU-to-GPU copy rate.
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
source bench/scripts/device-lib.sh v.log
gpu_tests 300 ${TESTS-md_slabs:: gpu_multi_solutes::}
peer_copy_reference
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, env, args
  log "== polymer 256³ $1 ($(( $(date +%s) - t0 )) s)"
  env $2 timeout 150 $P --cells 256 --chains 32768 --collisions 100 --host-md $3 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $LOG; grep -A6 "host's time" $B/p-$1.txt | tail -4 | tee -a $LOG
}
run 2gpu-pull "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0,1"
run 2gpu-copy "MPCBOX_MD_EXCHANGE=copy" "--device cuda:0,1"
run 1gpu "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0"
run 2gpu-pull-sheared-sampled "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0,1 --shear-rate 0.01 --sample-interval 10"
run 1gpu-sheared-sampled "MPCBOX_MD_EXCHANGE=pull" "--device cuda:0 --shear-rate 0.01 --sample-interval 10"
run 2gpu-copy-sheared-sampled "MPCBOX_MD_EXCHANGE=copy" "--device cuda:0,1 --shear-rate 0.01 --sample-interval 10"
gpu_tests 200 ${TESTS2-mpi_gpu::}
log "all took $(( $(date +%s) - t0 )) s"
