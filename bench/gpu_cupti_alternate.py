"""gpu_cupti_alternate.py: the floor of bare CUPTI under a PyTorch loop, state
by state, paired in time inside one process.

Runs tests/gpu/launch_loop.py STEPS --step-log WORK_DIR/steps.txt once with
bench/cupti_bare_inject.c's library injected (CUDA_INJECTION64_PATH and
NVTX_INJECTION64_PATH) in its alternate mode: a thread of the library cycles
CUPTI through none (everything off), kernel, light and standard (flare's
modes in bare CUPTI), each held for BLOCK_MS, the order rotated every
cycle, and logs every switch to WORK_DIR/switches.txt. Pinned to the CPUs in
FLARE_BENCH_CPUS (default 2-5; empty: not pinned). Separate processes on a
shared host differ by 15-20% run to run; blocks of one process a few hundred
ms apart do not, so costs of a few percent show.

Each timed step is given the state in force for its whole duration; left
out are steps that straddle a switch, that start within 20 ms after one
(the switch's own transient), that launch_loop.py synchronises on (loop
index % 100 == 99; line k of the step log is loop index k + 20), and that
start before the first switch. A block (one stretch of one state) with at
least 10 steps left has a median step time; each block is paired with the
none block of its cycle (the 4 switches that go through every state once),
before or after it. Per state it prints the median over cycles of the block
medians, the median paired speed ratio (none's step time / the state's) with
its min and max, the blocks paired, and the added ns per kernel: the median
paired difference of the block medians over the kernels per step
(--kernels-per-step, default 28, measured for launch_loop.py's default
loop). Exits non-zero when a state has fewer than 5 paired blocks.

--flare-ready FLARE runs the same analysis on flare itself (issue 23, item
2): launch_loop.py under `flare trace` (the default mode) with a rule that
never fires and may range-replay (`kernel_duration_p99 > 1h for 1s over 1s
action range step`), and FLARE_REPLAY_READY_ALTERNATE_MS/_LOG set, so
flare's flare-ready-alt thread (src/backend/cuda/cuda_ready_alternate.c)
turns off and on, every BLOCK_MS, the one thing such a trace does at a
launch that a plain trace does not. States: none (a plain trace's launch
path) and ready; the rule must still be "never fired" at the end, else the
run is refused.

--flare-trace FLARE does the same for all of flare's tracing (issue 22):
flare's flare-trace-alt thread (src/backend/cuda/cuda_trace_alternate.c)
switches every activity kind and callback the mode set up off (none) and
on again (flare), with the launch-storm guard off (FLARE_STORM_RATE=0; the
loop stays under its rate anyway). --flare-mode MODE (default standard)
picks the mode for either; the speed of flare against none, beside bare
CUPTI's of the same features against none, says how far flare is from
CUPTI's floor.

usage: gpu_cupti_alternate.py INJECT_SO WORK_DIR [STEPS=20000] [BLOCK_MS=250]
                              [--kernels-per-step N]
       gpu_cupti_alternate.py --flare-ready FLARE | --flare-trace FLARE WORK_DIR [STEPS=20000]
                              [BLOCK_MS=250] [--flare-mode MODE] [--kernels-per-step N]
       gpu_cupti_alternate.py --analyse-only STEPS_FILE SWITCHES_FILE [--kernels-per-step N]
                              [--states none,ready]
(--analyse-only: the analysis alone, of files from an earlier run; --states:
the states the switch log holds, the first the baseline, default
none,kernel,light,standard; none,ready and none,flare for flare's.)
"""
import bisect
import os
import statistics
import subprocess
import sys

STATES = ("none", "kernel", "light", "standard")  # cupti_bare_inject.c's, in its order
READY_STATES = ("none", "ready")  # cuda_ready_alternate.c's
TRACE_STATES = ("none", "flare")  # cuda_trace_alternate.c's
READY_RULE = "kernel_duration_p99 > 1h for 1s over 1s action range step"
WARMUP = 20  # launch_loop.py's warm-up steps, before the first logged one
SETTLE_NS = 20_000_000  # steps starting this soon after a switch are left out
MIN_BLOCK_STEPS = 10  # a block with fewer usable steps has no median
MIN_BLOCKS = 5  # paired blocks a state needs


