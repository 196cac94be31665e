#!/usr/bin/env bash
# Device run X (2 × H100, nvidia-h100-x2; issue 20): the decomposed MD's slabs check, bin and
# collide only the beads that may lie in their cells (collider lists), and each step's closing
# kick is folded into the next step's first half. The 256³ polymer solution (0.1 beads per
# cell, 100 collisions) and a dense one (0.7 beads per cell, 30 collisions) on one GPU and on
# two in the same run, then the GPU tests of the changed kernels. Hardware reference: the
# GPU-to-GPU copy rate. Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, mpi-pack.sh).
source bench/scripts/device-lib.sh x.log
peer_copy_reference
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, collisions, args
  log "== polymer $1 ($(( $(date +%s) - t0 )) s)"
  timeout 170 $P --cells 256 --collisions $2 --host-md $3 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $LOG; grep -A7 "host's time" $B/p-$1.txt | tail -5 | tee -a $LOG
}
run 0.1-2gpu 100 "--chains 32768 --device cuda:0,1"
run 0.1-1gpu 100 "--chains 32768 --device cuda:0"
run 0.7-2gpu 30 "--chains 229376 --device cuda:0,1"
run 0.7-1gpu 30 "--chains 229376 --device cuda:0"
gpu_tests 120 ${TESTS-md_slabs:: md_gpu:: device_solutes:: gpu_multi_solutes:: coupling:: md_walls:: gpu_backend:: md_shear:: polymer_shear::}
log "all took $(( $(date +%s) - t0 )) s"
