#!/usr/bin/env python3
"""check_multi.py: judges scripts/gpu-check-multi.sh (issue 9).

usage: check_multi.py DIR SUMMARY_JSON

DIR holds concurrent.json / serial.json (tests/gpu/multi_rmw.cu output under
`flare replay`, threads at once / one after another) and the sessions
concurrent/ and serial/. Checks: every device's result correct in both runs;
every launch replayed with all its passes; in the concurrent run, replays on
different devices overlap in time (from the stored pass timestamps) while
replays on one device never do; every replayed kernel and every kernel record
is attributed to the device its thread used. A third run (pm.json, pm/) under
plain `flare trace` with a scheduled window checks that kernels land on every
device and PM samples on the one device the engine samples. Reports the
speed-up of the concurrent run's replay time over the serialised one.
"""
import json
import os
import statistics
import sqlite3
import sys

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def output(path):
    with open(path) as handle:
        for line in handle:
            if line.startswith("{"):
                return json.loads(line)
    fail(f"no JSON output in {path}")
    return None


def replays(database):
    connection = sqlite3.connect(database)
    rows = connection.execute(
        "SELECT l.launch_id, l.device, l.declined, l.passes_run, l.passes_planned, l.reason, "
        "MIN(p.start_ns), MAX(p.end_ns), l.begin_ns, l.end_ns FROM replay_launches l "
        "JOIN replay_passes p ON p.pid = l.pid AND p.launch_id = l.launch_id "
        "GROUP BY l.pid, l.launch_id ORDER BY l.begin_ns").fetchall()
    kernels = connection.execute(
        "SELECT k.device, COUNT(*) FROM kernels k JOIN names n ON n.id = k.name_id "
        "WHERE n.name LIKE 'multi_rmw%' GROUP BY k.device"
    ).fetchall()
    return rows, dict(kernels)


def check_pm(directory, summary):
    """The PM run (plain `flare trace`, a scheduled window, every GPU busy):
    kernels land on every device, and the window's PM samples carry the
    device the engine reported it samples (one device per process)."""
    result = output(f"{directory}/pm.json")
    if result is None:
        return
    if not result["ok"]:
        fail(f"pm: wrong results: {result['per_device']}")
    connection = sqlite3.connect(f"{directory}/pm/session.db")
    kernels = dict(connection.execute(
        "SELECT k.device, COUNT(*) FROM kernels k JOIN names n ON n.id = k.name_id "
        "WHERE n.name LIKE 'multi_rmw%' GROUP BY k.device").fetchall())
    samples = dict(connection.execute(
        "SELECT device, COUNT(*) FROM pm_samples GROUP BY device").fetchall())
    capability = connection.execute(
        "SELECT status, reason FROM capabilities WHERE feature = 'pm_sampling'").fetchone()
    windows = connection.execute("SELECT engine_status, engine_reason FROM windows").fetchall()
    summary["pm"] = {"kernels": kernels, "samples": samples, "capability": capability,
                     "windows": windows}
    devices = result["devices"]
    if sorted(kernels) != list(range(devices)):
        fail(f"pm: kernel records on devices {sorted(kernels)}, expected 0..{devices - 1}")
    sampled = None
    if capability and "prepared on device " in (capability[1] or ""):
        sampled = int(capability[1].split("prepared on device ")[1].split()[0])
    if not samples:
        fail(f"pm: no PM samples (windows {windows}, capability {capability})")
    elif sampled is None or list(samples) != [sampled]:
        fail(f"pm: samples on devices {sorted(samples)}, the engine samples device {sampled}")


def check_processes(directory, summary):
    """One flare process per GPU at once: results, and the same speed-up as
    the concurrent run's (host monotonic clock, shared by the processes)."""
    warm, cold = [], []
    index = 0
    while os.path.exists(f"{directory}/process-{index}.json"):
        result = output(f"{directory}/process-{index}.json")
        database = f"{directory}/process-{index}/session.db"
        if result is None or not result["ok"] or not os.path.exists(database):
            fail(f"process {index}: no result or no session: {result and result['per_device']}")
            index += 1
            continue
        rows, _ = replays(database)
        for position, (launch_id, _, declined, run, planned, reason, _, _, begin, end) in \
                enumerate(rows):
            if declined or run != planned:
                fail(f"process {index}: launch {launch_id}: {run}/{planned} passes ({reason})")
            (cold if position == 0 else warm).append((begin, end))
        index += 1
    if index == 0 or not warm:
        return
    entry = {"processes": index, "first_replay_s": [round((e - b) / 1e9, 4) for b, e in cold],
             "later_replays_busy_s": sum(e - b for b, e in warm) / 1e9,
             "later_replays_span_s": (max(e for _, e in warm) - min(b for b, _ in warm)) / 1e9}
    summary["one_process_per_gpu"] = entry
    serial = summary.get("serial", {}).get("later_replays_busy_s")
    if serial:
        entry["speedup_over_serialised"] = serial / entry["later_replays_span_s"]


