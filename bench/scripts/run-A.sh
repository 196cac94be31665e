#!/usr/bin/env bash
# H200: every GPU test (one-GPU instances; multi-GPU ones skip), then the one-GPU benchmarks.
set -o pipefail
bash .gpu/gpu-run.sh tests
L=$OUT/bench; mkdir -p $L
t=$(date +%s)
.gpu/bin/mpcbox-bench-gpu > $L/bench-gpu.md 2>&1; grep -E "copy|^\| 256³ .* fused \|" $L/bench-gpu.md
.gpu/bin/mpcbox-bench-walls --sizes 256 > $L/bench-walls.md 2>&1; tail -8 $L/bench-walls.md
for a in "" "--shear-rate 0.1" "--shear-rate 0.1 --sample-interval 10"; do
  .gpu/bin/mpcbox-bench-polymer $a > $L/poly.txt 2>&1; echo "polymer [$a]"; tail -2 $L/poly.txt; cat $L/poly.txt >> $L/bench-polymer.md
done
.gpu/bin/mpcbox-bench-coupling --sizes 256 --densities 0.1,0.7 --device cuda:0 --device-resident > $L/bench-coupling.md 2>&1; tail -3 $L/bench-coupling.md
echo "benches took $(( $(date +%s) - t )) s"
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $L
