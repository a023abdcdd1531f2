#!/bin/bash
# Session 41, call 230 (one GPU): comm's adds with cache-streaming loads and stores
# (__ldcs/__stcs: evict first, so that the adds' 5 GB do not push the GEMMs' operands out
# of L2), beside the new and old kernels/sum.cu: alone, beside the backward's GEMMs, and a
# torch.profiler replay of each (TRACE=1); twice, the order swapped. cs.ptx is nvcc of
# sum.cu with docs/results/gpus-s41/call230/sum-cs.patch (__ldcs/__stcs), all in .gpu/adds/.
set -u
cd "$(dirname "$0")"
A=$(realpath ../../../.gpu/adds)
for order in "new=$A/new.ptx cs=$A/cs.ptx old=$A/old.ptx" "cs=$A/cs.ptx new=$A/new.ptx old=$A/old.ptx"; do
  REPS=${REPS:-9} ADDS_PROGS="" TRACE=1 ADDS_PTX="$order" python3 prio-probe.py 2>&1 | grep -v Warn | tee -a "${OUT:-.}/call230.txt"
done