def take_option(args, name, count):
    """Removes --name and its count values from args; returns the values or None."""
    if name not in args:
        return None
    at = args.index(name)
    values = args[at + 1:at + 1 + count]
    if len(values) != count:
        raise SystemExit(f"{name} takes {count} value(s)")
    del args[at:at + 1 + count]
    return values


def read_pairs(path, convert):
    with open(path) as f:
        rows = [line.split() for line in f if line.strip()]
    bad = [row for row in rows if len(row) != 2]
    if bad:
        raise SystemExit(f"{path}: expected two fields a line, got {' '.join(bad[0])!r}")
    return [(int(row[0]), convert(row[1])) for row in rows]


def read_switches(path, states):
    switches = read_pairs(path, str)
    unknown = {state for _, state in switches} - set(states)
    if unknown:
        raise SystemExit(f"{path}: unknown states {sorted(unknown)}")
    if any(b[0] < a[0] for a, b in zip(switches, switches[1:])):
        raise SystemExit(f"{path}: switch times go backwards")
    for start in range(0, len(switches) - len(states) + 1, len(states)):
        cycle = [state for _, state in switches[start:start + len(states)]]
        if sorted(cycle) != sorted(states):
            raise SystemExit(f"{path}: switches {start}..{start + len(states) - 1} are not one "
                             f"cycle: {cycle}")
    return switches


def assign_steps(steps, switches):
    """Step times (ns) by block index (index into switches), and skip counts."""
    times = [s[0] for s in switches]
    blocks = {}
    skipped = {"synchronising": 0, "before the first switch": 0, "straddling a switch": 0,
               "within 20 ms after a switch": 0}
    for k, (start, end) in enumerate(steps):
        block = bisect.bisect_right(times, start) - 1
        if (k + WARMUP) % 100 == 99:
            skipped["synchronising"] += 1
        elif block < 0:
            skipped["before the first switch"] += 1
        elif block + 1 < len(times) and end >= times[block + 1]:
            skipped["straddling a switch"] += 1
        elif start - times[block] < SETTLE_NS:
            skipped["within 20 ms after a switch"] += 1
        else:
            blocks.setdefault(block, []).append(end - start)
    return blocks, skipped


