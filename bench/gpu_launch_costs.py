"""gpu_launch_costs.py: where each kernel launch's cost goes under flare, part
by part, with bare CUPTI beside it in the same rounds (issue 22, item 1).

Each round runs one workload under every configuration below, in an order
rotated every round, all pinned to the same CPUs (FLARE_BENCH_CPUS, default
2-5). A configuration's cost in a round is its time per kernel minus the
untraced run's of the same round; a part's cost is the median over rounds
of the difference between two configurations that differ by that part
alone. Bare-CUPTI configurations load bench/cupti_bare_inject.c's library
through CUDA_INJECTION64_PATH: CUPTI with the same features flare turns on
and nothing of flare in the process, the floor under each of flare's modes.

Workloads (PART): loop, tests/gpu/launch_loop.py 1000 (a launch-bound
PyTorch MLP step, about 20 kernels and an NVTX range per ms; torch.profiler
beside flare); storm, tests/gpu/launch_storm 200000 (empty CUDA C
launches, every layer); gpubound, launch_loop.py 100 with 4096-wide layers
and batch 4096.

After the rounds, one more run of each flare mode is watched from outside
(/proc every 50 ms) for the CPU time of the traced process's threads:
flare-collector, flare-delivery, flare-sampler and CUPTI's own.

usage: gpu_launch_costs.py FLARE BUILD_DIR WORK PART [ROUNDS=9] [BUDGET_S=420]
Rounds stop early when the next would end past BUDGET_S (the device tool's
10-minute call); the rounds run are printed. FLARE_COSTS_CONFIGS=a,b,...
runs only those configurations (and untraced).
"""
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time

flare, build, work, part = sys.argv[1:5]
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 9
budget_s = float(sys.argv[6]) if len(sys.argv) > 6 else 420.0
here = os.path.dirname(os.path.abspath(__file__))
gpu_tests = os.path.join(here, "..", "tests", "gpu")
inject = os.path.join(build, "gpu", "libcupti_bare_inject.so")
cpus = os.environ.get("FLARE_BENCH_CPUS", "2-5")
pinning = ["taskset", "-c", cpus] if cpus else []


loop = os.path.join(gpu_tests, "launch_loop.py")
if part == "loop":
    workload, key, per_run_kernels = [sys.executable, loop, "1000"], "step_ms", None
elif part == "gpubound":
    workload = [sys.executable, loop, "100", "--width", "4096", "--batch", "4096"]
    key, per_run_kernels = "step_ms", None
elif part == "storm":
    workload = [os.path.join(build, "gpu", "launch_storm"), "200000"]
    key, per_run_kernels = "launches_per_second", 1
else:
    raise SystemExit(f"unknown part {part}: expected loop, storm or gpubound")

# The CUPTI features of flare's modes (src/backend/cuda/cuda_trace.c):
# light = activity + NVTX; standard = light + launch and copy callbacks.
ACTIVITY = "kernel,copies,extcorr,clock"
LIGHT = ACTIVITY + ",nvtx"
STANDARD = LIGHT + ",callbacks,copy_callbacks"
# (tag, what it adds, kind, settings)
configs = [
    ("untraced", "the program alone", "plain", None),
    ("bare-idle", "CUPTI loaded by an injection, nothing enabled", "bare", ""),
    ("bare-kernel", "+ CONCURRENT_KERNEL activity, flare's clock, a 100 ms flush", "bare",
     "kernel,clock"),
    ("bare-activity", "+ MEMCPY, MEMSET, EXTERNAL_CORRELATION activity", "bare", ACTIVITY),
    ("bare-light", "+ NVTX through CUPTI (flare's light mode in bare CUPTI)", "bare", LIGHT),
    ("bare-standard", "+ driver launch and copy callbacks (flare's standard mode)", "bare",
     STANDARD),
    ("flare-idle", "flare trace, CUPTI activity and callbacks off", "flare",
     ["--mode", "light", "FLARE_CUDA_ACTIVITY=0"]),
    ("flare-light", "flare trace --mode light", "flare", ["--mode", "light"]),
    ("flare-standard", "flare trace (the default, --mode standard)", "flare",
     ["--mode", "standard"]),
    ("flare-noapi", "flare trace --mode standard, API calls off", "flare",
     ["--mode", "standard", "FLARE_CUDA_API_CALLS=0"]),
    ("flare-nodelivery", "flare trace --mode standard, no 100 ms delivery flush", "flare",
     ["--mode", "standard", "FLARE_DELIVERY_MS=0"]),
]
if part == "storm":
    configs.append(("flare-full", "flare trace --mode full (every launch timed)", "flare",
                    ["--mode", "full"]))
