#!/usr/bin/env python3
# Session 41, call 227 (nvidia-h200): ADDS_PTX="old=... new=..." python3 adds-check.py
"""comm's copy-engine adds (kernels/sum.cu) against a reference, on one GPU: for 1, 2, 3 and
7 parts, lengths with and without a scalar tail and shorter than the grid, a stride past the
length, scale 1 and 1/world (Avg), several runs a launch and a misaligned source, each kernel
of ADDS_PTX must write what torch writes (own + each part in order, in f32, × scale,
rounded to bf16 once), bit for bit (the values spread over 48 binades, so that another
order of the adds gives other bits), and the first two kernels the same block sums of
squares. Prints a JSON line a case and {"bench":"adds-check","failed":N} last; exits 1 on
any failure."""
import json, os, sys

import torch

import comm_adds

dev, bf = torch.device("cuda", 0), torch.bfloat16
kernels = {k: comm_adds.load(v) for k, v in (e.split("=") for e in os.environ["ADDS_PTX"].split())}
gen = torch.Generator(device=dev).manual_seed(41)


def spread(n):
    """n bf16 over 48 binades, so that f32 sums depend on their order (a check that bites)."""
    e = torch.randint(-24, 24, (n,), device=dev, generator=gen).float()
    return (torch.randn(n, device=dev, generator=gen) * torch.exp2(e)).to(bf)


def case(parts, lengths, scale, pad=64, skew=0):
    """One launch of len(lengths) runs; returns {kernel: (dsts, sq)} and the references."""
    runs_in = []
    for n in lengths:
        st = -(-n // 8) * 8 + pad  # the parts' stride: past the length, a multiple of 8
        own, src = spread(n + 8), spread(parts * st + 8)
        runs_in.append((own, src, n, st))
    ref = []
    for own, src, n, st in runs_in:
        a = own[:n].float()
        for p in range(parts):
            a = a + src[skew + p * st : skew + p * st + n].float()
        ref.append((a * scale).to(bf))
    out = {}
    for name, f in kernels.items():
        dsts = [own.clone() for own, *_ in runs_in]
        sq = torch.zeros(comm_adds.BLOCKS * len(lengths), device=dev)
        runs = [(d.data_ptr(), d.data_ptr(), src.data_ptr() + 2 * skew, n, st, scale) for d, (_, src, n, st) in zip(dsts, runs_in)]
        comm_adds.launch(f, runs, parts, sq.data_ptr())
        out[name] = ([d[: r[3]] for d, r in zip(dsts, runs)], sq)
    torch.cuda.synchronize()
    return out, ref


failed = 0
for parts in (1, 2, 3, 7):
    for lengths in ([1 << 22], [5_000_003], [1000], [3_000_000, 17, 1 << 20]):
        for scale in (1.0, 1.0 / (parts + 1)):
            for skew in (0, 1) if lengths == [5_000_003] else (0,):
                out, ref = case(parts, lengths, scale, skew=skew)
                bits = lambda t: t.view(torch.int16)
                ok = {k: all(torch.equal(bits(d), bits(r)) for d, r in zip(v[0], ref)) for k, v in out.items()}
                sqs = [v[1].view(torch.int32) for v in out.values()]
                same_sq = len(sqs) < 2 or torch.equal(sqs[0], sqs[1])
                good = all(ok.values()) and same_sq
                failed += not good
                print(json.dumps({"bench": "adds-check", "parts": parts, "lengths": lengths, "scale": scale, "misaligned": bool(skew), "equal_to_reference": ok, "same_squares": same_sq, "ok": good}))
print(json.dumps({"bench": "adds-check", "kernels": list(kernels), "failed": failed}))
sys.exit(1 if failed else 0)
