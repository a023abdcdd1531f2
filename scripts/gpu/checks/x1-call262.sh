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
# Copy into .gpu/ with train-runs.sh (msc, peak, torchc: its helpers since session 48). Output: $OUT/c262.tgz.
CALL=c262; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "attention\|fail\|error"
xl1k
capeager small 256
big() { local n=$1 rows=$2; shift 2; ENVS="$E" train $n /tmp/r-b 6.7B 1 single $rows 12 --fresh --context 1024 "$@" > /dev/null; rm -rf /tmp/r-b
  echo "6.7B ${rows}x1024 $n: $(msc $n $rows 1024) ms; $(peak $n)"; }
E="" big big6 6
E="" big big8-eager 8 --eager
E="MODEL_GEMM_TUNE=0" big big8-notune 8
pack; echo "done $(date -u +%T)"
