"""slow_phase.py: a deterministic PyTorch program with one slow phase, for
part "triggered" of scripts/gpu-check.sh (scripts/gpu-check-triggered.sh,
tests/gpu/check_triggered_more.py; issue 23: triggered replay must leave a
program's results bit-identical and replay the slow phase's kernel).

STEPS steps (default 60), each inside an NVTX push/pop range "step": two
1024x1024 fp64 matmuls and a few element-wise ops on a small state, every
kernel well under 2 ms (fp64, so that no kernel of theirs can share the slow
fp32 matmul's name: a rule's replay is of the chosen kernel name's next
launch). In the slow phase (steps --slow-first to
--slow-first + --slow-count - 1, default 25 to 49) each step also runs
--slow-matmuls (default 4) chained fp32 8192x8192x8192 matmuls, about 21.6 ms
each on the H200 (the one kind of kernel over 10 ms in the run), each
followed by a tanh, and mixes that big state into the small one. Outside
the phase each step sleeps 40 ms after its work (outside its range), so the
phases last long enough for a rule to warm up and fire: about 1.4 s
before, 2.5 s in and 0.5 s after the phase on the H200 (estimated).

Every op inside a step writes into tensors allocated before the first step
(out= and in-place forms), and nothing inside a step reads back to the
host: a device allocation, a free or a device-to-host copy inside the span
would make `action range step` decline it. After each step, outside its
range, the small state (and in the phase a fold of the big state) is
copied to the host and hashed.

usage: slow_phase.py HASH_FILE TIMES_JSON [--steps N] [--slow-first K]
                     [--slow-count C] [--slow-matmuls M]
  HASH_FILE   gets the sha256 (hex) of every step's results in order, then
              of the final big state (folded): equal across runs on one GPU.
  TIMES_JSON  gets {"steps", "phase": {"first_step", "last_step",
              "start_ns", "end_ns"}, "step_ns": [[start, end], ...],
              "sha256"}, times from time.monotonic_ns() (CLOCK_MONOTONIC,
              flare's clock): a step from before its range opens to after
              its results were hashed; the phase from its first step's
              start to its last step's end.

Must never use a non-deterministic op, launch a kernel over 2 ms outside
the phase (a kernel-duration rule would fire outside it; so no warm-up
matmul of the big size), allocate, free or read back inside a step, or
depend on anything but its arguments (seed, sizes and the cuBLAS workspace
setting are fixed here, whatever the environment says).
"""
import argparse
import ctypes
import hashlib
import json
import os
import time

# Fixed before torch (and cuBLAS) load: deterministic cuBLAS needs a fixed
# workspace configuration, and the environment must not change it.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import torch  # noqa: E402  (after the cuBLAS setting, on purpose)

SMALL = 1024
BIG = 8192


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hash_file")
    parser.add_argument("times_json")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--slow-first", type=int, default=25)
    parser.add_argument("--slow-count", type=int, default=25)
    parser.add_argument("--slow-matmuls", type=int, default=4)
    args = parser.parse_args()
    slow_first = args.slow_first
    slow_last = min(args.slow_first + args.slow_count, args.steps) - 1
    if slow_last < slow_first:
        raise SystemExit(f"no slow phase: steps {args.steps}, phase from step {slow_first}")

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        torch.use_deterministic_algorithms(True)
    except Exception as error:  # an old torch without it: the ops below are deterministic
        print(f"use_deterministic_algorithms: {error}")
    device = torch.device("cuda")

    # Everything a step touches, allocated (and its random values made) up
    # front. Weights are scaled so that each layer keeps values near 1.
    small = {"device": device, "dtype": torch.float64}
    x = torch.randn(SMALL, SMALL, **small).tanh_()
    w1 = torch.randn(SMALL, SMALL, **small).div_(SMALL ** 0.5)
    w2 = torch.randn(SMALL, SMALL, **small).div_(SMALL ** 0.5)
    h = torch.empty(SMALL, SMALL, **small)
    y = torch.empty(SMALL, SMALL, **small)
    pull = torch.empty(SMALL, SMALL, **small)
    big_x = torch.randn(BIG, BIG, device=device).tanh_()
    big_w = torch.randn(BIG, BIG, device=device).mul_(1.5 / BIG ** 0.5)
    big_y = torch.empty(BIG, BIG, device=device)
    fold = torch.empty(SMALL * SMALL, device=device)
    corner = big_x[:SMALL, :SMALL]  # a view: no memory of its own
    # cuBLAS's handle and workspace are made at the first matmul: here, so
    # that no step allocates (h is overwritten by step 0).
    torch.mm(x, w1, out=h)
    torch.cuda.synchronize()

    hasher = hashlib.sha256()

    def absorb(tensor):
        """Copies tensor to the host (outside any step) and hashes its bytes."""
        host = tensor.detach().to("cpu").contiguous()
        hasher.update(ctypes.string_at(host.data_ptr(), host.numel() * host.element_size()))

    def fold_big():
        """The big state, folded to SMALL*SMALL values on the device (a sum
        over 64 slices: torch's reductions are deterministic on one GPU)."""
        torch.sum(big_x.view(BIG * BIG // (SMALL * SMALL), SMALL * SMALL), dim=0, out=fold)
        return fold

    step_ns = []
    for step in range(args.steps):
        slow = slow_first <= step <= slow_last
        start = time.monotonic_ns()
        torch.cuda.nvtx.range_push("step")
        torch.mm(x, w1, out=h)
        h.relu_()
        torch.mm(h, w2, out=y)
        y.add_(x)
        torch.tanh(y, out=x)
        if slow:
            corner.copy_(x)  # fp64 to fp32, into a strided view: a copy kernel
            for _ in range(args.slow_matmuls):
                torch.mm(big_x, big_w, out=big_y)
                torch.tanh(big_y, out=big_x)
            pull.copy_(corner)  # and back to fp64: a copy kernel
            x.add_(pull, alpha=0.5)
            x.tanh_()
        torch.cuda.nvtx.range_pop()
        absorb(x)
        if slow:
            absorb(fold_big())
        step_ns.append([start, time.monotonic_ns()])
        if not slow:
            time.sleep(0.04)
    absorb(fold_big())
    torch.cuda.synchronize()

    digest = hasher.hexdigest()
    with open(args.hash_file, "w") as handle:
        handle.write(digest + "\n")
    times = {
        "steps": args.steps,
        "phase": {"first_step": slow_first, "last_step": slow_last,
                  "start_ns": step_ns[slow_first][0], "end_ns": step_ns[slow_last][1]},
        "step_ns": step_ns,
        "sha256": digest,
    }
    with open(args.times_json, "w") as handle:
        json.dump(times, handle)
    phase_s = (times["phase"]["end_ns"] - times["phase"]["start_ns"]) / 1e9
    print(f"slow_phase: {args.steps} steps, phase steps {slow_first}-{slow_last} "
          f"({phase_s:.2f} s), sha256 {digest[:16]}")


if __name__ == "__main__":
    main()
