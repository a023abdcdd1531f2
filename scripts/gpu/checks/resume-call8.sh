#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/resume-call8.sh` (it cds to its own folder and uses bin/ and run.sh there).
# Session 5's GPU checks of the step's checkpoints, cross-strategy resume, validation graph,
# zero1-check and ddp-train through TrainStep (nvidia-h100-x1).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
bash run.sh model-check 2>&1 | grep -E "CUDA graph|validation graph|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
R=${OUT:-/tmp/out}/resume; mkdir -p $R
bin/train prepare --data $R/data > /dev/null 2>&1
run() { local out=$1; shift; bin/train run --data $R/data --out $R/$out --model small --bf16 --global-batch 8 \
  --steps 60 --eval-every 20 --ckpt-every 20 --backend nccl --world 1 --no-progress "$@" > $R/$out.txt 2>&1 || { echo "FAILED: $out $*"; tail -5 $R/$out.txt; }; }
run A --strategy single
run B --strategy single --stop-after 30; run B --strategy single
run C --strategy single --stop-after 30; run C --strategy zero1
run D --strategy zero1 --stop-after 30; run D --strategy bucketed:25
run E --strategy bucketed:25 --stop-after 30; run E --strategy bucketed:25
grep -h "^train: step\|^train: resuming" $R/A.txt $R/C.txt $R/D.txt | sort | uniq
python3 - $R <<'PY'
import json, sys
R = sys.argv[1]
def recs(x):
    out = {}
    for l in open(f"{R}/{x}/log.jsonl"):
        r = json.loads(l); out[(r["type"], r["step"])] = r
    return out
a = recs("A")
for x, what in [("B", "single stopped at 30, resumed from 20 (single)"), ("C", "single -> zero1"), ("D", "zero1 -> bucketed:25"), ("E", "bucketed:25 stopped, resumed")]:
    b = recs(x)
    keys = sorted(k for k in a if k in b)
    dl = max(abs(a[k]["loss"] - b[k]["loss"]) / abs(a[k]["loss"]) for k in keys)
    same = all(a[k]["loss"] == b[k]["loss"] for k in keys)
    print(f"{what}: {len(keys)} records against single straight through: max relative |Δ loss| {dl:.2e}, bit-identical: {same}")
PY
bin/bench zero1-check --backend nccl --ranks 1 --dir $R/z1 2>&1 | tail -2
bin/comm-launch --nproc-per-node 1 -- bin/ddp-train --backend nccl --model tiny --steps 10 --check 2>&1 | grep -E "step: |check|rror" | tail -3
