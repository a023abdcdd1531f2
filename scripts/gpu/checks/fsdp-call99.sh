#!/usr/bin/env bash
# Call 99 (session 20), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/). Call 98's trace: fsdp reduce-scatters in
# ten buckets of 400 MB (1.1 ms each), and the backward's gathers queue behind them on the
# one communication stream. Smaller buckets (fsdp:MB; FSDP2 reduce-scatters per module):
# do they move the step?
CALL=c99; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
for mb in 25 50 100 200; do ENVS="" train fsdp$mb-xl /tmp/a1 xl 4 fsdp:$mb 32 20 $A; done
ENVS="FSDP_PREFETCH=2" train fsdp50-ahead2-xl /tmp/a1 xl 4 fsdp:50 32 20 $A
ENVS="" train zero2-50-xl /tmp/a2 xl 4 zero2:50 32 20 $A
same fsdp-xl fsdp50-xl
rm -rf /tmp/a?
TRACE_STRATEGIES=fsdp:50 TRACE_WORLD=4 OUT=/tmp/tr bash run.sh trace > /dev/null 2>&1
cp /tmp/tr/trace/fsdp.summary "$R/trace-fsdp50.txt" 2>/dev/null; rm -rf /tmp/tr
grep -v '^{' "$R/trace-fsdp50.txt" | head -3
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack
