#!/usr/bin/env python3
"""check_replay.py: judges the kernel-replay runs of scripts/gpu-check-replay.sh.

usage: check_replay.py REPLAY_DIR SUMMARY_JSON

Reads the program outputs (NAME.json), wall clocks (NAME.wall), flare
sessions (NAME/session.db) and ncu CSV logs that the script left in
REPLAY_DIR; prints every number it judges, writes them all to SUMMARY_JSON,
and exits 1 if a check failed (each failure is printed as FAIL: ...).
Checks: results identical to the unprofiled run; replays really ran (passes
as planned, not declined); DRAM bytes within 2% of ncu; flare at least 3x
faster than ncu for the same launches and metrics; each extra pass at most
1.1 x (CUPTI kernel-replay per-pass + restored bytes / copy bandwidth);
snapshot and restore at 80% or more of the device-to-device copy bandwidth.
"""
import csv
import json
import os
import sqlite3
import sys

failures = []
summary = {}


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def program_output(directory, name):
    path = os.path.join(directory, name + ".json")
    try:
        with open(path) as handle:
            for line in handle:
                line = line.strip()
                if line.startswith("{"):
                    return json.loads(line)
    except OSError:
        pass
    fail(f"{name}: no JSON line in {path}")
    return None


def program_outputs(directory, name):
    with open(os.path.join(directory, name + ".json")) as handle:
        return [json.loads(line) for line in handle if line.strip().startswith("{")]


def wall_seconds(directory, name):
    try:
        with open(os.path.join(directory, name + ".wall")) as handle:
            start, end = (float(v) for v in handle.read().split())
            return end - start
    except (OSError, ValueError):
        return None


def replay_rows(directory, name):
    path = os.path.join(directory, name, "session.db")
    if not os.path.exists(path):
        fail(f"{name}: no session database at {path}")
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute(
        "SELECT * FROM replay_launches WHERE kernel LIKE '%rmw%' ORDER BY launch_index")]
    for row in rows:
        row["metrics"] = {m: v for m, v in db.execute(
            "SELECT metric, value FROM replay_metrics WHERE pid = ? AND launch_id = ?",
            (row["pid"], row["launch_id"]))}
        row["pass_starts"] = [s for (s,) in db.execute(
            "SELECT start_ns FROM replay_passes WHERE pid = ? AND launch_id = ? ORDER BY pass",
            (row["pid"], row["launch_id"]))]
    return rows


def ncu_values(directory, name):
    """{(kernel id): {metric: value}} from ncu's CSV log."""
    path = os.path.join(directory, name + ".csv")
    launches = {}
    try:
        with open(path) as handle:
            lines = [l for l in handle if l.startswith('"')]
    except OSError:
        fail(f"{name}: no ncu log at {path}")
        return []
    for row in csv.DictReader(lines):
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        launches.setdefault(row["ID"], {})[row["Metric Name"]] = value
    return [launches[k] for k in sorted(launches, key=int)]


def check_replayed(name, rows, expected_launches):
    replayed = [r for r in rows if not r["declined"]]
    for r in rows:
        if r["declined"]:
            fail(f"{name}: launch {r['launch_index']} declined: {r['reason']}")
        elif r["passes_run"] < 2 or r["passes_run"] != r["passes_planned"]:
            fail(f"{name}: launch {r['launch_index']} ran {r['passes_run']} of "
                 f"{r['passes_planned']} passes ({r['reason']})")
    if len(replayed) != expected_launches:
        fail(f"{name}: {len(replayed)} launches replayed, expected {expected_launches}")
    return replayed


def extra_pass_ms(row):
    starts = row["pass_starts"]
    if len(starts) < 2:
        return None
    return (starts[-1] - starts[0]) / (len(starts) - 1) / 1e6


def main():
    directory, summary_path = sys.argv[1], sys.argv[2]
    plain = program_output(directory, "plain")

    # 1. Results identical (checksums over the replayed buffer, the sibling
    # stream's buffer and its copy target), replays actually ran.
    for name in ("flare-launch2", "flare-all", "ncu-launch2", "ncu-all"):
        out = program_output(directory, name)
        if plain and out and out["checksum"] != plain["checksum"]:
            fail(f"{name}: checksum {out['checksum']} differs from the unprofiled "
                 f"{plain['checksum']}")
    launch2 = check_replayed("flare-launch2", replay_rows(directory, "flare-launch2"), 1)
    every = check_replayed("flare-all", replay_rows(directory, "flare-all"), 3)
    var = check_replayed("device-var", replay_rows(directory, "device-var"), 1)
    var_out = program_output(directory, "device-var")
    if var_out and var_out.get("launch_count") != var_out.get("launches"):
        fail(f"device-var: the __device__ counter read {var_out.get('launch_count')}, "
             f"expected {var_out.get('launches')} (not restored between passes)")
    summary["device_var"] = {"replayed": len(var), "launch_count": var_out and var_out.get("launch_count")}
    # The trace keeps each replayed launch once, as the program made it: not
    # its passes, nor the range profiler's own kernels, nor shadow copies.
    kernel_rows = {}
    for name, expected in (("flare-launch2", 3), ("flare-all", 3)):
        try:
            db = sqlite3.connect(os.path.join(directory, name, "session.db"))
            names = [n for (n,) in db.execute(
                "SELECT n.name FROM kernels k JOIN names n ON n.id = k.name_id")]
        except sqlite3.Error as error:
            fail(f"{name}: kernels table unreadable: {error}")
            continue
        rmw = sum(1 for n in names if n.startswith("rmw("))
        cupti_own = sum(1 for n in names if "WaitNs" in n)
        kernel_rows[name] = {"rmw_records": rmw, "cupti_own_records": cupti_own}
        if rmw != expected or cupti_own:
            fail(f"{name}: the kernels table holds {rmw} rmw launches (expected {expected}) "
                 f"and {cupti_own} range-profiler kernels (expected 0)")
    summary["kernel_records"] = kernel_rows

    # 2. Metric values against ncu on the same launch.
    ncu2 = ncu_values(directory, "ncu-launch2")
    if launch2 and ncu2:
        flare_metrics, ncu_metrics = launch2[0]["metrics"], ncu2[0]
        table = {}
        for metric in sorted(flare_metrics):
            f, n = flare_metrics[metric], ncu_metrics.get(metric)
            ratio = f / n if f is not None and n else None
            table[metric] = {"flare": f, "ncu": n, "ratio": ratio}
            print(f"  {metric:66s} flare {f!s:>14.14} ncu {n!s:>14.14} ratio "
                  f"{'-' if ratio is None else f'{ratio:.4f}'}")
        summary["metrics_vs_ncu"] = table
        for metric in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            ratio = table.get(metric, {}).get("ratio")
            if ratio is None or abs(ratio - 1) > 0.02:
                fail(f"{metric}: flare/ncu = {ratio} (not within 2%)")

    # 3. Wall-clock for the same launches and metrics: the profiled launches'
    # own time (launch + sync, as the program timed it: both tools replay
    # inside the launch call) and the whole process.
    for label, flare_name, ncu_name, indexes in (("launch 2", "flare-launch2", "ncu-launch2", [1]),
                                                  ("3 launches", "flare-all", "ncu-all", [0, 1, 2])):
        f_out, n_out, p = (program_output(directory, flare_name),
                           program_output(directory, ncu_name), plain)
        if not (f_out and n_out and p):
            continue
        f_ms = sum(f_out["launch_ms"][i] for i in indexes)
        n_ms = sum(n_out["launch_ms"][i] for i in indexes)
        f_wall, n_wall, p_wall = (wall_seconds(directory, flare_name),
                                  wall_seconds(directory, ncu_name), wall_seconds(directory, "plain"))
        entry = {"flare_profiled_ms": f_ms, "ncu_profiled_ms": n_ms, "ratio": n_ms / f_ms,
                 "flare_process_s": f_wall, "ncu_process_s": n_wall, "plain_process_s": p_wall}
        summary[f"wallclock_{label.replace(' ', '_')}"] = entry
        print(f"  {label}: profiled launches flare {f_ms:.1f} ms, ncu {n_ms:.1f} ms "
              f"(ncu/flare {n_ms / f_ms:.2f}x); processes flare {f_wall:.2f} s, ncu {n_wall:.2f} s, "
              f"unprofiled {p_wall:.2f} s")
        # The floor: bare CUPTI's range profiler (user replay, automatic
        # range) on one short kernel, alone in a process (replay_baselines
        # range-floor): its first collection for launch 2, its collections
        # summed for all 3. No tool on the range profiler gets under it.
        floor = program_output(directory, "range-floor")
        if floor and len(floor["collections"]) >= len(indexes):
            floor_ms = sum(c["collection_ms"] for c in floor["collections"][:len(indexes)])
            entry["bare_cupti_floor_ms"] = floor_ms
            entry["ncu_over_floor"] = n_ms / floor_ms
            print(f"  {label}: bare CUPTI range profiler alone {floor_ms:.1f} ms for the same "
                  f"passes: ncu/floor {n_ms / floor_ms:.2f}x is the most any tool on it could "
                  f"reach; flare/floor {f_ms / floor_ms:.2f}")
        if n_ms / f_ms < 3:
            fail(f"{label}: flare is only {n_ms / f_ms:.2f}x faster than ncu (target 3x)")

    # 4. Per extra pass against CUPTI's kernel replay (+ restore at copy bandwidth).
    kernel_replay = program_output(directory, "cupti-kernel-replay")
    sweep_1g = program_output(directory, "sweep-1024")
    if kernel_replay and every and sweep_1g:
        cupti_ms = kernel_replay["per_pass_ms_median"]
        bandwidth = sweep_1g["dtod_event_gbps"] * 1e9
        rows = []
        for row in every:
            extra = extra_pass_ms(row)
            restored = row["bytes_restored"] / max(1, row["passes_run"] - 1)
            bound = 1.1 * (cupti_ms + 2 * restored / bandwidth * 1e3)
            rows.append({"launch_index": row["launch_index"], "passes": row["passes_run"],
                         "extra_pass_ms": extra, "bytes_restored_per_pass": restored,
                         "bound_ms": bound,
                         "setup_and_first_pass_ms": (row["pass_starts"][0] - row["begin_ns"]) / 1e6})
            print(f"  launch {row['launch_index']}: {row['passes_run']} passes, {extra:.2f} ms per "
                  f"extra pass; CUPTI kernel replay {cupti_ms:.2f} ms per pass "
                  f"({kernel_replay['passes']} passes); bound {bound:.2f} ms")
            if extra is None or extra > bound:
                fail(f"launch {row['launch_index']}: {extra} ms per extra pass > {bound:.2f} ms")
        summary["per_pass"] = {"cupti_kernel_replay": kernel_replay, "flare": rows}

    # 5. Snapshot and restore bandwidth against the device-to-device copy.
    sweep = []
    for size in (64, 256, 1024, 4096, 16384):
        out = program_output(directory, f"sweep-{size}")
        rows = replay_rows(directory, f"sweep-{size}")
        replayed = check_replayed(f"sweep-{size}", rows, 1)
        if plain is None or out is None or not replayed:
            continue
        row = replayed[0]
        dtod = out["dtod_event_gbps"]
        snapshot = 2 * row["snapshot_bytes"] / max(1, row["snapshot_ns"])
        restore = 2 * row["bytes_restored"] / max(1, row["restore_ns"])
        entry = {"footprint_mib": size, "tracked_bytes": row["snapshot_bytes"],
                 "shadow_on_device": row["shadow_on_device"], "dtod_gbps": dtod,
                 "dtod_wall_gbps": out["dtod_wall_gbps"],
                 "snapshot_gbps": snapshot, "restore_gbps": restore,
                 "snapshot_ms": row["snapshot_ns"] / 1e6,
                 "restore_ms_per_pass": row["restore_ns"] / max(1, row["passes_run"] - 1) / 1e6}
        sweep.append(entry)
        print(f"  {size:6d} MiB: snapshot {snapshot:7.1f} GB/s, restore {restore:7.1f} GB/s, "
              f"device-to-device {dtod:7.1f} GB/s (r+w counted; shadow on "
              f"{'device' if row['shadow_on_device'] else 'host'})")
        for what, value in (("snapshot", snapshot), ("restore", restore)):
            if value < 0.8 * dtod:
                fail(f"{size} MiB: {what} at {value:.0f} GB/s is under 80% of {dtod:.0f} GB/s")
    summary["bandwidth"] = sweep

    # 6. The checkpoint API, for the record (not judged).
    try:
        summary["checkpoint"] = program_outputs(directory, "checkpoint")
        for entry in summary["checkpoint"]:
            print("  checkpoint:", json.dumps(entry))
    except OSError:
        summary["checkpoint"] = None

    summary["failures"] = failures
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    print("kernel replay checks:", "ok" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
