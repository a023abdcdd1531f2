#!/usr/bin/env bash
# Session 30, call 163, on nvidia-h200-x4 (any number of GPUs), from the packed folder (copy this and ce-probe.py
# into .gpu/). About 2 minutes. ce-probe.py with the reduce-scatter's adds in a Triton kernel
# of 8, 16 or 32 programs a bucket (call 161: torch's adds, with every SM, lost the GEMMs
# 5.96 ms, as much as NCCL's reduce-scatter): whether copy-engine reduce-scatters can take
# the GEMMs less than NCCL's, before building them.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
W=$(nvidia-smi -L | wc -l)
echo "--- ce-probe world $W ($(date -u +%T))"
W=$W SUM_CTAS="4 8 16 32" timeout 300 python3 "$H/ce-probe.py" 2> "$O/probe.err" | tee "$O/probe.txt" | grep -v '^{"bench": "ce-probe",'
tail -3 "$O/probe.err"
echo "done $(date -u +%T)"
