#!/usr/bin/env bash
# Call 137 (session 25's plan; not run), FOUR GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Tapered ZeRO buckets (ZERO1_TAPER=1) at world 4 (see taper-call136.sh), where
# each reduce-scatter and gather moves 3/4 of a bucket, so the tail and the first gather
# cost more than at world 2: expected 0.6-1 ms off zero1's step (call 132: 40.04 ms, 0.975x
# one GPU's 41.07, the machine's NCCL at its defaults). Then the same with NCCL 2.28.9
# (windows) at NCCL's own CTA count, which call 132 did not separate from 32 CTAs.
CALL=call137
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
xl zero1-untapered 4 zero1
xl zero1 4 zero1 ZERO1_TAPER=1
xl zero2 4 zero2 ZERO1_TAPER=1
xl fsdp-untapered 4 fsdp
xl fsdp 4 fsdp ZERO1_TAPER=1
xl zero1-2289 4 zero1 $N ZERO1_TAPER=1
xl zero1-2289-untapered 4 zero1 $N
xl bucketed 4 bucketed:25
pack
