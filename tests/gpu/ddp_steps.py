"""ddp_steps.py: a data-parallel PyTorch training loop with one rank slowed
in known steps, for flare's many-rank check on the H200
(scripts/gpu-check-fleet.sh). Run under torchrun, one process per rank:

    torchrun --standalone --nproc_per_node 2 tests/gpu/ddp_steps.py [options]

Each step is an NVTX range "train_step" (forward, backward, optimizer, then
a device synchronize). In the steps named by --slow-steps (numbered from 1),
rank --slow-rank sleeps --stall-ms on the CPU before its backward: with the
NCCL backend the other ranks then wait in their gradient all-reduce, which
is what flare.fleet must see through to name the slowed rank.

--backend auto (the default) takes NCCL with DistributedDataParallel when
the machine has a GPU per local rank, else no process group at all: the
ranks share GPU 0 and train independently (NCCL refuses two ranks on one
device), and the slowed rank's steps are simply longer.

--seconds S instead of a step count runs until rank 0 has run S seconds
(every rank stops at the same step, agreed through an all-reduce each
step), for a window opened from outside while it runs. Prints
"rank R steps N backend B step_ms_median M" at the end.
"""
import argparse
import os
import statistics
import time

import torch


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--slow-steps", default="5,9")
    parser.add_argument("--stall-ms", type=float, default=80.0)
    parser.add_argument("--backend", choices=("auto", "nccl", "none"), default="auto")
    return parser.parse_args()


def main():
    args = arguments()
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if world > 1 and torch.cuda.device_count() >= world else "none"
    device = torch.device("cuda", local_rank if backend == "nccl" else 0)
    torch.cuda.set_device(device)
    if backend == "nccl":
        torch.distributed.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(device)
    if backend == "nccl":
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    generator = torch.Generator(device=device).manual_seed(1 + rank)
    inputs = torch.randn(512, 1024, device=device, generator=generator)
    targets = torch.randn(512, 1024, device=device, generator=generator)
    slow_steps = {int(s) for s in args.slow_steps.split(",") if s}
    stop = torch.zeros(1, device=device)
    began = time.perf_counter()
    times, step = [], 0
    while True:
        step += 1
        start = time.perf_counter()
        torch.cuda.nvtx.range_push("train_step")
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        if rank == args.slow_rank and step in slow_steps:
            time.sleep(args.stall_ms / 1e3)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        times.append((time.perf_counter() - start) * 1e3)
        if args.seconds <= 0:
            if step >= args.steps:
                break
            continue
        stop.fill_(1.0 if time.perf_counter() - began >= args.seconds else 0.0)
        if backend == "nccl":
            torch.distributed.all_reduce(stop, op=torch.distributed.ReduceOp.MAX)
        if stop.item() > 0:
            break
    print("rank %d steps %d backend %s step_ms_median %.4f loss %.5f"
          % (rank, step, backend, statistics.median(times), loss.item()), flush=True)
    if backend == "nccl":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
