#!/bin/bash
# CPU, 4 thread ranks, small at context 256: save run (2 steps) then resume run (step 3), old binary then new.
# Usage: train prepare --data $MEAS/data; copy the two builds to /tmp/train-old and /tmp/train-new; MEAS=/tmp/meas bash scripts/cpu/resume-memory.sh
set -e
cd ${MEAS:-/tmp/meas}
for b in old new; do
  rm -rf r-$b
  for steps in 2 3; do
    /usr/bin/time -v /tmp/train-$b run --data ${MEAS:-/tmp/meas}/data --out ${MEAS:-/tmp/meas}/r-$b --model small --context 256 --world 4 --strategy zero1 --steps $steps --global-batch 4 --backend cpu --eval-every 1000 --eval-batches 1 --no-progress > $b-$steps.log 2>&1
    echo "$b steps=$steps $(grep -E 'Maximum resident' $b-$steps.log) $(grep -E 'Elapsed' $b-$steps.log)"
  done
done
