#!/usr/bin/env bash
# Call 143 (session 27), FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 8 minutes. torch-x4-call144.sh follows it on the same machine.
# - Our steps: one GPU (`train run` and `bench single --clip 1` on one GEMM table), zero1
#   and bucketed:25 at world 4.
# - SM gathers beside AdamW (ZERO1_PARAM_GATHER=adamw:K): call 141 measured K = 1, 2, 3 at
#   world 4 (40.19 → 40.21, 39.91, 39.73 ms); K = 4 and 5 there, and K = 3 and 5 at world 2
#   (GPUs 0-1), each beside the default of this call.
# - PyTorch DDP eager at world 4 (the issue's second anchor variant), 30 timed steps.
# - The all-reduce sweep at 2 and 4 ranks, ours and PyTorch's (2 ranks were ours alone).
CALL=call143
source "$(dirname "$0")/train-runs.sh"
export TMO=80 TTMO=300
xl single 1 single
bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --clip 1 --out "$R/results.jsonl" > "$R/bench-single.txt" 2>&1 && tail -1 "$R/bench-single.txt" | cut -c1-200
xl zero1-w4 4 zero1
for k in 3 4 5; do xl zero1-w4-adamw$k 4 zero1 ZERO1_PARAM_GATHER=adamw:$k; done
xl bucketed-w4 4 bucketed:25
xl zero1-w2 2 zero1
for k in 3 5; do xl zero1-w2-adamw$k 2 zero1 ZERO1_PARAM_GATHER=adamw:$k; done
xl zero1-w4-again 4 zero1
torch xl eager 30 ddp 4
OUT="$R/ar" ALLREDUCE_ARGS="--ranks 2,4" bash run.sh allreduce anchor-allreduce > "$R/allreduce.txt" 2>&1 || echo "allreduce failed"
python3 - "$R/ar" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl") if l.startswith("{")]
theirs = [json.loads(l) for l in open(sys.argv[1] + "/torch.jsonl") if l.startswith("{")]
print("all-reduce records:", len(ours), "ours,", len(theirs), "PyTorch's")
PY
pack
