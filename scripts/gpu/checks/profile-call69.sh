#!/usr/bin/env bash
# Runs from the packed folder (as profile-call67.sh, with xl-run.sh beside it): `bash .gpu/profile-call69.sh`.
# Results: $OUT/call69/ (at most 8 files come back: summaries in one file).
# Session 15, call 69 (nvidia-h100-x2), xl bf16, 8 x 128 per GPU, clipping at 1.0. Call 68's
# timeline: every NCCL kernel of the step is named RING_LL, and ZeRO-1's 25 MB bucket
# all-gathers run at about 170 GB/s alone and 3.5x slower beside AdamW, so that 150 of
# about 200 are still queued when AdamW ends (8.4 ms with no compute). NCCL's protocol
# (NCCL_PROTO=Simple, LL128) and more channels (NCCL_MIN_CTAS=32) for zero1 and
# bucketed:25 at world 2, then the Simple protocol traced. Expected: if LL was used, Simple
# or LL128 up to 2x faster collectives and several ms off zero1.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call69}"; R="${OUT:-/tmp/out}/$C"; L=/tmp/l69; mkdir -p "$R" "$L"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d69; bin/train prepare --data "$D" > "$L/prepare.txt" 2>&1 || { tail -3 "$L/prepare.txt"; exit 1; }
T="$L/gemm-xl-bf16.json"
. ./xl-run.sh  # run() and CUPTI
run single 1 single 30 || exit 1
for st in zero1 bucketed:25; do
  n=${st%%:*}
  run "$n" 2 "$st" 30
  run "$n-simple" 2 "$st" 30 NCCL_PROTO=Simple
  run "$n-ll128" 2 "$st" 30 NCCL_PROTO=LL128
  run "$n-ctas32" 2 "$st" 30 NCCL_MIN_CTAS=32
done
for spec in "zero1-simple 2 zero1 NCCL_PROTO=Simple" "bucketed-simple 2 bucketed:25 NCCL_PROTO=Simple"; do
  set -- $spec
  mkdir -p "$L/trace-$1"
  run "traced-$1" "$2" "$3" 20 "${CUPTI[@]}" CUPTI_TRACE_DIR="$L/trace-$1" ${4:+"$4"} || continue
  python3 cupti/summarize.py "$L/trace-$1" --skip 5 --label "$1" --timeline --top 25 >> "$R/summaries.txt" 2>&1
done
grep -v '^{' "$R/summaries.txt"
echo "=== table"
python3 - "$R/steps.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(f"{r['name']:<22} world {r['world']}  {r['step_ms']:>8.2f} ms  {r['env'][-40:]}")
PY
rm -rf "$D"
echo "=== end ($(date -u +%T))"
