"""How long PyTorch takes to checkpoint a model with its AdamW state, to compare with
`train`'s checkpoint line on the same machine and disk.

  python3 torch_ckpt.py SIZE VOCAB DIR      e.g.  torch_ckpt.py xl 683 /tmp/tck

The model is torch_best.py's LM (f32 parameters, fused AdamW after one step: the state a
bf16-autocast trainer holds). Three ways, each timed to durable files (fsync):
- nanoGPT's: torch.save({"model", "optimizer"}) into one file;
- torch.distributed.checkpoint.save (DCP, torchtitan's), one process;
- DCP's async_save: the time the training loop is blocked, and until the files are done.
One JSON line each.
"""
import json, os, sys, time
import torch
import torch_best as tb


def fsync_tree(path):
    paths = [path] if os.path.isfile(path) else [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]
    for p in paths:
        fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)
    return sum(os.path.getsize(p) for p in paths)


def main():
    size, vocab, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tb.VOCAB = vocab
    d, dff, L, h = tb.SIZES[size]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = tb.LM(d, dff, L, h)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, vocab, (2, tb.CTX), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, x)
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    os.makedirs(root, exist_ok=True)
    out = {"torch": torch.__version__, "size": size, "vocab": vocab,
           "params": sum(p.numel() for p in model.parameters())}

    def rec(way, **kw):
        print(json.dumps({"bench": "torch-ckpt", **out, "way": way, **kw}), flush=True)

    p = os.path.join(root, "ckpt.pt")
    t0 = time.perf_counter()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, p)
    n = fsync_tree(p); s = time.perf_counter() - t0
    rec("torch.save", seconds=round(s, 2), bytes=n, gb_per_s=round(n / s / 1e9, 3))
    os.remove(p)
    try:
        import torch.distributed.checkpoint as dcp
        state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
        q = os.path.join(root, "dcp")
        t0 = time.perf_counter()
        dcp.save(state, checkpoint_id=q)
        n = fsync_tree(q); s = time.perf_counter() - t0
        rec("dcp.save", seconds=round(s, 2), bytes=n, gb_per_s=round(n / s / 1e9, 3))
        os.system(f"rm -rf {q}")
        q = os.path.join(root, "dcp-async")
        t0 = time.perf_counter()
        f = dcp.async_save(state, checkpoint_id=q)
        blocked = time.perf_counter() - t0
        f.result()
        n = fsync_tree(q); s = time.perf_counter() - t0
        rec("dcp.async_save", blocked_s=round(blocked, 2), seconds=round(s, 2), bytes=n,
            gb_per_s=round(n / s / 1e9, 3))
        os.system(f"rm -rf {q}")
    except Exception as e:  # an older torch, or DCP refusing one process
        rec("dcp", error=repr(e)[:300])


if __name__ == "__main__":
    main()
