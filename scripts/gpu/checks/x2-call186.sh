#!/usr/bin/env bash
# Session 34, call 186: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 9 minutes. The norm taken by the copy-engine adds
# (comm::Deferred::norm: each block sums the squares it writes, one kernel their root; the
# slots' norm is the rank's) for split DDP and ZeRO-1, against DDP_SUMSQ=0 (the parts read
# after the backward); comm-selftest at world 2; eager against replayed; then the world-2
# bars (`run.sh train-speed`, worlds 1 and 2) and PyTorch's FSDP2 trainer at world 2.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"
( CALL=x2c186; source "$H/train-runs.sh"; export TMO=90
for a in "" "COMM_CE_ADDS=wait"; do
  env $N $a timeout 90 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest > "$R/selftest-w2$a.txt" 2>&1
  echo "selftest world 2 $a: rc $?"; grep -h "rank 0/" "$R/selftest-w2$a.txt" | tail -1; grep -hi "error\|fail" "$R/selftest-w2$a.txt" | head -3
done
xl b2 2 bucketed:25 $N
xl b2-parts 2 bucketed:25 $N DDP_SUMSQ=0
xl z2 2 zero1 $N
xl z2-parts 2 zero1 $N DDP_SUMSQ=0
ENVS="$N" train b2-e /tmp/r-b2-e xl 2 bucketed:25 16 12 --fresh --eager
same b2 b2-e
ENVS="$N" train z2-e /tmp/r-z2-e xl 2 zero1 16 12 --fresh --eager
same z2 z2-e
for f in b2 z2; do grep -h "step:" $R/$f.txt | head -1 | cut -c1-120; done
pack )
export OUT="$O/c"; mkdir -p "$OUT"
CASES=xl:bf16 TS_WORLDS="1 2" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="9" \
  bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -14
rm -rf "$OUT/train-speed/data"; tar czf "$O/c.tgz" -C "$O" c
( OUT=$O; CALL=torch186; source "$H/train-runs.sh"; export TTMO=200
  torch xl compile-blocks 40 fsdp2 2
  pack )
echo "done $(date -u +%T)"
