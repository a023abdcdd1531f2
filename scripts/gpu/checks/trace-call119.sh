#!/usr/bin/env bash
# Call 119 (session 23; not run: the device time was spent), on one GPU, from the packed
# folder (copy it into .gpu/): calls 117-118 found xl --accum 4's idle time in 4-7 us gaps
# before cuBLASLt's 1x2/2x1-cluster GEMMs, but read kernels only. The summary now places
# the graph's memsets and memcpys beside the kernels: is a memset before each such GEMM
# (cuBLASLt zeroing its workspace's counters)? The raw records come back gzipped
# (TRACE_KEEP=1), for a second look without a GPU.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for a in 4 1; do
  TRACE_STRATEGIES=single TRACE_ACCUM=$a TRACE_KEEP=1 bash run.sh trace > /dev/null 2>&1 || echo "trace accum $a failed"
done
python3 - "${OUT:-$PWD/gpu-out}" <<'PY'
import json, sys
for l in open(f"{sys.argv[1]}/trace.jsonl"):
    r = json.loads(l)
    print(r["label"], "period", r["period_ms"], "idle", r["idle_ms"], "kernels", r["kernels"], r["category_ms"])
    for g in r["gap_pairs"][:8]:
        print("   ", g)
PY
