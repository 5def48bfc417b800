"""Tests of the session reader, flare.open (python/flare/reader.py and its fast
path, python/flare_columns.c), run by CTest with the module's other tests
(python/CMakeLists.txt).

The sessions are real: the simulated demo under `flare trace` and `flare
replay` (setUpModule); PM samples are added to a copy, since the simulated
engine's stream is not stored. Every method is checked through lists of
dicts (always) and, when pandas can be imported, through DataFrames, by both
the fast path and the sqlite3 module's path. Bad input must give
SessionError (QueryError for sql()) and leave the session's files as they
were.

Environment (set by CTest): as test_flare_module.py.
"""
import array
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import flare
from flare import _flare, reader

try:
    import pandas
except ImportError:
    pandas = None

BIN = os.environ["FLARE_TEST_BIN_DIR"]
REPOSITORY = os.path.dirname(os.path.abspath(os.environ["FLARE_TEST_PYTHON_SOURCE"]))
WORK = None
TRACE = REPLAY = DEEP = PM = TRIGGERED = PC = NOTED = None  # session directories, made once

KERNEL_COLUMNS = ["pid", "device", "stream_id", "correlation_id", "name", "start_ns", "end_ns",
                  "duration_ns", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                  "shared_memory_bytes", "registers_per_thread", "graph_id", "graph_node_id"]
METHODS = ["kernels", "copies", "scopes", "metrics", "pm_samples", "windows", "replay_metrics",
           "replay_values", "triggered_replays", "pc_samples", "pc_lines", "sass_metrics"]
REPLAY_VALUE_COLUMNS = ["pid", "launch_id", "kernel", "launch_index", "device", "span_id", "metric",
                        "value", "method", "status", "error_bound", "samples"]
PC_COLUMNS = ["pid", "window_id", "device", "function", "pc_offset", "stall_reason", "samples",
              "first_ns", "last_ns"]
SASS_COLUMNS = ["pid", "window_id", "device", "function", "pc_offset", "metric", "value", "file",
                "line"]


def run(*command):
    result = subprocess.run(list(command), capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError("%s: %s%s" % (command, result.stdout, result.stderr))


def setUpModule():
    global WORK, TRACE, REPLAY, DEEP, PM, TRIGGERED, PC, NOTED
    WORK = tempfile.mkdtemp(prefix="flare-test-reader-")
    flare_command, demo = os.path.join(BIN, "flare"), os.path.join(BIN, "flare-demo")
    TRACE, REPLAY, DEEP = (os.path.join(WORK, name) for name in ("trace", "replay", "deep"))
    run(flare_command, "trace", "-q", "-o", TRACE, "--", demo, "3")
    run(flare_command, "replay", "-q", "-o", REPLAY, "--kernel", "saxpy", "--every", "2",
        "--metrics", "launch__grid_size,gpu__time_duration.sum", "--", demo, "2")
    run(flare_command, "trace", "-q", "-o", DEEP, "--deep-after", "1ms", "--deep-for", "300ms",
        "--", demo, "3")
    # A rule that fires within the first 100 ms and replays one launch.
    TRIGGERED = os.path.join(WORK, "triggered")
    run(flare_command, "trace", "-q", "-o", TRIGGERED, "--deep-when",
        "kernel_launch_rate > 1/s for 10ms over 100ms bucket 10ms deep_for 10s max_windows 1 "
        "action replay", "--", demo, "400")
    PM = copy_session(DEEP, "pm")
    with writable(PM) as db:
        pid = db.execute("SELECT pid FROM processes").fetchone()[0]
        db.executemany("INSERT INTO pm_samples (pid, window_id, device, sample_index, start_ns,"
                       " end_ns, scope_instance_id, scope_name, overflow, metric, value)"
                       " VALUES (?, 1, 0, ?, ?, ?, NULL, ?, ?, ?, ?)",
                       [(pid, i, 1000 * i, 1000 * i + 900, "step" if i % 2 else None, flags,
                         "dram__bytes_read.sum" if i < 3 else "sm__cycles_active.avg", 1.5 * i)
                        for i, flags in enumerate([0, 1, 3, 12, 0])])
    PC = copy_session(DEEP, "pc")
    add_pc_samples(PC)
    add_sass_metrics(PC)
    NOTED = copy_session(REPLAY, "noted")
    add_value_notes(NOTED)


def add_pc_samples(directory):
    """PC samples of window 1, written as the store writes them (src/store/
    store_pc.c): the function interned in names, as the kernels' names are."""
    with writable(directory) as db:
        pid = db.execute("SELECT pid FROM processes").fetchone()[0]
        rows = [("saxpy", 0x40, "long_scoreboard", 120), ("saxpy", 0x40, "selected", 30),
                ("saxpy", 0x58, "long_scoreboard", 7), ("_Z7stencilILi3EEvPKfPf", 0x1f0,
                                                       "math_pipe_throttle", 1)]
        for index, (function, offset, reason, samples) in enumerate(rows):
            db.execute("INSERT OR IGNORE INTO names(name) VALUES (?)", (function,))
            db.execute("INSERT INTO pc_samples (pid, window_id, device, name_id, pc_offset,"
                       " stall_reason, samples, first_ns, last_ns) SELECT ?, 1, 0, id, ?, ?, ?,"
                       " ?, ? FROM names WHERE name = ?",
                       (pid, offset, reason, samples, 1000 * index, 1000 * index + 500, function))
        # saxpy's 0x40 on kernels.cu:12 (its other offset has no line).
        db.execute("INSERT OR IGNORE INTO names(name) VALUES ('kernels.cu')")
        db.execute("INSERT INTO pc_lines (pid, name_id, pc_offset, file_name_id, line)"
                   " SELECT ?, s.id, 64, f.id, 12 FROM names s, names f"
                   " WHERE s.name = 'saxpy' AND f.name = 'kernels.cu'", (pid,))


def add_sass_metrics(directory):
    """SASS metrics of window 1, written as the store writes them (src/store/
    store_sass.c), after add_pc_samples: saxpy's 0x40 has its line in
    pc_lines already (one line per instruction, whichever engine wrote it),
    its 0x80 has none."""
    with writable(directory) as db:
        pid = db.execute("SELECT pid FROM processes").fetchone()[0]
        rows = [("saxpy", 0x40, "smsp__sass_inst_executed", 1000),
                ("saxpy", 0x40, "smsp__sass_thread_inst_executed", 32000),
                ("saxpy", 0x80, "smsp__sass_inst_executed", 500),
                ("_Z7stencilILi3EEvPKfPf", 0x1f0, "smsp__sass_inst_executed", 0)]
        for function, offset, metric, value in rows:
            db.execute("INSERT OR IGNORE INTO names(name) VALUES (?)", (function,))
            db.execute("INSERT INTO sass_metrics (pid, window_id, device, name_id, pc_offset,"
                       " metric, value) SELECT ?, 1, 0, id, ?, ?, ? FROM names WHERE name = ?",
                       (pid, offset, metric, value, function))
        # saxpy's 0x80 (no line) disassembled at the session's end (schema 15).
        db.execute("INSERT INTO pc_instructions (pid, name_id, pc_offset, sass)"
                   " SELECT ?, id, 128, 'LDG.E R4, desc[UR4][R2.64]' FROM names"
                   " WHERE name = 'saxpy'", (pid,))


def add_value_notes(directory):
    """Notes on how the first two replayed launches' values were produced,
    written as the store writes them (src/store/store_replay.c, schema 16):
    as range replay by PM sampling notes them. The first launch's time
    measured from the kernels' own times, its grid size not sampled (no
    value); the second's time flagged, unbounded."""
    with writable(directory) as db:
        first, second = [row[0] for row in db.execute(
            "SELECT launch_id FROM replay_launches WHERE declined = 0 ORDER BY launch_id LIMIT 2")]
        db.execute("UPDATE replay_metrics SET value = NULL WHERE launch_id = ? AND"
                   " metric = 'launch__grid_size'", (first,))
        db.executemany("INSERT INTO replay_value_methods (pid, launch_id, metric, method, status,"
                       " error_bound, samples) SELECT pid, launch_id, ?, ?, ?, ?, ? FROM"
                       " replay_launches WHERE launch_id = ?",
                       [("gpu__time_duration.sum", "kernel-activity", "measured", 500.0, 0, first),
                        ("launch__grid_size", "pm-sampling", "not-sampled", None, 0, first),
                        ("gpu__time_duration.sum", "pm-sampling", "flagged", float("inf"), 12,
                         second)])


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def copy_session(source, name):
    target = os.path.join(WORK, name)
    shutil.copytree(source, target)
    return target


class writable:
    """A read-write connection to a session's database (for crafting copies),
    closed on exit, which checkpoints and removes its -wal."""

    def __init__(self, directory):
        self.db = sqlite3.connect(os.path.join(directory, "session.db"), isolation_level=None)

    def __enter__(self):
        return self.db

    def __exit__(self, *exception):
        self.db.close()


def files(directory):
    """Every file of directory with the digest of its bytes."""
    digests = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, "rb") as file:
                digests[name] = hashlib.sha256(file.read()).hexdigest()
        else:
            digests[name] = "not a file"
    return digests


