#!/usr/bin/env bash
# Device run AB (2 GPUs, nvidia-h200-x2; issue 20): after the moments' reduction in a few
# thousand blocks and the report's per-block sums spread over 32 copies: the fluid's GPU tests,
# then the 256³ polymer solution (0.1 beads per cell, 100 collisions) plain, sheared, and
# sheared + sampled with the sample's parts, on 2 GPUs and on one. `bash bench/scripts/run-AB.sh`
# (TESTS=... to choose the test filters); carry .gpu and .mpi.
source bench/scripts/device-lib.sh ab.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, args
  log "== polymer $1 ($(( $(date +%s) - t0 )) s)"
  timeout 100 $P --cells 256 --chains 32768 --collisions 100 --only-coupled $2 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | cut -c1-120 | tee -a $LOG; grep -A9 "part of the coupled" $B/p-$1.txt | tail -6 | tee -a $LOG
}
SS="--shear-rate 0.01 --sample-interval 10"
timeout 60 .gpu/bin/mpcbox-bench-gpu --sizes 64 --methods fused --steps 5 2>&1 | grep -i "device" | tee -a $LOG
peer_copy_reference
gpu_tests 120 ${TESTS-gpu_backend:: conservation:: thermostat:: shear_viscosity:: walls:: md_overlap::}
run plain-2gpu "--device cuda:0,1"
run plain-1gpu "--device cuda:0"
run ss-parts-2gpu "--device cuda:0,1 $SS --sample-parts"
run ss-parts-1gpu "--device cuda:0 $SS --sample-parts"
log "all took $(( $(date +%s) - t0 )) s"
