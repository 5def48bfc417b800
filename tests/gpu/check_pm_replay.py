#!/usr/bin/env python3
"""check_pm_replay.py: judges the runs of scripts/gpu-check-pmreplay.sh against issue 25's
performance target for range replay by PM sampling:

  "A PyTorch step of at least 500 kernels: per-kernel DRAM bytes, SM and tensor-pipe
  activity and duration for every kernel >= the method's minimum length, within 5% of
  the range profiler's values (median), in >= 100x less time than Nsight Compute's
  kernel replay of the same kernels and >= 10x less than flare's range replay today."

usage: check_pm_replay.py DIR SUMMARY_JSON [--min-kernel 100us] [--ncu-kernels K|all]
                          [--limit 0.05]
       check_pm_replay.py --self-test

DIR holds, for each run NAME, NAME.json (the program's stdout: its JSON line),
NAME.wall ("start end" in seconds) and NAME.rc (exit status); the runs are plain
(tests/gpu/pm_replay_step.py unprofiled), pm (`flare replay --range step --method pm`,
session pm-session/), rp (`flare replay --range step --set overview`: the range profiler
on the same metrics, session rp-session/), sol (`--set speed-of-light`: flare's range
replay as it is, session sol-session/), ncu (kernel replay of the span's launches, or of
its first K, log ncu.csv) and ncu-off (ncu profiling nothing: its own start-up and the
program, subtracted from ncu's wall time as tests/gpu/check_span.py does).

Judged (each a FAIL: line, exit 1):
  * spans: the span recorded and not declined (replay_spans.declined) in pm, rp and sol;
    at least 500 kernels; pm and rp hold the same kernels in the same order (launch_id
    order within the span, base names equal);
  * results: the checksum identical with and without replay (plain against pm, rp, sol);
  * accuracy: per metric (dram__bytes_read.sum, dram__bytes_write.sum,
    sm__cycles_active.avg, the tensor-pipe metric, gpu__time_duration.sum), over the
    kernels whose range-profiler duration is at least --min-kernel and whose pm value
    is 'measured' by a PM method ('pm-sampling', 'kernel-activity'): the median of
    |pm - rp| / rp at most --limit (5%); p90 and max reported. Reference values below a
    floor are skipped and counted (bytes < 1 MB, cycles < 10,000 (5 us at 2 GHz),
    duration < 1 us): a relative error of almost nothing means nothing, and a kernel
    that does not use the tensor pipe has 0 there. At least one kernel judged per metric;
  * coverage: every kernel of at least 1.1x --min-kernel (by the range profiler's
    duration; the 10% keeps kernels at the edge, which PM may time just under, out) has
    a pm value of each metric, status 'measured' or 'flagged';
  * speed: ncu's kernel replay of the span (its wall time minus ncu-off's; scaled by
    N/K when only K of the span's N kernels were given to it, or when its timeout cut it
    after K, then a lower bound) over the pm span's replay time (replay_spans end_ns -
    begin_ns) at least 100; the sol span's replay time over pm's at least 10. The
    overview range replay's time over pm's, and the wall times, are reported.

How each pm value was made: replay_value_methods (pid, launch_id, metric, method,
status, error_bound, samples) joined to replay_metrics by hand (as the session's
v_replay_values view does: no row means the launch's collector measured it, status
'measured' when the value is there, 'unavailable' when not). Prints a table and writes
SUMMARY_JSON. Must never write into DIR or a session (read-only opens); the self-test
writes only in a temporary folder it removes.
"""
import csv
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile

# (metric as the overview set names it, short name, floor under which the reference
# is skipped, unit). The tensor-pipe metric is found by name in each session.
TENSOR = "tensor"
JUDGED = [
    ("dram__bytes_read.sum", "dram_read", 1e6, "B"),
    ("dram__bytes_write.sum", "dram_write", 1e6, "B"),
    ("sm__cycles_active.avg", "sm_active", 1e4, "cycles"),
    (TENSOR, "tensor", 1e4, "cycles"),
    ("gpu__time_duration.sum", "duration", 1e3, "ns"),
]
REPORTED = [("gr__cycles_elapsed.max", "elapsed", 1e4, "cycles")]  # shown, not judged
DURATION = "gpu__time_duration.sum"
PM_METHODS = ("pm-sampling", "kernel-activity")
VALUED = ("measured", "flagged")
MIN_KERNELS = 500
NCU_TARGET = 100.0
RANGE_TARGET = 10.0
EDGE = 1.1  # coverage: kernels of at least EDGE x the minimum


class Judgement:
    def __init__(self, quiet=False):
        self.failures = []
        self.quiet = quiet

    def fail(self, message):
        self.failures.append(message)
        if not self.quiet:
            print("FAIL:", message)

    def say(self, message=""):
        if not self.quiet:
            print(message)


def parse_duration_ns(text):
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s)?\s*", str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, None: 1}[match.group(2)]
    return float(match.group(1)) * scale


def program_output(path):
    try:
        with open(path) as handle:
            for line in handle:
                if line.strip().startswith("{"):
                    return json.loads(line)
    except (OSError, ValueError):
        pass
    return None


def wall(path):
    try:
        with open(path) as handle:
            start, end = (float(v) for v in handle.read().split())
            return end - start
    except (OSError, ValueError):
        return None


