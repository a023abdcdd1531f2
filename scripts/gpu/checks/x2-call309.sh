#!/usr/bin/env bash
# Session 56, call 309 (nvidia-h200-x2): DDP's tail at world 2 without the embedding's
# bucket. Call 307's timeline put 0.9 ms of copy-engine transfers after bucketed:25's
# backward; the last launch is the embedding table's gradient (50,304 x 1,600, 161 MB of
# bf16), final only when the backward ends. ddp::rows (DdpOptions::gather_rows, on in
# `train`) gathers every rank's 1,024 rows of its output gradient (3.3 MB) and ids instead,
# and each rank computes the averaged table gradient itself. xl bf16, 8 x 128 a GPU,
# clipping at 1.0, 20 steps, interleaved against DDP_ROWS=0; bench single --clip 1 first as
# the base; then bench ddp-check (NCCL, tiny LM, world 2: against one process, captured).
# Written before: -0.5 to -0.9 ms for bucketed:25 (43.9 -> about 43.1 ms, 1.075x -> 1.055x).
# Found after: the data here has 683 tokens in its vocabulary, not 50,304: 2 x 1,024 tokens
# exceed 2 x 683 rows, so no step took rows (call 311 measures them at 50,304).
CALL=c309; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 30 \
  --out "$R/single.jsonl" 2>&1 | tail -1 | cut -c1-120
for k in 1 2; do
  xl "r-$k" 2 bucketed:25 $N
  xl "d-$k" 2 bucketed:25 $N DDP_ROWS=0
done
same r-1 r-2 0
for n in r-1 d-1; do python3 -c "
import json,sys; t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(sys.argv[1].split('/')[-1], [(r['step'], round(r['loss'],5), round(r.get('grad_norm') or 0,5)) for r in t[-2:]])" "$R/$n.log.jsonl"; done
for s in bucketed:25 bucketed:0.01; do for g in "" --bf16-grads; do
  env $N timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/bench ddp-check --backend nccl --model tiny --strategy $s $g 2>&1 | grep '^\[rank 0\] check' | cut -c1-200
done; done
pack; echo "done $(date -u +%T)"
