#!/usr/bin/env bash
# Device runs AD (2 GPUs, nvidia-h200-x2; issue 20), the final matrix of this session's build.
# `bash bench/scripts/run-AD.sh 1`: the MD GPU tests, then the 256³ polymer solution (0.1 beads
# per cell, 100 collisions) plain, sheared, and sheared + sampled (its sample part by part), on 2
# GPUs and on one. `bash bench/scripts/run-AD.sh 2`: 128³ plain and sheared + sampled, and the
# dense solution (0.7 beads per cell, σ = 0.5) at 128³ and 256³ against the fluid alone. Carry
# .gpu and .mpi.
source bench/scripts/device-lib.sh ad$1.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, cells, collisions, args
  log "== polymer $1 ($(( $(date +%s) - t0 )) s)"
  timeout ${LIMIT-120} $P --cells $2 --collisions $3 $4 > $B/p-$1.txt 2>&1
  grep -E "^\| $2|rror" $B/p-$1.txt | cut -c1-170 | tee -a $LOG; grep -A9 "part of the coupled" $B/p-$1.txt | tail -6 | tee -a $LOG
}
S="--shear-rate 0.01"; SS="--shear-rate 0.01 --sample-interval 10"
timeout 60 .gpu/bin/mpcbox-bench-gpu --sizes 64 --methods fused --steps 5 2>&1 | grep -i "device" | tee -a $LOG
peer_copy_reference
if [ "$1" = 1 ]; then
  gpu_tests 150 ${TESTS-md_slabs:: md_gpu::}
  C="--chains 32768 --only-coupled"
  run ss-parts-2gpu 256 100 "$C --device cuda:0,1 $SS --sample-parts"
  run ss-parts-1gpu 256 100 "$C --device cuda:0 $SS --sample-parts"
  run plain-2gpu 256 100 "$C --device cuda:0,1"
  run plain-1gpu 256 100 "$C --device cuda:0"
  run s-2gpu 256 100 "$C --device cuda:0,1 $S"
  run s-1gpu 256 100 "$C --device cuda:0 $S"
else
  run 128-2gpu 128 200 "--chains 4096 --device cuda:0,1 --only-coupled"
  run 128-1gpu 128 200 "--chains 4096 --device cuda:0 --only-coupled"
  run 128-ss-2gpu 128 200 "--chains 4096 --device cuda:0,1 --only-coupled $SS"
  run 128-ss-1gpu 128 200 "--chains 4096 --device cuda:0 --only-coupled $SS"
  run dense128-2gpu 128 100 "--chains 28672 --bead-size 0.5 --device cuda:0,1"
  run dense128-1gpu 128 100 "--chains 28672 --bead-size 0.5 --device cuda:0"
  LIMIT=200 run dense256-2gpu 256 30 "--chains 229376 --bead-size 0.5 --device cuda:0,1"
  LIMIT=200 run dense256-1gpu 256 30 "--chains 229376 --bead-size 0.5 --device cuda:0"
fi
log "all took $(( $(date +%s) - t0 )) s"
