#!/usr/bin/env bash
# Session 39, call 214 (nvidia-h200), about 2 minutes. Copy this and train-runs.sh into
# .gpu/. One GPU only was lent: SEAM_GRAPH_COMPUTE_PRIORITY=2 raises the captured step's
# kernel nodes at the lowest priority two levels (the log says how many of how many); with
# one stream of compute nothing else runs beside them, so the step and its bits must not
# move. Twice each, alternating.
CALL=call214; source "$(dirname "$0")/train-runs.sh"
P="SEAM_GRAPH_COMPUTE_PRIORITY=2"
xl s1 1 single $N
xl s1-p 1 single $N $P
xl s1b 1 single $N
xl s1-pb 1 single $N $P
grep -h "priority levels\|capture failed" $R/s1-p.txt | head -2
same s1 s1-p; same s1 s1b
pack; echo "done $(date -u +%T)"
