#!/usr/bin/env bash
# Session 58, call 332 (nvidia-h200): xl's and the 6.7B's `train run` step at 8 x 1024 tokens
# with call 331's flash_dot against 0408c83's binaries (old/), interleaved, each model's one
# GEMM table. Written before: xl about 0.48 ms shorter (48 launches x 10 us, call 331), the
# 6.7B a little more (32 layers of wider rows); within a step of 210 and 590 ms, near the
# runs' spread.
CALL=c332; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for z in old/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; cp bin/comm-launch old/bin/
k() { local n=$1 m=$2 s=$3; train $n /tmp/r-k $m 1 single 8 $s --fresh --context 1024 > /dev/null; rm -rf /tmp/r-k
  echo "$n: $(msc $n 8 1024) ms; $(peak $n)"; }
k t-xl xl 14
for i in 1 2; do k xl-new$i xl 14; use old; k xl-old$i xl 14; use new; done
k t-67 6.7B 12
k 67-new1 6.7B 12; use old; k 67-old1 6.7B 12; use new
same xl-new1 xl-new2 0; same xl-new1 xl-old1 0
pack; echo "done $(date -u +%T)"
