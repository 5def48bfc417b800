#!/usr/bin/env python3
"""pm_accuracy.py: how accurate are per-kernel totals integrated from PM samples?
(issue 25, item 1: "Measure accuracy first"; scripts/gpu-check-pmaccuracy.sh runs it
on the H200.)

usage: pm_accuracy.py FLARE BUILD_GPU_DIR WORK_DIR [--intervals 10us,20us,50us,100us]
                      [--steps N] [--runs N] [--after DURATION] [--window DURATION]
                      [--occurrence N]
       pm_accuracy.py --self-test

For each PM interval it runs BUILD_GPU_DIR/pm_accuracy (tests/gpu/pm_accuracy.cu:
memory-bound `mem_<len>` and compute-bound `fma_<len>` kernels of about 5 us to 5 ms
inside NVTX ranges "step") under

    FLARE_PM=1 FLARE_PM_PRESET=overview FLARE_PM_INTERVAL=<interval> \
    flare trace -q -o WORK/pm-<interval>-<run> --deep-after <after> --deep-for <for> \
        -- pm_accuracy <steps> --min-seconds <after + for + 1>

(--runs times; one scheduled deep window each), then once

    FLARE_PM=0 flare replay -q -o WORK/replay --range step --occurrence <occurrence> \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg,\
gr__cycles_elapsed.max,gpu__time_duration.sum -- pm_accuracy <occurrence + 3>

(should that give no values, once more with --set speed-of-light, which holds all of
them but gr__cycles_elapsed.max, into WORK/replay-sol) for the reference: the range profiler's exact value of each metric for each kernel of
one step. For each kernel launch that lies wholly inside a window, each PM metric is
integrated over the kernel's [start, end]: a sample contributes value * overlap /
sample duration. A launch that overlaps a flagged sample (any flag: 8 clamped start,
1 overflow, 2 after a hole, 4 unverified clock; docs/pm-sampling.md) or a stretch
without samples (coverage under 90%) is left out and counted; a NULL value leaves out
that metric of that launch, counted too. Per kernel
name and interval: the median of the launches' estimates against the reference
(the median over the reference launches of that name), the relative error, and the
median |error| of the single launches. Per window it prints diagnostics (sample
count, durations, spacing and holes, flags, drop counters, where the first and last
samples lie against the kernels, the time lag that best lines DRAM read bytes up with
the memory kernels, the units). A final summary gives, per interval, metric and kernel
kind, the shortest kernel length from which every longer kernel of that kind is
within 5% (median |error| of its launches).

What pm_samples.value holds: CUPTI's metric value evaluated over that one sample
(cuptiProfilerHostEvaluateToGpuValues with rangeIndex = the sample,
src/backend/cuda/cuda_pm.c hw_sample_read): bytes and cycles counted during the
sample, not rates (an .avg metric is the average over SMs of the cycles counted in the
sample). So a sample's share of a kernel is value * overlap / duration. The output
checks this on the samples inside the longest memory kernels (value per ns of sample:
GB/s for bytes, GHz for cycles, 1 for gpu__time_duration).

Exit status: 1 when a run failed, a window has no usable PM samples, or the replay gave
no reference values (missing data); 2 for a usage error; 0 otherwise, however large the
errors (this is a study, not a check). Writes only under WORK_DIR (the self-test: a
temporary directory, removed).
"""
import bisect
import collections
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

PRESET = "overview"
# (PM label = range-profiler metric name, unit, short name): five of the overview
# preset's six labels; tensor_pipe_active is not compared (no kernel here uses the
# tensor pipe, and its counter's name depends on the chip).
METRICS = [
    ("dram__bytes_read.sum", "bytes", "dram_read"),
    ("dram__bytes_write.sum", "bytes", "dram_write"),
    ("sm__cycles_active.avg", "cycles", "sm_active"),
    ("gr__cycles_elapsed.max", "cycles", "elapsed"),
    ("gpu__time_duration.sum", "ns", "duration"),
]
METRIC_NAMES = [m for m, _, _ in METRICS]
SHORT = {m: s for m, _, s in METRICS}
UNIT = {m: u for m, u, _ in METRICS}
# The metrics the summary judges per kernel kind (DRAM traffic of an FMA loop is
# a few hundred KiB of results: its error says nothing).
KIND_METRICS = {"mem": METRIC_NAMES,
                "fma": ["sm__cycles_active.avg", "gr__cycles_elapsed.max", "gpu__time_duration.sum"]}
KINDS = ("mem", "fma")
SAMPLE_FLAGS = {1: "overflow", 2: "after hole", 4: "clock guess", 8: "clamped start"}
MIN_COVERAGE = 0.9
TOLERANCE_PCT = 5.0

Sample = collections.namedtuple("Sample", "index start end flags values")
Kernel = collections.namedtuple("Kernel", "pid name start end")

failures = []


def missing(message):
    failures.append(message)
    print(f"MISSING: {message}", flush=True)


# ---------------------------------------------------------------------------
# names, durations


def parse_duration_ns(text):
    match = re.fullmatch(r"(\d+)(ns|us|ms|s)", text.strip())
    if not match:
        raise ValueError(f"'{text}' is not a duration such as 10us, 2ms or 1s")
    return int(match.group(1)) * {"ns": 1, "us": 1000, "ms": 1000000, "s": 1000000000}[match.group(2)]


def duration_text(ns):
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 1000)):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


def kernel_key(name):
    """'mem_20us(float4*, ...)', 'void fma_2ms(float*, int, float)' or the
    mangled '_Z8mem_20usP6float4...' -> 'mem_20us'; None for any other kernel."""
    match = (re.match(r"\s*(?:void\s+)?((?:mem|fma)_\d+(?:us|ms))(?![\w])", name or "") or
             re.match(r"_Z\d+((?:mem|fma)_\d+(?:us|ms))", name or ""))
    return match.group(1) if match else None


def kernel_kind(key):
    return key.split("_", 1)[0]


def kernel_target_us(key):
    match = re.search(r"_(\d+)(us|ms)$", key)
    return int(match.group(1)) * (1000 if match.group(2) == "ms" else 1)


def order_key(key):
    return (KINDS.index(kernel_kind(key)), kernel_target_us(key))


def median(values):
    return statistics.median(values) if values else None


