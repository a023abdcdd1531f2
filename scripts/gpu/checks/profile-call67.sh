#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack && bash scripts/cupti/build.sh`, copy
# this file into .gpu/, then on the device `bash .gpu/profile-call67.sh`. Results:
# $OUT/call67/.
# Session 15, call 67 (nvidia-h100-x2), xl bf16, 8 x 128 per GPU, clipping at 1.0: where one
# replay of the step goes, from CUPTI's kernel records (scripts/cupti: captured graphs
# included). One GPU (single), then zero1 and bucketed:25 at world 2, each traced over
# 20 steps; then, untraced, zero1 and bucketed:25 at world 2 with NCCL limited to fewer
# CTAs (NCCL_MAX_CTAS), the SM contention the issue names.
# Expected: compute at world 2 longer than at world 1 by the contention (GEMMs slowed by
# NCCL's CTAs) and comm_alone the exposed communication; their sum near the 6.7 ms zero1 is
# over one GPU (call 65), after AdamW's halving (about 9 ms) is counted.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call67}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d67; bin/train prepare --data "$D" > "$R/prepare.txt" 2>&1 || { tail -3 "$R/prepare.txt"; exit 1; }
T="$R/gemm-xl-bf16.json"
# run NAME WORLD STRATEGY STEPS [env...]: one train run; its median step (from step 6) to
# $R/steps.jsonl.
run() {
  local name=$1 w=$2 st=$3 steps=$4; shift 4
  local launch=() one=(--world 1) gc=()
  [ "$w" -gt 1 ] && launch=(bin/comm-launch --nproc-per-node "$w" --) && one=()
  [ -e "$T" ] && gc=(--gemm-choices "$T")
  rm -rf "/tmp/r-$name"
  env "$@" timeout 240 "${launch[@]}" bin/train run --data "$D" --out "/tmp/r-$name" --model xl --bf16 \
    --global-batch $((8 * w)) --steps 100000 --stop-after "$steps" --eval-every 100000 --ckpt-every 100000 \
    --strategy "$st" --backend nccl "${one[@]}" --fresh --clip 1 --no-progress "${gc[@]}" > "$R/$name.txt" 2>&1 \
    || { echo "$name failed:"; tail -4 "$R/$name.txt"; return 1; }
  [ -e "$T" ] || cp "/tmp/r-$name/gemm-choices.json" "$T"
  python3 - "/tmp/r-$name/log.jsonl" "$name" "$w" "$*" <<'PY' | tee -a "$R/steps.jsonl"
import json, statistics, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
w = int(sys.argv[3])
print(json.dumps({"bench": "train", "name": sys.argv[2], "world": w, "env": sys.argv[4],
                  "step_ms": round(8 * w * 128 / tps * 1e3, 3)}))
PY
  rm -rf "/tmp/r-$name"
}
CUPTI=(CUDA_INJECTION64_PATH="$PWD/cupti/libtrace.so" LD_LIBRARY_PATH="$PWD/cupti:${LD_LIBRARY_PATH:-}")
echo "=== untraced one GPU, which writes the GEMM table every later run takes ($(date -u +%T))"
run single 1 single 30 || exit 1
echo "=== traced ($(date -u +%T))"
for spec in "single 1 single" "zero1 2 zero1" "bucketed 2 bucketed:25"; do
  set -- $spec
  mkdir -p "$R/trace-$1"
  run "traced-$1" "$2" "$3" 20 "${CUPTI[@]}" CUPTI_TRACE_DIR="$R/trace-$1" || continue
  python3 cupti/summarize.py "$R/trace-$1" --skip 5 --label "$1" --timeline > "$R/summary-$1.txt" 2>&1
  tail -n +1 "$R/summary-$1.txt" | grep -v '^{' ; gzip -f "$R"/trace-$1/*.csv
done
echo "=== untraced ($(date -u +%T))"
for st in zero1 bucketed:25; do
  n=${st%%:*}
  run "$n" 2 "$st" 30
  for c in 8 16; do run "$n-ctas$c" 2 "$st" 30 NCCL_MAX_CTAS=$c; done
done
echo "=== table"
python3 - "$R/steps.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(f"{r['name']:<18} world {r['world']}  {r['step_ms']:>8.2f} ms  {r['env'][:60]}")
PY
rm -rf "$D"
echo "=== end ($(date -u +%T))"
