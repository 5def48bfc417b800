#!/usr/bin/env python3
"""pm_replay_step.py: a PyTorch step of about 504 kernels of very different lengths, for
range replay by PM sampling on a real GPU (scripts/gpu-check-pmreplay.sh; issue 25's
target: per-kernel DRAM bytes, SM and tensor-pipe activity and duration of every kernel
of at least the method's minimum length within 5% of the range profiler, in a step of at
least 500 kernels).

Must never: copy device memory to the host, synchronize, or allocate device memory inside
the marked step (each declines the span), or launch more than 512 kernels in it (flare's
limit per span: more is declined). Every tensor is allocated and filled before the first
step, and every op of the step is one kernel (in-place or out= forms only).

usage: pm_replay_step.py [--steps N] [--mark M] [--ops N] [--scale S] [--matmuls N]
                         [--count-kernels] [--plan]

Only step M (of N) is named "step" in NVTX, the others "warm", so `flare replay --range
step` and ncu's launch range (skip/count) pick the same one. A step issues --ops Python
ops (default 504), each one kernel:

  * memory-bound fp32 ops on tensors of 1 MiB to 512 MiB (three tensors a, b, c per
    size; b is never written): in-place a.mul_(), a.clamp_(), a.add_(scalar) (read +
    write the tensor), a.lerp_(c), torch.mul(a, b, out=c), torch.add(a, b, out=c)
    (two reads, one write), a.addcmul_(b, c) (three reads, one write), and row
    reductions torch.sum / torch.amax over rows of 1,024 (one read; rows of 1,024 keep
    PyTorch's reduction in one kernel with no global-memory pass and no memset);
  * --matmuls (default 8) torch.mm(A, B, out=C): five fp16/bf16 (tensor cores) of
    4096^3 to 8192x16384x8192 and three fp32 (TF32 off) of 2048^3 to 4096^3.

Estimated lengths on the H200 (about 4 TB/s of HBM3e achieved; see --plan): 512 MiB ops
130-540 us, 256 MiB 67-270 us, 128 MiB 35-135 us, 64 MiB 17-70 us, 32 MiB and less 2-35
us (partly L2-resident), matmuls 0.2-3.4 ms; about 188 kernels of 100 us or more (and
about 20 more near 100 us: 128 MiB two-input ops), the step about 65 ms of GPU time. Device memory about 4.9 GiB at --scale 1. --scale S multiplies
every tensor's bytes (and each matmul's flops) by S, for short warm-up runs.

Deterministic (seeded, deterministic algorithms, TF32 and reduced-precision reductions
off): prints one JSON line with the checksum of every tensor after the last step (a
float64 sum each), the ops issued in the marked step and its GPU time (CUDA events
recorded outside the NVTX range). --count-kernels profiles the marked step with
torch.profiler (CUPTI: never under flare or ncu) and adds its kernel count and a
length histogram to the JSON (the same ops run once more for it, after the marked step,
so that run's checksum differs). --plan prints the op list's sizes and estimated lengths
and runs nothing (no torch needed).
"""
import argparse
import json
import math
import os
import random
import sys

# cuBLAS reads this when its handle is made; deterministic algorithms need it.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

SIZES_MIB = (512, 256, 128, 64, 32, 16, 8, 4, 2, 1)
# Ops per size out of 496 (504 with the 8 matmuls); shares kept for other --ops.
WEIGHTS = {512: 80, 256: 120, 128: 60, 64: 50, 32: 40, 16: 40, 8: 36, 4: 30, 2: 20, 1: 20}
# Bytes moved per element of the size's tensor (fp32: 4 per read or write).
KINDS = {
    "mul": 8, "lerp": 12, "sum": 4, "clamp": 8, "mulout": 12, "addcmul": 16,
    "adds": 8, "addout": 12, "amax": 4,
}
KIND_ORDER = ("mul", "lerp", "sum", "clamp", "mulout", "addcmul", "adds", "addout", "amax")
# (dtype, m, k, n): C[m, n] = A[m, k] @ B[k, n]. Large and square-ish so that cuBLAS has
# plenty of tiles and takes one kernel (no split-K reduction kernel).
MATMULS = (
    ("bfloat16", 8192, 8192, 8192),
    ("float32", 4096, 4096, 4096),
    ("float16", 8192, 16384, 8192),
    ("float32", 3072, 3072, 3072),
    ("bfloat16", 6144, 6144, 6144),
    ("float16", 4096, 4096, 4096),
    ("float32", 2048, 2048, 2048),
    ("bfloat16", 4096, 8192, 4096),
)
ROW = 1024  # reduction row length
# For --plan's estimates only (H200): achieved HBM bandwidth, L2-resident bandwidth,
# dense fp16/bf16 and fp32 (no TF32) matmul rates, a kernel's fixed cost.
EST_HBM_BPS, EST_L2_BPS, EST_HALF_FLOPS, EST_FP32_FLOPS, EST_FIXED_US = 4.0e12, 8.0e12, 6.5e14, 5.0e13, 2.0


