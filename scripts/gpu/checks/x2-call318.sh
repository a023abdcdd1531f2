#!/usr/bin/env bash
# Session 57, call 318 (nvidia-h200-x2): DDP_SPLIT_LATE_STAGES past call 317 (K = 0 43.74 /
# 43.90 ms, 1 43.74 / 43.84, 2 43.60 / 43.47, 4 43.48 / 43.52). xl bf16 bucketed:25 at world
# 2, 8 x 128 a GPU, clipping at 1.0, 20 steps, one GEMM table (a world-1 run first),
# interleaved, three runs each: K = 0, 4, 8, 2. Then the kernel tracer (kernels only) on
# bucketed:25 with K = 4 and K = 0: the tail's gaps after the backward.
# Written before: K = 8 no better than 4 (the backlog is the last 2-3 launches' copies);
# traced, K = 4's tail gaps about 0.3 ms less than K = 0's.
CALL=c318; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single $N
for k in 1 2 3; do
  for K in 0 4 8 2; do xl "k$K-$k" 2 bucketed:25 $N DDP_SPLIT_LATE_STAGES=$K; done
done
for K in 0 4 8 2; do same k$K-1 k$K-2 0; same k$K-1 k$K-3 0; done
pack
eval "export $N"
for K in 4 0; do
  mkdir -p "$R/tk$K"
  OUT="$R/tk$K" DDP_SPLIT_LATE_STAGES=$K TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 TRACE_KERNELS=1 timeout 150 bash run.sh trace 2>&1 | grep -v "^\[rank" | cut -c1-240 | sed -n 1,3p
  python3 -c "
import json
for l in open('$R/tk$K/trace.jsonl'):
    r=json.loads(l)
    if r.get('bench')!='cupti': continue
    t=r.get('timeline',[]); g=[x for x in t if x[0]=='gap']
    print('K=$K', r['label'], 'period', r['period_ms'], 'idle', r['idle_ms'], 'tail gaps', len(g), round(sum(x[2] for x in g),3), 'ms from', g[0][1] if g else None)
    print(' gap pairs', r.get('gap_pairs',[])[:3])"
  pack
done
echo "done $(date -u +%T)"
