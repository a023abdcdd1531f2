#!/usr/bin/env bash
# Session 60, call 346 (one GPU; copy this and train-runs.sh into .gpu/): the closing line
# of `train run` as the session leaves it: the median step from step 6 and its MFU (no
# per-step MFU in the log). Written before: xl at 8 x 128 about 31 %, at 8 x 1024 about 49 %
# (call 344's medians, with 28b06f7's per-step field).
CALL=c346; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl n128 1 single; grep -h "trained steps" "$R/n128.txt" | cut -c1-220
TMO=200 train n1k /tmp/r-n1k xl 1 single 8 30 --fresh --context 1024; grep -h "trained steps" "$R/n1k.txt" | cut -c1-220
echo "=== end ($(date -u +%T))"
pack