def fmt(value, digits=4):
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-2:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}"


def spread(values, scale=1.0, unit=""):
    if not values:
        return "none"
    ordered = sorted(values)
    return (f"min {ordered[0] / scale:.4g}{unit} median {ordered[len(ordered) // 2] / scale:.4g}{unit} "
            f"max {ordered[-1] / scale:.4g}{unit}")


# ---------------------------------------------------------------------------
# integration (the part the self-test checks)


def integrate_launch(samples, starts, kernel_start, kernel_end, metrics):
    """Integrates each metric of `samples` (sorted by start; `starts` their start
    times) over [kernel_start, kernel_end]: a sample contributes value * overlap /
    its duration. Returns (estimates {metric: value or None}, covered_ns, flags of
    the flagged samples it overlapped, metrics that had a NULL value). A flagged
    sample contributes nothing (its overlap still counts as covered)."""
    totals = {m: 0.0 for m in metrics}
    nulls = set()
    covered = 0
    flags = 0
    i = max(bisect.bisect_right(starts, kernel_start) - 1, 0)
    # A clamped first sample can start before earlier ones end: look back a little.
    while i > 0 and samples[i - 1].end > kernel_start:
        i -= 1
    while i < len(samples) and samples[i].start < kernel_end:
        sample = samples[i]
        i += 1
        low, high = max(sample.start, kernel_start), min(sample.end, kernel_end)
        if high <= low:
            continue
        covered += high - low
        if sample.flags:
            flags |= sample.flags
            continue
        width = sample.end - sample.start
        for m in metrics:
            value = sample.values.get(m)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                nulls.add(m)
            else:
                totals[m] += value * (high - low) / width
    estimates = {m: (None if m in nulls else totals[m]) for m in metrics}
    return estimates, covered, flags, nulls


def analyze_window(window, samples, kernels, metrics):
    """Integrates every named kernel (kernel_key) wholly inside the window.
    window: dict with opened_ns, closed_ns, pid. samples: [Sample] of that window.
    kernels: [Kernel]. Returns a list of launch dicts: key, start, end, status
    ('ok'; 'flagged': overlaps a flagged sample; 'uncovered': under MIN_COVERAGE
    of it had samples), flags, coverage, estimates (None for a metric that had a
    NULL value in a sample it overlaps), nulls."""
    samples = sorted(samples, key=lambda s: (s.start, s.index))
    starts = [s.start for s in samples]
    launches = []
    for kernel in kernels:
        key = kernel_key(kernel.name)
        if key is None or kernel.pid != window["pid"] or kernel.end <= kernel.start:
            continue
        if kernel.start < window["opened_ns"] or kernel.end > window["closed_ns"]:
            continue
        estimates, covered, flags, nulls = integrate_launch(samples, starts, kernel.start, kernel.end, metrics)
        coverage = covered / (kernel.end - kernel.start)
        if flags:
            status = "flagged"
        elif coverage < MIN_COVERAGE:
            status = "uncovered"
        else:
            status = "ok"
        launches.append({"key": key, "start": kernel.start, "end": kernel.end, "status": status,
                         "flags": flags, "coverage": coverage, "estimates": estimates, "nulls": nulls})
    return launches


