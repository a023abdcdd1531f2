#!/usr/bin/env bash
# Call 94 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/): fsdp's
# samples at the end (every rank samples together, each stage gathered first). small bf16
# w4, one GEMM table (made by a discarded run): zero2 and fsdp run 16 steps to the end
# (checkpoint, samples); their samples.txt should be the same bytes (fsdp computes zero2's
# bits).
# Its helpers (as run) are now scripts/gpu/checks/train-runs.sh.
CALL=c94; source "$(dirname "$0")/train-runs.sh"
ENVS="" train table-small /tmp/a0 small 4 zero2 32 8 --fresh --ckpt-every 100000
for st in zero2 fsdp; do
  t0=$(date +%s); T="$R/gemm-small.json"
  timeout 120 bin/comm-launch --nproc-per-node 4 -- bin/train run --data "$D" --out /tmp/s-$st --model small --bf16 \
    --global-batch 32 --steps 16 --eval-every 100000 --strategy $st --backend nccl --no-progress --fresh \
    --gemm-choices "$T" > "$R/samples-$st.txt" 2>&1 || { echo "$st failed"; tail -5 "$R/samples-$st.txt"; }
  cp /tmp/s-$st/samples.txt "$R/samples-$st.samples.txt" 2>/dev/null
  echo "$st: $(( $(date +%s) - t0 )) s; $(grep -h 'train loss' "$R/samples-$st.txt" | head -1 | cut -c1-150)"
done
cmp "$R/samples-zero2.samples.txt" "$R/samples-fsdp.samples.txt" && echo "samples: THE SAME BYTES" || echo "samples differ"
head -c 600 "$R/samples-fsdp.samples.txt"; echo
rm -rf /tmp/a0 /tmp/s-* "$D"; echo "=== end ($(date -u +%T))"; pack
