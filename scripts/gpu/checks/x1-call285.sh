#!/usr/bin/env bash
# Session 52, call 285 (nvidia-h200): why the tiled attention at E = 128 (the 6.7B's heads)
# is slower than PyTorch's flash kernel (FlashAttention-2), the same counters for both.
#   PyTorch's flash SDPA alone at (8, 32, 1024, 128), causal bf16: CUDA-event medians; then
#   Nsight Compute on its forward and backward kernels.
#   Nsight Compute on ours (flash_fwd2_e128, flash_bwd_kv_e128, flash_bwd_q2_e128), one
#   launch each inside bench profile 6.7B at 8 x 1024.
#   Each: speed of light, occupancy, launch, scheduler, warp states, the stall reasons per
#   issued instruction, the tensor pipe's active share; ours also the source counters
#   (where the stalls are). Output: $OUT/c285.tgz.
CALL=c285; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis"
METRICS="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg"
sdpa 25 8,32,1024,128
timeout 200 ncu --clock-control none --kernel-name regex:'flash_(fwd|bwd_dq)' --launch-skip 4 --launch-count 2 $SECTIONS $METRICS \
  -o "$R/torch" python3 /tmp/sdpa.py 4 8,32,1024,128 > "$R/ncu-torch-run.txt" 2>&1; echo "ncu torch rc=$?"; tail -2 "$R/ncu-torch-run.txt" | cut -c1-200
pack
ours() { timeout 240 ncu --clock-control none --kernel-name regex:"$2" --launch-skip $3 --launch-count $4 $SECTIONS --section SourceCounters $METRICS \
  -o "$R/$1" bin/bench profile --size 6.7B --dtype bf16 --context 1024 --out "$R/p.jsonl" --svg-dir /tmp/svg > "$R/ncu-$1-run.txt" 2>&1
  echo "ncu $1 rc=$?"; tail -2 "$R/ncu-$1-run.txt" | cut -c1-200; }
ours ours-fwd 'flash_fwd2_e128' 3 1
ours ours-bwd 'flash_bwd_(kv|q2)_e128' 4 2
for x in torch ours-fwd ours-bwd; do
  ncu --import "$R/$x.ncu-rep" --page details > "$R/$x-details.txt" 2>&1
  ncu --import "$R/$x.ncu-rep" --page raw --csv > "$R/$x-raw.csv" 2>&1
done
pack
python3 - "$R" <<'PY'
import csv, sys
R = sys.argv[1]
for x in ("torch", "ours-fwd", "ours-bwd"):
    rows = list(csv.reader(open(f"{R}/{x}-raw.csv")))
    if len(rows) < 3: print(x, "no raw rows"); continue
    h = rows[0]
    want = ["gpu__time_duration.sum", "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
            "smsp__issue_active.avg.pct_of_peak_sustained_active", "launch__grid_size", "launch__occupancy_limit_registers"]
    for r in rows[2:]:
        d = dict(zip(h, r))
        print(x, d.get("Kernel Name", "?")[:60], {k.split("__")[-1]: d.get(k) for k in want if k in d})
        st = sorted(((float(d[k] or 0), k.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""))
                     for k in h if k.startswith("smsp__average_warps_issue_stalled_") and k.endswith("ratio")), reverse=True)
        print("   stalls/issue:", ", ".join(f"{n} {v:.2f}" for v, n in st[:8]))
PY
pack; echo "done $(date -u +%T)"
