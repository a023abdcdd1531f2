#!/usr/bin/env bash
# Session 40, call 221 (nvidia-h200), about 2 minutes. Copy this and train-runs.sh into .gpu/.
# After model::gemm's plans took an SM count target (Key::sms, 0 unless a carve-out is set):
# `train run` single twice, and a GEMM table made with and read back, so that the plans and
# their choices are those of before (same bits run to run from one table).
CALL=call221; source "$(dirname "$0")/train-runs.sh"
xl s1 1 single $N
xl s1b 1 single $N
same s1 s1b
grep -c '"sms"' $R/gemm-xl.json
pack; echo "done $(date -u +%T)"
