#!/usr/bin/env python3
# Session 39, call 215 (nvidia-h200): python3 prio-probe.py, twice (REPS=7), torch's adds only;
# call 216: with the Triton adds (ADDS_PROGS="528 132"); call 217: ADDS_PROGS="528 0".
# Session 41: ADDS_PTX="old=a.ptx new=b.ptx" adds comm's own kernel from each PTX (calls
# 226-228); ADDS_BLOCKS="528 264 132" caps its blocks as COMM_CE_ADDS_BLOCKS does (call 229);
# TRACE=1 also prints where each kernel of one replay of every case ran (torch.profiler).
"""Whether stream priority puts a backward's GEMMs ahead of memory-bound adds beside them
(session 39; one GPU, no ranks, no graphs).

The compute stream runs the GEMMs of xl's backward at 8 x 128 tokens (48 layers, dX and dW
of the four weight matrices of a layer). Another stream runs the adds of a copy-engine
reduce-scatter at world 4: 16 buckets of xl's 4.0 GB of bf16 gradients, each one kernel
summing 4 parts of a quarter bucket (torch.sum over a [4, n] tensor), each queued once the
compute stream has passed its bucket's layers (an event, as a bucket's gradients become
ready). Cases, by (compute stream's priority, adds stream's):
  alone        the GEMMs only;
  same         both at the lowest priority (0, 0): the step as committed;
  compute-up   (-2, -1): SEAM_GRAPH_COMPUTE_PRIORITY=2 with COMM_CE_ADDS_PRIORITY=1;
  adds-up      (0, -1): COMM_CE_ADDS_PRIORITY=1 alone;
  same-tP, compute-up-tP: the adds as comm's kernel does them (kernels/sum.cu: a grid-stride
               loop, 2048 elements a block and pass; here Triton, P programs of 256 threads,
               ADDS_PROGS, default "528 132 0": comm's cap, COMM_CE_ADDS_BLOCKS=132, and 0:
               a block for every 2048 elements, so that blocks are short and many wait).
  adds-N, adds1-N, same-N: comm's kernel (kernels/sum.cu's comm_sum_parts, in place) from
               the PTX named N in ADDS_PTX (-bB: at most B blocks, ADDS_BLOCKS), loaded through the driver: the adds alone (3 parts a
               bucket, world 4; adds1: 1 part of twice the length, world 2), and beside the
               GEMMs at the lowest priority. A {"check":"same bits"} line compares the first
               two kernels' sums and sums of squares on the same input.
Times are CUDA events: the GEMMs' span and the end of the last add, from a common start
(both streams wait behind one sleep), median of REPS. Prints JSON lines
{"bench":"prio-probe",...} and a table.
"""
import json, os, statistics

import torch

import comm_adds

REPS = int(os.environ.get("REPS", 7))
D, FF, LAYERS, TOKENS, BUCKETS = 1600, 6400, 48, 1024, 16
PARAMS = 1_998_235_200
dev = torch.device("cuda", 0)
bf = torch.bfloat16
x = torch.randn(TOKENS, FF, device=dev, dtype=bf)
dy = torch.randn(TOKENS, FF, device=dev, dtype=bf)
ws = {(i, o): torch.randn(o, i, device=dev, dtype=bf) for i, o in [(D, 3 * D), (D, D), (D, FF), (FF, D)]}
part = PARAMS // BUCKETS // 4 // 8 * 8  # 16-byte aligned rows for comm's kernel
parts = [torch.randn(4, part, device=dev, dtype=bf) for _ in range(BUCKETS)]
outs = [torch.empty(part, device=dev, dtype=bf) for _ in range(BUCKETS)]


