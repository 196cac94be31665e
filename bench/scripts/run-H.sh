#!/usr/bin/env bash
# 2 × H200 (issue 20, exchanges without a wait (fixed-capacity copies, counts among the flags)): the decomposed
# engine's tests and the coupled GPU tests that use it, then the 256³ polymer benchmark on one
# and on two GPUs (decomposed), with the hardware's copy rates of the same run.
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
L=$OUT/logs; B=$OUT/bench; mkdir -p $L $B
t0=$(date +%s)
for name in md_slabs polymer_shear device_solutes; do
  t=$(ls .gpu/tests/$name-* | head -1)
  timeout 300 $t --ignored --test-threads=1 --nocapture > $L/$name.log 2>&1; echo "$name rc=$?"
  grep -E "^test result|panicked|FAILED" -A2 $L/$name.log | head -8
done
grep -E "equal after 400|follows the one-GPU" $L/md_slabs.log | head -40
echo "tests took $(( $(date +%s) - t0 )) s"
P=.gpu/bin/mpcbox-bench-polymer
for d in cuda:0,1 cuda:0; do
  for a in "" "--shear-rate 0.01" "--shear-rate 0.01 --sample-interval 10"; do
    [ $d = cuda:0 ] && [ -n "$a" ] && continue
    timeout 200 $P --cells 256 --chains 32768 --collisions 100 --device $d $a > $B/p.txt 2>&1
    echo "polymer 256 $d [$a]"; tail -3 $B/p.txt | head -1; cat $B/p.txt >> $B/bench-polymer-256.md
  done
done
timeout 150 .gpu/bin/mpcbox-bench-multi --gpus 1,2 --weak 0 > $B/bench-multi.md 2>&1; grep -iE "peer copy, pool opened|cuMemAlloc" $B/bench-multi.md | head -3
echo "all took $(( $(date +%s) - t0 )) s"
