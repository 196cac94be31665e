#!/usr/bin/env bash
# One H200 (issue 20, while 2-GPU machines are not lent): the decomposed engine's tests on 2-4
# slabs of one GPU, the coupled GPU tests that use it, then the 256³ polymer benchmark on one GPU
# as one slab and decomposed over 2 and 4 slabs of the same GPU (the decomposition's own cost),
# plain, sheared and sheared + sampled, with the device copy rate of the same run.
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
L=$OUT/logs; B=$OUT/bench; mkdir -p $L $B
t0=$(date +%s)
for name in ${TESTS:-md_slabs polymer_shear device_solutes}; do
  t=$(ls .gpu/tests/suite-* | head -1)
  timeout 300 $t --ignored --test-threads=1 --nocapture $name:: > $L/$name.log 2>&1; echo "$name rc=$?"
  grep -E "^test result|panicked|FAILED" -A2 $L/$name.log | head -8
done
grep -E "equal after 400|follows the one-GPU" $L/md_slabs.log | head -40
echo "tests took $(( $(date +%s) - t0 )) s"
[ -n "$SKIP_BENCH" ] && exit 0
P=.gpu/bin/mpcbox-bench-polymer
for s in 1 2 4; do
  for a in "" "--shear-rate 0.01" "--shear-rate 0.01 --sample-interval 10"; do
    timeout 200 $P --cells 256 --chains 32768 --collisions 100 --device cuda:0 --slabs $s $a > $B/p.txt 2>&1
    echo "polymer 256 cuda:0 slabs $s [$a]"; tail -3 $B/p.txt | head -1; cat $B/p.txt >> $B/bench-polymer-256.md
  done
done
timeout 100 .gpu/bin/mpcbox-bench-gpu --help >/dev/null 2>&1
echo "all took $(( $(date +%s) - t0 )) s"
