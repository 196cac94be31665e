#!/usr/bin/env bash
# Device run AC (2 GPUs, nvidia-h200-x2; issue 20): after the decomposed MD's per-slab stress
# sample (energy reductions queued on every slab, solute pressure and conformation per slab with
# no gather): the MD GPU tests, the 256³ polymer solution's sample part by part and the runs
# plain and sheared + sampled on 2 GPUs and one, then the dense solution (0.7 beads per cell,
# σ = 0.5) at 128³ against the fluid alone. `bash bench/scripts/run-AC.sh`; carry .gpu and .mpi.
source bench/scripts/device-lib.sh ac.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, cells, collisions, args
  log "== polymer $1 ($(( $(date +%s) - t0 )) s)"
  timeout 120 $P --cells $2 --collisions $3 $4 > $B/p-$1.txt 2>&1
  grep -E "^\| $2|rror" $B/p-$1.txt | cut -c1-160 | tee -a $LOG; grep -A9 "part of the coupled" $B/p-$1.txt | tail -6 | tee -a $LOG
}
SS="--shear-rate 0.01 --sample-interval 10"
timeout 60 .gpu/bin/mpcbox-bench-gpu --sizes 64 --methods fused --steps 5 2>&1 | grep -i "device" | tee -a $LOG
peer_copy_reference
gpu_tests 150 ${TESTS-md_slabs:: md_gpu:: md_overlap:: coupling::}
run ss-parts-2gpu 256 100 "--chains 32768 --only-coupled --device cuda:0,1 $SS --sample-parts"
run ss-parts-1gpu 256 100 "--chains 32768 --only-coupled --device cuda:0 $SS --sample-parts"
run plain-2gpu 256 100 "--chains 32768 --only-coupled --device cuda:0,1"
run plain-1gpu 256 100 "--chains 32768 --only-coupled --device cuda:0"
D="--chains 28672 --bead-size 0.5"
run dense128-2gpu 128 100 "$D --device cuda:0,1"
run dense128-1gpu 128 100 "$D --device cuda:0"
log "all took $(( $(date +%s) - t0 )) s"
