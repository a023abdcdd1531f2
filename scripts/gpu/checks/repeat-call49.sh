#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/repeat-call49.sh`. Results: $OUT/call49.tgz.
# Session 11, call 49 (nvidia-h100-x1): small bf16's margin on the 1.03 bar, measured three
# times in one call (train-speed with `train run` single and bench single without and
# with clipping, each round its own GEMM table; no PyTorch trainer: the bar is against
# bench single); then bench zero1 at world 1, whose ddp mode (AdamW inside the backward)
# now records no "before step" memory instead of one read after the update.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call49"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
for i in 1 2 3; do
  mkdir -p "$R/round$i"
  OUT="$R/round$i" CASES="small:bf16" TS_STRATEGIES="single" TS_TORCH=" " \
    timeout 150 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|---"
done
# Clipping's cost split in two: AdamW moved after the backward (STEP_ADAMW=after, no
# clipping), then the norm too (--clip 1); small with round 3's GEMM table, xl with
# the table its first run saves.
V="$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l][0]["vocab"])' "$R/round3/results.jsonl")" || exit 1
T=(--gemm-choices "$R/round3/train-speed/gemm-small-bf16.json"); [ -f "${T[1]}" ] || T=()
for c in small xl; do
  for how in plain after clip; do
    [ "$c" = xl ] && { [ $how = plain ] && T=(--save-gemm-choices "$R/xl.json") || T=(--gemm-choices "$R/xl.json"); }
    case $how in
      plain) timeout 120 bin/bench single --size $c --dtype bf16 --mode step --vocab "$V" "${T[@]}" --out "$R/split.jsonl" | tail -1 ;;
      after) STEP_ADAMW=after timeout 120 bin/bench single --size $c --dtype bf16 --mode step --vocab "$V" "${T[@]}" --out "$R/split.jsonl" | tail -1 ;;
      clip) timeout 120 bin/bench single --size $c --dtype bf16 --mode step --vocab "$V" "${T[@]}" --clip 1 --out "$R/split.jsonl" | tail -1 ;;
    esac
  done
done
timeout 120 bin/bench zero1 --backend nccl --ranks 1 --size small --dtype bf16 --modes ddp,zero1-ahead \
  --out "$R/zero1.jsonl" 2>&1 | tail -4
python3 - "$R" <<'PY'
import json, glob, statistics, sys
r = sys.argv[1]
rows = []
for i in (1, 2, 3):
    recs = [json.loads(l) for l in open(f"{r}/round{i}/results.jsonl")]
    tr = [x for x in recs if x.get("bench") == "train"][0]["step_ms"]
    sg = [x for x in recs if x.get("bench") == "single"]
    plain = [x for x in sg if not x.get("norm")][0]["step_ms"][0]
    clip = [x for x in sg if x.get("norm")][0]["step_ms"][0]
    rows.append((i, plain, clip, tr))
    print(f"round {i}: bench single {plain:.3f} ms, --clip 1 {clip:.3f} ({clip/plain:.3f}), train run single {tr:.3f} ({tr/plain:.3f})")
q = [t / p for _, p, _, t in rows]
print(f"train run / bench single: {', '.join(f'{x:.3f}' for x in q)}; median {statistics.median(q):.3f}")
for l in open(f"{r}/split.jsonl"):
    x = json.loads(l)
    print(f"split {x['size']}: adamw {x['adamw']}, norm {x.get('norm')}: {x['step_ms'][0]:.3f} ms, {x['graph_kernels']} kernels")
for l in open(f"{r}/zero1.jsonl"):
    x = json.loads(l)
    print(f"zero1 {x['mode']}: step {x['step_ms']:.3f} ms, own 1-GPU {x.get('single_ms')}, before step {x['before_step_gib']}, after {x['after_step_gib']}")
PY
tar czf "${OUT:-/tmp/out}/call49.tgz" -C "$(dirname "$R")" call49 && rm -rf "$R"
echo "=== end ($(date -u +%T))"
