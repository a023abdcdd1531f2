#!/usr/bin/env bash
# run.sh's two `train` jobs, sourced by it: train-parity (ours against the PyTorch trainer
# from the same weights, loss by loss) and train-speed (`train run`'s step beside `bench
# single` and the PyTorch trainer). They use run.sh's BIN, ANCHORS, RES and torch_env; the
# variables each reads are listed in run.sh's head.

job_train_parity() {
  # Issue 26 part 4: ours (train run, one GPU, no launcher) and the PyTorch trainer
  # (anchors/torch_train.py) from the same initial weights, windows, schedule and
  # clipping, on the embedded corpus; train compare lines the logs up. Per dtype in
  # $RES/parity/DTYPE/: ours.jsonl, torch.jsonl, compare.json, compare.svg, the logs
  # (ours.txt, torch.txt) and ours' config.json; the 0.5 GB init and the checkpoints
  # are removed. The table last. Bar: mean |Δ train| over the last 200 steps and every
  # |Δ val| <= 0.02 (fp32), 0.05 (bf16). Estimated (not measured) on an H200 from the
  # single-GPU step times at batch 8: ours ~30 ms (fp32) and ~15 ms (bf16) a step, eager
  # torch ~50-60 ms, so about 5-6 minutes for both dtypes with the init and checkpoints.
  local p="$RES/parity" dt d rc=0 steps="${PARITY_STEPS:-2000}" dts="${DTYPES:-fp32 bf16}"
  local args="${PARITY_ARGS:---model small --global-batch 8 --lr 1e-3 --min-lr 1e-4 --warmup 100 --eval-every 100}"
  mkdir -p "$p"
  "$BIN/train" prepare --data "$p/data" || return 1
  for dt in ${dts//,/ }; do
    d="$p/$dt"; rm -rf "$d"; mkdir -p "$d"
    local big=("$d/run/init.safetensors" "$d/run/checkpoints")   # 0.5 and 1.5 GB
    echo "--- $dt: ours ($(date -u +%T))"
    "$BIN/train" run --data "$p/data" --out "$d/run" --strategy single --backend nccl --world 1 \
      --steps "$steps" --ckpt-every "$steps" --keep 1 --export-init --fresh --no-progress \
      $([ "$dt" = bf16 ] && echo --bf16) $args > "$d/ours.txt" 2>&1 || { tail -5 "$d/ours.txt"; rm -rf "${big[@]}"; rc=1; continue; }
    grep -m1 "^trained" "$d/ours.txt"
    echo "--- $dt: torch ($(date -u +%T))"
    torch_env python3 "$ANCHORS/torch_train.py" --data "$p/data" --run "$d/run" --out "$d/torch.jsonl" \
      --device cuda > "$d/torch.txt" 2>&1 || { tail -5 "$d/torch.txt"; rm -rf "${big[@]}"; rc=1; continue; }
    tail -1 "$d/torch.txt"
    cp "$d/run/log.jsonl" "$d/ours.jsonl"; cp "$d/run/config.json" "$d/config.json"
    rm -rf "$d/run"
    "$BIN/train" compare "$d/ours.jsonl" "$d/torch.jsonl" --out "$d" --last 200 || rc=1
  done
  rm -rf "$p/data"
  python3 - "$p" ${dts//,/ } <<'PY' || rc=1
import json, os, sys
f = lambda x: "-" if x is None else f"{x:.4f}"
print(f"{'dtype':6} {'steps':>5} {'ours train':>10} {'ours val':>9} {'torch train':>11} {'torch val':>9} "
      f"{'mean|Δ|200':>10} {'max|Δval|':>9} {'ours s':>7} {'torch s':>7}")
for dt in sys.argv[2:]:
    try:
        c = json.load(open(os.path.join(sys.argv[1], dt, "compare.json")))
    except OSError:
        print(f"{dt:6} (no comparison)"); continue
    a, b = c["a"], c["b"]
    print(f"{dt:6} {c['common_steps']:>5} {f(a['final_train_loss']):>10} {f(a['final_val_loss']):>9} "
          f"{f(b['final_train_loss']):>11} {f(b['final_val_loss']):>9} {c['mean_abs_train_last']:>10.2e} "
          f"{c['max_abs_val'] if c['max_abs_val'] is not None else float('nan'):>9.2e} {a['seconds'] or 0:>7.1f} {b['seconds'] or 0:>7.1f}")
PY
  return $rc
}

job_train_speed() {
  # Issue 33's bar: per size:dtype, the step users run, batch 8 x 128 per GPU, all in
  # this call: bench single on the same model (the data's vocabulary, the first train
  # run's GEMM table; the step without clipping, then with clipping at 1.0),
  # `train run` (each strategy of TS_STRATEGIES over NCCL at each world size of
  # TS_WORLDS, default 1; above 1 under comm-launch, every strategy but single;
  # clipping at 1.0, the default; the median of steps 6 on from its log), and the
  # PyTorch trainer (anchors/torch_train_best.py, TS_TORCH variants; above world 1 DDP
  # under torchrun). `train` records go to results.jsonl as {"bench":"train",...}; a
  # table last.
  local p="$RES/train-speed" c size dt rc=0 st v w steps="${TS_STEPS:-40}" ngpu b="${TS_BATCH:-8}"
  case "$b" in ''|0*|*[!0-9]*) echo "train-speed: TS_BATCH: '$b' is not a number of rows (8, 32, ...)"; return 2 ;; esac
  ngpu="$(nvidia-smi -L | wc -l)"
  for w in ${TS_WORLDS:-1}; do
    case "$w" in ''|0*|*[!0-9]*) echo "train-speed: TS_WORLDS: '$w' is not a world size (1, 2, ...)"; return 2 ;; esac
  done
  mkdir -p "$p"
  "$BIN/train" prepare --data "$p/data" > "$p/prepare.txt" 2>&1 || { cat "$p/prepare.txt"; return 1; }
  # bench single times the model train runs: the data's vocabulary, not the size's.
  local vocab; vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$p/data/meta.json")" || return 1
  for c in ${CASES:-small:bf16 xl:bf16 xl:fp32}; do
    size="${c%%:*}"; dt="${c##*:}"
    # One GEMM table for every process of the case: the first train run times its
    # GEMMs, and the other runs and bench single compute with its table (each process
    # timing its own moved xl fp32 by up to 2.7 ms; call 35).
    local table="$p/gemm-$size-$dt.json" tflag=(); rm -f "$table"
    for w in ${TS_WORLDS:-1}; do
      [ "$w" -gt "$ngpu" ] && { echo "train-speed: world $w asked for, $ngpu GPUs here"; rc=1; continue; }
      # One process is one GPU without a launcher; more run under comm-launch.
      local launch=() one=(--world 1)
      [ "$w" -gt 1 ] && launch=("$BIN/comm-launch" --nproc-per-node "$w" --) && one=()
      for st in ${TS_STRATEGIES:-single bucketed:25}; do
        [ "$w" -gt 1 ] && [ "$st" = single ] && continue
        for a in ${TS_ACCUM:-1}; do
        echo "--- $size $dt: train run --strategy $st, world $w, accum $a ($(date -u +%T))"
        local d="$p/run-$size-$dt-${st%%:*}-w$w-a$a"; rm -rf "$d"
        "${launch[@]}" "$BIN/train" run --data "$p/data" --out "$d" --model "$size" $([ "$dt" = bf16 ] && echo --bf16) \
          --global-batch $((b * w * a)) --accum "$a" --steps 100000 --stop-after "$steps" --eval-every 100000 --ckpt-every 100000 \
          --strategy "$st" --backend nccl "${one[@]}" --fresh --no-progress "${tflag[@]}" > "$d.txt" 2>&1 || { tail -5 "$d.txt"; rc=1; continue; }
        [ ${#tflag[@]} -eq 0 ] && cp "$d/gemm-choices.json" "$table" && tflag=(--gemm-choices "$table")
        python3 - "$d" "$size" "$dt" "$st" "$d.txt" "$p/data/meta.json" "$w" "$a" "$b" >> "$RES/results.jsonl" <<'PY' || rc=1
import json, re, statistics, sys
d, size, dt, st, txt, meta, w, a, b = sys.argv[1:]
w, a, b = int(w), int(a), int(b)
recs = [json.loads(l) for l in open(d + "/log.jsonl") if '"train"' in l]
# tokens_per_s counts the global batch: b windows of 128 tokens per rank and micro-batch.
tps = [r["tokens_per_s"] for r in recs if r["step"] >= 6]
m = statistics.median(tps)
# Under comm-launch each line carries a "[rank r] " prefix; rank 0's is the run's.
how = [l.strip() for l in (re.sub(r"^\[rank 0\] ", "", l) for l in open(txt)) if l.startswith("train: step:")]
line = how[0] if how else ""
print(json.dumps({"bench": "train", "size": size, "dtype": dt, "strategy": st, "world": w,
    "batch": b, "accum": a, "global_batch": b * w * a, "seq": 128, "vocab": json.load(open(meta))["vocab_size"], "steps": len(tps),
    "step_ms": b * w * a * 128 / m * 1e3, "tokens_per_s": m,
    "graph": line.startswith("train: step: one CUDA graph"),
    "adamw": line.split("AdamW ")[-1].split(";")[0] if line else None,
    "norm": line.split("; norm ")[-1].split(";")[0] if "; norm " in line else None,
    "validation_graph": "validation: one CUDA graph" in line,
    "graph_kernels": int(line.split(" kernels")[0].split()[-1]) if " kernels;" in line else None,
    "how": line, "loss_last": recs[-1]["loss"],
    "nccl": (re.search(r"; NCCL ([\d.]+)", line) or [None, None])[1],
    # Each rank's "train: peak GPU memory X GiB" (tensors and graphs), by rank.
    "peak_gib": [float(g) for _, g in sorted((int(m.group(1) or 0), m.group(2)) for m in
                 (re.match(r"^(?:\[rank (\d+)\] )?train: peak GPU memory ([\d.]+) GiB", l) for l in open(txt)) if m)],
    # And its peak after the first (eager) step, where the line has it.
    "peak_after_first_gib": [float(g) for _, g in sorted((int(m.group(1) or 0), m.group(2)) for m in
                 (re.match(r"^(?:\[rank (\d+)\] )?train: peak GPU memory .*after the first step ([\d.]+) GiB", l) for l in open(txt)) if m)],
    "gemm_table": "own" if "GEMM algorithms:" not in open(txt).read() else "the case's first run's"}))
PY
        tail -1 "$RES/results.jsonl"; rm -rf "$d"
        done
      done
    done
    # bench single times the window train run's median covers: 5 warm-up steps, then
    # steps 6 on. Shorter windows (its default, 10 after 3) end before a power-capped
    # GPU's clock settles and read up to 2 % fast at xl (call 53, nvidia-h200).
    local win=(--warmup 5 --steps $((steps > 6 ? steps - 5 : 1)))
    echo "--- $size $dt: bench single, vocabulary $vocab, ${win[*]}, ${tflag[*]:-own GEMM table} ($(date -u +%T))"
    "$BIN/bench" single --size "$size" --dtype "$dt" --mode step --batch "$b" --vocab "$vocab" "${win[@]}" "${tflag[@]}" --out "$RES/results.jsonl" | tail -1 || rc=1
    "$BIN/bench" single --size "$size" --dtype "$dt" --mode step --batch "$b" --vocab "$vocab" "${win[@]}" "${tflag[@]}" --clip 1 --out "$RES/results.jsonl" | tail -1 || rc=1
    # Accumulation's bar (issue 48): a forward and backward alone, for k x (step - AdamW) + AdamW.
    [ -n "$(for a in ${TS_ACCUM:-1}; do [ "$a" -gt 1 ] && echo y; done)" ] && \
      { "$BIN/bench" single --size "$size" --dtype "$dt" --mode fwd-bwd --batch "$b" --vocab "$vocab" "${win[@]}" "${tflag[@]}" --out "$RES/results.jsonl" | tail -1 || rc=1; }
    for w in ${TS_TORCH_WORLDS:-${TS_WORLDS:-1}}; do
      [ "$w" -gt "$ngpu" ] && continue
      local py=(python3); [ "$w" -gt 1 ] && py=(python3 -m torch.distributed.run --standalone --nproc_per_node "$w")
      # Above world 1 each of TS_TORCH_PARALLEL (ddp; "ddp fsdp2" for both), the report
      # taking the fastest of all at a world size.
      local par; for par in $([ "$w" -gt 1 ] && echo "${TS_TORCH_PARALLEL:-ddp}" || echo ddp); do
      # FSDP2 runs eager or compile-blocks only (the anchor asserts it): TS_TORCH_FSDP2's.
      local vs="${TS_TORCH:-compile-ro}"; [ "$par" = fsdp2 ] && vs="${TS_TORCH_FSDP2:-compile-blocks}"
      for v in $vs; do
        for a in ${TS_TORCH_ACCUM:-${TS_ACCUM:-1}}; do
        echo "--- $size $dt: torch_train_best $v, --parallel $par, world $w, accum $a ($(date -u +%T))"
        torch_env "${py[@]}" "$ANCHORS/torch_train_best.py" "$p/data" "$size" --dtype "$dt" --variant "$v" --parallel "$par" --global-batch $((b * w * a)) --accum "$a" \
          --steps 60 2> "$p/torch-$size-$dt-$v-$par-w$w-a$a.err" | grep '^{' | tee -a "$RES/torch.jsonl" || { tail -3 "$p/torch-$size-$dt-$v-$par-w$w-a$a.err"; rc=1; }
        done
      done
      done
    done
  done
  rm -rf "$p/data"
  python3 - "$RES/results.jsonl" "$RES/torch.jsonl" <<'PY' || rc=1
import json, sys
rows = []
for f in sys.argv[1:]:
    try:
        for l in open(f):
            if l.startswith("{"): rows.append(json.loads(l))
    except OSError: pass
print(f"{'size':6} {'dtype':5} {'what':34} {'world':>5} {'step ms':>9} {'graph':>5} {'kernels':>7} {'adamw':>12} {'norm':>12}")
k = lambda r: str(r.get("graph_kernels") or "-")
med = lambda r: r.get("step_median_ms") or r["step_ms"][0]
# Accumulation's bar: k micro-batches cost k forward-backwards and one AdamW (with the
# clipping norm): k x fb + (clipped step - fb), fb = bench single --mode fwd-bwd.
fb = {(r["size"], r["dtype"]): med(r) for r in rows if r.get("bench") == "single" and r.get("mode") == "fwd-bwd"}
clip = {(r["size"], r["dtype"]): med(r) for r in rows if r.get("bench") == "single" and r.get("mode") == "step" and r.get("adamw") == "after"}
for r in rows:
    if r.get("bench") == "single" and r.get("mode") in ("step", "fwd-bwd"):
        w = "bench single" + (" (clip)" if r.get("adamw") == "after" else "") + (" fwd-bwd" if r["mode"] == "fwd-bwd" else "")
        ms = med(r)  # the median, as train run's
        print(f"{r['size']:6} {r['dtype']:5} {w:34} {1:>5} {ms:9.2f} {str(r['graph']):>5} {k(r):>7} {r['adamw']:>12} {str(r.get('norm')):>12}")
    elif r.get("bench") == "train":
        a = r.get("accum", 1); acc = f" accum {a}" if a > 1 else ""
        print(f"{r['size']:6} {r['dtype']:5} {'train run ' + r['strategy'] + acc:34} {r['world']:>5} {r['step_ms']:9.2f} {str(r['graph']):>5} {k(r):>7} {str(r['adamw']):>12} {str(r.get('norm')):>12}")
        key = (r["size"], r["dtype"])
        if a > 1 and key in fb and key in clip:
            ideal = a * fb[key] + (clip[key] - fb[key])
            print(f"{'':12} accum bar: {a} x fwd-bwd {fb[key]:.2f} + (clipped step {clip[key]:.2f} - {fb[key]:.2f}) = {ideal:.2f} ms;"
                  f" train run / it = {r['step_ms'] / ideal:.3f} (bar 1.10)")
    elif r.get("mode") == "train-best":
        acc = f" accum {r.get('accum', 1)}" if r.get("accum", 1) > 1 else ""
        print(f"{r['size']:6} {r['dtype']:5} {'torch_train_best ' + r['variant'] + acc:34} {r.get('world', 1):>5} {r['step_ms']:9.2f}")
PY
  return $rc
}
