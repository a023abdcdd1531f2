#!/usr/bin/env bash
# Call 96 (session 20), on a 4-GPU kind, from the packed folder (copy it and train-runs.sh
# into .gpu/): xl bf16 w4, one GEMM table (made by a discarded run). fsdp's shards now cast
# to bf16 on NCCL's stream (FSDP_CAST=compute: on the compute stream, as before); the last
# K stages' forward gathers kept for the backward (FSDP_KEEP_LAST=K); then a CUPTI trace of
# one replay of zero1, fsdp and fsdp with FSDP_CAST=compute. First the comm conformance suite on NCCL (the cast gather).
CALL=c96; source "$(dirname "$0")/train-runs.sh"
A="--fresh --ckpt-every 100000"
timeout 60 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest 2>&1 | tail -4 | tee "$R/selftest.txt"
ENVS="" train table-xl /tmp/a0 xl 4 zero1 32 8 $A
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train zero2-xl /tmp/a1 xl 4 zero2 32 20 $A
ENVS="" train fsdp-xl /tmp/a2 xl 4 fsdp 32 20 $A
ENVS="FSDP_CAST=compute" train fsdp-castc-xl /tmp/a3 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=8" train fsdp-k8-xl /tmp/a4 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=16" train fsdp-k16-xl /tmp/a5 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=24" train fsdp-k24-xl /tmp/a6 xl 4 fsdp 32 20 $A
ENVS="FSDP_PREFETCH=2" train fsdp-ahead2-xl /tmp/a7 xl 4 fsdp 32 20 $A
same zero2-xl fsdp-xl; same fsdp-xl fsdp-castc-xl; same fsdp-xl fsdp-k16-xl; same fsdp-xl fsdp-ahead2-xl
rm -rf /tmp/a?
# Where one replay goes (CUPTI's kernel records): zero1, fsdp, fsdp with the old casts.
for st in zero1 fsdp; do
  TRACE_STRATEGIES=$st TRACE_WORLD=4 OUT=/tmp/tr bash run.sh trace > /dev/null 2>&1
  cp /tmp/tr/trace/$st.summary "$R/trace-$st.txt" 2>/dev/null; rm -rf /tmp/tr; pack
done
FSDP_CAST=compute TRACE_STRATEGIES=fsdp TRACE_WORLD=4 OUT=/tmp/tr bash run.sh trace > /dev/null 2>&1
cp /tmp/tr/trace/fsdp.summary "$R/trace-fsdp-castc.txt" 2>/dev/null; rm -rf /tmp/tr
for f in "$R"/trace-*.txt; do echo "== $f"; grep -v '^{' "$f" | head -20; done
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack
