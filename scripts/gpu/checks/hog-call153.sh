#!/usr/bin/env bash
# Call 153 (session 28), TWO GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 3 minutes, in the session's last device time. Call 152's GEMM tuning beside
# the stand-in for NCCL hung: its stop flag was set by a copy that waited for the stand-in.
# The flag is host memory now (model::gemm::beside). The question of call 152: tuned beside
# 24 CTAs that hold SMs and stream memory (MODEL_GEMM_TUNE_BESIDE=24), does the GEMM table
# choose kernels that lose less beside NCCL, and what do they cost alone? The hog table for
# every shape; mixed: the hog's choice for the backward's shapes only (not ta = false, tb = true).
# As run, the two tuning runs and the tables' python were inline here; they are
# train-runs.sh's `tables` now, the same commands. MODEL_GEMM_TUNE_BESIDE was removed after call 153 (its code: commit 4b8b83b).
CALL=call153
source "$(dirname "$0")/train-runs.sh"
export TMO=90
tables
export TMO=50
run() { cp "$R/gemm-$1.json" "$R/gemm-xl.json"; shift; xl "$@"; }
run hog bucketed-w2-hog 2 bucketed:25
run plain bucketed-w2-plain 2 bucketed:25
run hog single-hog 1 single
run hog zero1-w2-hog 2 zero1
run plain zero1-w2-plain 2 zero1
run mixed bucketed-w2-mixed 2 bucketed:25
run mixed single-mixed 1 single
pack
