#!/usr/bin/env bash
# Session 59, call 339 (nvidia-h200): the small LM (12 layers, about 100 tensors) with the
# grouped AdamW against session 58's binaries (old/), interleaved, one GEMM table; then issue
# 33's one-GPU row for small as `run.sh train-speed` takes it, beside PyTorch's trainer.
# Written before: small's step 0.1-0.2 ms shorter (about 100 launches' tails of 1-2 us, of
# a 3.6 ms step), the same bits; train run single about 0.6x PyTorch's compile-ro (call 55:
# 3.69 against 5.83).
CALL=c339; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for z in old/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; cp bin/comm-launch old/bin/
sm() { train $1 /tmp/r-$1 small 1 single 8 40 --fresh > /dev/null; rm -rf /tmp/r-$1; }
sm t-s
for i in 1 2; do sm new$i; use old; sm old$i; use new; done
for r in new1 new2 old1 old2; do echo "$r: $(msc $r 8 128) ms; $(peak $r)"; done
same new1 new2 0; same new1 old1 0; pack
OUT="$R/ts" CASES="small:bf16" TS_WORLDS=1 TS_STRATEGIES="single zero1" TS_TORCH=compile-ro timeout 300 bash run.sh train-speed 2>&1 | tail -8
pack; echo "done $(date -u +%T)"
