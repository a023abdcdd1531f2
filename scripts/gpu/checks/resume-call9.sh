#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/resume-call9.sh` (it cds to its own folder and uses bin/ and run.sh there).
# Session 5's GPU checks of the step's checkpoints, cross-strategy resume, validation graph,
# zero1-check and ddp-train through TrainStep (nvidia-h100-x1).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R=${OUT:-/tmp/out}/resume; mkdir -p $R
bin/train prepare --data $R/data > /dev/null 2>&1
run() { local out=$1; shift; bin/train run --data $R/data --out $R/$out --model small --global-batch 8 \
  --steps 60 --eval-every 20 --ckpt-every 20 --backend nccl --world 1 --no-progress "$@" > $R/$out.txt 2>&1 || { echo "FAILED: $out $*"; tail -5 $R/$out.txt; }; }
# bf16: each strategy stopped at 30 and resumed from 20 against itself straight through.
run F --bf16 --strategy bucketed:25
run E --bf16 --strategy bucketed:25 --stop-after 30; run E --bf16 --strategy bucketed:25
run G --bf16 --strategy zero1
run H --bf16 --strategy zero1 --stop-after 30; run H --bf16 --strategy zero1
# fp32: across strategies against single straight through.
run A
run C --strategy single --stop-after 30; run C --strategy zero1
run D --strategy zero1 --stop-after 30; run D --strategy bucketed:25
run X --strategy bucketed:25
python3 - $R <<'PY'
import json, sys
R = sys.argv[1]
def recs(x):
    out = {}
    for l in open(f"{R}/{x}/log.jsonl"):
        r = json.loads(l); out[(r["type"], r["step"])] = r
    return out
for x, y, what in [("E", "F", "bf16 bucketed:25 stopped at 30, resumed from 20, vs bucketed:25 straight"),
                   ("H", "G", "bf16 zero1 stopped at 30, resumed from 20, vs zero1 straight"),
                   ("X", "A", "fp32 bucketed:25 straight vs single straight"),
                   ("C", "A", "fp32 single to 30, resumed from 20 as zero1, vs single straight"),
                   ("D", "A", "fp32 zero1 to 30, resumed from 20 as bucketed:25, vs single straight")]:
    a, b = recs(y), recs(x)
    keys = sorted(k for k in a if k in b)
    dl = max(abs(a[k]["loss"] - b[k]["loss"]) / abs(a[k]["loss"]) for k in keys)
    same = all(a[k]["loss"] == b[k]["loss"] for k in keys)
    last = max(k[1] for k in keys if k[0] == "val")
    print(f"{what}: {len(keys)} records: max relative |delta loss| {dl:.2e}, bit-identical: {same}; validation at {last}: {b[('val', last)]['loss']:.6f} vs {a[('val', last)]['loss']:.6f}")
PY
