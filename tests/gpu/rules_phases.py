"""rules_phases.py: a PyTorch program of known phases, for the rules check
(scripts/gpu-check-rules.sh, tests/gpu/check_rules.py).

usage: rules_phases.py PHASES TIMES_JSON
  PHASES: comma-separated KIND:SECONDS, KIND one of
    idle    the GPU does nothing
    heavy   back-to-back fp32 8192x8192 matmuls (about 21.6 ms each on the H200)
    tensor  back-to-back bf16 16384x16384 matmuls (tensor cores, at the power limit)
    storm   tiny element-wise ops as fast as the host can launch them
    memory  holds a 40 GiB allocation (NVML memory used rises by that much)
    tokens  the application counter "tokens" grows by about 2,000 a second,
            the GPU idle (flare_counter_add through the injected libflare)
Each phase runs inside an NVTX range named after its kind. TIMES_JSON gets
[{"kind", "start_ns", "end_ns"}] in CLOCK_MONOTONIC nanoseconds, flare's
clock, so the check compares them with the session's times directly.
"""
import ctypes
import json
import os
import sys
import time

import torch

phases = [(kind, float(seconds)) for kind, seconds in
          (item.split(":") for item in sys.argv[1].split(","))]
times_path = sys.argv[2]
device = torch.device("cuda")
a = torch.randn(8192, 8192, device=device)
b = torch.randn(8192, 8192, device=device)
c = torch.empty(8192, 8192, device=device)
x = torch.randn(16384, 16384, device=device, dtype=torch.bfloat16)
y = torch.randn(16384, 16384, device=device, dtype=torch.bfloat16)
z = torch.empty(16384, 16384, device=device, dtype=torch.bfloat16)
tiny = torch.zeros(16, device=device)
# No matmul before the phases: a long kernel here would be in a
# kernel-duration rule's first window, before any phase began.
torch.cuda.synchronize()

# The counter lives in the libflare the driver injected: loading the same
# path again returns that library, so the counter is the session's.
counter = None
library_path = os.environ.get("CUDA_INJECTION64_PATH")
if library_path:
    flare = ctypes.CDLL(library_path)
    counter = ctypes.c_void_p()
    if flare.flare_counter_get(b"tokens", ctypes.byref(counter)) != 0:
        sys.exit("flare_counter_get failed")
    flare.flare_counter_add.argtypes = [ctypes.c_void_p, ctypes.c_int64]


def run_matmuls(until, left, right, out):
    # At most two matmuls queued, so the phase ends on the GPU when it ends
    # on the host (within one matmul).
    done = torch.cuda.Event()
    while time.monotonic_ns() < until:
        torch.mm(left, right, out=out)
        done.record()
        torch.mm(left, right, out=out)
        done.synchronize()


def run_heavy(until):
    run_matmuls(until, a, b, c)


def run_tensor(until):
    # bf16 tensor-core matmuls: the most power the GPU can draw, so its
    # power limit, not the clock policy, sets the SM clock.
    run_matmuls(until, x, y, z)


def run_storm(until):
    while time.monotonic_ns() < until:
        for _ in range(500):
            tiny.add_(1.0)
        torch.cuda.synchronize()


def run_memory(until):
    held = torch.empty(40 << 30, dtype=torch.uint8, device=device)
    while time.monotonic_ns() < until:
        time.sleep(0.01)
    del held
    torch.cuda.empty_cache()


def run_tokens(until):
    if counter is None:
        sys.exit("tokens phase needs the injected libflare (run under flare trace)")
    while time.monotonic_ns() < until:
        flare.flare_counter_add(counter, 1)
        time.sleep(0.0005)


def run_idle(until):
    while time.monotonic_ns() < until:
        time.sleep(0.01)


runners = {"idle": run_idle, "heavy": run_heavy, "tensor": run_tensor, "storm": run_storm,
           "memory": run_memory, "tokens": run_tokens}
record = []
for kind, seconds in phases:
    start = time.monotonic_ns()
    torch.cuda.nvtx.range_push(kind)
    runners[kind](start + int(seconds * 1e9))
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    record.append({"kind": kind, "start_ns": start, "end_ns": time.monotonic_ns()})
with open(times_path, "w") as handle:
    json.dump(record, handle)
print("phases", " ".join(f"{p['kind']}:{(p['end_ns'] - p['start_ns']) / 1e9:.2f}s" for p in record))
