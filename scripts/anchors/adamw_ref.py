"""Reference values for crates/model/tests/adamw.rs: torch.optim.AdamW on fixed inputs."""
import torch
p = torch.tensor([0.5, -1.25, 2.0, 0.0, 3.5, -0.75], dtype=torch.float32, requires_grad=True)
grads = [[0.1, -0.2, 0.3, 0.0, -1.5, 2.5], [-0.05, 0.4, 0.3, 1e-4, -1.0, 0.5], [0.2, 0.2, -0.3, -2.0, 0.0, 0.25]]
opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
for g in grads:
    p.grad = torch.tensor(g, dtype=torch.float32)
    opt.step()
print("adamw_ref torch", torch.__version__, [f"{x:.9g}" for x in p.detach().tolist()])
