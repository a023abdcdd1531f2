#!/usr/bin/env bash
# Session 54, call 297 (nvidia-h200-x2): AdamW without a cap on its grid (call 296: an
# xl-sized flat update 14.52 -> 13.35 ms). `bench adamw` at xl and the 6.7B (tensorwise:
# the step's launches, at the new default and at the old cap of 2,112 blocks), then
# `train run` xl bf16, 8 x 128 a GPU, with the old binaries (old/bin: the cap) and the new,
# single, zero1 and bucketed:25 at world 2, old and new beside each other; `same` on each
# pair (the grid does not change an element's arithmetic, so the bits must be equal).
# Copy into .gpu/ with train-runs.sh and old/bin. Output: $OUT/c297.tgz.
CALL=c297; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
aw() { timeout 150 bin/bench adamw --size "$1" --iters 20 --out "$R/adamw.jsonl" > "$R/adamw-$1.txt" 2>&1
  echo "== bench adamw $1 rc=$?"; cat "$R/adamw-$1.txt"; pack; }
aw xl
for st in single zero1 bucketed:25; do
  w=2; [ $st = single ] && w=1
  for v in old new; do use $v; xl "${st%%:*}-$v" $w $st; done; use new
  same "${st%%:*}-old" "${st%%:*}-new" 0
done
use old; xl single-old2 1 single; use new; xl single-new2 1 single
aw 6.7B
pack; echo "done $(date -u +%T)"
