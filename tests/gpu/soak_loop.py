"""soak_loop.py: train.py's MLP step (about 40 kernels and an NVTX range per
step), repeated for SECONDS, keeping nothing per step, so that the resident
memory a soak run watches is flare's and PyTorch's steady state, not a
growing list of step times (tests/gpu/soak.py).

usage: soak_loop.py SECONDS
"""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
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
deadline = time.monotonic() + seconds
steps = 0
while time.monotonic() < deadline:
    torch.cuda.nvtx.range_push("train_step")
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    torch.cuda.nvtx.range_pop()
    steps += 1
    if steps % 64 == 0:
        torch.cuda.synchronize()  # bounds the queue, as a real loop's logging would
torch.cuda.synchronize()
print(f"steps {steps}")
