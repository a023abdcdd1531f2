#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/table-call35.sh`. Results: $OUT/call35.tgz.
# Session 9, call 35 (nvidia-h100-x1): is the gap between `train run` single and
# bucketed:25 / zero1 at world 1 the strategies' own, or each process's GEMM table (each
# process times its GEMM candidates anew)? xl fp32 and bf16, 40 steps as train-speed runs
# them: single (A: times its GEMMs), then single, bucketed:25 and zero1 all with A's table.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call35"; mkdir -p "$R"
P=/tmp/tbl; rm -rf "$P"; mkdir -p "$P"
bin/train prepare --data "$P/data" > /dev/null 2>&1 || exit 1
ms() { python3 -c '
import json, statistics, sys
t = [r["tokens_per_s"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train" and r["step"] >= 6]
print(f"{8 * 128 / statistics.median(t) * 1e3:.2f}")' "$1"; }
for dt in fp32 bf16; do
  A=(--data "$P/data" --model xl --global-batch 8 --steps 100000 --stop-after 40 --eval-every 100000
     --ckpt-every 100000 --backend nccl --world 1 --fresh --no-progress $([ $dt = bf16 ] && echo --bf16))
  bin/train run "${A[@]}" --out "$P/$dt-A" --strategy single > "$R/$dt-A.txt" 2>&1 || tail -3 "$R/$dt-A.txt"
  cp "$P/$dt-A/gemm-choices.json" "$R/$dt-A-gemm.json"
  line="$dt single(own table) $(ms "$P/$dt-A/log.jsonl")"
  for st in single bucketed:25 zero1; do
    bin/train run "${A[@]}" --out "$P/$dt-${st%%:*}" --strategy $st --gemm-choices "$R/$dt-A-gemm.json" \
      > "$R/$dt-${st%%:*}.txt" 2>&1 || tail -3 "$R/$dt-${st%%:*}.txt"
    line="$line | $st(A's table) $(ms "$P/$dt-${st%%:*}/log.jsonl")"
    cp "$P/$dt-${st%%:*}/log.jsonl" "$R/$dt-${st%%:*}.jsonl"; rm -rf "$P/$dt-${st%%:*}"
  done
  cp "$P/$dt-A/log.jsonl" "$R/$dt-A.jsonl"; rm -rf "$P/$dt-A"
  echo "$line"
done
rm -rf "$P"
tar czf "${OUT:-/tmp/out}/call35.tgz" -C "$(dirname "$R")" call35 && rm -rf "$R"
echo "=== end ($(date -u +%T))"
