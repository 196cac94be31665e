#!/usr/bin/env bash
# One device call: GPU tests (ignored instances) and/or benchmarks; logs come back as one tarball.
# Usage: bash .gpu/gpu-run.sh "tests bench-gpu md polymer ncu"
set -o pipefail
parts=" ${1:-tests} "
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=index,name,memory.total,clocks.sm --format=csv,noheader
if [[ $parts == *" tests "* ]]; then
  # the integration tests are one binary (suite-*): run it module by module (its own log each)
  for t in .gpu/tests/*; do
    bin=$(basename $t | sed 's/-[0-9a-f]*$//')
    mods=ALL
    [ "$bin" = suite ] && mods=$("$t" --list --ignored 2>/dev/null | grep ': test' | cut -d: -f1 | sort -u)
    for m in $mods; do
      name=$bin; filter=; [ "$m" != ALL ] && { name=$m; filter="$m::"; }
      s=$(date +%s)
      timeout 300 "$t" --ignored --test-threads=1 $filter > $L/t_$name.log 2>&1; rc=$?
      printf "%-20s rc=%-3s %4ss %s\n" "$name" "$rc" "$(( $(date +%s) - s ))" "$(grep -E '^test result' $L/t_$name.log | tail -1 | cut -c14-60)"
      grep -E "^test .*FAILED|panicked at" $L/t_$name.log | head -6
    done
  done
fi
if [[ $parts == *" bench-gpu "* ]]; then
  .gpu/bin/mpcbox-bench-gpu > $L/bench-gpu.md 2>&1
  grep -E "copy|^\| (64|128|256)³ .* fused \|" $L/bench-gpu.md
fi
if [[ $parts == *" md "* ]]; then
  .gpu/bin/mpcbox-bench-md-gpu > $L/bench-md-gpu.md 2>&1; tail -6 $L/bench-md-gpu.md
fi
if [[ $parts == *" polymer "* ]]; then
  .gpu/bin/mpcbox-bench-polymer > $L/bench-polymer.md 2>&1; tail -8 $L/bench-polymer.md
fi
if [[ $parts == *" coupling "* ]]; then
  .gpu/bin/mpcbox-bench-coupling --sizes 128,256 --densities 0.1,0.7 --device cuda:0 --device-resident > $L/bench-coupling.md 2>&1; tail -12 $L/bench-coupling.md
fi
if [[ $parts == *" ncu "* ]]; then
  timeout 240 ncu --clock-control none --kernel-name regex:mpc_collide_stream_bin --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    .gpu/bin/mpcbox-bench-gpu --sizes 128 --methods fused --steps 3 --warmup 2 > $L/ncu-fused.txt 2>&1
  grep -E "Throughput|Duration|Busy|Hit Rate|Warp Cycles|Stall|Achieved Occupancy|Registers|L2 Compression|Mem Pipes" $L/ncu-fused.txt | head -40
fi
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
