#!/usr/bin/env bash
# Session 30, call 161 (ran on nvidia-h200-x2: no 4-GPU kind was lent; the world-4 loop was
# skipped), with comm::nccl::ce as it was then (each rank pulled its peers' parts; the
# pushed form replaced it after call 164), from the packed folder (copy this, ce-probe.py and train-runs.sh into
# .gpu/; .gpu/nccl holds NCCL 2.28.9, which $N loads). About 6 minutes.
# Our own copy-engine all-gathers (comm::nccl::ce, COMM_CE_GATHER=1):
#  - comm-selftest (the conformance suite, the packed NCCL) with them on, then off;
#  - ce-probe.py at the machine's world (call 160 measured world 2 only);
#  - xl zero1 and fsdp at worlds 2 and 4 with them on and off, each pair's losses compared
#    bit for bit (copies move the same bits NCCL's gathers do).
CALL=ce; source "$(dirname "$0")/train-runs.sh"; export TMO=60
G=$(nvidia-smi -L | wc -l)
echo "--- selftest, copy-engine gathers on ($(date -u +%T))"
COMM_CE_GATHER=1 bash run.sh selftest 2>&1 | grep -v "^\[rank [1-9]" | tail -4
echo "--- selftest, off"; bash run.sh selftest 2>&1 | grep -v "^\[rank [1-9]" | tail -2
echo "--- ce-probe world $G ($(date -u +%T))"
W=$G timeout 200 python3 ce-probe.py 2> "$R/probe.err" | tee "$R/probe.txt" | grep -v '^{'; tail -2 "$R/probe.err"; pack
xl single 1 single
for w in $( [ "$G" -ge 4 ] && echo 4) 2; do
  xl zero1-w$w $w zero1 $N
  xl zero1-w$w-ce $w zero1 $N COMM_CE_GATHER=1
  same zero1-w$w zero1-w$w-ce
  xl zero1-w$w-ce-fwd $w zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=forward
  xl zero1-w$w-ce-adamw $w zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=adamw
  xl fsdp-w$w $w fsdp $N
  xl fsdp-w$w-ce $w fsdp $N COMM_CE_GATHER=1
  same fsdp-w$w fsdp-w$w-ce
done
pack
echo "done $(date -u +%T)"
