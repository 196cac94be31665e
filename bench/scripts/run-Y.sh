#!/usr/bin/env bash
# Device run Y (2 × H100, nvidia-h100-x2; issue 20): the coupled loop begins the fluid's next
# step (pass 1: deferred collision, streaming, binning) before the MD steps, which run on their
# own high-priority streams meanwhile (MPCBOX_MD_OVERLAP=on, the default). GPU tests of the
# change first, then the 256³ polymer solution (0.1 beads per cell, 100 collisions) on 2 GPUs
# and on one, overlapped (all columns) and not (MPCBOX_MD_OVERLAP=off, coupled time only), in
# the same call. Hardware reference: the GPU-to-GPU copy rate. Carry .gpu and .mpi.
source bench/scripts/device-lib.sh y.log
peer_copy_reference
gpu_tests 150 ${TESTS-md_overlap:: md_slabs:: md_gpu:: device_solutes::}
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, args, environment (VAR=value ...)
  log "== polymer $1 ${3-} ($(( $(date +%s) - t0 )) s)"
  env ${3-} timeout 170 $P --cells 256 --chains 32768 --collisions 100 --host-md $2 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $LOG; grep -A7 "host's time" $B/p-$1.txt | tail -5 | tee -a $LOG
}
run 2gpu "--device cuda:0,1"
run 1gpu "--device cuda:0"
run 2gpu-sequential "--device cuda:0,1 --only-coupled" MPCBOX_MD_OVERLAP=off
run 1gpu-sequential "--device cuda:0 --only-coupled" MPCBOX_MD_OVERLAP=off
gpu_tests 150 ${TESTS2-mpi_gpu::the_bundled_md_decomposed_over_gpu_ranks_follows_one_process}
log "all took $(( $(date +%s) - t0 )) s"
