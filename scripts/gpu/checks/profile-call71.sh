#!/usr/bin/env bash
# Runs from the packed folder (as profile-call67.sh, with xl-run.sh beside it): `bash .gpu/profile-call71.sh`.
# Results: $OUT/call71/ (at most 8 files come back: summaries in one file).
# Session 15, call 71 (nvidia-h100-x2), xl bf16, 8 x 128 per GPU, clipping at 1.0. Call 70:
# the all-gathers left to the next forward's head run at their full speed there (not 3.5x
# slower as beside AdamW), but at about 170 GB/s a 25 MB bucket they gate the forward
# (0.25 ms a block against its 0.19), so the step did not move (54.38-54.84 ms with half or
# three quarters deferred, 57.02 with all). Faster gathers: larger buckets (new:
# --strategy zero1:MB) and more NCCL channels (NCCL_MIN_CTAS=32, 1.4 ms in call 69).
# Expected: if 100-200 MB buckets reach 300 GB/s, every gather fits in the forward (head
# 1) and AdamW runs alone: several ms off.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call71}"; R="${OUT:-/tmp/out}/$C"; L=/tmp/l71; mkdir -p "$R" "$L"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d71; bin/train prepare --data "$D" > "$L/prepare.txt" 2>&1 || { tail -3 "$L/prepare.txt"; exit 1; }
T="$L/gemm-xl-bf16.json"
. ./xl-run.sh  # run() and CUPTI
run single 1 single 30 || exit 1
run zero1-head0 2 zero1 30 ZERO1_HEAD_GATHER=0
for mb in 100 200; do
  for h in 0 0.5 1; do run "zero1:$mb-head$h" 2 "zero1:$mb" 30 ZERO1_HEAD_GATHER=$h; done
done
for mb in 100 200; do
  for h in 0 1; do run "zero1:$mb-head$h-ctas32" 2 "zero1:$mb" 30 ZERO1_HEAD_GATHER=$h NCCL_MIN_CTAS=32; done
done
for spec in "zero1:100-head1 2 zero1:100 ZERO1_HEAD_GATHER=1"; do
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
one = next(r for r in rows if r["world"] == 1)["step_ms"]
for r in rows:
    same = "" if r["world"] == 1 else ("losses = zero1's" if r["losses"] == base["losses"][:len(r["losses"])] else "losses differ from zero1:25's")
    print(f"{r['name']:<26} world {r['world']}  {r['step_ms']:>8.2f} ms  {r['step_ms'] / one:6.3f}x  {r['env'][-40:]:<40} {same}")
PY
rm -rf "$D"
echo "=== end ($(date -u +%T))"
