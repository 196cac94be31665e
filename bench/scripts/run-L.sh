#!/usr/bin/env bash
# 2 × H200 (nvidia-h200-x2), 2026-11-24, after run-K: the long sheared slab test with short
# chains, then the walls, multi-GPU and slab instances that run-K had no time for.
set -o pipefail
nvidia-smi --query-gpu=index,name --format=csv,noheader
L=$OUT/logs; mkdir -p $L; t0=$(date +%s)
T=$(ls .gpu/tests/suite-* | head -1)
for f in md_slabs::a_long walls:: ::multi_gpu ::slabs; do
  [ $(( $(date +%s) - t0 )) -gt 480 ] && { echo "skipped $f (time)"; continue; }
  n=$(echo $f | tr -d ':'); timeout 200 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  echo "$f rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70)"
  grep -E "^test .*FAILED|panicked at|±" $L/t_$n.log | head -8
done
echo "all took $(( $(date +%s) - t0 )) s"
