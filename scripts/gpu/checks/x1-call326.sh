#!/usr/bin/env bash
# Session 58, call 326 (nvidia-h200): the one-block-a-head attention with every staging load
# in flight at once (attn.cuh stage_qkv, stage_async) against session 57's binaries (old/).
# Written before: attn_fwd_e64 24 -> about 20 us, attn_bwd_e64 44 -> about 39 us a launch
# (xl, 8 x 128); xl's `train run` single step 0.3-0.5 ms shorter; the same bits.
# 1. Nsight Compute, each kernel's duration (3 launches inside `bench single`), old and new;
# 2. bench model-check's attention rows (new);
# 3. `train run` single, xl bf16, 8 x 128, 20 steps, one GEMM table, new and old interleaved;
#    each pair's losses and norms compared bit for bit.
CALL=c326; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for z in old/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; cp bin/comm-launch old/bin/
for v in old new; do use $v; for k in fwd bwd; do
  timeout 120 "$NCU" --clock-control none --kernel-name regex:"attn_${k}_e64" --launch-skip 60 --launch-count 3 \
    --metrics gpu__time_duration.sum --csv --page raw bin/bench single --size xl --dtype bf16 --mode step \
    --warmup 2 --steps 1 --batch 8 --out /tmp/s.jsonl > "$R/ncu-$v-$k.csv" 2> /dev/null
  echo "ncu $v attn_${k}_e64: $(ncudur "$R/ncu-$v-$k.csv")"
done; done; use new; pack
modelcheck attention
xl t-1 1 single
for i in 1 2; do xl new$i 1 single; use old; xl old$i 1 single; use new; same new$i old$i 0; done
same new1 new2 0
pack; echo "done $(date -u +%T)"