def raw(directory, query, parameters=()):
    """Rows straight from SQLite, not through the reader."""
    db = sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True)
    try:
        return db.execute(query, parameters).fetchall()
    finally:
        db.close()


def records(frame):
    """A DataFrame as the list of dicts the reader would have given (NaN: None)."""
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{key: (value.item() if hasattr(value, "item") else value)
             for key, value in row.items()} for row in rows]


def each_method(session):
    return {method: getattr(session, method)() for method in METHODS}


# ---- the methods, through lists of dicts ----

class Methods(unittest.TestCase):
    def setUp(self):
        self.trace = flare.open(TRACE, pandas=False)
        self.addCleanup(self.trace.close)

    def test_kernels(self):
        kernels = self.trace.kernels()
        self.assertIsInstance(kernels, list)
        self.assertEqual(len(kernels), raw(TRACE, "SELECT count(*) FROM kernels")[0][0])
        self.assertGreater(len(kernels), 0)
        self.assertEqual(list(kernels[0]), KERNEL_COLUMNS)
        self.assertEqual({k["name"] for k in kernels}, {"saxpy", "stencil_3pt", "reduce_sum"})
        for kernel in kernels:
            self.assertEqual(kernel["duration_ns"], kernel["end_ns"] - kernel["start_ns"])
        saxpy = self.trace.kernels(name="saxpy")
        self.assertEqual(len(saxpy), sum(k["name"] == "saxpy" for k in kernels))
        pid = kernels[0]["pid"]
        self.assertEqual(len(self.trace.kernels(pid=pid, name="saxpy")), len(saxpy))
        self.assertEqual(self.trace.kernels(pid=pid + 1), [])
        self.assertEqual(self.trace.kernels(name="no such kernel"), [])

    def test_copies(self):
        copies = self.trace.copies()
        self.assertEqual(len(copies), raw(TRACE, "SELECT count(*) FROM copies")[0][0])
        self.assertLessEqual({c["kind"] for c in copies},
                             {"host to device", "device to host", "device to device", "memset"})
        self.assertEqual({c["status"] for c in copies}, {"OK"})
        uploads = self.trace.copies(kind="host to device")
        self.assertEqual(len(uploads), sum(c["kind"] == "host to device" for c in copies))
        self.assertGreater(len(uploads), 0)

    def test_scopes(self):
        scopes = self.trace.scopes()
        expected = raw(TRACE, "SELECT n.name, s.depth, s.end_ns - s.start_ns FROM scopes s JOIN "
                              "names n ON n.id = s.name_id ORDER BY s.rowid")
        self.assertEqual([(s["name"], s["depth"], s["duration_ns"]) for s in scopes], expected)
        timed = self.trace.scopes(gpu_time=True)
        self.assertEqual(len(timed), len(scopes))
        self.assertEqual(list(timed[0])[-2:], ["kernels", "gpu_ns"])
        self.assertGreater(sum(s["kernels"] for s in timed), 0)
        for scope in timed:
            self.assertLessEqual(scope["gpu_ns"], scope["duration_ns"] * scope["kernels"])
        names = {s["name"] for s in scopes}
        one = sorted(names)[0]
        self.assertEqual({s["name"] for s in self.trace.scopes(name=one)}, {one})
        self.assertEqual({s["name"] for s in self.trace.scopes(name=one, gpu_time=True)}, {one})

    def test_metrics(self):
        metrics = self.trace.metrics()
        expected = raw(TRACE, "SELECT n.name, m.value FROM metrics m JOIN names n ON "
                              "n.id = m.name_id ORDER BY m.rowid")
        self.assertEqual([(m["name"], m["value"]) for m in metrics], expected)
        for name in {m["name"] for m in metrics}:
            self.assertEqual({m["name"] for m in self.trace.metrics(name=name)}, {name})

    def test_pm_samples_name_their_flags(self):
        with flare.open(PM, pandas=False) as session:
            samples = session.pm_samples()
            self.assertEqual([s["flags"] for s in samples],
                             ["", "overflow", "overflow, after hole",
                              "decode aligned, clamped start", ""])
            self.assertNotIn("overflow", samples[0])  # the bits' names, not the bits
            self.assertEqual(samples[1]["scope_name"], "step")
            self.assertIsNone(samples[0]["scope_name"])
            self.assertEqual(len(session.pm_samples(metric="sm__cycles_active.avg")), 2)
        self.assertEqual(self.trace.pm_samples(), [])

    def test_windows_as_the_table_is(self):
        with flare.open(DEEP, pandas=False) as session:
            windows = session.windows()
        columns = [row[1] for row in raw(DEEP, "PRAGMA table_info(windows)")]
        self.assertEqual(len(windows), 1)
        self.assertEqual(list(windows[0]), columns)
        self.assertEqual(windows[0]["token_kind"], "scheduled")
        self.assertEqual(windows[0]["label"], "deep-after 1ms for 300ms")
        self.assertIsNone(windows[0]["rule_id"])
        self.assertEqual(self.trace.windows(), [])

    def test_triggered_replays_as_the_table_is(self):
        with flare.open(TRIGGERED, pandas=False) as session:
            rows = session.triggered_replays()
            metrics = session.replay_metrics()
        columns = [row[1] for row in raw(TRIGGERED, "PRAGMA table_info(triggered_replays)")]
        self.assertEqual(len(rows), 1)
        self.assertEqual(list(rows[0]), columns)
        row = rows[0]
        self.assertEqual((row["rule_id"], row["action"], row["status"], row["reason"]),
                         (1, "replay", "replayed", ""))
        self.assertGreater(row["observed_value"], row["threshold"])
        self.assertIn("the most GPU time in the last 100.0 ms", row["why"])
        self.assertLessEqual(row["fired_ns"], row["taken_ns"])
        # launch_id leads to the replayed launch's metrics.
        self.assertEqual({m["kernel"] for m in metrics if m["launch_id"] == row["launch_id"]},
                         {row["target"]})
        self.assertEqual(self.trace.triggered_replays(), [])

    def test_pc_samples_name_their_function(self):
        with flare.open(PC, pandas=False) as session:
            rows = session.pc_samples()
            self.assertEqual(len(rows), 4)
            self.assertEqual(list(rows[0]), PC_COLUMNS)
            saxpy = session.pc_samples(function="saxpy")
            self.assertEqual(sorted((r["pc_offset"], r["stall_reason"], r["samples"])
                                    for r in saxpy),
                             [(0x40, "long_scoreboard", 120), (0x40, "selected", 30),
                              (0x58, "long_scoreboard", 7)])
            # The same name id as the kernel's: one names row for both.
            self.assertEqual({k["name"] for k in session.kernels(name="saxpy")}, {"saxpy"})
            self.assertEqual(len(session.pc_samples(window_id=1)), 4)
            self.assertEqual(session.pc_samples(window_id=2), [])
            pid = rows[0]["pid"]
            self.assertEqual(len(session.pc_samples(pid=pid, function="_Z7stencilILi3EEvPKfPf")),
                             1)
            with self.assertRaises(TypeError):
                session.pc_samples(window_id="1")
        self.assertEqual(self.trace.pc_samples(), [])

    def test_pc_lines_only_where_the_binary_said(self):
        with flare.open(PC, pandas=False) as session:
            rows = session.pc_lines()
            self.assertEqual(sorted((r["function"], r["pc_offset"], r["file"], r["line"],
                                     r["stall_reason"], r["samples"]) for r in rows),
                             [("saxpy", 0x40, "kernels.cu", 12, "long_scoreboard", 120),
                              ("saxpy", 0x40, "kernels.cu", 12, "selected", 30)])
            self.assertEqual(len(session.pc_lines(file="kernels.cu", window_id=1)), 2)
            self.assertEqual(session.pc_lines(file="other.cu"), [])
            with self.assertRaises(TypeError):
                session.pc_lines(window_id="1")
        self.assertEqual(self.trace.pc_lines(), [])

    def test_sass_metrics_with_their_lines(self):
        with flare.open(PC, pandas=False) as session:
            rows = session.sass_metrics()
            self.assertEqual(len(rows), 4)
            self.assertEqual(list(rows[0]), SASS_COLUMNS)
            self.assertEqual(sorted((r["function"], r["pc_offset"], r["metric"], r["value"],
                                     r["file"], r["line"]) for r in rows),
                             [("_Z7stencilILi3EEvPKfPf", 0x1f0, "smsp__sass_inst_executed", 0,
                               None, None),
                              ("saxpy", 0x40, "smsp__sass_inst_executed", 1000, "kernels.cu", 12),
                              ("saxpy", 0x40, "smsp__sass_thread_inst_executed", 32000,
                               "kernels.cu", 12),
                              ("saxpy", 0x80, "smsp__sass_inst_executed", 500, None, None)])
            executed = session.sass_metrics(metric="smsp__sass_inst_executed")
            self.assertEqual(len(executed), 3)
            self.assertEqual(len(session.sass_metrics(function="saxpy", window_id=1)), 3)
            self.assertEqual(len(session.sass_metrics(pid=rows[0]["pid"])), 4)
            self.assertEqual(session.sass_metrics(window_id=2), [])
            with self.assertRaises(TypeError):
                session.sass_metrics(window_id="1")
            with self.assertRaises(TypeError):
                session.sass_metrics(metric=1)
            # The PC samples' lines are the same rows: one line per instruction.
            self.assertEqual(len(session.pc_lines()), 2)
        self.assertEqual(self.trace.sass_metrics(), [])

    def test_pc_instructions_where_no_line_is(self):
        with flare.open(PC, pandas=False) as session:
            rows = session.pc_instructions()
            self.assertEqual([(r["function"], r["pc_offset"], r["sass"]) for r in rows],
                             [("saxpy", 0x80, "LDG.E R4, desc[UR4][R2.64]")])
            self.assertEqual(session.pc_instructions(function="stencil"), [])
            self.assertEqual(len(session.pc_instructions(pid=rows[0]["pid"])), 1)
            with self.assertRaises(TypeError):
                session.pc_instructions(pid="1")
        self.assertEqual(self.trace.pc_instructions(), [])

    def test_replay_metrics(self):
        with flare.open(REPLAY, pandas=False) as session:
            values = session.replay_metrics()
            self.assertEqual(len(values), raw(REPLAY, "SELECT count(*) FROM replay_metrics")[0][0])
            self.assertGreater(len(values), 0)
            self.assertEqual({v["kernel"] for v in values}, {"saxpy"})
            self.assertEqual({v["metric"] for v in values},
                             {"launch__grid_size", "gpu__time_duration.sum"})
            grid = session.replay_metrics(kernel="saxpy", metric="launch__grid_size")
            self.assertEqual(len(grid), len(values) // 2)
            self.assertEqual(session.replay_metrics(kernel="nothing"), [])
        self.assertEqual(self.trace.replay_metrics(), [])

    def test_replay_values(self):
        with flare.open(NOTED, pandas=False) as session:
            values = session.replay_values()
            self.assertEqual(len(values), len(session.replay_metrics()))
            self.assertEqual(list(values[0]), REPLAY_VALUE_COLUMNS)
            # replay_metrics() is as it was: no column of the notes.
            self.assertNotIn("method", session.replay_metrics()[0])
            noted = [v for v in values if v["samples"] is not None]
            self.assertEqual(sorted((v["metric"], v["method"], v["status"], v["error_bound"],
                                     v["samples"], v["value"] is None) for v in noted),
                             [("gpu__time_duration.sum", "kernel-activity", "measured", 500.0, 0,
                               False),
                              ("gpu__time_duration.sum", "pm-sampling", "flagged", float("inf"),
                               12, False),
                              ("launch__grid_size", "pm-sampling", "not-sampled", None, 0, True)])
            collector = raw(NOTED, "SELECT collector FROM replay_launches WHERE declined = 0"
                                   " LIMIT 1")[0][0]
            plain = [v for v in values if v["samples"] is None]
            self.assertGreater(len(plain), 0)
            self.assertEqual({(v["method"], v["status"], v["error_bound"]) for v in plain},
                             {(collector, "measured", None)})
            flagged = session.replay_values(kernel="saxpy", metric="gpu__time_duration.sum")
            self.assertEqual(len(flagged), len(values) // 2)
            self.assertEqual(session.replay_values(metric="nothing"), [])
            pid = values[0]["pid"]
            self.assertEqual(len(session.replay_values(pid=pid)), len(values))
        self.assertEqual(self.trace.replay_values(), [])

    def test_sql(self):
        top = self.trace.sql("SELECT name, count FROM v_top_kernels WHERE count >= ? "
                             "ORDER BY name", (1,))
        self.assertEqual([row["name"] for row in top], ["reduce_sum", "saxpy", "stencil_3pt"])
        self.assertEqual(self.trace.sql("SELECT :a + 1 AS b", {"a": 2}), [{"b": 3}])
        self.assertEqual(self.trace.sql(""), [])
        self.assertEqual(len(self.trace.sql("SELECT name FROM pragma_table_info('names')")), 2)
        self.assertEqual(len(self.trace.sql("PRAGMA table_info(kernels)")), 18)

    def test_sql_errors_are_query_errors(self):
        cases = {
            "SELEC 1": "syntax error",
            "SELECT * FROM no_such_table": "no such table: no_such_table",
            "SELECT no_such_column FROM kernels": "no such column",
            "SELECT 1; SELECT 2": "one statement at a time",
            "SELECT ?": "bindings",
            "DELETE FROM kernels": "not authorized",
            "INSERT INTO meta VALUES ('x', 1)": "not authorized",
            "CREATE TABLE t (x)": "not authorized",
            "CREATE TEMP TABLE t (x)": "not authorized",
            "DROP VIEW v_kernels": "not authorized",
            "PRAGMA query_only = 0": "not authorized",
            "PRAGMA journal_mode = DELETE": "not authorized",
            "ATTACH '%s' AS other" % os.path.join(WORK, "attached.db"): "not authorized",
            "VACUUM INTO '%s'" % os.path.join(WORK, "vacuumed.db"): "authorization denied",
            "BEGIN": "not authorized",
        }
        before = files(TRACE)
        for query, message in cases.items():
            with self.assertRaises(flare.QueryError, msg=query) as caught:
                self.trace.sql(query)
            self.assertIn(message, str(caught.exception), query)
            self.assertIsInstance(caught.exception, flare.SessionError)
            self.assertTrue(str(caught.exception).startswith("sql(): "))
        self.assertEqual(files(TRACE), before)
        self.assertFalse(os.path.exists(os.path.join(WORK, "attached.db")))
        self.assertFalse(os.path.exists(os.path.join(WORK, "vacuumed.db")))
        self.assertEqual(len(self.trace.kernels()), len(self.trace.sql("SELECT * FROM kernels")))

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            self.trace.kernels(name=1)
        with self.assertRaises(TypeError):
            self.trace.kernels(pid="1")
        with self.assertRaises(TypeError):
            self.trace.copies(pid=True)
        with self.assertRaises(TypeError):
            self.trace.scopes(gpu_time=1)
        with self.assertRaises(TypeError):
            self.trace.sql(b"SELECT 1")
        with self.assertRaises(TypeError):
            flare.open(TRACE, pandas="yes")
        with self.assertRaises(TypeError):
            flare.open(TRACE, timeout="1s")
        with self.assertRaises(ValueError):
            flare.open(TRACE, timeout=-1)
        with self.assertRaises(TypeError):
            flare.open(3)
        with self.assertRaises(flare.QueryError):
            self.trace.sql("SELECT ?", (2**70,))

    def test_directory_of_sessions_gives_the_newest(self):
        parent = os.path.join(WORK, "several")
        os.makedirs(parent)
        older, newer = copy_session(TRACE, "several/a-newer"), copy_session(REPLAY, "several/b")
        os.utime(os.path.join(newer, "session.db"), (1000, 1000))  # b is older, though later
        os.makedirs(os.path.join(parent, "empty"))
        with flare.open(parent, pandas=False) as session:
            self.assertEqual(session.directory, older)
            self.assertEqual(session.database, os.path.join(older, "session.db"))
        environment = dict(os.environ, FLARE_OUTPUT_DIR=parent)
        code = "import flare; print(flare.open(pandas=False).directory)"
        result = subprocess.run([sys.executable, "-c", code], env=environment,
                                capture_output=True, text=True, timeout=60, cwd=WORK)
        self.assertEqual(result.stdout.strip(), older, result.stderr)
        shutil.rmtree(parent)

    def test_names_that_are_uri_syntax(self):
        directory = copy_session(TRACE, "odd ?#%25 name\udcff")
        expected = raw(TRACE, "SELECT count(*) FROM kernels")[0][0]
        for use_pandas in ([False, True] if pandas is not None else [False]):
            with flare.open(directory, pandas=use_pandas) as session:
                self.assertEqual(len(session.kernels()), expected)
            with flare.open(os.fsencode(directory), pandas=use_pandas) as session:
                self.assertEqual(len(session.kernels()), expected)

    def test_close_and_with(self):
        with flare.open(TRACE, pandas=False) as session:
            self.assertEqual(session.schema_version, 16)
            self.assertIsNone(session.notice)
            self.assertIn("schema 16", repr(session))
        self.assertIn("closed", repr(session))
        with self.assertRaisesRegex(flare.SessionError, "was closed"):
            session.kernels()
        session.close()  # again: nothing

    def test_threads_share_a_session(self):
        counts = []

        def read():
            for _ in range(5):
                counts.append(len(self.trace.kernels()))
        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(len(set(counts)), 1)
        self.assertEqual(len(counts), 20)

    def test_schema_versions_match_the_store(self):
        with open(os.path.join(REPOSITORY, "src", "store", "store.h")) as header:
            text = header.read()
        newest = int(re.search(r"#define STORE_SCHEMA_VERSION (\d+)", text).group(1))
        oldest = int(re.search(r"#define STORE_SCHEMA_VERSION_OLDEST (\d+)", text).group(1))
        self.assertEqual((reader.SCHEMA_OLDEST, reader.SCHEMA_NEWEST), (oldest, newest))

    def test_finished_session_gets_no_new_file(self):
        before = files(TRACE)
        with flare.open(TRACE, pandas=False) as session:
            each_method(session)
            session.sql("SELECT * FROM v_gpu_busy")
            self.assertEqual(sorted(os.listdir(TRACE)), sorted(before))  # no -wal, no -shm
        if pandas is not None:
            with flare.open(TRACE, pandas=True) as session:
                each_method(session)
        self.assertEqual(files(TRACE), before)

    @unittest.skipUnless(pandas is None, "pandas is installed")
    def test_without_pandas(self):
        self.assertIsInstance(flare.open(TRACE).kernels(), list)
        with self.assertRaisesRegex(ImportError, "python3-pandas"):
            flare.open(TRACE, pandas=True)


# ---- DataFrames ----

@unittest.skipIf(pandas is None, "pandas is not installed (Debian: python3-pandas)")
class Frames(unittest.TestCase):
    SESSIONS = property(lambda self: [TRACE, REPLAY, DEEP, PM, PC])
    QUERIES = [
        ("SELECT 1 AS i, 1.5 AS f, 'text' AS t, x'00ff' AS b, NULL AS n "
         "UNION ALL SELECT NULL, 2, NULL, NULL, NULL UNION ALL SELECT 3, NULL, 'u', x'', NULL", ()),
        ("SELECT 1 AS mixed UNION ALL SELECT 'one' UNION ALL SELECT 2.5 UNION ALL SELECT NULL", ()),
        ("SELECT NULL AS first UNION ALL SELECT 7", ()),
        ("SELECT NULL AS first UNION ALL SELECT 'seven'", ()),
        ("SELECT 2 AS x UNION ALL SELECT 3.25", ()),
        ("SELECT name, name FROM v_kernels WHERE name = ?", ("saxpy",)),
        ("SELECT * FROM kernels WHERE 0", ()),
        ("SELECT 9223372036854775807 AS big, -9223372036854775808 AS small", ()),
        ("SELECT 'caf\u00e9 \u2603' AS unicode, '' AS empty", ()),
        ("", ()),
    ]

    def test_frames_hold_what_the_lists_hold(self):
        for directory in self.SESSIONS:
            with flare.open(directory, pandas=True) as frames, \
                    flare.open(directory, pandas=False) as lists:
                for method in METHODS:
                    frame, rows = getattr(frames, method)(), getattr(lists, method)()
                    self.assertIsInstance(frame, pandas.DataFrame)
                    self.assertEqual(records(frame), rows, (directory, method))
                    if rows:
                        self.assertEqual(list(frame.columns), list(rows[0]))

    def test_fast_path_matches_the_sqlite3_path(self):
        available, reason = _flare._columns_available()
        if not available:
            self.skipTest("the fast path is unavailable: " + reason)
        for directory in self.SESSIONS:
            fast = flare.open(directory, pandas=True)
            slow = flare.open(directory, pandas=True)
            slow._columns = None  # the sqlite3 module's rows, as without the fast path
            self.assertIsNotNone(fast._columns)
            for method in METHODS:
                pandas.testing.assert_frame_equal(getattr(fast, method)(),
                                                  getattr(slow, method)(), obj=method)
            pandas.testing.assert_frame_equal(fast.scopes(gpu_time=True),
                                              slow.scopes(gpu_time=True))
            for query, parameters in self.QUERIES:
                pandas.testing.assert_frame_equal(fast.sql(query, parameters),
                                                  slow.sql(query, parameters), obj=query)
            for query in ("SELEC", "DELETE FROM kernels", "SELECT 1; SELECT 2", "SELECT ?"):
                messages = []
                for session in (fast, slow):
                    with self.assertRaises(flare.QueryError) as caught:
                        session.sql(query)
                    messages.append(str(caught.exception).split(" (")[0])
                self.assertEqual(messages[0].split(".")[0][:40], messages[1].split(".")[0][:40])
            fast.close()
            slow.close()

    def test_frame_types_and_writes(self):
        with flare.open(TRACE, pandas=True) as session:
            kernels = session.kernels()
            self.assertEqual(str(kernels["start_ns"].dtype), "int64")
            self.assertEqual(kernels["name"].iloc[0] in ("saxpy", "stencil_3pt", "reduce_sum"),
                             True)
            kernels.loc[0, "start_ns"] = 5  # a frame of its own, not a view of a buffer
            self.assertEqual(kernels.loc[0, "start_ns"], 5)
            mixed = session.sql(self.QUERIES[0][0])
            self.assertEqual(str(mixed["i"].dtype), "float64")  # ints with a NULL: NaN
            self.assertTrue(mixed["n"].isna().all())
            self.assertEqual(list(session.sql("SELECT 1 AS a, 2 AS a").columns), ["a", "a"])
            self.assertEqual(session.kernels(name="none").shape, (0, 18))


# ---- the fast path itself, with or without pandas ----

class FastPath(unittest.TestCase):
    """_flare._read_columns against the sqlite3 module, value by value."""

    def setUp(self):
        available, reason = _flare._columns_available()
        if not available:
            self.skipTest("the fast path is unavailable: " + reason)
        self.session = flare.open(TRACE, pandas=False)
        self.addCleanup(self.session.close)

    def columns(self, query, parameters=()):
        names, columns = _flare._read_columns(self.session._uri, self.session._setup, query,
                                              parameters, 1000, reader._authorize)
        values = []
        for kind, data in columns:
            if kind == "O":
                values.append(data)
            else:
                numbers = array.array("q" if kind == "i8" else "d", bytes(data)).tolist()
                values.append([None if n != n else n for n in numbers])  # NaN: NULL
        return names, [tuple(row) for row in zip(*values)], [kind for kind, _ in columns]

    def test_values_match(self):
        queries = [("SELECT * FROM v_kernels", ()), ("SELECT * FROM v_copies", ()),
                   ("SELECT * FROM v_scope_gpu_time", ()), ("SELECT * FROM windows", ()),
                   ("SELECT * FROM v_kernels WHERE name = ? AND pid > ?", ("saxpy", 0))]
        queries += Frames.QUERIES
        for query, parameters in queries:
            names, rows, _ = self.columns(query, parameters)
            cursor = self.session._connection.execute(query, parameters)
            self.assertEqual(names, [d[0] for d in cursor.description or []], query)
            self.assertEqual(rows, cursor.fetchall(), query)

    def test_column_kinds(self):
        _, rows, kinds = self.columns(Frames.QUERIES[0][0])
        self.assertEqual(kinds, ["f8", "f8", "O", "O", "O"])  # ints with a NULL: f8
        self.assertEqual(rows[0], (1, 1.5, "text", b"\x00\xff", None))
        _, rows, kinds = self.columns("SELECT name, start_ns FROM v_kernels")
        self.assertEqual(kinds, ["O", "i8"])
        names = [row[0] for row in rows]
        self.assertTrue(all(names[i] is names[j] for i in range(len(names))
                            for j in range(len(names)) if names[i] == names[j]))

    def test_refusals(self):
        for query, parameters, words in (
                ("DELETE FROM kernels", (), "not authorized"),
                ("SELECT 1; SELECT 2", (), "one statement at a time"),
                ("SELECT ?", (), "Incorrect number of bindings"),
                ("SELECT ?", ([1],), "type 'list' is not supported"),
                ("SELEC", (), "syntax error")):
            with self.assertRaisesRegex(_flare._SQLiteError, words):
                self.columns(query, parameters)
        with self.assertRaises(OverflowError):
            self.columns("SELECT ?", (2**64,))


# ---- version 6 ----

def drop_version_16(db):
    """What version 16 added: replay_value_methods and v_replay_values."""
    db.execute("DROP VIEW v_replay_values")
    db.execute("DROP TABLE replay_value_methods")


def make_version_6(source, name):
    """A copy of a version 7 session as version 6 wrote it: no name tables,
    views or index-build results."""
    target = copy_session(source, name)
    with writable(target) as db:
        for kind, item in db.execute("SELECT type, name FROM sqlite_master WHERE "
                                     "name LIKE 'v\\_%' ESCAPE '\\' OR name LIKE 'enum\\_%' "
                                     "ESCAPE '\\' OR name IN ('kernel_name_stats', "
                                     "'kernels_by_start', 'api_calls', 'storms', "
                                     "'process_ranks', 'clock_pairs', 'triggered_replays', "
                                     "'pc_samples', 'pc_lines', 'sass_metrics', "
                                     "'untimed_launches', 'pc_code', 'pc_cubins', "
                                     "'pc_instructions', 'replay_value_methods')"
                                     ).fetchall():
            db.execute("DROP %s %s" % (kind.upper(), item))
        db.execute("DELETE FROM meta WHERE key NOT IN ('created_by', 'schema_version')")
        db.execute("UPDATE meta SET value = 6 WHERE key = 'schema_version'")
    return target


def make_version_7(source, name):
    """A copy of a version 9 session as version 7 wrote it: no api_calls,
    storms, process_ranks or clock_pairs tables."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("DROP VIEW v_sass_metrics")
        db.execute("DROP TABLE sass_metrics")
        db.execute("DROP VIEW v_pc_lines")
        db.execute("DROP TABLE pc_lines")
        db.execute("DROP VIEW v_pc_samples")
        for table in ("api_calls", "storms", "process_ranks", "clock_pairs", "triggered_replays",
                      "pc_samples"):
            db.execute("DROP TABLE %s" % table)
        db.execute("UPDATE meta SET value = 7 WHERE key = 'schema_version'")
    return target


def make_version_8(source, name):
    """A copy of a version 9 session as version 8 wrote it: no process_ranks
    or clock_pairs tables."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("DROP VIEW v_sass_metrics")
        db.execute("DROP TABLE sass_metrics")
        db.execute("DROP VIEW v_pc_lines")
        db.execute("DROP TABLE pc_lines")
        db.execute("DROP VIEW v_pc_samples")
        for table in ("process_ranks", "clock_pairs", "triggered_replays", "pc_samples"):
            db.execute("DROP TABLE %s" % table)
        db.execute("UPDATE meta SET value = 8 WHERE key = 'schema_version'")
    return target


def make_version_9(source, name):
    """A copy of a version 10 session as version 9 wrote it: no
    triggered_replays table."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("DROP VIEW v_sass_metrics")
        db.execute("DROP TABLE sass_metrics")
        db.execute("DROP VIEW v_pc_lines")
        db.execute("DROP TABLE pc_lines")
        db.execute("DROP VIEW v_pc_samples")
        db.execute("DROP TABLE triggered_replays")
        db.execute("DROP TABLE pc_samples")
        db.execute("UPDATE meta SET value = 9 WHERE key = 'schema_version'")
    return target


def make_version_10(source, name):
    """A copy of a version 16 session as version 10 wrote it: no pc_samples,
    pc_lines, sass_metrics or untimed_launches tables, nor their views."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("DROP VIEW v_sass_metrics")
        db.execute("DROP TABLE sass_metrics")
        db.execute("DROP VIEW v_pc_lines")
        db.execute("DROP TABLE pc_lines")
        db.execute("DROP VIEW v_pc_samples")
        db.execute("DROP TABLE pc_samples")
        db.execute("UPDATE meta SET value = 10 WHERE key = 'schema_version'")
    return target


def make_version_11(source, name):
    """A copy of a version 16 session as version 11 wrote it: no pc_lines,
    sass_metrics or untimed_launches tables, nor their views."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("DROP VIEW v_sass_metrics")
        db.execute("DROP TABLE sass_metrics")
        db.execute("DROP VIEW v_pc_lines")
        db.execute("DROP TABLE pc_lines")
        db.execute("UPDATE meta SET value = 11 WHERE key = 'schema_version'")
    return target


def make_version_12(source, name):
    """A copy of a version 16 session as version 12 wrote it: no
    sass_metrics or untimed_launches table, nor v_sass_metrics."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("DROP VIEW v_sass_metrics")
        db.execute("DROP TABLE sass_metrics")
        db.execute("UPDATE meta SET value = 12 WHERE key = 'schema_version'")
    return target


def make_version_13(source, name):
    """A copy of a version 16 session as version 13 wrote it: no
    untimed_launches table."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("DROP TABLE untimed_launches")
        db.execute("UPDATE meta SET value = 13 WHERE key = 'schema_version'")
    return target


def make_version_14(source, name):
    """A copy of a version 16 session as version 14 wrote it: no pc_code,
    pc_cubins or pc_instructions tables, nor v_pc_instructions."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("DROP VIEW v_pc_instructions")
        for table in ("pc_instructions", "pc_cubins", "pc_code"):
            db.execute("DROP TABLE %s" % table)
        db.execute("UPDATE meta SET value = 14 WHERE key = 'schema_version'")
    return target


def make_version_15(source, name):
    """A copy of a version 16 session as version 15 wrote it: no
    replay_value_methods table, nor v_replay_values."""
    target = copy_session(source, name)
    with writable(target) as db:
        drop_version_16(db)
        db.execute("UPDATE meta SET value = 15 WHERE key = 'schema_version'")
    return target


class Version15(unittest.TestCase):
    def test_values_of_version_16_read_as_their_collectors(self):
        old = make_version_15(REPLAY, os.path.basename(REPLAY) + "-v15")
        for use_pandas in ([False, True] if pandas is not None else [False]):
            with flare.open(old, pandas=use_pandas) as fifteen, \
                    flare.open(REPLAY, pandas=use_pandas) as sixteen:
                self.assertEqual((fifteen.schema_version, sixteen.schema_version), (15, 16))
                self.assertIsNone(fifteen.notice)
                values = fifteen.replay_values()
                self.assertTrue(Version6.rows(values) == Version6.rows(sixteen.replay_values()))
                self.assertTrue(Version6.rows(fifteen.replay_metrics()) ==
                                Version6.rows(sixteen.replay_metrics()))
                if use_pandas:
                    self.assertEqual(list(values.columns), REPLAY_VALUE_COLUMNS)
                    continue
                self.assertEqual(len(values), len(fifteen.replay_metrics()))
                self.assertEqual({v["status"] for v in values}, {"measured"})
                self.assertEqual({(v["error_bound"], v["samples"]) for v in values},
                                 {(None, None)})
                collectors = {row["collector"] for row in fifteen.sql(
                    "SELECT DISTINCT collector FROM replay_launches WHERE declined = 0")}
                self.assertEqual({v["method"] for v in values}, collectors)
                self.assertEqual(fifteen.sql("SELECT COUNT(*) AS n FROM replay_value_methods"),
                                 [{"n": 0}])


class Version14(unittest.TestCase):
    def test_tables_of_version_15_read_empty(self):
        old = make_version_14(PC, os.path.basename(PC) + "-v14")
        with flare.open(old, pandas=False) as fourteen, \
                flare.open(PC, pandas=False) as fifteen:
            self.assertEqual((fourteen.schema_version, fifteen.schema_version), (14, 16))
            self.assertIsNone(fourteen.notice)
            self.assertEqual(fourteen.pc_instructions(), [])
            self.assertEqual(fourteen.sql("SELECT COUNT(*) AS n FROM pc_cubins"), [{"n": 0}])
            self.assertEqual(fourteen.sass_metrics(), fifteen.sass_metrics())
            self.assertEqual(fourteen.pc_samples(), fifteen.pc_samples())


class Version13(unittest.TestCase):
    def test_table_of_version_14_reads_empty(self):
        old = make_version_13(PC, os.path.basename(PC) + "-v13")
        with flare.open(old, pandas=False) as thirteen, \
                flare.open(PC, pandas=False) as fourteen:
            self.assertEqual((thirteen.schema_version, fourteen.schema_version), (13, 16))
            self.assertIsNone(thirteen.notice)
            self.assertEqual(thirteen.sql("SELECT COUNT(*) AS n FROM untimed_launches"),
                             [{"n": 0}])
            self.assertEqual(thirteen.sass_metrics(), fourteen.sass_metrics())


class Version12(unittest.TestCase):
    def test_table_of_version_13_reads_empty(self):
        old = make_version_12(PC, os.path.basename(PC) + "-v12")
        for use_pandas in ([False, True] if pandas is not None else [False]):
            with flare.open(old, pandas=use_pandas) as twelve, \
                    flare.open(PC, pandas=use_pandas) as thirteen:
                self.assertEqual((twelve.schema_version, thirteen.schema_version), (12, 16))
                self.assertIsNone(twelve.notice)
                self.assertEqual(len(thirteen.sass_metrics()), 4)
                old_rows = twelve.sass_metrics()
                self.assertEqual(len(old_rows), 0)
                if use_pandas:
                    self.assertEqual(list(old_rows.columns), SASS_COLUMNS)
                    self.assertTrue(old_rows.equals(twelve.sass_metrics(metric="x")))
                else:
                    self.assertEqual(twelve.sql("SELECT COUNT(*) AS n FROM v_sass_metrics"),
                                     [{"n": 0}])
                for method in ("pc_samples", "pc_lines", "kernels"):
                    self.assertTrue(Version6.rows(getattr(twelve, method)()) ==
                                    Version6.rows(getattr(thirteen, method)()), method)


class Version11(unittest.TestCase):
    def test_table_of_version_12_reads_empty(self):
        old = make_version_11(PC, os.path.basename(PC) + "-v11")
        with flare.open(old, pandas=False) as eleven, flare.open(PC, pandas=False) as twelve:
            self.assertEqual((eleven.schema_version, twelve.schema_version), (11, 16))
            self.assertEqual(len(twelve.pc_lines()), 2)
            self.assertEqual(eleven.pc_lines(), [])
            self.assertEqual(eleven.sass_metrics(), [])
            self.assertEqual(eleven.pc_samples(), twelve.pc_samples())


class Version10(unittest.TestCase):
    def test_table_of_version_11_reads_empty(self):
        old = make_version_10(PC, os.path.basename(PC) + "-v10")
        with flare.open(old, pandas=False) as ten, flare.open(PC, pandas=False) as eleven:
            self.assertEqual((ten.schema_version, eleven.schema_version), (10, 16))
            self.assertIsNone(ten.notice)
            self.assertEqual(len(eleven.pc_samples()), 4)
            self.assertEqual(ten.pc_samples(), [])
            self.assertEqual(ten.pc_lines(), [])
            self.assertEqual(ten.sass_metrics(), [])
            self.assertEqual(ten.sql("SELECT COUNT(*) AS n FROM pc_samples"), [{"n": 0}])
            self.assertEqual(ten.kernels(), eleven.kernels())


class Version9(unittest.TestCase):
    def test_table_of_version_10_reads_empty(self):
        old = make_version_9(TRIGGERED, os.path.basename(TRIGGERED) + "-v9")
        with flare.open(old, pandas=False) as nine, flare.open(TRIGGERED, pandas=False) as ten:
            self.assertEqual((nine.schema_version, ten.schema_version), (9, 16))
            self.assertEqual(len(ten.triggered_replays()), 1)
            self.assertEqual(nine.triggered_replays(), [])
            self.assertEqual(nine.replay_metrics(), ten.replay_metrics())


class Version8(unittest.TestCase):
    def test_tables_of_version_9_read_empty(self):
        old = make_version_8(TRACE, os.path.basename(TRACE) + "-v8")
        with flare.open(old, pandas=False) as eight, flare.open(TRACE, pandas=False) as nine:
            self.assertEqual(eight.schema_version, 8)
            self.assertEqual(nine.schema_version, 16)
            count = lambda reader, sql: list(reader.sql(sql)[0].values())[0]
            self.assertGreater(count(nine, "SELECT COUNT(*) FROM process_ranks"), 0)
            self.assertGreater(count(nine, "SELECT COUNT(*) FROM clock_pairs"), 0)
            self.assertEqual(count(eight, "SELECT COUNT(*) FROM process_ranks"), 0)
            self.assertEqual(count(eight, "SELECT COUNT(*) FROM clock_pairs"), 0)


class Version7(unittest.TestCase):
    def test_tables_of_version_8_read_empty(self):
        old = make_version_7(TRACE, os.path.basename(TRACE) + "-v7")
        with flare.open(old, pandas=False) as seven, flare.open(TRACE, pandas=False) as eight:
            self.assertEqual(seven.schema_version, 7)
            self.assertEqual(eight.schema_version, 16)
            self.assertGreater(list(eight.sql("SELECT COUNT(*) FROM api_calls")[0].values())[0], 0)
            self.assertEqual(list(seven.sql("SELECT COUNT(*) FROM api_calls")[0].values())[0], 0)
            self.assertEqual(list(seven.sql("SELECT COUNT(*) FROM storms")[0].values())[0], 0)
            self.assertEqual(seven.sql("SELECT COUNT(*) FROM kernels"),
                             eight.sql("SELECT COUNT(*) FROM kernels"))


class Version6(unittest.TestCase):
    def test_read_like_version_7(self):
        for source in (TRACE, REPLAY, PM):
            old = make_version_6(source, os.path.basename(source) + "-v6")
            before = files(old)
            views = [row[0] for row in raw(source, "SELECT name FROM sqlite_master WHERE type "
                                                   "IN ('view', 'table') AND (name LIKE 'v\\_%' "
                                                   "ESCAPE '\\' OR name LIKE 'enum\\_%' ESCAPE "
                                                   "'\\')")]
            self.assertGreaterEqual(len(views), 11)
            for use_pandas in ([False, True] if pandas is not None else [False]):
                with flare.open(old, pandas=use_pandas) as six, \
                        flare.open(source, pandas=use_pandas) as seven:
                    self.assertEqual(six.schema_version, 6)
                    self.assertIn("schema version 6 (an older flare)", six.notice)
                    self.assertIn("'flare index' adds them", six.notice)
                    for method in METHODS:
                        self.assertEqual(self.rows(getattr(six, method)()),
                                         self.rows(getattr(seven, method)()), (source, method))
                    self.assertEqual(self.rows(six.scopes(gpu_time=True)),
                                     self.rows(seven.scopes(gpu_time=True)))
                    for view in views:
                        query = "SELECT * FROM %s" % view
                        if view == "v_api_call_seconds":
                            # Over api_calls, which version 6 did not have.
                            self.assertEqual(self.rows(six.sql(query)), [])
                            continue
                        self.assertEqual(self.rows(six.sql(query)), self.rows(seven.sql(query)),
                                         (source, view))
            self.assertEqual(files(old), before)
            self.assertEqual(raw(old, "SELECT value FROM meta WHERE key = 'schema_version'"),
                             [(6,)])

    @staticmethod
    def rows(result):
        return records(result) if pandas is not None and not isinstance(result, list) else result


# ---- bad input ----

class BadInput(unittest.TestCase):
    def expect(self, path, pattern):
        """SessionError matching pattern, by both paths, with the files unchanged."""
        directory = path if os.path.isdir(path) else None
        before = files(directory) if directory else None
        for use_pandas in (False, None):
            with self.assertRaises(flare.SessionError) as caught:
                flare.open(path, pandas=use_pandas)
            self.assertRegex(str(caught.exception), pattern)
        if directory:
            self.assertEqual(files(directory), before)
        return caught.exception

    def test_not_a_session(self):
        self.expect(os.path.join(WORK, "missing"), "missing: No such file or directory")
        plain = os.path.join(WORK, "plain-file")
        with open(plain, "w") as file:
            file.write("x")
        self.expect(plain, "is not a directory")
        empty = os.path.join(WORK, "empty-dir")
        os.makedirs(empty)
        self.expect(empty, r"no flare session in .*empty-dir \(no session.db in it or its "
                           r"subdirectories\)")
        text = os.path.join(WORK, "text-db")
        os.makedirs(text)
        with open(os.path.join(text, "session.db"), "w") as file:
            file.write("not a database at all, just text that is long enough " * 10)
        self.expect(text, r"not a flare session database \(not an SQLite database file\)")
        zero = os.path.join(WORK, "zero-db")
        os.makedirs(zero)
        open(os.path.join(zero, "session.db"), "w").close()
        self.expect(zero, "is empty: not a flare session database")
        foreign = os.path.join(WORK, "foreign-db")
        os.makedirs(foreign)
        with writable(foreign) as db:
            db.execute("CREATE TABLE t (x)")
        self.expect(foreign, "foreign-db/session.db is not a flare session database$")
        with writable(foreign) as db:
            db.execute("CREATE TABLE meta (key, value)")
            db.execute("INSERT INTO meta VALUES ('created_by', 'someone'), "
                       "('schema_version', 7)")
        self.expect(foreign, "is not a flare session database$")
        with writable(foreign) as db:
            db.execute("DROP TABLE meta")
            db.execute("CREATE TABLE meta (k, v)")  # another program's meta table
        self.expect(foreign, "is not a flare session database$")
        directory = os.path.join(WORK, "db-is-a-directory")
        os.makedirs(os.path.join(directory, "session.db"))
        self.expect(directory, "is not a regular file")

    def test_schema_versions(self):
        for version, words in ((17, r"schema version 17 \(a newer flare\); this reader reads "
                                    r"versions 6 to 16"),
                               (5, r"schema version 5 \(an older flare\); this reader reads "
                                   r"versions 6 to 16"),
                               ("'16'", "schema version 16; this reader reads versions 6 to 16")):
            directory = copy_session(TRACE, "version-%s" % str(version).strip("'"))
            with writable(directory) as db:
                db.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'" % version)
            self.expect(directory, words)

    def test_truncated(self):
        size = os.path.getsize(os.path.join(TRACE, "session.db"))
        for name, length, words in (("half", size // 2, r"is truncated: its header says \d+ "
                                                        r"pages of 4096 bytes"),
                                    ("header", 50, "is truncated: 50 bytes"),
                                    ("page", 1000, "is truncated")):
            directory = copy_session(TRACE, "truncated-" + name)
            os.truncate(os.path.join(directory, "session.db"), length)
            self.expect(directory, words)

    def test_corrupt(self):
        directory = copy_session(TRACE, "corrupt")
        database = os.path.join(directory, "session.db")
        size = os.path.getsize(database)
        with open(database, "r+b") as file:
            file.seek(2 * 4096)
            file.write(b"\xa5" * (size - 3 * 4096))
        before = files(directory)
        failures = 0
        for use_pandas in ([False, True] if pandas is not None else [False]):
            try:
                session = flare.open(directory, pandas=use_pandas)
            except flare.SessionError as error:
                self.assertIn("corrupt", str(error))
                failures += 1
                continue
            for method in METHODS + ["sql"]:
                try:
                    if method == "sql":
                        session.sql("SELECT * FROM v_gpu_busy")
                    else:
                        getattr(session, method)()
                except flare.QueryError:
                    self.fail("a corrupt file is the session's fault, not the query's")
                except flare.SessionError as error:
                    self.assertRegex(str(error), "corrupt|malformed")
                    failures += 1
            session.close()
        self.assertGreater(failures, 0)
        self.assertEqual(files(directory), before)


# ---- directories this user cannot write ----

READ_ALL = textwrap.dedent("""
    import json, sys, flare
    with flare.open(sys.argv[1], pandas=False) as session:
        print(json.dumps({"kernels": len(session.kernels()), "notice": session.notice}))
""")


class ReadOnlyDirectory(unittest.TestCase):
    def read_only(self, directory):
        """Runs READ_ALL on directory made read-only: a read-only bind mount
        (as root, where unshare works), else the directory's mode (not root).
        Returns its JSON answer, or skips."""
        if os.geteuid() != 0:
            mode = os.stat(directory).st_mode
            os.chmod(directory, 0o555)
            try:
                result = subprocess.run([sys.executable, "-c", READ_ALL, directory],
                                        capture_output=True, text=True, timeout=60)
            finally:
                os.chmod(directory, mode)
        else:
            mount = tempfile.mkdtemp(prefix="flare-test-ro-")
            script = ('mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && '
                      'exec "$3" -c "$4" "$2"')
            result = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", directory, mount,
                                     sys.executable, READ_ALL], capture_output=True, text=True,
                                    timeout=60)
            os.rmdir(mount)
            if result.returncode != 0 and ("mount" in result.stderr or
                                           "unshare" in result.stderr):
                self.skipTest("neither a read-only bind mount nor a non-root user: %s"
                              % result.stderr.strip())
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        import json
        return json.loads(result.stdout)

    def test_finished_session(self):
        directory = copy_session(TRACE, "read-only")
        before = files(directory)
        answer = self.read_only(directory)
        self.assertEqual(answer["kernels"], raw(TRACE, "SELECT count(*) FROM kernels")[0][0])
        self.assertIsNone(answer["notice"])
        self.assertEqual(files(directory), before)

    def test_killed_writer_leaves_its_log(self):
        """A writer killed before its checkpoint (so its session stayed in WAL
        mode): its rows are only in the -wal. Without the -shm and the right
        to make one, the main file alone is read, and the notice says what
        was left out."""
        directory = copy_session(TRACE, "read-only-killed")
        code = textwrap.dedent("""
            import os, sqlite3, sys
            db = sqlite3.connect(sys.argv[1] + "/session.db", isolation_level=None)
            db.execute("PRAGMA journal_mode = WAL")  # as while the session ran
            db.execute("PRAGMA wal_autocheckpoint = 0")
            db.execute("INSERT INTO kernels SELECT * FROM kernels")
            os._exit(0)
        """)
        subprocess.run([sys.executable, "-c", code, directory], check=True, timeout=60)
        os.remove(os.path.join(directory, "session.db-shm"))
        answer = self.read_only(directory)
        self.assertEqual(answer["kernels"], raw(TRACE, "SELECT count(*) FROM kernels")[0][0])
        self.assertIn("without its write-ahead log", answer["notice"])
        with flare.open(directory, pandas=False) as session:  # writable: all of it
            self.assertEqual(len(session.kernels()), 2 * answer["kernels"])


