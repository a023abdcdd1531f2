#!/usr/bin/env bash
# Session 58, call 331 (nvidia-h200): flash_dot with a row's 16-byte chunks on adjacent
# lanes (coalesced), against 0408c83's binaries (old/). Written before: flash_dot at xl's
# 8 x 128 tokens 5.6 -> about 3 us a launch, at 8 x 1024 about half its time (1.56 ms a step
# in call 292); xl's 8 x 128 step about 0.1 ms shorter; new bits in D's last places only.
# 1. Nsight Compute: flash_dot's duration inside `bench single` (8 x 128) and `bench profile`
#    (8 x 1024), old and new; 2. bench model-check's attention rows (new);
# 3. `train run` single, xl bf16, 8 x 128, 20 steps, one GEMM table, new and old interleaved.
CALL=c331; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for z in old/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; cp bin/comm-launch old/bin/
for v in old new; do use $v
  timeout 100 "$NCU" --clock-control none --kernel-name regex:"flash_dot" --launch-skip 100 --launch-count 3 \
    --metrics gpu__time_duration.sum --csv --page raw bin/bench single --size xl --dtype bf16 --mode step \
    --warmup 2 --steps 1 --batch 8 --out /tmp/s.jsonl > "$R/ncu-$v-128.csv" 2> /dev/null
  echo "ncu $v flash_dot 8x128: $(ncudur "$R/ncu-$v-128.csv")"
  timeout 120 "$NCU" --clock-control none --kernel-name regex:"flash_dot" --launch-skip 60 --launch-count 3 \
    --metrics gpu__time_duration.sum --csv --page raw bin/bench profile --size xl --dtype bf16 --context 1024 \
    --out /tmp/kp.jsonl --svg-dir /tmp/svg > "$R/ncu-$v-1024.csv" 2> /dev/null
  echo "ncu $v flash_dot 8x1024: $(ncudur "$R/ncu-$v-1024.csv")"
done; use new; pack
modelcheck "attention\|fail"
xl t-1 1 single
for i in 1 2; do xl new$i 1 single; use old; xl old$i 1 single; use new; done
same new1 new2 0; same old1 old2 0; same new1 old1 0
pack; echo "done $(date -u +%T)"
