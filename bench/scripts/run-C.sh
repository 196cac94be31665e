#!/usr/bin/env bash
# 2 x H200: the multi-GPU test instances, then the multi-GPU benchmarks.
set -o pipefail
nvidia-smi topo -m | head -4
L=$OUT/logs; mkdir -p $L
for t in .gpu/tests/*; do
  name=$(basename $t | sed 's/-[0-9a-f]*$//')
  n=$("$t" --list --ignored 2>/dev/null | grep -c "multi_gpu: test")
  [ "$n" = 0 ] && continue
  s=$(date +%s)
  timeout 300 "$t" --ignored --test-threads=1 multi_gpu > $L/t_$name.log 2>&1; rc=$?
  printf "%-20s rc=%-3s %4ss %s\n" "$name" "$rc" "$(( $(date +%s) - s ))" "$(grep -E '^test result' $L/t_$name.log | tail -1 | cut -c14-60)"
  grep -E "^test .*FAILED|panicked at" $L/t_$name.log | head -6
done
for t in .gpu/tests/gpu_multi_solutes* .gpu/tests/gpu_backend*; do timeout 120 $t --ignored --test-threads=1 all_gpus peer_access 2>&1 | grep -E "^test result|FAILED"; done
.gpu/bin/mpcbox-bench-multi --gpus 1,2 --transfers peer,host > $L/bench-multi.md 2>&1; tail -22 $L/bench-multi.md
for a in "" "--shear-rate 0.01 --sample-interval 10"; do
  for d in cuda:0,1 cuda:0; do
  .gpu/bin/mpcbox-bench-polymer --cells 256 --chains 32768 --collisions 100 --device $d $a > $L/poly2.txt 2>&1; echo "polymer 256 $d [$a]"; tail -2 $L/poly2.txt; cat $L/poly2.txt >> $L/bench-polymer-2gpu.md
  done
done
.gpu/bin/mpcbox-bench-coupling --sizes 256 --densities 0.1,0.7 --device cuda:0,1 --device-resident > $L/bench-coupling-2gpu.md 2>&1; tail -3 $L/bench-coupling-2gpu.md
CUDA_VISIBLE_DEVICES=0 ONLY="default f2mb4" bash bench/rules-variants.sh 256 no 2>&1 | tail -8
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
