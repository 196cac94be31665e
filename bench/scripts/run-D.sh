#!/usr/bin/env bash
# 2 x H200: re-check after the sheared-list change and the test fixes, then the sheared polymer benches.
set -o pipefail
L=$OUT/logs; mkdir -p $L
run() { local b=$1; shift; local t=$(ls .gpu/tests/$b-*); s=$(date +%s); timeout 300 $t --ignored --test-threads=1 --nocapture "$@" > $L/t_$b.log 2>&1; echo "$b $* rc=$? $(( $(date +%s) - s ))s $(grep -E '^test result' $L/t_$b.log | tail -1 | cut -c14-60)"; grep -E "FAILED|panicked at|DPD under shear|step 60" $L/t_$b.log | head -6; }
run md_shear
run md_gpu
run polymer_shear
run md_walls
run rules_viscosity multi_gpu
run walls couette
B=.gpu/bin/mpcbox-bench-polymer
for a in "" "--shear-rate 0.02" "--shear-rate 0.02 --sample-interval 10"; do $B $a > $L/p.txt 2>&1; echo "128 [$a]"; grep "^| 128" $L/p.txt; cat $L/p.txt >> $L/bench-polymer.md; done
for a in "" "--shear-rate 0.01" "--shear-rate 0.01 --sample-interval 10"; do for d in cuda:0 cuda:0,1; do $B --cells 256 --chains 32768 --collisions 100 --device $d $a > $L/p.txt 2>&1; echo "256 $d [$a]"; grep "^| 256" $L/p.txt; cat $L/p.txt >> $L/bench-polymer-256.md; done; done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
