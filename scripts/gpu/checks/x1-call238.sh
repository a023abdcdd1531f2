#!/usr/bin/env bash
# Session 44, call 238 (one GPU): a checkpoint's host memory, xl bf16, `train run` before
# and after checkpoint files were written and read a tensor at a time (15ddbda). Copy into
# .gpu/ beside bin/train-old.gz (train built at 35d129c, before the change).
# For each binary (old, then new): run 1 trains 3 steps and saves at the end; run 2 resumes
# that checkpoint (a load), trains step 4 and saves. Each run's peak resident memory
# (VmRSS every 0.1 s) and wall time, as JSON lines in $OUT/ckpt.jsonl; both binaries'
# checkpoints of steps 3 and 4 must list the same sizes and CRC-32s (the same bits: one
# GEMM table, deterministic steps, the same file format). Then `bench zero1-check` on the
# GPU (Z1=0: not). Call 238 sampled `timeout`'s memory, not train's; call 239 ran this one;
# call 240 (TUNE=0) the new binary reading files straight into tensors (see gpus-s44.md).
# Session 45, call 241 (TUNE=0): train-old built at 07d2505 (session 44's), the new one
# writing each span's moment in pieces (26f58b0) (see checkpoint-host-s45.md). Call 242
# (RESUME_ONLY=1: both binaries resume one save of the new one): train-old built at 635a580,
# the new one keeping the moments as read (39cf567).
# Call 243 (RESUME_ONLY=1): train-old built at b52166d, the new one (b9ed171) setting the
# parameters one at a time as params.safetensors is read again (d759d5e).
# Not run yet: RESUME_ONLY=1 SAVE_STRATEGY=single, the save DDP's one file, resumed by zero1
# (train-old built before 39cf567 and 77e6b53, to measure what those changed there).
set -u
H="$(cd "$(dirname "$0")" && pwd)"
RUN_SH_SOURCED=1 source "$H/run.sh"
set +e
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
D=/tmp/ck-data; rm -rf "$D" /tmp/ck-*
"$BIN/train" prepare --data "$D" --bytes 2000000 --vocab 4000 > "$O/prepare.txt" 2>&1 || { tail "$O/prepare.txt"; exit 1; }
peak() {  # NAME CMD...: the peak VmRSS of CMD's process tree (sampled every 0.1 s), the
  # time to its "trained steps" line (which follows the run's last save) and its wall time
  local name=$1 t0 t1 tt="" p pk=0 r rc; shift
  t0=$(date +%s%N)
  "$@" > "$O/$name.txt" 2>&1 &
  p=$!
  while kill -0 "$p" 2>/dev/null; do
    r=$(for q in $p $(pgrep -P "$p"); do awk '/VmRSS/{print $2}' "/proc/$q/status" 2>/dev/null; done | awk '{s+=$1} END {print s+0}')
    [ "$r" -gt "$pk" ] && pk=$r
    [ -z "$tt" ] && grep -q "^trained steps" "$O/$name.txt" && tt=$(date +%s%N)
    sleep 0.1
  done
  wait "$p"; rc=$?; t1=$(date +%s%N)
  [ -z "$tt" ] && tt=$t1
  echo "{\"check\":\"ckpt-host\",\"name\":\"$name\",\"rc\":$rc,\"peak_rss_mib\":$((pk / 1024)),\"to_trained_ms\":$(((tt - t0) / 1000000)),\"wall_ms\":$(((t1 - t0) / 1000000))}" | tee -a "$O/ckpt.jsonl"
  [ "$rc" = 0 ] || tail -3 "$O/$name.txt"
}
manifest() { local f=$1; [ -e "$f" ] || f=${f/group-0\//}; set -- "$f"; python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(json.dumps({"step": m["step"], "files": [[f["name"], f["size"], f["crc32"]] for f in m["files"]]}))' "$1"; }
# The GEMM table, tuned once (one step, no checkpoint), so that no timed run tunes (TUNE=0:
# the first run tunes it, and its time says nothing).
[ "${TUNE:-1}" = 1 ] && timeout 200 "$BIN/train" run --data "$D" --out /tmp/ck-tune --model xl --bf16 --global-batch 8 --steps 10 \
  --stop-after 1 --eval-every 1000 --eval-batches 1 --backend nccl --world 1 --no-progress > "$O/tune.txt" 2>&1
[ "${TUNE:-1}" = 1 ] && cp /tmp/ck-tune/gemm-choices.json /tmp/ck-gc.json && rm -rf /tmp/ck-tune
for b in old new; do
  R=/tmp/ck-$b; gc=(); exe="$BIN/train"
  [ "$b" = old ] && exe="$BIN/train-old"
  [ -e /tmp/ck-gc.json ] && gc=(--gemm-choices /tmp/ck-gc.json)
  args=(run --data "$D" --out "$R" --model xl --bf16 --global-batch 8 --eval-every 1000 --eval-batches 1
        --backend nccl --world 1 --no-progress --max-new 4 --ckpt-every 1000)
  if [ "${RESUME_ONLY:-0}" = 1 ]; then  # both resume one save of the new binary (hard links)
    [ -d /tmp/ck-base ] || peak "base-save" timeout 240 "$BIN/train" "${args[@]/$R//tmp/ck-base}" --steps 3 \
      ${SAVE_STRATEGY:+--strategy "$SAVE_STRATEGY"}
    mkdir -p "$R" && cp -al /tmp/ck-base/checkpoints "$R"/  # written once, never in place
    for f in /tmp/ck-base/* /tmp/ck-base/.[!.]*; do [ "${f##*/}" = checkpoints ] || cp -a "$f" "$R"/; done
  else
    peak "$b-save" timeout 240 "$exe" "${args[@]}" --steps 3 "${gc[@]}"
  fi
  [ -e /tmp/ck-gc.json ] || cp "$R/gemm-choices.json" /tmp/ck-gc.json
  manifest "$R"/checkpoints/step-00000003/group-0/manifest.json | tee -a "$O/manifest-$b.txt"
  peak "$b-resume" timeout 240 "$exe" "${args[@]}" --steps 4
  manifest "$R"/checkpoints/step-00000004/group-0/manifest.json | tee -a "$O/manifest-$b.txt"
  grep -a "trained steps\|resuming" "$O/$b-save.txt" "$O/$b-resume.txt" | cut -c1-160
  rm -rf "$R"
done
[ "${Z1:-1}" = 1 ] && timeout 120 "$BIN/bench" zero1-check --backend nccl --ranks 1 --dir /tmp/ck-z1 2>&1 | tail -2 | tee "$O/zero1-check.txt"
cmp "$O/manifest-old.txt" "$O/manifest-new.txt" && echo "checkpoints: the same sizes and CRC-32s"
python3 - "$O/ckpt.jsonl" <<'PY'
import json, sys
r = {x["name"]: x for x in map(json.loads, open(sys.argv[1]))}
print("| run | peak host RSS, MiB (old -> new) | to the trained line, s | wall, s (old -> new) |")
for k in ["save", "resume"]:
    o, n = r.get("old-" + k), r.get("new-" + k)
    if o and n:
        print(f"| {k} | {o['peak_rss_mib']} -> {n['peak_rss_mib']} | {o['to_trained_ms']/1e3:.1f} -> {n['to_trained_ms']/1e3:.1f} | {o['wall_ms']/1e3:.1f} -> {n['wall_ms']/1e3:.1f} |")
PY
