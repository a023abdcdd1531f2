#!/usr/bin/env bash
# Session 59, call 337 (nvidia-h200): where the clipping norm is summed, xl `train run` single
# at 8 x 128, one GEMM table, interleaved: after the backward (the default: 0.90 ms of
# gradnorm_sumsq in call 336's trace), stage by stage on a second stream beside the backward
# (STEP_NORM=side-stream), or on the compute stream (in-backward). Last measured in call 17,
# before graphs: slower. Written before: side-stream up to 0.9 ms shorter if the backward's
# GEMMs leave the memory bandwidth for 4 GB of reads; in-backward no shorter.
CALL=c337; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single > /dev/null
for i in 1 2; do xl after$i 1 single > /dev/null; xl side$i 1 single STEP_NORM=side-stream > /dev/null; xl inb$i 1 single STEP_NORM=in-backward > /dev/null; done
for r in after1 after2 side1 side2 inb1 inb2; do echo "$r: $(msc $r 8 128) ms; $(peak $r)"; grep -m1 -o "norm [a-z-]*" "$R/$r.txt"; done
same after1 after2 0; same after1 side1 0; same side1 inb1 0
pack; echo "done $(date -u +%T)"
