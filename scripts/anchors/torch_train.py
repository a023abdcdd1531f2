"""PyTorch trainer of the project's LM, for parity with `train run` (issue 26, part 4).

  train run --data D --out R --strategy single --export-init ...     ours: R/log.jsonl
  python3 torch_train.py --data D --run R --out torch.jsonl [--device cuda] [--dtype bf16]
  train compare R/log.jsonl torch.jsonl --out cmp                     |Δ loss|, curves

It reads what ours read and wrote: the data directory (meta.json, train.bin and val.bin as
uint16 little-endian), R/config.json (our TrainConfig) and R/init.safetensors (our initial
weights, by our names, checked strictly). It draws the same windows in the same order
(SplitMix64 as crates/train/src/rng.rs and sampler.rs), follows the same schedule
(schedule.rs), clipping (engine.rs: scale by clip/(norm+1e-6) when that is below 1, the
norm over every gradient in f64) and AdamW (seam::adamw = torch.optim.AdamW: eps 1e-8,
decoupled decay on every parameter, norms and embedding included), averages micro-batches
like engine.rs, and evaluates at step 0, every eval_every steps and at the end on the same
validation windows. It writes JSON lines in our log's schema (train: step, loss, lr,
grad_norm, tokens_per_s, elapsed_s; val: step, loss).

The model is ours op for op (crates/model: lm.rs, block.rs, the fused kernels): token
embedding; pre-norm blocks (RMSNorm eps 1e-5, fused qkv (3d, d) weight, RoPE theta 10000
on interleaved pairs of q and k, causal softmax of q·kᵀ scaled by 1/√head_dim after the
product, o; RMSNorm, SwiGLU w2(silu(w1 h) ⊙ w3 h)); final RMSNorm; untied head; no
biases; loss = mean cross-entropy in f32. bf16 is ours too, written out rather than left to
autocast: f32 master weights cast to bf16 at each use, activations and the residual stream
in bf16, GEMMs in bf16 with f32 accumulation, RMSNorm, RoPE, softmax and silu·mul computed
in f32 from bf16 inputs and rounded once, logits in bf16 read by an f32 cross-entropy;
weight gradients rounded to bf16 but the blocks' RMSNorm weights' kept in f32 (block.rs).
TF32 is off (and bf16 GEMMs' reduced-precision reductions), as in ours: fp32 is fp32.
Attention is written out (no SDPA), so torch computes what ours computes.
"""
import argparse, json, math, os, struct, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

M64 = (1 << 64) - 1
EVAL_SEED = 0x5EED_E7A1  # crates/train/src/trainer.rs


def mix(z):  # SplitMix64's finaliser (rng.rs)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def window_start(seed, starts, step, i):  # Sampler::start: SplitMix64(s + i).below(starts)
    s = mix((seed + mix((step + 1) & M64)) & M64)
    return mix((s + i + 0x9E3779B97F4A7C15) & M64) % starts


class Windows:  # sampler.rs: window i of step s from (seed, s, i)
    def __init__(s, tokens, context, seed):
        if len(tokens) <= context:
            sys.exit(f"torch_train: {len(tokens)} tokens, not more than the context {context}")
        s.t, s.c, s.seed, s.starts = tokens, context, seed, len(tokens) - context

    def batch(s, step, rows, device):
        w = torch.stack([s.t[p:p + s.c + 1] for p in
                         (window_start(s.seed, s.starts, step, i) for i in rows)])
        return w[:, :-1].to(device), w[:, 1:].to(device)


def read_tokens(path, vocab):
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    t = torch.frombuffer(raw, dtype=torch.int16).to(torch.int64) & 0xFFFF  # uint16 LE
    if len(t) and int(t.max()) >= vocab:
        sys.exit(f"torch_train: {path} holds token {int(t.max())}, not below the vocabulary {vocab}")
    return t


def read_safetensors(path):
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F64": torch.float64}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        if h["dtype"] not in dtypes:
            sys.exit(f"torch_train: {path}: tensor {name} has dtype {h['dtype']}")
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(data[a:b], dtype=dtypes[h["dtype"]]).reshape(h["shape"]).clone()
    return out


