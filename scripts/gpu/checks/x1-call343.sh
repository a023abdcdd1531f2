#!/usr/bin/env bash
# Session 60, call 343 (one GPU; copy this and train-runs.sh into .gpu/): GEMMs tuned at the
# power cap. Call 342 found xl's step at 8 x 1024 tokens holding the H200 at its 700 W cap,
# the SMs at 1,515 MHz (0.77x boost); the tuner times each cuBLASLt candidate over 8 short
# replays, at the boost clock of a GPU that was idle. MODEL_GEMM_TUNE_HOT_MS=100 replays each
# candidate 100 ms before timing it over about 100 ms more, at the clock the cap leaves.
# xl, 8 x 1024 tokens, one GPU: a table tuned each way, then runs with each table
# alternated (cold, hot, cold, hot), nvidia-smi beside the first two.
# Written before: where the hot tuning picks otherwise for some shapes, the step 1-3 %
# shorter with its table; where it picks alike, within the spread (0.5 %).
CALL=c343; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
k1k() { TMO=${TMO:-200} train "$@" --fresh --context 1024; }
k1k tune-cold /tmp/r-tc xl 1 single 8 20 && cp /tmp/r-tc/gemm-choices.json "$R/gemm-cold.json"
ENVS=MODEL_GEMM_TUNE_HOT_MS=100 TMO=300 k1k tune-hot /tmp/r-th xl 1 single 8 20 && cp /tmp/r-th/gemm-choices.json "$R/gemm-hot.json"
python3 - "$R" <<'PY'
import json, sys
R = sys.argv[1]
a, b = (json.load(open(f"{R}/gemm-{t}.json")) for t in ("cold", "hot"))
key = lambda c: (c["m"], c["n"], c["k"], c["ta"], c["tb"], c["dtype"], c["add"])
h = {key(c): c for c in b["choices"]}
diff = [(key(c), c["index"], h[key(c)]["index"]) for c in a["choices"] if key(c) in h and h[key(c)]["index"] != c["index"]]
print(f"{len(diff)} of {len(a['choices'])} shapes chose otherwise tuned hot (shape, cold's index, hot's):")
for d in diff: print("  ", d)
PY
for i in 1 2; do
  [ $i = 1 ] && smi cold$i; k1k cold$i /tmp/r-c$i xl 1 single 8 30 --gemm-choices "$R/gemm-cold.json"; [ $i = 1 ] && smistop cold$i
  [ $i = 1 ] && smi hot$i; k1k hot$i /tmp/r-h$i xl 1 single 8 30 --gemm-choices "$R/gemm-hot.json"; [ $i = 1 ] && smistop hot$i
done
for n in cold1 hot1 cold2 hot2; do echo "$n: $(msc $n 8 1024) ms a step"; done
echo "=== end ($(date -u +%T))"
pack
