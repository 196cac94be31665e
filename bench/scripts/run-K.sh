#!/usr/bin/env bash
# 2 × H200 (nvidia-h200-x2), 2026-11-24: the multi-GPU and slab test instances, then the 256³
# polymer benchmark on 1 and 2 GPUs (plain, sheared, sheared + sampled; the decomposed MD's
# phases on 2 GPUs), the dense device-resident coupling step, and the GPU-to-GPU copy rate of
# the same run as the hardware reference.
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
L=$OUT/logs; B=$OUT/bench; mkdir -p $L $B
t0=$(date +%s)
P=.gpu/bin/mpcbox-bench-polymer
for d in cuda:0,1 cuda:0; do
  for a in "" "--shear-rate 0.01" "--shear-rate 0.01 --sample-interval 10"; do
    timeout 200 $P --cells 256 --chains 32768 --collisions 100 --device $d $a > $B/p.txt 2>&1
    echo "polymer 256 $d [$a]"; grep -E "^\| 256" $B/p.txt; cat $B/p.txt >> $B/bench-polymer-256.md
  done
done
timeout 200 $P --cells 256 --chains 32768 --collisions 50 --warmup 10 --device cuda:0,1 --profile-md > $B/p.txt 2>&1
grep -E "^\|" $B/p.txt | head -8; cat $B/p.txt >> $B/bench-polymer-256.md
timeout 200 .gpu/bin/mpcbox-bench-coupling --sizes 256 --densities 0.7 --device cuda:0 --device-resident > $B/coupling-1.md 2>&1; tail -6 $B/coupling-1.md
timeout 200 .gpu/bin/mpcbox-bench-coupling --sizes 256 --densities 0.7 --device cuda:0,1 --device-resident > $B/coupling-2.md 2>&1; tail -6 $B/coupling-2.md
timeout 150 .gpu/bin/mpcbox-bench-multi --gpus 1,2 --weak 0 > $B/bench-multi.md 2>&1; grep -iE "peer copy|cuMemAlloc|device copy" $B/bench-multi.md | head -4
T=$(ls .gpu/tests/suite-* | head -1)
for f in md_slabs:: walls:: ::multi_gpu ::slabs; do
  [ $(( $(date +%s) - t0 )) -gt 420 ] && { echo "skipped $f (time)"; continue; }
  n=$(echo $f | tr -d ':'); timeout 150 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  echo "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70)"
  grep -E "^test .*FAILED|panicked at" $L/t_$n.log | head -6
done
grep -E "equal after 400|follows the one-GPU|±" $L/t_md_slabs.log | grep "0, 1\|±" | head -20
echo "tests took $(( $(date +%s) - t0 )) s"
echo "all took $(( $(date +%s) - t0 )) s"
