#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/repro-call10.sh` (it cds to its own folder and uses bin/ and run.sh there).
# Session 5's GPU checks of the step's checkpoints, cross-strategy resume, validation graph,
# zero1-check and ddp-train through TrainStep (nvidia-h100-x1).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R=${OUT:-/tmp/out}/resume; mkdir -p $R
bin/train prepare --data $R/data > /dev/null 2>&1
run() { local out=$1; shift; bin/train run --data $R/data --out $R/$out --model small --global-batch 8 \
  --steps 60 --eval-every 20 --ckpt-every 20 --backend nccl --world 1 --no-progress "$@" > $R/$out.txt 2>&1 || { echo "FAILED: $out $*"; tail -5 $R/$out.txt; }; }
run S1 --strategy single
run S2 --strategy single
run N1 --strategy single --clip 0
run N2 --strategy bucketed:25 --clip 0
run M2 --strategy bucketed:25
python3 - $R <<'PY'
import json, sys
R = sys.argv[1]
def recs(x):
    return [json.loads(l) for l in open(f"{R}/{x}/log.jsonl") if '"train"' in l]
for x, y in [("S2", "S1"), ("N2", "N1"), ("M2", "S1")]:
    a, b = recs(y), recs(x)
    first = next((i for i, (p, q) in enumerate(zip(a, b)) if p["loss"] != q["loss"] or p.get("grad_norm") != q.get("grad_norm")), None)
    rows = [(p["step"], (q["loss"] - p["loss"]) / p["loss"], p.get("grad_norm"), q.get("grad_norm")) for p, q in zip(a, b)][:6]
    print(x, "vs", y, "first differing step:", None if first is None else a[first]["step"], "| step, rel dloss, norms:", [(s, f"{d:.1e}", n1, n2) for s, d, n1, n2 in rows[:4]])
PY
grep -h "^train: step" $R/N2.txt $R/M2.txt
