#!/usr/bin/env bash
# Runs on the GPU machine, from the packed folder made by `cargo xtask gpu-pack`
# (bin/ holds the stripped CUDA binaries, anchors/ the PyTorch anchor).
#
#   bash .gpu/run.sh JOB...   JOB: check selftest faults allreduce allreduce-cpu allreduce-cpu-proc gloo anchor-allreduce
#                                  single single-tf32 mfu anchor-single anchor-best kernels model-check adamw-ref ddp-check ddp
#                                  ddp-ctas ddp-env ddp-carve contention anchor-ddp zero1 zero1-check anchor-zero
#                                  two-node profile trace train-parity train-speed full report ce-probe
#
# It sets NCCL_NVLS_ENABLE=0 (mandatory on the H200 machines), finds the CUDA 13 / NCCL
# libraries the binaries need (failing with the names of the missing ones), then runs the
# jobs. Results go to $OUT (or ./gpu-out): results.jsonl, torch.jsonl, report/.
# PACKED_NCCL (1): our binaries load the packed NCCL (.gpu/nccl) where there is one.
# SINGLE_ARGS: extra flags for bench single (e.g. "--graph false" for eager steps).
# CPU_RANKS (2,4) and CPU_MIB (1,10,100): the allreduce-cpu-proc and gloo jobs' sweep.
# train-parity: DTYPES (fp32 bf16), PARITY_STEPS (2000), PARITY_ARGS (train run flags).
# train-speed: CASES ("small:bf16 xl:bf16 xl:fp32"), TS_STEPS (40), TS_STRATEGIES
#   ("single bucketed:25"), TS_TORCH ("compile-ro"; "compile-ro compile" for both),
#   TS_TORCH_PARALLEL above world 1 ("ddp"; "ddp fsdp2" for both; FSDP2 runs TS_TORCH_FSDP2,
#   "compile-blocks"),
#   TS_WORLDS ("1"), TS_ACCUM ("1"; "1 4": also 4 micro-batches of 8 per GPU, --accum 4),
#   TS_TORCH_ACCUM (the PyTorch trainer's; TS_ACCUM's unless set), TS_TORCH_WORLDS (the
#   PyTorch trainer's world sizes; TS_WORLDS's unless set), TS_BATCH (rows of 128
#   tokens per GPU and micro-batch, 8).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# BIN and ANCHORS: the packed folder's, unless set (`cargo xtask bench` runs train-speed
# from the repository with target/release and scripts/anchors).
BIN="${BIN:-$HERE/bin}"
ANCHORS="${ANCHORS:-$HERE/anchors}"
RES="${OUT:-$PWD/gpu-out}"
mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"

# gpu-pack compresses the binaries (the device tool's 64 MiB carry limit): unpack them once.
for z in "$BIN"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done

