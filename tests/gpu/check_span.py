#!/usr/bin/env python3
"""check_span.py: judges the range-replay runs of scripts/gpu-check-span.sh.

usage: check_span.py SPAN_DIR SUMMARY_JSON

For each workload (c: tests/gpu/span_steps.cu, torch: tests/gpu/train_step.py)
SPAN_DIR holds NAME-plain.json / NAME-flare.json (program output),
NAME-flare/session.db, NAME-ncu.csv and NAME-ncu.wall / NAME-ncu-off.wall
(ncu with its NVTX filter matching the step, and matching nothing). Checks:
results identical with and without range replay; the span replayed (not
declined) with every pass; every kernel of the step got every metric; DRAM
bytes per kernel within 2% of ncu; and reports flare's collection time
against ncu's (and the 50x target) and against the model passes x (per-pass
set-up + span run) + restore. ncu is given the step as a launch range (its
NVTX filter follows one thread, and PyTorch's backward runs on others);
the kernel names must line up. DRAM bytes are judged on the C step only.
Prints FAIL: lines and exits 1 on failure.
"""
import csv
import json
import math
import os
import re
import sqlite3
import sys

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def program_output(path):
    try:
        with open(path) as handle:
            for line in handle:
                if line.strip().startswith("{"):
                    return json.loads(line)
    except OSError:
        pass
    fail(f"no JSON output in {path}")
    return None


def wall(path):
    try:
        with open(path) as handle:
            start, end = (float(v) for v in handle.read().split())
            return end - start
    except (OSError, ValueError):
        return None


def ncu_kernels(path):
    """[(kernel name, {metric: value})] in launch order."""
    try:
        with open(path) as handle:
            lines = [line for line in handle if line.startswith('"')]
    except OSError:
        fail(f"no ncu log at {path}")
        return []
    kernels = {}
    for row in csv.DictReader(lines):
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        entry = kernels.setdefault(int(row["ID"]), (row.get("Kernel Name", ""), {}))
        entry[1][row["Metric Name"]] = value
    return [kernels[key] for key in sorted(kernels)]


def base_name(kernel):
    """A kernel's function name without namespaces, templates or parameters."""
    for noise in ("(anonymous namespace)", "<unnamed>", "void "):
        kernel = kernel.replace(noise, "")
    kernel = re.sub(r"[<(].*", "", kernel)
    return kernel.split("::")[-1].strip()


def flare_span(database):
    connection = sqlite3.connect(database)
    connection.row_factory = sqlite3.Row
    spans = [dict(r) for r in connection.execute("SELECT * FROM replay_spans ORDER BY begin_ns")]
    kernels = []
    if spans:
        span = spans[0]
        for row in connection.execute(
                "SELECT launch_id, kernel FROM replay_launches WHERE pid = ? AND span_id = ? "
                "ORDER BY launch_id", (span["pid"], span["span_id"])):
            metrics = {m: v for m, v in connection.execute(
                "SELECT metric, value FROM replay_metrics WHERE pid = ? AND launch_id = ?",
                (span["pid"], row["launch_id"]))}
            kernels.append((row["kernel"], metrics))
        span["passes"] = [dict(r) for r in connection.execute(
            "SELECT pass, start_ns, end_ns FROM replay_passes WHERE pid = ? AND launch_id = ? "
            "ORDER BY pass", (span["pid"], span["span_id"]))]
    return spans, kernels


COLLECTION_LINE = re.compile(
    r"range profiler collection: (\d+) range\(s\), (\d+) pass\(es\); host set-up ([\d.]+) ms, "
    r"counter data init ([\d.]+) ms, set config ([\d.]+) ms, start total ([\d.]+) ms "
    r"\[[^\]]*\], stop total ([\d.]+) ms \[[^\]]*\], decode ([\d.]+) ms, evaluate ([\d.]+) ms")


def cupti_collection(log_path):
    """The last collection's CUPTI call times from flare.log, or None."""
    found = None
    try:
        with open(log_path, errors="replace") as handle:
            for line in handle:
                match = COLLECTION_LINE.search(line)
                if match:
                    found = match
    except OSError:
        return None
    if not found:
        return None
    keys = ("ranges", "passes", "host_set_up_ms", "counter_data_init_ms", "set_config_ms",
            "start_ms", "stop_ms", "decode_ms", "evaluate_ms")
    values = [float(v) for v in found.groups()]
    return {k: (int(v) if k in ("ranges", "passes") else v) for k, v in zip(keys, values)}


