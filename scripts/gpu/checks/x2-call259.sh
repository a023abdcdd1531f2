#!/usr/bin/env bash
# Session 47, call 259 (nvidia-h200-x2): the final binary's activation checkpointing.
#   1. the 13B at 2048 tokens, 4 a GPU, fsdp at world 2, without it: the refusal now says
#      that --activation-checkpointing fits;
#   2. xl bf16 zero2 at world 2, 8 x 128 a GPU, without and with: the same bits;
#   3. xl bf16 on one GPU with it, eager steps (--eager) against captured ones: the same bits.
# Copy into .gpu/ with train-runs.sh and nccl/. Output: $OUT/c259.tgz.
CALL=c259; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=150
ENVS="$N" train huge-2k /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048
grep -ho "With --activation-checkpointing[^:]*: it fits" "$R/huge-2k.txt" | sort -u
run() { local n=$1 w=$2 st=$3; shift 3; ENVS="$N" train "$n" "/tmp/r-$n" xl "$w" "$st" $((8 * w)) 20 --fresh "$@"; rm -rf "/tmp/r-$n"; }
run z2 2 zero2
run z2-ac 2 zero2 --activation-checkpointing
same z2 z2-ac
run one-ac 1 single --activation-checkpointing
run one-ac-eager 1 single --activation-checkpointing --eager
same one-ac one-ac-eager
pack; echo "done $(date -u +%T)"
