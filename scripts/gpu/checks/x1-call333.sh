#!/usr/bin/env bash
# Session 59, call 333 (nvidia-h200): the grouped fused AdamW (seam::fused_adamw::group: up
# to 64 tensors a launch) against session 58's binaries (old/: 08c8b37, a launch a tensor),
# interleaved, one GEMM table.
# Written before: `bench adamw` xl: grouped within 0.3 ms of flat (13.35 ms in call 296),
# tensorwise about 15.2; xl `train run` single at 8 x 128 0.6-1.0 ms shorter (its AdamW:
# 14.09 ms of kernels in 339 launches, call 304; flat 13.35), the same bits; bench single
# without clipping (AdamW in the backward, a launch a stage's group) about as much.
CALL=c333; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for z in old/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; cp bin/comm-launch old/bin/
modelcheck "grouped\|AdamW\|fail\|error\|panic"
timeout 90 bin/bench adamw --size xl --out "$R/adamw.jsonl" 2>&1 | tail -12; pack
xl t-1 1 single > /dev/null
for i in 1 2; do xl new$i 1 single > /dev/null; use old; xl old$i 1 single > /dev/null; use new; done
for r in new1 new2 old1 old2; do echo "$r: $(msc $r 8 128) ms; $(peak $r)"; done
same new1 new2 0; same new1 old1 0
bs() { timeout 60 bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --out "$R/single-$1.jsonl" "${@:2}" 2>&1 | tail -1 | cut -c1-150; }
for i in 1 2; do for v in new old; do use $v; echo "$v clip1: $(bs $v-c$i --clip 1)"; echo "$v noclip: $(bs $v-n$i)"; done; use new; done
pack; echo "done $(date -u +%T)"
