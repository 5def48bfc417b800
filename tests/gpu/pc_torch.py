"""pc_torch.py: a PyTorch program whose GPU time goes to a few known kernels, for
part "pcwindow" of scripts/gpu-check.sh (scripts/gpu-check-pcwindow.sh; issue 26: "the
same for a PyTorch program: samples land in the kernels that took the window's GPU time",
checked by tests/gpu/pc_torch_check.py).

For --seconds (default 4) it runs steps, each inside an NVTX push/pop range "step" with
two ranges of its own: "matmul_part" (two chained fp32 4096x4096 matmuls, TF32 off: the
cuBLAS GEMM kernel) and "pointwise_part" (element-wise ops on 64 M floats: a fused
multiply-add and a tanh, each its own torch kernel). The two parts take GPU time of the
same order, so a window over the steps sees several kernels that each hold a real share
of the GPU's time. Each step ends with a synchronize (outside the parts), so the program
launches often enough for a PC window's start and stop, which are made at its launches.

Prints "steps N" and "checksum X" at the end (a value that depends on every step, so the
work cannot be skipped); exit 0.

usage: pc_torch.py [--seconds S]

Must never read anything but its arguments, or write anything but standard output.
"""
import argparse
import time

import torch

SIZE = 4096
POINTWISE = 64 * 1024 * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    device = torch.device("cuda")
    a = torch.randn(SIZE, SIZE, device=device).div_(SIZE ** 0.5)
    b = torch.randn(SIZE, SIZE, device=device)
    c = torch.empty(SIZE, SIZE, device=device)
    d = torch.empty(SIZE, SIZE, device=device)
    u = torch.randn(POINTWISE, device=device)
    v = torch.randn(POINTWISE, device=device)
    w = torch.empty(POINTWISE, device=device)
    torch.mm(a, b, out=c)  # cuBLAS's handle and workspace, before the first step
    torch.cuda.synchronize()

    steps = 0
    checksum = 0.0
    began = time.monotonic()
    while time.monotonic() - began < args.seconds:
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push("matmul_part")
        torch.mm(a, b, out=c)
        torch.mm(a, c, out=d)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("pointwise_part")
        for _ in range(12):
            torch.addcmul(u, v, v, value=1e-3, out=w)
            torch.tanh(w, out=u)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        steps += 1
        if steps % 16 == 0:
            checksum += float(d[0, :8].sum()) + float(u[:8].sum())
    checksum += float(d[0, :8].sum()) + float(u[:8].sum())
    print(f"steps {steps}")
    print(f"checksum {checksum:.6e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
