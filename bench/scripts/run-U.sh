#!/usr/bin/env bash
# Device run U (2 × H100, nvidia-h100-x2; issue 21, and a profile for issue 20). The GPU rank
# tests (2 and 3 ranks against one process, packets GPU to GPU and by MPI), then the fluid at
# 256³ × 10 per GPU, 2 ranks × 1 GPU against 1 process × 2 GPUs, with the packets between the
# ranks GPU to GPU through CUDA IPC (the default on one host) and by MPI three ways (one
# MPI_Alltoallv, OpenMPI's pairwise all-to-all, mpcbox's point-to-point messages), each with
# the MPI ping-pong of one link's packets in the same run. Hardware reference: the GPU-to-GPU
# copy rate. Last, the 256³ polymer solution on 2 GPUs with the MD's phases timed.
# Carry .gpu and .mpi (bench/scripts/gpu-pack-mpcbox.sh, bench/scripts/mpi-pack.sh).
source bench/scripts/device-lib.sh u.log
gpu_tests 300 ${TESTS-mpi_gpu::}
peer_copy_reference
R=.gpu/mpi/mpcbox-bench-ranks
log "== fluid 256³×10 per GPU, 1 process × 2 GPUs ($(( $(date +%s) - t0 )) s)"
timeout 120 $R --gpus 0,1 --weak 256 --steps 50 > $B/ranks-1.md 2>&1; grep -E "^\|" $B/ranks-1.md | tee -a $LOG
for how in ipc default pairwise neighbours; do
  x="-x MPCBOX_RANK_PEER_COPIES=off"
  [ $how = ipc ] && x=""
  [ $how = pairwise ] && x="$x -x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_alltoallv_algorithm=2"
  [ $how = neighbours ] && x="$x -x MPCBOX_MPI_EXCHANGE=neighbours"
  log "== fluid 256³×10 per GPU, 2 ranks × 1 GPU, packets: $how ($(( $(date +%s) - t0 )) s)"
  timeout 120 mpirun -np 2 --bind-to none $x $R --gpus 0,1 --weak 256 --steps 50 > $B/ranks-2-$how.md 2>&1
  grep -E "^\||rror|GPU-to-GPU|by MPI" $B/ranks-2-$how.md | grep -v dlopen | tail -3 | tee -a $LOG
done
P=.gpu/bin/mpcbox-bench-polymer
log "== polymer 256³ cuda:0,1, MD phases timed ($(( $(date +%s) - t0 )) s)"
timeout 150 $P --cells 256 --chains 32768 --collisions 100 --device cuda:0,1 --profile-md > $B/p-prof.txt 2>&1
grep -E "^\| 256" $B/p-prof.txt | tee -a $LOG; grep -A8 "MD phase" $B/p-prof.txt | tee -a $LOG
log "all took $(( $(date +%s) - t0 )) s"