def estimate_lag(samples, kernels, metric="dram__bytes_read.sum", interval_ns=10000):
    """The shift of the kernels' times (ns, added to them) that best lines the
    rate of `metric` in unflagged samples up with the time the memory kernels
    ran (Pearson correlation). Returns (best lag, correlation there, correlation
    at lag 0), or None when there is too little to tell."""
    spans = sorted((k.start, k.end) for k in kernels if kernel_key(k.name) and kernel_key(k.name).startswith("mem_"))
    points = [(s.start, s.end, s.values.get(metric) / (s.end - s.start)) for s in samples
              if not s.flags and s.end > s.start and s.values.get(metric) is not None]
    if len(spans) < 2 or len(points) < 10:
        return None
    span_starts = [a for a, _ in spans]
    prefix = [0]
    for a, b in spans:
        prefix.append(prefix[-1] + (b - a))

    def busy_before(t):  # mem-kernel time before t (spans do not overlap: one stream)
        j = bisect.bisect_right(span_starts, t)
        if j == 0:
            return 0
        a, b = spans[j - 1]
        return prefix[j - 1] + (min(t, b) - a)

    ys = [y for _, _, y in points]
    y_mean = sum(ys) / len(ys)
    y_dev = [y - y_mean for y in ys]
    y_norm = math.sqrt(sum(d * d for d in y_dev))

    def correlation(lag):
        xs = [(busy_before(e - lag) - busy_before(s - lag)) / (e - s) for s, e, _ in points]
        x_mean = sum(xs) / len(xs)
        x_dev = [x - x_mean for x in xs]
        x_norm = math.sqrt(sum(d * d for d in x_dev))
        if x_norm == 0 or y_norm == 0:
            return 0.0
        return sum(a * b for a, b in zip(x_dev, y_dev)) / (x_norm * y_norm)

    coarse = sorted(((correlation(lag), lag) for lag in range(-2000000, 2000001, 50000)), reverse=True)
    fine_step = max(interval_ns // 2, 2000)
    best = max(coarse[:3] + [(correlation(lag), lag) for _, centre in coarse[:3]
                             for lag in range(centre - 50000, centre + 50001, fine_step)])
    return best[1], best[0], correlation(0)


# ---------------------------------------------------------------------------
# sessions


def connect(session):
    path = os.path.join(session, "session.db")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def load_kernels(db):
    return [Kernel(*row) for row in db.execute(
        "SELECT k.pid, n.name, k.start_ns, k.end_ns FROM kernels k JOIN names n ON n.id = k.name_id "
        "ORDER BY k.start_ns")]


def load_pm_session(session):
    """Everything the analysis and the diagnostics read from a traced session."""
    db = connect(session)
    q = lambda sql, *a: db.execute(sql, a).fetchall()
    windows = []
    for row in q("SELECT pid, id, token_kind, opened_ns, closed_ns, close_reason, engine, engine_status, "
                 "engine_reason, engine_samples FROM windows ORDER BY pid, id"):
        window = dict(zip(("pid", "id", "token_kind", "opened_ns", "closed_ns", "close_reason", "engine",
                           "engine_status", "engine_reason", "engine_samples"), row))
        by_index = {}
        for index, start, end, flags, metric, value in q(
                "SELECT sample_index, start_ns, end_ns, overflow, metric, value FROM pm_samples "
                "WHERE pid = ? AND window_id = ? ORDER BY sample_index", window["pid"], window["id"]):
            if index not in by_index:
                by_index[index] = Sample(index, start, end, flags, {})
            by_index[index].values[metric] = value
        window["samples"] = [by_index[i] for i in sorted(by_index)]
        windows.append(window)
    data = {
        "windows": windows,
        "kernels": load_kernels(db),
        "drops": q("SELECT pid, source, detail, count FROM drops WHERE count != 0 ORDER BY source, detail"),
        "capabilities": q("SELECT feature, status, reason FROM capabilities "
                          "WHERE feature IN ('pm_sampling', 'pm_attribution', 'deep_windows')"),
        "log": q("SELECT level, message FROM log WHERE message LIKE '%PM%' OR message LIKE '%cuda-pm%' "
                 "OR message LIKE '%window%' ORDER BY time_ns"),
        "latency": q("SELECT n.name, m.value FROM metrics m JOIN names n ON n.id = m.name_id "
                     "WHERE n.name LIKE 'pm_open_to_first%' ORDER BY m.time_ns"),
    }
    db.close()
    return data


def load_reference(session):
    """{kernel key: {metric: [values]}} from a range replay session, and the
    spans as rows (name, occurrence, declined, reason, kernels, passes_run)."""
    db = connect(session)
    spans = db.execute("SELECT name, occurrence, declined, reason, kernels, passes_run FROM replay_spans").fetchall()
    reference = collections.defaultdict(lambda: collections.defaultdict(list))
    for kernel, metric, value in db.execute(
            "SELECT l.kernel, m.metric, m.value FROM replay_launches l "
            "JOIN replay_spans s ON s.pid = l.pid AND s.span_id = l.span_id "
            "JOIN replay_metrics m ON m.pid = l.pid AND m.launch_id = l.launch_id "
            "WHERE NOT s.declined AND NOT l.declined ORDER BY l.launch_id"):
        key = kernel_key(kernel)
        if key is not None and value is not None:
            reference[key][metric].append(value)
    db.close()
    return reference, spans


# ---------------------------------------------------------------------------
# diagnostics


def window_diagnostics(label, window, data, launches, interval_ns):
    samples = window["samples"]
    print(f"-- {label}: window {window['id']} ({window['token_kind']}): engine {window['engine']} "
          f"{window['engine_status']}{' (' + window['engine_reason'] + ')' if window['engine_reason'] else ''}, "
          f"closed by {window['close_reason']}")
    opened, closed = window["opened_ns"], window["closed_ns"]
    if opened is None or closed is None:
        print("   never opened")
        return
    print(f"   open {(closed - opened) / 1e6:.3f} ms; samples stored {len(samples)}, "
          f"engine reported {window['engine_samples']}")
    if not samples:
        return
    widths = [s.end - s.start for s in samples]
    print(f"   sample durations: {spread(widths, 1000, ' us')}; without the first: {spread(widths[1:], 1000, ' us')}")
    ordered = sorted(samples, key=lambda s: s.start)
    spacing = [b.start - a.start for a, b in zip(ordered[1:], ordered[2:])]
    gaps = [b.start - a.end for a, b in zip(ordered, ordered[1:])]
    holes = [g for g in gaps if g * 2 > interval_ns * 3]
    print(f"   spacing (start to start, after the first): {spread(spacing, 1000, ' us')}; "
          f"end-to-next-start {spread(gaps, 1000, ' us')}; holes over 1.5 intervals: {len(holes)}"
          f"{', widest %.3f ms' % (max(holes) / 1e6) if holes else ''}; overlaps: {sum(1 for g in gaps if g < 0)}")
    combos = collections.Counter(s.flags for s in samples)
    bits = {name: sum(1 for s in samples if s.flags & bit) for bit, name in SAMPLE_FLAGS.items()}
    print(f"   flags: {dict(sorted(combos.items()))} (value: samples); per flag {bits}; "
          f"first sample flags {samples[0].flags}")
    first, last = samples[0], samples[-1]
    print(f"   first sample [{(first.start - opened) / 1e6:+.3f}, {(first.end - opened) / 1e6:+.3f}] ms from open, "
          f"values {{{', '.join(f'{SHORT.get(m, m)}: {fmt(v)}' for m, v in sorted(first.values.items()))}}}")
    print(f"   last sample ends {(last.end - closed) / 1e6:+.3f} ms from close")
    nulls = collections.Counter(m for s in samples for m, v in s.values.items() if v is None)
    if nulls:
        print(f"   NULL values: {dict(nulls)}")
    zero = {SHORT.get(m, m): sum(1 for s in samples if s.values.get(m) == 0) for m in METRIC_NAMES}
    print(f"   samples with value 0 per metric: {zero}")
    for m in METRIC_NAMES:
        values = [s.values[m] for s in samples if not s.flags and s.values.get(m) is not None]
        if values:
            print(f"   unflagged {SHORT[m]}: {len(values)} samples, median {fmt(median(values))}, "
                  f"max {fmt(max(values))}, sum {fmt(sum(values))}")
    inside = [k for k in data["kernels"] if k.pid == window["pid"] and kernel_key(k.name)
              and k.start >= opened and k.end <= closed]
    if inside:
        usable = [s for s in ordered if not s.flags]
        print(f"   kernels wholly in the window: {len(inside)}, first starts {(inside[0].start - opened) / 1e6:+.3f} ms "
              f"from open, last ends {(inside[-1].end - closed) / 1e6:+.3f} ms from close; first unflagged sample "
              f"starts {((usable[0].start - inside[0].start) / 1e6) if usable else float('nan'):+.3f} ms from the "
              f"first kernel's start, last sample ends {(ordered[-1].end - inside[-1].end) / 1e6:+.3f} ms from the "
              f"last kernel's end")
    else:
        print("   no named kernel wholly inside the window")
    status = collections.Counter(l["status"] for l in launches)
    touched = collections.Counter(SAMPLE_FLAGS.get(bit) for l in launches for bit in SAMPLE_FLAGS if l["flags"] & bit)
    print(f"   launches: {dict(status)}; flagged samples they touched: {dict(touched)}; "
          f"coverage {spread([l['coverage'] for l in launches])}")
    null_launches = collections.Counter(SHORT.get(m, m) for l in launches for m in l["nulls"])
    if null_launches:
        print(f"   launches without an estimate (a NULL value under them), per metric: {dict(null_launches)}")
    # Units: samples wholly inside the two longest memory kernels.
    long_kernels = [k for k in inside if kernel_key(k.name) in ("mem_5ms", "mem_2ms")]
    rates = collections.defaultdict(list)
    for k in long_kernels:
        for s in samples:
            if not s.flags and s.start >= k.start and s.end <= k.end and s.end > s.start:
                for m in METRIC_NAMES:
                    if s.values.get(m) is not None:
                        rates[m].append(s.values[m] / (s.end - s.start))
    if rates:
        print("   value per ns of sample inside mem_2ms/mem_5ms (totals per sample give GB/s for bytes, GHz for "
              "cycles, 1 for the duration): " +
              ", ".join(f"{SHORT[m]} {median(v):.4g}" for m, v in rates.items()))
    lag = estimate_lag(samples, inside, interval_ns=interval_ns)
    if lag:
        print(f"   clocks: the DRAM read rate lines up best with the memory kernels when the samples are taken "
              f"as {lag[0] / 1000:+.1f} us late against the kernels (correlation {lag[1]:.3f}; at 0 us: {lag[2]:.3f})")


def session_diagnostics(data):
    for feature, status, reason in data["capabilities"]:
        print(f"   capability {feature}: {status}: {reason}")
    pm_drops = [d for d in data["drops"] if d[1] in ("pm_sampling", "scope_history")]
    print(f"   drops (pm_sampling, scope_history): {[(s, d, c) for _, s, d, c in pm_drops] or 'none'}")
    other = [(s, d, c) for _, s, d, c in data["drops"] if s not in ("pm_sampling", "scope_history")]
    if other:
        print(f"   other drops: {other}")
    for name, value in data["latency"]:
        print(f"   {name} {value / 1e6:.3f} ms")
    for level, message in data["log"][:30]:
        print(f"   log {level}: {message[:300]}")


# ---------------------------------------------------------------------------
# runs


def clean_environment(**extra):
    """The caller's environment without flare's own variables (another part of
    gpu-check.sh may have exported FLARE_PM=0), except where to find libraries."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FLARE_") or k in ("FLARE_LIBRARY", "FLARE_CUPTI_PATH")}
    env.update(extra)
    return env


def run(command, env, timeout):
    print("$ " + " ".join(f"{k}={v}" for k, v in env.items() if k.startswith("FLARE_")) + " " +
          " ".join(command), flush=True)
    try:
        done = subprocess.run(command, env=env, timeout=timeout, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s"
    for line in done.stderr.splitlines()[-15:]:
        print(f"   stderr: {line}")
    output = next((line for line in done.stdout.splitlines() if line.startswith("{")), "")
    try:
        summary = json.loads(output) if output else None
        if summary:
            print(f"   program: {summary['steps']} steps in {summary['seconds']} s, {summary['sms']} SMs, "
                  f"checksum {summary['checksum']}")
    except (ValueError, KeyError):
        pass
    return done.returncode, output, done.stderr


def fresh(path):
    if os.path.isdir(path):
        shutil.rmtree(path)


def window_length_ns(interval_ns):
    """A window whose samples a close can always read (at most 4 image fills of
    2,000 samples: docs/pm-sampling.md), whatever the decoder kept up with:
    7,000 intervals, from 50 ms to 1 s."""
    return min(max(7000 * interval_ns, 50_000_000), 1_000_000_000) // 1_000_000 * 1_000_000


# ---------------------------------------------------------------------------
# report


def aggregate(launches_by_interval, reference, durations):
    """Rows: per (kernel key, interval, metric): n, PM median, reference,
    error of the median (%), median |error| of the launches (%)."""
    rows = []
    for interval, launches in launches_by_interval.items():
        by_key = collections.defaultdict(list)
        for launch in launches:
            if launch["status"] == "ok":
                by_key[launch["key"]].append(launch)
        for key in sorted(set(by_key) | set(reference), key=order_key):
            for metric in METRIC_NAMES:
                values = [l["estimates"][metric] for l in by_key.get(key, []) if l["estimates"][metric] is not None]
                ref_values = reference.get(key, {}).get(metric, [])
                ref = median(ref_values)
                pm = median(values)
                error = abs_error = None
                if ref and pm is not None:
                    error = (pm - ref) / ref * 100
                    abs_error = median([abs(v - ref) / ref * 100 for v in values])
                rows.append({"key": key, "interval": interval, "metric": metric, "n": len(values), "pm": pm,
                             "ref": ref, "ref_n": len(ref_values), "error": error, "abs_error": abs_error,
                             "duration": durations.get(key)})
    return rows


def print_tables(rows, intervals):
    for metric in METRIC_NAMES:
        print(f"\n== {metric} ({UNIT[metric]} per kernel): PM integrated over each launch vs the range profiler")
        print(f"{'kernel':<11} {'dur_us':>9} {'interval':>8} {'n':>4} {'PM median':>11} {'reference':>11} "
              f"{'error%':>8} {'med|err|%':>9}")
        chosen = [r for r in rows if r["metric"] == metric]
        chosen.sort(key=lambda r: (order_key(r["key"]), intervals.index(r["interval"])))
        for r in chosen:
            note = "" if r["key"].startswith("mem_") or metric in KIND_METRICS["fma"] else "  (not judged)"
            duration = f"{r['duration'] / 1000:.1f}" if r["duration"] else "n/a"
            error = f"{r['error']:+.2f}" if r["error"] is not None else "n/a"
            abs_error = f"{r['abs_error']:.2f}" if r["abs_error"] is not None else "n/a"
            print(f"{r['key']:<11} {duration:>9} {duration_text(r['interval']):>8} {r['n']:>4} {fmt(r['pm']):>11} "
                  f"{fmt(r['ref']):>11} {error:>8} {abs_error:>9}{note}")


def shortest_within(rows, interval, kind, metric):
    """The shortest target length from which every longer kernel of `kind` has a
    median |error| within TOLERANCE_PCT; 'none' when the longest fails, 'n/a'
    without data."""
    chosen = sorted((r for r in rows if r["interval"] == interval and r["metric"] == metric
                     and kernel_kind(r["key"]) == kind), key=lambda r: order_key(r["key"]))
    chosen = [r for r in chosen if r["abs_error"] is not None]
    if not chosen:
        return "n/a"
    answer = "none"
    for r in reversed(chosen):
        if r["abs_error"] > TOLERANCE_PCT:
            break
        duration = f" ({r['duration'] / 1000:.0f} us)" if r["duration"] else ""
        answer = r["key"].split("_", 1)[1] + duration
    return answer


def print_summary(rows, intervals):
    print(f"\n== summary: per interval, the shortest kernel from which every longer kernel of the kind is within "
          f"{TOLERANCE_PCT:g}% (median |error| of its launches; target length, measured median duration)")
    for kind in KINDS:
        metrics = KIND_METRICS[kind]
        print(f"{kind}: {'interval':>8} " + " ".join(f"{SHORT[m]:>18}" for m in metrics))
        for interval in intervals:
            print(f"     {duration_text(interval):>8} " +
                  " ".join(f"{shortest_within(rows, interval, kind, m):>18}" for m in metrics))


# ---------------------------------------------------------------------------
# main


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flare", nargs="?")
    parser.add_argument("build_gpu_dir", nargs="?")
    parser.add_argument("work_dir", nargs="?")
    parser.add_argument("--intervals", default="10us,20us,50us,100us")
    parser.add_argument("--steps", type=int, default=5, help="least steps per traced run (default 5)")
    parser.add_argument("--runs", type=int, default=2, help="traced runs per interval (default 2)")
    parser.add_argument("--after", default="2s", help="--deep-after (default 2s: after PM set-up)")
    parser.add_argument("--window", help="--deep-for for every interval (default: 7000 intervals, 50ms..1s)")
    parser.add_argument("--occurrence", type=int, default=3, help="the step range replay measures (default 3)")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not (args.flare and args.build_gpu_dir and args.work_dir):
        parser.print_usage()
        return 2
    try:
        intervals = [parse_duration_ns(t) for t in args.intervals.split(",")]
        after_ns = parse_duration_ns(args.after)
        window_ns = parse_duration_ns(args.window) if args.window else None
    except ValueError as error:
        print(f"pm_accuracy.py: {error}", file=sys.stderr)
        return 2
    program = os.path.join(args.build_gpu_dir, "pm_accuracy")
    os.makedirs(args.work_dir, exist_ok=True)
    print("== pm_accuracy: PM samples integrated per kernel against the range profiler")
    print(f"preset {PRESET}: labels sm__cycles_active.avg, gr__cycles_elapsed.max, dram__bytes_read.sum, "
          f"dram__bytes_write.sum, tensor_pipe_active, gpu__time_duration.sum; compared: {', '.join(METRIC_NAMES)} "
          f"(tensor_pipe_active not: no kernel here uses the tensor pipe)")
    print("units: pm_samples.value is CUPTI's value of the metric over that one sample (bytes, cycles, ns "
          "counted in it; .avg: averaged over SMs), not a rate; each sample's share of a launch is value * "
          "overlap / sample duration (checked per window below: value per ns of sample)")

    launches_by_interval = collections.OrderedDict()
    durations_all = collections.defaultdict(list)
    for interval in intervals:
        launches_by_interval[interval] = []
        window_len = window_ns or window_length_ns(interval)
        min_seconds = (after_ns + window_len) / 1e9 + 1.0
        for run_index in range(1, args.runs + 1):
            label = f"pm-{duration_text(interval)}-{run_index}"
            session = os.path.join(args.work_dir, label)
            fresh(session)
            env = clean_environment(FLARE_PM="1", FLARE_PM_PRESET=PRESET, FLARE_PM_INTERVAL=duration_text(interval))
            command = [args.flare, "trace", "-q", "-o", session, "--deep-after", duration_text(after_ns),
                       "--deep-for", duration_text(window_len), "--", program, str(args.steps),
                       "--min-seconds", f"{min_seconds:.2f}"]
            print(f"\n== {label}", flush=True)
            rc, _, err = run(command, env, timeout=120)
            if rc != 0:
                missing(f"{label}: flare trace exited {rc} ({err.strip().splitlines()[-1] if err.strip() else ''})")
            try:
                data = load_pm_session(session)
            except (OSError, sqlite3.Error) as error:
                missing(f"{label}: no session: {error}")
                continue
            for k in data["kernels"]:
                if kernel_key(k.name):
                    durations_all[kernel_key(k.name)].append(k.end - k.start)
            session_diagnostics(data)
            windows = [w for w in data["windows"] if w["opened_ns"] is not None]
            if not windows:
                missing(f"{label}: no window opened: {[(w['close_reason'], w['engine_reason']) for w in data['windows']]}")
            for window in windows:
                launches = analyze_window(window, window["samples"], data["kernels"], METRIC_NAMES)
                window_diagnostics(label, window, data, launches, interval)
                if not any(not s.flags for s in window["samples"]):
                    missing(f"{label}: window {window['id']} has no unflagged PM sample")
                elif not any(l["status"] == "ok" and any(v is not None for v in l["estimates"].values())
                             for l in launches):
                    missing(f"{label}: window {window['id']}: no kernel launch could be integrated")
                launches_by_interval[interval].extend(launches)

    print("\n== reference: range replay of one step", flush=True)
    reference = {}
    # The five metrics by name; should the collector refuse one of them, the
    # speed-of-light set, which holds all but gr__cycles_elapsed.max.
    problems = []
    for attempt, selection in enumerate((["--metrics", ",".join(METRIC_NAMES)], ["--set", "speed-of-light"])):
        session = os.path.join(args.work_dir, "replay" if attempt == 0 else "replay-sol")
        fresh(session)
        env = clean_environment(FLARE_PM="0")
        command = [args.flare, "replay", "-q", "-o", session, "--range", "step", "--occurrence",
                   str(args.occurrence)] + selection + ["--", program, str(args.occurrence + 3)]
        rc, _, err = run(command, env, timeout=180)
        if rc != 0:
            problems.append(f"replay ({selection[0]}): flare replay exited {rc}")
        try:
            reference, spans = load_reference(session)
        except (OSError, sqlite3.Error) as error:
            problems.append(f"replay ({selection[0]}): no session: {error}")
            continue
        print(f"   spans (name, occurrence, declined, reason, kernels, passes_run): {spans}")
        if not spans or any(s[2] for s in spans):
            problems.append(f"replay ({selection[0]}): the span was not replayed: {spans}")
        for key in sorted(reference, key=order_key):
            print(f"   {key:<10} " + " ".join(f"{SHORT.get(m, m)} {fmt(median(v))} (n {len(v)})"
                                           for m, v in reference[key].items() if m in SHORT))
        if reference and rc == 0:
            break
        print("   no reference values from this replay" + ("; trying the speed-of-light set" if attempt == 0 else ""))
    if not reference:
        for problem in problems:
            missing(problem)
        missing("replay: no reference values")
    elif problems:
        print("   note (the reference above stands): " + "; ".join(problems))

    durations = {key: median(values) for key, values in durations_all.items()}
    print("\n== kernel durations in the traced runs (median, us; replay's gpu__time_duration.sum beside)")
    for key in sorted(durations, key=order_key):
        replayed = median(reference.get(key, {}).get("gpu__time_duration.sum", []))
        print(f"   {key:<10} {durations[key] / 1000:10.1f}   replay {fmt(replayed / 1000 if replayed else None)}")
    rows = aggregate(launches_by_interval, reference, durations)
    print_tables(rows, intervals)
    print_summary(rows, intervals)
    for interval, launches in launches_by_interval.items():
        status = collections.Counter(l["status"] for l in launches)
        print(f"launches at {duration_text(interval)}: {dict(status)} (flagged: touched a flagged sample, left out; "
              f"uncovered: under {MIN_COVERAGE:.0%} of the launch had samples)")
    if failures:
        print(f"\npm_accuracy: {len(failures)} missing: " + "; ".join(failures))
        return 1
    print("\npm_accuracy: done")
    return 0


# ---------------------------------------------------------------------------
# self-test: a synthetic session with the real schema


def c_ddl_statements(file_name, table_start):
    """The SQL statements of a C table of string literals in src/store/FILE_NAME (the table
    beginning at TABLE_START, e.g. "store_schema_ddl[] = {"): adjacent literals joined, one
    statement per comma, a #define'd name standing for its literals. One reader for every
    such table the self-tests rebuild a session from."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "src", "store", file_name)) as handle:
        text = handle.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    macros = {}
    for name, body in re.findall(r"#define\s+(\w+)\s+((?:.*\\\n)*.*)", text):
        macros[name] = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body))
    table = text[text.index(table_start):]
    table = table[table.index("{") + 1:table.index("};")]
    statements, current = [], []
    for literal, word, comma in re.findall(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*)|(,)', table):
        if comma:
            statements.append("".join(current))
            current = []
        elif word:
            current.append(macros[word])
        else:
            current.append(literal)
    if "".join(current).strip():
        statements.append("".join(current))
    return [s for s in statements if s.strip()]


def schema_statements():
    """The session schema's CREATE statements, read from src/store/store_schema.c."""
    return c_ddl_statements("store_schema.c", "store_schema_ddl[] = {")


def self_test():
    problems = []

    def check(condition, message):
        if not condition:
            problems.append(message)
            print(f"FAIL: {message}")

    def close(a, b, tolerance=1e-9):
        return a is not None and b is not None and abs(a - b) <= tolerance * max(1.0, abs(b))

    # 1. integrate_launch by hand: samples [100,110) 10, [110,120) 20, [120,130) 40.
    metric = "dram__bytes_read.sum"
    samples = [Sample(0, 100, 110, 0, {metric: 10.0}), Sample(1, 110, 120, 0, {metric: 20.0}),
               Sample(2, 120, 130, 0, {metric: 40.0})]
    starts = [s.start for s in samples]
    cases = [((105, 125), 5 + 20 + 20), ((112, 118), 12), ((110, 120), 20), ((100, 130), 70), ((128, 130), 8)]
    for (a, b), expected in cases:
        estimates, covered, flags, _ = integrate_launch(samples, starts, a, b, [metric])
        check(close(estimates[metric], expected) and covered == b - a and flags == 0,
              f"integrate [{a},{b}]: {estimates[metric]} covered {covered}, expected {expected} covered {b - a}")
    estimates, covered, _, _ = integrate_launch(samples, starts, 125, 140, [metric])
    check(close(estimates[metric], 20) and covered == 5, f"integrate past the last sample: {estimates}, {covered}")
    flagged = [Sample(0, 90, 110, 8, {metric: 1.3e12})] + samples[1:]
    estimates, covered, flags, _ = integrate_launch(flagged, [s.start for s in flagged], 105, 115, [metric])
    check(flags == 8 and close(estimates[metric], 10) and covered == 10,
          f"a flagged sample contributes nothing: {estimates} flags {flags} covered {covered}")
    nulled = [samples[0], Sample(1, 110, 120, 0, {metric: None}), samples[2]]
    estimates, _, _, nulls = integrate_launch(nulled, starts, 105, 125, [metric])
    check(estimates[metric] is None and nulls == {metric}, f"a NULL value gives no estimate: {estimates}")

    # 2. A whole session with the real schema: a 10 us interval, a clamped
    # first sample, an uneven rate, kernels on and off sample edges.
    print("self-test: the schema from src/store/store_schema.c")
    statements = schema_statements()
    tables = [re.search(r"CREATE TABLE IF NOT EXISTS (\w+)", s).group(1) for s in statements if "CREATE TABLE" in s]
    for needed in ("kernels", "names", "windows", "pm_samples", "replay_spans", "replay_launches", "replay_metrics",
                   "drops", "capabilities", "log", "metrics"):
        check(needed in tables, f"table {needed} missing from the schema")
    directory = tempfile.mkdtemp(prefix="pm-accuracy-self-test-")
    try:
        trace, replay = os.path.join(directory, "trace"), os.path.join(directory, "replay")
        for path in (trace, replay):
            os.makedirs(path)
            db = sqlite3.connect(os.path.join(path, "session.db"))
            for statement in statements:
                db.execute(statement)
            db.commit()
            db.close()
        pid, interval = 4242, 10_000
        opened, closed = 1_000_000_000, 1_003_000_000
        # Rates in bytes/ns, piecewise constant: the truth.
        kernels = [  # name, start, end, read rate, write rate
            ("mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 1_000_200_000,
             1_000_205_000, 3.0, 1.0),  # inside the clamped first sample: flagged
            ("mem_20us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 1_001_001_000,
             1_001_021_000, 3.0, 1.5),  # on sample edges (samples start at opened + 871 us + k * 10 us)
            ("void fma_20us(float*, int, float)", 1_001_021_000, 1_001_043_000, 0.0, 0.0),
            ("mem_100us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 1_001_043_000,
             1_001_143_000, 2.0, 2.0),  # off the edges, between different rates
            ("mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 1_001_500_000,
             1_001_505_000, 4.0, 0.5),  # off edges, idle around it
            ("mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 1_002_000_000,
             1_002_010_000, 1.0, 1.0),  # in a hole without samples
            ("mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 1_002_995_000,
             1_003_005_000, 1.0, 1.0),  # crosses the close
            ("init_arrays(float4*, float4*, unsigned long)", 1_001_200_000, 1_001_210_000, 5.0, 5.0),
        ]

        def integral(t0, t1, column):
            total = 0.0
            for _, a, b, read, write in kernels:
                low, high = max(a, t0), min(b, t1)
                if high > low:
                    total += (high - low) * (read if column == 0 else write)
            return total

        db = sqlite3.connect(os.path.join(trace, "session.db"))
        db.execute("INSERT INTO windows (pid, id, token_kind, label, max_duration_ns, max_launches, requested_ns, "
                   "opened_ns, closed_ns, close_reason, launches, engine, engine_status, engine_reason, "
                   "engine_samples) VALUES (?, 1, 'scheduled', 'scheduled', 3000000, 0, ?, ?, ?, 'duration', 0, "
                   "'cuda-pm', 'disarmed', '', 0)", (pid, opened - 1000, opened, closed))
        names = {}
        for i, (name, a, b, _, _) in enumerate(kernels):
            names.setdefault(name, len(names) + 1)
            db.execute("INSERT OR IGNORE INTO names (id, name) VALUES (?, ?)", (names[name], name))
            db.execute("INSERT INTO kernels (pid, device, stream_id, correlation_id, name_id, start_ns, end_ns, "
                       "grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_memory_bytes, "
                       "registers_per_thread) VALUES (?, 0, 7, ?, ?, ?, ?, 528, 1, 1, 256, 1, 1, 0, 32)",
                       (pid, i + 1, names[name], a, b))
        # Samples: the first clamped to the open (its counters ran since the
        # enable), then every 10 us, with a hole of 100 us at 1.002 s.
        sample_rows = [(opened, opened + 871_000, 8, 1.3e12, 4.0e11)]
        t = opened + 871_000
        after_hole = False
        while t + interval <= closed:
            if 1_001_995_000 <= t < 1_002_095_000:
                after_hole = True
            else:
                sample_rows.append((t, t + interval, 2 if after_hole else 0,
                                    integral(t, t + interval, 0), integral(t, t + interval, 1)))
                after_hole = False
            t += interval
        for index, (a, b, flags, read, write) in enumerate(sample_rows):
            for m in METRIC_NAMES:
                value = {"dram__bytes_read.sum": read, "dram__bytes_write.sum": write,
                         "gpu__time_duration.sum": float(b - a), "gr__cycles_elapsed.max": 1.98 * (b - a),
                         "sm__cycles_active.avg": 1.9 * (b - a)}[m]
                db.execute("INSERT INTO pm_samples (pid, window_id, device, sample_index, start_ns, end_ns, "
                           "scope_instance_id, scope_name, overflow, metric, value) VALUES (?, 1, 0, ?, ?, ?, "
                           "NULL, NULL, ?, ?, ?)", (pid, index, a, b, flags, m, value))
        db.execute("INSERT INTO drops (pid, source, detail, count) VALUES (?, 'pm_sampling', "
                   "'samples missing: holes in the stream without an overflow (estimated)', 10)", (pid,))
        db.commit()
        db.close()

        data = load_pm_session(trace)
        check(len(data["windows"]) == 1 and len(data["windows"][0]["samples"]) == len(sample_rows),
              f"load_pm_session: {len(data['windows'])} windows, samples "
              f"{[len(w['samples']) for w in data['windows']]} (expected {len(sample_rows)})")
        window = data["windows"][0]
        launches = analyze_window(window, window["samples"], data["kernels"], METRIC_NAMES)
        by_start = {l["start"]: l for l in launches}
        check(len(launches) == 6, f"6 named kernels wholly inside the window, got {len(launches)}")
        check(by_start[1_000_200_000]["status"] == "flagged" and by_start[1_000_200_000]["flags"] == 8,
              f"the kernel under the clamped first sample is flagged: {by_start[1_000_200_000]}")
        check(by_start[1_002_000_000]["status"] == "uncovered", f"the kernel in the hole: {by_start[1_002_000_000]}")
        check(1_002_995_000 not in by_start, "the kernel crossing the close is not analysed")
        check(sum(1 for s in window["samples"] if s.flags == 2) == 1, "one sample flagged after the hole")
        # On sample edges the integral is exact.
        mem20 = by_start[1_001_001_000]
        check(mem20["status"] == "ok" and close(mem20["estimates"]["dram__bytes_read.sum"], 60000.0)
              and close(mem20["estimates"]["dram__bytes_write.sum"], 30000.0)
              and close(mem20["estimates"]["gpu__time_duration.sum"], 20000.0)
              and close(mem20["estimates"]["gr__cycles_elapsed.max"], 1.98 * 20000),
              f"mem_20us on sample edges: {mem20}")
        # Off the edges: the pro-rata share of the edge samples, by hand.
        # mem_100us [1,001,043,000, 1,001,143,000]; samples start at
        # opened + 871,000 + k*10,000, i.e. on x,xx1,000: edges at 1,001,041,000
        # and 1,001,141,000. Edge sample [1,001,041,000, 1,001,051,000): 2 us of
        # fma (0) and 8 us of mem_100us (2 B/ns) = 16,000 B, 8/10 of it counts:
        # 12,800. Edge [1,001,141,000, 1,001,151,000): 2 us of mem_100us = 4,000
        # B, 2/10 counts: 800. Whole samples between: 9 x 20,000 = 180,000 (the
        # 1,001,051,000..1,001,141,000 stretch). Total 193,600 against the true
        # 200,000 (-3.2%).
        mem100 = by_start[1_001_043_000]
        check(mem100["status"] == "ok" and close(mem100["estimates"]["dram__bytes_read.sum"], 193600.0),
              f"mem_100us pro rata at the edges: {mem100['estimates']['dram__bytes_read.sum']} (expected 193600)")
        # Idle around it: [1,001,500,000, 1,001,505,000] lies in the sample
        # [1,001,491,000, 1,001,501,000) (1 us of it: 4,000 B, 1/10: 400) and
        # [1,001,501,000, 1,001,511,000) (4 us: 16,000 B, 4/10: 6,400): 6,800
        # against the true 20,000.
        mem5 = by_start[1_001_500_000]
        check(mem5["status"] == "ok" and close(mem5["estimates"]["dram__bytes_read.sum"], 6800.0),
              f"mem_5us inside two samples: {mem5['estimates']['dram__bytes_read.sum']} (expected 6800)")
        fma = by_start[1_001_021_000]
        # fma_20us [1,001,021,000, 1,001,043,000]: the samples up to 1,001,041,000
        # hold nothing (mem_20us ended on the edge); the sample [1,001,041,000,
        # 1,001,051,000) holds 16,000 B of mem_100us, 2/10 of it counts: 3,200 of
        # its neighbour's bytes.
        check(close(fma["estimates"]["dram__bytes_read.sum"], 3200.0),
              f"fma_20us picks up its neighbours' bytes pro rata: {fma['estimates']['dram__bytes_read.sum']}")

        # Reference and aggregation.
        db = sqlite3.connect(os.path.join(replay, "session.db"))
        run_columns = ("passes_planned, passes_run, declined, reason, begin_ns, end_ns, drain_ns, snapshot_bytes, "
                       "shadow_on_device, snapshot_ns, restore_ns, bytes_restored, collector")
        db.execute(f"INSERT INTO replay_spans (pid, span_id, name, occurrence, device, kernels, copies, {run_columns}) "
                   "VALUES (1, 1, 'step', 3, 0, 2, 0, 2, 3, 0, '', 0, 1, 0, 0, 1, 0, 0, 0, 'cupti-range')")
        references = [(2, "mem_100us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 200000.0),
                      (3, "void fma_20us(float*, int, float)", 0.0),
                      (4, "mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 20000.0),
                      (5, "mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 22000.0),
                      (6, "mem_5us(float4*, float4 const*, unsigned long, unsigned long, int, float)", 24000.0)]
        for launch_id, kernel, value in references:
            db.execute(f"INSERT INTO replay_launches (pid, launch_id, device, stream_id, kernel, launch_index, "
                       f"{run_columns}, span_id) VALUES (1, ?, 0, 7, ?, 0, 2, 3, 0, '', 0, 1, 0, 0, 1, 0, 0, 0, "
                       "'cupti-range', 1)", (launch_id, kernel))
            db.execute("INSERT INTO replay_metrics (pid, launch_id, metric, value) VALUES (1, ?, ?, ?)",
                       (launch_id, "dram__bytes_read.sum", value))
        db.commit()
        db.close()
        reference, spans = load_reference(replay)
        check(spans == [("step", 3, 0, "", 2, 3)], f"load_reference spans: {spans}")
        check(reference["mem_5us"]["dram__bytes_read.sum"] == [20000.0, 22000.0, 24000.0],
              f"load_reference values: {dict(reference)}")
        rows = aggregate({interval: launches}, reference, {"mem_100us": 100000, "mem_5us": 5000})
        row = next(r for r in rows if r["key"] == "mem_100us" and r["metric"] == "dram__bytes_read.sum")
        check(row["n"] == 1 and close(row["error"], -3.2) and close(row["abs_error"], 3.2),
              f"aggregate mem_100us: {row}")
        row = next(r for r in rows if r["key"] == "mem_5us" and r["metric"] == "dram__bytes_read.sum")
        check(row["n"] == 1 and close(row["ref"], 22000.0) and close(row["error"], (6800 - 22000) / 22000 * 100),
              f"aggregate mem_5us (reference: median of 3): {row}")
        row = next(r for r in rows if r["key"] == "fma_20us" and r["metric"] == "dram__bytes_read.sum")
        check(row["error"] is None, f"a zero reference gives no error: {row}")
        check(shortest_within(rows, interval, "mem", "dram__bytes_read.sum").startswith("100us"),
              f"summary: {shortest_within(rows, interval, 'mem', 'dram__bytes_read.sum')}")
        print_tables(rows, [interval])
        print_summary(rows, [interval])
        window_diagnostics("self-test", window, data, launches, interval)

        # 3. The lag estimate finds a known shift of the sample clock.
        shift = 30_000
        lag_kernels = []
        lag_samples = []
        t = 0
        lengths = [100_000 + (i * 7919) % 300_000 for i in range(40)]  # 100..400 us, irregular
        for i, length in enumerate(lengths):
            lag_kernels.append(Kernel(pid, "mem_500us(x)" if i % 2 == 0 else "fma_500us(x)", t, t + length))
            t += length
        for i, t in enumerate(range(0, t, interval)):
            busy = sum(max(0, min(k.end, t + interval - shift) - max(k.start, t - shift))
                       for k in lag_kernels if k.name.startswith("mem"))
            lag_samples.append(Sample(i, t, t + interval, 0, {"dram__bytes_read.sum": 3.0 * busy}))
        lag = estimate_lag(lag_samples, lag_kernels, interval_ns=interval)
        check(lag is not None and abs(lag[0] - shift) <= 2_000 and lag[1] > 0.95,
              f"lag estimate: {lag} (expected about {shift})")
    finally:
        shutil.rmtree(directory)
    print(f"self-test: {'PASS' if not problems else 'FAIL (%d)' % len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