try:
    import triton
    import triton.language as tl

    @triton.jit
    def sum_parts(src, out, n, progs, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        for start in range(pid * BLOCK, n, progs * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            acc = tl.load(src + offs, mask=m).to(tl.float32)
            for j in tl.static_range(1, 4):
                acc += tl.load(src + j * n + offs, mask=m).to(tl.float32)
            tl.store(out + offs, acc.to(tl.bfloat16), mask=m)
except ImportError:
    triton = None


def row(k):
    """The length of each of a bucket's k + 1 rows (its own and k parts) for comm's kernel."""
    return part * 4 // (k + 1)


def add(b, progs):
    if isinstance(progs, tuple):  # comm's kernel: (function, parts, most blocks)
        f, k, most = progs
        n, d = row(k), parts[b].data_ptr()
        comm_adds.launch(f, [(d, d, d + 2 * n, n, n, 1.0)], k, blocks=most)
    elif progs:
        sum_parts[(progs,)](parts[b], outs[b], part, progs, BLOCK=2048, num_warps=8)
    else:
        torch.sum(parts[b], dim=0, out=outs[b])


def gemms(layer_done):
    for layer in range(LAYERS):
        for (i, o), w in ws.items():
            g = dy[:, :o]
            torch.mm(g, w)  # dX = dY W
            torch.mm(g.t(), x[:, :i])  # dW = dY^T X
        layer_done(layer)


def run(cp, ap, adds, progs=0, gemm=True):
    cs = torch.cuda.Stream(dev, priority=cp)
    as_ = torch.cuda.Stream(dev, priority=ap)
    t0, c1, a1 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    torch.cuda.synchronize()
    with torch.cuda.stream(cs):
        torch.cuda._sleep(20_000_000)
        t0.record(cs)
    as_.wait_stream(cs)
    per = LAYERS // BUCKETS

    def done(layer):
        if adds and (layer + 1) % per == 0:
            e = torch.cuda.Event()
            e.record(cs)
            as_.wait_event(e)
            b = layer // per
            with torch.cuda.stream(as_):
                add(b, progs)

    with torch.cuda.stream(cs):
        gemms(done) if gemm else [done(layer) for layer in range(LAYERS)]
        c1.record(cs)
    a1.record(as_)
    torch.cuda.synchronize()
    return t0.elapsed_time(c1), t0.elapsed_time(a1) if adds else 0.0


cases = {"alone": (0, 0, False), "same": (0, 0, True), "compute-up": (-2, -1, True), "adds-up": (0, -1, True)}
for p in map(int, os.environ.get("ADDS_PROGS", "528 132 0").split() if triton else []):
    p = p or -(-part // 2048)  # 0: a block per 2048 elements, each one pass (no grid-stride)
    cases[f"same-t{p}"] = (0, 0, True, p)
    cases[f"compute-up-t{p}"] = (-2, -1, True, p)
kernels = {k: comm_adds.load(v) for k, v in (e.split("=") for e in os.environ.get("ADDS_PTX", "").split())}
for name, f in kernels.items():
    for most in map(int, os.environ.get("ADDS_BLOCKS", "528").split()):
        at = "" if most == comm_adds.BLOCKS else f"-b{most}"
        cases[f"adds-{name}{at}"] = (0, 0, True, (f, 3, most), False)
        cases[f"adds1-{name}{at}"] = (0, 0, True, (f, 1, most), False)
        cases[f"same-{name}{at}"] = (0, 0, True, (f, 3, most))
if len(kernels) >= 2:  # the same input through the first two: the same sums and squares?
    (a, fa), (b, fb) = list(kernels.items())[:2]
    outs_, sqs = [], []
    for f in (fa, fb):
        t = parts[0].clone()
        sq = torch.zeros(528, device=dev, dtype=torch.float32)
        d = t.data_ptr()
        comm_adds.launch(f, [(d, d, d + 2 * part, part, part, 1.0)], 3, sq.data_ptr())
        outs_.append(t[0])
        sqs.append(sq)
    torch.cuda.synchronize()
    same = torch.equal(outs_[0].view(torch.int16), outs_[1].view(torch.int16)) and torch.equal(sqs[0].view(torch.int32), sqs[1].view(torch.int32))
    print(json.dumps({"bench": "prio-probe", "check": "same bits", "kernels": [a, b], "same": same, "norm": [float(q.sum().sqrt()) for q in sqs]}))
for c in cases.values():
    run(*c)
res = {k: [] for k in cases}
for _ in range(REPS):
    for k, c in cases.items():
        res[k].append(run(*c))
rows = []
for k, r in res.items():
    g, a = statistics.median(x[0] for x in r), statistics.median(x[1] for x in r)
    rec = {"bench": "prio-probe", "case": k, "priorities": list(cases[k][:2]), "gemms_ms": round(g, 3), "adds_end_ms": round(a, 3), "step_ms": round(max(g, a), 3), "reps": REPS, "gpu": torch.cuda.get_device_name(0)}
    if len(cases[k]) > 4:  # adds alone: what they move (reads and the write) over their time
        nparts = cases[k][3][1]
        rec["adds_gb_s"] = round(BUCKETS * (nparts + 2) * row(nparts) * 2 / a / 1e6, 1)
    print(json.dumps(rec))
    rows.append(rec)
print(f"{'case':12} {'GEMMs':>8} {'last add':>9} {'both':>8}  (ms, median of {REPS})")
for r in rows:
    print(f"{r['case']:12} {r['gemms_ms']:8.3f} {r['adds_end_ms']:9.3f} {r['step_ms']:8.3f}  {r.get('adds_gb_s', '')}")


if os.environ.get("TRACE") == "1":  # where each kernel of one more replay of each case ran
    import sys, tempfile

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../cupti"))
    from summarize import intersect, length, union

    is_add = lambda name: "sum" in name or "reduce" in name
    for k, c in cases.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            run(*c)
        with tempfile.TemporaryDirectory() as tmp:
            prof.export_chrome_trace(os.path.join(tmp, "trace.json"))
            events = json.load(open(os.path.join(tmp, "trace.json")))["traceEvents"]
        ks = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel"]
        adds = [(a, b) for n, a, b in ks if is_add(n)]
        other = [(a, b) for n, a, b in ks if not is_add(n) and "sleep" not in n and "spin" not in n]
        ua, ug = union(adds), union(other)
        rec = {"bench": "prio-probe", "trace": k, "adds_kernels": len(adds), "adds_busy_ms": round(length(ua) / 1e3, 3), "gemms_busy_ms": round(length(ug) / 1e3, 3), "both_ms": round(intersect(ua, ug) / 1e3, 3)}
        print(json.dumps(rec))
