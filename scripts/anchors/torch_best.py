"""The strongest PyTorch a user would write for the same LM (cs336 shape: RMSNorm pre-norm,
interleaved RoPE, SwiGLU, untied head, vocab 10k, ctx 128, batch 8): flash attention through
scaled_dot_product_attention, RoPE tables cached once, fused AdamW, bf16 autocast over fp32
masters, and torch.compile in its default and CUDA-graph ("reduce-overhead") modes.

  python3 torch_best.py SIZES VARIANTS      e.g.  torch_best.py xl,2.7B eager,compile,compile-ro
Under torchrun (RANK set) the model is wrapped in DDP (25 MB buckets, gradients as bucket
views, static graph) before compiling: PyTorch's strongest data-parallel step.
One JSON line per (size, dtype, variant), from rank 0.
"""
import json, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist

SIZES = {"small": (768, 3072, 12, 12), "medium": (1024, 4096, 24, 16),
         "large": (1280, 5120, 36, 20), "xl": (1600, 6400, 48, 25), "2.7B": (2560, 10240, 32, 32)}
VOCAB, CTX, BATCH = 10_000, 128, 8


def rope(x, cos, sin):  # interleaved pairs, as the project's model
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class Block(nn.Module):
    def __init__(s, d, dff, h):
        super().__init__(); s.h = h
        s.n1, s.n2 = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
        s.qkv = nn.Linear(d, 3 * d, bias=False); s.o = nn.Linear(d, d, bias=False)
        s.w1 = nn.Linear(d, dff, bias=False); s.w3 = nn.Linear(d, dff, bias=False)
        s.w2 = nn.Linear(dff, d, bias=False)

    def forward(s, x, cos, sin):
        b, t, d = x.shape
        q, k, v = s.qkv(s.n1(x)).view(b, t, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.o(y.transpose(1, 2).reshape(b, t, d))
        y = s.n2(x)
        return x + s.w2(F.silu(s.w1(y)) * s.w3(y))


class LM(nn.Module):
    def __init__(s, d, dff, L, h):
        super().__init__()
        s.emb = nn.Embedding(VOCAB, d)
        s.blocks = nn.ModuleList(Block(d, dff, h) for _ in range(L))
        s.norm = nn.RMSNorm(d, eps=1e-5); s.head = nn.Linear(d, VOCAB, bias=False)
        hd = d // h
        inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2).float() / hd)
        ang = torch.arange(CTX).float()[:, None] * inv[None]
        s.register_buffer("cos", ang.cos(), persistent=False)
        s.register_buffer("sin", ang.sin(), persistent=False)

    def forward(s, idx, tgt):
        x = s.emb(idx)
        cos, sin = s.cos.to(x.dtype), s.sin.to(x.dtype)
        for b in s.blocks:
            x = b(x, cos, sin)
        logits = s.head(s.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), tgt.flatten())


def measure(size, dtype, variant, steps=20, warm=6):
    d, dff, L, h = SIZES[size]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LM(d, dff, L, h)
    nparams = sum(p.numel() for p in model.parameters())
    fwd = model
    if dist.is_initialized():
        from torch.nn.parallel import DistributedDataParallel as DDP
        fwd = DDP(model, bucket_cap_mb=25, gradient_as_bucket_view=True, static_graph=True)
    if variant == "compile":
        fwd = torch.compile(fwd)
    elif variant == "compile-ro":
        fwd = torch.compile(fwd, mode="reduce-overhead")
    elif variant == "compile-ma":
        fwd = torch.compile(fwd, mode="max-autotune-no-cudagraphs")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, VOCAB, (BATCH, CTX), device="cuda")
    y = torch.randint(0, VOCAB, (BATCH, CTX), device="cuda")
    ctx = (torch.autocast("cuda", dtype=torch.bfloat16) if dtype == "bf16"
           else torch.autocast("cuda", enabled=False))
    torch.cuda.reset_peak_memory_stats()
    ts, t_compile = [], time.perf_counter()
    for i in range(warm + steps):
        if variant == "compile-ro":
            torch.compiler.cudagraph_mark_step_begin()
        torch.cuda.synchronize(); t0 = time.perf_counter()
        with ctx:
            loss = fwd(x, y)
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i == warm - 1:
            t_compile = time.perf_counter() - t_compile
        if i >= warm:
            ts.append(time.perf_counter() - t0)
    ts.sort()
    world = dist.get_world_size() if dist.is_initialized() else 1
    if world == 1 or dist.get_rank() == 0:
        print(json.dumps({"mode": "ddp-best" if dist.is_initialized() else "single-best",
                          "world": world, "variant": variant, "size": size, "dtype": dtype,
                          "tf32": torch.backends.cuda.matmul.allow_tf32,
                          "params": nparams, "batch": BATCH, "step_ms": ts[len(ts) // 2] * 1e3,
                          "best_ms": ts[0] * 1e3, "warmup_s": t_compile,
                          "peak_GiB": torch.cuda.max_memory_allocated() / 2**30,
                          "loss": float(loss.detach())}), flush=True)
    del model, fwd, opt; torch.cuda.empty_cache()
    torch._dynamo.reset()


def main():
    if "RANK" in os.environ:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
    sizes = sys.argv[1].split(",") if len(sys.argv) > 1 else ["xl"]
    variants = sys.argv[2].split(",") if len(sys.argv) > 2 else ["eager", "compile"]
    dtypes = os.environ.get("DTYPES", "fp32,bf16").split(",")
    torch.backends.cuda.matmul.allow_tf32 = os.environ.get("TF32") == "1"
    torch.backends.cudnn.allow_tf32 = os.environ.get("TF32") == "1"
    for size in sizes:
        for dtype in dtypes:
            for v in variants:
                try:
                    measure(size, dtype, v)
                except Exception as e:  # report and go on: one variant's failure is a result too
                    print(json.dumps({"mode": "single-best", "variant": v, "size": size,
                                      "dtype": dtype, "tf32": torch.backends.cuda.matmul.allow_tf32,
                                      "error": repr(e)[:300]}), flush=True)
                    torch.cuda.empty_cache()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
