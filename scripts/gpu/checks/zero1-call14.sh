#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/zero1-call14.sh` (it cds to its own folder and uses bin/ and run.sh).
# Session 6, call 14 (nvidia-h100-x1): (1) without clipping, single, bucketed:25 and zero1
# at NCCL world 1 must train the same bits (AdamW is elementwise; the world-1 collectives
# change nothing): small, bf16 and fp32, 30 steps, logs compared step by step; (2) where
# the time goes: nsys kernel sums of 22 xl bf16 steps, per strategy; (3) train-speed for
# small bf16 and xl fp32 with zero1.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O=${OUT:-/tmp/out}; R=$O/same; mkdir -p $R
bin/train prepare --data $R/data > /dev/null 2>&1
for dt in bf16 fp32; do
  for st in single bucketed:25 zero1; do
    bin/train run --data $R/data --out $R/$dt-${st%%:*} --model small $([ $dt = bf16 ] && echo --bf16) --global-batch 8 \
      --steps 30 --warmup 5 --eval-every 10 --ckpt-every 1000 --clip 0 --strategy $st --backend nccl --world 1 --no-progress > $R/$dt-${st%%:*}.txt 2>&1 \
      || { echo "FAILED $dt $st"; tail -3 $R/$dt-${st%%:*}.txt; }
  done
done
python3 - $R <<'PY'
import json, sys
R = sys.argv[1]
def recs(x):
    return [(r["type"], r["step"], r["loss"], r.get("grad_norm")) for r in map(json.loads, open(f"{R}/{x}/log.jsonl"))]
for dt in ["bf16", "fp32"]:
    a = recs(f"{dt}-single")
    for st in ["bucketed", "zero1"]:
        b = recs(f"{dt}-{st}")
        diff = [(x, y) for x, y in zip(a, b) if x != y]
        print(f"clip 0, small {dt}: {st} vs single: {len(a)} records, {len(diff)} differ" + (f"; first {diff[0]}" if diff else " (bit-identical)"))
PY
rm -rf $R
NSYS=$(ls /opt/nvidia/nsight-systems*/*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/bin/nsys 2>/dev/null | tail -1)
[ -n "$NSYS" ] || NSYS=$(command -v nsys)
if [ -n "$NSYS" ]; then
  P=$O/nsys; mkdir -p $P; bin/train prepare --data $P/data > /dev/null 2>&1
  for st in single bucketed:25 zero1; do
    s=${st%%:*}
    $NSYS profile -t cuda --cuda-graph-trace=node -o $P/$s --force-overwrite true bin/train run --data $P/data --out $P/run-$s \
      --model xl --bf16 --global-batch 8 --steps 1000 --stop-after 22 --eval-every 1000 --ckpt-every 1000 --strategy $st \
      --backend nccl --world 1 --fresh --no-progress > $P/$s.txt 2>&1 || { echo "nsys $st failed"; tail -3 $P/$s.txt; }
    $NSYS stats -r cuda_gpu_kern_sum -f csv -o $P/k-$s $P/$s.nsys-rep > /dev/null 2>&1
    rm -rf $P/run-$s $P/$s.nsys-rep $P/$s.sqlite
  done
  python3 - $P <<'PY'
import csv, sys, glob
P = sys.argv[1]
def load(s):
    f = glob.glob(f"{P}/k-{s}*.csv")
    if not f: return {}
    out = {}
    for r in csv.DictReader(open(f[0])):
        out[r["Name"][:70]] = (float(r["Total Time (ns)"]) / 1e6, int(r["Instances"]))
    return out
a = load("single")
print(f"nsys: total kernel ms over 22 steps: " + ", ".join(f"{s} {sum(v[0] for v in load(s).values()):.1f}" for s in ["single", "bucketed", "zero1"]))
for s in ["bucketed", "zero1"]:
    b = load(s)
    rows = sorted(((b.get(k, (0, 0))[0] - a.get(k, (0, 0))[0], k, a.get(k, (0, 0))[1], b.get(k, (0, 0))[1]) for k in set(a) | set(b)), reverse=True)
    print(f"--- {s} minus single, kernel ms over 22 steps (instances single -> {s}):")
    for d, k, n1, n2 in rows[:8] + rows[-3:]:
        print(f"  {d:+8.2f}  {n1:6d} -> {n2:6d}  {k}")
PY
  rm -rf $P/data
else
  echo "no nsys on this machine"
fi
CASES="small:bf16 xl:fp32" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" bash run.sh train-speed 2>&1 | tail -10
