#!/bin/bash
# Session 41, call 226 (one GPU): comm's copy-engine adds (kernels/sum.cu) before and after
# their loads were hoisted, through prio-probe.py: alone (world 4's 3 parts, world 2's 1)
# and beside the backward's GEMMs; twice, the kernels' order swapped. The PTX files come
# from nvcc --ptx -O3 -arch=sm_90 of each sum.cu, in .gpu/adds/.
set -u
cd "$(dirname "$0")"
A=$(realpath ../../../.gpu/adds)
for order in "old=$A/old.ptx new=$A/new.ptx" "new=$A/new.ptx old=$A/old.ptx"; do
  REPS=${REPS:-9} ADDS_PROGS=${ADDS_PROGS:-528} ADDS_PTX="$order" python3 prio-probe.py 2>&1 | tee -a "${OUT:-.}/call226.txt"
done
