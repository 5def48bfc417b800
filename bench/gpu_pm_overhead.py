"""gpu_pm_overhead.py: the throughput cost of a prepared-but-idle PM sampling
engine against tracing only, as paired runs on a real GPU.

Runs `pm_window bench` under `flare trace` alternately with FLARE_PM=0
(tracing only) and with PM sampling installed (prepared after the first
context, never armed), ROUNDS times, and prints the median
of each configuration and the median of the per-round ratios (PM / tracing;
below 1 means slower). Checks that the engine really was prepared in the PM
runs. Both configurations carry the same rule, one that never fires: PM
sampling is set up at the first context only when a rule or a schedule may
want it, and the rule's own evaluation then cancels out of the ratio.
Called by scripts/gpu-check-pm.sh.

usage: gpu_pm_overhead.py FLARE_BIN PM_WINDOW_BIN WORK_DIR [ROUNDS]
"""
import shutil
import sqlite3
import statistics
import subprocess
import sys

flare, program, work = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5


# Far above any launch rate a GPU reaches.
NEVER_FIRES = "kernel_launch_rate > 1000000000/s for 1s over 1s deep_for 100ms max_windows 1"


def run(pm_on, session):
    shutil.rmtree(session, ignore_errors=True)
    command = ["env", f"FLARE_PM={1 if pm_on else 0}", flare, "trace", "-q", "-o", session,
               "--deep-when", NEVER_FIRES, "--", program, "bench"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"{command} failed ({result.returncode}): {result.stderr[-2000:]}")
    values = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            values[parts[0]] = float(parts[1])
    if pm_on:
        db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
        row = db.execute("SELECT status, reason FROM capabilities WHERE feature = 'pm_sampling'").fetchone()
        if row is None or row[0] != "active" or "prepared" not in row[1]:
            raise SystemExit(f"PM engine not prepared in the PM run: {row}")
    return values


results = {False: [], True: []}
for round_index in range(rounds):
    order = [False, True] if round_index % 2 == 0 else [True, False]
    for pm_on in order:
        results[pm_on].append(run(pm_on, f"{work}/pm-bench-{int(pm_on)}"))
for key in ("kernels_per_second", "launches_per_second"):
    base = [r[key] for r in results[False]]
    pm = [r[key] for r in results[True]]
    ratios = [p / b for p, b in zip(pm, base)]
    print(f"{key}: tracing only median {statistics.median(base):.1f}, PM prepared idle median "
          f"{statistics.median(pm):.1f}, paired ratio median {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f}, {rounds} pairs)")
