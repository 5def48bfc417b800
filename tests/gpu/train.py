"""train.py: a small PyTorch training loop with NVTX ranges, for flare's GPU
checks and the training-step overhead benchmark (scripts/gpu-check.sh).

Prints "step_ms_median <value>" over the timed steps; the step range is
named "train_step" so the checks can find it in the database.
"""
import statistics
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
torch.manual_seed(0)
device = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.GELU(),
    torch.nn.Linear(4096, 4096), torch.nn.GELU(),
    torch.nn.Linear(4096, 1024),
).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
inputs = torch.randn(256, 1024, device=device)
targets = torch.randn(256, 1024, device=device)
times = []
for step in range(steps + 20):
    torch.cuda.synchronize()
    start = time.perf_counter()
    torch.cuda.nvtx.range_push("train_step")
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    if step >= 20:
        times.append((time.perf_counter() - start) * 1e3)
print(f"loss {loss.item():.5f}")
print(f"step_ms_median {statistics.median(times):.4f}")
