#!/usr/bin/env bash
# Device run Q (one GPU; issue 21): the bundled MD decomposed over MPI ranks. The GPU rank
# tests (tests/suite/mpi_gpu.rs, the decomposed MD over ranks among them) and the slab
# engine's tests, then the polymer benchmark built with MPI: one process holding 2 slabs of
# GPU 0 against 2 ranks sharing GPU 0 (one slab each: what MPI staging of the fluid's and the
# beads' exchanges costs beside peer-free copies within one process), 128³ and 256³, plain and
# sheared with the stress sampled every 10 collisions. Carry .gpu and .mpi
# (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
set -u
source .mpi/env.sh
export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
nvidia-smi -L
L=$OUT/logs; B=$OUT/bench; mkdir -p $L $B
t0=$(date +%s)
T=$(ls .gpu/tests/suite-* | head -1)
for f in ${TESTS:-mpi_gpu:: md_slabs:: gpu_multi_solutes::}; do
  n=$(echo $f | tr -d ':'); timeout 300 $T --ignored --test-threads=1 --nocapture $f > $L/t_$n.log 2>&1
  echo "$f rc=$? $(grep -E '^test result' $L/t_$n.log | tail -1 | cut -c14-70)"
  grep -E "^test .*FAILED|panicked at" -A3 $L/t_$n.log | head -12
done
echo "tests took $(( $(date +%s) - t0 )) s"
[ -n "${SKIP_BENCH:-}" ] && exit 0
P=.gpu/mpi/mpcbox-bench-polymer
for size in ${SIZES:-128:4096 256:32768}; do
  c=${size%:*}; k=${size#*:}
  for a in "" "--shear-rate 0.01 --sample-interval 10"; do
    common="--cells $c --chains $k --collisions 100 --device cuda:0 --profile-md $a"
    timeout 240 $P $common --slabs 2 > $B/p1.txt 2>&1
    echo "== $c³ [$a] 1 process, 2 slabs on GPU 0"; grep -E "^\| ([0-9]|first|exch|list|forces|second)|^fluid" $B/p1.txt
    timeout 240 mpirun -np 2 --bind-to none $P $common > $B/p2.txt 2>&1
    echo "== $c³ [$a] 2 ranks sharing GPU 0"; grep -E "^\| ([0-9]|first|exch|list|forces|second)|^fluid|rror" $B/p2.txt | grep -v dlopen | head -9
    cat $B/p1.txt $B/p2.txt >> $B/bench-polymer-ranks.md
  done
  echo "at $(( $(date +%s) - t0 )) s"
done
timeout 60 mpirun -np 2 --bind-to none .gpu/mpi/mpcbox-bench-ranks --gpus 0 --weak 64 --steps 20 2>&1 | tail -1
timeout 100 .gpu/bin/mpcbox-bench-gpu --sizes 64 --steps 5 --methods fused --profile-size 0 > $B/bench-gpu.md 2>&1; grep -iE "device-to-device" $B/bench-gpu.md | head -2
echo "all took $(( $(date +%s) - t0 )) s"
