#!/usr/bin/env bash
# Call 128 (session 25, issue 47), two GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Call 127's traces of zero1 at world 2 (--accum 1) put its GEMMs
# at 25.0-25.5 ms against one GPU's 19.5: nvjet kernels 28-50 % slower beside NCCL, the
# 2x4 and 1x4 clusters the most, while our attention backward lost 2.5 %. Planning the
# GEMMs for fewer SMs (MODEL_GEMM_SM_TARGET) did not help. Hypothesis: NCCL's CTAs hold a few
# SMs of every GPC, and a cluster of 8 CTAs needs 8 free SMs in one GPC. Test: candidates
# with clusters of at most 2 or 1 CTAs (MODEL_GEMM_MAX_CLUSTER), and fewer NCCL CTAs. Both
# MODEL_GEMM_ knobs of calls 127-128 were removed after them (contention-h200x2.md).
CALL=call128
source "$(dirname "$0")/train-runs.sh"
export TABLE_ONLY=none TMO=60
xl single-base 1 single
xl zero1-base 2 zero1
xl single-c2 1 single MODEL_GEMM_MAX_CLUSTER=2
grep -h "clusters" "$R/single-c2.txt" | sort | uniq | head -12
xl zero1-c2 2 zero1 MODEL_GEMM_MAX_CLUSTER=2
xl single-c1 1 single MODEL_GEMM_MAX_CLUSTER=1
xl zero1-c1 2 zero1 MODEL_GEMM_MAX_CLUSTER=1
xl zero1-ctas16 2 zero1 NCCL_MAX_CTAS=16
xl zero1-ctas8 2 zero1 NCCL_MAX_CTAS=8
xl zero1-c2-ctas16 2 zero1 MODEL_GEMM_MAX_CLUSTER=2 NCCL_MAX_CTAS=16
xl bucketed-base 2 bucketed:25
xl bucketed-c2 2 bucketed:25 MODEL_GEMM_MAX_CLUSTER=2
ENVS="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,COLL" train zero1-info /tmp/r-info xl 2 zero1 16 3 --fresh
grep -ihE "channel|nchannels|ctas" "$R/zero1-info.txt" | grep -v "via P2P" | sort | uniq -c | sort -rn | head -12
for c in 2 1; do
  MODEL_GEMM_MAX_CLUSTER=$c TRACE_STRATEGIES=zero1 TRACE_WORLD=2 TRACE_ACCUM=1 OUT=$R bash run.sh trace > "$R/trace-job-c$c.txt" 2>&1 || echo "trace c$c failed"
  mv "$R/trace.jsonl" "$R/trace-c$c.jsonl" 2>/dev/null; mv "$R/trace" "$R/trace-c$c" 2>/dev/null
done
for c in 2 1; do cp "$R/trace-c$c.jsonl" "$R/trace.jsonl" 2>/dev/null && echo "MAX_CLUSTER=$c" && traces 3; done
pack
