"""check_pm.py: checks a session recorded by `flare trace --deep-when ...` over
tests/gpu/pm_window.cu on a real GPU (scripts/gpu-check-pm.sh): the rule's
window armed the CUDA PM engine, it holds PM samples, and samples are
attributed to the program's NVTX ranges. Prints the measured numbers as
"key value" lines. Exits non-zero with a message per failure.

usage: check_pm.py SESSION_DIR [--expect-window]
"""
import sqlite3
import sys


def main():
    session = sys.argv[1]
    db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
    q = lambda sql, *a: db.execute(sql, a).fetchall()
    failures = []
    caps = dict((f, (s, r)) for f, s, r in q("SELECT feature, status, reason FROM capabilities"))
    for feature in ("pm_sampling", "pm_attribution", "deep_windows"):
        print(f"capability {feature}: {caps.get(feature)}")
    windows = q("SELECT id, token_kind, engine, engine_status, engine_reason, opened_ns, closed_ns, "
                "close_reason, engine_samples FROM windows")
    print(f"windows: {windows}")
    armed = [w for w in windows if w[2] == "cuda-pm" and w[3] == "disarmed" and w[5] is not None]
    if not armed:
        failures.append(f"no window armed the cuda-pm engine: {windows}")
    for log in q("SELECT level, message FROM log WHERE message LIKE '%PM%' OR message LIKE '%pm-%' OR message LIKE '%cuda-pm%'"):
        print(f"log {log[0]}: {log[1]}")
    for window in armed:
        window_id, opened, closed, engine_samples = window[0], window[5], window[6], window[8]
        samples = q("SELECT COUNT(DISTINCT sample_index), MIN(start_ns), MAX(end_ns) FROM pm_samples "
                    "WHERE window_id = ?", window_id)[0]
        count, first_start, last_end = samples
        metrics = [m for (m,) in q("SELECT DISTINCT metric FROM pm_samples WHERE window_id = ?", window_id)]
        print(f"window {window_id}: {count} samples stored ({engine_samples} reported by the engine), "
              f"metrics {metrics}")
        if count == 0:
            failures.append(f"window {window_id} has no PM samples")
            continue
        if count != engine_samples:
            failures.append(f"window {window_id}: {count} samples stored, engine reported {engine_samples}")
        duration = (closed - opened) / 1e9
        print(f"window_seconds {duration:.3f}")
        print(f"samples_per_second {count / duration:.0f}")
        spacing = q("SELECT b.start_ns - a.start_ns, a.end_ns - a.start_ns FROM pm_samples a JOIN pm_samples b "
                    "ON b.window_id = a.window_id AND b.sample_index = a.sample_index + 1 AND b.metric = a.metric "
                    "WHERE a.window_id = ? AND a.metric = 'dram__bytes_read.sum' AND a.sample_index > 0", window_id)
        if spacing:
            gaps = sorted(g for g, _ in spacing)
            widths = sorted(w for _, w in spacing)
            print(f"sample_spacing_ns median {gaps[len(gaps) // 2]} max {gaps[-1]}; "
                  f"sample_width_ns median {widths[len(widths) // 2]}")
        print(f"coverage first_start-open {(first_start - opened) / 1e6:.2f} ms, "
              f"close-last_end {(closed - last_end) / 1e6:.2f} ms")
        if first_start < opened - 50_000_000 or last_end > closed + 50_000_000:
            failures.append(f"sample times [{first_start}, {last_end}] lie outside the window "
                            f"[{opened}, {closed}] (clock conversion)")
        overflow = q("SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE window_id = ? AND overflow != 0",
                     window_id)[0][0]
        print(f"samples_flagged {overflow}")
        attributed = q("SELECT p.scope_name, n.name, COUNT(DISTINCT p.sample_index) FROM pm_samples p "
                       "LEFT JOIN scopes s ON s.instance_id = p.scope_instance_id "
                       "LEFT JOIN names n ON n.id = s.name_id WHERE p.window_id = ? "
                       "GROUP BY p.scope_instance_id IS NULL, COALESCE(p.scope_name, n.name)", window_id)
        by_name = {}
        for stored, joined, c in attributed:
            by_name[stored or joined] = by_name.get(stored or joined, 0) + c
        print(f"attribution {by_name}")
        nvtx = sum(c for name, c in by_name.items() if name in ("slow_step", "slow_phase"))
        if by_name.get("slow_step", 0) == 0:
            failures.append(f"no sample attributed to the NVTX push/pop range 'slow_step': {by_name}")
        if nvtx < count // 2:
            failures.append(f"only {nvtx} of {count} samples attributed to the program's NVTX ranges")
        print(f"samples_attributed_nvtx {nvtx}")
        dram = q("SELECT MAX(value) FROM pm_samples WHERE window_id = ? AND metric = 'dram__bytes_read.sum'",
                 window_id)[0][0]
        print(f"dram_read_bytes_max_per_sample {dram}")
        if not dram or dram <= 0:
            failures.append("no DRAM read bytes in any sample while a memory-bound kernel ran")
    for name, value in q("SELECT n.name, m.value FROM metrics m JOIN names n ON n.id = m.name_id "
                         "WHERE n.name LIKE 'pm_open_to_first%'"):
        print(f"{name} {value}")
    drops = q("SELECT source, detail, count FROM drops WHERE source IN ('pm_sampling', 'scope_history')")
    print(f"drops {drops}")
    lost = sum(c for s, d, c in drops if s == "pm_sampling" and "lost" in d)
    print(f"samples_dropped {lost}")
    for failure in failures:
        print(f"FAIL pm: {failure}")
    if not failures:
        print("PASS pm")
    sys.exit(1 if failures else 0)


main()
