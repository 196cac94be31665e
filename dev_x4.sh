#!/usr/bin/env bash
# 4-GPU measurements for issue 38 (one call); logs into $OUT as it goes
set -u
export MPCBOX_COMMIT=$(cat .gpu/COMMIT)
mkdir -p $OUT/records $OUT/logs
B=.gpu/bin/mpcbox-bench
R="--records $OUT/records"
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a $OUT/logs/steps.log; }
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/logs/gpus.log
step multi 256 strong+weak
$B $R multi --gpus 1,2,4 --size 256 --weak 256 --steps 30 > $OUT/logs/multi256.log 2>&1
step polymer 4 plain full
$B $R polymer --cells 256 --chains 32768 --collisions 50 --device cuda:0,1,2,3 > $OUT/logs/poly4.log 2>&1
step polymer 1 plain full
$B $R polymer --cells 256 --chains 32768 --collisions 50 --device cuda:0 > $OUT/logs/poly1.log 2>&1
step polymer 2 plain coupled
$B $R polymer --cells 256 --chains 32768 --collisions 50 --device cuda:0,1 --only-coupled > $OUT/logs/poly2.log 2>&1
step polymer 4 sheared
$B $R polymer --cells 256 --chains 32768 --collisions 50 --device cuda:0,1,2,3 --shear-rate 0.01 --sample-interval 10 > $OUT/logs/poly4s.log 2>&1
step polymer 1 sheared coupled
$B $R polymer --cells 256 --chains 32768 --collisions 50 --device cuda:0 --shear-rate 0.01 --sample-interval 10 --only-coupled > $OUT/logs/poly1s.log 2>&1
step production polymer
$B $R production --only polymer --polymer-steps 1000 --reference-mib 2048 > $OUT/logs/prodpoly.log 2>&1
step multi 512 strong
$B $R multi --gpus 1,4 --size 512 --weak 0 --steps 20 --warmup 10 --copy-bytes 0 > $OUT/logs/multi512.log 2>&1
step done
