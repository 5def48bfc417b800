#!/usr/bin/env python3
"""sass_window_check.py: checks a session of tests/gpu/pc_hot_loop.cu traced with a SASS
metrics deep window (`flare trace --deep-after ... --deep-for ... --deep-engine sass`;
scripts/gpu-check-sasswindow.sh runs it on the H200). Issue 26, item 2: per-instruction counts
for the kernels inside a window, stored per function, offset and metric, on their source lines.

usage: sass_window_check.py SESSION_DIR WARPS HOT_ITERS
       sass_window_check.py --self-test

WARPS and HOT_ITERS are what pc_hot_loop printed (warps per launch, hot_chain's iterations).
Reads the session's views (v_sass_metrics, v_kernels, windows) read-only and fails when:
  * no window ran, or one ran without the SASS engine: `engine` is not a SASS engine (a name
    with `sass`), `engine_status` is not `disarmed`, or `engine_reason` is not empty (a
    fallback, printed);
  * hot_chain or cheap_math has no smsp__sass_inst_executed rows;
  * hot_chain's largest smsp__sass_inst_executed value V is not a whole number k of launches'
    worth, V = k * WARPS * HOT_ITERS, with k >= 1 and at most the hot_chain kernels whose time
    overlaps the window plus one (CUPTI patches a kernel at its first launch after the enable:
    each counted launch adds exactly WARPS * HOT_ITERS to every loop instruction);
  * smsp__sass_thread_inst_executed at that instruction is not 32 * V (full warps, no
    divergence in the loop);
  * hot_chain's instructions have no source lines (built with -lineinfo), or its line with the
    most smsp__sass_inst_executed is not one of the hot loop's (the line marked `// HOT LOOP`
    in tests/gpu/pc_hot_loop.cu and the next);
  * no launch of hot_chain in the window is in untimed_launches (schema 14: the launches the
    window's quiet left untimed, which flare report splits the values by), or one of them is
    not in the NVTX range "step" that pc_hot_loop launches every kernel in.
Prints per function the instructions and the top metric values, hot_chain's top lines, k,
and the median duration of each kernel before, inside and after the window (the patched
kernels' slowdown, and whether kernels run unpatched again after it, measured by flare's own
kernel records; printed, not judged), and one
line per drop row of source sass_metrics. Exit 0 when every check passed, 1 when one failed
(or the session cannot be read), 2 for a usage error.

--self-test builds synthetic sessions in a temporary directory (the schema and views read
from src/store by tests/gpu/pm_accuracy.py's c_ddl_statements; no GPU, no flare binary) and
asserts that the checker passes a good one and fails each bad one for its reason.

Must never write to a session (opened read-only) or anywhere but its own temporary
directory (the self-test, removed at the end).
"""
import contextlib
import io
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOT, CHEAP = "hot_chain", "cheap_math"
INST, THREAD_INST = "smsp__sass_inst_executed", "smsp__sass_thread_inst_executed"


def hot_loop_lines():
    """The hot loop's lines in tests/gpu/pc_hot_loop.cu: the one marked `// HOT LOOP`, and the next."""
    with open(os.path.join(HERE, "pc_hot_loop.cu")) as handle:
        for number, text in enumerate(handle, 1):
            if "// HOT LOOP" in text:
                return {number, number + 1}
    raise RuntimeError("tests/gpu/pc_hot_loop.cu has no line marked // HOT LOOP")


def function_key(name):
    """hot_chain or cheap_math for any form flare stores the name in, else the name."""
    for key in (HOT, CHEAP):
        if name == key or re.search(r"(^|[^A-Za-z0-9_])" + key + r"([^A-Za-z0-9_]|$)", name) or \
                re.match(r"_Z\d+" + key, name):
            return key
    return name


