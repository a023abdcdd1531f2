#!/usr/bin/env bash
# Call 86 (session 18), on a 4-GPU kind, from the packed folder (copy into .gpu/):
# 6.7B bf16 at world 4 with zero1 and zero2 (does it train; its step; each rank's peak and
# its peak after the first step against `cargo xtask plan`'s 61.8 and 55.0 GiB), PyTorch
# FSDP2 compile-blocks and eager on the same shape; then xl bf16 peaks after the first step
# (single w1, zero1 and zero2 w4) against the plan. Results under $OUT/c (tar them).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/c"; mkdir -p "$R"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
run() { # name model world strategy steps
  local n=$1 m=$2 w=$3 st=$4 k=$5; shift 5
  rm -rf /tmp/x; local t0=$(date +%s)
  env "$@" timeout 240 bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out /tmp/x --model $m --bf16 \
    --global-batch $((8 * w)) --steps 100000 --stop-after $k --eval-every 100000 --ckpt-every 100000 --strategy $st --backend nccl \
    --fresh --no-progress > "$R/$n.txt" 2>&1 || { echo "$n failed ($(( $(date +%s) - t0 )) s)"; tail -4 "$R/$n.txt"; return; }
  echo "$n ($(( $(date +%s) - t0 )) s): $(ms /tmp/x $((8 * w))) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | sort | tail -1 | cut -c1-220)"
  grep -h "train loss" "$R/$n.txt" | head -1 | cut -c1-160
}
run zero2-6.7B-w4 6.7B 4 zero2 20
run zero1-6.7B-w4 6.7B 4 zero1 20
for v in compile-blocks eager; do
  t0=$(date +%s)
  timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node 4 anchors/torch_train_best.py "$D" 6.7B --dtype bf16 \
    --variant $v --parallel fsdp2 --global-batch 32 --steps 30 2> "$R/torch-6.7B-$v.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-400
  echo "torch fsdp2 $v: $(( $(date +%s) - t0 )) s"
done
run single-xl-w1 xl 1 single 20
run zero1-xl-w4 xl 4 zero1 20
run zero2-xl-w4 xl 4 zero2 20
run bucketed-xl-w4 xl 4 bucketed:25 20
rm -rf /tmp/x "$D"; echo "=== end ($(date -u +%T))"
