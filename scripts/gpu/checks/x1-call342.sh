#!/usr/bin/env bash
# Session 60, call 342 (one GPU; copy this and train-runs.sh into .gpu/, session 59's binaries
# into .gpu/old/bin). Three things:
# 1. seam accum's table addresses now come from pinned::device_ptr (9ce742a): xl --accum 4,
#    old binaries against new, one GEMM table: the same bits. Written before: the same bits
#    and the same step within its spread (nothing in the kernels changed).
# 2. Gradient accumulation beside PyTorch again (last: call 125, 0.738x its compile-ro
#    trainer, 1.092x the arithmetic): run.sh train-speed, xl, --accum 4, TS_TORCH=compile-ro.
#    Written before: about 0.73x PyTorch (the step 1-2 ms shorter a micro-batch's AdamW
#    share since then: grouped AdamW, session 58's attention).
# 3. Why the attention kernels take longer in the step than alone (gpus-s53: flash_bwd_kv
#    0.752 ms a 6.7B layer in the step against 0.576 under Nsight Compute, clocks unlocked):
#    the SM clock and power, sampled every 100 ms by nvidia-smi, idle, in xl's step at
#    8 x 128 and at 8 x 1024 tokens. Written before: at 8 x 1024 the SM clock well below
#    the 1,980 MHz boost (power-capped at 700 W), at 8 x 128 less so.
CALL=c342; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
cp bin/comm-launch old/bin/ 2>/dev/null
smi() { nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader,nounits -lms 100 > "$R/smi-$1.csv" 2>/dev/null & SMI=$!; }
smistop() { kill $SMI 2>/dev/null; wait $SMI 2>/dev/null; python3 - "$R/smi-$1.csv" "$1" <<'PY'
import statistics, sys
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
busy = [r for r in rows if float(r[3]) > 200] or rows
if not busy: print(sys.argv[2], "no samples"); sys.exit()
sm = sorted(float(r[1]) for r in busy); pw = sorted(float(r[3]) for r in busy)
reasons = sorted({r[5].strip() for r in busy})
print(f"{sys.argv[2]}: {len(busy)} of {len(rows)} samples over 200 W: SM clock median {statistics.median(sm):.0f} MHz "
      f"(min {sm[0]:.0f}, max {sm[-1]:.0f}), power median {statistics.median(pw):.0f} W (max {pw[-1]:.0f}), "
      f"temperature max {max(float(r[4]) for r in busy):.0f} C, throttle reasons {reasons}")
PY
pack; }
smi idle; sleep 3; smistop idle
# 1.
xl t-1 1 single
use old; train a4-old /tmp/r-a4o xl 1 single 32 14 --fresh --accum 4; use new
train a4-new /tmp/r-a4n xl 1 single 32 14 --fresh --accum 4
same a4-old a4-new 0
# 3.
smi xl1k; TMO=200 train c1k /tmp/r-c1k xl 1 single 8 40 --fresh --context 1024; smistop xl1k
smi xl128; TMO=150 train c128 /tmp/r-c128 xl 1 single 8 60 --fresh; smistop xl128
# 2.
OUT="$R" CASES="xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM=4 TS_TORCH=compile-ro TS_STEPS=20 \
  timeout 300 bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1; echo "train-speed rc=$?"
grep -E "^size|^xl|accum|arithmetic" "$R/train-speed.txt" | tail -12
rm -rf "$R/train-speed/data"
echo "=== end ($(date -u +%T))"
pack