def pair_blocks(switches, medians, states):
    """Per state, (state median, baseline median) of each block paired with its
    cycle's baseline (the first state, none)."""
    cycle_none = {}
    for block, median in medians.items():
        if switches[block][1] == states[0]:
            cycle_none[block // len(states)] = median
    pairs = {state: [] for state in states}
    for block in sorted(medians):
        none = cycle_none.get(block // len(states))
        if none is not None:
            pairs[switches[block][1]].append((medians[block], none))
    return pairs


def analyse(steps_path, switches_path, kernels_per_step, states=STATES):
    steps = read_pairs(steps_path, int)
    switches = read_switches(switches_path, states)
    if not switches:
        raise SystemExit(f"{switches_path}: no switch (did the library alternate?)")
    blocks, skipped = assign_steps(steps, switches)
    medians = {b: statistics.median(t) for b, t in blocks.items() if len(t) >= MIN_BLOCK_STEPS}
    used = sum(len(blocks[b]) for b in medians)
    short = sum(len(t) for b, t in blocks.items() if b not in medians)
    print(f"steps: {len(steps)} timed, {used} used, {len(steps) - used} skipped ("
          + ", ".join(f"{n} {why}" for why, n in skipped.items())
          + f", {short} in {len(blocks) - len(medians)} blocks of fewer than "
          f"{MIN_BLOCK_STEPS} usable steps)")
    print(f"switches: {len(switches)} ({len(switches) // len(states)} whole cycles); "
          f"blocks with a median: {len(medians)}; kernels per step: {kernels_per_step:g}")
    pairs = pair_blocks(switches, medians, states)
    print(f"{'state':<9} {'median step_ms':>15} {'speed vs ' + states[0]:>14} {'(min-max)':>13} "
          f"{'blocks':>7} {'added ns/kernel':>16}")
    short_states = []
    for state in states:
        paired = pairs[state]
        if len(paired) < MIN_BLOCKS:
            short_states.append(f"{state} ({len(paired)})")
        if not paired:
            print(f"{state:<9} {'-':>15} {'-':>14} {'-':>13} {0:7d} {'-':>16}")
            continue
        ratios = [none / median for median, none in paired]
        added = statistics.median(median - none for median, none in paired) / kernels_per_step
        print(f"{state:<9} {statistics.median(m for m, _ in paired) / 1e6:15.4f} "
              f"{statistics.median(ratios):14.4f} {min(ratios):6.3f}-{max(ratios):.3f} "
              f"{len(paired):7d} {added:16.0f}")
    if short_states:
        raise SystemExit(f"too few paired blocks (fewer than {MIN_BLOCKS}): "
                         f"{', '.join(short_states)}; run more steps or shorter blocks")


def run(inject, work, steps, block_ms):
    """Runs launch_loop.py once under the alternating library; returns the two logs' paths."""
    here = os.path.dirname(os.path.abspath(__file__))
    loop = os.path.join(here, "..", "tests", "gpu", "launch_loop.py")
    inject = os.path.abspath(inject)
    if not os.path.isfile(inject):
        raise SystemExit(f"no injection library at {inject}")
    os.makedirs(work, exist_ok=True)
    steps_path, switches_path = os.path.join(work, "steps.txt"), os.path.join(work, "switches.txt")
    for path in (steps_path, switches_path):
        if os.path.exists(path):
            os.remove(path)
    cpus = os.environ.get("FLARE_BENCH_CPUS", "2-5")
    command = (["env", f"CUDA_INJECTION64_PATH={inject}", f"NVTX_INJECTION64_PATH={inject}",
                "BARE_CUPTI=alternate", f"BARE_CUPTI_LOG={switches_path}",
                f"BARE_CUPTI_ALTERNATE_MS={block_ms}"]
               + (["taskset", "-c", cpus] if cpus else [])
               + [sys.executable, loop, str(steps), "--step-log", steps_path])
    print(f"== bare CUPTI states in one process: launch_loop.py {steps}, blocks of {block_ms} "
          f"ms, rotating order, pinned to CPUs {cpus or 'any'}")
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=120 + steps * 0.01)
    except subprocess.TimeoutExpired:
        raise SystemExit("launch_loop.py under the alternating library timed out")
    if result.returncode != 0:
        raise SystemExit(f"launch_loop.py failed ({result.returncode}): {result.stderr[-1500:]}")
    for line in result.stdout.splitlines() + result.stderr.splitlines():
        if line.startswith(("step_ms", "steps ", "bare_cupti")):
            print(line)
    if not os.path.exists(switches_path) or not os.path.exists(steps_path):
        raise SystemExit("no switch or step log came back")
    return steps_path, switches_path


def run_flare(flare, work, steps, block_ms, what, mode):
    """launch_loop.py once under `flare trace` (--mode mode) with flare's
    alternation of what ("ready": the range-ready launch work, with the
    range rule, checked never to fire; "trace": all of flare's CUPTI
    tracing) switched on; returns the two logs' paths."""
    here = os.path.dirname(os.path.abspath(__file__))
    loop = os.path.join(here, "..", "tests", "gpu", "launch_loop.py")
    os.makedirs(work, exist_ok=True)
    session = os.path.join(work, "ready-session")
    steps_path, switches_path = os.path.join(work, "steps.txt"), os.path.join(work, "switches.txt")
    for path in (steps_path, switches_path):
        if os.path.exists(path):
            os.remove(path)
    subprocess.run(["rm", "-rf", session], check=True)
    cpus = os.environ.get("FLARE_BENCH_CPUS", "2-5")
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("FLARE_PM", "FLARE_DEEP_", "FLARE_REPLAY_"))}
    variable = "FLARE_REPLAY_READY_ALTERNATE" if what == "ready" else "FLARE_TRACE_ALTERNATE"
    environment.update({variable + "_MS": str(block_ms), variable + "_LOG": switches_path})
    options = ["--mode", mode]
    if what == "ready":
        options += ["--deep-when", READY_RULE]
    else:
        environment["FLARE_STORM_RATE"] = "0"  # the guard switches the same kinds
    command = ((["taskset", "-c", cpus] if cpus else [])
               + [flare, "trace", "-q", "-o", session] + options
               + ["--", sys.executable, loop, str(steps), "--step-log", steps_path])
    print(f"== flare in one process ({'the replay-ready launch path' if what == 'ready' else 'all its tracing'} "
          f"off and on): launch_loop.py {steps} under flare trace {' '.join(options)}, blocks "
          f"of {block_ms} ms, pinned to CPUs {cpus or 'any'}")
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=environment,
                                timeout=180 + steps * 0.01)
    except subprocess.TimeoutExpired:
        raise SystemExit("launch_loop.py under flare trace timed out")
    if result.returncode != 0:
        raise SystemExit(f"flare trace failed ({result.returncode}): {result.stderr[-1500:]}")
    for line in result.stdout.splitlines():
        if line.startswith(("step_ms", "steps ")):
            print(line)
    import sqlite3  # here: the bare-CUPTI mode needs no session
    db = sqlite3.connect(f"file:{os.path.join(session, 'session.db')}?mode=ro", uri=True)
    rules = db.execute("SELECT status, windows_fired FROM rules").fetchall()
    mode_row = db.execute("SELECT reason FROM capabilities WHERE feature = 'mode'").fetchall()
    db.close()
    print(f"mode: {mode_row[0][0] if mode_row else '?'}")
    if what == "ready" and (not rules or any(status == "refused" or fired
                                             for status, fired in rules)):
        raise SystemExit(f"the rule was refused or fired: {rules}")
    subprocess.run(["rm", "-rf", session], check=True)
    if not os.path.exists(switches_path) or not os.path.exists(steps_path):
        raise SystemExit("no switch or step log came back (see the session's flare.log)")
    return steps_path, switches_path


