#!/usr/bin/env bash
# Call 156 (session 29), TWO GPUs (no 4-GPU kind was lent when it ran), from the packed
# folder (copy this and train-runs.sh into .gpu/; .gpu/nccl holds scripts/gpu/build-nccl.sh's
# NCCL 2.28.9). The one lever against the GEMMs' loss beside NCCL not tried before: zero1's
# reduce-scatters with NCCL's symmetric kernels (fewer SMs than the ring's). They need both
# ends in a window, so DDP_RS_WINDOW=1 (ddp::staging) copies each bucket's gradients into a
# window made once, and sums there (the symmetric kernels' one op; 1/W applied to the
# shard). xl bf16, 8 x 128 tokens a GPU, 20 steps; each row's ratio against `single` of this
# call. Then one run with NCCL_DEBUG_SUBSYS=TUNING: which reduce-scatters took a symmetric
# kernel. DDP_RS_WINDOW (ddp::staging) was removed after calls 156-157: its code is in 243dfb9.
CALL=call156
source "$(dirname "$0")/train-runs.sh"
export TMO=75
echo "--- selftest, NCCL 2.28.9, 2 ranks"
env $N timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest 2>&1 | tail -1
xl single 1 single
xl zero1-w2-n9 2 zero1 $N
xl zero1-w2-rsw 2 zero1 $N DDP_RS_WINDOW=1
xl zero1-w2-n9-b 2 zero1 $N
xl zero1-w2-rsw-b 2 zero1 $N DDP_RS_WINDOW=1
xl zero1-w2-n3 2 zero1
same zero1-w2-n9 zero1-w2-rsw
same zero1-w2-n9 zero1-w2-n9-b
python3 - "$R" <<'PY'
import json, sys
for n in ("zero1-w2-n9", "zero1-w2-rsw", "zero1-w2-n3"):
    t = [json.loads(l) for l in open(f"{sys.argv[1]}/{n}.log.jsonl") if '"train"' in l]
    print(n, "losses at steps 1, 10, 20:", [round(r["loss"], 5) for r in t if r["step"] in (1, 10, 20)])
PY
xl zero1-w2-rsw-dbg 2 zero1 $N DDP_RS_WINDOW=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING
f="$R/zero1-w2-rsw-dbg.txt"
echo "tuning lines: $(grep -c 'NCCL INFO' "$f"), symmetric: $(grep -c 'Symmetric' "$f"), ring RS: $(grep 'ReduceScatter' "$f" | grep -vc Symmetric)"
grep 'Symmetric' "$f" | sed 's/.*NCCL INFO //' | sort | uniq -c | sort -rn | head -8
grep 'ReduceScatter' "$f" | grep -v Symmetric | sed 's/.*NCCL INFO //' | sort | uniq -c | sort -rn | head -4
gzip -f "$f"; echo "=== end ($(date -u +%T))"; pack
