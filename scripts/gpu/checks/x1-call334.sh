#!/usr/bin/env bash
# Session 59, call 334 (nvidia-h200): (1) ZeRO-1 at world 1 with a bucket's spans updated
# together (seam's step_spans_together; 400 MB buckets) against session 58's binaries (old/:
# a launch a tensor), interleaved, one GEMM table, beside `train run` single; (2) issue 33's
# one-GPU row as `run.sh train-speed` takes it, beside PyTorch's trainer in the same call.
# Written before: zero1 at world 1 about 0.6 ms shorter (as single in call 333: -0.65), the
# same bits as before and as single; train run single about 0.69x PyTorch's compile-ro
# (call 330: 0.703x; call 333 took 0.65 ms off a 40.2 ms step).
CALL=c334; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
for z in old/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done; cp bin/comm-launch old/bin/
xl t-1 1 single > /dev/null
for i in 1 2; do xl z-new$i 1 zero1 > /dev/null; use old; xl z-old$i 1 zero1 > /dev/null; use new; xl s-new$i 1 single > /dev/null; done
for r in z-new1 z-new2 z-old1 z-old2 s-new1 s-new2; do echo "$r: $(msc $r 8 128) ms; $(peak $r)"; done
same z-new1 z-new2 0; same z-new1 z-old1 0; same z-new1 s-new1 0; pack
OUT="$R/ts" CASES="xl:bf16" TS_WORLDS=1 TS_STRATEGIES="single zero1" TS_TORCH=compile-ro timeout 330 bash run.sh train-speed 2>&1 | tail -12
pack; echo "done $(date -u +%T)"