def check(session_dir, warps, hot_iters):
    """Failures (a list of strings) of the session at session_dir; prints what it saw."""
    failures = []
    path = os.path.join(session_dir, "session.db")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        windows = db.execute("SELECT id, engine, engine_status, engine_reason, opened_ns, closed_ns, launches "
                             "FROM windows WHERE opened_ns IS NOT NULL ORDER BY id").fetchall()
        if not windows:
            return ["no deep window ran"]
        for wid, engine, status, reason, _, _, _ in windows:
            print(f"window {wid}: engine {engine} ({status}) {reason!r}")
            if "sass" not in (engine or "") or status != "disarmed" or reason:
                failures.append(f"window {wid} ran engine {engine} ({status}), not SASS metrics: {reason}")
        if failures:
            return failures
        rows = db.execute("SELECT window_id, function, pc_offset, metric, value, file, line "
                          "FROM v_sass_metrics").fetchall()
        by = {}
        for wid, function, offset, metric, value, file, line in rows:
            by.setdefault(function_key(function), []).append((wid, offset, metric, value, file, line))
        for key in (HOT, CHEAP):
            inst = [r for r in by.get(key, []) if r[2] == INST]
            print(f"{key}: {len({r[1] for r in by.get(key, [])})} instructions, "
                  f"{INST} total {sum(r[3] for r in inst):,}")
            if not inst:
                failures.append(f"{key} has no {INST} rows")
        if failures:
            return failures
        hot = [r for r in by[HOT] if r[2] == INST]
        top = max(hot, key=lambda r: r[3])
        per_launch = warps * hot_iters
        opened, closed, launched = windows[0][4], windows[0][5], windows[0][6] or 0
        overlapping = sum(1 for name, in db.execute(
            "SELECT name FROM v_kernels WHERE end_ns > ? AND start_ns < ?", (opened, closed))
            if function_key(name) == HOT)
        # On CUDA the window's kernels are not timed (CUPTI's activity is off while a sass
        # window is open): its launches (both kernels') bound hot_chain's instead.
        bound = max(overlapping, launched) + 1
        k, rest = divmod(top[3], per_launch)
        print(f"hot_chain's top instruction +0x{top[1]:x}: {top[3]:,} = {top[3] / per_launch:.3f} launches of "
              f"{warps} warps x {hot_iters} iterations; {overlapping} hot_chain kernels overlap the window, "
              f"{launched} launches while it was open")
        if rest != 0 or k < 1 or k > bound:
            failures.append(f"hot_chain's top count {top[3]:,} is not a whole number of launches (1 to "
                            f"{bound}) of {per_launch:,}")
        threads = [r for r in by[HOT] if r[2] == THREAD_INST and r[1] == top[1] and r[0] == top[0]]
        if not threads or threads[0][3] != 32 * top[3]:
            failures.append(f"{THREAD_INST} at +0x{top[1]:x} is {threads[0][3] if threads else 'missing'}, "
                            f"not 32 x {top[3]:,}")
        lines = {}
        for _, _, _, value, file, line in hot:
            if file:
                lines[line] = lines.get(line, 0) + value
        total = sum(r[3] for r in hot)
        for line, value in sorted(lines.items(), key=lambda item: -item[1])[:5]:
            print(f"  hot_chain line {line}: {value:,} ({100.0 * value / total:.1f}%)")
        wanted = hot_loop_lines()
        if not lines:
            failures.append("hot_chain's instructions have no source lines")
        elif max(lines, key=lines.get) not in wanted:
            failures.append(f"hot_chain's line with the most instructions executed is "
                            f"{max(lines, key=lines.get)}, not the hot loop's {sorted(wanted)}")
        # The window's launches, untimed: each recorded on its thread with the scope open
        # there (untimed_launches, schema 14), which flare report splits the values by.
        untimed = [(function_key(name), scope) for name, scope in db.execute(
            "SELECT n.name, sn.name FROM untimed_launches u JOIN names n ON n.id = u.name_id "
            "LEFT JOIN scopes s ON s.pid = u.pid AND s.instance_id = u.scope_instance_id "
            "LEFT JOIN names sn ON sn.id = s.name_id WHERE u.time_ns >= ? AND u.time_ns < ?",
            (opened, closed))]
        hot_scopes = [scope for key, scope in untimed if key == HOT]
        print(f"untimed launches in the window: {len(untimed)}, of hot_chain {len(hot_scopes)} "
              f"(its count: {k} launches), scopes {sorted({str(s) for _, s in untimed})}")
        if not hot_scopes:
            failures.append("no untimed launch of hot_chain in the window (untimed_launches)")
        elif any(scope != "step" for scope in hot_scopes):
            failures.append(f"hot_chain's untimed launches are not all in scope step: {sorted(set(map(str, hot_scopes)))}")
        for name in (HOT, CHEAP):
            spans = {"before": ("end_ns < ?", (opened,)), "in": ("start_ns >= ? AND end_ns <= ?", (opened, closed)),
                     "after": ("start_ns > ?", (closed,))}
            medians = {}
            for where, (condition, arguments) in spans.items():
                durations = [r[0] for r in db.execute(
                    f"SELECT duration_ns FROM v_kernels WHERE name LIKE ? AND {condition}", (f"%{name}%",) + arguments)]
                medians[where] = (statistics.median(durations), len(durations)) if durations else (None, 0)
            words = ", ".join(f"{where} {m / 1e6:.3f} ms ({n})" if m else f"{where} none"
                              for where, (m, n) in medians.items())
            before, inside, after = (medians[w][0] for w in ("before", "in", "after"))
            ratios = "".join(f"; {label} {top / bottom:.2f}x" for label, top, bottom in
                             (("in/before", inside, before), ("after/before", after, before)) if top and bottom)
            print(f"{name}: median kernel time {words}{ratios}")
        for source, detail, count in db.execute("SELECT source, detail, count FROM drops WHERE source = "
                                                "'sass_metrics'"):
            print(f"drops {source}: {detail}: {count}")
    finally:
        db.close()
    return failures


