"""Checks `flare report --format json|csv` as a user's script reads it, for
test_report.c: the JSON through json, the CSV through csv, each against the
session database (sqlite3, read-only) and the text report of the same
session. Prints what is wrong and exits 1; exits 0 when all is well.

Usage:
  report_check.py json REPORT.json SESSION.db TEXT_REPORT TOP VERSION
  report_check.py csv REPORT.csv REPORT.json
  report_check.py damaged REPORT.json SECTION...
  report_check.py escape REPORT.json NAME_HEX
  report_check.py values REPORT.json SESSION.db NOTED
"""
import csv
import json
import sqlite3
import sys

SECTIONS = ["flare_version", "schema_version", "session", "ranks", "kernels", "copies", "graphs",
            "scopes", "counters", "metrics", "rules", "windows", "triggered_replays", "pc_samples",
            "pc_by_scope", "pc_lines", "sass_metrics", "sass_by_scope", "sass_lines", "pm_samples", "kernel_replay", "range_replay", "range_replay_kernels", "replay_metrics",
            "replay_summary", "capabilities", "drops", "errors"]
KERNEL_KEYS = ["name", "count", "total_ns", "mean_ns", "p50_ns", "p99_ns", "max_ns",
               "gpu_time_pct"]

failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)


def load(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def durations(db, table):
    """name -> (count, total_ns) from the table, as the report counts them
    (an end before its start counts as zero long)."""
    rows = db.execute(
        "SELECT n.name, count(*), sum(max(t.end_ns - t.start_ns, 0)) FROM %s t "
        "JOIN names n ON n.id = t.name_id GROUP BY t.name_id" % table)
    return {name: (count, total) for name, count, total in rows}


def check_json(report_path, db_path, text_path, top, version):
    report = load(report_path)
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    expect(list(report) == SECTIONS, "top-level keys %s" % list(report))
    expect(report["flare_version"] == version, "flare_version %r" % report["flare_version"])
    expect(report["schema_version"] == 1, "schema_version %r" % report["schema_version"])
    expect(report["errors"] == [], "errors %r" % report["errors"])

    session = report["session"]
    for key, sql in (("kernel_count", "SELECT count(*) FROM kernels"),
                     ("copy_count", "SELECT count(*) FROM copies"),
                     ("scope_count", "SELECT count(*) FROM scopes"),
                     ("process_count", "SELECT count(*) FROM processes"),
                     ("start_ns", "SELECT start_ns FROM session"),
                     ("end_ns", "SELECT end_ns FROM session"),
                     ("exit_status", "SELECT exit_status FROM session")):
        (value,) = db.execute(sql).fetchone()
        expect(session[key] == value, "session.%s %r, SQL %r" % (key, session[key], value))
    expect(session["duration_ns"] == session["end_ns"] - session["start_ns"], "duration_ns")

    kernels = durations(db, "kernels")
    all_ns = sum(total for _, total in kernels.values())
    expect(session["kernel_gpu_ns"] == all_ns,
           "kernel_gpu_ns %r, SQL %r" % (session["kernel_gpu_ns"], all_ns))
    expect(len(report["kernels"]) == min(top, len(kernels)),
           "%d kernels listed, top %d of %d" % (len(report["kernels"]), top, len(kernels)))
    totals = [row["total_ns"] for row in report["kernels"]]
    expect(totals == sorted(totals, reverse=True), "kernels not by total time")
    with open(text_path, encoding="utf-8") as file:
        text = file.read().splitlines()
    for row in report["kernels"]:
        expect(list(row) == KERNEL_KEYS, "kernel keys %s" % list(row))
        count, total = kernels[row["name"]]
        expect((row["count"], row["total_ns"]) == (count, total),
               "%s: count %d total %d, SQL %d %d" % (row["name"], row["count"], row["total_ns"],
                                                      count, total))
        expect(abs(row["gpu_time_pct"] - 100.0 * total / all_ns) < 1e-9, "%s: pct" % row["name"])
        # The text report's line of the kernel: name, count, total, % GPU, ...
        line = [l.split() for l in text if l.startswith("  %s " % row["name"])]
        expect(len(line) == 1, "%s: not once in the text report" % row["name"])
        if line:
            expect(line[0][1] == str(row["count"]), "%s: text count %s" % (row["name"], line[0]))
            expect(line[0][4] == "%.1f" % row["gpu_time_pct"],
                   "%s: text %% %s, json %r" % (row["name"], line[0][4], row["gpu_time_pct"]))
    if top >= len(kernels):
        share = sum(row["gpu_time_pct"] for row in report["kernels"])
        expect(abs(share - 100.0) < 1e-6, "shares add up to %r" % share)

    scopes = durations(db, "scopes")
    expect(len(report["scopes"]) == min(top, len(scopes)), "scopes listed")
    for row in report["scopes"]:
        expect((row["count"], row["total_ns"]) == scopes[row["name"]], "scope %s" % row["name"])
        expect("gpu_time_pct" not in row, "scope %s has a share" % row["name"])

    copies = sum(row["count"] for row in report["copies"])
    expect(copies == session["copy_count"], "copies add up to %d" % copies)
    counters = {row["name"]: row["value"] for row in report["counters"]}
    (steps,) = db.execute(
        "SELECT value FROM counter_samples s JOIN counters c USING (pid, counter) "
        "WHERE c.name = 'demo.steps' ORDER BY s.time_ns DESC LIMIT 1").fetchone()
    expect(counters.get("demo.steps") == steps, "demo.steps %r, SQL %r" % (counters, steps))
    capabilities = db.execute("SELECT count(*) FROM capabilities").fetchone()[0]
    expect(len(report["capabilities"]) == capabilities, "capabilities")
    for row in report["capabilities"]:
        expect(isinstance(row["requested"], bool), "requested is not a boolean")
    expect(isinstance(report["replay_summary"], dict), "replay_summary")


def check_csv(csv_path, json_path):
    """The CSV holds what the JSON holds, field for field."""
    report = load(json_path)
    with open(csv_path, encoding="utf-8", newline="") as file:
        rows = list(csv.reader(file))
    expect(rows[0] == ["section", "row", "key", "value"], "header %r" % rows[0])
    expect(all(len(row) == 4 for row in rows), "a line without four fields")
    tables = {}
    for section, row, key, value in rows[1:]:
        tables.setdefault(section, {}).setdefault(int(row), {})[key] = value
    expect(tables.get("report") == {0: {"flare_version": report["flare_version"],
                                        "schema_version": str(report["schema_version"])}},
           "report section %r" % tables.get("report"))
    for section in SECTIONS[2:]:
        value = report[section]
        records = [value] if isinstance(value, dict) else (value or [])
        got = tables.get(section, {})
        expect(sorted(got) == list(range(len(records))),
               "%s: rows %s, json %d" % (section, sorted(got), len(records)))
        for index, record in enumerate(records):
            line = got.get(index, {})
            expect(list(line) == list(record), "%s %d: keys %s" % (section, index, list(line)))
            for key, wanted in record.items():
                text = line.get(key)
                if wanted is None:
                    same = text == ""
                elif isinstance(wanted, bool):
                    same = text == ("true" if wanted else "false")
                elif isinstance(wanted, int):
                    same = int(text) == wanted
                elif isinstance(wanted, float):
                    same = float(text) == wanted
                else:
                    same = text == wanted
                expect(same, "%s %d %s: csv %r, json %r" % (section, index, key, text, wanted))
    # pandas' way: the kernels as a wide table.
    kernels = tables.get("kernels", {})
    expect([kernels[i]["name"] for i in sorted(kernels)] ==
           [row["name"] for row in report["kernels"]], "kernel order")


def check_damaged(json_path, sections):
    """Exit 1 is checked by the caller; here: the errors, and the rest."""
    report = load(json_path)
    expect(list(report) == SECTIONS, "top-level keys %s" % list(report))
    failed = [error["section"] for error in report["errors"]]
    expect(failed == sections, "errors name %s, expected %s" % (failed, sections))
    for error in report["errors"]:
        expect("no such table" in error["message"], "message %r" % error["message"])
        expect(report[error["section"]] in ([], None), "%s not empty" % error["section"])
    expect(len(report["kernels"]) > 0, "kernels missing")
    expect(len(report["scopes"]) > 0, "scopes missing")
    expect(report["session"]["kernel_count"] > 0, "session missing")


def check_escape(json_path, name_hex):
    report = load(json_path)
    name = bytes.fromhex(name_hex).decode("utf-8")
    names = [row["name"] for row in report["kernels"]]
    expect(name in names, "%r not among %r" % (name, names))


METRIC_KEYS = ["pid", "launch_id", "span_id", "kernel", "metric", "value"]
NOTE_KEYS = ["method", "status", "error_bound"]


def check_values(json_path, db_path, noted):
    """replay_metrics: every row with the same keys; with method, status and
    error_bound (as v_replay_values has them; an unbounded error is null)
    when the session notes how values were produced (noted 1), without
    them otherwise."""
    report = load(json_path)
    rows = report["replay_metrics"]
    expect(rows, "no replay_metrics")
    keys = METRIC_KEYS + (NOTE_KEYS if noted else [])
    for row in rows:
        expect(list(row) == keys, "replay_metrics keys %s, expected %s" % (list(row), keys))
    if not noted:
        return
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    view = {(pid, launch, metric): (value, method, status, bound) for
            pid, launch, metric, value, method, status, bound in db.execute(
                "SELECT pid, launch_id, metric, value, method, status, error_bound "
                "FROM v_replay_values")}
    expect(len(view) == len(rows), "%d rows, v_replay_values %d" % (len(rows), len(view)))
    for row in rows:
        want = view.get((row["pid"], row["launch_id"], row["metric"]))
        expect(want is not None, "no v_replay_values row for %r" % row)
        if want is None:
            continue
        value, method, status, bound = want
        if bound is not None and bound == float("inf"):
            bound = None  # JSON has no infinity
        expect((row["value"], row["method"], row["status"], row["error_bound"]) ==
               (value, method, status, bound),
               "%s %s: %r, v_replay_values %r" % (row["kernel"], row["metric"], row, want))
    statuses = {row["status"] for row in rows}
    expect({"measured", "flagged", "below-minimum"} <= statuses, "statuses %s" % statuses)


def main():
    mode, arguments = sys.argv[1], sys.argv[2:]
    if mode == "json":
        check_json(arguments[0], arguments[1], arguments[2], int(arguments[3]), arguments[4])
    elif mode == "csv":
        check_csv(arguments[0], arguments[1])
    elif mode == "damaged":
        check_damaged(arguments[0], arguments[1:])
    elif mode == "escape":
        check_escape(arguments[0], arguments[1])
    elif mode == "values":
        check_values(arguments[0], arguments[1], arguments[2] == "1")
    else:
        failures.append("unknown mode %s" % mode)
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
