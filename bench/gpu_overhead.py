"""gpu_overhead.py: flare's tracing overhead on a real GPU, as paired runs.

Runs each workload alternately untraced and under `flare trace` (and, for
the PyTorch launch storm, under torch.profiler as the peer), ROUNDS times,
and prints medians and the median of the per-round ratios. Also reports the
peak resident memory of each configuration. Called by scripts/gpu-check.sh;
results are copied into docs/PERFORMANCE.md by hand with date and machine.

usage: gpu_overhead.py FLARE_BIN BUILD_DIR OUT_DIR [ROUNDS]
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

flare, build, out = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
# "storm": the launch storms only; "storm-long": the 1,000,000-launch storm
# only, ROUNDS rounds (the guard's steady state, more rounds for a noisy GPU host);
# "storm-c": the 200,000-launch CUDA C storm only, ROUNDS rounds; "storm-parts":
# the same, flare's callbacks and idle state with and without its NVML sampler
only = sys.argv[5] if len(sys.argv) > 5 else "all"
here = os.path.dirname(os.path.abspath(__file__))
gpu_tests = os.path.join(here, "..", "tests", "gpu")


def run(command, tag):
    """Runs command; returns (the 'key value' line's value, peak RSS in MiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    # ru_maxrss of children is the largest any child reached so far: run each
    # measured command in its own python to read a clean value.
    if result.returncode != 0:
        raise SystemExit(f"{tag} failed ({result.returncode}): {result.stderr[-2000:]}")
    value = None
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("launches_per_second", "step_ms_median"):
            value = float(parts[1])
    return value, wall


def peak_rss_mib(command):
    probe = (
        "import resource, subprocess, sys;"
        "r = subprocess.run(sys.argv[1:], capture_output=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else -1)"
    )
    result = subprocess.run([sys.executable, "-c", probe] + command, capture_output=True,
                            text=True, timeout=600)
    return int(result.stdout.strip() or -1) / 1024.0


def traced(command, session, *settings):
    """flare trace of command; settings are VAR=value pairs for the run."""
    shutil.rmtree(session, ignore_errors=True)
    return ["env", *settings, flare, "trace", "-q", "-o", session, "--"] + command


def paired(name, plain_command, configurations, higher_is_better, round_count=None):
    round_count = round_count or rounds
    values = {"untraced": []}
    for label, _ in configurations:
        values[label] = []
    for round_index in range(round_count):
        values["untraced"].append(run(plain_command, name)[0])
        for label, make in configurations:
            values[label].append(run(make(round_index), f"{name} {label}")[0])
    lines = [f"{name}: {round_count} paired rounds"]
    base = values["untraced"]
    lines.append(f"  untraced            median {statistics.median(base):.2f}   runs {[round(v, 2) for v in base]}")
    for label, _ in configurations:
        series = values[label]
        ratios = [(s / b) if higher_is_better else (b / s) for s, b in zip(series, base)]
        lines.append(f"  {label:<19} median {statistics.median(series):.2f}   "
                     f"paired ratio (throughput vs untraced) median {statistics.median(ratios):.4f}"
                     f"  min {min(ratios):.4f}  runs {[round(v, 2) for v in series]}")
    return "\n".join(lines)


storm = os.path.join(build, "gpu", "launch_storm")
sessions = os.path.join(out, "bench-sessions")
os.makedirs(sessions, exist_ok=True)
report = []
long_storm_configurations = [
    ("flare trace", lambda r: traced([storm, "1000000"], f"{sessions}/lstorm-{r}")),
    ("guard off", lambda r: traced([storm, "1000000"], f"{sessions}/lstorm-g-{r}",
                                   "FLARE_STORM_RATE=0")),
    ("callbacks only", lambda r: traced([storm, "1000000"], f"{sessions}/lstorm-c-{r}",
                                        "FLARE_CUDA_ACTIVITY=0"))]
if only == "storm-c":
    # The CUDA C storm alone, ROUNDS rounds: flare's storm state against
    # tracing with nothing enabled, to resolve a few percent on a noisy host.
    print(paired("launch storm, 200000 tiny kernels (CUDA C), launches/s", [storm, "200000"],
                 [("flare trace", lambda r: traced([storm, "200000"], f"{sessions}/cstorm-{r}")),
                  ("callbacks only", lambda r: traced([storm, "200000"], f"{sessions}/cstorm-c-{r}",
                                                      "FLARE_CUDA_ACTIVITY=0")),
                  ("cupti loaded, idle",
                   lambda r: traced([storm, "200000"], f"{sessions}/cstorm-n-{r}",
                                    "FLARE_CUDA_ACTIVITY=0", "FLARE_CUDA_LAUNCH_CALLBACKS=0"))],
                 higher_is_better=True))
    sys.exit(0)
if only == "storm-parts":
    # What flare's own threads cost in a storm: the NVML sampler (every 100 ms)
    # and PM sampling's install, against the same runs with both quiet.
    quiet = ("FLARE_NVML_INTERVAL_MS=60000", "FLARE_PM=0")
    print(paired("launch storm, 200000 tiny kernels (CUDA C), launches/s", [storm, "200000"],
                 [("callbacks only", lambda r: traced([storm, "200000"], f"{sessions}/pstorm-c-{r}",
                                                      "FLARE_CUDA_ACTIVITY=0")),
                  ("callbacks, quiet", lambda r: traced([storm, "200000"], f"{sessions}/pstorm-q-{r}",
                                                        "FLARE_CUDA_ACTIVITY=0", *quiet)),
                  ("idle", lambda r: traced([storm, "200000"], f"{sessions}/pstorm-n-{r}",
                                            "FLARE_CUDA_ACTIVITY=0",
                                            "FLARE_CUDA_LAUNCH_CALLBACKS=0")),
                  ("idle, quiet", lambda r: traced([storm, "200000"], f"{sessions}/pstorm-nq-{r}",
                                                   "FLARE_CUDA_ACTIVITY=0",
                                                   "FLARE_CUDA_LAUNCH_CALLBACKS=0", *quiet))],
                 higher_is_better=True))
    sys.exit(0)
if only == "storm-long":
    print(paired("long launch storm, 1000000 tiny kernels (CUDA C), launches/s", [storm, "1000000"],
                 long_storm_configurations, higher_is_better=True))
    sys.exit(0)
report.append(paired(
    "launch storm, 200000 tiny kernels (CUDA C), launches/s",
    [storm, "200000"],
    [("flare trace", lambda r: traced([storm, "200000"], f"{sessions}/storm-{r}")),
     ("guard off", lambda r: traced([storm, "200000"], f"{sessions}/storm-g-{r}",
                                    "FLARE_STORM_RATE=0")),
     ("activity only", lambda r: traced([storm, "200000"], f"{sessions}/storm-a-{r}",
                                        "FLARE_CUDA_LAUNCH_CALLBACKS=0")),
     ("callbacks only", lambda r: traced([storm, "200000"], f"{sessions}/storm-c-{r}",
                                         "FLARE_CUDA_ACTIVITY=0")),
     ("cupti loaded, idle", lambda r: traced([storm, "200000"], f"{sessions}/storm-n-{r}",
                                             "FLARE_CUDA_ACTIVITY=0",
                                             "FLARE_CUDA_LAUNCH_CALLBACKS=0"))],
    higher_is_better=True))
# A storm five times longer: the guard's steady state, with its first 50 ms
# (every kernel timed until the storm is confirmed) a smaller share.
report.append(paired(
    "long launch storm, 1000000 tiny kernels (CUDA C), launches/s",
    [storm, "1000000"], long_storm_configurations, higher_is_better=True, round_count=3))
python = sys.executable
torch_storm = os.path.join(gpu_tests, "torch_storm.py")
report.append(paired(
    "launch storm, 200000 tiny kernels (PyTorch), launches/s",
    [python, torch_storm, "200000"],
    [("flare trace", lambda r: traced([python, torch_storm, "200000"], f"{sessions}/tstorm-{r}")),
     ("guard off", lambda r: traced([python, torch_storm, "200000"], f"{sessions}/tstorm-g-{r}",
                                    "FLARE_STORM_RATE=0")),
     ("torch.profiler", lambda r: [python, torch_storm, "200000", "torch-profiler"])],
    higher_is_better=True))
if only == "storm":
    print("\n\n".join(report))
    sys.exit(0)
train = os.path.join(gpu_tests, "train.py")
report.append(paired(
    "PyTorch training step (MLP 1024-4096-4096-1024, batch 256), median step ms",
    [python, train, "300"],
    [("flare trace", lambda r: traced([python, train, "300"], f"{sessions}/train-{r}"))],
    higher_is_better=False))
rss = []
for label, command in (
    ("launch storm untraced", [storm, "200000"]),
    ("launch storm traced", traced([storm, "200000"], f"{sessions}/rss-storm")),
    ("training untraced", [python, train, "300"]),
    ("training traced", traced([python, train, "300"], f"{sessions}/rss-train")),
):
    rss.append((label, peak_rss_mib(command)))
report.append("peak resident memory (MiB, largest process):\n" +
              "\n".join(f"  {label:<24} {value:.1f}" for label, value in rss))
text = "\n\n".join(report)
print(text)
with open(os.path.join(out, "gpu_overhead.txt"), "w") as handle:
    handle.write(text + "\n")
