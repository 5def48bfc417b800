"""train_step.py: a small PyTorch training loop whose steps are NVTX ranges,
for range replay on a real GPU (scripts/gpu-check-span.sh).

Only the step chosen with --mark is named "step" (the others "warm"), so
flare's --range step and ncu's --nvtx-include step/ pick the same one. The
step does forward, backward and an Adam update with no host read-back
inside the range (a device-to-host copy would decline the span). Prints the
final parameters' checksum as JSON; deterministic algorithms are forced so
runs with and without replay compare exactly.
"""
import argparse
import json

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--mark", type=int, default=4)
    parser.add_argument("--width", type=int, default=1024)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(args.width, args.width),
        torch.nn.GELU(),
        torch.nn.LayerNorm(args.width),
        torch.nn.Linear(args.width, args.width),
        torch.nn.GELU(),
        torch.nn.Linear(args.width, 16),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    inputs = torch.randn(256, args.width, device=device)
    targets = torch.randint(0, 16, (256,), device=device)
    loss_function = torch.nn.CrossEntropyLoss()
    for step in range(1, args.steps + 1):
        torch.cuda.nvtx.range_push("step" if step == args.mark else "warm")
        optimizer.zero_grad(set_to_none=False)
        loss = loss_function(model(inputs), targets)
        loss.backward()
        optimizer.step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    checksum = sum(float(p.double().sum()) for p in model.parameters())
    print(json.dumps({"steps": args.steps, "mark": args.mark, "checksum": checksum,
                      "loss": float(loss)}))


if __name__ == "__main__":
    main()
