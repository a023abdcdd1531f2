#!/usr/bin/env bash
# Session 35, call 191: FOUR GPUs, on call 190's machine held warm (copy this,
# report-x4-next-b.sh and train-runs.sh into .gpu/). About 6 minutes. The report's second
# half (report-x4-next-b.sh: xl bf16 at 32 x 128 a GPU, single, bucketed:25 and zero1 at
# worlds 1 and 4, PyTorch DDP compile-ro at world 4; PyTorch's trainer at world 1, 8 x 128).
H="$(cd "$(dirname "$0")" && pwd)"
bash "$H/report-x4-next-b.sh"
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"

# Then PyTorch's trainer, DDP compile-ro at world 4, 8 x 128 a GPU: call 190 ran out of time
# in it (the report's first half reads its record from here).
( CALL=torch191; source "$H/train-runs.sh"; export TTMO=200; torch xl compile-ro 30 ddp 4; pack )
echo "done $(date -u +%T)"
