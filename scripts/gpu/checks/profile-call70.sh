#!/usr/bin/env bash
# Runs from the packed folder (as profile-call67.sh, with xl-run.sh beside it): `bash .gpu/profile-call70.sh`.
# Results: $OUT/call70/ (at most 8 files come back: summaries in one file).
# Session 15, call 70 (nvidia-h100-x2), xl bf16, 8 x 128 per GPU, clipping at 1.0. Calls
# 68-69: ZeRO-1's bucket all-gathers run 3.5x slower beside AdamW than alone, and about 150
# of 200 are still queued when AdamW ends (8.4 ms with no compute); NCCL_MIN_CTAS=32 took
# 1.4 ms off. New: ZERO1_HEAD_GATHER=share leaves that share of the buckets (the last
# stages') to the head of the next forward, where they overlap its GEMMs. Expected: up to
# the 8.4 ms exposed, less what the gathers slow the forward by. The losses of every run
# must be bit-identical to head 0's (the gather's timing changes, not its values).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call70}"; R="${OUT:-/tmp/out}/$C"; L=/tmp/l70; mkdir -p "$R" "$L"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d70; bin/train prepare --data "$D" > "$L/prepare.txt" 2>&1 || { tail -3 "$L/prepare.txt"; exit 1; }
T="$L/gemm-xl-bf16.json"
. ./xl-run.sh  # run() and CUPTI
run single 1 single 30 || exit 1
for h in 0 0.5 0.75 1; do run "zero1-head$h" 2 zero1 30 ZERO1_HEAD_GATHER=$h; done
for h in 0 0.75 1; do run "zero1-head$h-ctas32" 2 zero1 30 ZERO1_HEAD_GATHER=$h NCCL_MIN_CTAS=32; done
for spec in "zero1-head0.75 2 zero1 ZERO1_HEAD_GATHER=0.75"; do
  set -- $spec
  mkdir -p "$L/trace-$1"
  run "traced-$1" "$2" "$3" 20 "${CUPTI[@]}" CUPTI_TRACE_DIR="$L/trace-$1" ${4:+"$4"} || continue
  python3 cupti/summarize.py "$L/trace-$1" --skip 5 --label "$1" --timeline --top 25 >> "$R/summaries.txt" 2>&1
done
grep -v '^{' "$R/summaries.txt"
echo "=== table"
python3 - "$R/steps.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = next(r for r in rows if r["name"] == "zero1-head0")
for r in rows:
    same = "" if r["world"] == 1 else ("losses = head0's" if r["losses"] == base["losses"][:len(r["losses"])] else "LOSSES DIFFER")
    print(f"{r['name']:<24} world {r['world']}  {r['step_ms']:>8.2f} ms  {r['env'][-40:]:<40} {same}")
PY
rm -rf "$D"
echo "=== end ($(date -u +%T))"
