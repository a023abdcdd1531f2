#!/usr/bin/env bash
# Runs from the packed folder (as profile-call67.sh): `bash .gpu/profile-call68.sh`.
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
run() {
  local name=$1 w=$2 st=$3 steps=$4; shift 4
  local launch=() one=(--world 1) gc=()
  [ "$w" -gt 1 ] && launch=(bin/comm-launch --nproc-per-node "$w" --) && one=()
  [ -e "$T" ] && gc=(--gemm-choices "$T")
  rm -rf "/tmp/r-$name"
  env "$@" timeout 240 "${launch[@]}" bin/train run --data "$D" --out "/tmp/r-$name" --model xl --bf16 \
    --global-batch $((8 * w)) --steps 100000 --stop-after "$steps" --eval-every 100000 --ckpt-every 100000 \
    --strategy "$st" --backend nccl "${one[@]}" --fresh --clip 1 --no-progress "${gc[@]}" > "$L/$name.txt" 2>&1 \
    || { echo "$name failed:"; tail -4 "$L/$name.txt"; return 1; }
  [ -e "$T" ] || cp "/tmp/r-$name/gemm-choices.json" "$T"
  python3 - "/tmp/r-$name/log.jsonl" "$name" "$w" "$*" <<'PY' | tee -a "$R/steps.jsonl"
import json, statistics, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
w = int(sys.argv[3])
print(json.dumps({"bench": "train", "name": sys.argv[2], "world": w, "env": sys.argv[4][-40:],
                  "step_ms": round(8 * w * 128 / tps * 1e3, 3)}))
PY
  rm -rf "/tmp/r-$name"
}
CUPTI=(CUDA_INJECTION64_PATH="$PWD/cupti/libtrace.so" LD_LIBRARY_PATH="$PWD/cupti:${LD_LIBRARY_PATH:-}")
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
