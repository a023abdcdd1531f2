#!/usr/bin/env bash
# Session 56, call 312 (nvidia-h200-x2): split DDP's chained gathers on a lane of their own
# (comm's ce_lane: an S and peer streams apart from the communication stream). Call 310's
# timeline ended bucketed:25's backward (world 2, train prepare's data) with 9 gaps, 1.47 ms,
# while the last launches' copies went one after another: each launch's gather was chained
# to its adds on the communication stream, so the next launch's copies waited for both.
# xl bf16, 8 x 128 a GPU, clipping at 1.0, 20 steps, interleaved against
# COMM_CE_GATHER_LANE=0 (the bits must be equal: the same adds, only the streams differ);
# bench single --clip 1 first as the base; then the kernel tracer on bucketed:25 with the lane.
# Written before: -0.5 to -1.0 ms for bucketed:25 at world 2 (the tail's gaps, 1.47 ms, to
# about half); zero1 unchanged (it chains no gather).
CALL=c312; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
env $N timeout 90 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest > "$R/selftest-w2.txt" 2>&1; echo "selftest w2 rc=$?: $(grep -c -i pass "$R/selftest-w2.txt") pass lines"; grep -i "fail\|error" "$R/selftest-w2.txt" | head -3
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 30 \
  --out "$R/single.jsonl" 2>&1 | tail -1 | cut -c1-120
for k in 1 2; do
  xl "l-$k" 2 bucketed:25 $N
  xl "o-$k" 2 bucketed:25 $N COMM_CE_GATHER_LANE=0
done
xl z-1 2 zero1 $N
same l-1 o-1 0; same l-1 l-2 0
pack
export OUT="$R"; eval "export $N"
TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 TRACE_KERNELS=1 timeout 200 bash run.sh trace 2>&1 | grep -v "^\[rank" | cut -c1-240 | sed -n 1,4p
python3 -c "
import json
for l in open('$R/trace.jsonl'):
    r=json.loads(l); t=r.get('timeline',[]); g=[x for x in t if x[0]=='gap']
    print(r['label'], 'period', r['period_ms'], 'idle', r['idle_ms'], 'tail gaps', len(g), round(sum(x[2] for x in g),3), 'ms from', g[0][1] if g else None)
    print(' gap pairs', r.get('gap_pairs',[])[:3])"
pack; echo "done $(date -u +%T)"
