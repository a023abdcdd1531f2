#!/usr/bin/env bash
# Helpers of the `train run` device calls (session 19 on), sourced by a call's script from
# the packed folder (copy both into .gpu/). Before sourcing, the script sets CALL (its
# results go to /tmp/$CALL, tarred into $OUT/$CALL.tgz after each job, so that calls run one after another in one device command keep their own) and, optionally,
# TABLE_ONLY=MODEL (a GEMM table for that model alone; unset: one table per model, made by
# the first run of the model and read by the others).
#   train NAME OUT MODEL WORLD STRATEGY GLOBAL STOP [args...]: `train run` to step STOP
#       (--stop-after), env from ENVS, timeout TMO (120 s); prints its median step (from
#       step 6) and peak line.
#   xl NAME WORLD STRATEGY [ENV...]: `train` of xl, 8 x 128 tokens a GPU, 20 steps, fresh,
#       with env ENV (NAME's run directory /tmp/r-NAME). The table is rank 0's: where runs
#       are compared bit for bit, run `xl NAME 1 single` first, so that both ranks of every
#       later run read one table (a world-2 first run's rank 1 tunes its own).
#   $N: the env that loads NCCL 2.28.9 (nccl/libnccl.so.2.gz from scripts/gpu/build-nccl.sh,
#       where the packed folder has it).
#   same A B [AFTER]: whether runs A and B logged the same loss and gradient norm, bit for
#       bit, at every step after AFTER.
#   torch SIZE VARIANT STEPS [PARALLEL] [WORLD]: PyTorch's trainer (anchors/torch_train_best.py),
#       8 x 128 tokens a GPU, --parallel PARALLEL (fsdp2) at world WORLD (4), into $R/torch.jsonl.
#   traces [N]: each record of $R/trace.jsonl (run.sh trace with OUT=$R): period, idle,
#       kernels, categories, its N (4) largest gaps by the kernels around them, and what the
#       kernels lose beside NCCL (summarize.py's beside_nccl), per category and its top N;
#       with several ranks, each rank's waits in its collectives (cupti-skew).
#   tables: session 28's GEMM tables of xl, tuned by `train run` single on an idle GPU
#       ($R/gemm-plain.json) and beside a stand-in for NCCL ($R/gemm-hog.json;
#       MODEL_GEMM_TUNE_BESIDE=24, removed after call 153), then $R/gemm-mixed.json (the hog's choice for the
#       backward's shapes, the plain one for the forward's: ta = false, tb = true), and the
#       shapes whose choice differs.
#   msc NAME ROWS CONTEXT: run NAME's median step in ms from step 6 (ROWS sequences of
#       CONTEXT tokens a step; ms takes 128-token rows).
#   peak NAME: run NAME's largest peak-memory line and its first errors.
#   torchc SIZE CONTEXT [args...]: PyTorch's trainer on one GPU (variant TV, compile-blocks
#       unless set; 8 sequences of CONTEXT tokens, 6 steps after 2) into $R/torch.jsonl.
#   modelcheck PATTERN: bench model-check into $R/model-check.txt; its lines matching PATTERN.
#   use VARIANT: bin/ as VARIANT/bin (earlier binaries copied into the packed folder, e.g.
#       old/bin), or `use new`: bin/ as packed.
#   profile1k MODEL VARIANT...: bench profile of MODEL at 8 x 1024 tokens with each VARIANT's
#       binaries ($R/profile-MODEL-VARIANT.txt): its step, attention marks and memory line.
#   xl1k: xl at 8 x 1024 tokens on one GPU, 14 steps, the tiled attention (run xl1k-tiled)
#       against MODEL_ATTN_TILED=0 (xl1k-off).
#   capeager SIZE CONTEXT: SIZE on one GPU, 8 sequences of CONTEXT tokens, 20 steps captured
#       (run SIZE-captured) and eager (SIZE-eager), then `same` on the two.
#   ratios NAME:GLOBAL...: each run's median step at --accum 1 and 4 (runs NAME-a1 and
#       NAME-a4, GLOBAL the --accum 1 global batch), their ratio, and how far it is from the
#       first's (issue 48's world-2 bar).
#   sdpa ITERS B,H,T,E...: PyTorch's flash SDPA alone (causal, bf16), forward and backward
#       at each shape: CUDA-event medians of ITERS - 3 (its program: /tmp/sdpa.py, args the
#       same, for ncu to run).
#   ncukern VARIANT SIZE REGEX SKIP COUNT TAG: Nsight Compute on COUNT launches matching
#       REGEX after SKIP inside bench profile of SIZE at 8 x 1024 with VARIANT's binaries:
#       duration, DRAM throughput and bytes read, L2 hit rate, tensor pipe ($R/ncu-*.csv);
#       ncusum prints every such file's rows.
#   ncudur FILE: the durations (gpu__time_duration.sum, with its unit) of the launches in one
#       such CSV (`ncu --metrics gpu__time_duration.sum --csv --page raw`); $NCU: Nsight Compute.
#   adamwcheck: bench model-check (its AdamW lines), then xl `train run` single twice (s1,
#       s2) and zero1 at world 1 (z1), one table: their steps, and `same` on s1 against both.
#   rows2 [N]: issue 47's world-2 rows (x2-call329.sh's), N (2) times: bench single --clip 1
#       (xl, steps 6-20, the table $R/gemm-xl.json: run `xl t-1 1 single` first), `train run`
#       single, zero1 and bucketed:25 at world 2; then `same` on each pair.
#   beside1k NAME MODEL STEPS VARIANT: `train run` of MODEL on one GPU, 8 sequences of 1024
#       tokens, STEPS steps captured (run NAME): its step and peak; then PyTorch's trainer in
#       VARIANT at the same shape (torchc).
#   smi NAME ... smistop NAME: nvidia-smi samples every 100 ms between the two ($R/smi-NAME.csv),
#       then the SM clock and power of the samples above 600 W (the training steps).
#   trace1 NAME MODEL CONTEXT: run.sh's trace job for `train run` of MODEL on one GPU, 8
#       sequences of CONTEXT tokens (cupti/ in the packed folder: scripts/cupti/build.sh):
#       its peak, step, and every kernel's time and launches a replay, in $R/trace-NAME/
#       (trace.txt; the raw records in trace-single-a1.csv.gz).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "${BASH_SOURCE[0]}")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R=/tmp/$CALL; rm -rf "$R"; mkdir -p "$R"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
pack() { tar czf "$O/$CALL.tgz" -C /tmp "$CALL"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
train() {
  local n=$1 out=$2 m=$3 w=$4 st=$5 g=$6 k=$7; shift 7
  local t0=$(date +%s) T="$R/gemm-$m.json"
  [ -z "$TABLE_ONLY" ] || [ "$m" = "$TABLE_ONLY" ] || T=/nonexistent
  env $ENVS timeout ${TMO:-120} bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out "$out" --model $m --bf16 \
    --global-batch $g --steps 100000 --stop-after $k --eval-every 100000 --strategy $st --backend nccl --no-progress \
    $([ -f "$T" ] && echo --gemm-choices "$T") "$@" > "$R/$n.txt" 2>&1 \
    || { echo "$n failed ($(( $(date +%s) - t0 )) s)"; tail -4 "$R/$n.txt"; pack; return 1; }
  [ -f "$T" ] || [ "$T" = /nonexistent ] || [ ! -f "$out/gemm-choices.json" ] || cp "$out/gemm-choices.json" "$T"
  cp "$out/log.jsonl" "$R/$n.log.jsonl"
  echo "$n ($(( $(date +%s) - t0 )) s): $(ms "$out" $g) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | sort | tail -1 | cut -c1-300)"
  grep -h "masters sharded" "$R/$n.txt" | head -1; pack
}
xl() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((8 * w)) 20 --fresh; }
[ -f nccl/libnccl.so.2.gz ] && gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
same() { python3 - "$R/$1.log.jsonl" "$R/$2.log.jsonl" "${3:-0}" <<'PY'
import json,sys
def rec(p): return {r['step']:(r['loss'],r.get('grad_norm')) for r in map(json.loads,open(p)) if r.get('type')=='train'}
a,b,lo=rec(sys.argv[1]),rec(sys.argv[2]),int(sys.argv[3])
common=sorted(s for s in a if s in b and s>lo)
diff=[s for s in common if a[s]!=b[s]]
print(f"{sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: {len(common)} steps after {lo}, {'ALL EQUAL' if not diff else 'differ from step %d: %s vs %s'%(diff[0],a[diff[0]],b[diff[0]])}")
PY
}
torch() {
  local t0=$(date +%s) par=${4:-fsdp2} w=${5:-4}
  timeout ${TTMO:-200} python3 -m torch.distributed.run --standalone --nproc_per_node $w anchors/torch_train_best.py "$D" $1 --dtype bf16 \
    --variant $2 --parallel $par --global-batch $((8 * w)) --steps $3 2> "$R/torch-$1-$2-$par-w$w.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $par $1 $2 world $w: $(( $(date +%s) - t0 )) s"; pack
}
traces() { python3 - "$R" "${1:-4}" <<'PY'
import json, sys
for l in open(f"{sys.argv[1]}/trace.jsonl"):
    r = json.loads(l)
    if r.get("bench") == "cupti-skew":
        print(r["label"], "waits in collectives (ms, by rank)", r["wait_ms"], "last to come", r["last_share"])
        continue
    print(r["label"], "period", r["period_ms"], "idle", r["idle_ms"], "kernels", r["kernels"], r["category_ms"])
    for g in r["gap_pairs"][:int(sys.argv[2])]:
        print("   ", g)
    if r.get("beside_nccl_ms"):
        print("    lost beside NCCL (ms)", r["beside_nccl_ms"])
        for b in r["beside_nccl"][:int(sys.argv[2])]:
            print("     ", b)
PY
}
ratios() { python3 - "$R" "$@" <<'PY'
import json, statistics, sys
def ms(n, g):
    t = [json.loads(l) for l in open(f"{sys.argv[1]}/{n}.log.jsonl") if '"train"' in l]
    return g * 128 / statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6) * 1e3