# ---- a session still being written ----

HOLD_LOCK = textwrap.dedent("""
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1] + "/session.db", isolation_level=None)
    db.execute("PRAGMA locking_mode = EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
    db.execute("INSERT INTO meta VALUES ('held', 1)")
    print("held", flush=True)
    sys.stdin.readline()
    db.execute("ROLLBACK")
""")


class BeingWritten(unittest.TestCase):
    def test_open_transaction_is_not_seen_and_does_not_block(self):
        directory = copy_session(TRACE, "being-written")
        committed = raw(TRACE, "SELECT count(*) FROM kernels")[0][0]
        writer = sqlite3.connect(os.path.join(directory, "session.db"), isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO kernels SELECT * FROM kernels LIMIT 1")
        sessions = [flare.open(directory, pandas=False, timeout=1)]
        if pandas is not None:
            sessions.append(flare.open(directory, pandas=True, timeout=1))
        for session in sessions:
            started = time.monotonic()
            self.assertEqual(len(session.kernels()), committed)
            self.assertLess(time.monotonic() - started, 5)
            self.assertEqual(session.schema_version, 16)
        writer.execute("COMMIT")
        for session in sessions:
            self.assertEqual(len(session.kernels()), committed + 1)  # each call reads afresh
            session.close()
        writer.close()

    def test_exclusive_writer_is_a_timeout(self):
        directory = copy_session(TRACE, "locked")
        holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, directory],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "held")
            started = time.monotonic()
            with self.assertRaisesRegex(flare.SessionError, "locked by a writer after 0.5 s"):
                flare.open(directory, pandas=False, timeout=0.5)
            self.assertLess(time.monotonic() - started, 10)
        finally:
            holder.communicate("\n", timeout=60)
        with flare.open(directory, pandas=False) as session:  # released: it reads
            self.assertGreater(len(session.kernels()), 0)

    def test_immutable_reader_sees_a_later_writer(self):
        directory = copy_session(TRACE, "later-writer")
        for use_pandas in ([False, True] if pandas is not None else [False]):
            session = flare.open(directory, pandas=use_pandas)
            before = len(session.kernels())
            with writable(directory) as db:
                db.execute("INSERT INTO kernels SELECT * FROM kernels LIMIT 1")
            # The writer has closed: its -wal is gone, the file changed.
            self.assertFalse(os.path.exists(os.path.join(directory, "session.db-wal")))
            self.assertEqual(len(session.kernels()), before + 1)
            session.close()

    def test_new_session_all_in_its_log(self):
        """A session whose writer has not checkpointed yet: session.db holds
        only its header, the tables are in the -wal."""
        directory = os.path.join(WORK, "fresh")
        os.makedirs(directory)
        code = textwrap.dedent("""
            import os, sqlite3, sys
            db = sqlite3.connect(sys.argv[1] + "/session.db", isolation_level=None)
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value)")
            db.execute("INSERT INTO meta VALUES ('created_by', 'flare'), ('schema_version', 8)")
            print("written", flush=True)
            sys.stdin.readline()
        """)
        holder = subprocess.Popen([sys.executable, "-c", code, directory],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "written")
            self.assertLessEqual(os.path.getsize(os.path.join(directory, "session.db")), 4096)
            for use_pandas in ([False, True] if pandas is not None else [False]):
                with flare.open(directory, pandas=use_pandas) as session:
                    self.assertEqual(session.schema_version, 8)
                    with self.assertRaisesRegex(flare.SessionError,
                                                "cannot read kernels: no such table: v_kernels"):
                        session.kernels()
        finally:
            holder.communicate("\n", timeout=60)


if __name__ == "__main__":
    unittest.main()
