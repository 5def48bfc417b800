"""launch_loop.py: a launch-bound PyTorch training loop (issue 22's workload):
a small MLP (3 linear layers of 512, ReLU, batch 64, SGD with momentum),
about 20 kernels per step of about 1 ms, one NVTX range per step, so that
the GPU waits on the launching thread and every microsecond a tracer adds
to a launch shows in the step time.

Prints "step_ms <value>", the wall time of the timed steps (after 20
warm-up steps, up to the last kernel's end) over their count: the loop's
throughput, what a user sees; also "step_ms_median" of single steps (which
leave out the synchronisations every 100 steps) and "steps <n>". With --torch-profiler cpu+cuda or cuda the steps run
inside torch.profiler (the peers flare is compared with).

--width N --batch N make the layers and the batch larger: 4096 and 4096
make the same loop GPU-bound (about 20 ms a step), the other end of the
overhead scale.

--step-log FILE writes, after the run, one line per timed step, "START_NS
END_NS" from time.monotonic_ns() (CLOCK_MONOTONIC, the clock of
bench/cupti_bare_inject.c's switch log) at the same points as the single
steps' times: around the step's launches, and its synchronisation when it
is one of every 100 (loop index % 100 == 99; the timed steps follow 20
warm-up steps, so line k is loop index k + 20). bench/gpu_cupti_alternate.py
reads it.

usage: launch_loop.py [STEPS=1500] [--torch-profiler cpu+cuda|cuda] [--width N] [--batch N]
                      [--step-log FILE]
"""
import contextlib
import statistics
import sys
import time

import torch


def option(name, default):
    """The value after --name, or default."""
    if name not in sys.argv:
        return default
    return sys.argv[sys.argv.index(name) + 1]


steps = int(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else 1500
profiler = option("--torch-profiler", None)
width = int(option("--width", 512))
batch = int(option("--batch", 64))
step_log = option("--step-log", None)
torch.manual_seed(0)
device = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(width, width), torch.nn.ReLU(),
    torch.nn.Linear(width, width), torch.nn.ReLU(),
    torch.nn.Linear(width, width),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)
inputs = torch.randn(batch, width, device=device)
targets = torch.randn(batch, width, device=device)

if profiler is None:
    context = contextlib.nullcontext()
else:
    activities = [torch.profiler.ProfilerActivity.CUDA]
    if profiler == "cpu+cuda":
        activities.append(torch.profiler.ProfilerActivity.CPU)
    elif profiler != "cuda":
        raise SystemExit(f"--torch-profiler {profiler}: expected cpu+cuda or cuda")
    context = torch.profiler.profile(activities=activities)

times = []
marks = [None] * steps if step_log is not None else None  # (start_ns, end_ns) per timed step
timed_from = None
with context:
    for step in range(steps + 20):
        start_ns = time.monotonic_ns()
        start = time.perf_counter()
        if step == 20:
            timed_from = start
        torch.cuda.nvtx.range_push("train_step")
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        torch.cuda.nvtx.range_pop()
        # No synchronisation per step: the launching thread runs ahead of
        # the GPU as a real loop does; the step time is the launch rate's.
        if step % 100 == 99:
            torch.cuda.synchronize()
        if step >= 20:
            times.append((time.perf_counter() - start) * 1e3)
            if marks is not None:
                marks[step - 20] = (start_ns, time.monotonic_ns())
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - timed_from
print(f"loss {loss.item():.5f}")
print(f"steps {steps + 20}")
print(f"step_ms {elapsed * 1e3 / steps:.4f}")
print(f"step_ms_median {statistics.median(times):.4f}")
if step_log is not None:
    with open(step_log, "w") as log:
        log.writelines(f"{begin} {end}\n" for begin, end in marks)