if part == "loop":
    # The storm has every layer; the loop's runs are longer (Python, torch
    # import), so it keeps the layers that split a launch's cost into
    # CUPTI's parts and flare's, and the peers.
    keep = ("untraced", "bare-kernel", "bare-light", "bare-standard", "flare-light",
            "flare-standard", "flare-noapi")
    configs = [c for c in configs if c[0] in keep]
    configs += [("torch-cpu-cuda", "torch.profiler, CPU + CUDA activities", "torch", "cpu+cuda"),
                ("torch-cuda", "torch.profiler, CUDA activity only", "torch", "cuda")]
if part == "gpubound":
    configs = [c for c in configs if c[0] in ("untraced", "bare-standard", "flare-light",
                                              "flare-standard")]

if os.environ.get("FLARE_COSTS_CONFIGS"):  # a comma list: only these (and untraced)
    wanted = set(os.environ["FLARE_COSTS_CONFIGS"].split(",")) | {"untraced"}
    configs = [c for c in configs if c[0] in wanted]


def command_of(config, session):
    tag, _, kind, settings = config
    if kind == "plain":
        return pinning + workload
    if kind == "torch":
        return pinning + workload + ["--torch-profiler", settings]
    if kind == "bare":
        env = ["env", f"CUDA_INJECTION64_PATH={inject}", f"BARE_CUPTI={settings}"]
        if "nvtx" in settings.split(","):
            # The injection library forwards NVTX to the CUPTI it is bound
            # to, as flare does: PyTorch loads its own libcupti, and naming
            # the toolkit's here would load a second one with no subscriber.
            env.append(f"NVTX_INJECTION64_PATH={inject}")
        return env + pinning + workload
    options = [s for s in settings if "=" not in s]
    env = ["env"] + [s for s in settings if "=" in s]
    return env + pinning + [flare, "trace", "-q", "-o", session] + options + ["--"] + workload


def run(config, session, watch=False):
    """Runs one configuration; returns (value, stdout, thread CPU by name)."""
    shutil.rmtree(session, ignore_errors=True)
    process = subprocess.Popen(command_of(config, session), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    cpu = {}
    if watch:
        watcher = threading.Thread(target=watch_threads, args=(process, cpu))
        watcher.start()
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit(f"{config[0]} timed out after 300 s")
    if watch:
        watcher.join()
    if process.returncode != 0:
        raise SystemExit(f"{config[0]} failed ({process.returncode}): {stderr[-1500:]}")
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == key:
            return float(words[1]), stdout, cpu
    raise SystemExit(f"{config[0]}: no '{key}' line in {stdout[-500:]!r}")


def descendants(pid):
    """Every process under pid (flare's launcher, then the program)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        try:
            with open(f"/proc/{current}/task/{current}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            children = []
        found += children
        queue += children
    return found


def watch_threads(process, cpu):
    """Last seen utime+stime (s) of each thread of the program, by name."""
    ticks = os.sysconf("SC_CLK_TCK")
    while process.poll() is None:
        for pid in descendants(process.pid):
            seen = {}
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        name = f.read().strip()
                    with open(f"/proc/{pid}/task/{tid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                seen[name] = seen.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
            for name, value in seen.items():
                cpu[name] = max(cpu.get(name, 0.0), value)
        time.sleep(0.05)


def kernels_per_run(session, stdout):
    """Kernels the program launched per timed unit: per step for the loops."""
    database = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
    kernels = database.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
    steps = next(int(line.split()[1]) for line in stdout.splitlines()
                 if line.startswith("steps "))
    return kernels / steps, kernels


started = time.monotonic()
values = []  # values[r][tag]
per_kernel = None if per_run_kernels is None else float(per_run_kernels)
kernels_total = None
round_times = []
for r in range(rounds):
    if round_times and time.monotonic() - started + max(round_times) > budget_s:
        print(f"# stopped after {r} rounds: the next would end past {budget_s:.0f} s")
        break
    round_start = time.monotonic()
    seen = {}
    order = configs[r % len(configs):] + configs[:r % len(configs)]
    for config in order:
        session = os.path.join(work, "costs-" + config[0])
        seen[config[0]], stdout, _ = run(config, session)
        if per_kernel is None and config[0] == "flare-standard":
            per_kernel, kernels_total = kernels_per_run(session, stdout)
        shutil.rmtree(session, ignore_errors=True)
    values.append(seen)
    round_times.append(time.monotonic() - round_start)

is_time = key == "step_ms"


def added_ns(value, plain):
    """Added time per kernel (ns) of a run against the untraced run."""
    if is_time:
        return (value - plain) * 1e6 / per_kernel
    return 1e9 / value - 1e9 / plain


def speed(value, plain):
    return plain / value if is_time else value / plain


print(f"== {part}: {' '.join(workload[1:] if part != 'storm' else workload[-1:])}, "
      f"{len(values)} paired rounds, rotating order, pinned to CPUs {cpus or 'any'}, "
      f"{time.monotonic() - started:.0f} s")
print(f"kernels per timed unit: {per_kernel:.2f}" + (f" ({kernels_total} kernels in the "
                                                     f"flare-standard session)"
                                                     if kernels_total else ""))
print(f"{'configuration':<17} {'median ' + key:>22} {'speed vs untraced':>18} "
      f"{'(min-max)':>13} {'added ns/kernel':>16}  what it adds")
for tag, what, _, _ in configs:
    series = [v[tag] for v in values if tag in v]
    ratios = [speed(v[tag], v["untraced"]) for v in values]
    added = [added_ns(v[tag], v["untraced"]) for v in values]
    print(f"{tag:<17} {statistics.median(series):22.4f} {statistics.median(ratios):18.4f} "
          f"{min(ratios):6.3f}-{max(ratios):.3f} {statistics.median(added):16.0f}  {what}")

parts = [
    ("CUPTI loaded (injection, nothing on)", "bare-idle", "untraced"),
    ("CUPTI kernel activity", "bare-kernel", "bare-idle"),
    ("CUPTI copy, memset, external-correlation activity", "bare-activity", "bare-kernel"),
    ("NVTX through CUPTI", "bare-light", "bare-activity"),
    ("CUPTI driver launch + copy callbacks", "bare-standard", "bare-light"),
    ("flare's own work, light mode (beyond bare CUPTI light)", "flare-light", "bare-light"),
    ("flare's own work, standard mode (beyond bare CUPTI standard)", "flare-standard",
     "bare-standard"),
    ("flare's API-call recording", "flare-standard", "flare-noapi"),
    ("flare's 100 ms delivery flush", "flare-standard", "flare-nodelivery"),
    ("flare idle (threads, CUPTI loaded, nothing on)", "flare-idle", "untraced"),
    ("standard mode over light mode", "flare-standard", "flare-light"),
]
print("\nparts: median over rounds of the difference in added ns per kernel")
for name, a, b in parts:
    if not all(a in v and b in v for v in values):
        continue
    differences = [added_ns(v[a], v["untraced"]) - added_ns(v[b], v["untraced"]) for v in values]
    print(f"  {name:<62} {statistics.median(differences):8.0f} ns  "
          f"(rounds {min(differences):.0f} to {max(differences):.0f})")
for tag, floor in (("flare-light", "bare-light"), ("flare-standard", "bare-standard")):
    if all(tag in v and floor in v for v in values):
        ratios = [speed(v[tag], v[floor]) for v in values]
        print(f"  {tag} / {floor} (speed): {statistics.median(ratios):.4f}")

print("\nCPU time of the traced program's threads, one watched run per mode (s):")
for config in configs:
    if config[2] != "flare" or config[0] in ("flare-noapi", "flare-nodelivery"):
        continue
    session = os.path.join(work, "costs-watch")
    _, stdout, cpu = run(config, session, watch=True)
    if part == "storm":  # the storm's launches and its 1,000 warm-up ones
        kernels = int(workload[-1]) + 1000
    else:
        kernels = per_kernel * int(next(line.split()[1] for line in stdout.splitlines()
                                        if line.startswith("steps ")))
    shown = sorted(((v, n) for n, v in cpu.items() if v >= 0.01), reverse=True)
    print(f"  {config[0]}: " + ", ".join(
        f"{n} {v:.2f} ({v * 1e9 / kernels:.0f} ns/kernel)" if n.startswith("flare-")
        else f"{n} {v:.2f}" for v, n in shown))
    shutil.rmtree(session, ignore_errors=True)
