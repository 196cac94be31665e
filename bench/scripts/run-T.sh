#!/usr/bin/env bash
# Device run T (2 × H100, nvidia-h100-x2; the first 2-GPU machine lent since 2026-11-24): the
# issues' 2-GPU benchmarks in order of priority, each under its own time limit, logged as they
# finish (a cut-off run still returns what finished). Issue 21: the fluid at 256³ × 10 per GPU,
# 2 ranks × 1 GPU against 1 process × 2 GPUs, with the MPI ping-pong of one link's packets in
# the same run (the rank exchange three ways). Issue 20: the 256³ polymer solution on 1 and 2 GPUs, plain and sheared with
# the stress sampled every 10 collisions. Hardware reference: the GPU-to-GPU copy rate.
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
set -u
source .mpi/env.sh
B=$OUT/bench; mkdir -p $B
log() { echo "$@" | tee -a $OUT/t.log; }
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a $OUT/t.log
timeout 60 .gpu/bin/mpcbox-bench-multi --gpus 2 --size 0 --weak 0 > $B/copy.md 2>&1
grep -iE "peer|copy" $B/copy.md | head -4 | tee -a $OUT/t.log
R=.gpu/mpi/mpcbox-bench-ranks
log "== fluid 256³×10 per GPU, 1 process × 2 GPUs ($(( $(date +%s) - t0 )) s)"
timeout 120 $R --gpus 0,1 --weak 256 --steps 50 > $B/ranks-1.md 2>&1; grep -E "^\|" $B/ranks-1.md | tee -a $OUT/t.log
# the rank exchange three ways: one MPI_Alltoallv (default), OpenMPI's pairwise all-to-all,
# and mpcbox's point-to-point messages with neighbours (MPCBOX_MPI_EXCHANGE=neighbours)
for how in default pairwise neighbours; do
  x=""
  [ $how = pairwise ] && x="-x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_alltoallv_algorithm=2"
  [ $how = neighbours ] && x="-x MPCBOX_MPI_EXCHANGE=neighbours"
  log "== fluid 256³×10 per GPU, 2 ranks × 1 GPU, exchange: $how ($(( $(date +%s) - t0 )) s)"
  timeout 120 mpirun -np 2 --bind-to none $x $R --gpus 0,1 --weak 256 --steps 50 > $B/ranks-2-$how.md 2>&1
  grep -E "^\||rror" $B/ranks-2-$how.md | grep -v dlopen | tail -1 | tee -a $OUT/t.log
done
P=.gpu/bin/mpcbox-bench-polymer
for a in "" "--shear-rate 0.01 --sample-interval 10"; do
  for d in cuda:0,1 cuda:0; do
    log "== polymer 256³ $d [$a] ($(( $(date +%s) - t0 )) s)"
    timeout 150 $P --cells 256 --chains 32768 --collisions 100 --device $d $a > $B/p.txt 2>&1
    grep -E "^\| 256|^fluid" $B/p.txt | tee -a $OUT/t.log; cat $B/p.txt >> $B/bench-polymer-256.md
  done
done
log "all took $(( $(date +%s) - t0 )) s"
