#!/usr/bin/env bash
# Session 61, call 348 (one GPU; copy this and train-runs.sh into .gpu/): what a checkpoint
# of xl costs, and where. Call 347's --ckpt-every 10 held step 11 for about 47 s.
# Written before: the disk's own rate (dd, fsynced) decides it: if our save to /dev/shm (RAM)
# takes far less than to /tmp, the disk is the floor, and PyTorch's torch.save and DCP save
# of the same model and AdamW state take about as long on it; if /dev/shm takes about as long,
# our copies or writes are the cost.
CALL=c348; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
df -h /tmp /dev/shm | tee "$R/df.txt"
for d in /tmp /dev/shm; do
  echo "dd 4 GiB to $d: $(dd if=/dev/zero of=$d/dd.bin bs=16M count=256 conv=fsync 2>&1 | tail -1)"; rm -f $d/dd.bin
done | tee "$R/dd.txt"
TMO=200 train ckd /tmp/r-ckd xl 1 single 8 10 --fresh --ckpt-every 10; grep -h "checkpoint /" "$R/ckd.txt"
TMO=200 train cks /dev/shm/r-cks xl 1 single 8 10 --fresh --ckpt-every 10; grep -h "checkpoint /" "$R/cks.txt"; rm -rf /dev/shm/r-cks
pack
timeout 300 python3 anchors/torch_ckpt.py xl "$vocab" /tmp/tck 2> "$R/torch-ckpt.err" | tee "$R/torch-ckpt.jsonl"
tail -3 "$R/torch-ckpt.err"
echo "=== end ($(date -u +%T))"
pack
