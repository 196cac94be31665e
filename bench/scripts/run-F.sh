#!/usr/bin/env bash
# 2 × H200 (issue 20, the MD engine decomposed over slabs): the decomposed engine's tests first
# (their summary lines), every GPU test instance (one GPU, two GPUs, 4 slabs on the two GPUs),
# the slab instances again with 4 slabs on one GPU; then the polymer benchmarks on one and two
# GPUs, decomposed and with the MD on the first GPU (MPCBOX_MD_SLABS=off), and the hardware
# references. Logs come back as logs.tgz; a summary line per test binary.
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
L=$OUT/logs; mkdir -p $L
run_tests() { # tag, filter...
  local tag=$1; shift
  for t in .gpu/tests/*; do
    name=$(basename $t | sed 's/-[0-9a-f]*$//')
    n=$("$t" --list --ignored "$@" 2>/dev/null | grep -c ": test")
    [ "$n" = 0 ] && continue
    s=$(date +%s)
    timeout 300 "$t" --ignored --test-threads=1 "$@" > $L/${tag}_$name.log 2>&1; rc=$?
    printf "%-5s %-20s rc=%-3s %4ss %s\n" "$tag" "$name" "$rc" "$(( $(date +%s) - s ))" "$(grep -E '^test result' $L/${tag}_$name.log | tail -1 | cut -c14-60)"
    grep -E "^test .*FAILED|panicked at" -A2 $L/${tag}_$name.log | head -8
  done
}
t0=$(date +%s)
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  t=$(ls .gpu/tests/md_slabs-* | head -1)
  timeout 400 $t --ignored --test-threads=1 --nocapture > $L/md_slabs_first.log 2>&1; echo "md_slabs rc=$?"
  grep -E "equal after|follows the one-GPU|^test |panicked|assert" $L/md_slabs_first.log | head -60
fi
[ "${SKIP_TESTS:-0}" = 1 ] || run_tests all
[ "${SKIP_TESTS:-0}" = 1 ] || CUDA_VISIBLE_DEVICES=0 run_tests one slabs
echo "tests took $(( $(date +%s) - t0 )) s"
grep -h "list builds per MD step\|pair-steps\|beads crossed" $L/*.log | head
B=$OUT/bench; mkdir -p $B
if [ "${SKIP_BENCH:-0}" = 1 ]; then tar czf $OUT/logs.tgz -C $OUT logs; exit 0; fi
P=.gpu/bin/mpcbox-bench-polymer
for d in cuda:0 cuda:0,1; do
  for a in "" "--shear-rate 0.01" "--shear-rate 0.01 --sample-interval 10"; do
    timeout 200 $P --cells 256 --chains 32768 --collisions 100 --device $d $a > $B/p.txt 2>&1
    echo "polymer 256 $d [$a]"; tail -3 $B/p.txt | head -1; cat $B/p.txt >> $B/bench-polymer-256.md
  done
done
for a in "" "--shear-rate 0.01 --sample-interval 10"; do
  MPCBOX_MD_SLABS=off timeout 200 $P --cells 256 --chains 32768 --collisions 100 --device cuda:0,1 $a > $B/p.txt 2>&1
  echo "polymer 256 cuda:0,1 MD on GPU 0 [$a]"; tail -3 $B/p.txt | head -1; cat $B/p.txt >> $B/bench-polymer-256-md-on-one.md
done
# the hardware references of the same run: device copy bandwidth (and the plain 256³ step),
# GPU-to-GPU copies (peer copies of pool memory, plain allocations, host staging)
timeout 120 .gpu/bin/mpcbox-bench-gpu --sizes 256 --methods fused --profile-size 0 > $B/bench-gpu.md 2>&1; grep -iE "copy|^\| 256³ .* fused \|" $B/bench-gpu.md | head -4
timeout 150 .gpu/bin/mpcbox-bench-multi --gpus 1,2 --weak 0 > $B/bench-multi.md 2>&1; grep -iE "peer|host|GB/s|^\| 256" $B/bench-multi.md | head -12
echo "all took $(( $(date +%s) - t0 )) s"
tar czf $OUT/logs.tgz -C $OUT logs bench && rm -rf $L $B
