#!/usr/bin/env bash
# The README's "An outside MD code's solutes on several GPUs and ranks" on a 4-GPU host: the
# coupling scenario in one process (1 and 4 GPUs) and over 4 ranks, device and host arrays, and
# LAMMPS with fix mpcbox (per rank on 4 GPUs; gathered on rank 0 with the fluid on 1 and on 4)
# beside the bundled engine on the same polymer solution.
#
#   here:  bash bench/device.sh pack && bash bench/device.sh pack-mpi && bash bench/device.sh pack-lammps
#   there: bash bench/scripts/outside-solutes.sh          (carry .gpu, .mpi and .lmp)
#   here:  bash bench/device.sh take DIR                  (the records fetched into DIR)
#
# Each line is one bench/device.sh job; run them in parts where a command has a time limit
# (PART=coupling, PART=ranks, PART=lammps; default all), about 10 minutes in all.
set -u
cd "$(dirname "$0")/../.."
D=cuda:0,1,2,3
L="--cells 256 --chains 32768 --collisions 10 --warmup 25"
part=${PART:-all}
quiet() { grep -v -E "pmix|dlopen error|Perhaps a missing"; }
if [ "$part" = all ] || [ "$part" = coupling ]; then
  bash bench/device.sh run "multi --gpus 4 --size 0 --weak 0" \
    "coupling --sizes 256 --device cuda:0 --device-resident" \
    "coupling --sizes 256 --device cuda:0 --pinned-host" \
    "coupling --sizes 128,256 --device $D --device-resident" \
    "coupling --sizes 256 --device $D --device-resident --overlap --phases" \
    "coupling --sizes 256 --device $D --pinned-host" \
    "coupling --sizes 256 --device $D" 2>&1 | quiet
fi
if [ "$part" = all ] || [ "$part" = ranks ]; then
  bash bench/device.sh run \
    "np=4 coupling --sizes 128,256 --device $D --per-rank --device-resident --phases" \
    "np=4 -x MPCBOX_RANK_SOLUTE_SPLIT=route-twice coupling --sizes 256 --device $D --per-rank --device-resident --phases" \
    "np=4 coupling --sizes 256 --device $D --per-rank --pinned-host --phases" \
    "np=4 coupling --sizes 256 --device $D --per-rank" 2>&1 | quiet
fi
if [ "$part" = all ] || [ "$part" = lammps ]; then
  bash bench/device.sh run "lammps --lmp /tmp/lmp/bin/lmp_mpcbox --np 4 $L --device $D" \
    "lammps --lmp /tmp/lmp/bin/lmp_mpcbox_gather --np 4 $L --device cuda:0" \
    "lammps --lmp /tmp/lmp/bin/lmp_mpcbox_gather --np 4 $L --device $D" \
    "polymer --cells 256 --chains 32768 --collisions 50 --only-coupled --device $D" \
    "polymer --cells 256 --chains 32768 --collisions 50 --only-coupled --device cuda:0" 2>&1 | quiet
fi
