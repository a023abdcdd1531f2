#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/restart-call66.sh`. Results: $OUT/call66/.
# Session 14, call 66 (nvidia-h100-x2; the 4-GPU kinds were not lent), issue 49 on GPUs at
# world 2: small bf16, ZeRO-1, 60 steps (of a 2000-step schedule), a checkpoint every 10.
# 1. Never killed, then the same run with rank 1 kill -9'd at step 23 and rank 0 at step 47
#    of the restarted job, under comm-launch --max-restarts 3, with the first run's GEMM
#    table. Expected: exit 0, every step logged once, the losses bit-identical.
# 2. SIGTERM to the launcher mid-run: every rank stops after the same step with a
#    checkpoint of it, exit 143; the same command resumes there. Expected: the resumed
#    log equal, step for step, to the never-killed run's.
# 3. xl bf16 zero1 at world 2 with the stop flag each step (one tiny all-reduce outside the
#    graph) beside bench single's clipped step: expected about call 65's 54.51 ms (1.140x).
# 4. bench model-check.
# (Its first run called `timeout` on a shell function, so parts 1-2 did not run; the second
# run, ONLY_RESTARTS=1, ran them without it.)
# Session 60, call 345 (one GPU): ran again with NP=1 KILLS="0:23:0,0:47:1" CALL=call345
# ONLY_RESTARTS=1, after 9423361: until then `--fresh` held on every restart, so part 1's
# restarted job started afresh each time and matched the clean run without resuming.
export NCCL_NVLS_ENABLE=0
NP=${NP:-2}; KILLS=${KILLS:-1:23:0,0:47:1}
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call66}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d66; bin/train prepare --data "$D" > /dev/null 2>&1
T="$R/gemm-small.json"
go() { # out, extra launcher flags..., --, extra train flags...
  local out="$1"; shift; local lf=(); while [ "$1" != -- ]; do lf+=("$1"); shift; done; shift
  bin/comm-launch --nproc-per-node $NP "${lf[@]}" -- bin/train run --data "$D" --out "$out" --model small --bf16 --global-batch $((8 * NP)) \
    --steps 2000 --eval-every 100000 --ckpt-every 10 --strategy zero1 --backend nccl --no-progress --max-new 1 "$@"
}
losses() { python3 -c "import json,sys; print([json.loads(l)['loss'] for l in open(sys.argv[1]) if '\"train\"' in l])" "$1/log.jsonl"; }
echo "=== clean ($(date -u +%T))"
rm -rf /tmp/clean; go /tmp/clean -- --fresh --stop-after 60 > "$R/clean.txt" 2>&1; echo "rc $?"
cp /tmp/clean/gemm-choices.json "$T" 2>/dev/null || cp /tmp/clean/gemm-choices-rank0.json "$T" 2>/dev/null; ls /tmp/clean
losses /tmp/clean > "$R/clean.losses"
echo "=== two kill -9s under --max-restarts 3 ($(date -u +%T))"
rm -rf /tmp/killed; TRAIN_FAULT_KILL="$KILLS" go /tmp/killed --max-restarts 3 -- --fresh --stop-after 60 --gemm-choices "$T" > "$R/killed.txt" 2>&1; echo "rc $?"
grep -E "restart|TRAIN_FAULT|--fresh" "$R/killed.txt" | head -8; ls /tmp/killed
losses /tmp/killed > "$R/killed.losses"
python3 - "$R/clean.losses" "$R/killed.losses" <<'PY'
import ast, sys
a, b = (ast.literal_eval(open(f).read()) for f in sys.argv[1:])
print("steps logged", len(a), len(b), "; losses bit-identical:", a == b, "; last", a[-1] if a else None, b[-1] if b else None)
PY
echo "=== SIGTERM to the launcher ($(date -u +%T))"
rm -rf /tmp/term; (go /tmp/term -- --fresh --gemm-choices "$T" > "$R/term.txt" 2>&1; echo "rc $?" > "$R/term.rc") &
for i in $(seq 1 600); do n=$(grep -c '"train"' /tmp/term/log.jsonl 2>/dev/null || echo 0); [ "$n" -ge 25 ] && break; sleep 0.1; done
pkill -TERM -f "comm-launch --nproc-per-node $NP" ; wait; cat "$R/term.rc"; grep -E "stopped by|got SIGTERM" "$R/term.txt" | head -3
ls /tmp/term/checkpoints
go /tmp/term -- --stop-after 60 --gemm-choices "$T" > "$R/term-resume.txt" 2>&1; echo "resume rc $?"
losses /tmp/term > "$R/term.losses"
python3 - "$R/clean.losses" "$R/term.losses" <<'PY'
import ast, sys
a, b = (ast.literal_eval(open(f).read()) for f in sys.argv[1:])
print("steps logged", len(a), len(b), "; losses bit-identical to the clean run:", a == b)
PY
rm -rf /tmp/clean /tmp/killed /tmp/term
[ -n "${ONLY_RESTARTS:-}" ] && { rm -rf "$D"; echo "=== end ($(date -u +%T))"; exit 0; }
echo "=== xl zero1 world 2 ($(date -u +%T))"
rm -rf /tmp/xl; timeout 120 bin/comm-launch --nproc-per-node 2 -- bin/train run --data "$D" --out /tmp/xl --model xl --bf16 --global-batch 16 \
  --steps 100000 --stop-after 30 --eval-every 100000 --ckpt-every 100000 --strategy zero1 --backend nccl --fresh --no-progress > "$R/xl.txt" 2>&1; echo "rc $?"
python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open('/tmp/xl/log.jsonl') if '\"train\"' in l]
print('xl zero1 world 2 step ms', round(16*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))"
cp /tmp/xl/gemm-choices.json "$R/gemm-xl.json" 2>/dev/null
timeout 90 bin/bench single --size xl --dtype bf16 --mode step --vocab 683 --warmup 5 --steps 25 --clip 1 --gemm-choices "$R/gemm-xl.json" \
  --out "$R/single.jsonl" > /dev/null 2>&1; python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readlines()[-1]); print('bench single --clip 1', r['step_median_ms'])" "$R/single.jsonl"
rm -rf /tmp/xl "$D"
timeout 90 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"; grep -c ": OK" "$R/model-check.txt"
echo "=== end ($(date -u +%T))"
