#!/bin/bash
# A checkpoint's host memory on the CPU (docs/results/checkpoint-host-s45.md): `small` at
# context 256, WORLD thread ranks (default 4), zero1; for each binary (OLD, then NEW): a save
# run (2 steps, then a checkpoint) and a resume run (--steps 3: resumes at step 2, trains
# step 3, saves). Prints each run's peak resident memory and wall time (/usr/bin/time -v).
# Usage: train prepare --data $MEAS/data; OLD=path/to/train NEW=path/to/train MEAS=/tmp/meas WORLD=4 bash scripts/cpu/resume-memory.sh
set -e
M=${MEAS:-/tmp/meas}
cd "$M"
for b in old new; do
  exe=${OLD:-/tmp/train-old}; [ $b = new ] && exe=${NEW:-/tmp/train-new}
  rm -rf "r-$b"
  for steps in 2 3; do
    /usr/bin/time -v "$exe" run --data "$M/data" --out "$M/r-$b" --model small --context 256 --world "${WORLD:-4}" \
      --strategy zero1 --steps $steps --global-batch 4 --backend cpu --eval-every 1000 --eval-batches 1 --no-progress > "$b-$steps.log" 2>&1
    echo "$b steps=$steps $(grep -E 'Maximum resident' "$b-$steps.log") $(grep -E 'Elapsed' "$b-$steps.log")"
  done
done
