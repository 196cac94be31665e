#!/usr/bin/env bash
# Device run AA (2 GPUs, nvidia-h200-x2; issue 20): what a stress sample of the coupled 256³
# polymer solution costs, part by part (`mpcbox-bench-polymer --sample-parts`), on 2 GPUs and on
# one, and the sheared + sampled run itself. `bash bench/scripts/run-AA.sh`; carry .gpu and .mpi.
source bench/scripts/device-lib.sh aa.log
P=.gpu/bin/mpcbox-bench-polymer
run() { # name, args
  log "== polymer $1 ($(( $(date +%s) - t0 )) s)"
  timeout 150 $P --cells 256 --chains 32768 --collisions 100 $2 > $B/p-$1.txt 2>&1
  grep -E "^\| 256|rror" $B/p-$1.txt | tee -a $LOG; grep -A9 "part of the coupled" $B/p-$1.txt | tee -a $LOG
}
SS="--shear-rate 0.01 --sample-interval 10"
timeout 60 .gpu/bin/mpcbox-bench-gpu --sizes 64 --methods fused --steps 5 2>&1 | grep -i "device" | tee -a $LOG
peer_copy_reference
run ss-parts-2gpu "--device cuda:0,1 $SS --only-coupled --sample-parts"
run ss-parts-1gpu "--device cuda:0 $SS --only-coupled --sample-parts"
run s-2gpu "--device cuda:0,1 --shear-rate 0.01 --only-coupled"
log "all took $(( $(date +%s) - t0 )) s"
