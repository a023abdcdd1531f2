#!/usr/bin/env bash
# Session 17, call 84 (4-GPU kind): the world-4 restart run again with its logs kept (call 81's
# losses differed from the never-killed run), PyTorch's all-reduce at 2 and 4 ranks, and the
# PyTorch trainer (DDP compile-ro) at worlds 1 and 2, xl bf16 8 x 128 a GPU, for the report.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/c"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d84; bin/train prepare --data "$D" > /dev/null 2>&1
go() { local out="$1"; shift; local lf=(); while [ "$1" != -- ]; do lf+=("$1"); shift; done; shift
  timeout 150 bin/comm-launch --nproc-per-node 4 "${lf[@]}" -- bin/train run --data "$D" --out "$out" --model small --bf16 --global-batch 32 \
    --steps 2000 --eval-every 100000 --ckpt-every 10 --backend nccl --no-progress --max-new 1 --strategy zero1 "$@"; }
echo "=== clean ($(date -u +%T))"
rm -rf /tmp/clean; go /tmp/clean -- --fresh --stop-after 60 > "$R/clean.txt" 2>&1; echo "rc $?"
T=/tmp/clean/gemm-choices.json; cp $T "$R/"
echo "=== clean again, same table ($(date -u +%T))"
rm -rf /tmp/clean2; go /tmp/clean2 -- --fresh --stop-after 60 --gemm-choices "$T" > "$R/clean2.txt" 2>&1; echo "rc $?"
echo "=== killed ($(date -u +%T))"
rm -rf /tmp/killed; TRAIN_FAULT_KILL="1:23:0,2:47:1" go /tmp/killed --max-restarts 3 -- --fresh --stop-after 60 --gemm-choices "$T" > "$R/killed.txt" 2>&1; echo "rc $?"
for d in clean clean2 killed; do cp /tmp/$d/log.jsonl "$R/$d.log.jsonl"; done
python3 - "$R" <<'PY'
import json, sys
L = {n: [json.loads(l) for l in open(f"{sys.argv[1]}/{n}.log.jsonl") if '"train"' in l] for n in ("clean", "clean2", "killed")}
for n in ("clean2", "killed"):
    a, b = L["clean"], L[n]
    first = next((x["step"] for x, y in zip(a, b) if x["loss"] != y["loss"]), None)
    print(n, "steps", len(a), len(b), "steps", [r["step"] for r in b][:3], "...; first differing step", first, "; last", a[-1]["loss"], b[-1]["loss"])
PY
rm -rf /tmp/clean /tmp/clean2 /tmp/killed
echo "=== anchor-allreduce ($(date -u +%T))"
OUT="$R" timeout 150 bash ./run.sh anchor-allreduce > "$R/anchor-allreduce.txt" 2>&1; echo "rc $?"; tail -3 "$R/anchor-allreduce.txt"
for w in 1 2; do
  echo "=== torch_train_best compile-ro ddp world $w ($(date -u +%T))"
  py=(python3); [ $w -gt 1 ] && py=(python3 -m torch.distributed.run --standalone --nproc_per_node $w)
  CUDA_VISIBLE_DEVICES=$([ $w = 1 ] && echo 0 || echo 0,1) timeout 200 "${py[@]}" anchors/torch_train_best.py "$D" xl --dtype bf16 --variant compile-ro --parallel ddp \
    --global-batch $((8 * w)) --accum 1 --steps 60 2> "$R/torch-w$w.err" | grep '^{' | tee -a "$R/torch.jsonl"
done
rm -rf "$D"; echo "=== end ($(date -u +%T))"
