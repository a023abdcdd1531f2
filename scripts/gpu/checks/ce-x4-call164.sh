#!/usr/bin/env bash
# Session 30, call 164 (ran on nvidia-h100-x4), FOUR GPUs, from the packed folder (copy this, ce-probe.py and
# train-runs.sh into .gpu/; .gpu/nccl holds NCCL 2.28.9, which $N loads). About 5 minutes.
# Call 163's probe pulled at 191 GB/s a GPU at world 4 (357 at world 2), and call 162's
# pulled gathers lost zero1 0.24 ms and fsdp 11.5 ms at world 4: the gathers pushed instead
# (COMM_CE_GATHER=1: each rank writes its part into its peers' buffers), against pulled
# (COMM_CE_GATHER=pull, removed after this call: the same time) and NCCL's, with the probe's
# push mode beside.
CALL=ce-push; source "$(dirname "$0")/train-runs.sh"; export TMO=60
echo "--- selftest, pushed, then pulled ($(date -u +%T))"
COMM_CE_GATHER=1 bash run.sh selftest 2>&1 | grep "rank 0/" | tail -2
COMM_CE_GATHER=pull bash run.sh selftest 2>&1 | grep "rank 0/" | tail -2
echo "--- ce-probe world 4 ($(date -u +%T))"
W=4 SUM_CTAS="" timeout 200 python3 ce-probe.py 2> "$R/probe.err" | tee "$R/probe.txt" | grep -v '^{"bench": "ce-probe",'; tail -2 "$R/probe.err"; pack
xl single 1 single
xl zero1-w4 4 zero1 $N
xl zero1-w4-push 4 zero1 $N COMM_CE_GATHER=1
same zero1-w4 zero1-w4-push
xl zero1-w4-pull 4 zero1 $N COMM_CE_GATHER=pull
xl zero1-w4-push-fwd 4 zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=forward
xl fsdp-w4 4 fsdp $N
xl fsdp-w4-push 4 fsdp $N COMM_CE_GATHER=1
same fsdp-w4 fsdp-w4-push
xl zero1-w2 2 zero1 $N
xl zero1-w2-push 2 zero1 $N COMM_CE_GATHER=1
xl fsdp-w2-push 2 fsdp $N COMM_CE_GATHER=1
pack
echo "done $(date -u +%T)"
