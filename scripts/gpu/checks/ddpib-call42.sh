#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/ddpib-call42.sh`. Results: $OUT/call42.tgz.
# Session 10, call 42 (nvidia-h100-x1): DDP without clipping now runs AdamW inside the
# backward (each bucket's update after its all-reduce). (1) model-check, with the new DDP
# in-backward / side-stream graph checks; (2) bench ddp --ranks 1, bucketed:25 coalesced,
# small and xl bf16 and xl fp32, the default (AdamW where one GPU runs it) and
# STEP_ADAMW=after (the DDP step before this change), alternated.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call42"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
echo "=== (1) model-check ($(date -u +%T))"
timeout 150 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"; grep -E "CUDA graph|validation graph|rror" "$R/model-check.txt" | sed 's/: TrainStep.*TrainStep, / /' | tail -16
echo "=== (2) bench ddp, NCCL world 1 ($(date -u +%T))"
for c in small:bf16 xl:bf16 xl:fp32; do
  for a in default after; do
    env $([ $a = after ] && echo STEP_ADAMW=after) timeout 200 bin/bench ddp --backend nccl --ranks 1 --size ${c%%:*} --dtype ${c##*:} \
      --strategies bucketed --buckets-mb 25 --coalesce true --warmup 2 --steps 10 --out "$R/bench.jsonl" > "$R/ddp-${c/:/-}-$a.txt" 2>&1 || echo "$c $a failed"
  done
done
python3 - "$R/bench.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['size']:6} {r['dtype'].lower():5} adamw {str(r.get('adamw')):12} step {r['step_ms']:8.3f} ± {r['step_std_ms']:.3f}  1-GPU {r['single_ms']:8.3f}  ratio {r['step_ms']/r['single_ms']:.3f}")
PY
tar czf "${OUT:-/tmp/out}/call42.tgz" -C "$(dirname "$R")" call42 && rm -rf "$R"
echo "=== end ($(date -u +%T))"
