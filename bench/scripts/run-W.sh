#!/usr/bin/env bash
# Device run W (2 × H100, nvidia-h100-x2; issue 20): the GPU MD with its forces queued behind
# the flags' copy (speculatively) and the decomposed engine's links pulling: the GPU MD tests
# (GPU against CPU trajectories, the slab engine against the one-slab engine bit for bit), then
# the 256³ polymer solution (32,768 chains × 50 beads, 100 collisions) on 2 GPUs and on one in
# the same run, plain and sheared with the stress sampled every 10 collisions, with the host's
# time in the MD steps (--host-md). Hardware reference: the GPU-to-GPU copy rate.
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
source bench/scripts/device-lib.sh w.log
gpu_tests 120 ${TESTS-md_gpu:: md_slabs::}
peer_copy_reference
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, args
  log "== polymer 256³ $1 ($(( $(date +%s) - t0 )) s)"
  timeout 150 $P --cells 256 --chains 32768 --collisions 100 --host-md $2 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $LOG; grep -A7 "host's time" $B/p-$1.txt | tail -5 | tee -a $LOG
}
run 2gpu "--device cuda:0,1"
run 1gpu "--device cuda:0"
run 2gpu-sheared-sampled "--device cuda:0,1 --shear-rate 0.01 --sample-interval 10"
run 1gpu-sheared-sampled "--device cuda:0 --shear-rate 0.01 --sample-interval 10"
gpu_tests 120 ${TESTS2-mpi_gpu::the_bundled_md_decomposed_over_gpu_ranks_follows_one_process}
log "all took $(( $(date +%s) - t0 )) s"
