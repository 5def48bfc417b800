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
        "MIN(p.start_ns), MAX(p.end_ns) FROM replay_launches l JOIN replay_passes p "
        "ON p.pid = l.pid AND p.launch_id = l.launch_id GROUP BY l.pid, l.launch_id").fetchall()
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


def main():
    directory, summary_path = sys.argv[1], sys.argv[2]
    summary = {}
    for mode in ("concurrent", "serial"):
        result = output(f"{directory}/{mode}.json")
        if result is None:
            continue
        if not result["ok"]:
            fail(f"{mode}: wrong results: {result['per_device']}")
        rows, kernels = replays(f"{directory}/{mode}/session.db")
        devices = result["devices"]
        summary[mode] = {"total_s": result["total_s"], "replays": len(rows), "kernels": kernels}
        for launch_id, device, declined, run, planned, reason, start, end in rows:
            if declined or run != planned:
                fail(f"{mode}: launch {launch_id} on device {device}: {run}/{planned} passes "
                     f"({reason})")
        if sorted(kernels) != list(range(devices)):
            fail(f"{mode}: kernel records on devices {sorted(kernels)}, expected 0..{devices - 1}")
        intervals = [(start, end, device) for _, device, _, _, _, _, start, end in rows]
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
        if mode == "concurrent" and devices > 1 and cross == 0:
            fail("concurrent: no replays on different devices overlapped")
        replay_span = (max(e for _, e, _ in intervals) - min(s for s, _, _ in intervals)) / 1e9 \
            if intervals else None
        summary[mode]["replay_span_s"] = replay_span
    check_pm(directory, summary)
    if "concurrent" in summary and "serial" in summary and summary["concurrent"]["replay_span_s"]:
        summary["speedup_over_serialised"] = (summary["serial"]["replay_span_s"] /
                                             summary["concurrent"]["replay_span_s"])
    print(json.dumps(summary, indent=1))
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
