#!/usr/bin/env bash
# Session 15, call 74 (nvidia-h100-x2; the session's last device minutes): ZeRO-1's bucket
# size past 200 MB (call 71: 25 -> 200 MB took the step from 54.55 to 48.61 ms), beside the
# one-GPU step in this call; then `bench model-check`, which now also checks attention at
# head dimension 128 (the 6.7B and 13B presets' shape). Results: $OUT/call74/.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call74"; mkdir -p "$R"; D=/tmp/d74
bin/train prepare --data "$D" > /dev/null 2>&1
run() {  # NAME WORLD STRATEGY
  local launch=() one=(--world 1); [ "$2" -gt 1 ] && launch=(bin/comm-launch --nproc-per-node "$2" --) && one=()
  rm -rf /tmp/r; timeout 100 "${launch[@]}" bin/train run --data "$D" --out /tmp/r --model xl --bf16 --global-batch $((8 * $2)) \
    --steps 100000 --stop-after 30 --eval-every 100000 --ckpt-every 100000 --strategy "$3" --backend nccl "${one[@]}" \
    --fresh --no-progress > "$R/$1.txt" 2>&1 || { tail -3 "$R/$1.txt"; return; }
  python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open('/tmp/r/log.jsonl') if '\"train\"' in l]
tps=statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)
print(json.dumps({'bench':'train','name':sys.argv[1],'world':int(sys.argv[2]),'step_ms':round(8*int(sys.argv[2])*128/tps*1e3,3),'last_loss':t[-1]['loss']}))" "$1" "$2" | tee -a "$R/steps.jsonl"
}
run single 1 single
for mb in 200 400 800; do run "zero1:$mb" 2 "zero1:$mb"; done
timeout 120 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"; grep -c ": OK" "$R/model-check.txt"; grep -iE "fail|error|mismatch" "$R/model-check.txt" | head -5
