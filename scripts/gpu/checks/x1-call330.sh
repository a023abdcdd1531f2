#!/usr/bin/env bash
# Session 58, call 330 (nvidia-h200): (1) bench model-check with the new 96-token attention
# row (the one-block kernel at head width 64); (2) the 2.7B at 8 x 128, tiled (the rule)
# against MODEL_ATTN_TILED=0, twice more each (call 328: 60.49 against 60.27 ms, one run);
# (3) issue 33's one-GPU row as `run.sh train-speed` takes it, beside PyTorch's trainer in the
# same call: xl bf16, train run single, bench single and --clip 1, compile-ro.
CALL=c330; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
modelcheck "t96\|attention e128\|fail\|error"
run() { local m=$1 n=$2 g=$3; shift 3; ENVS="$*" train $n /tmp/r-$n $m 1 single 8 $g --fresh; }
run 2.7B t-2.7B 20
for i in 1 2; do run 2.7B tiled$i 20; run 2.7B whole$i 20 MODEL_ATTN_TILED=0; done
same tiled1 tiled2 0; same whole1 whole2 0
OUT="$R/ts" CASES="xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_TORCH=compile-ro timeout 330 bash run.sh train-speed 2>&1 | tail -12
pack; echo "done $(date -u +%T)"
