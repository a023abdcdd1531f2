#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/ddpib-call43.sh`. Results: $OUT/call43.tgz.
# Session 10, call 43 (nvidia-h100-x2): DDP with AdamW inside the backward at world 2,
# where the reduces are real and each bucket is collected REDUCE_LAG stages after its
# launch. (1) ddp-train --check (DDP = one process, the ranks agree; no clipping, so
# AdamW runs inside the backward), tiny LM, four strategies; (2) bench ddp --ranks 2, xl
# bf16 and fp32, bucketed:25 coalesced, the default and STEP_ADAMW=after, alternated.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call43"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
echo "=== (1) ddp-train --check, world 2 ($(date -u +%T))"
for s in flat overlap bucketed:0.01 bucketed:25; do
  timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/ddp-train --backend nccl --model tiny --strategy $s --check \
    > "$R/check-${s%%:*}-${s##*:}.txt" 2>&1; echo "$s rc $?"; grep -E "^\[rank 0\] (check|step:)" "$R/check-${s%%:*}-${s##*:}.txt"
done
echo "=== (2) bench ddp --ranks 2 ($(date -u +%T))"
for dt in bf16 fp32; do
  for a in default after default; do
    env $([ $a = after ] && echo STEP_ADAMW=after) timeout 150 bin/bench ddp --backend nccl --ranks 2 --size xl --dtype $dt \
      --strategies bucketed --buckets-mb 25 --coalesce true --warmup 2 --steps 8 --out "$R/bench.jsonl" > "$R/ddp-$dt-$a.txt" 2>&1 || { echo "$dt $a failed"; tail -3 "$R/ddp-$dt-$a.txt"; }
  done
done
python3 - "$R/bench.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['size']:4} {r['dtype'].lower():5} w{r['world']} adamw {str(r.get('adamw')):12} step {r['step_ms']:8.3f} ± {r['step_std_ms']:.3f}  1-GPU {r['single_ms']:8.3f}  comm {r['comm_ms']:7.2f}  graph {r.get('graph')}")
PY
tar czf "${OUT:-/tmp/out}/call43.tgz" -C "$(dirname "$R")" call43 && rm -rf "$R"
echo "=== end ($(date -u +%T))"
