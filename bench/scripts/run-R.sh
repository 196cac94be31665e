#!/usr/bin/env bash
# Device run R (one GPU; issue 20): the slab engine's exchange with fewer dependent operations
# (each delivery waits only for its sender's packs, copies sized by the last count, record
# counts zeroed behind the flags' copy). The slab and rank tests, then the 256³ polymer
# benchmark as one slab and as 2 and 4 slabs of the same GPU, built before (.gpu/base, if
# carried) and after the change, with the MD's phases, and the device copy rate of the same
# run. Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
set -u
[ -f .mpi/env.sh ] && source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
nvidia-smi -L
L=$OUT/logs; B=$OUT/bench; mkdir -p $L $B
t0=$(date +%s)
T=$(ls .gpu/tests/suite-* | head -1)
for f in ${TESTS-md_slabs:: mpi_gpu:: gpu_multi_solutes::}; do
  n=$(echo $f | tr -d ':'); timeout 300 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  echo "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70)"
  grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12
done
echo "tests took $(( $(date +%s) - t0 )) s"
[ -n "${SKIP_BENCH:-}" ] && exit 0
for mode in ${MODES:-plain sheared}; do
  a=""; [ $mode = sheared ] && a="--shear-rate 0.01 --sample-interval 10"
  for s in ${SLABS:-1 2 4}; do
    for build in ${BUILDS:-base bin}; do
      P=.gpu/$build/mpcbox-bench-polymer
      [ -x $P ] || continue
      timeout 150 $P --cells ${CELLS:-256} --chains ${CHAINS:-32768} --collisions 100 --device cuda:0 --slabs $s --profile-md $a > $B/p.txt 2>&1
      echo "== $build slabs $s $mode"; grep -E "^\| ([0-9]|first|exch|list|forces|second)" $B/p.txt
      cat $B/p.txt >> $B/bench-polymer-$build.md
    done
  done
  echo "at $(( $(date +%s) - t0 )) s"
done
timeout 100 .gpu/bin/mpcbox-bench-gpu --sizes 64 --steps 5 --methods fused --profile-size 0 > $B/bench-gpu.md 2>&1; grep -iE "device-to-device" $B/bench-gpu.md | head -2
echo "all took $(( $(date +%s) - t0 )) s"
