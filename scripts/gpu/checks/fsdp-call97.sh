#!/usr/bin/env bash
# Call 97 (session 20), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): xl bf16 w4. Call 96's trace had every
# gather and reduce-scatter launch in a kernel named RING_LL: does NCCL's protocol
# (NCCL_PROTO=Simple, LL128) move zero1's and fsdp's steps? Then a trace of fsdp with the
# better one.
CALL=c97; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="NCCL_PROTO=Simple" train zero1-simple-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="NCCL_PROTO=LL128" train zero1-ll128-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_PROTO=Simple" train fsdp-simple-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_PROTO=LL128" train fsdp-ll128-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_PROTO=Simple NCCL_MIN_CTAS=32" train fsdp-simple-ctas32-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_PROTO=Simple FSDP_PREFETCH=2" train fsdp-simple-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_PROTO=Simple" train zero2-simple-xl /tmp/a2 xl 4 zero2 32 20 $A
same fsdp-xl fsdp-simple-xl; same zero1-xl zero1-simple-xl; same zero2-simple-xl fsdp-simple-xl
rm -rf /tmp/a?
for p in Simple LL128; do
  NCCL_PROTO=$p TRACE_STRATEGIES=fsdp TRACE_WORLD=4 OUT=/tmp/tr bash run.sh trace > /dev/null 2>&1
  cp /tmp/tr/trace/fsdp.summary "$R/trace-fsdp-$p.txt" 2>/dev/null; rm -rf /tmp/tr; pack
done
for f in "$R"/trace-*.txt; do echo "== $f"; grep -v '^{' "$f" | head -3; done
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack
