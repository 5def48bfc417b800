"""check_triggered.py: checks a session of scripts/gpu-check-triggered.sh:
rule 1 (action replay) replayed exactly one launch, not declined, with
every metric of the set present, of a kernel whose name holds FRAGMENT (when
given); the rule's row says it fired; its triggered_replays row (schema 10;
a session without the table fails) is the only one, replayed, action
replay, naming that kernel and launch; prints the replay and its timing
(rule firing to metrics stored). Exits non-zero with a message per failure.
Must never write into the session (read-only connection).

usage: check_triggered.py SESSION_DIR [FRAGMENT]
"""
import math
import sqlite3
import sys


def main(directory, fragment):
    db = sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True)
    failures = []
    launches = db.execute(
        "SELECT launch_id, kernel, declined, reason, passes_run, begin_ns, end_ns "
        "FROM replay_launches ORDER BY launch_id").fetchall()
    rules = db.execute("SELECT rule_id, status, reason, windows_fired FROM rules "
                       "ORDER BY rule_id").fetchall()
    fired = db.execute("SELECT time_ns, message FROM log WHERE message LIKE "
                       "'%fired%replaying the next launch%' ORDER BY time_ns").fetchall()
    print("  rules: %s" % rules)
    for time_ns, message in fired:
        print("  log: %s" % message[:300])
    if len(launches) != 1:
        failures.append("%d replayed launches, not 1: %s" % (len(launches), launches))
    for launch_id, kernel, declined, reason, passes, begin, end in launches[:1]:
        metrics = db.execute("SELECT metric, value FROM replay_metrics WHERE launch_id = ?",
                             (launch_id,)).fetchall()
        print("  replayed launch %d: %s..., %d passes, %.1f ms, declined %d %s"
              % (launch_id, kernel[:80], passes, (end - begin) / 1e6, declined, reason))
        print("  metrics: %s" % ", ".join("%s=%s" % (name, "NULL" if value is None else
                                                      "%g" % value) for name, value in metrics))
        if fired:
            print("  rule fired to the replay's end: %.1f ms" % ((end - fired[0][0]) / 1e6))
        if declined:
            failures.append("the replay was declined: %s" % reason)
        if fragment and fragment not in kernel:
            failures.append("replayed %s, not a kernel holding %r" % (kernel[:120], fragment))
        missing = [name for name, value in metrics if value is None or
                   (isinstance(value, float) and math.isnan(value))]
        if not metrics or missing:
            failures.append("metrics missing: %s (of %d)" % (missing, len(metrics)))
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'triggered_replays'").fetchone():
        triggered = db.execute(
            "SELECT rule_id, action, target, status, reason, launch_id, fired_ns, taken_ns, "
            "done_ns FROM triggered_replays ORDER BY pid, id").fetchall()
        for rule_id, action, target, status, reason, launch_id, fired, taken, done in triggered:
            print("  triggered_replays: rule %d %s %s... %s %s, fired->taken %s ms, "
                  "fired->done %.1f ms" % (rule_id, action, target[:60], status, reason,
                                           "%.1f" % ((taken - fired) / 1e6) if taken else "n/a",
                                           (done - fired) / 1e6))
        expected = [(1, "replay", launches[0][1], "replayed", launches[0][0])] if launches else []
        got = [(r[0], r[1], r[2], r[3], r[5]) for r in triggered]
        if got != expected:
            failures.append("triggered_replays rows %s, not %s" % (got, expected))
    else:
        failures.append("no triggered_replays table (schema 10)")
    if not rules or rules[0][3] != 1:
        failures.append("rule 1 did not fire once: %s" % (rules,))
    for failure in failures:
        print("FAIL: %s" % failure)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else ""))
