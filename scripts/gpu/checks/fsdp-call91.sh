#!/usr/bin/env bash
# Call 91 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/): fsdp
# after call 90's fixes (chunks that own only their elements; copies gathered from the
# masters, cast at launch; one stage of prefetch), beside PyTorch FSDP2 in the same call.
# A. xl bf16 w4, one GEMM table: zero1, zero2 (whole and sharded masters), fsdp: steps and
#    peaks; fsdp bit for bit as zero2 with sharded masters?
# B. 6.7B and 13B bf16 w4: fsdp, and PyTorch FSDP2 compile-blocks and eager
#    (anchors/torch_train_best.py), steps and peaks.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R=/tmp/c91; rm -rf "$R"; mkdir -p "$R"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
pack() { tar czf "$O/c.tgz" -C /tmp c91; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"
T="$R/gemm.json"
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
# train NAME OUT MODEL WORLD STRATEGY GLOBAL STOP [extra args...]; env through ENVS.
train() {
  local n=$1 out=$2 m=$3 w=$4 st=$5 g=$6 k=$7; shift 7
  local t0=$(date +%s)
  env $ENVS timeout ${TMO:-120} bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out "$out" --model $m --bf16 \
    --global-batch $g --steps 100000 --stop-after $k --eval-every 100000 --strategy $st --backend nccl --no-progress \
    $([ -f "$T" ] && [ $m = xl ] && echo --gemm-choices "$T") "$@" > "$R/$n.txt" 2>&1 \
    || { echo "$n failed ($(( $(date +%s) - t0 )) s)"; tail -4 "$R/$n.txt"; pack; return 1; }
  [ -f "$T" ] || [ $m != xl ] || cp "$out/gemm-choices.json" "$T"
  cp "$out/log.jsonl" "$R/$n.log.jsonl"
  echo "$n ($(( $(date +%s) - t0 )) s): $(ms "$out" $g) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | sort | tail -1 | cut -c1-300)"
  grep -h "masters sharded" "$R/$n.txt" | head -1; pack
}
same() { python3 - "$R/$1.log.jsonl" "$R/$2.log.jsonl" "${3:-0}" <<'PY'
import json,sys
def rec(p): return {r['step']:(r['loss'],r.get('grad_norm')) for r in map(json.loads,open(p)) if r.get('type')=='train'}
a,b,lo=rec(sys.argv[1]),rec(sys.argv[2]),int(sys.argv[3])
common=sorted(s for s in a if s in b and s>lo)
diff=[s for s in common if a[s]!=b[s]]
print(f"{sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: {len(common)} steps after {lo}, {'ALL EQUAL' if not diff else 'differ from step %d: %s vs %s'%(diff[0],a[diff[0]],b[diff[0]])}")
PY
}
torch() { # size variant steps
  local t0=$(date +%s)
  timeout 200 python3 -m torch.distributed.run --standalone --nproc_per_node 4 anchors/torch_train_best.py "$D" $1 --dtype bf16 \
    --variant $2 --parallel fsdp2 --global-batch 32 --steps $3 2> "$R/torch-$1-$2.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch fsdp2 $1 $2: $(( $(date +%s) - t0 )) s"; pack
}
echo "== A"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 --fresh --ckpt-every 100000
ENVS="" train zero2-xl /tmp/a1 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=sharded" train zero2-sharded-xl /tmp/a2 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="" train fsdp-xl /tmp/a3 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
same zero2-sharded-xl fsdp-xl
echo "== B"
ENVS="" TMO=200 train fsdp-6.7B /tmp/b1 6.7B 4 fsdp 32 14 --fresh --ckpt-every 100000
torch 6.7B compile-blocks 20
ENVS="" TMO=200 train fsdp-13B /tmp/b2 13B 4 fsdp 32 10 --fresh --ckpt-every 100000
torch 13B compile-blocks 12
torch 6.7B eager 20
torch 13B eager 12
rm -rf /tmp/a? /tmp/b? "$D"; echo "=== end ($(date -u +%T))"; pack
