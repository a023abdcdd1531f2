#!/usr/bin/env bash
# Call 118 (session 23), on one GPU, from the packed folder (copy it into .gpu/): where the
# idle time of xl's accumulating step sits. Call 117's trace (nvidia-h200) put 6.59 ms of
# idle in `--accum 4`'s replay (1.29 ms at `--accum 1`), nearly all of it in gaps of about
# 5 us before cuBLASLt's GEMMs. If the gaps are the SMs changing their shared-memory
# configuration between our kernels (no preference) and the GEMMs (most shared memory),
# fused.cu's kernels asking for the GEMMs' configuration (now the default) removes them;
# MODEL_CARVEOUT=default is the old behaviour. Both, at accum 4 and 1, traced.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
O="${OUT:-/tmp/out}"
for a in 4 1; do
  for c in default all; do
    mkdir -p "$O/a$a-$c"
    MODEL_CARVEOUT=$c OUT="$O/a$a-$c" TRACE_STRATEGIES=single TRACE_ACCUM=$a bash run.sh trace > "$O/a$a-$c/log.txt" 2>&1 \
      || tail -5 "$O/a$a-$c/log.txt"
  done
done
python3 - "$O" <<'PY'
import json, glob, sys
for p in sorted(glob.glob(sys.argv[1] + "/a*/trace.jsonl")):
    for l in open(p):
        r = json.loads(l)
        print(p.split("/")[-2], "period", r["period_ms"], "idle", r["idle_ms"], "kernels", r["kernels"], r["category_ms"])
        for g in r["gap_pairs"][:6]:
            print("   ", g)
PY
