#!/usr/bin/env bash
# Session 52, call 286 (nvidia-h200): the tiled attention's blocks in groups of heads
# (flash::order; variant A) and, on top, flash_bwd_q's three stages above E = 64 (B),
# against HEAD's binaries (head: c314175's kernels), one call.
#   bench profile at 8 x 1024 tokens of the 6.7B and xl with each (attention marks, step);
#   bench model-check with B; Nsight Compute, one launch each of flash_fwd2, flash_bwd_kv,
#   flash_bwd_q2 at the 6.7B's heads, head and B: duration, DRAM, L2 hit rate, tensor pipe.
# Packed folder: bin (B), A/bin, head/bin (bench only). Output: $OUT/c286.tgz.
CALL=c286; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
for v in head A; do for z in $v/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; done
profile1k 6.7B head A new
profile1k xl head A new
modelcheck 'tiled\|fail\|error\|panick\|differ'
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
kern() { use $1; timeout 150 ncu --clock-control none --cache-control none --kernel-name regex:"$2" --launch-skip $3 --launch-count $4 --metrics $M \
  --csv --page raw bin/bench profile --size 6.7B --dtype bf16 --context 1024 --out /tmp/kp.jsonl --svg-dir /tmp/svg > "$R/ncu-$1-$5.csv" 2>"$R/ncu-$1-$5.err"
  echo "ncu $1 $5 rc=$?"; use new; }
for v in head new; do kern $v 'flash_fwd2_e128' 3 1 fwd; kern $v 'flash_bwd_(kv|q2)_e128' 4 2 bwd; done
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
pack
pack; echo "done $(date -u +%T)"
