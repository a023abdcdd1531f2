#!/usr/bin/env bash
# Session 56, call 315 (nvidia-h200-x2): the copy-engine adds' grid at world 2 with the
# gather lane (calls 312-313). The adds (2.07 ms of kernels, 97 launches) run beside the
# backward; the lane now lets copies go on while they run. COMM_CE_ADDS_BLOCKS was measured
# at world 4 only (gpus-s38.md, gpus-s39.md). xl bf16 bucketed:25 at world 2, 20 steps, one
# GEMM table for all runs, interleaved: default (528 blocks), 132, all (a block per 2048
# elements). Written before: at most -0.3 ms from fewer blocks (GEMMs beside the adds took
# 0.5-0.7 ms more than one GPU's in call 307); none expected from `all`.
CALL=c315; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for k in 1 2; do
  xl "d-$k" 2 bucketed:25 $N
  xl "b132-$k" 2 bucketed:25 $N COMM_CE_ADDS_BLOCKS=132
  xl "all-$k" 2 bucketed:25 $N COMM_CE_ADDS_BLOCKS=all
done
same d-1 d-2 0
pack; echo "done $(date -u +%T)"