def main():
    args = sys.argv[1:]
    kernels = take_option(args, "--kernels-per-step", 1)
    kernels_per_step = float(kernels[0]) if kernels else 28.0
    if kernels_per_step <= 0:
        raise SystemExit("--kernels-per-step must be positive")
    states = take_option(args, "--states", 1)
    states = tuple(states[0].split(",")) if states else STATES
    if len(states) < 2 or len(set(states)) != len(states):
        raise SystemExit("--states takes two or more distinct names, the baseline first")
    analyse_only = take_option(args, "--analyse-only", 2)
    if analyse_only:
        if args:
            raise SystemExit(f"unexpected arguments {args}")
        analyse(*analyse_only, kernels_per_step, states)
        return
    mode = take_option(args, "--flare-mode", 1)
    mode = mode[0] if mode else "standard"
    what, flare = "ready", take_option(args, "--flare-ready", 1)
    if flare is None:
        what, flare = "trace", take_option(args, "--flare-trace", 1)
    if not (1 if flare else 2) <= len(args) <= (3 if flare else 4):
        raise SystemExit(__doc__.split("usage: ")[1])
    if flare:
        args = [None] + args
    steps = int(args[2]) if len(args) > 2 else 20000
    block_ms = int(args[3]) if len(args) > 3 else 250
    if steps <= 0 or not 20 <= block_ms <= 5000:
        raise SystemExit("STEPS must be positive and BLOCK_MS 20..5000")
    if flare:
        analyse(*run_flare(flare[0], args[1], steps, block_ms, what, mode), kernels_per_step,
                READY_STATES if what == "ready" else TRACE_STATES)
    else:
        analyse(*run(args[0], args[1], steps, block_ms), kernels_per_step)


if __name__ == "__main__":
    main()
