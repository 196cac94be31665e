#!/usr/bin/env bash
# Device run AE (2 GPUs, nvidia-h200-x2; issue 20): the final build's MD GPU tests and the 256³
# polymer solution sheared + sampled on 2 GPUs, its sample part by part (the 1-GPU and unsampled
# figures of run AD are unchanged by it: the change only touches a decomposed engine's sample).
# `bash bench/scripts/run-AE.sh`; carry .gpu and .mpi.
source bench/scripts/device-lib.sh ae.log
P=.gpu/bin/mpcbox-bench-polymer
peer_copy_reference
gpu_tests 100 ${TESTS-md_slabs:: md_gpu:: md_overlap:: coupling::}
log "== polymer ss-parts-2gpu ($(( $(date +%s) - t0 )) s)"
timeout 90 $P --cells 256 --chains 32768 --collisions 100 --only-coupled --device cuda:0,1 \
  --shear-rate 0.01 --sample-interval 10 --sample-parts > $B/p-ss-parts-2gpu.txt 2>&1
grep -E "^\| 256|rror" $B/p-ss-parts-2gpu.txt | cut -c1-170 | tee -a $LOG
grep -A9 "part of the coupled" $B/p-ss-parts-2gpu.txt | tail -6 | tee -a $LOG
log "all took $(( $(date +%s) - t0 )) s"