def exit_status(path):
    try:
        with open(path) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def base_name(kernel):
    """A kernel's function name without namespaces, templates or parameters
    (tests/gpu/check_span.py's)."""
    for noise in ("(anonymous namespace)", "<unnamed>", "void "):
        kernel = kernel.replace(noise, "")
    kernel = re.sub(r"[<(].*", "", kernel)
    return kernel.split("::")[-1].strip()


def ncu_kernels(path):
    """[(kernel name, {metric: value})] in launch order, from ncu's --csv log
    (tests/gpu/check_span.py's reading); [] when there is none."""
    try:
        with open(path, errors="replace") as handle:
            lines = [line for line in handle if line.startswith('"')]
    except OSError:
        return []
    kernels = {}
    for row in csv.DictReader(lines):
        try:
            value = float(row["Metric Value"].replace(",", ""))
            key = int(row["ID"])
        except (KeyError, ValueError, AttributeError):
            continue
        entry = kernels.setdefault(key, (row.get("Kernel Name", ""), {}))
        entry[1][row["Metric Name"]] = value
    return [kernels[key] for key in sorted(kernels)]


def ncu_profiled_count(*paths):
    """How many kernels ncu said it profiled ('==PROF== Profiling "..."' lines)."""
    best = 0
    for path in paths:
        try:
            with open(path, errors="replace") as handle:
                best = max(best, sum(1 for line in handle if "==PROF== Profiling" in line))
        except OSError:
            pass
    return best


def columns(connection, table):
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def read_session(database, judgement, label):
    """The first span named 'step' (or the first span) and its kernels in launch order:
    (span dict or None, [{"name", "launch_id", "values": {metric: value},
    "notes": {metric: (method, status, bound, samples)}}], has_value_methods)."""
    if not os.path.exists(database):
        judgement.fail(f"{label}: no session database at {database}")
        return None, [], False
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "replay_spans" not in tables:
        judgement.fail(f"{label}: no replay_spans table in {database}")
        return None, [], False
    spans = [dict(r) for r in connection.execute(
        "SELECT * FROM replay_spans ORDER BY (name = 'step') DESC, begin_ns")]
    if not spans:
        return None, [], "replay_value_methods" in tables
    span = spans[0]
    span["span_count"] = len(spans)
    # The program's own run of the span (pass 0, which only records), for the time flare
    # adds beyond it: replay_passes keys a span's passes by its span id.
    span["own_run_ns"] = None
    if "replay_passes" in tables:
        row = connection.execute(
            "SELECT end_ns - start_ns FROM replay_passes WHERE pid = ? AND launch_id = ? AND pass = 0",
            (span["pid"], span["span_id"])).fetchone()
        span["own_run_ns"] = row[0] if row else None
    launch_columns = columns(connection, "replay_launches")
    if "kernel" in launch_columns:
        name_sql = "l.kernel"
        join = ""
    else:  # a schema that names kernels by id
        name_sql = "n.name"
        join = " JOIN names n ON n.id = l.name_id"
    collector_sql = "l.collector" if "collector" in launch_columns else "''"
    kernels = []
    for row in connection.execute(
            f"SELECT l.launch_id, {name_sql} AS kernel, {collector_sql} AS collector "
            f"FROM replay_launches l{join} WHERE l.pid = ? AND l.span_id = ? ORDER BY l.launch_id",
            (span["pid"], span["span_id"])):
        kernels.append({"launch_id": row["launch_id"], "name": row["kernel"] or "",
                        "collector": row["collector"] or "", "values": {}, "notes": {}})
    by_id = {k["launch_id"]: k for k in kernels}
    for row in connection.execute(
            "SELECT m.launch_id, m.metric, m.value FROM replay_metrics m "
            "JOIN replay_launches l ON l.pid = m.pid AND l.launch_id = m.launch_id "
            "WHERE l.pid = ? AND l.span_id = ?", (span["pid"], span["span_id"])):
        by_id[row["launch_id"]]["values"][row["metric"]] = row["value"]
    has_methods = "replay_value_methods" in tables
    if has_methods:
        for row in connection.execute(
                "SELECT v.launch_id, v.metric, v.method, v.status, v.error_bound, v.samples "
                "FROM replay_value_methods v JOIN replay_launches l "
                "ON l.pid = v.pid AND l.launch_id = v.launch_id "
                "WHERE l.pid = ? AND l.span_id = ?", (span["pid"], span["span_id"])):
            by_id[row["launch_id"]]["notes"][row["metric"]] = (
                row["method"], row["status"], row["error_bound"], row["samples"])
    connection.close()
    return span, kernels, has_methods


def value_note(kernel, metric):
    """(value or None, method, status) as v_replay_values gives them: without a note,
    the launch's collector and 'measured' when there is a value ('unavailable' if not)."""
    value = kernel["values"].get(metric)
    if value is not None and isinstance(value, float) and math.isnan(value):
        value = None
    note = kernel["notes"].get(metric)
    if note is not None:
        return value, note[0] or "", note[1] or ""
    if metric not in kernel["values"]:
        return None, "", "absent"
    return value, kernel["collector"], "measured" if value is not None else "unavailable"


def tensor_metric(kernels):
    """The session's tensor-pipe metric name (the first one with 'tensor' in it)."""
    names = sorted({m for k in kernels for m in list(k["values"]) + list(k["notes"]) if "tensor" in m})
    exact = [n for n in names if n == "sm__pipe_tensor_cycles_active.avg"]
    return (exact or names or [None])[0]


