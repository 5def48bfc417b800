"""flare.reader: a saved flare session, read from Python (docs/api.md, "Reading a
session from Python").

    session = flare.open("flare-out")         # a session, or the newest of a directory of them
    session.kernels(name="saxpy")             # a pandas DataFrame, or a list of dicts
    session.sql("SELECT name, total_ns FROM v_top_kernels LIMIT 5")

Every method answers with a pandas DataFrame when pandas can be imported, else a
list of dicts, one per row, keyed by column name (open(..., pandas=False) asks
for lists; pandas=True insists on pandas). Names, not codes: the methods read
the views and name tables of schema version 7 (docs/schema.md, "Views and name
tables"); on a version 6 session the reader's own connection gets temporary
copies of them (_COMPAT_DDL below), so the methods and sql() see the same
names on both.

Python over the standard library's sqlite3, but for one thing: DataFrames
come from the extension's fast path (python/flare_columns.c), which reads a
result by column into packed arrays instead of a Python object per value,
with the same SQLite library, URI and policy (_authorize); without it
(_columns_available() says why) they come from the sqlite3 module's rows.
How session.db is opened:

* when it has no -wal, -shm or -journal file beside it (a finished session,
  which its last writer left as one file; no process has it open), as an
  immutable file: SQLite creates no file beside it and takes no lock. Before
  each call the reader checks that no writer has opened or changed it since;
  if one has, it opens it again;
* when it has one (a session still being written, or a writer that was
  killed), read-only (mode=ro), which reads what the writers committed
  (through their -wal and -shm files in WAL mode) and never blocks them for
  longer than a call's read. Where this user cannot use those files (a
  directory it cannot write), it reads the main file alone, as an immutable
  file, and the notice says what was left out.

Must never: write to the session or create a file in its directory that
SQLite does not need to read it; hold a lock past a call; wait longer than
the timeout; raise anything but SessionError (QueryError for a bad query in
sql()) for a bad session, or TypeError/ValueError for a bad argument.
sqlite3 reports a corrupt file as an error, never a crash.
"""
import builtins
import os
import sqlite3
import stat
import threading
import urllib.parse

try:
    from flare import _flare  # the fast path (python/flare_columns.c)
except ImportError:  # reader.py alone, without its package
    _flare = None

DATABASE_NAME = "session.db"

# The schema versions this reader reads: STORE_SCHEMA_VERSION_OLDEST and
# STORE_SCHEMA_VERSION of src/store/store.h (tests/python/test_reader.py
# holds them equal).
SCHEMA_OLDEST = 6
SCHEMA_NEWEST = 16

_SQLITE_MAGIC = b"SQLite format 3\x00"
_FAST_ERRORS = (_flare._SQLiteError,) if _flare is not None else ()


class SessionError(Exception):
    """No readable flare session: a directory without one, a file that is not a
    flare session database, a schema version this reader does not read, a
    corrupt or truncated database, one that stayed locked past the timeout.
    The message names the file and what is wrong with it; `path` is that file
    or directory."""

    def __init__(self, message, path=None):
        super().__init__(message)
        self.path = path


class QueryError(SessionError):
    """sql() was given a query SQLite refused: a syntax error, an unknown table
    or column, wrong parameters, or a statement that is not a query."""


# ---- finding the session ----

def find_session(path):
    """The session directory for path, as `flare report` chooses it: path itself
    when it holds session.db, else the subdirectory whose session.db was
    written last (a tie goes to the greater name). SessionError when there is
    none; TypeError when path is not a path."""
    directory = os.fsdecode(os.fspath(path))
    try:
        info = os.stat(directory)
    except OSError as error:
        raise SessionError("%s: %s" % (directory, error.strerror), directory) from None
    if not stat.S_ISDIR(info.st_mode):
        raise SessionError("%s is not a directory (give a session directory, or a directory of "
                           "sessions)" % directory, directory)
    if os.path.exists(os.path.join(directory, DATABASE_NAME)):
        return directory
    newest = None
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    written = os.stat(os.path.join(entry.path, DATABASE_NAME)).st_mtime_ns
                except OSError:
                    continue
                if newest is None or (written, entry.name) > newest[0]:
                    newest = ((written, entry.name), entry.path)
    except OSError as error:
        raise SessionError("cannot read %s: %s" % (directory, error.strerror), directory) from None
    if newest is None:
        raise SessionError("no flare session in %s (no %s in it or its subdirectories)"
                           % (directory, DATABASE_NAME), directory)
    return newest[1]


def _size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _in_use(database):
    """Whether a connection may have database open (or a writer died with it
    open): SQLite's files beside it exist."""
    return any(os.path.exists(database + suffix) for suffix in ("-wal", "-shm", "-journal"))


