#!/usr/bin/env bash
# TWO GPUs, from the packed folder (copy this, ce-probe.py, ce-x2-next.sh and train-runs.sh into
# .gpu/). Session 30, call 160 (ran on nvidia-h200-x2; no 4-GPU kind was lent): ce-probe.py at world 2 (what GEMMs
# lose beside copy-engine collectives against beside NCCL's; PyTorch's NCCL, one process),
# then ce-x2-next.sh.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
echo "--- ce-probe world 2 ($(date -u +%T))"
W=2 timeout 240 python3 "$H/ce-probe.py" 2> "$O/probe-w2.err" | tee -a "$O/probe.txt" | grep -v '^{'
tail -3 "$O/probe-w2.err"
bash "$H/ce-x2-next.sh"
echo "done $(date -u +%T)"
