#!/usr/bin/env bash
# Session 46, call 250 (a 2-GPU kind): ZeRO-2 and FSDP on comm's copy engines, now with
# (1) each copy-engine window reused by a later launch once its launch is waited for
# (comm::nccl::ce_windows), and (2) the norm taken by the adds (ddp's squares) as ZeRO-1's.
# Copy into .gpu/ with train-runs.sh, x4-next-s41.sh, nccl/ and train-old.gz (4afedf2's
# binary: ZeRO-2 and FSDP on NCCL's kernels).
#   1. comm-selftest at world 2, as x4-next-s41.sh runs it (before anything unpacks bin/);
#   2. xl bf16, 8 x 128 tokens a GPU, 20 steps, world 2: zero1; zero2 and fsdp by both
#      binaries, alternating; each run's step, peak and NCCL windows; which runs logged the
#      same losses and norms.
# Output: $OUT/call250.tgz, $OUT/selftest.txt; a table last.
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
W=2 bash "$H/x4-next-s41.sh" selftest > "$O/selftest.txt" 2>&1; echo "selftest rc=$?"
grep -a "checks\|FAIL\|error" "$O/selftest.txt" | cut -c1-200 | tail -6
CALL=call250; source "$H/train-runs.sh"
gunzip -kf train-old.gz && chmod +x train-old && cp bin/train train-new
use() { cp "train-$1" bin/train; }
use new; xl z1 2 zero1 $N
for st in zero2 fsdp; do
  use new; xl $st-new 2 $st $N
  use old; xl $st-old 2 $st $N
done
use new
echo "zero2 new = zero1: $(same zero2-new z1)"
echo "fsdp new = zero1: $(same fsdp-new z1)"
echo "zero2 new = old: $(same zero2-new zero2-old)"
for f in "$R"/*.txt; do echo "$(basename "$f" .txt): $(grep -ho '[0-9.]* GiB of them in NCCL windows' "$f" | sort -u | tr '\n' ' ')"; done
pack
