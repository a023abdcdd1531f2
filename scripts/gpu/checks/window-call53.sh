#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/window-call53.sh`. Results: $OUT/call53.tgz.
# Session 12, call 53 (asked for nvidia-h200): does the timing window move the xl bf16
# ratio? train-speed times `bench single` over 10 steps after 3 warm-up steps and
# `train run` over steps 6-40 (host intervals, median). Here, one GEMM table, the same
# process kinds at 10, 35 and 150 timed steps, train run at 40 and 150 steps (its
# per-step log kept), with the SM clock and power sampled every 100 ms throughout
# (each run's start and end written beside them).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call53"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > "$R/smi.csv" 2>&1 &
SMI=$!
mark() { echo "$(date -u +%H:%M:%S.%N) $*" >> "$R/marks.txt"; }
bin/train prepare --data "$R/data" > "$R/prepare.txt" 2>&1 || { cat "$R/prepare.txt"; exit 1; }
V="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$R/data/meta.json")"
T="$R/gemm.json"
tr() { # steps label [table flag]
  local d="$R/run-$2"; mark "start train $2"
  timeout 120 bin/train run --data "$R/data" --out "$d" --model xl --bf16 --global-batch 8 --steps 100000 \
    --stop-after "$1" --eval-every 100000 --ckpt-every 100000 --strategy single --backend nccl --world 1 \
    --fresh --no-progress "${@:3}" > "$d.txt" 2>&1 || tail -3 "$d.txt"
  mark "end train $2"; cp "$d/log.jsonl" "$R/log-$2.jsonl"; [ -f "$T" ] || cp "$d/gemm-choices.json" "$T"; rm -rf "$d"
}
bs() { # label args...
  mark "start single $1"
  timeout 120 bin/bench single --size xl --dtype bf16 --mode step --vocab "$V" --gemm-choices "$T" "${@:2}" \
    --out "$R/single-$1.jsonl" | tail -1
  mark "end single $1"
}
tr 40 t40a
bs plain10; bs clip10 --clip 1
bs plain35 --warmup 5 --steps 35; bs clip35 --warmup 5 --steps 35 --clip 1
tr 40 t40b --gemm-choices "$T"
bs clip150 --warmup 5 --steps 150 --clip 1; bs plain150 --warmup 5 --steps 150
tr 150 t150 --gemm-choices "$T"
bs clip35b --warmup 5 --steps 35 --clip 1; bs plain35b --warmup 5 --steps 35
kill $SMI
python3 - "$R" <<'PY'
import json, statistics, sys, glob, os
r = sys.argv[1]
for f in sorted(glob.glob(f"{r}/single-*.jsonl")):
    x = json.loads(open(f).readline())
    print(f"bench single {os.path.basename(f)[7:-6]:9} {x['step_ms'][0]:8.3f} ± {x['step_ms'][1]:.3f} ms")
for f in sorted(glob.glob(f"{r}/log-*.jsonl")):
    recs = [json.loads(l) for l in open(f) if '"train"' in l]
    ms = [8 * 128 / q["tokens_per_s"] * 1e3 for q in recs if q["step"] >= 6]
    print(f"train run {os.path.basename(f)[4:-6]:9} median {statistics.median(ms):8.3f} ms over {len(ms)} steps; "
          f"steps 6-40 {statistics.median(ms[:35]):.3f}, last 35 {statistics.median(ms[-35:]):.3f}")
PY
tar czf "${OUT:-/tmp/out}/call53.tgz" -C "$(dirname "$R")" --exclude=data call53 && rm -rf "$R"
echo "=== end ($(date -u +%T))"
