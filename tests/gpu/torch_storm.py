"""torch_storm.py: N tiny kernels launched from PyTorch (an in-place add on a
one-element tensor), optionally under torch.profiler, the peer flare's
launch-storm overhead is compared with. Prints "launches_per_second <v>".

usage: torch_storm.py N [plain|torch-profiler]
"""
import sys
import time

import torch

launches = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
mode = sys.argv[2] if len(sys.argv) > 2 else "plain"
x = torch.zeros(1, device="cuda")
for _ in range(1000):
    x.add_(1)
torch.cuda.synchronize()


def storm():
    start = time.perf_counter()
    for _ in range(launches):
        x.add_(1)
    torch.cuda.synchronize()
    return time.perf_counter() - start


if mode == "torch-profiler":
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        seconds = storm()
else:
    seconds = storm()
print(f"launches_per_second {launches / seconds:.1f}")
