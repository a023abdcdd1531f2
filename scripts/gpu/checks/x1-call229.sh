#!/bin/bash
# Session 41, call 229 (one GPU): comm's adds, old and new kernels/sum.cu, at most 528, 264
# and 132 blocks (COMM_CE_ADDS_BLOCKS), alone and beside the backward's GEMMs, with a
# torch.profiler replay of each case (TRACE=1): how long the adds and the GEMMs run, and
# how long both at once. PTX in .gpu/adds/ as for call 226.
set -u
cd "$(dirname "$0")"
A=$(realpath ../../../.gpu/adds)
REPS=${REPS:-7} ADDS_PROGS="" ADDS_BLOCKS="528 264 132" TRACE=1 ADDS_PTX="old=$A/old.ptx new=$A/new.ptx" \
  python3 prio-probe.py 2>&1 | tee "${OUT:-.}/call229.txt"