def quantile(values, fraction):
    """Nearest-rank quantile (values non-empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def judge_span(judgement, label, span, kernels):
    result = {"recorded": span is not None}
    if span is None:
        judgement.fail(f"{label}: no span recorded")
        return result
    for key in ("kernels", "copies", "passes_planned", "passes_run", "declined", "reason",
                "collector", "snapshot_bytes", "span_count"):
        if key in span:
            result[key] = span[key]
    result["replay_s"] = (span["end_ns"] - span["begin_ns"]) / 1e9
    # What flare adds beyond the program's own work: the span less the wait for the work
    # the program had queued before it (drain) and its own run (pass 0). ncu's time is
    # likewise its wall time less a run that profiles nothing.
    if span.get("own_run_ns") is not None and span.get("drain_ns") is not None:
        result["added_s"] = result["replay_s"] - (span["drain_ns"] + span["own_run_ns"]) / 1e9
    result["kernels_with_rows"] = len(kernels)
    judgement.say(f"{label:4} span: {span.get('kernels')} kernels, passes "
                  f"{span.get('passes_run')}/{span.get('passes_planned')}, declined "
                  f"{span.get('declined')}, replay {result['replay_s']:.3f} s, collector "
                  f"{span.get('collector')!r}; reason: {str(span.get('reason'))[:300]}")
    if span.get("declined"):
        judgement.fail(f"{label}: span declined: {span.get('reason')}")
    elif (span.get("kernels") or 0) < MIN_KERNELS:
        judgement.fail(f"{label}: {span.get('kernels')} kernels in the span (target >= {MIN_KERNELS})")
    elif len(kernels) != span.get("kernels"):
        judgement.fail(f"{label}: {len(kernels)} kernel rows for a span of {span.get('kernels')}")
    return result


def judge_accuracy(judgement, pm_kernels, rp_kernels, min_ns, limit, summary):
    pm_tensor, rp_tensor = tensor_metric(pm_kernels), tensor_metric(rp_kernels)
    summary["tensor_metric"] = {"pm": pm_tensor, "rp": rp_tensor}
    pairs = list(zip(pm_kernels, rp_kernels))
    long_kernels = [(p, r) for p, r in pairs
                    if (r["values"].get(DURATION) or 0) >= min_ns]
    edge_kernels = [(p, r) for p, r in pairs
                    if (r["values"].get(DURATION) or 0) >= EDGE * min_ns]
    summary["kernels_ge_min"] = len(long_kernels)
    summary["kernels_ge_edge"] = len(edge_kernels)
    judgement.say(f"kernels of at least {min_ns / 1e3:g} us by the range profiler: "
                  f"{len(long_kernels)} of {len(pairs)} ({len(edge_kernels)} of at least "
                  f"{EDGE * min_ns / 1e3:g} us)")
    if len(long_kernels) < 150:
        judgement.say(f"note: the step was designed for >= 150 kernels of at least "
                      f"{min_ns / 1e3:g} us; {len(long_kernels)} here")
    metrics = {}
    header = (f"{'metric':24} {'judged':>6} {'floor':>5} {'median':>8} {'p90':>8} {'max':>8}  "
              f"statuses of kernels >= min (all kernels)")
    judgement.say(header)
    for metric, short, floor, unit in JUDGED + REPORTED:
        is_judged = (metric, short, floor, unit) in JUDGED
        pm_name = pm_tensor if metric == TENSOR else metric
        rp_name = rp_tensor if metric == TENSOR else metric
        entry = {"pm_metric": pm_name, "rp_metric": rp_name, "floor": floor, "unit": unit,
                 "judged": is_judged}
        metrics[short] = entry
        if pm_name is None or rp_name is None:
            entry["missing"] = True
            if is_judged:
                judgement.fail(f"{short}: no such metric in the "
                               f"{'pm' if pm_name is None else 'range-profiler'} session")
            continue
        errors, skipped, other_method = [], 0, 0
        worst = []
        statuses_long, statuses_all, methods_long = {}, {}, {}
        uncovered = []
        for index, (pm, rp) in enumerate(pairs):
            value, method, status = value_note(pm, pm_name)
            statuses_all[status] = statuses_all.get(status, 0) + 1
            rp_duration = rp["values"].get(DURATION) or 0
            if rp_duration < min_ns:
                continue
            statuses_long[status] = statuses_long.get(status, 0) + 1
            methods_long[method] = methods_long.get(method, 0) + 1
            if rp_duration >= EDGE * min_ns and (status not in VALUED or value is None):
                uncovered.append((index, pm["name"], status))
            if status != "measured" or value is None:
                continue
            if method not in PM_METHODS:
                other_method += 1
                continue
            reference = rp["values"].get(rp_name)
            if reference is None or (isinstance(reference, float) and math.isnan(reference)) \
                    or abs(reference) < floor:
                skipped += 1
                continue
            error = abs(value - reference) / abs(reference)
            errors.append(error)
            worst.append((error, index, pm["name"], value, reference))
        entry.update({"judged_kernels": len(errors), "skipped_below_floor": skipped,
                      "measured_by_other_methods": other_method,
                      "statuses_ge_min": statuses_long, "statuses_all": statuses_all,
                      "methods_ge_min": methods_long,
                      "not_valued_ge_edge": len(uncovered)})
        if errors:
            entry["median"] = statistics.median(errors)
            entry["p90"] = quantile(errors, 0.9)
            entry["max"] = max(errors)
            worst.sort(reverse=True)
            entry["worst"] = [{"index": i, "kernel": n[:80], "pm": v, "rp": r, "error": e}
                              for e, i, n, v, r in worst[:5]]
        cells = (f"{100 * entry['median']:7.2f}% {100 * entry['p90']:7.2f}% "
                 f"{100 * entry['max']:7.2f}%" if errors else f"{'-':>8} {'-':>8} {'-':>8}")
        statuses = ", ".join(f"{k or '?'} {v}" for k, v in sorted(statuses_long.items()))
        everything = ", ".join(f"{k or '?'} {v}" for k, v in sorted(statuses_all.items()))
        judgement.say(f"{short + ('' if is_judged else ' (shown)'):24} {len(errors):6} {skipped:5} "
                      f"{cells}  {statuses} ({everything})")
        if other_method:
            judgement.say(f"  {short}: {other_method} values of kernels >= min measured by "
                          f"another method ({methods_long}), not judged")
        if not is_judged:
            continue
        if not errors:
            judgement.fail(f"{short}: no kernel of at least {min_ns / 1e3:g} us has a measured PM "
                           f"value to judge (statuses {statuses_long or statuses_all})")
        elif entry["median"] > limit:
            judgement.fail(f"{short}: median |pm - rp| / rp {100 * entry['median']:.2f}% over "
                           f"{len(errors)} kernels (target {100 * limit:g}%)")
        if uncovered:
            shown = "; ".join(f"#{i} {n[:40]} {s}" for i, n, s in uncovered[:3])
            judgement.fail(f"{short}: coverage: {len(uncovered)} of {len(edge_kernels)} kernels of "
                           f"at least {EDGE * min_ns / 1e3:g} us have no PM value ({shown})")
    summary["metrics"] = metrics


def judge_times(judgement, directory, summary, spans, span_kernels, ncu_kernels_asked):
    times = {}
    for name in ("plain", "pm", "rp", "sol", "ncu", "ncu-off"):
        times[f"{name}_wall_s"] = wall(os.path.join(directory, f"{name}.wall"))
    for label in ("pm", "rp", "sol"):
        times[f"{label}_replay_s"] = spans.get(label, {}).get("replay_s")
    pm_s = times["pm_replay_s"]
    ncu_on, ncu_off = times["ncu_wall_s"], times["ncu-off_wall_s"]
    ncu_rc = exit_status(os.path.join(directory, "ncu.rc"))
    profiled = ncu_kernels(os.path.join(directory, "ncu.csv"))
    said = ncu_profiled_count(os.path.join(directory, "ncu.csv"), os.path.join(directory, "ncu.err"),
                              os.path.join(directory, "ncu.json"))
    timed_out = ncu_rc in (124, 137)
    times.update({"ncu_exit": ncu_rc, "ncu_timed_out": timed_out, "ncu_kernels_with_results":
                  len(profiled), "ncu_kernels_said_profiled": said})
    asked = span_kernels if ncu_kernels_asked in (None, "all") else min(int(ncu_kernels_asked),
                                                                           span_kernels or 0)
    times["ncu_kernels_asked"] = asked
    done = len(profiled) if not timed_out else max(len(profiled), said)
    times["ncu_kernels_done"] = done
    estimate = None
    if ncu_on is not None and ncu_off is not None and done and span_kernels:
        measured = ncu_on - ncu_off
        times["ncu_replay_measured_s"] = measured
        estimate = measured * span_kernels / done
        times["ncu_replay_s"] = estimate
        times["ncu_replay_scaled"] = done != span_kernels
        times["ncu_replay_lower_bound"] = timed_out
        if timed_out:
            times["ncu_replay_at_least_s"] = measured
        if done != span_kernels:
            judgement.say(f"ncu replayed {done} of the span's {span_kernels} kernels"
                          f"{' before its timeout cut it' if timed_out else ''}: its "
                          f"{measured:.1f} s{' (a lower bound for the whole span)' if timed_out else ''}"
                          f" scaled by {span_kernels}/{done} to {estimate:.1f} s (an estimate: "
                          f"the same time per kernel)")
    elif timed_out and not done:
        judgement.fail("ncu was cut by its timeout before it profiled any kernel of the span")
    elif ncu_rc is not None and ncu_rc != 0 and not timed_out:
        judgement.fail(f"ncu exited {ncu_rc} (see ncu.err / ncu.csv)")
    if ncu_rc == 0 and span_kernels and asked and len(profiled) != asked:
        judgement.fail(f"ncu has results for {len(profiled)} kernels, {asked} were asked")
    summary["times"] = times
    return estimate


FLOOR_CALLS = ("start", "work", "stop", "decode", "info")


def read_floor(directory):
    """CUPTI's floor for one replayed pass from floor.txt (tests/gpu/pm_switch_probe.cu's JSON
    lines, bare CUPTI): per "fixed" pass Start + the work + Stop + DecodeData +
    GetCounterDataInfo + every sample evaluated; the median pass, or None."""
    passes = []
    try:
        with open(os.path.join(directory, "floor.txt")) as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("kind") != "pass" or record.get("mode") != "fixed" or \
                        record.get("error") is not None:
                    continue
                calls = record.get("ns", {})
                if any(calls.get(name) is None for name in FLOOR_CALLS) or \
                        record.get("evaluate_ns") is None:
                    continue
                # Evaluated on threads too, every value the same: CUPTI allows the faster.
                evaluate_ns = record["evaluate_ns"]
                parallel_ns = record.get("evaluate_parallel_ns")
                same = record.get("parallel_mismatches") == 0
                if parallel_ns is not None and same:
                    evaluate_ns = min(evaluate_ns, parallel_ns)
                passes.append({"s": (sum(calls[name] for name in FLOOR_CALLS) + evaluate_ns) / 1e9,
                               "work_s": calls["work"] / 1e9,
                               "decode_s": (calls["stop"] + calls["decode"] + calls["info"]) / 1e9,
                               "evaluate_s": evaluate_ns / 1e9,
                               "evaluate_serial_s": record["evaluate_ns"] / 1e9,
                               "evaluate_threads": record.get("evaluate_threads"),
                               "parallel_mismatches": record.get("parallel_mismatches"),
                               "samples": record.get("samples")})
    except OSError:
        return None
    if not passes:
        return None
    passes.sort(key=lambda item: item["s"])
    floor = dict(passes[len(passes) // 2])
    floor["passes"] = len(passes)
    return floor


def judge_ncu_names(judgement, directory, rp_kernels, summary):
    profiled = ncu_kernels(os.path.join(directory, "ncu.csv"))
    same = sum(1 for (a, _), b in zip(profiled, rp_kernels) if base_name(a) == base_name(b["name"]))
    summary["ncu_names_matching_span"] = same
    if profiled and same < len(profiled):
        judgement.fail(f"only {same} of ncu's {len(profiled)} kernels line up with the span's "
                       f"(its launch range missed the step)")


def judge(directory, summary_path, min_ns, limit, ncu_kernels_asked, quiet=False):
    """Returns (failures, summary)."""
    judgement = Judgement(quiet)
    summary = {"min_kernel_ns": min_ns, "limit": limit, "targets": {
        "median_relative_error": limit, "kernels": MIN_KERNELS, "ncu_over_pm": NCU_TARGET,
        "range_replay_over_pm": RANGE_TARGET}}
    plain = program_output(os.path.join(directory, "plain.json"))
    summary["program"] = plain
    if plain is None:
        judgement.fail("no JSON output from the unprofiled run (plain.json)")
    spans, kernel_lists, checksums = {}, {}, {}
    for label in ("pm", "rp", "sol"):
        output = program_output(os.path.join(directory, f"{label}.json"))
        if output is None:
            judgement.fail(f"{label}: no JSON output from the program under flare replay")
        elif plain is not None:
            checksums[label] = output.get("checksum") == plain.get("checksum")
            if not checksums[label]:
                judgement.fail(f"{label}: checksum {output.get('checksum')} under replay, "
                               f"{plain.get('checksum')} without")
        span, kernels, has_methods = read_session(
            os.path.join(directory, f"{label}-session", "session.db"), judgement, label)
        spans[label] = judge_span(judgement, label, span, kernels)
        kernel_lists[label] = kernels
        if label == "pm":
            summary["pm_has_value_methods"] = has_methods
            if span is not None and not has_methods:
                judgement.fail("pm: no replay_value_methods table: the values' methods and "
                               "statuses are unknown (every value taken as measured)")
    summary["checksums_identical"] = checksums
    summary["spans"] = spans
    pm_kernels, rp_kernels = kernel_lists["pm"], kernel_lists["rp"]
    if pm_kernels and rp_kernels:
        same = sum(1 for a, b in zip(pm_kernels, rp_kernels) if base_name(a["name"]) == base_name(b["name"]))
        summary["kernels_matching"] = same
        if len(pm_kernels) != len(rp_kernels) or same != len(pm_kernels):
            judgement.fail(f"pm and rp spans differ: {len(pm_kernels)} and {len(rp_kernels)} "
                           f"kernels, {same} matching by order and name")
        judge_accuracy(judgement, pm_kernels, rp_kernels, min_ns, limit, summary)
    else:
        judgement.fail("no kernels to compare (pm or rp span missing)")
    span_kernels = len(rp_kernels) or len(pm_kernels)
    ncu_s = judge_times(judgement, directory, summary, spans, span_kernels, ncu_kernels_asked)
    if rp_kernels:
        judge_ncu_names(judgement, directory, rp_kernels, summary)
    times = summary["times"]
    pm_s, sol_s, rp_s = times["pm_replay_s"], times["sol_replay_s"], times["rp_replay_s"]
    ratios = {}
    if pm_s:
        ratios["ncu_over_pm"] = ncu_s / pm_s if ncu_s is not None else None
        ratios["range_replay_over_pm"] = sol_s / pm_s if sol_s is not None else None
        ratios["overview_range_replay_over_pm"] = rp_s / pm_s if rp_s is not None else None
        if times.get("ncu_replay_at_least_s") is not None:
            ratios["ncu_over_pm_at_least"] = times["ncu_replay_at_least_s"] / pm_s
        if times.get("pm_wall_s") and times.get("plain_wall_s") and \
                times["pm_wall_s"] > times["plain_wall_s"] and ncu_s is not None:
            ratios["ncu_over_pm_by_wall"] = ncu_s / (times["pm_wall_s"] - times["plain_wall_s"])
    floor = read_floor(directory)
    summary["floor"] = floor
    added_s = spans.get("pm", {}).get("added_s")
    times["pm_added_s"] = added_s
    if added_s and ncu_s is not None:
        ratios["ncu_over_pm_added"] = ncu_s / added_s
    if floor is not None and ncu_s is not None:
        ratios["ncu_over_floor"] = ncu_s / floor["s"]
    if floor is not None and pm_s:
        ratios["pm_over_floor"] = pm_s / floor["s"]
    if floor is not None and added_s:
        ratios["pm_added_over_floor"] = added_s / floor["s"]
    summary["ratios"] = ratios

    def seconds(value):
        return f"{value:8.3f} s" if value is not None else f"{'-':>10}"

    judgement.say("times:")
    judgement.say(f"  span replay  pm {seconds(pm_s)}   range profiler, overview {seconds(rp_s)}"
                  f"   range replay, speed-of-light {seconds(sol_s)}")
    if added_s is not None:
        judgement.say(f"  pm beyond the program's own run (span less drain and pass 0) {seconds(added_s)}")
    judgement.say("  wall         " + "   ".join(
        f"{name} {seconds(times[f'{name}_wall_s'])}" for name in ("plain", "pm", "rp", "sol", "ncu", "ncu-off")))
    judgement.say(f"  ncu kernel replay of the span (wall minus ncu-off"
                  f"{', scaled to the whole span' if times.get('ncu_replay_scaled') else ''}"
                  f"{'; cut by its timeout' if times.get('ncu_replay_lower_bound') else ''}) {seconds(ncu_s)}")
    if floor is not None:
        judgement.say(f"  CUPTI's floor, one pass (bare CUPTI, median of {floor['passes']}): "
                      f"{seconds(floor['s'])} = work {floor['work_s'] * 1e3:.1f} ms + Stop and "
                      f"DecodeData {floor['decode_s'] * 1e3:.1f} ms + evaluate "
                      f"{floor['evaluate_s'] * 1e3:.1f} ms ({floor['samples']} samples; serial "
                      f"{floor['evaluate_serial_s'] * 1e3:.1f} ms, on {floor['evaluate_threads']} "
                      f"threads {floor['parallel_mismatches']} values differing)")
    else:
        judgement.say("  CUPTI's floor: not measured (no floor.txt with fixed passes)")
    for key, target in (("ncu_over_pm", NCU_TARGET), ("range_replay_over_pm", RANGE_TARGET),
                        ("overview_range_replay_over_pm", None), ("ncu_over_pm_at_least", None),
                        ("ncu_over_pm_by_wall", None), ("ncu_over_pm_added", None),
                        ("ncu_over_floor", None), ("pm_over_floor", None),
                        ("pm_added_over_floor", None)):
        value = ratios.get(key)
        judgement.say(f"  {key:30} {value:8.1f}x" + (f"   (target >= {target:g}x)" if target else "")
                      if value is not None else f"  {key:30} {'-':>8}")
    if not pm_s:
        judgement.fail("no pm replay time (span missing)")
    else:
        if ratios.get("ncu_over_pm") is None:
            judgement.fail("no ncu time to compare (ncu.wall / ncu-off.wall / ncu.csv missing)")
        elif ratios["ncu_over_pm"] < NCU_TARGET:
            below = ratios.get("ncu_over_floor") is not None and ratios["ncu_over_floor"] < NCU_TARGET
            judgement.fail(f"pm {ratios['ncu_over_pm']:.1f}x faster than ncu's kernel replay "
                           f"(target {NCU_TARGET:g}x"
                           f"{'; ncu cut by its timeout, its time estimated' if times.get('ncu_replay_lower_bound') else ''})"
                           + (f"; below CUPTI's floor: ncu / one bare-CUPTI pass "
                              f"{ratios['ncu_over_floor']:.1f}x" if below else ""))
        if ratios.get("range_replay_over_pm") is None:
            judgement.fail("no range replay (speed-of-light) time to compare")
        elif ratios["range_replay_over_pm"] < RANGE_TARGET:
            judgement.fail(f"pm {ratios['range_replay_over_pm']:.1f}x faster than range replay "
                           f"(speed-of-light; target {RANGE_TARGET:g}x)")
    summary["failures"] = list(judgement.failures)
    summary["passed"] = not judgement.failures
    if summary_path:
        with open(summary_path, "w") as handle:
            json.dump(summary, handle, indent=1)
    judgement.say("pmreplay: " + ("all targets met" if not judgement.failures else
                                  f"{len(judgement.failures)} target(s) failed:"))
    for failure in judgement.failures:
        judgement.say(f"  - {failure}")
    return judgement.failures, summary


# ---- self-test: synthetic sessions ----

def make_session(folder, kernels, declined=False, replay_s=1.0, pm=False, error=0.0,
                 tensor_name="sm__pipe_tensor_cycles_active.avg", methods=True, uncover=None):
    """A session with only the tables and columns the checker reads. kernels: [(name,
    duration_ns, dram_read, dram_write, sm_cycles, tensor_cycles)]."""
    os.makedirs(folder)
    db = sqlite3.connect(os.path.join(folder, "session.db"))
    db.execute("CREATE TABLE replay_spans (pid, span_id, name, kernels, copies, passes_planned, "
               "passes_run, declined, reason, begin_ns, end_ns, collector, drain_ns)")
    # The program's own run (pass 0) 0.1 s of the span, the drain before it 0.05 s.
    db.execute("CREATE TABLE replay_passes (pid, launch_id, pass, start_ns, end_ns)")
    db.execute("INSERT INTO replay_passes VALUES (7, 100, 0, 2000, 100002000)")
    db.execute("CREATE TABLE replay_launches (pid, launch_id, span_id, kernel, collector)")
    db.execute("CREATE TABLE replay_metrics (pid, launch_id, metric, value)")
    if methods:
        db.execute("CREATE TABLE replay_value_methods (pid, launch_id, metric, method, status, "
                   "error_bound, samples)")
    collector = "pm-sampling" if pm else "cuda-range-profiler"
    db.execute("INSERT INTO replay_spans VALUES (7, 100, 'step', ?, 0, 2, 2, ?, ?, 1000, ?, ?, 50000000)",
               (len(kernels), int(declined), "declined: test" if declined else "", 1000 + int(replay_s * 1e9),
                collector))
    for index, (name, duration, read, write, sm, tensor) in enumerate(kernels):
        launch = 101 + index
        db.execute("INSERT INTO replay_launches VALUES (7, ?, 100, ?, ?)", (launch, name, collector))
        sign = 1 if index % 2 else -1
        for metric, value in ((DURATION, duration), ("dram__bytes_read.sum", read),
                              ("dram__bytes_write.sum", write), ("sm__cycles_active.avg", sm),
                              (tensor_name, tensor), ("gr__cycles_elapsed.max", sm * 1.1)):
            status, method = "measured", "pm-sampling"
            if pm:
                value = value * (1 + sign * error)
                if metric == DURATION:
                    method = "kernel-activity"
                elif duration < 100e3:
                    status, value = "below-minimum", None
                if uncover == index and metric == "dram__bytes_read.sum":
                    status, value = "uncovered", None
            db.execute("INSERT INTO replay_metrics VALUES (7, ?, ?, ?)", (launch, metric, value))
            if pm and methods:
                db.execute("INSERT INTO replay_value_methods VALUES (7, ?, ?, ?, ?, ?, 3)",
                           (launch, metric, method, status, None if value is None else abs(value) * 0.01))
    db.commit()
    db.close()


def make_floor(root, pass_s):
    """floor.txt as pm_switch_probe writes it: three fixed passes of pass_s, a warm one and a
    failed one (both ignored)."""
    with open(os.path.join(root, "floor.txt"), "w") as handle:
        handle.write(json.dumps({"kind": "env", "device": "sim"}) + "\n")
        for index, scale in enumerate((1.2, 1.0, 0.9)):
            part = int(pass_s * scale * 1e9 / 5)
            handle.write(json.dumps({"kind": "pass", "mode": "fixed", "pass": index, "ns": {
                "start": part // 10, "work": part, "stop": part // 10, "decode": part * 2,
                "info": part - 2 * (part // 10), "enable": None}, "evaluate_ns": part,
                "samples": 6500, "error": None}) + "\n")
        handle.write(json.dumps({"kind": "pass", "mode": "warm", "ns": {}, "error": None}) + "\n")
        handle.write(json.dumps({"kind": "pass", "mode": "fixed", "ns": {}, "error": "X"}) + "\n")
        handle.write("not json\n")


def make_run(root, *, pm_error=0.01, pm_declined=False, pm_s=0.5, ncu_kernels=None,
             ncu_timeout=False, methods=True, uncover=None, kernel_count=504, floor_s=None):
    kernels = []
    for index in range(kernel_count):
        if index % 63 == 7:  # a matmul: tensor pipe busy
            kernels.append(("sm90_xmma_gemm_bf16", 2e6, 4e8, 1.3e8, 3.9e6, 2.5e6))
        elif index % 3 == 0:  # a short kernel
            kernels.append(("vectorized_elementwise_kernel", 8e3, 2e6, 2e6, 1.5e4, 0.0))
        elif index % 3 == 1:
            kernels.append(("vectorized_elementwise_kernel", 2.7e5, 5.4e8, 5.4e8, 5.3e5, 0.0))
        else:  # a reduction: almost nothing written
            kernels.append(("reduce_kernel", 1.4e5, 5.4e8, 5.2e5, 2.7e5, 0.0))
    make_session(os.path.join(root, "pm-session"), kernels, declined=pm_declined, replay_s=pm_s,
                 pm=True, error=pm_error, tensor_name="sm__pipe_tensor_cycles_active_realtime.avg",
                 methods=methods, uncover=uncover)
    make_session(os.path.join(root, "rp-session"), kernels, replay_s=3.0)
    make_session(os.path.join(root, "sol-session"), kernels, replay_s=8.0)
    for name, (start, end) in {"plain": (0, 10), "pm": (0, 11), "rp": (0, 14), "sol": (0, 19),
                               "ncu-off": (0, 20), "ncu": (0, 100)}.items():
        with open(os.path.join(root, f"{name}.wall"), "w") as handle:
            handle.write(f"{start} {end}\n")
        with open(os.path.join(root, f"{name}.json"), "w") as handle:
            handle.write("noise\n" + json.dumps({"ops": kernel_count, "checksum": 1.5}) + "\n")
    if floor_s is not None:
        make_floor(root, floor_s)
    asked = kernel_count if ncu_kernels is None else ncu_kernels
    done = asked // 2 if ncu_timeout else asked
    with open(os.path.join(root, "ncu.rc"), "w") as handle:
        handle.write("124\n" if ncu_timeout else "0\n")
    with open(os.path.join(root, "ncu.csv"), "w") as handle:
        for index in range(done):
            handle.write(f'==PROF== Profiling "{kernels[index][0]}" - {index}: 0%....50%....100% - 2 passes\n')
        if not ncu_timeout:
            handle.write('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n')
            for index in range(done):
                handle.write(f'"{index}","void at::native::{kernels[index][0]}<float>(int)",'
                             f'"gpu__time_duration.sum","ns","{kernels[index][1]:,.0f}"\n')


def self_test():
    cases = [
        # (name, make_run arguments, check arguments, failures expected (substrings); [] = pass)
        ("1% error passes", {}, {}, []),
        ("10% error fails", {"pm_error": 0.10}, {}, ["median"]),
        ("declined span fails", {"pm_declined": True}, {}, ["pm: span declined"]),
        ("slow pm fails both ratios", {"pm_s": 1.5}, {}, ["faster than ncu", "faster than range replay"]),
        ("ncu on 50 kernels, scaled, passes", {"ncu_kernels": 50}, {"ncu": "50"}, []),
        ("ncu cut by its timeout: lower bound, passes", {"ncu_timeout": True}, {}, []),
        ("a long kernel uncovered fails coverage", {"uncover": 4}, {}, ["coverage"]),
        ("no replay_value_methods table fails", {"methods": False}, {}, ["replay_value_methods"]),
        ("499 kernels fail", {"kernel_count": 499}, {}, ["499 kernels"]),
        ("4.9% error passes", {"pm_error": 0.049}, {}, []),
        ("slow pm under a slow floor: said below the floor", {"pm_s": 1.5, "floor_s": 1.0}, {},
         ["below CUPTI's floor: ncu / one bare-CUPTI pass 80.0x", "faster than range replay"]),
    ]
    failed = 0
    for name, make, check, expected in cases:
        root = tempfile.mkdtemp(prefix="check_pm_replay.")
        try:
            make_run(root, **make)
            failures, summary = judge(root, os.path.join(root, "summary.json"), 100e3, 0.05,
                                      check.get("ncu", "all"), quiet=True)
            json.load(open(os.path.join(root, "summary.json")))  # written and readable
            ok = (not failures) if not expected else all(
                any(e in f for f in failures) for e in expected)
            if name.startswith("1% error"):
                metrics = summary["metrics"]
                ok = ok and all(abs(metrics[s]["median"] - 0.01) < 1e-9 for s in
                                ("dram_read", "dram_write", "sm_active", "tensor", "duration"))
                ok = ok and metrics["tensor"]["judged_kernels"] == 8  # the matmuls only
                ok = ok and metrics["dram_write"]["skipped_below_floor"] == 168  # the reductions
                ok = ok and summary["tensor_metric"]["pm"].endswith("_realtime.avg")
                ok = ok and abs(summary["ratios"]["ncu_over_pm"] - 160.0) < 1e-6
                ok = ok and abs(summary["ratios"]["range_replay_over_pm"] - 16.0) < 1e-6
            if name.startswith("slow pm under"):
                floor = summary["floor"]
                ok = ok and floor["passes"] == 3 and abs(floor["s"] - 1.0) < 1e-6
                ok = ok and abs(summary["ratios"]["pm_over_floor"] - 1.5) < 1e-6
            if name.startswith("1% error"):
                ok = ok and summary["floor"] is None and "ncu_over_floor" not in summary["ratios"]
                ok = ok and abs(summary["times"]["pm_added_s"] - 0.35) < 1e-6
                ok = ok and abs(summary["ratios"]["ncu_over_pm_added"] - 80.0 / 0.35) < 1e-6
            if name.startswith("ncu on 50"):
                ok = ok and abs(summary["times"]["ncu_replay_s"] - 80.0 * 504 / 50) < 1e-6
            if name.startswith("ncu cut"):
                ok = ok and summary["times"]["ncu_replay_lower_bound"] and \
                    abs(summary["times"]["ncu_replay_s"] - 160.0) < 1e-6
        except Exception as error:  # report and go on
            ok, failures = False, [f"{type(error).__name__}: {error}"]
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {failures if failures else 'no failures'}"[:400])
        failed += not ok
    print("check_pm_replay self-test:", "PASS" if not failed else f"FAIL ({failed} cases)")
    return 1 if failed else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    positional, options = [], {"--min-kernel": "100us", "--ncu-kernels": "all", "--limit": "0.05"}
    index = 0
    while index < len(argv):
        if argv[index] in options and index + 1 < len(argv):
            options[argv[index]] = argv[index + 1]
            index += 2
        else:
            positional.append(argv[index])
            index += 1
    if len(positional) != 2:
        print(next(part for part in __doc__.split("\n\n") if part.startswith("usage:")),
              file=sys.stderr)
        return 2
    try:
        min_ns = parse_duration_ns(options["--min-kernel"])
        limit = float(options["--limit"])
        ncu_asked = options["--ncu-kernels"]
        if ncu_asked != "all":
            int(ncu_asked)
    except ValueError as error:
        print(f"check_pm_replay.py: {error}", file=sys.stderr)
        return 2
    failures, _ = judge(positional[0], positional[1], min_ns, limit, ncu_asked)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
