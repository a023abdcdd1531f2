#!/usr/bin/env bash
# Call 136 (session 25's plan for the next session; not run: no device time left), two
# GPUs, from the packed folder (copy this and train-runs.sh into .gpu/). ZeRO's buckets can
# be tapered (ZERO1_TAPER=1, ddp::buckets::plan_tapered): whole stages, from the first, the first
# bucket at most a quarter of the cap (xl: the embedding and block 0, about 80 MB), the
# second half (2 blocks), then 400 MB (5 blocks). Call 127's zero1 timeline at world 2 had
# 0.5-0.73 ms with nothing but the last reduce-scatter running (a bucket of about 240 MB,
# launched when the backward ends) and 0.47 ms of the first gather before the forward
# could start. Expected: both shrink to about a third; zero1 at world 2 0.5-0.8 ms faster
# than untapered (the default), with the copy-engine recipe too (0.956x -> about 0.94x);
# if so, make it the default (zero1::gather::taper). Same bits as untapered? No: the global norm is summed over other shards (last
# bits); within 1e-5 on the CPU (tests/tests/zero1_overlap.rs).
CALL=call136
source "$(dirname "$0")/train-runs.sh"
export TMO=60
CE="$N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4"
xl single 1 single
xl zero1-untapered 2 zero1
xl zero1 2 zero1 ZERO1_TAPER=1
xl zero2-untapered 2 zero2
xl zero2 2 zero2 ZERO1_TAPER=1
xl fsdp-untapered 2 fsdp
xl fsdp 2 fsdp ZERO1_TAPER=1
for k in 4 5 6; do xl zero1-ce$k 2 zero1 ${CE%:4}:$k ZERO1_TAPER=1; done
xl zero1-ce-untapered 2 zero1 $CE
for t in 0 1; do
  ZERO1_TAPER=$t TRACE_STRATEGIES=zero1 TRACE_WORLD=2 TRACE_ACCUM=1 OUT=$R bash run.sh trace > "$R/trace-job-t$t.txt" 2>&1 || echo "trace taper $t failed"
done
traces 4
pack
