"""test_merge.py: `flare merge` (issue 24, items 2 and 3): sessions of several
ranks made one; times of another host's clock recovered from the wall-clock
pairs (to within 1 ms) and, where NCCL kernels exist, from the collectives
(to within 50 us); pids renumbered when two inputs share one; inputs never
modified; each bad input refused with nothing left behind.

Sessions are recorded with flare-demo on the simulated device, then
copied and edited with sqlite3 to stand for another host: every point in
time and its clock pairs moved by a clock offset, wall-clock pairs given an
error, NCCL kernels added at known moments.
"""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

BIN = os.environ["FLARE_TEST_BIN_DIR"]
FLARE = os.path.join(BIN, "flare")
WORK = None
RANKS = []  # three rank sessions recorded together, made once

# Points in time in every table (src/store/store_merge.c's role_of).
TIME_COLUMNS = ("start_ns", "end_ns", "time_ns", "begin_ns", "clock_ns", "first_true_ns",
                "opened_ns", "closed_ns", "requested_ns", "fired_ns", "taken_ns", "done_ns",
                "first_ns", "last_ns")


def flare(*arguments):
    return subprocess.run([FLARE] + list(arguments), capture_output=True, text=True,
                          timeout=120)


def setUpModule():
    global WORK
    WORK = tempfile.mkdtemp(prefix="flare-test-merge-")
    processes = []
    for rank in range(3):
        environment = dict(os.environ, RANK=str(rank), WORLD_SIZE="3")
        processes.append(subprocess.Popen(
            [FLARE, "trace", "-q", "-o", os.path.join(WORK, "runs", "r%r"), "--",
             os.path.join(BIN, "flare-demo"), "10"], env=environment,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    RANKS.extend(os.path.join(WORK, "runs", "r%d" % rank) for rank in range(3))


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def db(directory):
    return sqlite3.connect(os.path.join(directory, "session.db"), isolation_level=None)


def one(directory, sql, *parameters):
    with db(directory) as connection:
        return connection.execute(sql, parameters).fetchone()[0]


def rows(directory, sql, *parameters):
    with db(directory) as connection:
        return connection.execute(sql, parameters).fetchall()


def copy(source, name):
    target = os.path.join(WORK, name)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return target


def move_clock(directory, offset_ns, wall_error_ns=0):
    """Makes the session look recorded on a host whose clock reads offset_ns
    more, and whose wall-clock time was wall_error_ns off."""
    with db(directory) as connection:
        for (table,) in connection.execute("SELECT name FROM sqlite_schema WHERE type = 'table'"
                                           " AND name NOT LIKE 'sqlite%'").fetchall():
            columns = [row[1] for row in connection.execute("PRAGMA table_info(%s)" % table)]
            for column in set(columns) & set(TIME_COLUMNS):
                connection.execute("UPDATE %s SET %s = %s + ? WHERE %s IS NOT NULL"
                                   % (table, column, column, column), (offset_ns,))
        connection.execute("UPDATE clock_pairs SET unix_ns = unix_ns + ?", (wall_error_ns,))
        connection.execute("UPDATE session SET start_unix_ns = start_unix_ns + ?",
                           (wall_error_ns,))


def add_collectives(directory, ends_ns, clock_offset_ns=0):
    """NCCL kernels of the session's first process ending at ends_ns (the
    first session's clock), written in this session's clock."""
    with db(directory) as connection:
        connection.execute("INSERT OR IGNORE INTO names(name) VALUES ('ncclDevKernel_AllReduce')")
        name_id = connection.execute("SELECT id FROM names WHERE name = "
                                     "'ncclDevKernel_AllReduce'").fetchone()[0]
        pid = connection.execute("SELECT MIN(pid) FROM processes").fetchone()[0]
        for index, end in enumerate(ends_ns):
            end += clock_offset_ns
            connection.execute(
                "INSERT INTO kernels(pid, device, stream_id, correlation_id, name_id, start_ns,"
                " end_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z,"
                " shared_memory_bytes, registers_per_thread) VALUES (?, 0, 7, ?, ?, ?, ?, 1, 1,"
                " 1, 1, 1, 1, 0, 0)", (pid, 900000 + index, name_id, end - 50000, end))


def add_pc_samples(directory):
    """Two pc_samples rows (windows 1 and 2) of the session's first process,
    timed from its first kernel."""
    with db(directory) as connection:
        pid, start = connection.execute("SELECT pid, MIN(start_ns) FROM kernels WHERE pid ="
                                        " (SELECT MIN(pid) FROM processes)").fetchone()
        ids = []
        for name in ("saxpy", "_Z4gemmILi128EEvPfS0_"):
            connection.execute("INSERT OR IGNORE INTO names(name) VALUES (?)", (name,))
            ids.append(connection.execute("SELECT id FROM names WHERE name = ?",
                                          (name,)).fetchone()[0])
        connection.executemany(
            "INSERT INTO pc_samples(pid, window_id, device, name_id, pc_offset, stall_reason,"
            " samples, first_ns, last_ns) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?)",
            [(pid, 1, ids[0], 0x40, "long_scoreboard", 17, start + 1000, start + 9000),
             (pid, 2, ids[1], 0x1f0, "selected", 1, start + 20000, start + 20000)])


def add_sass_metrics(directory, padding=()):
    """SASS metrics of window 1 of the session's first process, one
    instruction with its source line in pc_lines, one without. Names in
    padding are interned first, so that this input's name ids differ from
    another's."""
    with db(directory) as connection:
        pid = connection.execute("SELECT MIN(pid) FROM processes").fetchone()[0]
        ids = {}
        for name in tuple(padding) + ("_Z4gemmILi128EEvPfS0_", "gemm.cu"):
            connection.execute("INSERT OR IGNORE INTO names(name) VALUES (?)", (name,))
            ids[name] = connection.execute("SELECT id FROM names WHERE name = ?",
                                           (name,)).fetchone()[0]
        gemm = ids["_Z4gemmILi128EEvPfS0_"]
        connection.executemany(
            "INSERT INTO sass_metrics(pid, window_id, device, name_id, pc_offset, metric, value)"
            " VALUES (?, 1, 0, ?, ?, ?, ?)",
            [(pid, gemm, 0x40, "smsp__sass_inst_executed", 4096),
             (pid, gemm, 0x40, "smsp__sass_thread_inst_executed", 131072),
             (pid, gemm, 0x80, "smsp__sass_inst_executed", 0)])
        connection.execute("INSERT INTO pc_lines(pid, name_id, pc_offset, file_name_id, line)"
                           " VALUES (?, ?, 64, ?, 31)", (pid, gemm, ids["gemm.cu"]))


def digest(directory):
    """Every file of a session directory, hashed: merge never writes to one."""
    hashes = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            hashes[name] = hashlib.sha256(f.read()).hexdigest()
    return hashes


def collective_ends(directory, pid=None):
    with db(directory) as connection:
        return [row[0] for row in connection.execute(
            "SELECT k.end_ns FROM kernels k JOIN names n ON n.id = k.name_id WHERE n.name LIKE"
            " '%nccl%' AND (?1 IS NULL OR k.pid = ?1) ORDER BY k.end_ns", (pid,))]


class Merge(unittest.TestCase):
    def test_ranks_become_one_session(self):
        before = [digest(rank) for rank in RANKS]
        out = os.path.join(WORK, "merged-ranks")
        result = flare("merge", "-o", out, os.path.join(WORK, "runs"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("merged 3 session(s)", result.stdout)
        self.assertIn("aligned on wall-clock time", result.stdout)
        self.assertEqual([digest(rank) for rank in RANKS], before)
        kernels = sum(one(rank, "SELECT COUNT(*) FROM kernels") for rank in RANKS)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM kernels"), kernels)
        self.assertEqual(one(out, "SELECT COUNT(DISTINCT pid) FROM kernels"), 3)
        self.assertEqual(one(out, "SELECT group_concat(rank) FROM (SELECT rank FROM "
                                  "process_ranks ORDER BY rank)"), "0,1,2")
        # Names interned again: every kernel's name is one of the inputs'.
        self.assertEqual(one(out, "SELECT COUNT(*) FROM kernels k LEFT JOIN names n ON"
                                  " n.id = k.name_id WHERE n.id IS NULL"), 0)
        report = flare("report", out)
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertIn("3 process(es) with a rank, world size 3", report.stdout)
        trace = os.path.join(WORK, "m.json")
        export = flare("export", "--format", "perfetto", "-o", trace, out)
        self.assertEqual(export.returncode, 0, export.stderr)
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
        for rank in range(3):  # a process per rank, named and ordered by rank
            self.assertTrue(any(n.startswith("rank %d: process " % rank) for n in names), names)

    def test_another_hosts_clock_is_recovered_from_the_wall_clock(self):
        other = copy(RANKS[1], "other-host")
        move_clock(other, offset_ns=7 * 10**9 + 123457)
        out = os.path.join(WORK, "merged-wall")
        result = flare("merge", "-o", out, "--align", "wall", RANKS[0], other)
        self.assertEqual(result.returncode, 0, result.stderr)
        pid = one(RANKS[1], "SELECT pid FROM processes")
        for column in ("MIN(start_ns)", "MAX(end_ns)"):
            original = one(RANKS[1], "SELECT %s FROM kernels" % column)
            merged = one(out, "SELECT %s FROM kernels WHERE pid = ?" % column, pid)
            self.assertLess(abs(merged - original), 1000000, column)  # within 1 ms

    def test_collectives_refine_a_wrong_wall_clock(self):
        ends = [one(RANKS[0], "SELECT MIN(start_ns) FROM kernels") + step * 3000000
                for step in range(1, 21)]
        first = copy(RANKS[0], "coll-first")
        other = copy(RANKS[1], "coll-other")
        add_collectives(first, ends)
        # The other host's clock reads 5 s more and its wall clock was 4 ms
        # ahead; its collectives end within +-10 us of the first's.
        jitter = [(-1) ** step * (step % 4) * 3000 for step in range(len(ends))]
        add_collectives(other, [end + j for end, j in zip(ends, jitter)])
        move_clock(other, offset_ns=5 * 10**9, wall_error_ns=4000000)
        wall = os.path.join(WORK, "merged-coll-wall")
        refined = os.path.join(WORK, "merged-coll")
        self.assertEqual(flare("merge", "-o", wall, "--align", "wall", first, other).returncode, 0)
        result = flare("merge", "-o", refined, first, other)  # auto: both have collectives
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("aligned on collectives", result.stdout)
        self.assertIn("from 20 collectives", result.stdout)
        pid = one(RANKS[1], "SELECT pid FROM processes")
        off_wall = [a - b for a, b in zip(collective_ends(wall, pid), ends)]
        off_refined = [a - b for a, b in zip(collective_ends(refined, pid), ends)]
        self.assertGreater(min(abs(x) for x in off_wall), 3900000)  # the wall clock's 4 ms
        self.assertLess(max(abs(x) for x in off_refined), 50000)   # within 50 us

    def test_shared_pids_are_renumbered(self):
        twin = copy(RANKS[0], "twin")
        out = os.path.join(WORK, "merged-twins")
        result = flare("merge", "-o", out, RANKS[0], twin)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("1 pid(s) renumbered", result.stdout)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM processes"), 2)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM kernels"),
                         2 * one(RANKS[0], "SELECT COUNT(*) FROM kernels"))
        self.assertEqual(one(out, "SELECT COUNT(DISTINCT pid) FROM process_ranks"), 2)

    def test_pc_samples_follow_their_process(self):
        """pc_samples rows keep their window and function, take their process's
        new pid and are shifted in time like its kernels."""
        first, other = copy(RANKS[0], "pc-first"), copy(RANKS[0], "pc-twin")
        for directory in (first, other):
            add_pc_samples(directory)
        move_clock(other, offset_ns=3 * 10**9)
        out = os.path.join(WORK, "merged-pc")
        result = flare("merge", "-o", out, "--align", "wall", first, other)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM pc_samples"), 4)
        self.assertEqual(one(out, "SELECT COUNT(DISTINCT pid) FROM pc_samples"), 2)
        self.assertEqual(one(out, "SELECT group_concat(function) FROM (SELECT DISTINCT function"
                                  " FROM v_pc_samples ORDER BY function)"),
                         "_Z4gemmILi128EEvPfS0_,saxpy")
        for pid in (r[0] for r in rows(out, "SELECT DISTINCT pid FROM pc_samples")):
            # Each row where its process's first kernel puts it.
            self.assertEqual(rows(out, "SELECT p.window_id, p.first_ns - k.start_ns,"
                                       " p.last_ns - k.start_ns FROM pc_samples p,"
                                       " (SELECT MIN(start_ns) AS start_ns FROM kernels"
                                       " WHERE pid = ?1) k WHERE p.pid = ?1 ORDER BY 1", pid),
                             [(1, 1000, 9000), (2, 20000, 20000)])

    def test_sass_metrics_follow_their_process(self):
        """sass_metrics rows keep their window, offset, metric and value, take
        their process's new pid, and their function and source file are
        interned again (the two inputs give them different name ids)."""
        first, other = copy(RANKS[0], "sass-first"), copy(RANKS[0], "sass-twin")
        add_sass_metrics(first)
        add_sass_metrics(other, padding=("only in the twin", "and this"))
        self.assertNotEqual(rows(first, "SELECT name_id FROM sass_metrics"),
                            rows(other, "SELECT name_id FROM sass_metrics"))
        # A third input of schema 12, which had no such table.
        older = copy(RANKS[1], "sass-v12")
        with db(older) as connection:
            connection.execute("DROP VIEW v_sass_metrics")
            connection.execute("DROP TABLE sass_metrics")
            connection.execute("UPDATE meta SET value = 12 WHERE key = 'schema_version'")
        before = digest(other)
        out = os.path.join(WORK, "merged-sass")
        result = flare("merge", "-o", out, "--align", "wall", first, other, older)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(digest(other), before)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM processes"), 3)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM sass_metrics"), 6)
        pids = [r[0] for r in rows(out, "SELECT DISTINCT pid FROM sass_metrics ORDER BY 1")]
        self.assertEqual(len(pids), 2)
        for pid in pids:
            self.assertEqual(rows(out, "SELECT window_id, device, function, pc_offset, metric,"
                                       " value, file, line FROM v_sass_metrics WHERE pid = ?"
                                       " ORDER BY pc_offset, metric", pid),
                             [(1, 0, "_Z4gemmILi128EEvPfS0_", 0x40, "smsp__sass_inst_executed",
                               4096, "gemm.cu", 31),
                              (1, 0, "_Z4gemmILi128EEvPfS0_", 0x40,
                               "smsp__sass_thread_inst_executed", 131072, "gemm.cu", 31),
                              (1, 0, "_Z4gemmILi128EEvPfS0_", 0x80, "smsp__sass_inst_executed",
                               0, None, None)])
        # Every id points at a name of the output.
        self.assertEqual(one(out, "SELECT COUNT(*) FROM sass_metrics s LEFT JOIN names n"
                                  " ON n.id = s.name_id WHERE n.name IS NULL"), 0)

    def test_a_crashed_rank_and_an_older_schema(self):
        crashed = copy(RANKS[2], "crashed")
        with db(crashed) as connection:
            connection.execute("UPDATE session SET end_ns = NULL")
            connection.execute("UPDATE processes SET end_ns = NULL")
        older = copy(RANKS[1], "older")
        with db(older) as connection:
            connection.execute("DROP TABLE process_ranks")
            connection.execute("DROP TABLE clock_pairs")
            connection.execute("UPDATE meta SET value = 8 WHERE key = 'schema_version'")
        out = os.path.join(WORK, "merged-odd")
        result = flare("merge", "-o", out, RANKS[0], older, crashed)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("never ended (a crashed or killed run: merged as far as it got)",
                      result.stdout)
        self.assertIn("schema 8 (an older flare", result.stdout)
        self.assertEqual(one(out, "SELECT COUNT(*) FROM process_ranks"), 2)

    def test_bad_input(self):
        empty = os.path.join(WORK, "empty")
        os.makedirs(empty, exist_ok=True)
        cases = [
            ((), 2, "no session to merge"),
            ((empty,), 2, "holds no session (no session.db in it or in the directories"),
            ((RANKS[0], RANKS[0] + "/"), 2, "is given twice"),
            (("--align", "exact", RANKS[0]), 2, "'--align exact': expected auto, wall or "
                                                "collectives"),
            (("--frobnicate", RANKS[0]), 2, "unknown option '--frobnicate'"),
            (("-o", RANKS[1], RANKS[0], RANKS[1]), 2, "is one of the inputs"),
            (("-o", os.path.join(WORK, "nope"), "--align", "collectives", RANKS[0], RANKS[1]), 1,
             "fewer than 3 NCCL kernels to align on (use --align wall)"),
            (("-o", RANKS[2], RANKS[0]), 1, "already holds a session"),
        ]
        for arguments, status, words in cases:
            result = flare("merge", *arguments)
            self.assertEqual(result.returncode, status, (arguments, result.stderr))
            self.assertIn(words, result.stderr, arguments)
        # A refused merge leaves no session behind.
        self.assertFalse(os.path.exists(os.path.join(WORK, "nope", "session.db")))
        newer = copy(RANKS[1], "newer")
        with db(newer) as connection:
            connection.execute("UPDATE meta SET value = 17 WHERE key = 'schema_version'")
        result = flare("merge", "-o", os.path.join(WORK, "from-newer"), RANKS[0], newer)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("has schema version 17; this flare reads versions 6 to 16", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(WORK, "from-newer", "session.db")))


if __name__ == "__main__":
    unittest.main()
