# Sourced by the session-15 check scripts (profile-call68…71.sh), from the packed folder
# (copy it into .gpu/ beside them). The caller sets D (the data), T (the GEMM table: the
# first run writes it, every later run takes it), L (logs) and R (results).
#
# run NAME WORLD STRATEGY STEPS [VAR=value...]: one `train run` of xl bf16, 8 x 128 per GPU,
# clipping at 1.0, under comm-launch above world 1; its median step from step 6 on and its
# losses as one JSON line in $R/steps.jsonl. CUPTI: the variables that trace a run
# (scripts/cupti). Calls 68-69 ran it without the losses; calls 70-71 set ZERO1_HEAD_GATHER,
# an experiment since reverted (docs/results/profile-x2.md).
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
                  "step_ms": round(8 * w * 128 / tps * 1e3, 3),
                  "losses": [r["loss"] for r in t]}))
PY
  rm -rf "/tmp/r-$name"
}
CUPTI=(CUDA_INJECTION64_PATH="$PWD/cupti/libtrace.so" LD_LIBRARY_PATH="$PWD/cupti:${LD_LIBRARY_PATH:-}")
