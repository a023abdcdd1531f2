#!/usr/bin/env bash
# Call 151 (session 28), TWO GPUs, on call 150's warm machine: split DDP's AdamW ran 1.9 ms
# longer beside the gradients' all-gathers (call 150's trace). Does a gather with fewer SMs
# (NCCL_MAX_CTAS=8) or NCCL's Simple protocol only (NCCL_PROTO=Simple) cost AdamW less?
CALL=call151
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
xl bucketed-w2 2 bucketed:25
xl split-w2 2 bucketed:25 DDP_SPLIT=1
xl split-w2-simple 2 bucketed:25 DDP_SPLIT=1 NCCL_PROTO=Simple
xl split-w2-ctas8 2 bucketed:25 DDP_SPLIT=1 NCCL_MAX_CTAS=8
xl bucketed-w2-ctas8 2 bucketed:25 NCCL_MAX_CTAS=8
pack