def check_cupti_devices(directory, summary):
    """CUPTI's own kernel replay, each GPU alone then all at once (no flare):
    the speed-up CUPTI itself allows, against which flare's is read."""
    try:
        lines = [json.loads(line) for line in open(f"{directory}/cupti-devices.json")
                 if line.startswith("{")]
    except OSError:
        return
    runs = {line["together"]: line for line in lines}
    if 0 not in runs or 1 not in runs:
        return
    # Median collection per device, its first (CUPTI's first Start) left out.
    medians = {mode: [statistics.median(times[1:]) for times in run["collection_ms"] if len(times) > 1]
               for mode, run in runs.items()}
    summary["cupti_alone_collection_ms"] = medians[0]
    summary["cupti_together_collection_ms"] = medians[1]
    if medians[0] and medians[1]:
        summary["cupti_speedup_over_serialised"] = sum(medians[0]) / max(medians[1])


def main():
    directory, summary_path = sys.argv[1], sys.argv[2]
    summary = {}
    modes = [name for name in ("concurrent", "turns", "quiet", "concurrent-2", "turns-2",
                               "quiet-2", "concurrent-3", "turns-3", "serial")
             if os.path.exists(f"{directory}/{name}.json")]
    for mode in modes:
        result = output(f"{directory}/{mode}.json")
        if result is None:
            continue
        if not result["ok"]:
            fail(f"{mode}: wrong results: {result['per_device']}")
        if not os.path.exists(f"{directory}/{mode}/session.db"):
            fail(f"{mode}: no session database (killed?)")
            continue
        rows, kernels = replays(f"{directory}/{mode}/session.db")
        devices = result["devices"]
        summary[mode] = {"total_s": result["total_s"], "replays": len(rows), "kernels": kernels}
        for launch_id, device, declined, run, planned, reason, start, end, _, _ in rows:
            if declined or run != planned:
                fail(f"{mode}: launch {launch_id} on device {device}: {run}/{planned} passes "
                     f"({reason})")
        # (quiet runs trace no kernels: FLARE_CUDA_ACTIVITY=0)
        if not mode.startswith("quiet") and sorted(kernels) != list(range(devices)):
            fail(f"{mode}: kernel records on devices {sorted(kernels)}, expected 0..{devices - 1}")
        intervals = [(start, end, device) for _, device, _, _, _, _, start, end, _, _ in rows]
        same = cross = 0
        for i, (a_start, a_end, a_device) in enumerate(intervals):
            for b_start, b_end, b_device in intervals[i + 1:]:
                overlap = a_start < b_end and b_start < a_end
                if overlap and a_device == b_device:
                    same += 1
                if overlap and a_device != b_device:
                    cross += 1
        summary[mode]["overlapping_pairs_same_device"] = same
        summary[mode]["overlapping_pairs_across_devices"] = cross
        if same:
            fail(f"{mode}: {same} pairs of replays on one device overlapped")
        if mode.startswith("concurrent") and devices > 1 and cross == 0:
            fail(f"{mode}: no replays on different devices overlapped")
        # With FLARE_REPLAY_SERIAL_DEVICES=1 a replay's passes lie inside its
        # collection turn: passes on different devices must never overlap.
        if mode.startswith("turns") and cross:
            fail(f"{mode}: {cross} pairs of replays on different devices overlapped")
        replay_span = (max(e for _, e, _ in intervals) - min(s for s, _, _ in intervals)) / 1e9 \
            if intervals else None
        summary[mode]["replay_span_s"] = replay_span
        # Time spent inside replays (first pass start to last pass end, each
        # launch): the serial run's sum is what one-GPU-at-a-time replay
        # costs, without the program's own start-up on the next GPU.
        summary[mode]["replay_busy_s"] = sum(e - s for s, e, _ in intervals) / 1e9
        summary[mode]["replay_s"] = [[device, round((e - s) / 1e9, 4)]
                                     for s, e, device in sorted(intervals)]
        # Whole replays (gate, drain, snapshot, every pass, results), after
        # each device's first: that one pays CUPTI's first Start on the
        # context (about 0.2 s alone, up to 1.2 s when two run at once).
        seen, warm, cold = set(), [], []
        for _, device, _, _, _, _, _, _, begin, end in rows:
            (warm if device in seen else cold).append((begin, end))
            seen.add(device)
        summary[mode]["first_replay_s"] = [round((e - b) / 1e9, 4) for b, e in cold]
        if warm:
            summary[mode]["later_replays_busy_s"] = sum(e - b for b, e in warm) / 1e9
            summary[mode]["later_replays_span_s"] = (max(e for _, e in warm) -
                                                     min(b for b, _ in warm)) / 1e9
    check_processes(directory, summary)
    check_pm(directory, summary)
    check_cupti_devices(directory, summary)
    serial = summary.get("serial", {}).get("later_replays_busy_s")
    for mode in modes:
        entry = summary.get(mode)
        if mode == "serial" or not entry or not serial or not entry.get("later_replays_span_s"):
            continue
        # Serialised replay time over this run's wall time for the same
        # replays (each device's first left out, see above).
        entry["speedup_over_serialised"] = serial / entry["later_replays_span_s"]
        # How much of its replay time ran on two GPUs at once.
        if entry.get("replay_span_s"):
            entry["parallelism"] = entry["replay_busy_s"] / entry["replay_span_s"]
    if summary.get("concurrent", {}).get("speedup_over_serialised") is not None:
        summary["speedup_over_serialised"] = summary["concurrent"]["speedup_over_serialised"]
    print(json.dumps(summary, indent=1))
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
