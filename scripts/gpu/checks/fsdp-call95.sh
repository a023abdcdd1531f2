#!/usr/bin/env bash
# Call 95 (session 19), on a 4-GPU kind, from the packed folder (copy it and train-runs.sh
# into .gpu/): xl bf16 w4, one GEMM table (made by a discarded run): does fsdp's step move
# with more CTAs for NCCL (call 93: NCCL_MAX_CTAS=8 took 76.95 ms against 53.59)?
CALL=c95; source "$(dirname "$0")/train-runs.sh"
ENVS="" train table-xl /tmp/a0 xl 4 zero1 32 8 --fresh --ckpt-every 100000
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 --fresh --ckpt-every 100000
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
ENVS="NCCL_MIN_CTAS=32" train fsdp-ctas32-xl /tmp/a2 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
ENVS="NCCL_MIN_CTAS=32 FSDP_PREFETCH=2" train fsdp-ctas32-ahead2-xl /tmp/a3 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
same fsdp-xl fsdp-ctas32-xl
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack
