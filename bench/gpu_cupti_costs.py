"""gpu_cupti_costs.py: what bare CUPTI costs per kernel launch, feature by feature.

Runs bench/cupti_launch_cost (built by scripts/gpu-check.sh) once per
configuration per round, ROUNDS paired rounds, and prints each configuration's
median launches/s and the median of its per-round ratio to `none` (no CUPTI).
It explains flare's launch-storm overhead (docs/PERFORMANCE.md); it measures
CUPTI alone, never flare.

usage: gpu_cupti_costs.py PROBE_BIN [ROUNDS] [CONFIG,CONFIG...]
FLARE_BENCH_CPUS=LIST runs every probe under `taskset -c LIST` (the same CPUs
for every configuration: less noise from placement on a shared host).
"""
import os
import statistics
import subprocess
import sys

probe = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
configs = ["none", "subscribe", "activity", "activity_tscb", "activity_pinned", "activity_kernel",
           "callback", "callback_runtime", "both", "copies", "external", "kernel_then_off",
           "flare_setup", "flare_storm", "flare_storm_all_off", "flare_storm_runtime",
           "flare_storm_no_callbacks"]
if len(sys.argv) > 3:  # a comma list: only these (and none, the baseline)
    wanted = set(sys.argv[3].split(",")) | {"none"}
    configs = [config for config in configs if config in wanted]
# rounds_seen[r][config]: launches/s of that configuration in round r (a
# failed run leaves a hole, and its round pairs nothing with it).
rounds_seen = []
cpus = os.environ.get("FLARE_BENCH_CPUS", "")
pinning = ["taskset", "-c", cpus] if cpus else []
notes = {}
failed = False
for _ in range(rounds):
    seen = {}
    for config in configs:
        try:
            result = subprocess.run(pinning + [probe, config, "200000"], capture_output=True,
                                    text=True,
                                    timeout=300)
        except subprocess.TimeoutExpired:
            notes[config] = "timed out after 300 s"
            failed = True
            continue
        if result.returncode != 0:
            notes[config] = f"failed ({result.returncode}): {result.stderr.strip()[-300:]}"
            failed = True
            continue
        seen[config] = float(result.stdout.split()[1])
        notes[config] = " / ".join(line for line in result.stderr.splitlines()
                                   if "records" in line or "callbacks" in line
                                   or "switched off" in line)
    rounds_seen.append(seen)
print(f"bare CUPTI, 200000 empty launches, {rounds} paired rounds (ratio to no CUPTI)"
      + (f", pinned to CPUs {cpus}" if cpus else ""))
for config in configs:
    pairs = [(seen[config], seen["none"]) for seen in rounds_seen
             if config in seen and "none" in seen]
    if not pairs:
        print(f"  {config:<17} {notes.get(config, 'no runs')}")
        continue
    series = [value for value, _ in pairs]
    ratios = [value / plain for value, plain in pairs]
    per_launch_ns = [1e9 / value - 1e9 / plain for value, plain in pairs]
    print(f"  {config:<17} median {statistics.median(series):10.0f} launches/s  ratio "
          f"{statistics.median(ratios):.4f} (min {min(ratios):.4f} max {max(ratios):.4f})  "
          f"+{statistics.median(per_launch_ns):6.0f} ns/launch  {notes.get(config, '')}")
sys.exit(1 if failed else 0)