class Block(nn.Module):  # parameter names and shapes as crates/model/src/lm.rs
    def __init__(s, d, dff):
        super().__init__()
        s.norm1, s.qkv, s.o = nn.Parameter(torch.empty(d)), nn.Parameter(torch.empty(3 * d, d)), nn.Parameter(torch.empty(d, d))
        s.norm2 = nn.Parameter(torch.empty(d))
        s.w1, s.w3, s.w2 = nn.Parameter(torch.empty(dff, d)), nn.Parameter(torch.empty(dff, d)), nn.Parameter(torch.empty(d, dff))


class LM(nn.Module):
    def __init__(s, vocab, m, dtype):
        super().__init__()
        d, s.h, s.eps, s.dt, s.V = m["d_model"], m["heads"], 1e-5, dtype, vocab
        s.emb = nn.Parameter(torch.empty(vocab, d))
        s.blocks = nn.ModuleList(Block(d, m["d_ff"]) for _ in range(m["layers"]))
        s.norm, s.head = nn.Parameter(torch.empty(d)), nn.Parameter(torch.empty(vocab, d))
        hd = d // s.h  # layers.rs rope_tables: angles in f64, cos and sin rounded to f32
        inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.arange(m["context"], dtype=torch.float64)[:, None] * inv[None]
        s.register_buffer("cos", ang.cos().float(), persistent=False)
        s.register_buffer("sin", ang.sin().float(), persistent=False)

    def w(s, p):  # the master weight in the compute dtype (a copy in bf16)
        return p.to(s.dt)

    def rms(s, x, w, f32_grad=False):  # f32 statistics, y = x·r·w rounded once (fused.cu)
        xf = x.float()
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + s.eps)
        wf = s.w(w).float()
        if f32_grad and s.dt != torch.float32:  # the blocks' hand-written backward keeps
            wf = w + (wf - w).detach()  # ∂w in f32: the bf16 value, an unrounded gradient
        return (xf * r * wf).to(s.dt)

    def rope(s, x, t):  # interleaved pairs (x[2i], x[2i+1]), in f32
        xf, c, sn = x.float(), s.cos[:t], s.sin[:t]
        a, b = xf[..., 0::2], xf[..., 1::2]
        return torch.stack((a * c - b * sn, a * sn + b * c), -1).flatten(-2).to(s.dt)

    def attention(s, blk, x):
        b, t, d = x.shape
        e = d // s.h
        q, k, v = (s.rms(x, blk.norm1, True) @ s.w(blk.qkv).t()).view(b, t, 3, s.h, e).permute(2, 0, 3, 1, 4)
        q, k = s.rope(q, t), s.rope(k, t)
        sc = (q @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(e))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        p = sc.masked_fill(mask, float("-inf")).softmax(-1).to(s.dt)
        y = (p @ v).transpose(1, 2).reshape(b, t, d)
        return y @ s.w(blk.o).t()

    def ffn(s, blk, x):
        h = s.rms(x, blk.norm2, True)
        a, g = (h @ s.w(blk.w1).t()).float(), (h @ s.w(blk.w3).t()).float()
        return (F.silu(a) * g).to(s.dt) @ s.w(blk.w2).t()

    def forward(s, idx, tgt):
        x = F.embedding(idx, s.emb).to(s.dt)
        for blk in s.blocks:
            x = x + s.attention(blk, x)
            x = x + s.ffn(blk, x)
        logits = s.rms(x, s.norm) @ s.w(s.head).t()
        return F.cross_entropy(logits.float().reshape(-1, s.V), tgt.reshape(-1))


def load_strict(model, tensors, path):
    want = {n: tuple(p.shape) for n, p in model.named_parameters()}
    got = {n: tuple(t.shape) for n, t in tensors.items()}
    bad = [f"missing {n} {want[n]}" for n in want if n not in got]
    bad += [f"extra {n} {got[n]}" for n in got if n not in want]
    bad += [f"{n}: shape {got[n]} in the file, {want[n]} in the model" for n in want if n in got and got[n] != want[n]]
    if bad:
        sys.exit(f"torch_train: {path} does not fit the model: " + "; ".join(bad))
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(tensors[n].float())


