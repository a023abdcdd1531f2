#!/usr/bin/env bash
# Session 52, call 287 (nvidia-h200): flash::order with the lightest quarter of the ranks
# last across every head (C, packed) against groups for every rank (B, call 286's packed
# binary, with flash_bwd_q's three stages as C) and HEAD's kernels (head), one call.
#   bench profile at 8 x 1024 tokens of the 6.7B and xl with each (call 286: head / B
#   6.7B forward 17.24 / 17.12 ms, backward 39.48 / 38.09; xl 10.14 / 10.09, 22.39 / 22.75);
#   bench model-check with C; Nsight Compute, one launch each: flash_fwd2 and the backward's
#   two at the 6.7B's heads (C), the backward's two at xl's (head, C).
# Packed folder: bin (C), B/bin, head/bin (bench only). Output: $OUT/c287.tgz.
CALL=c287; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
for v in head B; do for z in $v/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; done
profile1k 6.7B head B new
profile1k xl head B new
modelcheck 'tiled\|fail\|error\|panick\|differ'
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
kern() { use $1; timeout 120 ncu --clock-control none --cache-control none --kernel-name regex:"$3" --launch-skip $4 --launch-count $5 --metrics $M \
  --csv --page raw bin/bench profile --size $2 --dtype bf16 --context 1024 --out /tmp/kp.jsonl --svg-dir /tmp/svg > "$R/ncu-$1-$2-$6.csv" 2>"$R/ncu-$1-$2-$6.err"
  echo "ncu $1 $2 $6 rc=$?"; use new; }
kern new 6.7B 'flash_fwd2_e128' 3 1 fwd
kern new 6.7B 'flash_bwd_(kv|q2)_e128' 4 2 bwd
for v in head new; do kern $v xl 'flash_bwd_(kv|q2)_e64' 4 2 bwd; done
python3 - "$R" <<'PY'
import csv, glob, io, sys
for f in sorted(glob.glob(sys.argv[1] + "/ncu-*.csv")):
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(f, "no rows"); continue
    rows = list(csv.reader(io.StringIO(txt[i:])))
    h = rows[0]
    for r in rows[2:]:
        d = dict(zip(h, r))
        u = dict(zip(h, rows[1]))
        print(f.split("ncu-")[1][:-4], d["Kernel Name"][:24], *(f"{k.split('__')[1].split('.')[0]} {d.get(k)} {u.get(k, '')}" for k in
              ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum",
               "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")))
PY
pack; echo "done $(date -u +%T)"
