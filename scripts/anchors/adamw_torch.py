"""PyTorch's fused AdamW alone, as torch_train_best.py builds it (f32 masters and gradients,
two groups: weight decay on the matrices), over torch_best.py's model of SIZE; CUDA-event
timed, the mean of ITERS steps after two. AdamW moves 28 bytes a parameter (p, g, m, v read
and p, m, v written, f32), the same count as `bench adamw`. One JSON line.

  python3 adamw_torch.py [SIZE [ITERS]]
"""
import json, sys
import torch
import torch_best

size = sys.argv[1] if len(sys.argv) > 1 else "xl"
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
d, dff, L, h = torch_best.SIZES[size]
with torch.device("cuda"):
    model = torch_best.LM(d, dff, L, h)
params = list(model.parameters())
for p in params:
    p.grad = torch.full_like(p, 1e-3)
decay = [p for p in params if p.dim() >= 2]
no_decay = [p for p in params if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=1e-4, betas=(0.9, 0.95), fused=True)
for _ in range(2):
    opt.step()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
for _ in range(iters):
    opt.step()
b.record(); torch.cuda.synchronize()
ms = a.elapsed_time(b) / iters
n = sum(p.numel() for p in params)
print(json.dumps({"bench": "adamw_torch", "size": size, "params": n, "tensors": len(params), "iters": iters,
                  "ms": round(ms, 4), "gb_per_s": round(28 * n / (ms * 1e-3) / 1e9, 1), "torch": torch.__version__}))
