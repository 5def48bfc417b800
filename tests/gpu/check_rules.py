"""check_rules.py: checks one run of tests/gpu/rules_phases.py under
`flare trace --deep-when` (scripts/gpu-check-rules.sh).

usage:
  check_rules.py check SESSION TIMES_JSON TARGET_INDEX ALLOWANCE_MS
      rule 1 must open exactly one window, in phase TARGET_INDEX, at most
      ALLOWANCE_MS after the phase started; the window's engine must have
      run (disarmed, samples > 0) and its PM samples be attributed to the
      phase's NVTX range; rule 2 must never fire. Prints one summary line.
  check_rules.py threshold SESSION TIMES_JSON METRIC UNIT_DIVISOR UNIT KIND
      from a run without rules: a threshold for METRIC (power_mw,
      sm_clock_mhz) that separates phases of KIND from the quiet ones (idle,
      tokens), as "> 350W" or "< 900MHz", or "none" when they do not
      separate by 3% or more.
  check_rules.py delays SESSION...
      median and worst of kernel_delivery_delay_ns over the sessions.
"""
import json
import sqlite3
import statistics
import sys


def connect(session):
    return sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)


def phase_metric(db, name, start, end):
    rows = db.execute(
        "SELECT m.value FROM metrics m JOIN names n ON n.id = m.name_id "
        "WHERE n.name = ? AND m.device = 0 AND m.time_ns BETWEEN ? AND ?",
        (name, start, end)).fetchall()
    return [r[0] for r in rows]


def delivery_delays(db):
    """The session's kernel_delivery_delay_ns values (schema.md, metrics)."""
    return [r[0] for r in db.execute(
        "SELECT m.value FROM metrics m JOIN names n ON n.id = m.name_id "
        "WHERE n.name = 'kernel_delivery_delay_ns'")]


def threshold(session, times_path, metric, divisor, unit, target_kind):
    phases = json.load(open(times_path))
    db = connect(session)
    medians = {}
    for phase in phases:
        # Past the first half second: NVML averages over up to a second.
        values = phase_metric(db, metric, phase["start_ns"] + 500_000_000, phase["end_ns"])
        if values:
            medians.setdefault(phase["kind"], []).append(statistics.median(values))
    target = statistics.median(medians.get(target_kind, [0]))
    quiet = [v for kind, values in medians.items() if kind in ("idle", "tokens") for v in values]
    print(f"{metric} medians per phase: {medians}", file=sys.stderr)
    if not quiet or target == 0:
        print("none")
        return
    if target > max(quiet) * 1.03:
        print(f"> {round((target + max(quiet)) / 2 / divisor)}{unit}")
    elif target < min(quiet) * 0.97:
        print(f"< {round((target + min(quiet)) / 2 / divisor)}{unit}")
    else:
        print("none")


def check(session, times_path, target, allowance_ms):
    phases = json.load(open(times_path))
    phase = phases[target]
    db = connect(session)
    failures = []
    windows = db.execute(
        "SELECT id, rule_id, requested_ns, opened_ns, closed_ns, engine_status, engine_samples, "
        "first_true_ns, observed_value FROM windows WHERE token_kind = 'rule' ORDER BY id").fetchall()
    mine = [w for w in windows if w[1] == 1]
    never = [w for w in windows if w[1] == 2]
    if never:
        failures.append(f"rule 2 (must never fire) opened {len(never)} window(s)")
    latency_ms = None
    if len(mine) != 1:
        failures.append(f"rule 1 opened {len(mine)} windows, not 1")
    else:
        window_id, _, requested, opened, closed, engine_status, samples, first_true, observed = mine[0]
        if opened is None:
            failures.append("rule 1's window never opened")
        else:
            latency_ms = (opened - phase["start_ns"]) / 1e6
            if not 0 <= latency_ms <= allowance_ms:
                failures.append(f"window opened {latency_ms:.0f} ms after phase {target} "
                                f"({phase['kind']}) started; allowed 0..{allowance_ms} ms")
            if engine_status != "disarmed" or not samples:
                failures.append(f"engine status {engine_status}, {samples} samples")
            scopes = db.execute(
                "SELECT scope_name, COUNT(DISTINCT sample_index) FROM pm_samples WHERE window_id = ? "
                "GROUP BY scope_name", (window_id,)).fetchall()
            total = sum(count for _, count in scopes)
            right = sum(count for name, count in scopes if name == phase["kind"])
            if total == 0 or right < 0.9 * total:
                failures.append(f"PM samples by range {scopes}: under 90% in '{phase['kind']}'")
    rules = {r[0]: r for r in db.execute(
        "SELECT rule_id, status, windows_fired, missing_readings, stale_readings, last_value "
        "FROM rules")}
    if 1 not in rules or rules[1][2] != 1:
        failures.append(f"rule 1 summary: {rules.get(1)}")
    if 2 not in rules or rules[2][2] != 0:
        failures.append(f"rule 2 summary: {rules.get(2)}")
    delays = delivery_delays(db)
    delay = (f"delivery delay median {statistics.median(delays) / 1e6:.1f} ms worst "
             f"{max(delays) / 1e6:.1f} ms over {len(delays)} periods") if delays else "no delays"
    latency = f"{latency_ms:.0f} ms" if latency_ms is not None else "-"
    print(f"{'PASS' if not failures else 'FAIL'} phase {target} ({phase['kind']}): window opened "
          f"{latency} after the phase started (allowed {allowance_ms} ms); rule 1 {rules.get(1)}; "
          f"rule 2 {rules.get(2)}; {delay}")
    for failure in failures:
        print("  " + failure)
    return 0 if not failures else 1


def delays(sessions):
    values = []
    for session in sessions:
        values += delivery_delays(connect(session))
    if not values:
        print("kernel delivery delay: no rows")
        return
    values.sort()
    print(f"kernel delivery delay over {len(sessions)} sessions, {len(values)} periods of 100 ms: "
          f"median {statistics.median(values) / 1e6:.1f} ms, p90 "
          f"{values[int(0.9 * (len(values) - 1))] / 1e6:.1f} ms, worst {values[-1] / 1e6:.1f} ms")


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
    elif command == "threshold":
        threshold(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6], sys.argv[7])
    elif command == "delays":
        delays(sys.argv[2:])
    else:
        sys.exit(__doc__)