def make_session(directory, name, statements, window, rows, kernels, untimed=()):
    """A session under directory: the schema, one window (engine, status, reason), rows of
    (function, offset, metric, value, line or None) in window 1, kernels of (name, start_ns,
    end_ns) and untimed launches of (name, time_ns, in the scope "step" or not). Returns its
    path."""
    path = os.path.join(directory, name)
    os.makedirs(path)
    db = sqlite3.connect(os.path.join(path, "session.db"))
    for statement in statements:
        db.execute(statement)
    db.execute("INSERT INTO windows (pid, id, token_kind, label, max_duration_ns, max_launches, requested_ns, "
               "opened_ns, closed_ns, close_reason, launches, engine, engine_status, engine_reason, "
               "engine_samples) VALUES (1, 1, 'scheduled', 'w', 500000000, 0, 1000, 1000, 2000, 'duration', 3, "
               "?, ?, ?, 0)", window)
    for function, offset, metric, value, line in rows:
        db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (function,))
        db.execute("INSERT INTO sass_metrics (pid, window_id, device, name_id, pc_offset, metric, value) "
                   "SELECT 1, 1, 0, id, ?, ?, ? FROM names WHERE name = ?", (offset, metric, value, function))
        if line is not None:
            db.execute("INSERT OR IGNORE INTO names (name) VALUES ('pc_hot_loop.cu')")
            db.execute("INSERT OR IGNORE INTO pc_lines (pid, name_id, pc_offset, file_name_id, line) SELECT 1, "
                       "f.id, ?, l.id, ? FROM names f, names l WHERE f.name = ? AND l.name = 'pc_hot_loop.cu'",
                       (offset, line, function))
    for index, (kernel, start, end) in enumerate(kernels):
        db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (kernel,))
        db.execute("INSERT INTO kernels (pid, device, stream_id, correlation_id, name_id, start_ns, end_ns, "
                   "grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_memory_bytes, registers_per_thread) "
                   "SELECT 1, 0, 7, ?, id, ?, ?, 1, 1, 1, 1, 1, 1, 0, 0 FROM names WHERE name = ?",
                   (index, start, end, kernel))
    db.execute("INSERT OR IGNORE INTO names (name) VALUES ('step')")
    db.execute("INSERT INTO scopes (pid, thread_id, instance_id, name_id, depth, start_ns, end_ns, still_open) "
               "SELECT 1, 9, 77, id, 0, 1000, 2000, 0 FROM names WHERE name = 'step'")
    for index, (kernel, time_ns, in_step) in enumerate(untimed):
        db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (kernel,))
        db.execute("INSERT INTO untimed_launches (pid, correlation_id, thread_id, time_ns, device, name_id, "
                   "scope_instance_id) SELECT 1, ?, 9, ?, 0, id, ? FROM names WHERE name = ?",
                   (100 + index, time_ns, 77 if in_step else None, kernel))
    db.commit()
    db.close()
    return path


