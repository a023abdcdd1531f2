#!/usr/bin/env bash
# Session 53, call 290 (nvidia-h200): ed19142's kernels (HEAD's SASS) measured as a user
# runs them and beside PyTorch in the same call (the README's 0.96x / 0.95x are session 51's):
#   Nsight Compute, one launch each, PyTorch's flash SDPA at (8, 32, 1024, 128) and ours
#   inside bench profile of the 6.7B (call 287 at 4ede8c1: fwd 307.9 us, bwd_kv 656.7,
#   bwd_q2 180.8; call 285, FlashAttention-2: fwd 282.9, bwd 702.0);
#   xl `train run` 8 x 1024 beside PyTorch compile-ro (call 280: 216.28 against 225.44 ms);
#   the 6.7B 8 x 1024 captured beside PyTorch per-block compile (call 282: 602.16 against 636.89).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c290.tgz.
CALL=c290; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
sdpa 25 8,32,1024,128 8,25,1024,64
timeout 120 ncu --clock-control none --cache-control none --kernel-name regex:'flash_(fwd|bwd_dq)' --launch-skip 4 --launch-count 2 \
  --metrics $NCU_M --csv --page raw python3 /tmp/sdpa.py 4 8,32,1024,128 > "$R/ncu-torch-6.7B-all.csv" 2> "$R/ncu-torch.err"; echo "ncu torch rc=$?"
ncukern new 6.7B 'flash_fwd2_e128' 3 1 fwd
ncukern new 6.7B 'flash_bwd_(kv|q2)_e128' 4 2 bwd
ncusum; pack
beside1k xl1k xl 14 compile-ro
beside1k big8 6.7B 12 compile-blocks
pack; echo "done $(date -u +%T)"
