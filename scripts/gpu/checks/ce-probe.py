#!/usr/bin/env python3
"""What GEMMs lose beside copy-engine collectives, against beside NCCL's (issue 47).

One process drives W GPUs of one host (no ranks, no graphs): each GPU runs the GEMMs of xl's
forward and backward at 8 x 128 tokens (48 layers; Y = X W, dX = dY W^T, dW = X^T dY for the
four weight matrices of a layer; about 12 TFLOP) on one stream while, on other streams, the
GPUs move xl's 4.0 GB of bf16 parameters or gradients in 16 buckets:
  ce-ag   all-gather by copy engines: each GPU pulls each peer's shard of each bucket with
          cuMemcpyAsync on a stream of its own per peer (peer access on);
  nccl-ag torch.cuda.nccl.all_gather, bucket by bucket, on one stream per GPU;
  ce-ag-push the same, pushed: each GPU writes its shard into every peer's buffer;
  ce-ag-ring, ce-ag-ring-pull: pushed (pulled) on ONE stream per GPU, the peers in the order
          d+1, d+2, ... (mod W) for every bucket: one copy at a time per GPU, so that each GPU
          takes in from about one peer at a time (session 41: whether that beats three
          copies at once, ~230 GB/s at world 4, toward one copy's ~358 at world 2);
  ce-ag-sK, ce-ag-push-sK: each peer's copy split into K pieces on K streams of its own
          (SPLITS, default "2 4"): whether more copies at once bring in more than ~200 GB/s
          at world 4 (session 30);
  ce-rs   reduce-scatter by copy engines: each GPU pulls its part of each bucket from every
          peer, then adds the W parts in one memory-bound pass (torch ops) per bucket;
  ce-rs-tK the same pulls, the W parts added by one Triton kernel of K programs a bucket
          (SUM_CTAS, default "8 16 32"): how few SMs the adds can take;
  nccl-rs torch.cuda.nccl.reduce_scatter.
Every stream first waits behind a sleep of the same length, so that all start together.
Times are CUDA events on GPU 0 and the slowest GPU, median of REPS. Prints JSON lines
{"bench":"ce-probe",...} and a table.
"""
import ctypes, json, os, statistics, sys

import torch
import torch.cuda.nccl as nccl

W = int(os.environ.get("W", torch.cuda.device_count()))
REPS = int(os.environ.get("REPS", 5))
BUCKETS = 16
PARAMS = 1_998_235_200
D, FF, LAYERS, TOKENS = 1600, 6400, 48, 1024
dev = [torch.device("cuda", d) for d in range(W)]

cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r not in (0, 704):  # 704: peer access already enabled
        raise RuntimeError(f"{what}: CUDA error {r}")
ctx = []
for d in range(W):
    torch.cuda.set_device(d); torch.zeros(1, device=dev[d])
    c = ctypes.c_void_p(); ck(cu.cuCtxGetCurrent(ctypes.byref(c)), "cuCtxGetCurrent"); ctx.append(c)
for d in range(W):
    torch.cuda.set_device(d)
    for p in range(W):
        if p != d:
            ck(cu.cuCtxEnablePeerAccess(ctx[p], ctypes.c_uint(0)), f"peer access {d}->{p}")
cu.cuMemcpyAsync.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]