def judge(directory, name, summary):
    result = {}
    plain = program_output(os.path.join(directory, f"{name}-plain.json"))
    replayed = program_output(os.path.join(directory, f"{name}-flare.json"))
    if plain and replayed:
        result["checksum_identical"] = plain["checksum"] == replayed["checksum"]
        if not result["checksum_identical"]:
            fail(f"{name}: checksum {replayed['checksum']} under range replay, "
                 f"{plain['checksum']} without")
    spans, kernels = flare_span(os.path.join(directory, f"{name}-flare", "session.db"))
    if len(spans) != 1:
        fail(f"{name}: {len(spans)} spans recorded, expected 1")
        summary[name] = result
        return
    span = spans[0]
    result.update({k: span[k] for k in ("kernels", "copies", "passes_planned", "passes_run",
                                        "declined", "reason", "snapshot_bytes")})
    if span["declined"]:
        fail(f"{name}: span declined: {span['reason']}")
    elif span["passes_run"] != span["passes_planned"]:
        fail(f"{name}: {span['passes_run']} of {span['passes_planned']} passes ran")
    collection_s = (span["end_ns"] - span["begin_ns"]) / 1e9
    counting = [p for p in span["passes"] if p["pass"] > 0]
    run_s = (sum(p["end_ns"] - p["start_ns"] for p in counting) / len(counting) / 1e9
             if counting else 0.0)
    restore_s = span["restore_ns"] / 1e9 / max(1, len(counting))
    cupti = cupti_collection(os.path.join(directory, f"{name}-flare", "flare.log"))
    result["collection_s"] = collection_s
    result["mean_pass_ms"] = 1e3 * run_s
    result["restore_ms_per_pass"] = 1e3 * restore_s
    result["own_run_ms"] = next((1e3 * (p["end_ns"] - p["start_ns"]) / 1e9
                                 for p in span["passes"] if p["pass"] == 0), None)
    if cupti:
        # The model: passes x (CUPTI's per-pass set-up + the span's
        # run + restore), with the per-pass set-up taken from CUPTI's own
        # Start/Stop calls in this run and the program's own pass counted.
        set_up_s = (cupti["start_ms"] + cupti["stop_ms"]) / 1e3 / max(1, cupti["passes"])
        model_s = span["passes_run"] * (set_up_s + run_s + restore_s)
        result["cupti"] = cupti
        result["cupti_set_up_ms_per_pass"] = 1e3 * set_up_s
        result["model_s"] = model_s
        result["collection_over_model"] = collection_s / model_s if model_s else None
    else:
        fail(f"{name}: no 'range profiler collection' line in flare.log")
    missing = sum(1 for _, m in kernels for v in m.values() if v is None or
                  (isinstance(v, float) and math.isnan(v)))
    result["kernels_with_metrics"] = sum(1 for _, m in kernels if m)
    result["missing_values"] = missing
    if not kernels or any(not m for _, m in kernels):
        fail(f"{name}: kernels without metrics")
    if missing:
        fail(f"{name}: {missing} metric values missing")
    ncu = ncu_kernels(os.path.join(directory, f"{name}-ncu.csv"))
    result["ncu_kernels"] = len(ncu)
    if len(ncu) != len(kernels):
        fail(f"{name}: ncu profiled {len(ncu)} kernels in the step, flare {len(kernels)}")
    # ncu gets the step as a launch range: its kernels must be the span's,
    # in order (ncu and flare spell names differently; compare base names).
    same = sum(1 for (a, _), (b, _) in zip(kernels, ncu) if base_name(a) == base_name(b))
    result["kernel_names_matching_ncu"] = same
    if kernels and same < len(kernels):
        fail(f"{name}: only {same} of {len(kernels)} kernels line up with ncu's launch range")
    # DRAM bytes are judged on the C step only: inside a PyTorch step most
    # data stays in the 50 MB L2 between kernels, so a kernel's DRAM traffic
    # in the span (warm cache, as the program runs) differs from ncu's
    # kernel-by-kernel replay by design. Reported, not judged.
    judge_dram = name == "c"
    worst = 0.0
    compared = 0
    write_worst = 0.0
    for (ours_name, ours), (theirs_name, theirs) in zip(kernels, ncu):
        for metric in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            a, b = ours.get(metric), theirs.get(metric)
            print(f"  {name} {ours_name[:40]:40} {metric:24} flare {a} ncu {b}")
            if a is None or b is None or b < 1 << 20:
                continue  # tiny traffic: cache effects dominate, not a fair comparison
            if metric == "dram__bytes_write.sum":
                # Write-backs of the previous kernel's dirty L2 lines land in
                # the next kernel inside a span; ncu replays each kernel
                # alone. Reported, not judged.
                write_worst = max(write_worst, abs(a - b) / b)
                continue
            compared += 1
            worst = max(worst, abs(a - b) / b)
    result["dram_write_worst_relative_difference"] = write_worst
    result["dram_compared"] = compared
    result["dram_worst_relative_difference"] = worst
    if not judge_dram:
        pass
    elif compared == 0:
        fail(f"{name}: no kernel with DRAM traffic to compare with ncu")
    elif worst > 0.02:
        fail(f"{name}: DRAM bytes differ from ncu by {100 * worst:.2f}% (limit 2%)")
    ncu_on = wall(os.path.join(directory, f"{name}-ncu.wall"))
    ncu_off = wall(os.path.join(directory, f"{name}-ncu-off.wall"))
    if ncu_on is not None and ncu_off is not None:
        result["ncu_replay_s"] = ncu_on - ncu_off
        result["ncu_wall_s"] = ncu_on
        result["speedup_vs_ncu"] = (ncu_on - ncu_off) / collection_s if collection_s else None
        # Bare CUPTI's range profiler over as many short kernels, alone in a
        # process (replay_baselines range-floor): no tool built on it can
        # collect faster, so ncu's time over it is the most any could reach.
        floor = program_output(os.path.join(directory, f"{name}-floor.json"))
        if floor and floor.get("collections"):
            floor_s = floor["collections"][0]["collection_ms"] / 1e3
            result["bare_cupti_floor_s"] = floor_s
            result["ncu_over_floor"] = (ncu_on - ncu_off) / floor_s
            result["collection_over_floor"] = collection_s / floor_s
    summary[name] = result
    print(json.dumps({name: result}, indent=1))


def main():
    directory, summary_path = sys.argv[1], sys.argv[2]
    summary = {}
    for name in ("c", "torch"):
        if os.path.exists(os.path.join(directory, f"{name}-plain.json")):
            judge(directory, name, summary)
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    torch = summary.get("torch", {})
    if torch.get("speedup_vs_ncu") is not None and torch["speedup_vs_ncu"] < 50:
        fail(f"torch: range replay {torch['speedup_vs_ncu']:.1f}x faster than ncu (target 50x)")
    for name, result in summary.items():
        ratio = result.get("collection_over_model")
        if ratio is not None and ratio > 1.2:
            fail(f"{name}: collection took {ratio:.2f}x the model (target 1.2x)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
