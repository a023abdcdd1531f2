#!/usr/bin/env bash
# Session 58, call 327 (nvidia-h200): the tiled (FlashAttention-2) kernels at 128 tokens in
# the one-block kernel's place (MODEL_ATTN_TILED=128), against the default, xl bf16, 8 x 128.
# MODEL_ATTN_TILED=128 was an experiment switch, never committed: this call's binaries were
# 700f243 with it. 38121e4 made the tiled kernel the rule at 128 tokens instead; with its
# binaries compare the default against MODEL_ATTN_TILED=0, as x1-call328.sh does.
# Written before: unknown sign; the one-block kernels take about 62 us a layer (call 326),
# the tiled path adds the split into heads and D, and has 4-warp blocks at 4 a SM.
# 1. bench model-check's attention rows with MODEL_ATTN_TILED=128;
# 2. Nsight Compute: each attention kernel's duration inside `bench single`, both ways;
# 3. `train run` single, 20 steps, one GEMM table, interleaved; bits compared.
CALL=c327; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
MODEL_ATTN_TILED=128 modelcheck attention
kern() { python3 - "$1" <<'PY'
import csv, io, sys, collections
t = open(sys.argv[1]).read(); i = t.find('"ID"')
rows = list(csv.reader(io.StringIO(t[i:]))) if i >= 0 else []
if not rows: print("no rows"); sys.exit()
h, u = rows[0], rows[1]; k = h.index("gpu__time_duration.sum"); n = h.index("Kernel Name")
d = collections.defaultdict(list)
for r in rows[2:]: d[r[n].split("(")[0][:28]].append(r[k])
print(u[k], "; ".join(f"{a} {' '.join(v)}" for a, v in d.items()))
PY
}
for v in whole tiled; do e=""; [ $v = tiled ] && e="MODEL_ATTN_TILED=128"
  env $e timeout 150 "$NCU" --clock-control none --kernel-name regex:"attn_|flash|qkv_rope|qkv_merge" --launch-skip 600 --launch-count 12 \
    --metrics gpu__time_duration.sum --csv --page raw bin/bench single --size xl --dtype bf16 --mode step \
    --warmup 2 --steps 1 --batch 8 --out /tmp/s.jsonl > "$R/ncu-$v.csv" 2> /dev/null
  echo "ncu $v: $(kern "$R/ncu-$v.csv")"
done; pack
xl t-1 1 single
for i in 1 2; do xl whole$i 1 single; xl tiled$i 1 single MODEL_ATTN_TILED=128; done
same whole1 whole2 0; same tiled1 tiled2 0; same whole1 tiled1 0
pack; echo "done $(date -u +%T)"
