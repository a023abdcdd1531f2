#!/usr/bin/env bash
# Session 48, call 262 (nvidia-h200): the tiled attention's forward with its output in
# registers (rescaled row by row) and q's fragments loaded once.
#   bench model-check (the tiled attention's rows);
#   xl, 8 x 1024 tokens, one GPU: tiled against MODEL_ATTN_TILED=0 (call 261: 290.53 against
#   255.92 ms; 52.92 against 72.17 GiB);
#   small at 256 tokens: eager against captured with one GEMM table (call 261 tuned each run
#   on its own and they differed from step 1);
#   the 6.7B at 1024 tokens without checkpointing (call 261: out of memory at 8 a GPU, plan
#   130.9 GiB): 6 a GPU captured (plan 122.6), 8 eager (plan 119.2), 8 captured with
#   MODEL_GEMM_TUNE=0 (no timing of GEMM candidates).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c262.tgz.
CALL=c262; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=200
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,2))" "$R/$1.log.jsonl" "$2" "$3" 2>/dev/null; }
peak() { grep -h 'peak GPU' "$R/$1.txt" | sort | tail -1 | cut -c1-70; grep -h "error" "$R/$1.txt" | head -2 | cut -c1-200; }
t0=$(date +%s); timeout 240 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc=$? ($(( $(date +%s) - t0 )) s)"
grep -i "attention\|fail\|error" "$R/model-check.txt" | cut -c1-200; pack
for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  ENVS="$e" train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done
for m in captured eager; do
  a=""; [ $m = eager ] && a="--eager"
  train small-$m /tmp/r-s small 1 single 8 20 --fresh --context 256 $a > /dev/null; rm -rf /tmp/r-s
done
same small-captured small-eager
big() { local n=$1 rows=$2; shift 2; ENVS="$E" train $n /tmp/r-b 6.7B 1 single $rows 12 --fresh --context 1024 "$@" > /dev/null; rm -rf /tmp/r-b
  echo "6.7B ${rows}x1024 $n: $(msc $n $rows 1024) ms; $(peak $n)"; }
E="" big big6 6
E="" big big8-eager 8 --eager
E="MODEL_GEMM_TUNE=0" big big8-notune 8
pack; echo "done $(date -u +%T)"
