#!/usr/bin/env bash
# Session 60, call 344 (one GPU; copy this and train-runs.sh into .gpu/): the MFU that
# `train run` and `bench single` now print (28b06f7: memplan::Shape::flops_per_token, the
# bf16 dense peak of the GPU the driver names, memplan::peak).
# Written before (the H200 at 989 TFLOP/s): xl at 8 x 128 tokens, 39.6 ms a step, about 31 %
# a step; at 8 x 1024, 209.5 ms, about 50 %; `bench single --clip 1` xl about 31 %; each
# run's closing line lower (its first steps, tuning and capture, counted in).
CALL=c344; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
mfus() { python3 - "$R/$1.log.jsonl" "$1" <<'PY'
import json, statistics, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
m = [r["mfu"] for r in t if r["step"] >= 6 and "mfu" in r]
print(sys.argv[2], f"median MFU from step 6: {100 * statistics.median(m):.1f} %" if m else "no mfu in the log")
PY
grep -h "trained steps" "$R/$1.txt" | cut -c1-200; }
xl m128 1 single; mfus m128
TMO=200 train m1k /tmp/r-m1k xl 1 single 8 30 --fresh --context 1024; mfus m1k
timeout 200 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --out "$R/single.jsonl" > "$R/single.txt" 2>&1; echo "bench single rc=$?"
python3 -c "
import json,sys
for l in open('$R/single.jsonl'):
    r=json.loads(l); print('bench single --clip 1:', r['step_ms'][0], 'ms, mfu', r['mfu'])"
echo "=== end ($(date -u +%T))"
pack
