#!/usr/bin/env bash
# Session 56, call 310 (nvidia-h200-x2): ddp::rows under ZeRO-1 (the embedding table's
# gradient from every rank's gathered rows; this rank keeps its chunk, as the bucket's
# reduce-scatter would), xl bf16, 8 x 128 a GPU, clipping at 1.0, 20 steps, interleaved
# against DDP_ROWS=0, bench single --clip 1 first as the base. Then the kernel tracer on
# bucketed:25 at world 2 with rows (call 307 without: idle 1.88 / 2.20 ms a replay).
# Written before: zero1 -0.1 to -0.3 ms (call 309 gave bucketed:25 -0.07 / -0.14).
# Copy into .gpu/ with train-runs.sh, cupti/ and nccl/.
CALL=c310; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 30 \
  --out "$R/single.jsonl" 2>&1 | tail -1 | cut -c1-120
for k in 1 2; do
  xl "zr-$k" 2 zero1 $N
  xl "zd-$k" 2 zero1 $N DDP_ROWS=0
done
same zr-1 zr-2 0
for n in zr-1 zd-1; do python3 -c "
import json,sys; t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(sys.argv[1].split('/')[-1], [(r['step'], round(r['loss'],5), round(r.get('grad_norm') or 0,5)) for r in t[:12:3]+t[-1:]])" "$R/$n.log.jsonl"; done
pack
export OUT="$R"
eval "export $N"
TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 TRACE_KERNELS=1 timeout 300 bash run.sh trace 2>&1 | grep -v "^\[rank" | cut -c1-240 | tail -45
pack; echo "done $(date -u +%T)"