bucket = (PARAMS // BUCKETS) // W * W
shard = bucket // W
# per GPU: the full bf16 buffer (BUCKETS x bucket), each bucket's staging for the reduce-scatter
full = [torch.randn(BUCKETS, bucket, device=dev[d], dtype=torch.bfloat16) for d in range(W)]
# rows 0..W-2: the peers' parts (in peer order, this rank skipped); row W-1: this rank's own
stage = [torch.empty(BUCKETS, W, shard, device=dev[d], dtype=torch.bfloat16) for d in range(W)]
red = [torch.empty(BUCKETS, shard, device=dev[d], dtype=torch.bfloat16) for d in range(W)]
mats = [(D, 3 * D), (D, D), (D, 2 * FF), (FF, D)]
wts = [[[torch.randn(k, n, device=dev[d], dtype=torch.bfloat16) * 0.02 for k, n in mats]
        for _ in range(LAYERS)] for d in range(W)]
xs = [{k: torch.randn(TOKENS, k, device=dev[d], dtype=torch.bfloat16) for k in (D, FF)} for d in range(W)]
ys = [{n: torch.randn(TOKENS, n, device=dev[d], dtype=torch.bfloat16) for _, n in mats} for d in range(W)]
gemm_s = [torch.cuda.Stream(device=dev[d]) for d in range(W)]
comm_s = [torch.cuda.Stream(device=dev[d]) for d in range(W)]
SPLITS = [int(k) for k in os.environ.get("SPLITS", "2 4").split()]
KMAX = max(SPLITS + [1])
peer_s = [[torch.cuda.Stream(device=dev[d]) for _ in range(W)] for d in range(W)]
split_s = [[[peer_s[d][p]] + [torch.cuda.Stream(device=dev[d]) for _ in range(KMAX - 1)] for p in range(W)] for d in range(W)]

def gemms(d):
    x, y = xs[d], ys[d]
    for layer in wts[d]:
        for w in layer:
            k, n = w.shape
            torch.mm(x[k], w); torch.mm(y[n], w.t()); torch.mm(x[k].t(), y[n])

def ce_ag(d, push=False, split=1, ring=False):
    """GPU d's copies of the gather, on its stream per peer p: p's shard pulled into d's
    buffer, or (push) d's shard written into p's; each split in `split` pieces on as many
    streams of that peer; or (ring) all on one stream, the peers from d+1 on."""
    piece = shard // split
    for b in range(BUCKETS):
        for p in ((d + j) % W for j in range(1, W)):
            (src, dst, k) = (d, p, d) if push else (p, d, p)
            for i in range(split):
                s = split_s[d][(d + 1) % W][0] if ring else split_s[d][p][i]
                n = piece if i < split - 1 else shard - piece * (split - 1)
                part = lambda g: full[g][b, k * shard + i * piece:k * shard + i * piece + n]
                ck(cu.cuMemcpyAsync(part(dst).data_ptr(), part(src).data_ptr(), n * 2, ctypes.c_void_p(s.cuda_stream)), "copy")

try:
    import triton
    import triton.language as tl

    @triton.jit
    def sum_parts(stage_ptr, own_ptr, out_ptr, n, progs, PEERS: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        for start in range(pid * BLOCK, n, progs * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            acc = tl.load(own_ptr + offs, mask=m).to(tl.float32)
            for j in tl.static_range(PEERS):
                acc += tl.load(stage_ptr + j * n + offs, mask=m).to(tl.float32)
            tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=m)
except ImportError:
    triton = None

def ce_rs(d, ctas=None):
    for b in range(BUCKETS):
        done = []
        for j, p in enumerate(q for q in range(W) if q != d):
            s = peer_s[d][p]
            src = full[p][b, d * shard:(d + 1) * shard]
            ck(cu.cuMemcpyAsync(stage[d][b, j].data_ptr(), src.data_ptr(), shard * 2, ctypes.c_void_p(s.cuda_stream)), "copy")
            e = torch.cuda.Event(); e.record(s); done.append(e)
        own = full[d][b, d * shard:(d + 1) * shard]
        with torch.cuda.stream(comm_s[d]):
            for e in done:
                comm_s[d].wait_event(e)
            if ctas:
                sum_parts[(ctas,)](stage[d][b], own, red[d][b], shard, ctas, PEERS=W - 1, BLOCK=4096, num_warps=8)
            else:
                stage[d][b, W - 1].copy_(own)
                torch.sum(stage[d][b], 0, out=red[d][b])

def nccl_ag():
    for b in range(BUCKETS):
        nccl.all_gather([full[d][b, d * shard:(d + 1) * shard] for d in range(W)],
                        [full[d][b] for d in range(W)], streams=comm_s)

def nccl_rs():
    for b in range(BUCKETS):
        nccl.reduce_scatter([full[d][b] for d in range(W)], [red[d][b] for d in range(W)], streams=comm_s)

def run(mode):
    """One repetition: the GEMM loop and/or one collective; returns per-GPU (gemm ms, comm ms)."""
    gate = int(os.environ.get("GATE_CYCLES", 2e8))
    streams = [[gemm_s[d], comm_s[d]] + [x for p in range(W) if p != d for x in split_s[d][p]] for d in range(W)]
    start = []
    for d in range(W):
        torch.cuda.set_device(d)
        for s in streams[d]:
            with torch.cuda.stream(s):
                torch.cuda._sleep(gate)
        e = torch.cuda.Event(enable_timing=True); e.record(gemm_s[d]); start.append(e)
        for s in streams[d][1:]:
            s.wait_stream(gemm_s[d])
    g_end, c_end = [None] * W, [None] * W
    comm = mode.replace("gemm+", "") if mode != "gemm" else None
    for d in range(W):
        torch.cuda.set_device(d)
        if mode.startswith("gemm"):
            with torch.cuda.stream(gemm_s[d]):
                gemms(d)
            g_end[d] = torch.cuda.Event(enable_timing=True); g_end[d].record(gemm_s[d])
        if comm and comm.startswith("ce-ag"):
            k = int(comm.split("-s")[1]) if "-s" in comm else 1
            ring = "ring" in comm
            ce_ag(d, push="push" in comm or (ring and "pull" not in comm), split=k, ring=ring)
        elif comm and comm.startswith("ce-rs"):
            ce_rs(d, int(comm[7:]) if comm.startswith("ce-rs-t") else None)
    if comm == "nccl-ag":
        nccl_ag()
    elif comm == "nccl-rs":
        nccl_rs()
    if comm:
        for d in range(W):
            torch.cuda.set_device(d)
            for p in range(W):
                if p != d:
                    for x in split_s[d][p]:
                        comm_s[d].wait_stream(x)
            c_end[d] = torch.cuda.Event(enable_timing=True); c_end[d].record(comm_s[d])
    for d in range(W):
        torch.cuda.synchronize(d)
    return [(start[d].elapsed_time(g_end[d]) if g_end[d] else None,
             start[d].elapsed_time(c_end[d]) if c_end[d] else None) for d in range(W)]

rows = []
modes = ["gemm", "ce-ag", "gemm+ce-ag", "ce-ag-push", "gemm+ce-ag-push", "nccl-ag", "gemm+nccl-ag", "ce-rs", "gemm+ce-rs", "nccl-rs", "gemm+nccl-rs"]
for k in SPLITS:
    modes += [f"ce-ag-s{k}", f"gemm+ce-ag-s{k}", f"ce-ag-push-s{k}", f"gemm+ce-ag-push-s{k}"]
if os.environ.get("MODES"):  # a subset, in this order ("gemm" is always first: the base)
    modes = ["gemm"] + [m for m in os.environ["MODES"].split() if m != "gemm"]
if triton is not None and not os.environ.get("MODES"):
    for k in os.environ.get("SUM_CTAS", "8 16 32").split():
        modes += [f"ce-rs-t{k}", f"gemm+ce-rs-t{k}"]
for mode in modes:
    run(mode)  # warm-up (NCCL communicators, cuBLAS handles)
    reps = [run(mode) for _ in range(REPS)]
    rec = {"bench": "ce-probe", "mode": mode, "world": W, "gpu": torch.cuda.get_device_name(0),
           "nccl": ".".join(map(str, nccl.version())) if isinstance(nccl.version(), tuple) else str(nccl.version()),
           "buckets": BUCKETS, "bytes_moved_per_gpu": (W - 1) * shard * 2 * BUCKETS}
    for i, key in ((0, "gemm_ms"), (1, "comm_ms")):
        if reps[0][0][i] is not None:
            rec[key + "_gpu0"] = round(statistics.median(r[0][i] for r in reps), 3)
            rec[key + "_max"] = round(statistics.median(max(x[i] for x in r) for r in reps), 3)
    print(json.dumps(rec), flush=True); rows.append(rec)
if triton is not None and not os.environ.get("MODES"):  # the Triton adds against torch's, and against the sum in f32
    run("ce-rs"); ref = [r.clone() for r in red]
    run("ce-rs-t16")
    want = sum(full[p][:, 0:shard].float().to(dev[0]) for p in range(W))
    print(json.dumps({"bench": "ce-probe-check", "triton_vs_torch_max_abs": max((a.float() - b.float()).abs().max().item() for a, b in zip(red, ref)),
                      "triton_vs_f32_max_abs_gpu0": (red[0].float() - want).abs().max().item(), "f32_max_abs": want.abs().max().item()}), flush=True)
base = next(r for r in rows if r["mode"] == "gemm")["gemm_ms_max"]
print(f"\nworld {W}, {rows[0]['gpu']}, NCCL {rows[0]['nccl']}: GEMMs alone {base} ms (slowest GPU)")
print(f"{'mode':14} {'gemm ms':>9} {'GEMM loss':>10} {'comm ms':>9} {'GB/s in':>8}")
for r in rows:
    g = r.get("gemm_ms_max"); c = r.get("comm_ms_max")
    print(f"{r['mode']:14} {g if g else '':>9} {round(g - base, 3) if g else '':>10} {c if c else '':>9} "
          f"{round(r['bytes_moved_per_gpu'] / c / 1e6, 1) if c else '':>8}")
