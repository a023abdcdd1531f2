#!/usr/bin/env bash
# Call 150 (session 28), TWO or FOUR GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/); about 5 minutes on two. Split DDP (ddp::split, DDP_SPLIT=1):
# bucketed:25's all-reduces as reduce-scatters during the backward and all-gathers of the
# averaged gradients beside AdamW, launch by launch. Against bucketed:25 as it is and one
# GPU's step (train run single, bench single --clip 1), at xl (8 x 128 tokens a GPU) and
# small; then a trace of each (run.sh trace) to see where the time went.
CALL=call150
source "$(dirname "$0")/train-runs.sh"
export TMO=80
G=$(nvidia-smi -L | wc -l)
xl single 1 single
for w in 2 $([ "$G" -ge 4 ] && echo 4); do
  xl bucketed-w$w $w bucketed:25
  xl split-w$w $w bucketed:25 DDP_SPLIT=1
  same bucketed-w$w split-w$w
done
xl split100-w2 2 bucketed:100 DDP_SPLIT=1
bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --clip 1 --out "$R/results.jsonl" > "$R/bench-single.txt" 2>&1 && tail -1 "$R/bench-single.txt" | cut -c1-120
sm() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n small $w $st $((8 * w)) 40 --fresh; }
sm small-single 1 single
sm small-bucketed-w2 2 bucketed:25
sm small-split-w2 2 bucketed:25 DDP_SPLIT=1
mkdir -p $R/t0 $R/t1
TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 OUT=$R/t0 bash run.sh trace > "$R/trace-job-0.txt" 2>&1 || echo "trace failed"
DDP_SPLIT=1 TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 OUT=$R/t1 bash run.sh trace > "$R/trace-job-1.txt" 2>&1 || echo "trace (split) failed"
for t in t0 t1; do echo "== $t"; R=$R/$t traces 3; done
pack
