#!/usr/bin/env bash
# Call 159 (session 29), TWO GPUs, on call 156's machine held warm. bucketed:25 and fsdp at
# world 2 with NCCL 2.28.9 against the machine's 2.28.3. From the packed folder (copy this and
# train-runs.sh into .gpu/; .gpu/nccl holds scripts/gpu/build-nccl.sh's NCCL 2.28.9, which $N
# loads).
CALL=call159; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl bucketed-w2-n9 2 bucketed:25 $N
xl bucketed-w2-n3 2 bucketed:25
xl fsdp-w2-n9 2 fsdp $N
xl fsdp-w2-n3 2 fsdp
xl zero1-w2-n9 2 zero1 $N
pack
