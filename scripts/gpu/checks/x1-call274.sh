#!/usr/bin/env bash
# Session 50, call 274 (nvidia-h200): where the tiled attention's time goes.
#   PyTorch's flash SDPA (causal, bf16), forward and backward alone, at xl's heads (8 x 25 x
#   1024 x 64) and the 6.7B's (8 x 32 x 1024 x 128): CUDA-event medians of 20;
#   Nsight Compute on our flash_fwd_e64 and flash_bwdp_e64 (the two-kind backward, as HEAD),
#   one launch each inside bench profile xl 8 x 1024: speed of light, occupancy, warp stalls.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c274.tgz.
CALL=c274; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
sdpa 25 8,25,1024,64 8,32,1024,128
pack
MODEL_FLASH_BWD=pairs timeout 300 ncu --clock-control none --kernel-name regex:'flash_(fwd|bwdp)_e64' --launch-skip 4 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section LaunchStats -o "$R/flash" bin/bench profile --size xl --dtype bf16 --context 1024 \
  --out "$R/p.jsonl" --svg-dir /tmp/svg > "$R/ncu-run.txt" 2>&1; echo "ncu rc=$?"; tail -3 "$R/ncu-run.txt" | cut -c1-200
ncu --import "$R/flash.ncu-rep" --page details > "$R/flash-details.txt" 2>&1
grep -E "flash_|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Issued Ipc|No Eligible|Warp Cycles Per Issued" "$R/flash-details.txt" | head -60
ncu --import "$R/flash.ncu-rep" --page raw --csv --metrics smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_short_scoreboard,smsp__average_warp_latency_issue_stalled_math_pipe_throttle,smsp__average_warp_latency_issue_stalled_mio_throttle,smsp__average_warp_latency_issue_stalled_wait,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active > "$R/flash-stalls.csv" 2>&1
cut -c1-400 "$R/flash-stalls.csv" | head -5
pack; echo "done $(date -u +%T)"
