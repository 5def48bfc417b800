"""gpu_replay_ready.py: what a replay-ready trace costs while its rule never
fires (issue 23, item 2), on the launch-bound PyTorch loop
(tests/gpu/launch_loop.py: about 20 kernels and an NVTX range per ~1 ms
step, so a cost per launch shows in its step rate). Called by part
"triggered" of scripts/gpu-check.sh (scripts/gpu-check-triggered.sh).

Each round runs the loop once under each of four configurations, in an
order rotated every round, all pinned to the same CPUs (FLARE_BENCH_CPUS,
default 2-5, as bench/gpu_launch_costs.py does; empty: no pinning):

  plain     `flare trace` with no rule (the default mode)
  range     `flare trace --deep-when 'kernel_duration_p99 > 1h for 1s over 1s
            action range step'`: replay-ready, the heavier kind (in the
            default mode the launch callbacks are on anyway; allocations are
            tracked in every trace; a range rule also has each launched
            function's module variables resolved, once per function)
  plain-l   `flare trace --mode light`
  replay-l  the same rule under --mode light: the rule puts the launch
            callbacks back on (and the mode's capability row must say so)

The rule can never fire (no kernel of the loop lasts an hour); each run's
rules table is checked, and a run whose rule was refused or fired stops the
benchmark.
A run's value is the loop's own "step_ms" (the timed steps' wall time over
their count), given as steps per second. Prints, per configuration, the
median steps/s (min..max), and the medians of the paired per-round ratios
range/plain, replay-l/plain-l and plain-l/plain with their spread, then
how long it took.

The children get this environment without FLARE_PM, FLARE_DEEP_* and
FLARE_REPLAY_* (but FLARE_REPLAY_READY_*, this file's own settings; earlier
parts of gpu-check.sh export FLARE_PM=0), so every configuration is what a
user gets by default; the header names what was left out.

bench/gpu_launch_costs.py and bench/gpu_ab.py run their benchmarks at import
(module-level code reading sys.argv), so nothing of theirs can be imported;
this file follows their way (one process per run, rotation, taskset).

usage: gpu_replay_ready.py FLARE WORK [ROUNDS=9] [STEPS=1000] [BUDGET_S=150]
Rounds stop early when the next would end past BUDGET_S (the part shares one
10-minute device call); the rounds run are printed.

Must never leave a session behind (each is removed after its run), write
outside WORK, or report a round whose rule fired.
"""
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

flare, work = sys.argv[1:3]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
budget_s = float(sys.argv[5]) if len(sys.argv) > 5 else 150.0
here = os.path.dirname(os.path.abspath(__file__))
loop = os.path.join(here, "..", "tests", "gpu", "launch_loop.py")
# FLARE_REPLAY_READY_STORM=PATH: the CUDA C storm (tests/gpu/launch_storm.cu
# built) of STEPS launches instead, in launches per second: short runs, so
# many more rounds fit, and nothing but launches to pay for.
storm = os.environ.get("FLARE_REPLAY_READY_STORM")
if storm:
    workload, key, unit, what = [storm, str(steps)], "launches_per_second", "launches/s", \
        f"launch_storm {steps}"
else:
    workload, key, unit, what = [sys.executable, loop, str(steps)], "step_ms", "steps/s", \
        f"launch_loop.py {steps}"
cpus = os.environ.get("FLARE_BENCH_CPUS", "2-5")
pinning = ["taskset", "-c", cpus] if cpus else []
NEVER = "kernel_duration_p99 > 1h for 1s over 1s"
configs = [
    ("plain", "no rule", []),
    ("range", f"--deep-when '{NEVER} action range step'",
     ["--deep-when", NEVER + " action range step"]),
    ("plain-l", "--mode light, no rule", ["--mode", "light"]),
    ("replay-l", f"--mode light --deep-when '{NEVER} action replay'",
     ["--mode", "light", "--deep-when", NEVER + " action replay"]),
]
environment = {k: v for k, v in os.environ.items()
               if k != "FLARE_PM" and (k.startswith("FLARE_REPLAY_READY_") or
                                       not k.startswith(("FLARE_DEEP_", "FLARE_REPLAY_")))}
removed = sorted(set(os.environ) - set(environment))


def run(config, session):
    """Steps per second of one traced run of the loop."""
    tag, _, options = config
    shutil.rmtree(session, ignore_errors=True)
    command = pinning + [flare, "trace", "-q", "-o", session] + options + \
        ["--"] + workload
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=180,
                                env=environment)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{tag} timed out after 180 s")
    try:
        if result.returncode != 0:
            raise SystemExit(f"{tag} failed ({result.returncode}): {result.stderr[-1500:]}")
        if "--deep-when" in options:
            db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
            rules = db.execute("SELECT status, windows_fired FROM rules").fetchall()
            mode = db.execute("SELECT reason FROM capabilities WHERE feature = 'mode'").fetchall()
            db.close()
            if not rules or any(status == "refused" or fired for status, fired in rules):
                raise SystemExit(f"{tag}: the rule was refused or fired: {rules}")
            # In the light mode the replay rule puts the launch callbacks
            # back on, and the mode's capability row must say so.
            if "light" in options and not any("launch callbacks on for replay" in d
                                              for (d,) in mode):
                raise SystemExit(f"{tag}: the mode row does not say the launch callbacks "
                                 f"are on for replay: {mode}")
        for line in result.stdout.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == key:
                return 1000.0 / float(words[1]) if key == "step_ms" else float(words[1])
        raise SystemExit(f"{tag}: no '{key}' line in {result.stdout[-500:]!r}")
    finally:
        shutil.rmtree(session, ignore_errors=True)


started = time.monotonic()
values = []  # values[r][tag] = steps/s
round_times = []
for r in range(rounds):
    if round_times and time.monotonic() - started + max(round_times) > budget_s:
        print(f"# stopped after {r} of {rounds} rounds: the next would end past {budget_s:.0f} s")
        break
    round_start = time.monotonic()
    order = configs[r % len(configs):] + configs[:r % len(configs)]
    values.append({config[0]: run(config, os.path.join(work, "replay-ready-" + config[0]))
                   for config in order})
    round_times.append(time.monotonic() - round_start)


def spread(series):
    return f"{statistics.median(series):.4f} ({min(series):.4f}..{max(series):.4f})"


print(f"== replay-ready trace, rule never firing: {what}, {len(values)} paired "
      f"rounds, order rotated, pinned to CPUs {cpus or 'any'}"
      + (f", {' '.join(removed)} unset" if removed else ""))
for tag, what, _ in configs:
    series = [v[tag] for v in values]
    print(f"  {tag:<8} {unit} median {statistics.median(series):10.1f} "
          f"({min(series):.1f}..{max(series):.1f})  flare trace {what}")
print(f"  paired ratios of {unit}, median (min..max):")
for a, b in (("range", "plain"), ("replay-l", "plain-l"), ("plain-l", "plain")):
    print(f"    {a}/{b}: {spread([v[a] / v[b] for v in values])}")
print(f"  took {time.monotonic() - started:.0f} s "
      f"(rounds {min(round_times):.0f}..{max(round_times):.0f} s)")
