#!/usr/bin/env bash
# Device run Z (2 GPUs, nvidia-h200-x2 or nvidia-h100-x2; issue 20): the benchmark matrix of the
# coupled polymer solution after this session's changes (collider lists, kicks folded, first
# halves packing the drift's exchange, builds with one wait, the fluid streaming while the MD
# steps). Two calls: `bash bench/scripts/run-Z.sh 1` (GPU tests, 256³ at 0.1 beads per cell:
# plain, sheared, sheared + sampled, on 2 GPUs and on one) and `bash bench/scripts/run-Z.sh 2`
# (0.7 beads per cell at σ = 0.5, 128³, the overlap switched off for comparison, the MD over
# MPI ranks). Hardware references: device copy and GPU-to-GPU copy rates. Carry .gpu and .mpi.
source bench/scripts/device-lib.sh z$1.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, cells, collisions, args, environment (VAR=value ...)
  log "== polymer $1 ${5-} ($(( $(date +%s) - t0 )) s)"
  env ${5-} timeout 200 $P --cells $2 --collisions $3 --host-md $4 > $B/p-$1.txt 2>&1
  grep -E "^\| $2|rror" $B/p-$1.txt | tee -a $LOG; grep -A7 "host's time" $B/p-$1.txt | tail -5 | tee -a $LOG
}
S="--shear-rate 0.01"; SS="--shear-rate 0.01 --sample-interval 10"
if [ "$1" = 1 ]; then
  timeout 60 .gpu/bin/mpcbox-bench-gpu --sizes 64 --methods fused --steps 5 2>&1 | grep -i "device" | tee -a $LOG
  peer_copy_reference
  gpu_tests 150 ${TESTS-md_overlap:: md_slabs:: md_gpu:: device_solutes:: coupling::}
  run 256-2gpu 256 100 "--chains 32768 --device cuda:0,1"
  run 256-1gpu 256 100 "--chains 32768 --device cuda:0"
  run 256-ss-2gpu 256 100 "--chains 32768 --device cuda:0,1 $SS"
  run 256-ss-1gpu 256 100 "--chains 32768 --device cuda:0 $SS"
  run 256-s-2gpu 256 100 "--chains 32768 --device cuda:0,1 $S --only-coupled"
  run 256-s-1gpu 256 100 "--chains 32768 --device cuda:0 $S --only-coupled"
else
  peer_copy_reference
  D="--chains 229376 --bead-size 0.5"
  run 256-dense-2gpu 256 30 "$D --device cuda:0,1"
  run 256-dense-1gpu 256 30 "$D --device cuda:0"
  run 128-2gpu 128 200 "--chains 4096 --device cuda:0,1"
  run 128-1gpu 128 200 "--chains 4096 --device cuda:0"
  run 128-ss-2gpu 128 200 "--chains 4096 --device cuda:0,1 $SS"
  run 128-ss-1gpu 128 200 "--chains 4096 --device cuda:0 $SS"
  run 256-2gpu-sequential 256 100 "--chains 32768 --device cuda:0,1 --only-coupled" MPCBOX_MD_OVERLAP=off
  run 256-1gpu-sequential 256 100 "--chains 32768 --device cuda:0 --only-coupled" MPCBOX_MD_OVERLAP=off
  gpu_tests 150 ${TESTS2-mpi_gpu::the_bundled_md_decomposed_over_gpu_ranks_follows_one_process}
fi
log "all took $(( $(date +%s) - t0 )) s"
