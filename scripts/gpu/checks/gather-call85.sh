#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/gather-call85.sh`. Results: $OUT/c/ (tarred by the caller).
# Session 17, call 85 (4-GPU kind): ZeRO-1's parameter all-gathers moved from beside AdamW
# (the end of the step's graph, where calls 76 and 82 left a tail of gathers AdamW was too
# short to hide) to the start of the next step, beside its forward, which waits per stage
# (Megatron-Core's overlap_param_gather). ZERO1_PARAM_GATHER=adamw is the old place.
# 1. 10 steps at world 4 as one CUDA graph against 10 eager ones (small bf16, zero1, zero2).
# 2. xl bf16 8 x 128 a GPU: train run zero1 at worlds 2 and 4, new and old place, zero2 at
#    world 4, beside bench single --clip 1 (same GEMM table); expected from call 82's 44.0 ms
#    at world 4: the ~6 ms tail gone, the forward slower by what it shares with the gathers.
# 3. xl bf16 32 x 128 a GPU at world 4, zero1, new place, beside bench single --clip 1.
# 4. bench allreduce --ranks 2,4 (call 81's JSON did not come back).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/c"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d85; bin/train prepare --data "$D" > /dev/null 2>&1
vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"
# Every loss of the log, training and validation (validation reads the gathered weights).
losses() { python3 -c "import json,sys; print([json.loads(l)['loss'] for l in open(sys.argv[1]) if '\"loss\"' in l])" "$1/log.jsonl"; }
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
echo "=== graph vs eager, world 4 ($(date -u +%T))"
for st in zero1 zero2; do
  for e in graph eager; do
    rm -rf /tmp/$e; timeout 120 bin/comm-launch --nproc-per-node 4 -- bin/train run --data "$D" --out /tmp/$e --model small --bf16 --global-batch 32 \
      --steps 2000 --eval-every 5 --ckpt-every 100000 --backend nccl --no-progress --max-new 1 --strategy $st --fresh --stop-after 10 \
      $([ $e = eager ] && echo --eager) $([ -f "$R/gemm-small.json" ] && echo --gemm-choices "$R/gemm-small.json") > "$R/$e-$st.txt" 2>&1; echo "$e $st rc $?"
    [ -f "$R/gemm-small.json" ] || cp /tmp/$e/gemm-choices.json "$R/gemm-small.json"
    losses /tmp/$e > "$R/$e-$st.losses"
  done
  python3 -c "import ast,sys; a,b=(ast.literal_eval(open(f).read()) for f in sys.argv[1:]); print('$st graph vs eager: steps',len(a),len(b),'bit-identical',a==b,a[-1:],b[-1:])" "$R/graph-$st.losses" "$R/eager-$st.losses"
  grep -v '"train"' /tmp/graph/log.jsonl | grep loss | head -2 | cut -c1-160
done
T="$R/gemm-xl.json"
run() { # name world batch strategy [env...]
  local n=$1 w=$2 b=$3 st=$4; shift 4
  rm -rf /tmp/x; env "$@" timeout 150 bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out /tmp/x --model xl --bf16 --global-batch $((b * w)) \
    --steps 100000 --stop-after 40 --eval-every 100000 --ckpt-every 100000 --strategy $st --backend nccl --fresh --no-progress \
    $([ -f "$T" ] && echo --gemm-choices "$T") > "$R/$n.txt" 2>&1 || { echo "$n failed"; tail -3 "$R/$n.txt"; return; }
  [ -f "$T" ] || cp /tmp/x/gemm-choices.json "$T"
  echo "$n: $(ms /tmp/x $((b * w))) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | head -1)"
}
echo "=== xl bf16 8 x 128 a GPU ($(date -u +%T))"
run zero1-w4 4 8 zero1 X=1
run zero1-w4-adamw 4 8 zero1 ZERO1_PARAM_GATHER=adamw
run zero1-w2 2 8 zero1 X=1
run zero1-w2-adamw 2 8 zero1 ZERO1_PARAM_GATHER=adamw
run zero2-w4 4 8 zero2 X=1
run zero1-w4-again 4 8 zero1 X=1
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 35 --gemm-choices "$T" --clip 1 --out "$R/results.jsonl" | tail -1
echo "=== xl bf16 32 x 128 a GPU ($(date -u +%T))"
run zero1-w4-b32 4 32 zero1 X=1
run bucketed-w4-b32 4 32 bucketed:25 X=1
timeout 120 bin/bench single --size xl --dtype bf16 --mode step --batch 32 --vocab "$vocab" --warmup 5 --steps 35 --gemm-choices "$T" --clip 1 --out "$R/results.jsonl" | tail -1
echo "=== allreduce ($(date -u +%T))"
OUT="$R" ALLREDUCE_ARGS="--ranks 2,4" timeout 90 bash ./run.sh allreduce > "$R/allreduce.txt" 2>&1; echo "allreduce rc $?"
rm -rf /tmp/x /tmp/graph /tmp/eager "$D"; echo "=== end ($(date -u +%T))"
