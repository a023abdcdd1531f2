#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call26.sh`. Results: $OUT/call26.tgz.
# Session 8, call 26 (call 25 ran this script with a shell function named `tr`, which
# called itself until the time ran out; renamed `trn`, and trimmed to the device time left)
# (nvidia-h100-x2 or nvidia-h200-x2), the build of call 23: the one step at
# world 2 on one host.
# 1. Equality: ddp-train --check (DDP = one process), bench zero1-check (resume, other
#    buckets, = one process).
# 2. `train run` under comm-launch, xl bf16, 8 windows per rank: #    bucketed:25 and zero1 on 2 GPUs (40 steps); does the step capture, and each rank's GEMM table.
#    Then bucketed:25 stopped at 10 and resumed to 20 against 20 straight (loss records).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call26"; mkdir -p "$R"
nvidia-smi -L
echo "=== equality ($(date -u +%T))"
timeout 120 bin/comm-launch --nproc-per-node 2 -- bin/ddp-train --backend nccl --model tiny --steps 10 --check 2>&1 | grep -E "check|rror" | tail -2
timeout 120 bin/bench zero1-check --backend nccl --ranks 2 --dir /tmp/z2 2>&1 | tail -1
echo "=== train run, xl bf16 ($(date -u +%T))"
D=/tmp/d; bin/train prepare --data $D > /dev/null 2>&1
trn() { # name nproc strategy global-batch [flags]
  timeout 200 bin/comm-launch --nproc-per-node "$2" -- bin/train run --data $D --out "/tmp/r-$1" --model xl --bf16 \
    --strategy "$3" --backend nccl --global-batch "$4" --steps 100000 --stop-after 40 --eval-every 100000 --ckpt-every 100000 --no-progress "${@:5}" \
    > "$R/$1.txt" 2>&1 || tail -3 "$R/$1.txt"
  python3 - "/tmp/r-$1/log.jsonl" "$1" <<'PY'
import json, statistics, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
print(f"{sys.argv[2]:22} {len(t):3} steps, median {tps:9.0f} tokens/s, loss {t[-1]['loss']:.4f}")
PY
  grep -h "train: step:" "$R/$1.txt" | head -1
  ls /tmp/r-$1/ | grep gemm | tr '\n' ' '; echo
  cp /tmp/r-$1/log.jsonl "$R/$1.jsonl"; rm -rf "/tmp/r-$1/checkpoints"
}
trn bucketed-2 2 bucketed:25 16
trn zero1-2 2 zero1 16
echo "=== resume at world 2, small bf16 ($(date -u +%T))"
rs() { timeout 120 bin/comm-launch --nproc-per-node 2 -- bin/train run --data $D --out "/tmp/s-$1" --model small --bf16 \
  --strategy "$2" --backend nccl --global-batch 16 --steps 20 --eval-every 10 --ckpt-every 5 --keep 2 --no-progress "${@:3}" >> "$R/s-$1.txt" 2>&1 || tail -3 "$R/s-$1.txt"; }
for st in bucketed:25 zero1; do
  n="${st%%:*}"
  rs "$n-straight" "$st"
  # Each rank's table from the straight run, where the run keeps its own.
  mkdir -p "/tmp/s-$n-resumed"; cp /tmp/s-$n-straight/gemm-choices*.json "/tmp/s-$n-resumed/"
  rs "$n-resumed" "$st" --stop-after 10
  rs "$n-resumed" "$st"
  python3 - "/tmp/s-$n-straight/log.jsonl" "/tmp/s-$n-resumed/log.jsonl" "$st" <<'PY'
import json, sys
f = lambda p: [(r["type"], r["step"], r.get("loss"), r.get("grad_norm")) for r in map(json.loads, open(p)) if r["type"] in ("train", "val")]
a, b = f(sys.argv[1]), f(sys.argv[2])
print(f"{sys.argv[3]}: straight {len(a)} records, stopped at 10 and resumed {len(b)}: bit-identical {a == b}",
      "" if a == b else f"(first apart {next((x[:2] for x, y in zip(a, b) if x != y), None)})")
PY
done
tar czf "${OUT:-/tmp/out}/call26.tgz" -C "$(dirname "$R")" call26 && rm -rf "$R"
echo "=== end ($(date -u +%T))"
