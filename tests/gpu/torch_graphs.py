"""torch_graphs.py: a PyTorch model captured as a torch.cuda.CUDAGraph and
replayed under NVTX ranges, for flare's graph checks
(scripts/gpu-check-graphs.sh, tests/gpu/check_graphs.py).

usage: torch_graphs.py REPLAYS
Replays the captured forward pass REPLAYS times inside the NVTX range
"replay", and runs it 3 times eagerly inside "eager"; checks that the
replayed output equals the eager one.
"""
import sys

import torch

replays = int(sys.argv[1]) if len(sys.argv) > 1 else 20
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 512)).cuda().eval()
static_input = torch.randn(64, 512, device="cuda")
with torch.no_grad():
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up before capture, as PyTorch requires
            model(static_input)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = model(static_input)
    torch.cuda.synchronize()

    torch.cuda.nvtx.range_push("replay")
    for _ in range(replays):
        graph.replay()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    replayed = static_output.clone()

    torch.cuda.nvtx.range_push("eager")
    for _ in range(3):
        eager = model(static_input)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
if not torch.allclose(replayed, eager, rtol=1e-4, atol=1e-5):
    sys.exit("torch_graphs: replayed output differs from eager")
print(f"torch_graphs ok: {replays} replays")
