#!/usr/bin/env bash
# Call 116 (session 23), on a 2-GPU kind (no 4-GPU kind was lent then; W=4 on one), from
# the packed folder (copy it, train-runs.sh, gemm-xl.json and nccl/libnccl.so.2.gz into .gpu/): with NCCL 2.28.9's windows, do NCCL's
# CTA policies take the gathers off the SMs the GEMMs need? `NCCL_CTA_POLICY=2` runs
# all-gathers between windows on the copy engines (it was slow on 2.28.3, call 108; 2.28.7
# says it fixed that), `=1` uses the fewest CTAs that perform. xl bf16, world W (2), zero1 and
# fsdp, each beside the default; one GPU's step in the same call for issue 47's ratio.
CALL=c116; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
A="--fresh --ckpt-every 100000"
# One GPU, one process without a launcher (as run.sh train-speed runs world 1).
env $N timeout 120 bin/train run --data "$D" --out /tmp/s0 --model xl --bf16 --global-batch 8 --steps 100000 \
  --stop-after 20 --eval-every 100000 --strategy single --backend nccl --world 1 --no-progress \
  --gemm-choices "$R/gemm-xl.json" $A > "$R/single-xl.txt" 2>&1 && cp /tmp/s0/log.jsonl "$R/single-xl.log.jsonl" \
  && echo "single-xl: $(ms /tmp/s0 8) ms" || tail -4 "$R/single-xl.txt"
W=${W:-2}; G=$((8 * W))
for s in zero1 fsdp; do
  ENVS="$N" train $s-n9-xl /tmp/a0 xl $W $s $G 20 $A
  ENVS="$N NCCL_CTA_POLICY=2" train $s-n9-ce-xl /tmp/a0 xl $W $s $G 20 $A
  same $s-n9-xl $s-n9-ce-xl
  ENVS="$N NCCL_CTA_POLICY=1" train $s-n9-eff-xl /tmp/a0 xl $W $s $G 20 $A
done
rm -rf /tmp/a0 /tmp/s0 "$D"; echo "=== end ($(date -u +%T))"; pack