def self_test():
    sys.path.insert(0, HERE)
    from pm_accuracy import c_ddl_statements, schema_statements  # one reader of the C tables
    statements = schema_statements() + c_ddl_statements("store_views.c", "views_ddl[] = {")
    hot_line = min(hot_loop_lines())
    warps, iters = 8, 10
    good_rows = [(HOT, 0x90, INST, 2 * warps * iters, hot_line), (HOT, 0x90, THREAD_INST, 64 * warps * iters, hot_line),
                 (HOT, 0x10, INST, 2 * warps, hot_line - 3), (CHEAP, 0x40, INST, 500, 90)]
    kernels = [(HOT, 1100, 1200), (HOT, 1300, 1400), (HOT, 100, 150), (CHEAP, 1500, 1600)]
    good_window = ("cuda-sass-metrics", "disarmed", "")
    launches = [(HOT, 1100, True), (HOT, 1300, True), (CHEAP, 1500, True), (HOT, 2500, False)]
    cases = [
        ("good", good_window, good_rows, kernels, None),
        ("no untimed launches", good_window, good_rows, kernels, "no untimed launch of hot_chain"),
        ("launch outside step", good_window, good_rows, kernels, "not all in scope step"),
        ("fell back", ("cuda-pm", "disarmed", "asked for sass: SASS metrics busy; fell back to pm"), [], kernels,
         "not SASS metrics"),
        ("no cheap_math", good_window, good_rows[:3], kernels, "cheap_math has no"),
        ("partial count", good_window, [(HOT, 0x90, INST, 2 * warps * iters + 1, hot_line)] + good_rows[1:],
         kernels, "not a whole number of launches"),
        ("too many launches", good_window, [(HOT, 0x90, INST, 9 * warps * iters, hot_line)] + good_rows[1:],
         kernels, "not a whole number of launches"),
        ("divergent", good_window, good_rows[:1] + [(HOT, 0x90, THREAD_INST, 5, hot_line)] + good_rows[2:], kernels,
         "not 32 x"),
        ("wrong line", good_window, [(HOT, 0x90, INST, 2 * warps * iters, 3)] + good_rows[1:], kernels,
         "not the hot loop's"),
        ("no lines", good_window, [r[:4] + (None,) for r in good_rows], kernels, "no source lines"),
    ]
    problems = []
    directory = tempfile.mkdtemp(prefix="sass-window-check-")
    try:
        for name, window, rows, kernel_rows, expected in cases:
            untimed = [] if name == "no untimed launches" else \
                launches + [(HOT, 1700, False)] if name == "launch outside step" else launches
            path = make_session(directory, name.replace(" ", "-"), statements, window, rows, kernel_rows,
                                untimed)
            with contextlib.redirect_stdout(io.StringIO()):
                failures = check(path, warps, iters)
            if expected is None and failures:
                problems.append(f"{name}: failed {failures}")
            elif expected is not None and not any(expected in f for f in failures):
                problems.append(f"{name}: expected a failure with {expected!r}, got {failures}")
        if main([]) != 2 or main(["x", "8"]) != 2 or main(["x", "eight", "10"]) != 2:
            problems.append("usage errors not exit 2")
    finally:
        shutil.rmtree(directory)
    for p in problems:
        print(f"FAIL: {p}")
    print(f"self-test: {'FAIL' if problems else 'PASS'}")
    return 1 if problems else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 3 or not argv[1].isdigit() or not argv[2].isdigit():
        print("usage: sass_window_check.py SESSION_DIR WARPS HOT_ITERS | --self-test", file=sys.stderr)
        return 2
    try:
        failures = check(argv[0], int(argv[1]), int(argv[2]))
    except (sqlite3.Error, OSError) as error:
        failures = [f"cannot read the session: {error}"]
    for f in failures:
        print(f"FAIL: {f}")
    print("sass window check: " + ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
