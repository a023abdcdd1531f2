#!/usr/bin/env bash
# Session 36, call 198: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). About 5 minutes. Split DDP's norm from the copy-engine adds (`DDP_SUMSQ=1`,
# opt-in: two slots a bucket, the launch gathered in the backward and the flat buffer),
# with `DDP_NORM_LOG=1` saying per rank and backward where each norm came from; eager
# against replayed, at world 2 (gathers chained in the backward, and DDP_SPLIT_EARLY=0) and
# world 4. Session 34 (call 187) saw eager and replayed norms differ in the last bits.
CALL=c198; source "$(dirname "$0")/train-runs.sh"
e() { local n=$1 w=$2; shift 2; ENVS="$N $*" train $n /tmp/r-$n xl $w bucketed:25 $((8 * w)) 12 --fresh --eager; }
log() { echo "$1: $(grep -h 'ddp norm' "$R/$1.txt" | sed 's/^\[rank [0-9]*\] //' | sort | uniq -c | tr -s ' ' | head -4 | tr '\n' ';')"; }
xl single1 1 single $N
xl d2 2 bucketed:25 $N
xl d2s 2 bucketed:25 $N DDP_SUMSQ=1 DDP_NORM_LOG=1; log d2s
e d2se 2 DDP_SUMSQ=1 DDP_NORM_LOG=1; log d2se
e d2e 2
same d2s d2se; same d2 d2e; same d2 d2s
xl d2s0 2 bucketed:25 $N DDP_SUMSQ=1 DDP_NORM_LOG=1 DDP_SPLIT_EARLY=0; log d2s0
e d2s0e 2 DDP_SUMSQ=1 DDP_NORM_LOG=1 DDP_SPLIT_EARLY=0; log d2s0e
same d2s0 d2s0e
xl d4 4 bucketed:25 $N
xl d4s 4 bucketed:25 $N DDP_SUMSQ=1 DDP_NORM_LOG=1; log d4s
e d4se 4 DDP_SUMSQ=1 DDP_NORM_LOG=1; log d4se
same d4s d4se; same d4 d4s
python3 - "$R" <<'PY'
import json,sys
for n in "d2 d2s d2se d2e d2s0 d2s0e d4 d4s d4se".split():
    try: r=[json.loads(l) for l in open(f"{sys.argv[1]}/{n}.log.jsonl") if '"train"' in l]
    except OSError: continue
    print(n, [f"{x['grad_norm']:.9f}" for x in r[:3]])
PY
echo "done $(date -u +%T)"
