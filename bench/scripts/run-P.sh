#!/usr/bin/env bash
# One GPU (issue 20, while 2-GPU machines are not lent), after the slab engine's work lists,
# band-local cell layers and warp-aggregated flag atomics: the decomposed engine's tests, then
# the 256³ polymer benchmark as one slab and as 2 and 4 slabs of the same GPU (the
# decomposition's own cost), with the MD's phases for each, and the device copy rate of the
# same run as the hardware reference.
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
L=$OUT/logs; B=$OUT/bench; mkdir -p $L $B
t0=$(date +%s)
T=$(ls .gpu/tests/suite-* | head -1)
for f in ${TESTS:-md_slabs:: md_gpu:: md_shear_lists:: polymer_shear:: device_solutes::}; do
  n=$(echo $f | tr -d ':'); timeout 200 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  echo "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70)"
  grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12
done
grep -E "equal after 400|follows the one-GPU|±" $L/t_md_slabs.log | head -20
echo "tests took $(( $(date +%s) - t0 )) s"
[ -n "$SKIP_BENCH" ] && exit 0
P=.gpu/bin/mpcbox-bench-polymer
for a in "" "--shear-rate 0.01 --sample-interval 10"; do
  for s in 1 2 4; do
    timeout 150 $P --cells 256 --chains 32768 --collisions 100 --device cuda:0 --slabs $s --profile-md $a > $B/p.txt 2>&1
    echo "polymer 256 cuda:0 slabs $s [$a]"; grep -E "^\| (256|first|exch|list|forces|second)" $B/p.txt
    cat $B/p.txt >> $B/bench-polymer-256.md
  done
done
timeout 100 .gpu/bin/mpcbox-bench-gpu --sizes 64 --steps 5 --methods fused --profile-size 0 > $B/bench-gpu.md 2>&1; grep -iE "device-to-device" $B/bench-gpu.md | head -2
echo "all took $(( $(date +%s) - t0 )) s"