base = None
for arg in sys.argv[2:]:
    n, g = arg.split(":")
    try:
        a1, a4 = ms(f"{n}-a1", int(g)), ms(f"{n}-a4", 4 * int(g))
    except OSError:
        continue
    r = a4 / a1; base = base or r
    print(f"{n:12} accum 1 {a1:.2f} ms, accum 4 {a4:.2f} ms, ratio {r:.3f}, vs the first {100 * (r / base - 1):+.1f} %")
PY
}
tables() {
xl single 1 single
mv "$R/gemm-xl.json" "$R/gemm-plain.json"
xl single-hogtune 1 single MODEL_GEMM_TUNE_BESIDE=24
mv "$R/gemm-xl.json" "$R/gemm-hog.json"
python3 - "$R" <<'PY'
import json, sys
R = sys.argv[1]
plain, hog = (json.load(open(f"{R}/gemm-{t}.json")) for t in ("plain", "hog"))
key = lambda c: (c["m"], c["n"], c["k"], c["ta"], c["tb"], c["dtype"], c["add"])
h = {key(c): c["index"] for c in hog["choices"]}
fwd = lambda c: (not c["ta"]) and c["tb"]
mixed = dict(plain, choices=[dict(c, index=c["index"] if fwd(c) else h.get(key(c), c["index"])) for c in plain["choices"]])
json.dump(mixed, open(f"{R}/gemm-mixed.json", "w"), indent=1)
diff = [(key(c), c["index"], h.get(key(c))) for c in plain["choices"] if h.get(key(c)) != c["index"]]
print(f"{len(diff)} of {len(plain['choices'])} shapes chose otherwise beside the stand-in:")
for d in diff: print("  ", d, "forward" if (not d[0][3]) and d[0][4] else "backward")
PY
}
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,2))" "$R/$1.log.jsonl" "$2" "$3" 2>/dev/null; }
peak() { grep -h 'peak GPU' "$R/$1.txt" | sort | tail -1 | cut -c1-70; grep -h "error" "$R/$1.txt" | head -2 | cut -c1-200; }
torchc() { local t0=$(date +%s) m=$1 c=$2 v=${TV:-compile-blocks}; shift 2
  timeout 200 python3 anchors/torch_train_best.py "$D" $m --dtype bf16 \
    --variant $v --global-batch 8 --steps 6 --warmup-steps 2 --context $c "$@" 2> "$R/torch-$m-$c-$v.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $m $c $v: $(( $(date +%s) - t0 )) s"; grep -m1 -o "OutOfMemoryError[^.]*" "$R/torch-$m-$c-$v.err"; pack; }
