#!/usr/bin/env bash
# Session 58, call 329 (nvidia-h200-x2): issue 47's world-2 rows with this session's
# attention (the staged loads, 700f243; the tiled kernels at 128 tokens), NCCL 2.28.9: xl
# bf16, 8 x 128 a GPU, clipping at 1.0, one GEMM table (tuned by `train run` single first),
# twice each: `bench single --clip 1` (steps 6-20, as train-speed times it), `train run`
# single, zero1 and bucketed:25 at world 2. Written before: every step about 0.4-0.5 ms
# shorter than call 319's, the ratios within their spread (zero1 0.93, DDP 1.05-1.09).
CALL=c329; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
eval "export $N"
xl t-1 1 single
for i in 1 2; do
  bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
    --gemm-choices "$R/gemm-xl.json" --clip 1 --out "$R/bench.jsonl" > "$R/bench$i.txt" 2>&1
  python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print('bench single --clip 1:', {k: v for k, v in r.items() if 'ms' in k and not isinstance(v, list)})" "$R/bench.jsonl"
  xl single$i 1 single; xl zero1-$i 2 zero1; xl ddp$i 2 bucketed:25
done
same single1 single2 0; same zero1-1 zero1-2 0; same ddp1 ddp2 0
pack; echo "done $(date -u +%T)"