def lr_at(c, step):  # schedule.rs
    if step < c["warmup"]:
        return c["lr"] * (step + 1) / c["warmup"]
    if step >= c["steps"]:
        return c["min_lr"]
    t = (step - c["warmup"]) / max(c["steps"] - c["warmup"], 1)
    return c["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * t)) * (c["lr"] - c["min_lr"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="data directory (meta.json, train.bin, val.bin)")
    ap.add_argument("--run", help="our run directory: its config.json and init.safetensors")
    ap.add_argument("--config", help="config.json (default RUN/config.json)")
    ap.add_argument("--init", help="init.safetensors (default RUN/init.safetensors)")
    ap.add_argument("--out", required=True, help="JSON-lines log to write")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], help="default: the config's bf16 field")
    ap.add_argument("--bf16", action="store_true", help="same as --dtype bf16")
    ap.add_argument("--stop-after", type=int, help="stop after this many steps (schedule unchanged)")
    ap.add_argument("--blas", choices=["default", "cublas", "cublaslt"], default="default",
                    help="the GEMM library (torch.backends.cuda.preferred_blas_library): the same "
                         "math through other algorithms, to see how far two runs of one trainer part")
    a = ap.parse_args()
    if not (a.run or (a.config and a.init)):
        ap.error("give --run, or both --config and --init")
    c = json.load(open(a.config or os.path.join(a.run, "config.json")))
    init = a.init or os.path.join(a.run, "init.safetensors")
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    bf16 = a.bf16 or (a.dtype == "bf16") or (a.dtype is None and c["bf16"])
    if c["strategy"] != "single":
        print(f"torch_train: note: ours ran strategy {c['strategy']}; this is one process", file=sys.stderr)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")
    if a.blas != "default":
        torch.backends.cuda.preferred_blas_library(a.blas)
    if a.device.startswith("cuda"):
        print(f"torch_train: BLAS {torch.backends.cuda.preferred_blas_library()}", file=sys.stderr)
    dev = torch.device(a.device)

    m, V = c["model"], meta["vocab_size"]
    model = LM(V, m, torch.bfloat16 if bf16 else torch.float32)
    load_strict(model, read_safetensors(init), init)
    model.to(dev)
    params = [p for _, p in model.named_parameters()]  # our order: emb, blocks…, norm, head
    opt = torch.optim.AdamW(params, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=1e-8,
                            weight_decay=c["weight_decay"])

    ctx, G, k = m["context"], c["global_batch"], c["accum"]
    if G % k:
        sys.exit(f"torch_train: global batch {G} does not split into {k} micro-batches")
    rows = G // k
    train = Windows(read_tokens(os.path.join(a.data, "train.bin"), V), ctx, c["seed"])
    valw = Windows(read_tokens(os.path.join(a.data, "val.bin"), V), ctx, c["seed"] ^ EVAL_SEED)
    val = [valw.batch(j, range(rows), dev) for j in range(c["eval_batches"])]

    def evaluate():
        with torch.no_grad():
            return sum(float(model(x, y)) for x, y in val) / len(val)

    out = open(a.out, "w")

    def log(r):
        out.write(json.dumps(r) + "\n"); out.flush()

    log({"type": "val", "step": 0, "loss": evaluate()})
    end = min(c["steps"], a.stop_after or c["steps"])
    t0 = time.perf_counter()
    for step in range(end):
        ts = time.perf_counter()
        lr = lr_at(c, step)
        loss = 0.0
        for mb in range(k):
            x, y = train.batch(step, range(mb * rows, (mb + 1) * rows), dev)
            l = model(x, y)
            l.backward()
            loss += float(l.detach())
        g = [p.grad for p in params]
        if k > 1:
            torch._foreach_mul_(g, 1.0 / k)
        sq = torch.stack([t.float().pow(2).sum() for t in g]).double().cpu().tolist()
        norm = math.sqrt(sum(sq))  # engine.rs global_norm: f32 sums added in f64
        coef = c["clip"] / (norm + 1e-6)
        if c["clip"] > 0 and coef < 1:
            torch._foreach_mul_(g, coef)
        for pg in opt.param_groups:
            pg["lr"] = lr
        opt.step()
        opt.zero_grad(set_to_none=True)
        done = step + 1
        dt = time.perf_counter() - ts
        log({"type": "train", "step": done, "loss": loss / k, "lr": lr, "grad_norm": norm,
             "tokens_per_s": G * ctx / dt, "elapsed_s": time.perf_counter() - t0})
        if done % c["eval_every"] == 0 or done == c["steps"]:
            v = evaluate()
            log({"type": "val", "step": done, "loss": v})
            print(f"step {done}: train {loss / k:.4f}, validation {v:.4f}", file=sys.stderr, flush=True)
    print(f"torch_train: {end} steps in {time.perf_counter() - t0:.1f} s ({'bf16' if bf16 else 'fp32'}, "
          f"{dev}); wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
