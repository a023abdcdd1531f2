#!/usr/bin/env bash
# Call 144 (session 27), FOUR GPUs, after torch-x4-call143.sh on the same machine (copy this
# and train-runs.sh into .gpu/); about 9 minutes. PyTorch's trainer at world 4, 8 x 128
# tokens a GPU: DDP compile-ro (the strongest so far) and FSDP2 per-block compile (not run
# since call 82), beside our one-GPU step and zero1 at world 4 of this call.
CALL=call144
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
xl zero1-w4 4 zero1
TTMO=200 torch xl compile-ro 30 ddp 4
TTMO=330 torch xl compile-blocks 20 fsdp2 4
pack
