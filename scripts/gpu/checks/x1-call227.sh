#!/bin/bash
# Session 41, calls 227-228 (one GPU): adds-check.py on the old and new kernels/sum.cu, then on the
# new one beside a copy that adds a run's parts in reverse order (must fail); prio-probe.py
# once more on the helper module it now shares (REPS=3). PTX in .gpu/adds/ as for call 226.
set -u
cd "$(dirname "$0")"
A=$(realpath ../../../.gpu/adds)
ADDS_PTX="old=$A/old.ptx new=$A/new.ptx" python3 adds-check.py 2>&1 | tee "${OUT:-.}/call227-check.txt"; echo "rc=${PIPESTATUS[0]}"
ADDS_PTX="new=$A/new.ptx reversed=$A/broken.ptx" python3 adds-check.py 2>&1 | tee "${OUT:-.}/call227-broken.txt"; echo "rc=${PIPESTATUS[0]}"
REPS=3 ADDS_PROGS="" ADDS_PTX="old=$A/old.ptx new=$A/new.ptx" python3 prio-probe.py 2>&1 | tail -12 | tee "${OUT:-.}/call227-probe.txt"