# ---- find the shared libraries --------------------------------------------------------
DIRS=()
GPU_LIB_DIRS="${GPU_LIB_DIRS:-}"
for d in ${GPU_LIB_DIRS//:/ } /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
         /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [ -d "$d" ] && DIRS+=("$d")
done
for nv in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
  for d in "$nv"/cu13/lib "$nv"/nccl/lib "$nv"/*/lib; do [ -d "$d" ] && DIRS+=("$d"); done
done
LDP="${LD_LIBRARY_PATH:-}"
missing_of() { LD_LIBRARY_PATH="$LDP" ldd "$1" 2>/dev/null | awk '/=> not found/{print $1}' | sort -u; }
for b in "$BIN"/*; do
  for so in $(missing_of "$b"); do
    for d in "${DIRS[@]}"; do
      if [ -e "$d/$so" ]; then LDP="$d${LDP:+:$LDP}"; break; fi
    done
  done
  left="$(missing_of "$b")"
  if [ -n "$left" ]; then
    echo "FATAL: $(basename "$b") needs shared libraries that are not on this machine: $(echo $left)"
    echo "  searched: ${DIRS[*]}"
    case "$left" in *libcuda.so.1*) echo "  libcuda.so.1 is the NVIDIA driver: is this a GPU machine?";; esac
    exit 2
  fi
done
export LD_LIBRARY_PATH="$LDP"
# NCCL: our binaries load the one `cargo xtask gpu-pack` packed (target/nccl, from
# scripts/gpu/build-nccl.sh), where it did (PACKED_NCCL=0: the machine's); PyTorch keeps its
# own (`torch_env`). `train`'s records name the one loaded (`nccl`).
TORCH_LDP="$LDP"
PACKED=0  # 1 once our binaries load the packed NCCL
if [ "${PACKED_NCCL:-1}" = 1 ] && [ -e "$HERE/nccl/libnccl.so.2.gz" ]; then
  gunzip -kf "$HERE/nccl/libnccl.so.2.gz" && export LD_LIBRARY_PATH="$HERE/nccl:$LDP" && PACKED=1
fi
torch_env() { LD_LIBRARY_PATH="$TORCH_LDP" "$@"; }
# A check script may source this file for BIN, RES and the libraries alone, running no job.
[ "${RUN_SH_SOURCED:-0}" = 1 ] && return 0

# The PyTorch anchor (run_torch.sh overwrites its output file): its lines are appended
# to $RES/torch.jsonl and shown.
anchor() {
  local tmp; tmp="$(mktemp -d)"
  OUT="$tmp" torch_env bash "$HERE/anchors/run_torch.sh" "$@" > /dev/null
  grep '^{' "$tmp/torch.jsonl" | tee -a "$RES/torch.jsonl"
}

# Runs "$@" as ranks 0 and 1 of two emulated single-GPU nodes (see the two-node job); shows
# rank 0's output and the transport NCCL chose.
two_node() {
  local port=$1 pids=() rc=0 r; shift
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@" > "$RES/node$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  grep -v "NCCL INFO" "$RES/node0.log"
  grep -m4 -E "Using network|via NET|NET/Socket : Using" "$RES/node0.log"
  [ $rc = 0 ] || tail -20 "$RES/node1.log"
  rm -f "$RES/node0.log" "$RES/node1.log"
  return $rc
}

# The train-parity and train-speed jobs (job_train_parity, job_train_speed).
# shellcheck source=train-jobs.sh
source "$HERE/train-jobs.sh"

job() {
  echo; echo "=== $1 ($(date -u +%T))"
  case "$1" in
    check)
      nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | sed 's/^/driver /'
      echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
      ldd "$BIN/bench" | grep -E 'cuda|nccl|cublas|curand' ;;
    selftest)
      # Then with the gathers into gather buffers on the copy engines (comm::nccl::ce, by
      # default at world 2 only), where the packed NCCL (2.28.9, with windows) is loaded.
      local g; g=$(nvidia-smi -L | wc -l)
      "$BIN/comm-launch" --nproc-per-node "$g" -- "$BIN/comm-selftest" &&
      COMM_CHECK_SHAPES=1 "$BIN/comm-launch" --nproc-per-node "$g" -- "$BIN/comm-selftest" &&
      if [ "$PACKED" = 1 ]; then
        COMM_CE_GATHER=1 "$BIN/comm-launch" --nproc-per-node "$g" -- "$BIN/comm-selftest"
      fi ;;
    faults)
      # A rank that never arrives: rank 0 of 2 alone must fail naming rank 1.
      local t0=$SECONDS
      RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 COMM_TIMEOUT_S=5 timeout 60 "$BIN/comm-selftest"
      echo "missing rank: exit $? after $((SECONDS - t0)) s (want non-zero, ~5 s)"
      # A rank that dies after NCCL init, no launcher to stop the other: the watchdog must.
      t0=$SECONDS
      RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29612 COMM_TIMEOUT_S=10 "$BIN/comm-selftest" --die-after-init &
      RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29612 COMM_TIMEOUT_S=10 timeout 120 "$BIN/comm-selftest"
      echo "dead peer: exit $? after $((SECONDS - t0)) s (want non-zero, <= ~10 s after init)"; wait
      # The launcher: one failing rank stops the rest.
      t0=$SECONDS
      "$BIN/comm-launch" --nproc-per-node 2 -- bash -c 'if [ $RANK = 1 ]; then exit 7; fi; sleep 100'
      echo "launcher: exit $? after $((SECONDS - t0)) s (want non-zero, ~0 s)" ;;
    single)
      "$BIN/bench" single --size ${SIZES:-small,medium,large,xl,2.7B} --dtype fp32,bf16 --mode step --out "$RES/results.jsonl" ${SINGLE_ARGS:-} ;;
    mfu)
      # Forward plus backward alone (no AdamW), replayed as a graph, at batch 32: the MFU
      # bar of issue 23 (DTYPES, default bf16; SIZES, default xl).
      "$BIN/bench" single --size ${SIZES:-xl} --dtype ${DTYPES:-bf16} --batch 32 --mode fwd-bwd --out "$RES/results.jsonl" ${SINGLE_ARGS:-} ;;
    single-tf32)
      # fp32 GEMMs on TF32 tensor cores (opt in), against TF32=1 anchor-best.
      "$BIN/bench" single --size ${SIZES:-xl} --dtype fp32 --tf32 --mode step --out "$RES/results.jsonl" ${SINGLE_ARGS:-} ;;
    anchor-single)
      SIZES="${SIZES:-small,medium,large,xl,2.7B}" anchor single ;;
    anchor-best)
      # The strongest PyTorch for this LM (SDPA, fused AdamW, torch.compile default and
      # CUDA-graph modes; 60-120 s of compiling per size, dtype and variant). TF32=1 for
      # the TF32 comparison; VARIANTS=eager,compile,compile-ro, DTYPES=fp32,bf16.
      SIZES="${SIZES:-xl,2.7B}" VARIANTS="${VARIANTS:-compile-ro}" anchor best ;;
    kernels)
      # Per-kernel time and DRAM traffic of the last replay of the whole step (Nsight
      # Compute, clocks not locked, each kernel measured alone): JSON lines appended to
      # results.jsonl (bench "kernels"; the report's per-kernel table), a table shown.
      local ncu rc=0; ncu="$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)"
      [ -n "$ncu" ] || ncu="$(command -v ncu)"
      [ -n "$ncu" ] || { echo "no ncu on this machine"; return 2; }
      local m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
      "$ncu" --clock-control none --metrics "$m" --log-file "$RES/ncu.log" --export "$RES/kernels" -f \
        "$BIN/bench" single --size ${SIZES:-xl} --dtype ${DTYPES:-bf16} --mode step --warmup 2 --steps 1 \
        --batch ${BATCH:-8} --out "$RES/kernels-single.jsonl" > /dev/null || rc=1
      "$ncu" --import "$RES/kernels.ncu-rep" --csv --page raw --metrics "$m" > "$RES/ncu.csv" || rc=1
      python3 "$HERE/ncu_kernels.py" "$RES/ncu.csv" "$RES/kernels-single.jsonl" >> "$RES/results.jsonl" || rc=1
      rm -f "$RES/kernels.ncu-rep" "$RES/ncu.csv"; tail -3 "$RES/ncu.log"; return $rc ;;
    rmsnorm)
      "$BIN/bench" rmsnorm --out "$RES/results.jsonl" ;;
    model-check)
      "$BIN/bench" model-check ;;
    adamw-ref)
      torch_env python3 "$HERE/anchors/adamw_ref.py" ;;
    ce-probe)
      # What GEMMs lose beside copy-engine and NCCL collectives (PyTorch, one process on
      # every GPU here; scripts/gpu/checks/ce-probe.py): JSON lines into ce-probe.jsonl, a
      # table on stdout.
      local rc=0; torch_env python3 "$HERE/ce-probe.py" > "$RES/ce-probe.txt" || rc=1
      grep '^{' "$RES/ce-probe.txt" >> "$RES/ce-probe.jsonl"; grep -v '^{' "$RES/ce-probe.txt"; return $rc ;;
    allreduce)
      "$BIN/bench" allreduce --backend nccl --out "$RES/results.jsonl" ${ALLREDUCE_ARGS:-} ;;
    allreduce-cpu)
      # The in-process CPU backend (threads of one process).
      "$BIN/bench" allreduce --backend cpu --threads --ranks 2,4 --sizes-mib 0.5,1,10,50,100 --warmup 2 --iters 5 --out "$RES/results.jsonl" ;;
    allreduce-cpu-proc)
      # The multi-process CPU backend: ranks as processes over loopback TCP, the seeds'
      # Gloo setting (records "cpu-proc"; run `gloo` in the same call to compare).
      "$BIN/bench" allreduce --backend cpu --ranks "${CPU_RANKS:-2,4}" --sizes-mib "${CPU_MIB:-1,10,100}" --warmup 2 --iters 10 --out "$RES/results.jsonl" ;;
    gloo)
      # PyTorch Gloo all-reduce, one process per rank (scripts/anchors/run_torch.sh gloo):
      # records {"mode":"allreduce","backend":"gloo",...} in torch.jsonl.
      RANKS="${CPU_RANKS:-2,4}" GLOO_MIB="${CPU_MIB:-1,10,100}" anchor gloo ;;
    anchor-allreduce)
      anchor allreduce ;;
    ddp-check)
      # NCCL DDP against single-process training, every strategy; bf16 gradients looser.
      local n rc=0; n="$(nvidia-smi -L | wc -l)"
      for m in toy tiny; do for s in naive flat overlap bucketed:0.01 bucketed:25; do
        "$BIN/comm-launch" --nproc-per-node "$n" -- "$BIN/bench" ddp-check --backend nccl --model $m --strategy $s 2>&1 | grep '^\[rank 0\] check' || rc=1
      done; done
      for s in overlap bucketed:0.01; do   # coalesced launches: one NCCL group per stage
        "$BIN/comm-launch" --nproc-per-node "$n" -- "$BIN/bench" ddp-check --backend nccl --model tiny --strategy $s --coalesce 2>&1 | grep '^\[rank 0\] check' || rc=1
      done
      "$BIN/comm-launch" --nproc-per-node "$n" -- "$BIN/bench" ddp-check --backend nccl --model tiny --strategy bucketed:25 --bf16-grads 2>&1 | grep '^\[rank 0\] check' || rc=1
      # Different global batch: indivisible must fail on every rank with a clear error.
      "$BIN/comm-launch" --nproc-per-node "$n" -- "$BIN/bench" ddp-check --backend nccl --model toy --global-batch 7 2>&1 | grep -m2 error
      return $rc ;;
    ddp)
      "$BIN/bench" ddp --backend nccl --ranks "$(nvidia-smi -L | wc -l)" --size ${SIZES:-xl} --dtype ${DTYPES:-fp32,bf16} \
        --strategies ${STRATEGIES:-naive,flat,overlap,bucketed} --trace-dir "$RES/traces" --out "$RES/results.jsonl" ${DDP_ARGS:-}
      local rc=$?; tar czf "$RES/traces-${SIZES:-xl}.tgz" -C "$RES" traces && rm -r "$RES/traces"; return $rc ;;
    ddp-ctas)
      # The same benchmark with NCCL limited to $CTAS CTAs (SMs) per collective, apart.
      NCCL_MAX_CTAS=${CTAS:-8} "$BIN/bench" ddp --backend nccl --ranks "$(nvidia-smi -L | wc -l)" --size ${SIZES:-xl} \
        --dtype ${DTYPES:-fp32,bf16} --strategies ${STRATEGIES:-overlap,bucketed} --buckets-mb ${BUCKETS:-1,1000} \
        --out "$RES/ddp-ctas${CTAS:-8}.jsonl" ${DDP_ARGS:-} ;;
    ddp-env)
      # The DDP benchmark once per NCCL setting in $NCCL_ENVS (';'-separated; "default" =
      # none), each into ddp-env-<setting>.jsonl: how NCCL's SM/CTA use slows the backward.
      local e rc=0 envs
      IFS=';' read -r -a envs <<< "${NCCL_ENVS:-default;NCCL_CTA_POLICY=1;NCCL_MAX_CTAS=4;NCCL_MAX_CTAS=2;NCCL_PROTO=Simple}"
      for e in "${envs[@]}"; do
        echo "--- $e"
        # NCCL's ENV log says whether it took the setting ("... set by environment to ..."),
        # its INIT log how many channels (one CTA each per collective) it set up.
        env $([ "$e" = default ] || echo "$e") NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV,INIT "$BIN/bench" ddp --backend nccl \
          --ranks "$(nvidia-smi -L | wc -l)" --size ${SIZES:-xl} --dtype ${DTYPES:-fp32} --strategies ${STRATEGIES:-bucketed} \
          --buckets-mb ${BUCKETS:-1} --out "$RES/ddp-env-${e//[^A-Za-z0-9]/_}.jsonl" ${DDP_ARGS:-} > "$RES/ddp-env.log" 2>&1 || rc=1
        grep -v "NCCL INFO" "$RES/ddp-env.log"
        grep -E "set by environment|coll channels" "$RES/ddp-env.log" | sed 's/.*NCCL INFO //' | sort -u
      done
      rm -f "$RES/ddp-env.log"
      return $rc ;;
    ddp-carve)
      # The backward's GEMMs planned for all SMs but $CARVEOUTS (cublasSetSmCountTarget),
      # so NCCL's kernels beside them do not leave a GEMM a last wave on a few SMs; then the
      # fp32 model with bf16 gradients on the wire (a compression hook, reported apart).
      # On one GPU (--ranks 1) it measures what the carve-out costs with no NCCL beside it.
      local n rc=0; n="$(nvidia-smi -L | wc -l)"
      "$BIN/bench" ddp --backend nccl --ranks "$n" --size ${SIZES:-xl} --dtype ${DTYPES:-fp32} \
        --strategies ${STRATEGIES:-bucketed} --buckets-mb ${BUCKETS:-1,25} --sm-carveout ${CARVEOUTS:-0,8,16,24,32} \
        --out "$RES/ddp-carve.jsonl" ${DDP_ARGS:-} || rc=1
      [ "$n" -gt 1 ] && { "$BIN/bench" ddp --backend nccl --ranks "$n" --size ${SIZES:-xl} --dtype fp32 --grads bf16 \
        --strategies bucketed --buckets-mb ${BUCKETS:-1,25} --out "$RES/ddp-carve.jsonl" ${DDP_ARGS:-} || rc=1; }
      return $rc ;;
    contention)
      # One GPU: the backward while a kernel beside it holds $HOGS SMs (spin) or copies memory
      # on them (stream), as NCCL's kernels do, with cuBLAS's GEMMs planned for all SMs but $CARVEOUTS.
      "$BIN/bench" contention --size ${SIZES:-xl} --dtype ${DTYPES:-fp32,bf16} --hog ${HOG_KINDS:-spin,stream} --hog-sms ${HOGS:-0,8,16,24,32} \
        --sm-carveout ${CARVEOUTS:-0,8,16,24,32} --out "$RES/contention.jsonl" ;;
    anchor-ddp)
      SIZES="${SIZES:-xl}" anchor ddp ;;
    zero1)
      "$BIN/bench" zero1 --backend nccl --ranks "$(nvidia-smi -L | wc -l)" --size ${SIZES:-xl} \
        --bucket-mb ${BUCKET_MB:-25} --out "$RES/results.jsonl" ${ZERO_ARGS:-} ;;
    zero1-check)
      # ZeRO-1 checkpoints on NCCL: save, resume with other buckets, same trajectory.
      "$BIN/bench" zero1-check --backend nccl --ranks "$(nvidia-smi -L | wc -l)" --dir "$RES/zero1-ckpt"
      local rc=$?; rm -rf "$RES/zero1-ckpt"; return $rc ;;
    anchor-zero)
      anchor zero ;;
    profile)
      # GPU time and memory per component of one step; SVGs (flame graphs, memory
      # timelines) come back as profile.tgz.
      "$BIN/bench" profile --size ${SIZES:-xl,2.7B} --dtype ${DTYPES:-fp32,bf16} --mode fwd,step \
        --out "$RES/profile.jsonl" --svg-dir "$RES/profile"
      local rc=$?; tar czf "$RES/profile.tgz" -C "$RES" profile && rm -r "$RES/profile"; return $rc ;;
    trace)
      # Where one replay of `train run`'s step goes (scripts/cupti: CUPTI's kernel records,
      # captured graphs included): TRACE_MODEL (xl) bf16, TRACE_BATCH (8) x 128 per GPU, clipping at 1.0,
      # each strategy of TRACE_STRATEGIES ("single" at world 1, "zero1 bucketed:25" at
      # TRACE_WORLD, 2), 20 steps, TRACE_ACCUM (1) micro-batches, sequences of TRACE_CONTEXT
      # (128) tokens; per process its median replay and timeline go to trace.txt
      # (trace.jsonl: the same as JSON lines), with TRACE_KERNELS=1 every kernel's time a replay;
      # TRACE_KEEP=1 keeps each run's raw records as trace-<strategy>-a<accum>.csv.gz. Above
      # world 1 summarize.py also writes each rank's waits in its collectives (cupti-skew).
      [ -e "$HERE/cupti/libtrace.so" ] || { echo "trace: no cupti/ in the packed folder (cargo xtask gpu-pack builds it)"; return 2; }
      local p="$RES/trace" st w rc=0; mkdir -p "$p"
      "$BIN/train" prepare --data "$p/data" > "$p/prepare.txt" 2>&1 || { cat "$p/prepare.txt"; return 1; }
      local a="${TRACE_ACCUM:-1}"
      for st in ${TRACE_STRATEGIES:-single zero1 bucketed:25}; do
        w="${TRACE_WORLD:-2}"; [ "$st" = single ] && w=1
        local launch=() one=(--world 1) d="$p/${st%%:*}"; rm -rf "$d" "$p/run"; mkdir -p "$d"
        [ "$w" -gt 1 ] && launch=("$BIN/comm-launch" --nproc-per-node "$w" --) && one=()
        echo "--- trace: ${TRACE_MODEL:-xl} bf16, ${TRACE_BATCH:-8} x ${TRACE_CONTEXT:-128} a GPU, --strategy $st, world $w, accum $a ($(date -u +%T))"
        CUDA_INJECTION64_PATH="$HERE/cupti/libtrace.so" LD_LIBRARY_PATH="$HERE/cupti:${LD_LIBRARY_PATH:-}" CUPTI_TRACE_DIR="$d" \
          "${launch[@]}" "$BIN/train" run --data "$p/data" --out "$p/run" --model "${TRACE_MODEL:-xl}" --bf16 --global-batch $((${TRACE_BATCH:-8} * w * a)) --accum "$a" \
          --steps 100000 --stop-after 20 --eval-every 100000 --ckpt-every 100000 --strategy "$st" --backend nccl "${one[@]}" \
          --context "${TRACE_CONTEXT:-128}" --fresh --no-progress > "$d.txt" 2>&1 || { tail -5 "$d.txt"; rc=1; continue; }
        grep -h "peak GPU" "$d.txt" | head -1 | tee -a "$RES/trace.txt"
        python3 "$HERE/cupti/summarize.py" "$d" --skip 5 --label "$st-w$w-a$a-b${TRACE_BATCH:-8}" --timeline \
          $([ "${TRACE_KERNELS:-0}" = 1 ] && echo --kernels) > "$d.summary" || rc=1
        grep '^{' "$d.summary" >> "$RES/trace.jsonl"; grep -v '^{' "$d.summary" | tee -a "$RES/trace.txt"
        [ "${TRACE_KEEP:-0}" = 1 ] && cat "$d"/trace-*.csv | gzip > "$RES/trace-${st%%:*}-a$a.csv.gz"
        rm -rf "$d" "$p/run"
      done
      rm -rf "$p/data"; return $rc ;;
    two-node)
      # "2 nodes x 1 GPU" on one machine: one process per GPU that sees only its own GPU
      # (CUDA_VISIBLE_DEVICES, LOCAL_RANK=0, as on two hosts), NCCL held to its network
      # transport (no P2P/NVLink, no shared memory; sockets over loopback), rendezvous through
      # the TCP store at MASTER_ADDR:MASTER_PORT. Records go to two-node.jsonl.
      local rc=0
      two_node 29621 "$BIN/bench" allreduce --backend nccl --ranks 2 --out "$RES/two-node.jsonl" ${ALLREDUCE_ARGS:-} || rc=1
      two_node 29622 "$BIN/bench" ddp --backend nccl --ranks 2 --size ${SIZES:-xl} --dtype ${DTYPES:-fp32} \
        --strategies ${STRATEGIES:-bucketed} --buckets-mb ${BUCKETS:-25} --warmup 1 --steps 3 --out "$RES/two-node.jsonl" || rc=1
      return $rc ;;
    train-parity) job_train_parity ;;
    train-speed) job_train_speed ;;
    full)
      # `cargo xtask bench --gpus N` for this machine: every run xtask would make (the list
      # gpu-pack wrote for N GPUs), the PyTorch anchors, `train run`'s speed beside the
      # PyTorch trainer (train-speed: train-speed-N.tsv's cases), then the report
      # (report.tgz). On one GPU there is no all-reduce (the report says why). FULL_CASES:
      # train-speed's cases ("xl:bf16").
      local n rc=0 line parts; n="$(nvidia-smi -L | wc -l)"
      [ -f "$HERE/bench-runs-$n.tsv" ] || { echo "no bench-runs-$n.tsv: packed for 1, 2, 4, 8 GPUs"; return 2; }
      while IFS= read -r line; do
        local args=(); IFS=$'\t' read -r -a args <<< "${line//\$RES/$RES}"
        echo "--- $(date -u +%T) bench ${args[*]}"
        "$BIN/bench" "${args[@]}" || rc=1
      done < "$HERE/bench-runs-$n.tsv"
      parts="allreduce single best ddp zero"; [ "$n" -eq 1 ] && parts="single best ddp zero"
      # shellcheck disable=SC2086
      SIZES=xl VARIANTS=compile-ro anchor $parts > /dev/null || rc=1
      # train-speed's cases as `cargo xtask bench` runs them (xtask/src/bench_plan.rs):
      # rows a GPU, worlds, strategies, PyTorch's trainers above world 1, tab-separated.
      local b w st tp
      while IFS=$'\t' read -r -u 3 b w st tp; do
        CASES="${FULL_CASES:-xl:bf16}" TS_BATCH="$b" TS_WORLDS="$w" TS_STRATEGIES="$st" TS_TORCH_PARALLEL="$tp" job train-speed || rc=1
      done 3< "$HERE/train-speed-$n.tsv"   # fd 3: the runs inside must not read the list
      local torch=(); [ -f "$RES/torch.jsonl" ] && torch=(--torch "$RES/torch.jsonl")
      "$BIN/bench" report --results "$RES/results.jsonl" ${torch[@]+"${torch[@]}"} \
        --isoflops "$HERE/isoflops_curves.json" --out "$RES/report" || rc=1
      [ -d "$RES/traces" ] && mv "$RES/traces" "$RES/report/traces"
      [ -d "$RES/profile" ] && mv "$RES/profile" "$RES/report/profile"
      tar czf "$RES/report.tgz" -C "$RES" report && rm -r "$RES/report"; return $rc ;;
    report)
      # The anchor's lines when it ran (bench report refuses a --torch file that is absent).
      local torch=(); [ -f "$RES/torch.jsonl" ] && torch=(--torch "$RES/torch.jsonl")
      "$BIN/bench" report --results "$RES/results.jsonl" ${torch[@]+"${torch[@]}"} --isoflops "$HERE/isoflops_curves.json" --out "$RES/report" && cat "$RES/report/report.md" ;;
    *) echo "unknown job $1"; return 2 ;;
  esac
}
[ $# -eq 0 ] && set -- check allreduce anchor-allreduce report
RC=0
for j in "$@"; do job "$j" || { echo "=== job $j FAILED"; RC=1; }; done
exit $RC