def _stamp(path):
    """What changes when a writer changes path (compared before each call on an
    immutable connection)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _check_file(database):
    """SessionError unless database is a regular file that starts like an SQLite
    database and is as long as its header says (checked when no connection
    has it open: a writer's -wal may hold part of it, and a writer in the
    middle of a commit may have written the header before the pages)."""
    try:
        info = os.stat(database)
    except OSError as error:
        raise SessionError("%s: %s" % (database, error.strerror), database) from None
    if not stat.S_ISREG(info.st_mode):
        raise SessionError("%s is not a regular file" % database, database)
    wal_size = _size(database + "-wal")
    if info.st_size == 0:
        if wal_size > 0:
            return  # a new session: everything it wrote is still in its -wal
        raise SessionError("%s is empty: not a flare session database (yet: a session that is "
                           "still starting has no tables)" % database, database)
    try:
        with builtins.open(database, "rb") as file:
            header = file.read(100)
    except OSError as error:
        raise SessionError("%s: %s" % (database, error.strerror), database) from None
    if not header.startswith(_SQLITE_MAGIC):
        raise SessionError("%s is not a flare session database (not an SQLite database file)"
                           % database, database)
    if len(header) < 100:
        raise SessionError("%s is truncated: %d bytes, shorter than an SQLite header"
                           % (database, len(header)), database)
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is valid when the change counter matches the
    # version-valid-for number (every SQLite since 3.7.0 keeps them so).
    if (not _in_use(database) and header[24:28] == header[92:96]
            and info.st_size < pages * page_size):
        raise SessionError("%s is truncated: its header says %d pages of %d bytes (%d bytes), the "
                           "file has %d" % (database, pages, page_size, pages * page_size,
                                            info.st_size), database)


# ---- errors ----

def _error_kind(error):
    """busy, corrupt, cantopen, readonly, io or query: what an error of SQLite
    (from the sqlite3 module or the fast path) says about the session (the
    first five) or about the statement."""
    code, text = None, str(error)
    if _flare is not None and isinstance(error, _flare._SQLiteError):
        code, text = error.args
    elif isinstance(error, sqlite3.DatabaseError):
        code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    else:
        code = -1  # sqlite3.Warning and the like: the statement's
    primary = code & 0xff if code is not None and code >= 0 else code
    guess = primary is None  # an older Python: only the message to go by
    if primary in (5, 6) or (guess and "locked" in text):  # SQLITE_BUSY, SQLITE_LOCKED
        return "busy"
    if primary in (11, 26) or (guess and ("malformed" in text or "not a database" in text)):
        return "corrupt"  # SQLITE_CORRUPT, SQLITE_NOTADB
    if primary == 14 or (guess and "unable to open" in text):  # SQLITE_CANTOPEN
        return "cantopen"
    if primary == 10 or (guess and "disk I/O error" in text):  # SQLITE_IOERR
        return "io"
    if (primary == 8 or (guess and "readonly" in text)) and "attempt to write" not in text:
        return "readonly"  # SQLITE_READONLY: the -shm cannot be used
    return "query"


# ---- what version 15 lacks: the table version 16 added (src/store/store_schema.c) ----

# The table (empty: an older flare noted nothing of how a replayed value was
# produced, its collector measured every one) and the view, copies of
# src/store/store_schema.c and store_views.c.
_COMPAT_V16_DDL = [
    "CREATE TEMP TABLE replay_value_methods (pid INTEGER NOT NULL, launch_id INTEGER NOT NULL,"
    " metric TEXT NOT NULL, method TEXT NOT NULL, status TEXT NOT NULL, error_bound REAL,"
    " samples INTEGER NOT NULL, PRIMARY KEY (pid, launch_id, metric))",
    "CREATE TEMP VIEW v_replay_values AS"
    " SELECT l.pid, l.launch_id, l.kernel, l.launch_index, l.device, l.span_id,"
    " m.metric, m.value, coalesce(v.method, l.collector) AS method,"
    " coalesce(v.status, CASE WHEN m.value IS NULL THEN 'unavailable' ELSE 'measured' END)"
    " AS status, v.error_bound, v.samples"
    " FROM replay_launches l JOIN replay_metrics m"
    " ON m.pid = l.pid AND m.launch_id = l.launch_id"
    " LEFT JOIN replay_value_methods v"
    " ON v.pid = m.pid AND v.launch_id = m.launch_id AND v.metric = m.metric",
]

# ---- what version 14 lacks: the tables version 15 added (src/store/store_schema.c) ----

# The tables (empty: an older flare kept no code of functions without lines)
# and the view, copies of src/store/store_schema.c and store_views.c.
_COMPAT_V15_DDL = [
    "CREATE TEMP TABLE pc_code (pid INTEGER NOT NULL, name_id INTEGER NOT NULL,"
    " cubin_crc INTEGER NOT NULL, symbol TEXT NOT NULL, PRIMARY KEY (pid, name_id))",
    "CREATE TEMP TABLE pc_cubins (pid INTEGER NOT NULL, cubin_crc INTEGER NOT NULL,"
    " bytes BLOB NOT NULL, PRIMARY KEY (pid, cubin_crc))",
    "CREATE TEMP TABLE pc_instructions (pid INTEGER NOT NULL, name_id INTEGER NOT NULL,"
    " pc_offset INTEGER NOT NULL, sass TEXT NOT NULL, PRIMARY KEY (pid, name_id, pc_offset))",
    "CREATE TEMP VIEW v_pc_instructions AS"
    " SELECT i.pid, n.name AS function, i.pc_offset, i.sass"
    " FROM pc_instructions i JOIN names n ON n.id = i.name_id",
]

# ---- what version 13 lacks: the table version 14 added (src/store/store_schema.c) ----

# The table (empty: an older flare recorded no untimed launches), a copy of
# src/store/store_schema.c.
_COMPAT_V14_DDL = [
    "CREATE TEMP TABLE untimed_launches (pid INTEGER NOT NULL, correlation_id INTEGER NOT NULL,"
    " thread_id INTEGER NOT NULL, time_ns INTEGER NOT NULL, device INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL, scope_instance_id INTEGER)",
]

# ---- what version 12 lacks: the table version 13 added (src/store/store_schema.c) ----

# The table (empty: an older flare counted no SASS metrics) and its view,
# copies of src/store/store_schema.c and store_views.c. After
# _COMPAT_V12_DDL: the view reads pc_lines, the reader's own before 12.
_COMPAT_V13_DDL = [
    "CREATE TEMP TABLE sass_metrics (pid INTEGER NOT NULL, window_id INTEGER NOT NULL,"
    " device INTEGER NOT NULL, name_id INTEGER NOT NULL, pc_offset INTEGER NOT NULL,"
    " metric TEXT NOT NULL, value INTEGER NOT NULL,"
    " PRIMARY KEY (pid, window_id, device, name_id, pc_offset, metric))",
    "CREATE TEMP VIEW v_sass_metrics AS"
    " SELECT s.pid, s.window_id, s.device, n.name AS function, s.pc_offset, s.metric, s.value,"
    " f.name AS file, l.line"
    " FROM sass_metrics s JOIN names n ON n.id = s.name_id"
    " LEFT JOIN pc_lines l"
    " ON l.pid = s.pid AND l.name_id = s.name_id AND l.pc_offset = s.pc_offset"
    " LEFT JOIN names f ON f.id = l.file_name_id",
]

# ---- what version 11 lacks: the table version 12 added (src/store/store_schema.c) ----

# The table (empty: an older flare kept no source lines) and its view,
# copies of src/store/store_schema.c and store_views.c.
_COMPAT_V12_DDL = [
    "CREATE TEMP TABLE pc_lines (pid INTEGER NOT NULL, name_id INTEGER NOT NULL,"
    " pc_offset INTEGER NOT NULL, file_name_id INTEGER NOT NULL, line INTEGER NOT NULL,"
    " PRIMARY KEY (pid, name_id, pc_offset))",
    "CREATE TEMP VIEW v_pc_lines AS"
    " SELECT p.pid, p.window_id, p.device, n.name AS function, p.pc_offset, f.name AS file,"
    " l.line, p.stall_reason, p.samples, p.first_ns, p.last_ns"
    " FROM pc_samples p JOIN pc_lines l"
    " ON l.pid = p.pid AND l.name_id = p.name_id AND l.pc_offset = p.pc_offset"
    " JOIN names n ON n.id = p.name_id JOIN names f ON f.id = l.file_name_id",
]

# ---- what version 10 lacks: the table version 11 added (src/store/store_schema.c) ----

# The table (empty: an older flare sampled no PCs) and its view, copies of
# src/store/store_schema.c and store_views.c.
_COMPAT_V11_DDL = [
    "CREATE TEMP TABLE pc_samples (pid INTEGER NOT NULL, window_id INTEGER NOT NULL,"
    " device INTEGER NOT NULL, name_id INTEGER NOT NULL, pc_offset INTEGER NOT NULL,"
    " stall_reason TEXT NOT NULL, samples INTEGER NOT NULL, first_ns INTEGER NOT NULL,"
    " last_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, window_id, device, name_id, pc_offset, stall_reason))",
    "CREATE TEMP VIEW v_pc_samples AS"
    " SELECT p.pid, p.window_id, p.device, n.name AS function, p.pc_offset, p.stall_reason,"
    " p.samples, p.first_ns, p.last_ns"
    " FROM pc_samples p JOIN names n ON n.id = p.name_id",
]

# ---- what version 9 lacks: the table version 10 added (src/store/store_schema.c) ----

_COMPAT_V10_DDL = [
    "CREATE TEMP TABLE triggered_replays (pid INTEGER NOT NULL, id INTEGER NOT NULL,"
    " rule_id INTEGER NOT NULL, rule_text TEXT NOT NULL, comparison TEXT NOT NULL,"
    " threshold REAL, observed_value REAL, action TEXT NOT NULL, target TEXT NOT NULL,"
    " why TEXT NOT NULL, fired_ns INTEGER NOT NULL, taken_ns INTEGER, done_ns INTEGER NOT NULL,"
    " status TEXT NOT NULL, reason TEXT NOT NULL, launch_id INTEGER, PRIMARY KEY (pid, id))",
]

# ---- what version 8 lacks: the tables version 9 added (src/store/store_schema.c) ----

_COMPAT_V9_DDL = [
    "CREATE TEMP TABLE process_ranks (pid INTEGER PRIMARY KEY, host TEXT NOT NULL,"
    " rank INTEGER, local_rank INTEGER, world_size INTEGER, job_id TEXT)",
    "CREATE TEMP TABLE clock_pairs (pid INTEGER NOT NULL, clock_ns INTEGER NOT NULL,"
    " unix_ns INTEGER NOT NULL, PRIMARY KEY (pid, clock_ns))",
]

# ---- what version 7 lacks: the tables version 8 added (src/store/store.c) ----

_COMPAT_V8_DDL = [
    "CREATE TEMP TABLE api_calls (pid INTEGER NOT NULL, thread_id INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL, name_id INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL)",
    "CREATE TEMP TABLE storms (pid INTEGER NOT NULL, device INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, untimed_launches INTEGER NOT NULL,"
    " still_open INTEGER NOT NULL)",
    # The flight recorder's totals (empty: an older flare evicted nothing) and
    # its views, copies of src/store/store_schema.c and store_views.c.
    'CREATE TEMP TABLE kernel_seconds ( pid INTEGER NOT NULL, second INTEGER NOT NULL, '
    'name_id INTEGER NOT NULL, count INTEGER NOT NULL, gpu_ns INTEGER NOT NULL, PRIMARY KEY '
    '(pid, second, name_id)) WITHOUT ROWID',
    'CREATE TEMP TABLE copy_seconds ( pid INTEGER NOT NULL, second INTEGER NOT NULL, '
    'is_memset INTEGER NOT NULL, copy_kind INTEGER NOT NULL, count INTEGER NOT NULL, bytes '
    'INTEGER NOT NULL, gpu_ns INTEGER NOT NULL, PRIMARY KEY (pid, second, is_memset, '
    'copy_kind)) WITHOUT ROWID',
    'CREATE TEMP TABLE api_call_seconds ( pid INTEGER NOT NULL, second INTEGER NOT NULL, '
    'name_id INTEGER NOT NULL, count INTEGER NOT NULL, host_ns INTEGER NOT NULL, PRIMARY '
    'KEY (pid, second, name_id)) WITHOUT ROWID',
    'CREATE TEMP TABLE metric_seconds ( pid INTEGER NOT NULL, device INTEGER NOT NULL, '
    'name_id INTEGER NOT NULL, second INTEGER NOT NULL, samples INTEGER NOT NULL, min_value '
    'INTEGER NOT NULL, max_value INTEGER NOT NULL, sum_value INTEGER NOT NULL, PRIMARY KEY '
    '(pid, device, name_id, second)) WITHOUT ROWID',
    'CREATE TEMP VIEW v_kernel_seconds AS WITH s(start_ns) AS (SELECT start_ns FROM session '
    'WHERE id = 1), parts AS (SELECT pid, second, name_id, count, gpu_ns FROM '
    'kernel_seconds UNION ALL SELECT k.pid, (k.start_ns - s.start_ns) / 1000000000, '
    'k.name_id, COUNT(*), SUM(k.end_ns - k.start_ns) FROM kernels k, s GROUP BY 1, 2, 3) '
    'SELECT p.pid, p.second, n.name, SUM(p.count) AS count, SUM(p.gpu_ns) AS gpu_ns FROM '
    'parts p JOIN names n ON n.id = p.name_id GROUP BY p.pid, p.second, p.name_id',
    'CREATE TEMP VIEW v_copy_seconds AS WITH s(start_ns) AS (SELECT start_ns FROM session '
    'WHERE id = 1), parts AS (SELECT pid, second, is_memset, copy_kind, count, bytes, '
    'gpu_ns FROM copy_seconds UNION ALL SELECT c.pid, (c.start_ns - s.start_ns) / '
    '1000000000, c.is_memset, c.copy_kind, COUNT(*), SUM(c.bytes), SUM(c.end_ns - '
    'c.start_ns) FROM copies c, s GROUP BY 1, 2, 3, 4) SELECT p.pid, p.second, CASE WHEN '
    "p.is_memset THEN 'memset' ELSE COALESCE(e.name, 'unknown') END AS kind, SUM(p.count) "
    'AS count, SUM(p.bytes) AS bytes, SUM(p.gpu_ns) AS gpu_ns FROM parts p LEFT JOIN '
    'enum_copy_kind e ON e.id = p.copy_kind GROUP BY p.pid, p.second, p.is_memset, '
    'p.copy_kind',
    'CREATE TEMP VIEW v_api_call_seconds AS WITH s(start_ns) AS (SELECT start_ns FROM '
    'session WHERE id = 1), parts AS (SELECT pid, second, name_id, count, host_ns FROM '
    'api_call_seconds UNION ALL SELECT a.pid, (a.start_ns - s.start_ns) / 1000000000, '
    'a.name_id, COUNT(*), SUM(a.end_ns - a.start_ns) FROM api_calls a, s GROUP BY 1, 2, 3) '
    'SELECT p.pid, p.second, n.name, SUM(p.count) AS count, SUM(p.host_ns) AS host_ns FROM '
    'parts p JOIN names n ON n.id = p.name_id GROUP BY p.pid, p.second, p.name_id',
    'CREATE TEMP VIEW v_metric_seconds AS WITH s(start_ns) AS (SELECT start_ns FROM session '
    'WHERE id = 1), parts AS (SELECT pid, device, name_id, second, samples, min_value, '
    'max_value, sum_value FROM metric_seconds UNION ALL SELECT m.pid, m.device, m.name_id, '
    '(m.time_ns - s.start_ns) / 1000000000, COUNT(*), MIN(m.value), MAX(m.value), '
    'SUM(m.value) FROM metrics m, s GROUP BY 1, 2, 3, 4) SELECT p.pid, p.device, n.name, '
    'p.second, SUM(p.samples) AS samples, MIN(p.min_value) AS min_value, MAX(p.max_value) '
    'AS max_value, SUM(p.sum_value) AS sum_value, SUM(p.sum_value) * 1.0 / SUM(p.samples) '
    'AS mean FROM parts p JOIN names n ON n.id = p.name_id GROUP BY p.pid, p.device, '
    'p.name_id, p.second',
]


# ---- what version 6 lacks: copies of src/store/store_views.c ----

# Temporary objects of the reader's own connection (the session is not
# touched), made on a version 6 session so that the methods and sql() see
# the name tables and views of version 7. tests/python/test_reader.py checks
# that they answer exactly as version 7's own do.
_COMPAT_DDL = [
    "CREATE TEMP TABLE enum_copy_kind (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "INSERT INTO enum_copy_kind VALUES (0, 'unknown'), (1, 'host to device'),"
    " (2, 'device to host'), (3, 'device to device'), (4, 'host to host')",
    "CREATE TEMP TABLE enum_status (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " description TEXT NOT NULL)",
    # FLARE_STATUS_MAP of include/flare/flare.h
    "INSERT INTO enum_status VALUES (0, 'OK', 'success'),"
    " (-1, 'ERR_INVALID_ARGUMENT', 'invalid argument'), (-2, 'ERR_NO_MEMORY', 'out of memory'),"
    " (-3, 'ERR_ALREADY_ACTIVE', 'a flare session is already active in this process'),"
    " (-4, 'ERR_NOT_ACTIVE', 'no flare session is active in this process'),"
    " (-5, 'ERR_IO', 'file or directory error'), (-6, 'ERR_STORE', 'session database error'),"
    " (-7, 'ERR_TIMEOUT', 'timed out'), (-8, 'ERR_BACKEND', 'device backend error'),"
    " (-9, 'ERR_FULL', 'bounded buffer full; the item was dropped and counted'),"
    " (-10, 'ERR_UNSUPPORTED', 'not supported'), (-11, 'ERR_NOT_FOUND', 'not found'),"
    " (-12, 'ERR_STATE', 'call not valid in the current state')",
    "CREATE TEMP TABLE enum_external_kind (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "INSERT INTO enum_external_kind VALUES (0, 'invalid'), (1, 'unknown'), (2, 'OpenACC'),"
    " (3, 'custom 0'), (4, 'custom 1'), (5, 'custom 2'), (6, 'SYCL')",
    "CREATE TEMP TABLE enum_pm_flag (bit INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " meaning TEXT NOT NULL)",
    "INSERT INTO enum_pm_flag VALUES"
    " (1, 'overflow', 'decoded from a hardware buffer that overflowed'),"
    " (2, 'after hole', 'the first sample after samples were lost'),"
    " (4, 'decode aligned', 'times aligned to the decode, not to the device clock'),"
    " (8, 'clamped start', 'start clamped to the window''s open (it covered the arming)')",
    # Empty: v_top_kernels then reads the kernels table.
    "CREATE TEMP TABLE kernel_name_stats (name_id INTEGER PRIMARY KEY, count INTEGER NOT NULL,"
    " total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL)",
    "CREATE TEMP VIEW v_kernels AS"
    " SELECT k.pid, k.device, k.stream_id, k.correlation_id, n.name, k.start_ns, k.end_ns,"
    " k.end_ns - k.start_ns AS duration_ns, k.grid_x, k.grid_y, k.grid_z, k.block_x,"
    " k.block_y, k.block_z, k.shared_memory_bytes, k.registers_per_thread, k.graph_id,"
    " k.graph_node_id"
    " FROM kernels k JOIN names n ON n.id = k.name_id",
    "CREATE TEMP VIEW v_copies AS"
    " SELECT c.pid, c.device, c.stream_id, c.correlation_id,"
    " CASE WHEN c.is_memset THEN 'memset' ELSE COALESCE(e.name, 'unknown') END AS kind,"
    " c.bytes, c.start_ns, c.end_ns, c.end_ns - c.start_ns AS duration_ns,"
    " CASE WHEN c.end_ns > c.start_ns THEN c.bytes * 1.0 / (c.end_ns - c.start_ns) END"
    " AS gb_per_s,"
    " COALESCE(s.name, c.status) AS status, c.graph_id, c.graph_node_id"
    " FROM copies c LEFT JOIN enum_copy_kind e ON e.id = c.copy_kind"
    " LEFT JOIN enum_status s ON s.id = c.status",
    "CREATE TEMP VIEW v_top_kernels AS"
    " WITH fresh(ok) AS (SELECT (SELECT value FROM meta WHERE key = 'kernel_name_stats_rowid')"
    " IS (SELECT MAX(rowid) FROM kernels)),"
    " stats AS (SELECT name_id, count, total_ns, min_ns, max_ns FROM kernel_name_stats"
    " WHERE (SELECT ok FROM fresh)"
    " UNION ALL SELECT name_id, COUNT(*), SUM(end_ns - start_ns), MIN(end_ns - start_ns),"
    " MAX(end_ns - start_ns) FROM kernels WHERE NOT (SELECT ok FROM fresh) GROUP BY name_id)"
    " SELECT n.name, t.count, t.total_ns, t.total_ns * 1.0 / t.count AS mean_ns, t.min_ns,"
    " t.max_ns, 100.0 * t.total_ns / NULLIF(SUM(t.total_ns) OVER (), 0) AS percent_gpu_time"
    " FROM stats t JOIN names n ON n.id = t.name_id"
    " ORDER BY t.total_ns DESC",
    "CREATE TEMP VIEW v_gpu_busy AS"
    " WITH ordered AS (SELECT device, start_ns, end_ns, MAX(end_ns) OVER"
    " (PARTITION BY device ORDER BY start_ns, end_ns ROWS BETWEEN UNBOUNDED PRECEDING AND"
    " 1 PRECEDING) AS reach FROM kernels),"
    " marked AS (SELECT device, start_ns, end_ns, SUM(CASE WHEN reach IS NULL OR start_ns >"
    " reach THEN 1 ELSE 0 END) OVER (PARTITION BY device ORDER BY start_ns, end_ns ROWS"
    " UNBOUNDED PRECEDING) AS island FROM ordered),"
    " islands AS (SELECT device, MIN(start_ns) AS first_ns, MAX(end_ns) AS last_ns,"
    " COUNT(*) AS kernels FROM marked GROUP BY device, island)"
    " SELECT device, SUM(last_ns - first_ns) AS busy_ns, MIN(first_ns) AS first_ns,"
    " MAX(last_ns) AS last_ns, SUM(kernels) AS kernels,"
    " 100.0 * SUM(last_ns - first_ns) / NULLIF(MAX(last_ns) - MIN(first_ns), 0)"
    " AS percent_busy"
    " FROM islands GROUP BY device",
    "CREATE TEMP VIEW v_scope_gpu_time AS"
    " SELECT s.pid, s.thread_id, s.instance_id, n.name, s.depth, s.start_ns, s.end_ns,"
    " s.end_ns - s.start_ns AS duration_ns, s.still_open,"
    " COUNT(k.start_ns) AS kernels,"
    " COALESCE(SUM(MIN(k.end_ns, s.end_ns) - MAX(k.start_ns, s.start_ns)), 0) AS gpu_ns"
    " FROM scopes s JOIN names n ON n.id = s.name_id"
    " LEFT JOIN kernels k ON k.pid = s.pid AND k.start_ns < s.end_ns AND k.end_ns > s.start_ns"
    " AND k.start_ns >= s.start_ns - COALESCE("
    "(SELECT value FROM meta WHERE key = 'kernel_duration_max_ns'),"
    " (SELECT MAX(end_ns - start_ns) FROM kernels), 0)"
    " GROUP BY s.rowid",
    "CREATE TEMP VIEW v_pm_by_scope AS"
    " SELECT pid, window_id, device, COALESCE(scope_name, '(no range)') AS scope_name, metric,"
    " SUM(overflow = 0) AS samples, SUM(CASE WHEN overflow = 0 THEN value END) AS total,"
    " AVG(CASE WHEN overflow = 0 THEN value END) AS mean,"
    " SUM(CASE WHEN overflow = 0 THEN end_ns - start_ns END) AS covered_ns,"
    " SUM(overflow != 0) AS flagged"
    " FROM pm_samples GROUP BY pid, window_id, device, scope_name, metric",
    "CREATE TEMP VIEW v_replay_metrics AS"
    " SELECT l.pid, l.launch_id, l.kernel, l.launch_index, l.device, l.stream_id, l.span_id,"
    " m.metric, m.value"
    " FROM replay_launches l JOIN replay_metrics m"
    " ON m.pid = l.pid AND m.launch_id = l.launch_id",
]

# ---- the methods' queries ----

_SCOPES = ("SELECT s.pid, s.thread_id, s.instance_id, n.name, s.depth, s.start_ns, s.end_ns,"
           " s.end_ns - s.start_ns AS duration_ns, s.still_open"
           " FROM scopes s JOIN names n ON n.id = s.name_id")
_METRICS = ("SELECT m.pid, m.device, n.name, m.time_ns, m.value"
            " FROM metrics m JOIN names n ON n.id = m.name_id")
# overflow's bits by name (enum_pm_flag), '' for a sample with none.
_PM_SAMPLES = ("SELECT p.pid, p.window_id, p.device, p.sample_index, p.start_ns, p.end_ns,"
               " p.scope_instance_id, p.scope_name, p.metric, p.value,"
               " COALESCE((SELECT group_concat(f.name, ', ') FROM"
               " (SELECT name FROM enum_pm_flag WHERE p.overflow & bit ORDER BY bit) f), '')"
               " AS flags FROM pm_samples p")

# Pragmas sql() runs with an argument: they read (the others set).
_READING_PRAGMAS = frozenset([
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check"])
_SQLITE_RECURSIVE = getattr(sqlite3, "SQLITE_RECURSIVE", 33)
_READING_ACTIONS = frozenset([sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ,
                              sqlite3.SQLITE_FUNCTION, _SQLITE_RECURSIVE])


def _authorize(action, argument1, argument2, database, source):
    """sql() runs queries only: the session is opened read-only anyway, and this
    also refuses ATTACH, VACUUM INTO and the rest that would write elsewhere."""
    if action in _READING_ACTIONS:
        return sqlite3.SQLITE_OK
    # SQLite's own step when a query first names a table-valued pragma
    # (pragma_table_info): a real write of the schema fails read-only.
    if action == sqlite3.SQLITE_UPDATE and argument1 in ("sqlite_master", "sqlite_temp_master"):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (argument2 is None or
                                            argument1.lower() in _READING_PRAGMAS):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _pandas_module(pandas):
    if pandas is not None and not isinstance(pandas, bool):
        raise TypeError("pandas must be None, True or False, not %s" % type(pandas).__name__)
    if pandas is False:
        return None
    try:
        import pandas as module
    except ImportError:
        if pandas:
            raise ImportError("flare.open(..., pandas=True): pandas is not installed for this "
                              "Python (Debian: apt install python3-pandas)") from None
        return None
    return module


def _columns_reader():
    """flare._flare._read_columns when it can run (docs/api.md: the fast path),
    else None."""
    if _flare is None or not hasattr(_flare, "_read_columns"):
        return None
    available, _ = _flare._columns_available()
    return _flare._read_columns if available else None


def _filters(**values):
    """A WHERE clause and its parameters for the filters given (None: no filter)."""
    clauses, parameters = [], []
    for column, (value, kind) in values.items():
        if value is None:
            continue
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError("%s must be int, not %s" % (column, type(value).__name__))
        if kind is str and not isinstance(value, str):
            raise TypeError("%s must be str, not %s" % (column, type(value).__name__))
        clauses.append("%s = ?" % column)
        parameters.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), parameters


class Session:
    """A saved session, opened read-only: flare.open(path). See the module's
    docstring for how it opens session.db; docs/api.md for every method.

    Attributes: directory (the session directory), database (its session.db),
    schema_version (6 to 16), notice (what the reader wants you to know about
    how it read the session, or None)."""

    def __init__(self, path, pandas=None, timeout=5.0):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number of seconds, not %s" % type(timeout).__name__)
        if not timeout >= 0:
            raise ValueError("timeout must be 0 or more seconds, got %r" % timeout)
        self._frames = _pandas_module(pandas)
        # DataFrames come from the fast path when it can run, else from the
        # sqlite3 module's rows (the tests compare the two).
        self._columns = _columns_reader() if self._frames is not None else None
        self._timeout = float(timeout)
        self._uri = None
        self._setup = None
        self._lock = threading.Lock()
        self._connection = None
        self._closed = False
        self._stamp = None  # of session.db, while read as an immutable file
        if path is None:
            path = os.environ.get("FLARE_OUTPUT_DIR") or "flare-out"
        self.directory = find_session(path)
        self.database = os.path.join(self.directory, DATABASE_NAME)
        self.schema_version = None
        self.notice = None
        self._open()

    # ---- opening ----

    def _connect(self, immutable):
        """A read-only connection: (connection, the URI it opened)."""
        # Percent-encoded: '?', '#' and '%' are URI syntax; a name that is not
        # UTF-8 keeps its bytes.
        path = urllib.parse.quote(os.path.abspath(self.database), errors="surrogateescape")
        uri = "file:%s?%s" % (path, "immutable=1" if immutable else "mode=ro")
        return sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None,
                               check_same_thread=False), uri

    def _check_schema(self, connection):
        """The session's schema version; SessionError when this reader cannot
        read it; sqlite3 errors as they come."""
        if connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            raise SessionError("%s is not a flare session database (it has no tables; a session "
                               "still starting has none yet)" % self.database, self.database)
        facts = {}
        if connection.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                              "name = 'meta'").fetchone()[0]:
            try:
                facts = dict(connection.execute(
                    "SELECT key, value FROM meta WHERE key IN ('created_by', 'schema_version')"))
            except sqlite3.OperationalError as error:
                if _error_kind(error) != "query":
                    raise
                facts = {}  # another program's meta table
        version = facts.get("schema_version")
        if facts.get("created_by") != "flare" or version is None:
            raise SessionError("%s is not a flare session database" % self.database,
                               self.database)
        if not isinstance(version, int) or not SCHEMA_OLDEST <= version <= SCHEMA_NEWEST:
            age = ""
            if isinstance(version, int):
                age = " (a newer flare)" if version > SCHEMA_NEWEST else " (an older flare)"
            raise SessionError("%s has schema version %s%s; this reader reads versions %d to %d"
                               % (self.database, version, age, SCHEMA_OLDEST, SCHEMA_NEWEST),
                               self.database)
        return version

    def _open(self):
        _check_file(self.database)
        wal = self.database + "-wal"
        immutable = not _in_use(self.database)
        notice = None
        connection = None
        try:
            if not immutable:
                try:
                    connection, uri = self._connect(immutable=False)
                    version = self._check_schema(connection)
                except sqlite3.Error as error:
                    if connection is not None:
                        connection.close()
                        connection = None
                    if _error_kind(error) not in ("cantopen", "readonly"):
                        raise
                    # No usable -shm and no right to make one (a directory this
                    # user cannot write): the main file alone.
                    immutable = True
                    if _size(wal) > 0:
                        notice = ("%s was read without its write-ahead log (%d bytes in its -wal "
                                  "file: the session's last writes, or one still running) because "
                                  "this user cannot write in its directory; copy the directory "
                                  "somewhere writable to read all of it"
                                  % (self.database, _size(wal)))
            if immutable:
                stamp = _stamp(self.database)
                connection, uri = self._connect(immutable=True)
                version = self._check_schema(connection)
            else:
                stamp = None
            # Temporary objects live in memory, never in a file of /tmp.
            setup = ["PRAGMA temp_store = MEMORY"]
            if version < 7:
                setup += _COMPAT_DDL
                notice = ((notice + "; ") if notice else "") + (
                    "%s has schema version %d (an older flare): its name tables and views are "
                    "the reader's own, temporary ones; 'flare index' adds them to the session"
                    % (self.database, version))
            if version < 8:
                # Version 8 only added tables, which an older flare never
                # filled: empty ones of the reader's own read the same.
                setup += _COMPAT_V8_DDL
            if version < 9:
                setup += _COMPAT_V9_DDL
            if version < 10:
                setup += _COMPAT_V10_DDL
            if version < 11:
                setup += _COMPAT_V11_DDL
            if version < 12:
                setup += _COMPAT_V12_DDL
            if version < 13:
                setup += _COMPAT_V13_DDL
            if version < 14:
                setup += _COMPAT_V14_DDL
            if version < 15:
                setup += _COMPAT_V15_DDL
            if version < 16:
                setup += _COMPAT_V16_DDL
            setup.append("PRAGMA query_only = 1")
            for statement in setup:
                connection.execute(statement)
            connection.set_authorizer(_authorize)
        except sqlite3.Error as error:
            if connection is not None:
                connection.close()
            raise self._session_error(error, "cannot open it") from error
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        self._connection, self._stamp, self._uri, self._setup = connection, stamp, uri, setup
        self.schema_version, self.notice = version, notice

    def _current(self):
        """The connection, opened again first when it reads session.db as an
        immutable file and a writer has opened or changed it since (or when
        that failed last time: SessionError again, or the connection)."""
        if self._closed:
            raise SessionError("%s: this Session was closed" % self.database, self.database)
        if self._connection is not None and self._stamp is not None and (
                _in_use(self.database) or _stamp(self.database) != self._stamp):
            self._connection.close()
            self._connection = None
        if self._connection is None:
            self._open()
        return self._connection

    def _session_error(self, error, what):
        kind = _error_kind(error)
        if _flare is not None and isinstance(error, _flare._SQLiteError):
            error = error.args[1]
        if kind == "busy":
            return SessionError("%s: %s: still locked by a writer after %g s (try again, or "
                                "flare.open(..., timeout=SECONDS))"
                                % (self.database, what, self._timeout), self.database)
        if kind == "corrupt":
            return SessionError("%s: %s: the database is corrupt or truncated (%s)"
                                % (self.database, what, error), self.database)
        return SessionError("%s: %s: %s" % (self.database, what, error), self.database)

    # ---- queries ----

    def _query(self, sql, parameters, what, query=False):
        with self._lock:
            connection = self._current()
            try:
                if self._columns is not None and isinstance(parameters, (list, tuple)):
                    names, columns = self._columns(self._uri, self._setup, sql, parameters,
                                                   int(min(self._timeout * 1000, 2**31 - 1)),
                                                   _authorize)
                    return self._frame(names, columns)
                cursor = connection.execute(sql, parameters)
                names = [d[0] for d in cursor.description] if cursor.description else []
                rows = cursor.fetchall()
            except (sqlite3.Error, sqlite3.Warning) + _FAST_ERRORS as error:
                if query and _error_kind(error) == "query":
                    detail = error.args[1] if isinstance(error, _FAST_ERRORS) else str(error)
                    if detail in ("not authorized", "authorization denied"):
                        detail += (" (sql() runs queries only: SELECT, WITH, VALUES, a PRAGMA "
                                   "that reads)")
                    raise QueryError("sql(): %s" % detail, self.database) from error
                raise self._session_error(error, "cannot read " + what) from error
            except UnicodeDecodeError as error:
                raise SessionError("%s: cannot read %s: text that is not UTF-8 (%s)"
                                   % (self.database, what, error), self.database) from error
        if self._frames is None:
            return [dict(zip(names, row)) for row in rows]
        if not rows:  # shaped as the fast path shapes it
            return self._frame(names, [("O", [])] * len(names))
        return self._frames.DataFrame.from_records(rows, columns=names)

    def _frame(self, names, columns):
        """A DataFrame of the fast path's columns: numbers as arrays over their
        bytearrays (writable, the frame's own: pandas copies them at most once,
        into its blocks), text and mixed columns as lists."""
        import numpy
        arrays = {}
        for index, (kind, values) in enumerate(columns):
            if kind != "O":
                values = numpy.frombuffer(values, numpy.int64 if kind == "i8" else numpy.float64)
            arrays[index] = values
        frame = self._frames.DataFrame(arrays, copy=False)
        frame.columns = names  # by position: names may repeat
        return frame

    def _select(self, sql, what, **filters):
        where, parameters = _filters(**filters)
        return self._query(sql + where, parameters, what)

    def kernels(self, name=None, pid=None):
        """Every kernel (v_kernels): pid, device, stream_id, correlation_id, name,
        start_ns, end_ns, duration_ns, grid_*, block_*, shared_memory_bytes,
        registers_per_thread, graph_id, graph_node_id. Filters: name, pid."""
        return self._select("SELECT * FROM v_kernels", "kernels",
                            name=(name, str), pid=(pid, int))

    def copies(self, kind=None, pid=None):
        """Every copy and memset (v_copies): kind by name ('host to device',
        'memset', ...), bytes, times, duration_ns, gb_per_s, status by name
        ('OK', ...). Filters: kind, pid."""
        return self._select("SELECT * FROM v_copies", "copies", kind=(kind, str), pid=(pid, int))

    def scopes(self, name=None, pid=None, gpu_time=False):
        """Every scope and NVTX range: pid, thread_id, instance_id, name, depth,
        start_ns, end_ns, duration_ns, still_open; with gpu_time=True also
        kernels and gpu_ns, the GPU work of its process inside it
        (v_scope_gpu_time: slow on a large session that was never indexed).
        Filters: name, pid."""
        if not isinstance(gpu_time, bool):
            raise TypeError("gpu_time must be bool, not %s" % type(gpu_time).__name__)
        if gpu_time:
            return self._select("SELECT * FROM v_scope_gpu_time", "scopes",
                                name=(name, str), pid=(pid, int))
        return self._select("SELECT * FROM (%s)" % _SCOPES, "scopes",
                            name=(name, str), pid=(pid, int))

    def metrics(self, name=None, pid=None):
        """Samples over time (NVML gauges, launch counts...): pid, device (-1
        for the process), name, time_ns, value. Filters: name, pid."""
        return self._select("SELECT * FROM (%s)" % _METRICS, "metrics",
                            name=(name, str), pid=(pid, int))

    def pm_samples(self, metric=None, pid=None):
        """PM samples of the deep-profiling windows: pid, window_id, device,
        sample_index, start_ns, end_ns, scope_instance_id, scope_name, metric,
        value, flags (the overflow bits by name, 'overflow, after hole'; '' for
        a clean sample: docs/pm-sampling.md). Filters: metric, pid."""
        return self._select("SELECT * FROM (%s)" % _PM_SAMPLES, "pm_samples",
                            metric=(metric, str), pid=(pid, int))

    def windows(self, pid=None):
        """The deep-profiling windows, the windows table as it is. Filter: pid."""
        return self._select("SELECT * FROM windows", "windows", pid=(pid, int))

    def triggered_replays(self, pid=None):
        """The replays rules asked for (action replay / range), the
        triggered_replays table as it is: the rule, its reading, the kernel or
        range chosen and why, status, and launch_id, which leads to
        replay_metrics (the span_id of a range). Filter: pid."""
        return self._select("SELECT * FROM triggered_replays", "triggered replays",
                            pid=(pid, int))

    def pc_samples(self, function=None, window_id=None, pid=None):
        """PC samples of the deep-profiling windows that sampled program counters
        (v_pc_samples, schema 11; empty for older sessions): one row per
        (pid, window_id, device, function, pc_offset, stall_reason) with
        samples, the number of samples counted, and first_ns/last_ns, when the
        first and last of them were taken. function is the kernel's name as
        kernels() gives it; pc_offset the instruction's byte offset in it;
        stall_reason what the warp was waiting for ('long_scoreboard', ...,
        'selected' when it issued). Filters: function, window_id, pid."""
        return self._select("SELECT * FROM v_pc_samples", "PC samples",
                            function=(function, str), window_id=(window_id, int),
                            pid=(pid, int))

    def pc_lines(self, file=None, window_id=None, pid=None):
        """PC samples on the source lines of their instructions (v_pc_lines,
        schema 12; empty for older sessions and for code built without line
        information, e.g. nvcc without -lineinfo or -G): the columns of
        pc_samples() with file and line. Only instructions whose binary said
        its line are here; pc_samples() has every sample. Filters: file,
        window_id, pid."""
        return self._select("SELECT * FROM v_pc_lines", "PC source lines",
                            file=(file, str), window_id=(window_id, int), pid=(pid, int))

    def sass_metrics(self, function=None, metric=None, window_id=None, pid=None):
        """SASS metrics of the deep-profiling windows that counted them
        (v_sass_metrics, schema 13; empty for older sessions): one row per
        (pid, window_id, device, function, pc_offset, metric) with value, what
        the metric counted for that instruction over the window's kernels of
        the function, and file and line, the instruction's source line (None
        where its binary had no line information, e.g. nvcc without
        -lineinfo or -G). metric is CUPTI's name ('smsp__sass_inst_executed',
        ...); function and pc_offset as in pc_samples(). Filters: function,
        metric, window_id, pid."""
        return self._select("SELECT * FROM v_sass_metrics", "SASS metrics",
                            function=(function, str), metric=(metric, str),
                            window_id=(window_id, int), pid=(pid, int))

    def pc_instructions(self, function=None, pid=None):
        """The SASS text of sampled instructions without a source line
        (v_pc_instructions, schema 15; empty for older sessions): one row per
        (pid, function, pc_offset) with sass, the instruction as the CUDA
        toolkit's disassembler printed it ('LDG.E R5, desc[UR4][R2.64]'),
        for kernels built without line information, where pc_lines() and the
        file of sass_metrics() have nothing. `flare trace` makes them when it
        ends (`flare disasm` later, where it found no disassembler). Join
        pc_samples() or sass_metrics() on (pid, function, pc_offset).
        Filters: function, pid."""
        return self._select("SELECT * FROM v_pc_instructions", "PC instructions",
                            function=(function, str), pid=(pid, int))

    def replay_metrics(self, kernel=None, metric=None, pid=None):
        """Every replayed kernel launch's metric values (v_replay_metrics): pid,
        launch_id, kernel, launch_index, device, stream_id, span_id, metric,
        value. Filters: kernel, metric, pid."""
        return self._select("SELECT * FROM v_replay_metrics", "replay metrics",
                            kernel=(kernel, str), metric=(metric, str), pid=(pid, int))

    def replay_values(self, kernel=None, metric=None, pid=None):
        """Every replayed kernel launch's metric values with how each was
        produced (v_replay_values, schema 16; read the same way from older
        sessions): pid, launch_id, kernel, launch_index, device, span_id,
        metric, value, then method ('pm-sampling' for a value integrated from
        PM samples, 'kernel-activity' for a PM-sampled span's
        gpu__time_duration.sum from the kernels' own times; else the launch's
        collector, e.g. 'cuda-range-profiler', which measured it exactly),
        status ('measured'; 'flagged': a flagged sample overlapped the kernel,
        the value is the rest's; 'uncovered', 'below-minimum', 'untimed',
        'not-sampled', 'failed': no value; 'unavailable': the collector gave
        none), error_bound (in the value's unit; None: none known, inf:
        unbounded) and samples (the PM samples behind it; None without a
        note). docs/replay.md says how the methods measure. Filters: kernel,
        metric, pid."""
        return self._select("SELECT * FROM v_replay_values", "replay values",
                            kernel=(kernel, str), metric=(metric, str), pid=(pid, int))

    def sql(self, query, parameters=()):
        """The rows of one query (SELECT, WITH, VALUES, a PRAGMA that reads), with
        ? or :name parameters. QueryError when SQLite refuses it."""
        if not isinstance(query, str):
            raise TypeError("query must be str, not %s" % type(query).__name__)
        try:
            return self._query(query, parameters, "the query", query=True)
        except (ValueError, OverflowError) as error:  # a NUL in the query, a huge int
            raise QueryError("sql(): %s" % error, self.database) from error

    # ---- life ----

    def close(self):
        """Closes the database; closing again does nothing."""
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()
        return False

    def __repr__(self):
        return "<flare.Session %r schema %s%s>" % (self.directory, self.schema_version,
                                                  " closed" if self._closed else "")


def open(path=None, pandas=None, timeout=5.0):  # noqa: A001 (flare.open)
    """Opens a saved session read-only: path is a session directory, or a
    directory of sessions (the newest, the one written to last, is read);
    None: $FLARE_OUTPUT_DIR, else ./flare-out, as for `flare report`.
    pandas: None (DataFrames when pandas can be imported, else lists of dicts),
    True (DataFrames; ImportError without pandas) or False (lists of dicts).
    timeout: how long to wait for a writer's lock, in seconds. Returns a
    Session; SessionError when there is no session it can read."""
    return Session(path, pandas=pandas, timeout=timeout)
