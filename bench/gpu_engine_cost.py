"""gpu_engine_cost.py: what each deep engine costs a program on a real GPU, prepared
but idle and while its window is open, paired against tracing only (issue 26: "cost of
each engine while a window is open and while prepared but idle, paired against tracing
only: the table `auto` uses").

Runs `pm_window bench` (tests/gpu/pm_window.cu: waits 2 s, then times 400 memory-bound
kernels and 100,000 tiny launches in 20 batches; prints kernels_per_second,
launches_per_second (the median batch's) and launch_ns_median) under `flare trace` in
these configurations, in a rotating order, ROUNDS times:

  trace     tracing only: FLARE_PM=0 and FLARE_CUDA_PC=0, so no engine is set up
  trace-timed  the same with the launch-storm guard off (FLARE_STORM_RATE=0): every
            kernel timed, as in a process with PC sampling enabled, where the guard
            stands down (docs/windows.md); the pc configurations are also paired against
            it, which leaves CUPTI's own cost of PC sampling (the guard's absence is the
            rest of the difference to trace)
  pm-idle   PM sampling set up at the first context, never armed
  pm-open   PM sampling, with a window open over the timed part (--deep-after 2s
            --deep-for 30s --deep-engine pm)
  pc-idle   PC sampling enabled at the first context, never started
  pc-open   PC sampling, with a window open over the timed part (--deep-engine pc)

Every configuration carries the same rule, one that never fires (with `engine pc` in
the pc ones: a rule asking for pc is what enables PC sampling at the first context), so
the rule's own evaluation cancels out of the ratios. Each run is checked: the engine it
names was prepared (capabilities) and, for the open ones, its window ran that engine and
took samples; a run that is not what it says stops the benchmark. Prints, per workload,
each configuration's median and the median of its per-round ratios to `trace` (1 means
no cost; below 1, slower), with min and max; where the program prints launch_ns_median
(every run), the paired median of the per-launch differences to the base, in ns
(positive: slower); the pc configurations the same against `trace-timed`
("  launch_ns_median pc-idle  difference median +N ns ..."); and a line per open
configuration of the windows' samples.

Environment:
  FLARE_ENGINE_COST_CONFIGS  a comma-separated subset of the configurations (default
      all; an unknown name is an error). Pairings whose base (trace, trace-timed) is not
      in the subset are skipped, with a line saying so.
  FLARE_ENGINE_COST_CPUS     CPUs to pin every run to (taskset -c, e.g. "2-5"; flare and
      the program inherit it): fewer migrations, less spread between processes.

usage: gpu_engine_cost.py FLARE_BIN PM_WINDOW_BIN WORK_DIR [ROUNDS]

Must never leave sessions anywhere but WORK_DIR.
"""
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys

NEVER_FIRES = "kernel_launch_rate > 1000000000/s for 1s over 1s deep_for 100ms max_windows 1"
CONFIGS = {
    "trace": (["FLARE_PM=0", "FLARE_CUDA_PC=0"], NEVER_FIRES, None),
    "trace-timed": (["FLARE_PM=0", "FLARE_CUDA_PC=0", "FLARE_STORM_RATE=0"], NEVER_FIRES, None),
    "pm-idle": ([], NEVER_FIRES, None),
    "pm-open": ([], NEVER_FIRES, "pm"),
    "pc-idle": ([], NEVER_FIRES + " engine pc", None),
    "pc-open": ([], NEVER_FIRES + " engine pc", "pc"),
}
KEYS = ("kernels_per_second", "launches_per_second")
# Printed by pm_window since its tiny launches are timed in batches; optional, so an
# older build still runs. Compared as differences (ns a launch), not ratios.
LAUNCH_NS = "launch_ns_median"


def chosen_configs():
    """The configurations asked for in FLARE_ENGINE_COST_CONFIGS, in CONFIGS' order
    (default all); exits naming the valid ones on an unknown or empty choice."""
    text = os.environ.get("FLARE_ENGINE_COST_CONFIGS", "").strip()
    if not text:
        return list(CONFIGS)
    asked = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in asked if name not in CONFIGS]
    if unknown or not asked:
        raise SystemExit(f"FLARE_ENGINE_COST_CONFIGS={text!r}: unknown {', '.join(unknown) or '(none given)'}; "
                         f"valid: {', '.join(CONFIGS)}")
    return [name for name in CONFIGS if name in asked]


def pin_prefix():
    """["taskset", "-c", CPUS] when FLARE_ENGINE_COST_CPUS is set, else []; exits when
    the list is malformed or taskset is missing (a pinned study must not run unpinned)."""
    cpus = os.environ.get("FLARE_ENGINE_COST_CPUS", "").strip()
    if not cpus:
        return []
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", cpus):
        raise SystemExit(f"FLARE_ENGINE_COST_CPUS={cpus!r}: not a CPU list such as 2-5 or 2,4")
    if shutil.which("taskset") is None:
        raise SystemExit("FLARE_ENGINE_COST_CPUS is set but taskset is not installed")
    return ["taskset", "-c", cpus]


def capability(db, feature):
    row = db.execute("SELECT status, reason FROM capabilities WHERE feature = ?", (feature,)).fetchone()
    return row if row is not None else ("none", "")


