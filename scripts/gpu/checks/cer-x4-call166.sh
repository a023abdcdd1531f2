#!/usr/bin/env bash
# Session 31, call 166 (asked for nvidia-h100-x4, ran on nvidia-h200-x4), FOUR GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/; .gpu/nccl holds NCCL 2.28.9, which $N loads). About 8 minutes.
# 1. The copy-engine reduce-scatters (COMM_CE_REDUCE=1, new, never run): the conformance
#    suite at worlds 4 and 2 (its new in-place bf16 reduce-scatters), then zero1 and fsdp
#    against NCCL's reduce-scatters. Their losses are not bit-equal (the adds round once,
#    in f32), so the log's loss and norm are printed side by side.
# 2. zero1 at world 4 is 1.2 ms from its bar on H100: bucket size (zero1:200, zero1:800) and
#    gathers beside AdamW (adamw:2, adamw:6), on the faster of the two reduce-scatters.
# 3. Session 25's world-2 recipe (NCCL's copy engines, 4 gathers beside AdamW, 32 CTAs).
CALL=cer; source "$(dirname "$0")/train-runs.sh"; export TMO=60
echo "--- selftest with COMM_CE_REDUCE=1, world 4 then 2 ($(date -u +%T))"
for w in 4 2; do
  env $N COMM_CE_REDUCE=1 timeout 60 bin/comm-launch --nproc-per-node $w -- bin/comm-selftest > "$R/selftest-w$w.txt" 2>&1
  echo "world $w: rc $?"; grep -h "rank 0/" "$R/selftest-w$w.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w$w.txt" | head -3
done
pack
side() { python3 - "$R/$1.log.jsonl" "$R/$2.log.jsonl" <<'PY'
import json,sys
def rec(p): return {r['step']:(r['loss'],r.get('grad_norm')) for r in map(json.loads,open(p)) if r.get('type')=='train'}
a,b=rec(sys.argv[1]),rec(sys.argv[2])
for s in sorted(set(a)&set(b))[::4]: print(f"  step {s}: loss {a[s][0]:.6f} vs {b[s][0]:.6f}, norm {a[s][1]:.5f} vs {b[s][1]:.5f}")
PY
}
xl single 1 single
xl zero1-w4 4 zero1 $N
xl zero1-w4-cer 4 zero1 $N COMM_CE_REDUCE=1
side zero1-w4 zero1-w4-cer
xl zero1-w2 2 zero1 $N
xl zero1-w2-cer 2 zero1 $N COMM_CE_REDUCE=1
side zero1-w2 zero1-w2-cer
xl fsdp-w4 4 fsdp $N
xl fsdp-w4-cer 4 fsdp $N COMM_CE_REDUCE=1
B=""; [ -f /tmp/r-zero1-w4-cer/log.jsonl ] && python3 -c "
import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if b<a else 1)" "$(ms /tmp/r-zero1-w4 32)" "$(ms /tmp/r-zero1-w4-cer 32)" && B=COMM_CE_REDUCE=1
echo "--- tuning at world 4 with '${B:-NCCL reduce-scatters}'"
xl zero1-w4-mb200 4 zero1:200 $N $B
xl zero1-w4-mb800 4 zero1:800 $N $B
xl zero1-w4-k2 4 zero1 $N $B ZERO1_PARAM_GATHER=adamw:2
xl zero1-w4-k6 4 zero1 $N $B ZERO1_PARAM_GATHER=adamw:6
xl zero1-w2-s25 2 zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
xl zero1-w2-s25-cer 2 zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4 COMM_CE_REDUCE=1
xl zero1-w4-b 4 zero1 $N
xl single-b 1 single
pack
echo "done $(date -u +%T)"
