#!/usr/bin/env bash
# Session 57, call 320 (nvidia-h200-x2): where ZeRO-1's step at world 2 spends its time
# beyond one GPU's (call 319: zero1 38.28 ms, bench single --clip 1 41.05; half AdamW saves
# about 7 ms, so the sharding costs about 4.2 ms). The kernel tracer (kernels only) on
# `train run` single at world 1 and zero1 at world 2, xl bf16, 8 x 128 a GPU, clipping at
# 1.0: each one's period, idle, categories, its largest gaps and the gaps after the backward.
CALL=c320; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
eval "export $N"
OUT="$R" TRACE_STRATEGIES="single zero1" TRACE_WORLD=2 TRACE_KERNELS=1 timeout 300 bash run.sh trace 2>&1 | grep -v "^\[rank" | cut -c1-200 | grep -v "^ *[0-9.]* ms  *[0-9]*x" | head -20
python3 - "$R" <<'PY'
import json, sys
for l in open(f"{sys.argv[1]}/trace.jsonl"):
    r = json.loads(l)
    if r.get("bench") != "cupti":
        print(r.get("label"), "waits", r.get("wait_ms"), "last", r.get("last_share")); continue
    print(r["label"], "period", r["period_ms"], "compute", r["compute_ms"], "idle", r["idle_ms"])
    print("  categories", r["category_ms"])
    print("  top", [(k, round(t, 3), int(n)) for k, t, n in r["kernels_ms"][:14]])
    print("  gap pairs", r["gap_pairs"][:6])
    print("  timeline", r.get("timeline", [])[:10])
PY
pack; echo "done $(date -u +%T)"
