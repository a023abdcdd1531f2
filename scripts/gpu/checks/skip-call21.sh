#!/usr/bin/env bash
# Session 7, call 21 (nvidia-h100-x1): model-check after the skip of non-finite steps (the
# norm kernel's NaN coefficient, the fused AdamW writing nothing for it; graph = eager for
# every sync), then `train run --lr 1e30 --skip-nonfinite 3` on the GPU (graph path).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
bash run.sh model-check 2>&1 | grep -E "CUDA graph|gradient norm|fused AdamW|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
d=/tmp/skip; rm -rf $d
bin/train prepare --data $d/data > /dev/null 2>&1
bin/train run --data $d/data --out $d/run --model nano --steps 20 --lr 1e30 --skip-nonfinite 3 \
  --backend nccl --world 1 --no-progress 2>&1 | grep -E "device|step:|skipped|diverged" | head -8
grep -c '"skipped"' $d/run/log.jsonl