for z in */bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
use() { [ -L bin ] && rm bin && mv bin-new bin; [ "$1" = new ] || { mv bin bin-new; ln -s "$1/bin" bin; }; }
profile1k() { local m=$1 v; shift; for v in "$@"; do use $v
  timeout 150 bin/bench profile --size $m --dtype bf16 --context 1024 --out "$R/profile-$m-$v.jsonl" --svg-dir "$R/svg" > "$R/profile-$m-$v.txt" 2>&1
  echo "profile $m $v rc=$?: $(sed -n 2p "$R/profile-$m-$v.txt")"; grep "attn/core" "$R/profile-$m-$v.txt" | head -2; grep "memory in use" "$R/profile-$m-$v.txt"
  rm -rf "$R/svg" "$R/profile-$m-$v.jsonl"; pack; done; use new; }
modelcheck() { local t0=$(date +%s); timeout 240 bin/bench model-check > "$R/model-check.txt" 2>&1
  echo "model-check rc=$? ($(( $(date +%s) - t0 )) s)"; grep -i "$1" "$R/model-check.txt" | cut -c1-200; pack; }
xl1k() { local v e; for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  ENVS="$e" train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"; done; }
capeager() { local m a; for m in captured eager; do
  a=""; [ $m = eager ] && a="--eager"
  train $1-$m /tmp/r-s $1 1 single 8 20 --fresh --context $2 $a > /dev/null; rm -rf /tmp/r-s; done
  same $1-captured $1-eager; }
sdpa() { cat > /tmp/sdpa.py <<'PY'
import sys, torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
n = int(sys.argv[1])
for shape in sys.argv[2:]:
    b, h, t, e = map(int, shape.split(","))
    q, k, v = (torch.randn(b, h, t, e, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(b, h, t, e, device="cuda", dtype=torch.bfloat16)
    res = {}
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        for what in ("fwd", "fwd+bwd"):
            ts = []
            for i in range(n):
                s, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                if what == "fwd+bwd":
                    torch.autograd.grad(y, (q, k, v), g)
                en.record(); torch.cuda.synchronize()
                if i >= 3: ts.append(s.elapsed_time(en))
            ts.sort(); res[what] = ts[len(ts) // 2] if ts else float("nan")
    f, bwd = 4 * b * h * t * t * e / 2, res["fwd+bwd"] - res["fwd"]
    print(f"sdpa flash b{b} h{h} t{t} e{e}: fwd {res['fwd']:.3f} ms ({f / res['fwd'] / 1e9:.0f} TFLOP/s), "
          f"bwd {bwd:.3f} ms ({2.5 * f / bwd / 1e9:.0f} TFLOP/s at 2.5x)")
PY
  python3 /tmp/sdpa.py "$@" 2>&1 | tee -a "$R/sdpa.txt"; }
NCU_M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
ncukern() { use $1; timeout 150 ncu --clock-control none --cache-control none --kernel-name regex:"$3" --launch-skip $4 --launch-count $5 \
  --metrics $NCU_M --csv --page raw bin/bench profile --size $2 --dtype bf16 --context 1024 --out /tmp/kp.jsonl --svg-dir /tmp/svg \
  > "$R/ncu-$1-$2-$6.csv" 2> "$R/ncu-$1-$2-$6.err"; echo "ncu $1 $2 $6 rc=$?"; use new; }
NCU="$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)"; [ -n "$NCU" ] || NCU=ncu
ncudur() { python3 - "$1" <<'PY'
import csv, io, sys
t = open(sys.argv[1]).read(); i = t.find('"ID"')
rows = list(csv.reader(io.StringIO(t[i:]))) if i >= 0 else []
if not rows: print("no rows"); sys.exit()
h, u = rows[0], rows[1]; k = h.index("gpu__time_duration.sum")
print(u[k], " ".join(r[k] for r in rows[2:]))
PY
}
ncusum() { python3 - "$R" <<'PY'
import csv, glob, io, sys
for f in sorted(glob.glob(sys.argv[1] + "/ncu-*.csv")):
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(f, "no rows"); continue
    rows = list(csv.reader(io.StringIO(txt[i:])))
    h, u = rows[0], dict(zip(rows[0], rows[1]))
    for r in rows[2:]:
        d = dict(zip(h, r))
        print(f.split("ncu-")[1][:-4], d["Kernel Name"][:24], *(f"{k.split('__')[1].split('.')[0]} {d.get(k)} {u.get(k, '')}"
              for k in ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct",
                        "dram__bytes_read.sum", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")))
PY
}
trace1() { OUT="$R/trace-$1" TRACE_MODEL=$2 TRACE_CONTEXT=$3 TRACE_STRATEGIES=single TRACE_KERNELS=1 TRACE_KEEP=1 \
    timeout ${TMO:-120} bash run.sh trace > /dev/null; echo "trace1 $1 rc=$?"; head -26 "$R/trace-$1/trace.txt"; pack; }
adamwcheck() { modelcheck "grouped\|AdamW\|fail\|error\|panic"
  xl t-1 1 single > /dev/null
  xl s1 1 single > /dev/null; xl s2 1 single > /dev/null; xl z1 1 zero1 > /dev/null
  for r in s1 s2 z1; do echo "$r: $(msc $r 8 128) ms; $(peak $r)"; done
  same s1 s2 0; same s1 z1 0; }
rows2() { local i; for i in $(seq 1 ${1:-2}); do
  bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
    --gemm-choices "$R/gemm-xl.json" --clip 1 --out "$R/bench.jsonl" > "$R/bench$i.txt" 2>&1
  python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print('bench single --clip 1:', {k: v for k, v in r.items() if 'ms' in k and not isinstance(v, list)})" "$R/bench.jsonl"
  xl single$i 1 single; xl zero1-$i 2 zero1; xl ddp$i 2 bucketed:25
done; same single1 single2 0; same zero1-1 zero1-2 0; same ddp1 ddp2 0; }
beside1k() { train $1 /tmp/r-b $2 1 single 8 $3 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b
  echo "$2 8x1024 captured: $(msc $1 8 1024) ms; $(peak $1)"; TV=$4 torchc $2 1024; }
smi() { nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader,nounits -lms 100 > "$R/smi-$1.csv" 2>/dev/null & SMI=$!; }
smistop() { kill $SMI 2>/dev/null; wait $SMI 2>/dev/null; python3 - "$R/smi-$1.csv" "$1" <<'PY'
import statistics, sys
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
busy = [r for r in rows if float(r[3]) > 600]
if not busy: print(sys.argv[2], f"no sample above 600 W of {len(rows)}"); sys.exit()
sm = sorted(float(r[1]) for r in busy); pw = sorted(float(r[3]) for r in busy)
print(f"{sys.argv[2]}: {len(busy)} of {len(rows)} samples above 600 W: SM clock median {statistics.median(sm):.0f} MHz "
      f"(p10 {sm[len(sm) // 10]:.0f}, p90 {sm[9 * len(sm) // 10]:.0f}), power median {statistics.median(pw):.0f} W, "
      f"throttle reasons {sorted({r[5].strip() for r in busy})}")
PY
pack; }
