#!/usr/bin/env bash
# Session 58, call 325 (nvidia-h200): where the one-block-a-head attention's time goes at
# xl bf16, 8 x 128 tokens (call 320: attn_fwd_e64 1.04 ms and attn_bwd_e64 2.16 ms a step,
# 48 launches each: 22 and 45 us, for 13 and 26 MB of traffic a launch). Nsight Compute's
# sections on one launch of each inside `bench single`: speed of light, occupancy, launch,
# warp states, scheduler, memory.
CALL=c325; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
for k in fwd bwd; do
  timeout 200 "$NCU" --clock-control none --kernel-name regex:"attn_${k}_e64" --launch-skip 60 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    bin/bench single --size xl --dtype bf16 --mode step --warmup 2 --steps 1 --batch 8 --out /tmp/s.jsonl \
    > "$R/ncu-attn-$k.txt" 2>&1; echo "ncu $k rc=$?"
  grep -E "Duration|Registers Per|Shared Memory Config|Dynamic Shared|Block Limit|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Warp Cycles Per Issued|Issued Ipc|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Stall|No Eligible" "$R/ncu-attn-$k.txt" | head -40
done
pack; echo "done $(date -u +%T)"
