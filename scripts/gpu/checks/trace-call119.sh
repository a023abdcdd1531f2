#!/usr/bin/env bash
# Call 119 (session 23; not run: the device time was spent), on one GPU, from the packed folder (copy it into .gpu/, and
# scripts/cupti/summarize.py into .gpu/cupti/): calls 117-118 found xl --accum 4's idle
# time in 4-7 us gaps before cuBLASLt's 1x2/2x1-cluster GEMMs, but read kernels only. The
# summary now places the graph's memsets and memcpys beside the kernels: is a memset
# before each such GEMM (cuBLASLt zeroing its workspace's counters)? The raw records of
# `--accum 4` come back gzipped, for a second look without a GPU.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; p=/tmp/t119; rm -rf "$p"; mkdir -p "$p"
bin/train prepare --data "$p/data" > /dev/null 2>&1 || exit 1
for a in 4 1; do
  d="$p/a$a"; mkdir -p "$d"
  CUDA_INJECTION64_PATH="$PWD/cupti/libtrace.so" LD_LIBRARY_PATH="$PWD/cupti:${LD_LIBRARY_PATH:-}" CUPTI_TRACE_DIR="$d" \
    timeout 120 bin/train run --data "$p/data" --out "$p/run" --model xl --bf16 --global-batch $((8 * a)) --accum $a \
    --steps 100000 --stop-after 20 --eval-every 100000 --ckpt-every 100000 --strategy single --backend nccl --world 1 \
    --fresh --no-progress > "$O/a$a.txt" 2>&1 || { tail -5 "$O/a$a.txt"; continue; }
  python3 cupti/summarize.py "$d" --skip 5 --label "single-w1-a$a" > "$O/a$a.summary"
  grep '^{' "$O/a$a.summary" > "$O/a$a.jsonl"
  [ "$a" = 4 ] && gzip -c "$d"/trace-*.csv > "$O/a4-trace.csv.gz"
  rm -rf "$p/run"
done
python3 - "$O" <<'PY'
import json, sys
for a in (4, 1):
    for l in open(f"{sys.argv[1]}/a{a}.jsonl"):
        r = json.loads(l)
        print(f"a{a}", "period", r["period_ms"], "idle", r["idle_ms"], "kernels", r["kernels"], r["category_ms"])
        for g in r["gap_pairs"][:8]:
            print("   ", g)
PY
rm -rf "$p"
