#!/usr/bin/env bash
# Session 61, call 347 (one GPU; copy this and train-runs.sh into .gpu/): each step's own
# time (StepOut::seconds: CUDA events after each step's read-back) in train's log.jsonl and
# bench's timing loop. Written before: xl 8 x 128, every logged step from 3 on within 3 % of
# the median (about 26,000 tokens/s, MFU about 31 %); step 2 (captured) slower, not 3.4 M
# tokens/s as call 344 logged; the last step as the others; with --ckpt-every 10, step 11
# slower by the checkpoint's time. `bench single --clip 1` (now timed by StepOut::seconds)
# equal to train run's median within 1 %, as in calls 344/346 (39.6 ms, other calls).
CALL=c347; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
steps() { python3 - "$R/$1.log.jsonl" "$1" <<'PY'
import json, statistics, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
med = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
print(sys.argv[2], "median from step 6:", round(med), "tokens/s")
for r in t:
    print(f"  step {r['step']:>3}: {r['tokens_per_s']:>10.0f} tokens/s ({r['tokens_per_s'] / med:.3f}x the median), mfu {r.get('mfu')}")
PY
grep -h "trained steps" "$R/$1.txt" | cut -c1-220; }
xl s128 1 single; steps s128
TMO=200 train ck /tmp/r-ck xl 1 single 8 20 --fresh --ckpt-every 10; steps ck
for k in 1 2; do
timeout 200 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --out "$R/single.jsonl" > "$R/single$k.txt" 2>&1; echo "bench single rc=$?"
done
python3 -c "
import json
for l in open('$R/single.jsonl'):
    r=json.loads(l); print('bench single --clip 1: mean', r['step_ms'][0], 'median', r['step_median_ms'], 'ms, mfu', r['mfu'])"
xl s128b 1 single; steps s128b | head -1
echo "=== end ($(date -u +%T))"
pack
