#!/usr/bin/env bash
# Call 98 (session 20), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/). fsdp's casts now one kernel of comm's own
# a gather (kernels/cast.cu: 16-byte reads, up to 8 runs a launch), against candle's cast
# on the compute stream (FSDP_CAST=compute); a trace of one replay; then 6.7B fsdp beside
# PyTorch FSDP2 compile-blocks again. First the comm conformance suite on NCCL.
CALL=c98; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
timeout 60 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest 2>&1 | tail -4 | tee "$R/selftest.txt"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_CAST=compute" train fsdp-castc-xl /tmp/a2 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=24" train fsdp-k24-xl /tmp/a3 xl 4 fsdp 32 20 $A
same fsdp-xl fsdp-castc-xl; same fsdp-xl fsdp-k24-xl
rm -rf /tmp/a?
TRACE_STRATEGIES=fsdp TRACE_WORLD=4 OUT=/tmp/tr bash run.sh trace > /dev/null 2>&1
cp /tmp/tr/trace/fsdp.summary "$R/trace-fsdp.txt" 2>/dev/null; rm -rf /tmp/tr
grep -v '^{' "$R/trace-fsdp.txt" | head -3; pack
ENVS="" TMO=200 train fsdp-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
rm -rf /tmp/b0
torch 6.7B compile-blocks 20
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack
