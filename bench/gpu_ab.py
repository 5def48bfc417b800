"""gpu_ab.py: two builds of flare against each other on a real GPU, paired.

For a change that must not move the numbers (a refactor), each round runs the
PyTorch training loop (tests/gpu/train.py) under the base build's
`flare trace`, under the new build's, and under the new build's with
FLARE_DELIVERY_MS=0 and with FLARE_PM=0 (PM sampling not prepared), and
untraced, rotating which goes first, and reads the median step
time and the peak resident memory of the largest process of each run. Prints medians and the median of the per-round
new/base ratios. Called by `scripts/gpu-check.sh ab`; results are copied
into docs/PERFORMANCE.md by hand with date and machine.

Then the CUDA C launch storm (tests/gpu/launch_storm, 200,000 launches)
under the base build, the new one, and the new one with FLARE_DELIVERY_MS=0
(the delivery thread's own cost), launches per second, same rotation;
FLARE_AB_STORM=0 leaves the storm out.

usage: gpu_ab.py BASE_FLARE NEW_FLARE WORK_DIR STORM_BIN [ROUNDS] [STEPS]
"""
import os
import shutil
import statistics
import subprocess
import sys

base_flare, new_flare, work, storm = sys.argv[1:5]
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
steps = sys.argv[6] if len(sys.argv) > 6 else "300"
here = os.path.dirname(os.path.abspath(__file__))
train = os.path.join(here, "..", "tests", "gpu", "train.py")

# The probe runs the command as its child and prints the child's peak RSS
# (ru_maxrss of RUSAGE_CHILDREN: the largest descendant waited for) and its
# stdout, so one run gives both numbers.
PROBE = (
    "import resource, subprocess, sys;"
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
    "sys.stdout.write(r.stdout);"
    "print('peak_rss_kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
    "sys.exit(r.returncode)"
)


def measure(flare, tag, settings=()):
    """One traced training run: (median step ms, peak RSS MiB)."""
    session = os.path.join(work, f"ab-{tag}")
    shutil.rmtree(session, ignore_errors=True)
    command = [sys.executable, train, steps]
    if flare is not None:
        command = ["env", *settings, flare, "trace", "-q", "-o", session, "--"] + command
    result = subprocess.run([sys.executable, "-c", PROBE] + command,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"{tag} failed ({result.returncode}): {result.stderr[-2000:]}")
    values = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("step_ms_median", "peak_rss_kib"):
            values[parts[0]] = float(parts[1])
    shutil.rmtree(session, ignore_errors=True)
    return values["step_ms_median"], values["peak_rss_kib"] / 1024.0


configurations = [("base", base_flare, []), ("new", new_flare, []),
                  ("new, FLARE_DELIVERY_MS=0", new_flare, ["FLARE_DELIVERY_MS=0"]),
                  ("new, FLARE_PM=0", new_flare, ["FLARE_PM=0"]),
                  ("untraced", None, [])]


def summary(name, values):
    lines = [name]
    for label, _, _ in configurations:
        ratios = [v / b for v, b in zip(values[label], values["base"])]
        lines.append(f"  {label:<26} median {statistics.median(values[label]):.2f}   "
                     f"runs {[round(v, 2) for v in values[label]]}   /base "
                     f"{statistics.median(ratios):.4f}")
    return "\n".join(lines)


step = {label: [] for label, _, _ in configurations}
rss = {label: [] for label, _, _ in configurations}
for round_index in range(rounds):
    shift = round_index % len(configurations)
    order = configurations[shift:] + configurations[:shift]
    for label, flare, settings in order:
        ms, mib = measure(flare, f"{round_index}-{len(step[label])}", settings)
        step[label].append(ms)
        rss[label].append(mib)
print(f"A/B, PyTorch training ({steps} steps) under flare trace, {rounds} rotating rounds")
print(summary("median step ms", step))
print(summary("peak RSS of the largest process, MiB", rss))
if os.environ.get("FLARE_AB_STORM", "1") == "0":
    sys.exit(0)


def storm_rate(flare, tag, settings):
    session = os.path.join(work, f"ab-storm-{tag}")
    shutil.rmtree(session, ignore_errors=True)
    result = subprocess.run(["env", *settings, flare, "trace", "-q", "-o", session, "--", storm,
                             "200000"], capture_output=True, text=True, timeout=600)
    shutil.rmtree(session, ignore_errors=True)
    if result.returncode != 0:
        raise SystemExit(f"storm {tag} failed ({result.returncode}): {result.stderr[-2000:]}")
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "launches_per_second":
            return float(parts[1])
    raise SystemExit(f"storm {tag}: no launches_per_second line")


configurations = configurations[:3]
rates = {label: [] for label, _, _ in configurations}
for round_index in range(rounds):
    order = configurations[round_index % 3:] + configurations[:round_index % 3]
    for label, flare, settings in order:
        rates[label].append(storm_rate(flare, f"{round_index}-{len(rates[label])}", settings))
print(f"CUDA C launch storm (200,000 launches) under flare trace, launches/s, {rounds} rotating rounds")
for label, _, _ in configurations:
    ratios = [v / b for v, b in zip(rates[label], rates["base"])]
    print(f"  {label:<26} median {statistics.median(rates[label]):.0f}   "
          f"runs {[round(v) for v in rates[label]]}   /base {statistics.median(ratios):.4f}")
