#!/usr/bin/env bash
# One H200 (2026-11-24, after the test-suite merge, the z-normal slit, knobs and typed errors):
# every GPU test module by module (1 GPU; the `slabs` instances put 4 slabs on this GPU), then
# the walls benchmark at 256³ (the switch-based wall dispatch against the README table), with
# the device copy rate of the same run.
set -o pipefail
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
t0=$(date +%s)
bash .gpu/gpu-run.sh tests 2>&1 | grep -v "^$"
echo "tests took $(( $(date +%s) - t0 )) s"
mkdir -p $OUT/bench
timeout 200 .gpu/bin/mpcbox-bench-walls --sizes 256 > $OUT/bench/bench-walls.md 2>&1; tail -8 $OUT/bench/bench-walls.md
grep -iE "copy" $OUT/bench/bench-walls.md | head -2
echo "all took $(( $(date +%s) - t0 )) s"