def verify(name, session):
    """Stops the benchmark unless the session is what the configuration says."""
    db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
    pm, pc = capability(db, "pm_sampling"), capability(db, "pc_sampling")
    storm = capability(db, "storm_guard")
    windows = db.execute("SELECT engine, engine_status, engine_samples, engine_reason FROM windows "
                         "WHERE opened_ns IS NOT NULL").fetchall()
    pc_rows = db.execute("SELECT COALESCE(SUM(samples), 0) FROM pc_samples").fetchone()[0]
    db.close()
    problem = None
    if name.startswith("trace") and (pm[0] == "active" or pc[0] == "active"):
        problem = f"an engine was set up: pm {pm}, pc {pc}"
    elif name == "trace-timed" and storm[0] == "active":
        problem = "the launch-storm guard ran"
    elif name.startswith("pm") and (pm[0] != "active" or pc[0] == "active"):
        problem = f"PM sampling not prepared alone: pm {pm}, pc {pc}"
    elif name.startswith("pc") and pc[0] != "active":
        problem = f"PC sampling not enabled: {pc}"
    elif name.endswith("idle") and windows:
        problem = f"a window ran: {windows}"
    elif name.endswith("open"):
        engine = "pc-sampling" if name == "pc-open" else "pm"
        # Its status is not judged: a window still open when the program exits
        # closes then, which the benchmark does not wait for.
        if len(windows) != 1 or engine not in (windows[0][0] or "") or "fell back" in (windows[0][3] or ""):
            problem = f"the window did not run {engine}: {windows}"
        elif (windows[0][2] or 0) <= 0 and pc_rows <= 0:
            problem = f"the window took no samples: {windows}"
    if problem:
        raise SystemExit(f"{name}: {problem} ({session})")
    return windows[0][2] if windows else 0, pc_rows


def run(flare, program, name, session, pin):
    shutil.rmtree(session, ignore_errors=True)
    variables, rule, engine = CONFIGS[name]
    # At 2 s: pm_window waits 2 s (no launch) after its start, and a PC window
    # starts at the program's next launch (docs/windows.md): the window then
    # covers the timed part from its first launch.
    window = ["--deep-after", "2s", "--deep-for", "30s", "--deep-engine", engine] if engine else []
    command = (pin + ["env"] + variables + [flare, "trace", "-q", "-o", session, "--deep-when", rule] + window +
               ["--", program, "bench"])
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")
    values = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in KEYS + (LAUNCH_NS,):
            values[parts[0]] = float(parts[1])
    if not set(KEYS) <= set(values):
        raise SystemExit(f"{name}: the program printed {result.stdout[-500:]!r}")
    values["samples"] = verify(name, session)
    return values


def launch_ns_line(results, name, base_name):
    """"difference median +N ns ..." for name against base_name from launch_ns_median,
    paired by round; None unless every run of both printed it."""
    mine = [r.get(LAUNCH_NS) for r in results[name]]
    base = [r.get(LAUNCH_NS) for r in results[base_name]]
    if None in mine or None in base or not mine:
        return None
    differences = [m - b for m, b in zip(mine, base)]
    return (f"difference median {statistics.median(differences):+.1f} ns a launch "
            f"(min {min(differences):+.1f}, max {max(differences):+.1f}; "
            f"{name} median {statistics.median(mine):.1f} ns, {base_name} {statistics.median(base):.1f} ns)")


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        return 2
    flare, program, work = argv[:3]
    rounds = int(argv[3]) if len(argv) > 3 else 5
    names = chosen_configs()
    pin = pin_prefix()
    if pin:
        print(f"every run pinned: {' '.join(pin)}", flush=True)
    results = {name: [] for name in names}
    for round_index in range(rounds):
        # A rotating order: no configuration always runs first or after the same one.
        order = names[round_index % len(names):] + names[:round_index % len(names)]
        for name in order:
            results[name].append(run(flare, program, name, f"{work}/engine-cost-{name}", pin))
        print(f"round {round_index + 1}/{rounds}: " + ", ".join(
            f"{name} {results[name][-1]['launches_per_second']:.0f} launches/s" for name in names), flush=True)
    others = [name for name in names if name != "trace"]
    if "trace" not in names:
        print("not paired against tracing only: trace is not among the configurations")
    elif others:
        print(f"paired against tracing only, {rounds} rounds (ratio = configuration / trace; 1 = no cost)")
        for key in KEYS:
            base = [r[key] for r in results["trace"]]
            print(f"{key}: trace median {statistics.median(base):.1f}")
            for name in others:
                mine = [r[key] for r in results[name]]
                ratios = [m / b for m, b in zip(mine, base)]
                print(f"  {name:8s} median {statistics.median(mine):.1f}, ratio median {statistics.median(ratios):.4f} "
                      f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
        for name in others:
            line = launch_ns_line(results, name, "trace")
            if line:
                print(f"  {LAUNCH_NS} {name:8s} {line}")
    pcs = [name for name in ("pc-idle", "pc-open") if name in names]
    if pcs and "trace-timed" not in names:
        print(f"{', '.join(pcs)} not paired against trace-timed: trace-timed is not among the configurations")
    elif pcs:
        print("the pc configurations paired against trace-timed (every kernel timed in both: "
              "CUPTI's own cost of PC sampling)")
        for key in KEYS:
            base = [r[key] for r in results["trace-timed"]]
            for name in pcs:
                mine = [r[key] for r in results[name]]
                ratios = [m / b for m, b in zip(mine, base)]
                extra = ""
                if key == "launches_per_second":
                    per_launch = [1e9 / m - 1e9 / b for m, b in zip(mine, base)]
                    extra = f", per launch {statistics.median(per_launch):+.0f} ns median"
                print(f"  {key} {name:8s} ratio median {statistics.median(ratios):.4f} "
                      f"(min {min(ratios):.4f}, max {max(ratios):.4f}){extra}")
        for name in pcs:
            line = launch_ns_line(results, name, "trace-timed")
            if line:
                print(f"  {LAUNCH_NS} {name:8s} {line}")
    for name in ("pm-open", "pc-open"):
        if name in names:
            samples = [r["samples"] for r in results[name]]
            print(f"{name}: window samples (engine_samples, pc_samples rows' sum) {samples}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
