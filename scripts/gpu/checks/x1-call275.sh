#!/usr/bin/env bash
# Session 50, call 275 (nvidia-h200): the tiled attention on pre-roped heads, each tile
# loaded by cp.async while the last is computed on (two stages), against the kernels before
# it (the previous pack's binaries in old/bin, as HEAD: MODEL_FLASH_BWD=pairs).
#   bench model-check (tiled rows, bar 3e-2; each backward twice, the same bits);
#   bench profile at 8 x 1024, xl and 6.7B, new and old (attention forward and backward);
#   xl, 8 x 1024, one GPU, new and old; small, 256 tokens, captured against eager.
# Copy into .gpu/ with train-runs.sh, the old binaries into .gpu/old/bin. Output: $OUT/c275.tgz.
CALL=c275; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=200
for z in old/bin/*.gz; do gunzip -f "$z"; chmod +x "${z%.gz}"; done
use() { if [ "$1" = old ]; then mv bin bin-new; ln -s old/bin bin; export MODEL_FLASH_BWD=pairs; else [ -L bin ] && rm bin && mv bin-new bin; unset MODEL_FLASH_BWD; fi; }
modelcheck "tiled\|fail\|error\|panick\|differ"
for m in xl 6.7b; do for v in new old; do use $v
  timeout 150 bin/bench profile --size $m --dtype bf16 --context 1024 --out "$R/profile-$m-$v.jsonl" --svg-dir "$R/svg" > "$R/profile-$m-$v.txt" 2>&1
  echo "profile $m $v rc=$?: $(sed -n 2p "$R/profile-$m-$v.txt")"; grep "attn/core" "$R/profile-$m-$v.txt" | head -2; grep "memory in use" "$R/profile-$m-$v.txt"; rm -rf "$R/svg"; pack
done; use new; done
for v in new old; do use $v
  train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done; use new
capeager small 256
pack; echo "done $(date -u +%T)"
