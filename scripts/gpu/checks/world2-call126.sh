#!/usr/bin/env bash
# Call 126 (session 24), two GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/): issue 48's world-2 bar with the memsets spliced as kernels (call 125's build):
# --accum 4 over --accum 1 with bucketed:25 and zero1 at world 2, against the same ratio of
# single at world 1 (within 5 %). 15 steps each (median from step 6), as little device time
# was left.
CALL=call126
source "$(dirname "$0")/train-runs.sh"
for st in single bucketed:25 zero1; do
  w=2; [ $st = single ] && w=1
  for a in 1 4; do TMO=60 train ${st%%:*}-w$w-a$a /tmp/r-$a xl $w $st $((8 * w * a)) 15 --accum $a --fresh; done
done
python3 - "$R" <<'PY'
import json, statistics, sys
def ms(n, g):
    t = [json.loads(l) for l in open(f"{sys.argv[1]}/{n}.log.jsonl") if '"train"' in l]
    return g * 128 / statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6) * 1e3
base = None
for st, w in (("single", 1), ("bucketed", 2), ("zero1", 2)):
    try:
        a1, a4 = ms(f"{st}-w{w}-a1", 8 * w), ms(f"{st}-w{w}-a4", 32 * w)
    except OSError:
        continue
    r = a4 / a1; base = base or r
    print(f"{st:9} world {w}: accum 1 {a1:.2f} ms, accum 4 {a4:.2f} ms, ratio {r:.3f}, vs world 1 {100 * (r / base - 1):+.1f} %")
PY
pack
