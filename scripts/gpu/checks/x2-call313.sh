#!/usr/bin/env bash
# Session 56, call 313 (nvidia-h200-x2): are the gather lane's bits the communication
# stream's? In call 312 one of two lane runs (l-1) differed from the other three from step
# 1's norm on (3.2520132 against 3.2520127): a race, or that run's own GEMM tuning (each run
# tuned its own table there). Here every run reads the GEMM table the first one wrote
# (TABLE_ONLY empty), xl bf16 bucketed:25 at world 2, 20 steps: three lane runs, two without.
CALL=c313; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl o-1 2 bucketed:25 $N COMM_CE_GATHER_LANE=0
xl l-1 2 bucketed:25 $N
xl l-2 2 bucketed:25 $N
xl o-2 2 bucketed:25 $N COMM_CE_GATHER_LANE=0
xl l-3 2 bucketed:25 $N
for n in l-1 l-2 l-3 o-2; do same o-1 $n 0; done
pack; echo "done $(date -u +%T)"
