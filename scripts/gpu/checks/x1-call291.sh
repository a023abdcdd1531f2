#!/usr/bin/env bash
# Session 53, call 291 (nvidia-h200): where `train run`'s captured step goes, kernel by
# kernel (scripts/cupti's tracer; graph kernels included), at 8 x 1024 tokens for the 6.7B
# and xl and at 8 x 128 for xl: `bench profile`'s attention marks (call 289: 6.7B forward
# 16.32 ms, backward 34.00, xl 10.12 / 21.81) hold 0.23 ms (forward) and 0.26 ms (backward)
# a 6.7B layer beyond the flash kernels' Nsight Compute times (call 290), and its optimizer
# mark is 57.9 ms. Raw records: $R/trace-NAME.csv.gz; per-kernel sums: $R/kernels-NAME.txt.
# Copy into .gpu/ with train-runs.sh and cupti/ (scripts/cupti/build.sh). Output: $OUT/c291.tgz.
CALL=c291; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
tr() { local n=$1 m=$2 c=$3 d=/tmp/tr-$1; rm -rf $d; mkdir -p $d; local t0=$(date +%s)
  CUDA_INJECTION64_PATH=$PWD/cupti/libtrace.so LD_LIBRARY_PATH=$PWD/cupti CUPTI_TRACE_DIR=$d timeout 200 \
    bin/train run --data "$D" --out /tmp/r-t --model $m --bf16 --global-batch 8 --steps 100000 --stop-after 12 \
    --eval-every 100000 --ckpt-every 100000 --strategy single --world 1 --fresh --no-progress --context $c > "$R/$n.txt" 2>&1
  echo "$n rc=$? ($(( $(date +%s) - t0 )) s): $(grep -h 'peak GPU' "$R/$n.txt" | cut -c1-80)"; rm -rf /tmp/r-t
  python3 cupti/summarize.py $d --skip 5 --top 12 --label $n > "$R/summary-$n.txt" 2>&1; grep -v '^{' "$R/summary-$n.txt" | head -12
  cat $d/trace-*.csv | gzip > "$R/trace-$n.csv.gz"
  python3 - $d > "$R/kernels-$n.txt" <<'PY'
import csv, glob, sys, collections, statistics
rows = [r for f in glob.glob(sys.argv[1] + "/trace-*.csv") for r in csv.DictReader(open(f))]
by = collections.defaultdict(list)
for r in rows:
    if r["kind"] in ("K", "S", "C") and int(r["graph_id"]) != 0: by[(r["graph_id"], r["correlation"])].append(r)
g = max({k[0] for k in by}, key=lambda gid: sum(len(v) for k, v in by.items() if k[0] == gid))
reps = sorted((v for k, v in by.items() if k[0] == g), key=lambda ks: min(int(x["start_ns"]) for x in ks))[5:]
per = collections.defaultdict(list)
for ks in reps:
    s = collections.defaultdict(lambda: [0, 0])
    for k in ks: s[k["name"][:70]][0] += int(k["end_ns"]) - int(k["start_ns"]); s[k["name"][:70]][1] += 1
    for n, (t, c) in s.items(): per[n].append((t, c))
tot = [sum(int(k["end_ns"]) - int(k["start_ns"]) for k in ks) for ks in reps]
print(f"replays {len(reps)}, kernels summed {statistics.median(tot)/1e6:.2f} ms (median)")
for n, v in sorted(per.items(), key=lambda kv: -statistics.median(t for t, _ in kv[1])):
    print(f"{statistics.median(t for t, _ in v)/1e6:9.3f} ms {v[0][1]:5d}x  {n}")
PY
  head -40 "$R/kernels-$n.txt"; rm -rf $d; pack; }
tr big1k 6.7B 1024
tr xl1k xl 1024
tr xl128 xl 128
pack; echo "done $(date -u +%T)"
