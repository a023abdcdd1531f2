#!/usr/bin/env bash
# Call 100 (session 20), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): the final figures of this session's fsdp.
# fsdp's buckets now 200 MB by default (call 99). A. xl bf16 w4: zero1, fsdp, fsdp with
# FSDP_PREFETCH=2, FSDP_KEEP_LAST=24 and both; PyTorch FSDP2 and DDP at xl for context.
# B. 6.7B fsdp beside PyTorch FSDP2 compile-blocks and eager (issue 50's bars).
CALL=c100; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_PREFETCH=2" train fsdp-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=24" train fsdp-k24-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=24 FSDP_PREFETCH=2" train fsdp-k24-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a?
tp() {
  local t0=$(date +%s)
  timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node 4 anchors/torch_train_best.py "$D" $1 --dtype bf16 \
    --variant $2 --parallel $3 --global-batch 32 --steps $4 2> "$R/torch-$1-$2-$3.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $3 $1 $2: $(( $(date +%s) - t0 )) s"; pack
}
tp xl compile-blocks fsdp2 20
tp xl compile-ro ddp 20
ENVS="" TMO=200 train fsdp-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
rm -rf /tmp/b0
tp 6.7B compile-blocks fsdp2 20
tp 6.7B eager fsdp2 20
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack
