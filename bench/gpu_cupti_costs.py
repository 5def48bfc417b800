"""gpu_cupti_costs.py: what bare CUPTI costs per kernel launch, feature by feature.

Runs bench/cupti_launch_cost (built by scripts/gpu-check.sh) once per
configuration per round, ROUNDS paired rounds, and prints each configuration's
median launches/s and the median of its per-round ratio to `none` (no CUPTI).
It explains flare's launch-storm overhead (docs/PERFORMANCE.md); it measures
CUPTI alone, never flare.

usage: gpu_cupti_costs.py PROBE_BIN [ROUNDS]
"""
import statistics
import subprocess
import sys

probe = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
configs = ["none", "subscribe", "activity", "activity_tscb", "activity_pinned", "activity_kernel",
           "callback", "callback_runtime", "both"]
values = {config: [] for config in configs}
notes = {}
for _ in range(rounds):
    for config in configs:
        result = subprocess.run([probe, config, "200000"], capture_output=True, text=True,
                                timeout=300)
        if result.returncode != 0:
            notes[config] = f"failed ({result.returncode}): {result.stderr.strip()[-300:]}"
            continue
        values[config].append(float(result.stdout.split()[1]))
        notes[config] = " / ".join(line for line in result.stderr.splitlines()
                                   if "records" in line or "callbacks" in line)
print(f"bare CUPTI, 200000 empty launches, {rounds} paired rounds (ratio to no CUPTI)")
base = values["none"]
for config in configs:
    series = values[config]
    if not series:
        print(f"  {config:<17} {notes.get(config, 'no runs')}")
        continue
    ratios = [value / plain for value, plain in zip(series, base)]
    per_launch_ns = [1e9 / value - 1e9 / plain for value, plain in zip(series, base)]
    print(f"  {config:<17} median {statistics.median(series):10.0f} launches/s  ratio "
          f"{statistics.median(ratios):.4f} (min {min(ratios):.4f} max {max(ratios):.4f})  "
          f"+{statistics.median(per_launch_ns):6.0f} ns/launch  {notes.get(config, '')}")
