#!/usr/bin/env bash
# Session 50, call 274 (nvidia-h200): where the tiled attention's time goes.
#   PyTorch's flash SDPA (causal, bf16), forward and backward alone, at xl's heads (8 x 25 x
#   1024 x 64) and the 6.7B's (8 x 32 x 1024 x 128): CUDA-event medians of 20;
#   Nsight Compute on our flash_fwd_e64 and flash_bwdp_e64 (the two-kind backward, as HEAD),
#   one launch each inside bench profile xl 8 x 1024: speed of light, occupancy, warp stalls.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c274.tgz.
CALL=c274; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
python3 - <<'PY' 2>&1 | tee "$R/sdpa.txt"
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
for (b, h, t, e) in [(8, 25, 1024, 64), (8, 32, 1024, 128)]:
    q, k, v = (torch.randn(b, h, t, e, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(b, h, t, e, device="cuda", dtype=torch.bfloat16)
    res = {}
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        for what in ("fwd", "fwd+bwd"):
            ts = []
            for i in range(25):
                s, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                if what == "fwd+bwd":
                    torch.autograd.grad(y, (q, k, v), g)
                en.record(); torch.cuda.synchronize()
                if i >= 5: ts.append(s.elapsed_time(en))
            ts.sort(); res[what] = ts[len(ts) // 2]
    f = 4 * b * h * t * t * e / 2
    print(f"sdpa flash b{b} h{h} t{t} e{e}: fwd {res['fwd']:.3f} ms ({f / res['fwd'] / 1e9:.0f} TFLOP/s), "
          f"bwd {res['fwd+bwd'] - res['fwd']:.3f} ms ({2.5 * f / (res['fwd+bwd'] - res['fwd']) / 1e9:.0f} TFLOP/s at 2.5x)")
PY
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