def apportion(total, weights):
    """Splits total over weights' keys in proportion, largest remainders first."""
    whole = sum(weights.values())
    shares = {key: total * weight / whole for key, weight in weights.items()}
    counts = {key: int(math.floor(share)) for key, share in shares.items()}
    left = total - sum(counts.values())
    for key in sorted(weights, key=lambda k: (counts[k] - shares[k], -k))[:left]:
        counts[key] += 1
    return counts


def tensor_elements(size_mib, scale):
    """Elements of a size's fp32 tensor: a whole number of reduction rows, at least 64."""
    rows = max(64, int(size_mib * scale * (1 << 20) / 4) // ROW)
    return rows * ROW


def matmul_dims(m, k, n, scale):
    """Each dimension times scale^(1/3), a multiple of 128 (at least 256)."""
    factor = scale ** (1.0 / 3.0)
    return tuple(max(256, int(round(d * factor / 128.0)) * 128) for d in (m, k, n))


def plan(ops, scale, matmuls):
    """The step's ops in issue order: ("mm", index) or (kind, size_mib)."""
    mm = min(matmuls, len(MATMULS), ops)
    counts = apportion(ops - mm, WEIGHTS)
    entries = []
    for offset, size in enumerate(SIZES_MIB):
        for index in range(counts[size]):
            entries.append((KIND_ORDER[(index + 2 * offset) % len(KIND_ORDER)], size))
    random.Random(25).shuffle(entries)
    # The matmuls spread evenly through the step, between memory-bound ops.
    for index in range(mm):
        position = (2 * index + 1) * len(entries) // (2 * mm) + index
        entries.insert(position, ("mm", index))
    assert len(entries) == ops
    return entries


def estimate_us(entry, scale):
    kind, arg = entry
    if kind == "mm":
        dtype, m, k, n = MATMULS[arg]
        m, k, n = matmul_dims(m, k, n, scale)
        rate = EST_FP32_FLOPS if dtype == "float32" else EST_HALF_FLOPS
        return EST_FIXED_US + 1e6 * 2.0 * m * k * n / rate
    elements = tensor_elements(arg, scale)
    # Three tensors of the size: 48 MiB and less mostly stay in the 50 MB L2.
    bandwidth = EST_L2_BPS if 3 * elements * 4 <= 48 << 20 else EST_HBM_BPS
    return EST_FIXED_US + 1e6 * KINDS[kind] * elements / bandwidth


def print_plan(args):
    entries = plan(args.ops, args.scale, args.matmuls)
    lengths = [estimate_us(e, args.scale) for e in entries]
    buckets = {"<10us": 0, "10-100us": 0, "100us-1ms": 0, ">=1ms": 0}
    for us in lengths:
        key = "<10us" if us < 10 else "10-100us" if us < 100 else "100us-1ms" if us < 1000 else ">=1ms"
        buckets[key] += 1
    by_size = {}
    order = sorted(zip(entries, lengths), key=lambda e: (e[0][0] == "mm", -e[0][1] if e[0][0] != "mm" else e[0][1]))
    for (kind, arg), us in order:
        key = f"mm {MATMULS[arg][0]} {'x'.join(map(str, matmul_dims(*MATMULS[arg][1:], args.scale)))}" \
            if kind == "mm" else f"{arg} MiB"
        entry = by_size.setdefault(key, {"ops": 0, "est_us_min": us, "est_us_max": us})
        entry["ops"] += 1
        entry["est_us_min"] = round(min(entry["est_us_min"], us), 1)
        entry["est_us_max"] = round(max(entry["est_us_max"], us), 1)
    print(json.dumps({
        "ops": len(entries), "matmuls": sum(1 for k, _ in entries if k == "mm"),
        "estimated_step_ms": round(sum(lengths) / 1e3, 1),
        "estimated_ge_100us": sum(1 for us in lengths if us >= 100),
        "estimated_histogram": buckets,
        "footprint_mib": round(footprint_bytes(args.scale, args.matmuls) / (1 << 20)),
        "by_size": by_size,
    }, indent=1))


def footprint_bytes(scale, matmuls):
    total = sum(3 * 4 * tensor_elements(s, scale) + 4 * tensor_elements(s, scale) // ROW
                for s in SIZES_MIB)
    for dtype, m, k, n in MATMULS[:matmuls]:
        m, k, n = matmul_dims(m, k, n, scale)
        total += (4 if dtype == "float32" else 2) * (m * k + k * n + m * n)
    return total


def build(torch, args, device):
    """The tensors (all allocated and filled here) and the step's ops as closures."""
    generator = torch.Generator(device=device)
    generator.manual_seed(25)
    pool = {}
    for size in SIZES_MIB:
        elements = tensor_elements(size, args.scale)
        a, b, c = (torch.rand(elements, device=device, generator=generator) for _ in range(3))
        reduced = torch.zeros(elements // ROW, device=device)
        pool[size] = (a, b, c, a.view(-1, ROW), c.view(-1, ROW), reduced)
    mats = []
    for dtype_name, m, k, n in MATMULS[:args.matmuls]:
        m, k, n = matmul_dims(m, k, n, args.scale)
        dtype = getattr(torch, dtype_name)
        # Scaled so that each output element is about N(0, 1): no fp16 overflow.
        left = torch.randn(m, k, device=device, dtype=dtype, generator=generator)
        left.mul_(1.0 / math.sqrt(k))
        right = torch.randn(k, n, device=device, dtype=dtype, generator=generator)
        out = torch.zeros(m, n, device=device, dtype=dtype)
        mats.append((left, right, out))

    def op(kind, arg):
        if kind == "mm":
            left, right, out = mats[arg]
            return lambda: torch.mm(left, right, out=out)
        a, b, c, a2, c2, reduced = pool[arg]
        return {
            "mul": lambda: a.mul_(0.9),
            "clamp": lambda: a.clamp_(0.0, 1.0),
            "adds": lambda: a.add_(0.05),
            "lerp": lambda: a.lerp_(c, 0.5),
            "mulout": lambda: torch.mul(a, b, out=c),
            "addout": lambda: torch.add(a, b, alpha=-0.5, out=c),
            "addcmul": lambda: a.addcmul_(b, c, value=0.1),
            "sum": lambda: torch.sum(a2, dim=1, out=reduced),
            "amax": lambda: torch.amax(c2, dim=1, out=reduced),
        }[kind]

    ops = [op(kind, arg) for kind, arg in plan(args.ops, args.scale, args.matmuls)]
    tensors = [t for size in SIZES_MIB for t in (pool[size][0], pool[size][1], pool[size][2],
                                                    pool[size][5])]
    tensors += [t for triple in mats for t in triple]
    return ops, tensors


def count_kernels(torch, run_step):
    """The marked step under torch.profiler: kernels and their lengths (diagnostic)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run_step()
            torch.cuda.synchronize()
        lengths = []
        for event in prof.events():
            if getattr(event, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
            if event.name.startswith(("Memcpy", "Memset", "[memory]")):
                continue
            lengths.append(event.time_range.end - event.time_range.start)  # us
        buckets = {"<10us": 0, "10-100us": 0, "100us-1ms": 0, ">=1ms": 0}
        for us in lengths:
            key = "<10us" if us < 10 else "10-100us" if us < 100 else "100us-1ms" if us < 1000 else ">=1ms"
            buckets[key] += 1
        return {"kernels": len(lengths), "ge_100us": sum(1 for us in lengths if us >= 100),
                "histogram": buckets, "kernel_us_total": round(sum(lengths), 1),
                "longest_us": round(max(lengths), 1) if lengths else None,
                "shortest_us": round(min(lengths), 1) if lengths else None}
    except Exception as error:  # a diagnostic: never fail the run for it
        return {"error": f"{type(error).__name__}: {error}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--mark", type=int, default=3)
    parser.add_argument("--ops", type=int, default=504,
                        help="ops (kernels) in a step; flare declines a span of more than 512")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies every tensor's bytes and every matmul's flops")
    parser.add_argument("--matmuls", type=int, default=len(MATMULS),
                        help=f"matmuls among the ops (0-{len(MATMULS)}; fp16/bf16 and fp32)")
    parser.add_argument("--count-kernels", action="store_true",
                        help="profile the marked step with torch.profiler (never under flare or ncu)")
    parser.add_argument("--plan", action="store_true", help="print the plan and estimates, run nothing")
    args = parser.parse_args()
    if args.ops < 1 or args.scale <= 0 or not 0 <= args.matmuls <= len(MATMULS) \
            or not 1 <= args.mark <= args.steps:
        parser.error("need --ops >= 1, --scale > 0, 0 <= --matmuls <= 8, 1 <= --mark <= --steps")
    if args.plan:
        print_plan(args)
        return 0

    import torch
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(torch.backends.cuda.matmul, flag):
            setattr(torch.backends.cuda.matmul, flag, False)
    device = torch.device("cuda")
    ops, tensors = build(torch, args, device)
    torch.cuda.synchronize()

    def run_step():
        for issue in ops:
            issue()

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    profiled = None
    for step in range(1, args.steps + 1):
        marked = step == args.mark
        if marked:
            start.record()
        torch.cuda.nvtx.range_push("step" if marked else "warm")
        run_step()
        torch.cuda.nvtx.range_pop()
        if marked:
            end.record()
            if args.count_kernels:
                # The same ops again, profiled, after the marked step's range closed.
                profiled = count_kernels(torch, run_step)
    torch.cuda.synchronize()
    checksum = sum(float(torch.sum(t, dtype=torch.float64)) for t in tensors)
    result = {"steps": args.steps, "mark": args.mark, "ops": len(ops), "matmuls": args.matmuls,
              "scale": args.scale, "footprint_mib": round(footprint_bytes(args.scale, args.matmuls) / (1 << 20)),
              "step_ms": round(start.elapsed_time(end), 3), "checksum": checksum}
    if profiled is not None:
        result["profiled"] = profiled
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
