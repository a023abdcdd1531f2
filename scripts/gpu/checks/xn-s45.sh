#!/usr/bin/env bash
# Session 45, for a 2- or 4-GPU kind: this session's checkpoint changes (a resuming rank
# reads only its own moments; a save writes each span's moment in pieces; the parameters
# set one at a time) at world W = every GPU, on NCCL. Copy into .gpu/ (with nccl/).
#   1. `bench zero1-check` at world W: saved with one bucket layout, resumed with another,
#      against training straight through and one process;
#   2. `train run`, small bf16, zero1 at world W, 5 steps in the schedule: stopped after 3
#      with a checkpoint there, resumed by fsdp (another strategy) to step 5, beside a run
#      straight through (zero1): step 5's loss, and each run's peak host memory (VmRSS of
#      the process tree, every 0.1 s).
# JSON lines in $OUT/xn.jsonl; a short table last.
set -u
H="$(cd "$(dirname "$0")" && pwd)"
RUN_SH_SOURCED=1 source "$H/run.sh"
set +e
export NCCL_NVLS_ENABLE=0
O="${OUT:-/tmp/out}"; mkdir -p "$O"
W=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
gunzip -kf "$H/nccl/libnccl.so.2.gz" 2>/dev/null && export LD_LIBRARY_PATH="$H/nccl:${LD_LIBRARY_PATH:-}"
timeout 180 "$BIN/bench" zero1-check --backend nccl --ranks "$W" --dir /tmp/xn-z1 > "$O/zero1-check.txt" 2>&1
echo "{\"check\":\"zero1-check\",\"world\":$W,\"rc\":$?}" | tee -a "$O/xn.jsonl"
grep -a "OK\|error" "$O/zero1-check.txt" | cut -c1-240 | head -4
D=/tmp/xn-data; rm -rf "$D" /tmp/xn-r*
"$BIN/train" prepare --data "$D" --bytes 2000000 --vocab 4000 > "$O/prepare.txt" 2>&1
desc() { local c; for c in $(pgrep -P "$1"); do echo "$c"; desc "$c"; done; }
peak() {  # NAME CMD...: the run's peak VmRSS summed over its process tree, and its wall time
  local name=$1 t0 p pk=0 r rc; shift
  t0=$(date +%s%N)
  "$@" > "$O/$name.txt" 2>&1 &
  p=$!
  while kill -0 "$p" 2>/dev/null; do
    r=$(for q in $p $(desc "$p"); do awk '/VmRSS/{print $2}' "/proc/$q/status" 2>/dev/null; done | awk '{s+=$1} END {print s+0}')
    [ "$r" -gt "$pk" ] && pk=$r
    sleep 0.1
  done
  wait "$p"; rc=$?
  echo "{\"check\":\"train\",\"name\":\"$name\",\"world\":$W,\"rc\":$rc,\"peak_rss_mib\":$((pk / 1024)),\"wall_ms\":$((($(date +%s%N) - t0) / 1000000))}" | tee -a "$O/xn.jsonl"
  [ "$rc" = 0 ] || tail -3 "$O/$name.txt"
}
run() {  # OUT STRATEGY ARGS...: small bf16 on every GPU, 5 steps in the schedule
  local out=$1 s=$2; shift 2
  timeout 200 "$BIN/comm-launch" --nproc-per-node "$W" -- "$BIN/train" run --data "$D" --out "$out" --model small --bf16 \
    --strategy "$s" --steps 5 --global-batch $((8 * W)) --eval-every 1000 --eval-batches 1 --no-progress --max-new 4 "$@"
}
peak straight run /tmp/xn-r1 zero1
peak save run /tmp/xn-r2 zero1 --ckpt-every 3 --stop-after 3
peak resume-fsdp run /tmp/xn-r2 fsdp
for r in r1 r2; do grep -a '"type":"train","step":5,' /tmp/xn-$r/log.jsonl | cut -c1-120 | tee -a "$O/steps.txt"; done
grep -a "resuming" "$O/resume-fsdp.txt" | cut -c1-200
python3 - "$O/xn.jsonl" <<'PY'
import json, sys
print("| check | world | rc | peak host RSS, MiB | wall, s |")
for x in map(json.loads, open(sys.argv[1])):
    print(f"| {x.get('name', x['check'])} | {x['world']} | {x['rc']} | {x.get('peak_rss_mib', '')} | {x.get('wall_ms', 0) / 1e3:.1f} |")
PY
