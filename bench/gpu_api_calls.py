"""gpu_api_calls.py: what recording API calls (table api_calls: each launch,
copy and memset on its thread) costs on a real GPU, paired.

Each round runs, in rotating order, untraced, traced with
FLARE_CUDA_API_CALLS=0, and traced with API calls recorded (the default):
  * the CUDA C launch loop (tests/gpu/launch_storm, LAUNCHES tiny kernels)
    with the launch-storm guard off (--storm-rate 0): every launch timed and
    recorded, the worst case per launch; launches per second;
  * the same with the guard at its default (a storm: API calls are not
    recorded while kernel timing is off);
  * the PyTorch training loop (tests/gpu/train.py): median step time.
Prints medians, the median of per-round ratios against API calls off, and
the added cost per launch (1/rate_on - 1/rate_off). Called by
`scripts/gpu-check.sh apicalls`; results go into docs/PERFORMANCE.md by hand
with date and machine.

usage: gpu_api_calls.py FLARE WORK_DIR STORM_BIN [ROUNDS] [LAUNCHES] [STEPS]
       (FLARE_API_SERIES=loop: the first series only)
"""
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys

flare, work, storm = sys.argv[1:4]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
launches = sys.argv[5] if len(sys.argv) > 5 else "200000"
steps = sys.argv[6] if len(sys.argv) > 6 else "200"
here = os.path.dirname(os.path.abspath(__file__))
train = os.path.join(here, "..", "tests", "gpu", "train.py")

CONFIGS = [("untraced", None), ("api_calls off", "0"), ("api_calls on", "1")]


def run(config, tag, command, trace_options, key):
    label, setting = config
    session = os.path.join(work, f"api-{tag}")
    shutil.rmtree(session, ignore_errors=True)
    if setting is not None:
        command = ["env", f"FLARE_CUDA_API_CALLS={setting}", flare, "trace", "-q", "-o", session,
                   *trace_options, "--"] + command
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    calls = None
    if setting is not None and result.returncode == 0:
        database = sqlite3.connect("file:%s?mode=ro" % os.path.join(session, "session.db"),
                                   uri=True)
        calls = database.execute("SELECT COUNT(*) FROM api_calls").fetchone()[0]
        database.close()
    shutil.rmtree(session, ignore_errors=True)
    if result.returncode != 0:
        raise SystemExit(f"{label} {tag} failed ({result.returncode}): {result.stderr[-2000:]}")
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return float(parts[1]), calls
    raise SystemExit(f"{label} {tag}: no {key} line")


def series(name, command, trace_options, key, higher_is_better):
    values = {label: [] for label, _ in CONFIGS}
    calls = {}
    for round_index in range(rounds):
        shift = round_index % len(CONFIGS)
        for config in CONFIGS[shift:] + CONFIGS[:shift]:
            value, count = run(config, f"{name}-{round_index}", command, trace_options, key)
            values[config[0]].append(value)
            if count is not None:
                calls[config[0]] = count
    print(f"{name}: {key}, {rounds} rotating rounds")
    for label, _ in CONFIGS:
        ratios = [v / b for v, b in zip(values[label], values["api_calls off"])]
        print(f"  {label:<14} median {statistics.median(values[label]):.2f}   "
              f"runs {[round(v, 2) for v in values[label]]}   /off {statistics.median(ratios):.4f}"
              f"   api_calls rows {calls.get(label, '-')}")
    if higher_is_better:
        per_launch = [1e9 / on - 1e9 / off for on, off in
                      zip(values["api_calls on"], values["api_calls off"])]
        print(f"  added per launch (1/on - 1/off), median of rounds: "
              f"{statistics.median(per_launch):.1f} ns")
    return values


# FLARE_API_SERIES=loop runs the first series alone (more rounds for the
# same device time: the effect is small against run-to-run noise).
only_loop = os.environ.get("FLARE_API_SERIES") == "loop"
series("launch loop, storm guard off", [storm, launches], ["--storm-rate", "0"],
       "launches_per_second", True)
if not only_loop:
    series("launch loop, storm guard on (default)", [storm, launches], [],
           "launches_per_second", True)
    series("PyTorch training", [sys.executable, train, steps], [], "step_ms_median", False)
