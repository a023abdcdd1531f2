#!/usr/bin/env bash
# Runs from the packed folder (as profile-call67.sh, with xl-run.sh beside it): `bash .gpu/profile-call68.sh`.
# Results: $OUT/call68/ (at most 8 files come back: summaries in one file).
# Session 15, call 68 (nvidia-h100-x2), xl bf16, 8 x 128 per GPU, clipping at 1.0: call 67's
# traces again, with the middle replay's timeline (each NCCL kernel, each gap of the compute
# kernels over 50 us), which call 67's output lost (too many files came back), for zero1
# and bucketed:25 at world 2, and zero1 with NCCL_MAX_CTAS=16 (fewer SMs held by NCCL).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call68}"; R="${OUT:-/tmp/out}/$C"; L=/tmp/l68; mkdir -p "$R" "$L"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d68; bin/train prepare --data "$D" > "$L/prepare.txt" 2>&1 || { tail -3 "$L/prepare.txt"; exit 1; }
T="$L/gemm-xl-bf16.json"
. ./xl-run.sh  # run() and CUPTI
run single 1 single 30 || exit 1
for spec in "zero1 2 zero1" "bucketed 2 bucketed:25" "zero1-ctas16 2 zero1 NCCL_MAX_CTAS=16"; do
  set -- $spec
  mkdir -p "$L/trace-$1"
  run "traced-$1" "$2" "$3" 20 "${CUPTI[@]}" CUPTI_TRACE_DIR="$L/trace-$1" ${4:+"$4"} || continue
  python3 cupti/summarize.py "$L/trace-$1" --skip 5 --label "$1" --timeline --top 25 >> "$R/summaries.txt" 2>&1
done
grep -v '^{' "$R/summaries.txt"
f=$(ls "$L"/trace-zero1/trace-*.csv | head -1); gzip -c "$f" > "$R/trace-zero1-rank.csv.gz"
rm -rf "$D"
echo "=== end ($(date -u +%T))"
