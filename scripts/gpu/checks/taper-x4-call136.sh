#!/usr/bin/env bash
# Call 136 (session 26), FOUR GPUs, from the packed folder (copy this and train-runs.sh
# into .gpu/). Session 25's two planned calls (taper-call136.sh at world 2 and
# taper-x4-call137.sh at world 4, both removed since) in one, on the 4-GPU kind lent at the session's start:
# tapered ZeRO buckets (ZERO1_TAPER=1: whole stages from the first, the first bucket at most
# a quarter of the cap, the second half) against the default, at world 4 and (GPUs 0-1) at
# world 2. Expected: 0.5-1 ms off zero1's step at both worlds (call 127's trace: 0.5-0.73 ms
# of the last reduce-scatter alone after the backward, 0.47 ms of the first gather before
# the forward). Also splits NCCL 2.28.9 from 32 CTAs at world 4 (call 132 did not).
CALL=call136
source "$(dirname "$0")/train-runs.sh"
export TMO=80
CE="$N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw"
xl single 1 single
xl zero1-w4-untapered 4 zero1
xl zero1-w4 4 zero1 ZERO1_TAPER=1
xl zero1-w4-untapered-b 4 zero1
xl zero1-w4-b 4 zero1 ZERO1_TAPER=1
xl zero1-w4-2289-untapered 4 zero1 $N
xl zero1-w4-2289 4 zero1 $N ZERO1_TAPER=1
xl zero1-w4-2289-min32 4 zero1 $N NCCL_MIN_CTAS=32 ZERO1_TAPER=1
xl fsdp-w4-untapered 4 fsdp
xl fsdp-w4 4 fsdp ZERO1_TAPER=1
xl zero1-w2-untapered 2 zero1
xl zero1-w2 2 zero1 ZERO1_TAPER=1
xl zero1-w2-ce4-untapered 2 zero1 $CE:4
for k in 4 5; do xl zero1-w2-ce$k 2 zero1 $CE:$k ZERO1_TAPER=1; done
xl single-end 1 single
pack
