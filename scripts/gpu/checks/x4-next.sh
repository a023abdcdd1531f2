#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on a 4-GPU kind
# `bash .gpu/x4-next.sh PART` (PART: gather, big, report); results under $OUT/c/, tar them
# (the device returns at most 8 files). Written in session 17 for the next 4-GPU calls;
# each part stays under 9 minutes.
# gather: where ZeRO-1's gathers go at worlds 4 and 2 (ZERO1_PARAM_GATHER forward, adamw:K,
#   adamw), xl bf16 8 x 128, beside bench single --clip 1; then a CUPTI trace of zero1 at
#   world 4 (where the 41.4 ms of call 85 go against one GPU's 41.8).
# big: 6.7B bf16 at world 4, zero1 and zero2, 20 steps each: does it train, its step, and
#   each rank's peak (and the peak after the first step) against `cargo xtask plan`'s
#   61.8 and 55.0 GiB; then PyTorch FSDP2 compile-blocks and eager on the same shape.
# report: run.sh train-speed at worlds 1, 2 and 4, every strategy, with PyTorch DDP and
#   FSDP2, for a report whose rows all come from one call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/c"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
T="$R/gemm.json"
run() { # name model world strategy steps [env...]
  local n=$1 m=$2 w=$3 st=$4 k=$5; shift 5
  rm -rf /tmp/x; env "$@" timeout 240 bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out /tmp/x --model $m --bf16 \
    --global-batch $((8 * w)) --steps 100000 --stop-after $k --eval-every 100000 --ckpt-every 100000 --strategy $st --backend nccl \
    --fresh --no-progress $([ -f "$T" ] && [ $m = xl ] && echo --gemm-choices "$T") > "$R/$n.txt" 2>&1 || { echo "$n failed"; tail -3 "$R/$n.txt"; return; }
  [ -f "$T" ] || [ $m != xl ] || cp /tmp/x/gemm-choices.json "$T"
  echo "$n: $(ms /tmp/x $((8 * w))) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | sort | tail -1 | cut -c1-200)"
}
case "${1:-gather}" in
  gather)
    for g in forward adamw:1 adamw:2 adamw:3 adamw; do run "zero1-w4-$g" xl 4 zero1 40 ZERO1_PARAM_GATHER=$g; done
    for g in forward adamw:2 adamw:4 adamw; do run "zero1-w2-$g" xl 2 zero1 40 ZERO1_PARAM_GATHER=$g; done
    timeout 100 bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 35 \
      --gemm-choices "$T" --clip 1 --out "$R/results.jsonl" | tail -1
    OUT="$R" TRACE_STRATEGIES="zero1" TRACE_WORLD=4 timeout 150 bash ./run.sh trace > "$R/trace.out" 2>&1; tail -30 "$R/trace.out" ;;
  big)
    run zero1-6.7B-w4 6.7B 4 zero1 20
    run zero2-6.7B-w4 6.7B 4 zero2 20
    for v in compile-blocks eager; do
      timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node 4 anchors/torch_train_best.py "$D" 6.7B --dtype bf16 \
        --variant $v --parallel fsdp2 --global-batch 32 --steps 30 2> "$R/torch-6.7B-$v.err" | grep '^{' | tee -a "$R/torch.jsonl"
    done ;;
  report)
    OUT="$R" CASES=xl:bf16 TS_WORLDS="1 2 4" TS_STRATEGIES="single bucketed:25 zero1 zero2" TS_TORCH_WORLDS="2 4" \
      TS_TORCH_PARALLEL="ddp fsdp2" timeout 560 bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1; tail -20 "$R/train-speed.txt" ;;
esac
rm -rf /tmp/x "$D" "$R/train-speed/data"; echo "=== end ($(date -u +%T))"
