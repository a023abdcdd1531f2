#!/usr/bin/env bash
# Session 56, call 311 (nvidia-h200-x2): ddp::rows where it applies. Calls 309-310 ran the
# data of `train prepare` (683 tokens in the vocabulary): 2 x 1,024 tokens > 2 x 683 rows,
# so no step took the table's gradient from rows there. Here a generated corpus whose BPE
# reaches GPT-2's 50,304 tokens (xl's table: 161 MB of bf16 gradient, the last launch),
# xl bf16, 8 x 128 a GPU, clipping at 1.0, 20 steps, interleaved against DDP_ROWS=0; bench
# single --clip 1 and train run single at world 1 on the same vocabulary as the base.
# Written before: bucketed:25 -0.3 to -0.6 ms (the table's reduce-scatter after the backward,
# about 0.46 ms on the copy engines, less the rows' own ~0.15 ms); zero1 about the same.
CALL=c311; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
python3 - <<'PY'
import random
r = random.Random(0); L = "abcdefghijklmnopqrstuvwxyz"
lex = ["".join(r.choice(L) for _ in range(r.randint(2, 9))) for _ in range(150000)]
w = [1.0 / (i + 1) ** 0.7 for i in range(len(lex))]
with open("/tmp/big.txt", "w") as f:
    for d in range(6000):
        f.write(" ".join(r.choices(lex, w, k=400)) + ".\n\n")
PY
t0=$(date +%s); bin/train prepare --data /tmp/dbig --text /tmp/big.txt --vocab 50304 | tee "$R/prepare.txt"; echo "prepare: $(( $(date +%s) - t0 )) s"
D=/tmp/dbig; vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"; echo "vocab $vocab"
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 30 \
  --out "$R/single.jsonl" 2>&1 | tail -1 | cut -c1-120
xl s-1 1 single $N
for k in 1 2; do
  xl "r-$k" 2 bucketed:25 $N
  xl "d-$k" 2 bucketed:25 $N DDP_ROWS=0
done
for k in 1 2; do
  xl "zr-$k" 2 zero1 $N
  xl "zd-$k" 2 zero1 $N DDP_ROWS=0
done
same r-1 r-2 0; same zr-1 zr-2 0
for n in r-1 d-1 zr-1 zd-1; do python3 -c "
import json,sys; t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(sys.argv[1].split('/')[-1], [(r['step'], round(r['loss'],5), round(r.get('grad_norm') or 0,5)) for r in t[:12:3]+t[-1:]])" "$R/$n.log.jsonl"; done
pack; echo "done $(date -u +%T)"
