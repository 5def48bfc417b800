"""check_triggered_more.py: checks the slow-phase runs of part "triggered"
of scripts/gpu-check.sh (scripts/gpu-check-triggered.sh; issue 23) on
tests/gpu/slow_phase.py, from the sessions' triggered_replays table (schema
10) and replay tables. A session here holds the program's files as
SESSION/out.sha256 and SESSION/times.json (slow_phase.py's HASH_FILE and
TIMES_JSON); REFERENCE is the untraced run's HASH_FILE.

usage:
  check_triggered_more.py slowphase SESSION REFERENCE [--target FILE]
      `action replay` on a kernel-duration rule: exactly one
      triggered_replays row, replayed; exactly one replay_launches row, not
      declined, its launch_id the row's, of the kernel the row names, taken
      inside the slow phase, over 10 ms (gpu__time_duration.sum); outputs
      equal to REFERENCE's. With --target, when every check passed, writes
      FILE: {"kernel", "regex", "launch", "step", "pid", "exact",
      "session"}, what a `flare replay --kernel REGEX --launch N` of the
      same launch needs.
  check_triggered_more.py compare SESSION REPLAY_SESSION REFERENCE --launch N
                          [--sol A,B,...] [--tolerance PCT]
      REPLAY_SESSION is `flare replay --kernel REGEX --launch N` of the
      program: exactly one replay_launches row, not declined, the same
      kernel, launch N by flare's own count and by the kernels table, in the
      same step as SESSION's triggered replay; outputs equal to REFERENCE's;
      every metric of the two replays with its relative difference; fails
      when a speed-of-light metric (--sol; all metrics when not given)
      differs by more than PCT percent (default 2; a metric 0 in both is
      equal) or is missing from either.
  check_triggered_more.py range SESSION REFERENCE
      `action range step`: exactly one triggered_replays row, action range,
      replayed; its replay_spans row (span_id = launch_id) the only one,
      not declined, with kernels > 0, a replay_launches row per kernel and
      metric values; no launch replayed on its own; outputs equal to
      REFERENCE's. Prints the span's step and its longest kernel.
  check_triggered_more.py latency SESSION...
      median and worst of done_ns - fired_ns and taken_ns - fired_ns (ms)
      over the replayed rows of triggered_replays of every session, per
      action.
  check_triggered_more.py selftest
      the regex escaping against the C library's regcomp/regexec (the
      matcher flare uses), and the checks above on fake sessions made with
      sqlite3 in a temporary folder.

How the launch ordinal N is found (the kernels table has no launch
counter): the kernel rows of every name the regex matches, in this process,
launched on their own (graph_id 0), in correlation-id order (the order the
launches were submitted in, which is what `flare replay --launch` counts),
leaving out every replay's re-runs (a pass after the first is recorded as a
kernel of its own: the rows on the replay's device that start after its
pass 0 ended and no later than its end_ns; the same rule as `flare export`'s,
src/store/store_export_flare.c). The replayed launch is the last such row of
the replayed kernel's name on its device that started no later than the end
of its pass 0 (replay_passes; replay_launches.end_ns when that row is
missing): while a replay holds its device's gate nothing else starts there,
so that row is pass 0, even when an earlier launch of the same kernel,
submitted before the replay took the gate, started after begin_ns. N is its
1-based place. A session with dropped kernel records (storms, full rings,
CUPTI drops, evictions) cannot be counted and fails. The compare step checks
the count from the other side: the flare replay's launch_index + 1 must be N
(an exact-name regex) and the same rule applied to that session must give
N again.

The regex is the kernel's name escaped for POSIX extended regular
expressions (a backslash before each of \\ ^ . [ $ ( ) | * + ? {, the
characters whose escapes POSIX defines) and anchored ^...$. flare keeps at
most 255 bytes of --kernel; a longer one becomes ^PREFIX.*SUFFIX$ and N then
counts the launches of every name it matches. A name of 255 bytes or more
may have been cut where flare matches --kernel (a launch's name is held in
256 bytes): it becomes ^PREFIX, which matches the cut name and the whole one
alike.

Must never write into a session (read-only connections) and never pass a
check it could not make: a missing table or file is a failure with its
reason.
"""
import argparse
import contextlib
import ctypes
import ctypes.util
import json
import io
import math
import os
import re
import sqlite3
import statistics
import sys
import tempfile

SLOW_NS = 10_000_000          # the rule's threshold: the slow kernel runs over it
REGEX_MAX_BYTES = 255         # replay_selection.kernel_regex[256] (src/replay/replay.h)
NAME_MAX_BYTES = 255          # a launch's kernel name on flare's launch path (char[256]):
                              # replay_launches.kernel and --kernel's subject, cut there
ERE_SPECIAL = set("\\^.[$()|*+?{")
COUNT_DROPS = ("event_ring", "cupti_activity", "storm_guard", "flight_recorder", "store_write")


class Failed(Exception):
    """A check that cannot go on (a missing table or file)."""


# ---- regexes ----

def ere_escape(text):
    """text as a POSIX ERE matching exactly itself."""
    return "".join("\\" + c if c in ERE_SPECIAL else c for c in text)


def same_kernel(full, launched):
    """Whether a kernel name of the names table is the one a launch
    recorded (cut at NAME_MAX_BYTES on the launch path)."""
    return full == launched or (len(launched.encode()) >= NAME_MAX_BYTES and
                                full.startswith(launched))


def kernel_regex(name, limit=REGEX_MAX_BYTES):
    """(ERE for flare replay --kernel, Python regex equivalent, exact).

    ^NAME$ escaped; when that is over limit bytes, ^PREFIX.*SUFFIX$ with as
    much of the name's two ends as fits (exact False). A name of
    NAME_MAX_BYTES may have been cut on the launch path, where --kernel is
    matched: then ^PREFIX alone, which matches the cut name and the whole
    one alike."""
    whole = "^" + ere_escape(name) + "$"
    if len(name.encode()) < NAME_MAX_BYTES and len(whole.encode()) <= limit:
        return whole, "^" + re.escape(name) + "$", True
    pieces = [ere_escape(c) for c in name]
    if len(name.encode()) >= NAME_MAX_BYTES:
        head, room = [], limit - 1
        for piece in pieces:
            if len(piece.encode()) > room:
                break
            head.append(piece)
            room -= len(piece.encode())
        return "^" + "".join(head), "^" + re.escape(name[:len(head)]), False
    room = limit - len("^.*$".encode())
    head, tail = [], []
    front, back = 0, len(pieces) - 1
    while front <= back:  # alternate ends, whole escapes only
        piece = pieces[front] if len(head) <= len(tail) else pieces[back]
        if len(piece.encode()) > room:
            break
        room -= len(piece.encode())
        if len(head) <= len(tail):
            head.append(piece)
            front += 1
        else:
            tail.insert(0, piece)
            back -= 1
    prefix, suffix = name[:len(head)], name[len(name) - len(tail):] if tail else ""
    ere = "^" + "".join(head) + ".*" + "".join(tail) + "$"
    return ere, "^" + re.escape(prefix) + ".*" + re.escape(suffix) + "$", False


def libc_regex_match(pattern, text):
    """Whether regexec(regcomp(pattern, REG_EXTENDED | REG_NOSUB)) matches
    text; None when the C library cannot be loaded. Raises on a pattern
    regcomp refuses."""
    path = ctypes.util.find_library("c")
    if path is None:
        return None
    libc = ctypes.CDLL(path)
    buffer = ctypes.create_string_buffer(1024)  # regex_t is 64 bytes on glibc x86-64
    reg_extended, reg_nosub = 1, 8  # glibc's and musl's values
    status = libc.regcomp(buffer, pattern.encode(), reg_extended | reg_nosub)
    if status != 0:
        raise ValueError(f"regcomp refused {pattern!r}: {status}")
    try:
        return libc.regexec(buffer, text.encode(), ctypes.c_size_t(0), None, 0) == 0
    finally:
        libc.regfree(buffer)


# ---- sessions ----

def connect(session):
    path = os.path.join(session, "session.db")
    if not os.path.exists(path):
        raise Failed(f"{path} missing")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def has_table(db, name):
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (name,)).fetchone() is not None


def schema_version(db):
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        if has_table(db, "meta") else None
    return row[0] if row else "unknown"


def triggered_rows(db):
    if not has_table(db, "triggered_replays"):
        raise Failed("the session has no triggered_replays table (schema version %s; "
                     "the table came with version 10)" % schema_version(db))
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM triggered_replays ORDER BY pid, id")]
    db.row_factory = None
    return rows


def read_hash(path):
    if not os.path.exists(path):
        raise Failed(f"{path} missing (the program did not finish?)")
    return open(path).read().strip()


def read_times(session):
    path = os.path.join(session, "times.json")
    if not os.path.exists(path):
        raise Failed(f"{path} missing (the program did not finish?)")
    return json.load(open(path))


def step_of(times, time_ns):
    """The step whose [start, end] holds time_ns, or None."""
    for index, (start, end) in enumerate(times["step_ns"]):
        if start <= time_ns <= end:
            return index
    return None


def launch_row(db, launch_id, pid):
    row = db.execute(
        "SELECT launch_id, pid, device, kernel, launch_index, passes_run, declined, reason, "
        "begin_ns, end_ns FROM replay_launches WHERE launch_id = ? AND pid = ?",
        (launch_id, pid)).fetchone()
    if row is None:
        return None
    keys = ("launch_id", "pid", "device", "kernel", "launch_index", "passes_run", "declined",
            "reason", "begin_ns", "end_ns")
    return dict(zip(keys, row))


def metrics_of(db, pid, launch_id):
    return {name: value for name, value in db.execute(
        "SELECT metric, value FROM replay_metrics WHERE pid = ? AND launch_id = ? ORDER BY rowid",
        (pid, launch_id))}


def rerun_windows(db, pid):
    """(device, after_ns, until_ns) of every replay of the process that re-ran work."""
    windows = [tuple(r) for r in db.execute(
        "SELECT l.device, COALESCE((SELECT p.end_ns FROM replay_passes p WHERE p.pid = l.pid "
        "AND p.launch_id = l.launch_id AND p.pass = 0), l.begin_ns), l.end_ns "
        "FROM replay_launches l WHERE l.pid = ? AND l.span_id IS NULL AND l.passes_run > 1",
        (pid,))]
    if has_table(db, "replay_spans"):
        windows += [tuple(r) for r in db.execute(
            "SELECT s.device, COALESCE((SELECT p.end_ns FROM replay_passes p WHERE p.pid = s.pid "
            "AND p.launch_id = s.span_id AND p.pass = 0), s.begin_ns), s.end_ns "
            "FROM replay_spans s WHERE s.pid = ? AND s.passes_run > 1", (pid,))]
    return windows


def count_drops(db, pid):
    """What makes the kernels table incomplete for pid: [(source, detail, count)]."""
    found = []
    if has_table(db, "drops"):
        marks = ",".join("?" * len(COUNT_DROPS))
        found += db.execute(f"SELECT source, detail, count FROM drops WHERE pid = ? AND count > 0 "
                            f"AND source IN ({marks})", (pid, *COUNT_DROPS)).fetchall()
    if has_table(db, "storms"):
        found += [("storms", "launch storm", n) for (n,) in db.execute(
            "SELECT COUNT(*) FROM storms WHERE pid = ?", (pid,)) if n]
    return found


def launch_ordinal(db, launch, python_regex):
    """(N, pass-0 kernel row (correlation_id, start_ns, end_ns), reruns seen, notes).

    See the module's docstring: launches of the names python_regex matches,
    in correlation-id order, re-runs left out; the replayed launch is the
    last row of its own name on its device starting no later than the end
    of pass 0."""
    pid, device = launch["pid"], launch["device"]
    drops = count_drops(db, pid)
    if drops:
        raise Failed(f"kernel records missing in process {pid} ({drops}): launches cannot be "
                     "counted from the kernels table")
    pattern = re.compile(python_regex, re.DOTALL)
    names = {i: n for i, n in db.execute("SELECT id, name FROM names") if pattern.search(n)}
    if not names:
        raise Failed(f"no kernel name matches {python_regex}")
    marks = ",".join("?" * len(names))
    rows = db.execute(
        f"SELECT correlation_id, name_id, device, start_ns, end_ns FROM kernels WHERE pid = ? "
        f"AND graph_id = 0 AND name_id IN ({marks}) ORDER BY correlation_id",
        (pid, *names)).fetchall()
    windows = rerun_windows(db, pid)

    def rerun(row):
        return any(row[2] == d and after < row[3] <= until for d, after, until in windows)

    kept = [r for r in rows if not rerun(r)]
    reruns = len(rows) - len(kept)
    pass0 = db.execute("SELECT start_ns, end_ns FROM replay_passes WHERE pid = ? AND "
                       "launch_id = ? AND pass = 0", (pid, launch["launch_id"])).fetchone()
    limit = pass0[1] if pass0 else launch["end_ns"]
    own = [(place, r) for place, r in enumerate(kept, 1)
           if same_kernel(names[r[1]], launch["kernel"]) and r[2] == device and r[3] <= limit]
    if not own:
        raise Failed(f"no kernel row of {launch['kernel'][:80]} on device {device} started "
                     f"before the replay's pass 0 ended")
    place, row = max(own, key=lambda item: (item[1][3], item[1][0]))
    notes = []
    if row[3] < launch["begin_ns"]:
        notes.append("its kernel row starts %.3f ms before the replay took the launch"
                     % ((launch["begin_ns"] - row[3]) / 1e6))
    own_reruns = sum(1 for r in rows if r[2] == device and same_kernel(names[r[1]], launch["kernel"])
                     and (pass0[1] if pass0 else launch["begin_ns"]) < r[3] <= launch["end_ns"])
    if own_reruns not in (0, launch["passes_run"] - 1):
        notes.append(f"{own_reruns} re-run rows in the replay, not passes_run - 1 = "
                     f"{launch['passes_run'] - 1}")
    return place, (row[0], row[3], row[4]), reruns, notes


def short(name, width=70):
    return name if len(name) <= width else name[:width // 2 - 2] + "..." + name[-(width // 2 - 1):]


def ms(ns):
    return "n/a" if ns is None else "%.1f" % (ns / 1e6)


# ---- subcommands ----

def check_slowphase(session, reference, target):
    failures = []
    db = connect(session)
    rows = triggered_rows(db)
    launches = db.execute("SELECT launch_id, pid, declined, reason FROM replay_launches "
                          "ORDER BY pid, launch_id").fetchall()
    replayed = [r for r in rows if r["status"] == "replayed"]
    if len(rows) != 1 or len(replayed) != 1:
        failures.append("%d triggered_replays rows (%d replayed), not exactly 1 replayed: %s"
                        % (len(rows), len(replayed),
                           [(r["action"], r["status"], r["reason"]) for r in rows]))
    undeclined = [r for r in launches if not r[2]]
    if len(launches) != 1 or len(undeclined) != 1:
        failures.append(f"{len(launches)} replay_launches rows ({len(undeclined)} not declined), "
                        f"not exactly 1 replayed: {launches}")
    times = read_times(session)
    phase = times["phase"]
    hash_b, hash_a = read_hash(os.path.join(session, "out.sha256")), read_hash(reference)
    if hash_b != hash_a:
        failures.append(f"outputs differ from the untraced run: {hash_b[:16]} != {hash_a[:16]}")
    result = None
    if replayed and undeclined:
        row = replayed[0]
        launch = launch_row(db, row["launch_id"], row["pid"]) if row["launch_id"] else None
        if row["action"] != "replay":
            failures.append(f"the row's action is {row['action']!r}, not 'replay'")
        if launch is None:
            failures.append(f"no replay_launches row has the row's launch_id {row['launch_id']}")
        else:
            metrics = metrics_of(db, launch["pid"], launch["launch_id"])
            duration = metrics.get("gpu__time_duration.sum")
            step = step_of(times, launch["begin_ns"])
            in_phase = phase["start_ns"] <= launch["begin_ns"] <= phase["end_ns"]
            print("  replayed %s (launch %d, %d passes, %s ms, step %s, %s the phase; "
                  "gpu__time_duration %s ms)"
                  % (short(launch["kernel"]), launch["launch_id"], launch["passes_run"],
                     ms(launch["end_ns"] - launch["begin_ns"]), step,
                     "inside" if in_phase else "OUTSIDE", ms(duration)))
            print("  rule %s %s %.4g, reading %.4g; fired->taken %s ms, fired->done %s ms; why: %s"
                  % (row["rule_id"], row["comparison"], row["threshold"] or 0,
                     row["observed_value"] or 0,
                     ms(row["taken_ns"] - row["fired_ns"]) if row["taken_ns"] else "n/a",
                     ms(row["done_ns"] - row["fired_ns"]), (row["why"] or "")[:160]))
            if launch["declined"]:
                failures.append(f"the triggered launch was declined: {launch['reason']}")
            if not (same_kernel(row["target"], launch["kernel"]) or
                    same_kernel(launch["kernel"], row["target"])):
                failures.append(f"the row names {short(row['target'])}, the replay "
                                f"{short(launch['kernel'])}")
            if not in_phase:
                failures.append("the replay was taken outside the slow phase")
            if duration is None or (isinstance(duration, float) and math.isnan(duration)) \
                    or duration < SLOW_NS:
                failures.append(f"the replayed kernel is not the slow one: gpu__time_duration "
                                f"{duration}")
            missing = [m for m, v in metrics.items() if v is None or
                       (isinstance(v, float) and math.isnan(v))]
            if not metrics or missing:
                failures.append(f"metrics missing: {missing} (of {len(metrics)})")
            try:
                regex, python_regex, exact = kernel_regex(launch["kernel"])
                ordinal, pass0, reruns, notes = launch_ordinal(db, launch, python_regex)
                print(f"  launch {ordinal} of {'the name' if exact else 'the regex'} "
                      f"(correlation {pass0[0]}; {reruns} re-run rows left out"
                      f"{'; ' + '; '.join(notes) if notes else ''}); flare's launch_index "
                      f"{launch['launch_index']} counts from when replay was configured")
                result = {"kernel": launch["kernel"], "regex": regex, "launch": ordinal,
                          "step": step, "pid": launch["pid"], "exact": exact,
                          "session": os.path.abspath(session)}
            except Failed as error:
                failures.append(str(error))
    if not failures:
        print(f"  outputs equal to the untraced run ({hash_a[:16]})")
    for failure in failures:
        print(f"FAIL: {failure}")
    if target and result and not failures:
        with open(target, "w") as handle:
            json.dump(result, handle)
    return 1 if failures else 0


def check_compare(session, replay_session, reference, launch_n, sol, tolerance):
    failures = []
    target_db, replay_db = connect(session), connect(replay_session)
    rows = [r for r in triggered_rows(target_db) if r["status"] == "replayed"]
    if len(rows) != 1:
        raise Failed(f"{session}: {len(rows)} replayed triggered rows, not 1")
    triggered = launch_row(target_db, rows[0]["launch_id"], rows[0]["pid"])
    if triggered is None:
        raise Failed(f"{session}: no replay_launches row has launch_id {rows[0]['launch_id']}")
    launches = replay_db.execute("SELECT launch_id, pid, declined FROM replay_launches").fetchall()
    if len(launches) != 1 or launches[0][2]:
        raise Failed(f"flare replay: {len(launches)} replay_launches rows, not 1 replayed: "
                     f"{launches}")
    replayed = launch_row(replay_db, launches[0][0], launches[0][1])
    hash_c, hash_a = read_hash(os.path.join(replay_session, "out.sha256")), read_hash(reference)
    if hash_c != hash_a:
        failures.append(f"flare replay's outputs differ from the untraced run: {hash_c[:16]} != "
                        f"{hash_a[:16]}")
    if replayed["kernel"] != triggered["kernel"]:
        failures.append(f"flare replay replayed {short(replayed['kernel'])}, the rule "
                        f"{short(triggered['kernel'])}")
    regex, python_regex, exact = kernel_regex(triggered["kernel"])
    if exact and replayed["launch_index"] + 1 != launch_n:
        failures.append(f"flare replay's launch_index + 1 is {replayed['launch_index'] + 1}, "
                        f"not {launch_n}")
    try:
        ordinal = launch_ordinal(replay_db, replayed, python_regex)[0]
        if ordinal != launch_n:
            failures.append(f"the kernels table of the flare replay puts its launch at {ordinal}, "
                            f"not {launch_n}")
    except Failed as error:
        failures.append(str(error))
    step_t = step_of(read_times(session), triggered["begin_ns"])
    step_r = step_of(read_times(replay_session), replayed["begin_ns"])
    if step_t is None or step_t != step_r:
        failures.append(f"the replays ran in different steps: triggered {step_t}, "
                        f"flare replay {step_r}")
    print(f"  flare replay --launch {launch_n}: {short(replayed['kernel'])}, step {step_r}, "
          f"{replayed['passes_run']} passes, {ms(replayed['end_ns'] - replayed['begin_ns'])} ms; "
          f"outputs {'equal to' if hash_c == hash_a else 'DIFFERENT from'} the untraced run")
    values_t = metrics_of(target_db, triggered["pid"], triggered["launch_id"])
    values_r = metrics_of(replay_db, replayed["pid"], replayed["launch_id"])
    judged = set(sol) if sol else set(values_t) | set(values_r)
    print(f"  {'metric':<64} {'triggered':>12} {'flare replay':>12} {'diff':>8}")
    for metric in list(values_t) + [m for m in values_r if m not in values_t]:
        a, b = values_t.get(metric), values_r.get(metric)
        bad = a is None or b is None or any(isinstance(v, float) and math.isnan(v) for v in (a, b))
        if bad:
            difference = None
        elif a == b:
            difference = 0.0  # 0 in both included
        else:
            difference = abs(a - b) / max(abs(a), abs(b)) * 100
        over = metric in judged and (bad or difference > tolerance)
        print(f"  {metric:<64} {fmt(a, metric in values_t):>12} {fmt(b, metric in values_r):>12} "
              f"{'n/a' if difference is None else '%.2f%%' % difference:>8}"
              f"{(' <-- no value' if bad else ' <-- over %g%%' % tolerance) if over else ''}")
        if over:
            failures.append(f"{metric}: {fmt(a, metric in values_t)} against "
                            f"{fmt(b, metric in values_r)}" +
                            ("" if difference is None else f" ({difference:.2f}%)"))
    for metric in sorted(judged - set(values_t) - set(values_r)):
        failures.append(f"{metric}: in neither replay")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


def fmt(value, present=True):
    if not present:
        return "missing"
    if value is None:
        return "NULL"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return "%.6g" % value


def check_range(session, reference):
    failures = []
    db = connect(session)
    rows = triggered_rows(db)
    if len(rows) != 1 or rows[0]["status"] != "replayed" or rows[0]["action"] != "range":
        failures.append("triggered_replays rows %s, not one replayed range"
                        % [(r["action"], r["target"], r["status"], r["reason"]) for r in rows])
    hash_b, hash_a = read_hash(os.path.join(session, "out.sha256")), read_hash(reference)
    if hash_b != hash_a:
        failures.append(f"outputs differ from the untraced run: {hash_b[:16]} != {hash_a[:16]}")
    if not has_table(db, "replay_spans"):
        failures.append("no replay_spans table")
    spans = db.execute("SELECT pid, span_id, name, occurrence, kernels, copies, passes_run, "
                       "declined, reason, begin_ns, end_ns FROM replay_spans").fetchall() \
        if has_table(db, "replay_spans") else []
    on_own = db.execute("SELECT COUNT(*) FROM replay_launches WHERE span_id IS NULL").fetchone()[0]
    if on_own:
        failures.append(f"{on_own} launches replayed on their own in a range run")
    if len(spans) != 1:
        failures.append(f"{len(spans)} replay_spans rows, not 1")
    if rows and spans:
        row = rows[0]
        span = next((s for s in spans if s[0] == row["pid"] and s[1] == row["launch_id"]), None)
        if span is None:
            failures.append(f"no replay_spans row has span_id {row['launch_id']} (the row's "
                            f"launch_id)")
        else:
            pid, span_id, name, occurrence, kernels, copies, passes, declined, reason, begin, \
                end = span
            times = read_times(session)
            phase = times["phase"]
            kernel_rows = db.execute(
                "SELECT launch_id, kernel FROM replay_launches WHERE pid = ? AND span_id = ?",
                (pid, span_id)).fetchall()
            values = db.execute(
                "SELECT COUNT(*), COUNT(m.value) FROM replay_launches l JOIN replay_metrics m "
                "ON m.pid = l.pid AND m.launch_id = l.launch_id WHERE l.pid = ? AND "
                "l.span_id = ?", (pid, span_id)).fetchone()
            longest = db.execute(
                "SELECT MAX(m.value) FROM replay_launches l JOIN replay_metrics m ON "
                "m.pid = l.pid AND m.launch_id = l.launch_id WHERE l.pid = ? AND l.span_id = ? "
                "AND m.metric = 'gpu__time_duration.sum'", (pid, span_id)).fetchone()[0]
            in_phase = phase["start_ns"] <= begin <= phase["end_ns"]
            print(f"  range {name!r} occurrence {occurrence} (step {step_of(times, begin)}, "
                  f"{'inside' if in_phase else 'outside'} the phase): {kernels} kernels, "
                  f"{copies} copies, {passes} passes, {ms(end - begin)} ms, "
                  f"{values[1]} of {values[0]} values; longest kernel {ms(longest)} ms")
            print("  fired->taken %s ms, fired->done %s ms; why: %s"
                  % (ms(row["taken_ns"] - row["fired_ns"]) if row["taken_ns"] else "n/a",
                     ms(row["done_ns"] - row["fired_ns"]), (row["why"] or "")[:160]))
            if row["target"] != "step" or name != "step":
                failures.append(f"the range is {row['target']!r} / {name!r}, not 'step'")
            if declined:
                failures.append(f"the span was declined: {reason}")
            if not kernels or kernels <= 0:
                failures.append("the span recorded no kernels")
            if kernels and not values[1]:
                failures.append("the span's kernels have no metric values")
            if len(kernel_rows) != kernels:
                failures.append(f"{len(kernel_rows)} replay_launches rows for the span's "
                                f"{kernels} kernels")
    if not failures:
        print(f"  outputs equal to the untraced run ({hash_a[:16]})")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


def latency(sessions):
    by_action, others, failures = {}, [], []
    for session in sessions:
        try:
            rows = triggered_rows(connect(session))
        except (Failed, sqlite3.Error) as error:
            failures.append(f"{session}: {error}")
            continue
        for row in rows:
            if row["status"] != "replayed":
                others.append((os.path.basename(session), row["status"], row["reason"]))
                continue
            entry = by_action.setdefault(row["action"], {"done": [], "taken": []})
            entry["done"].append(row["done_ns"] - row["fired_ns"])
            if row["taken_ns"]:
                entry["taken"].append(row["taken_ns"] - row["fired_ns"])
    print(f"latency of triggered replays over {len(sessions)} sessions (ms, median / worst):")
    for action, entry in sorted(by_action.items()):
        def pair(values):
            return ("%s / %s" % (ms(statistics.median(values)), ms(max(values)))) if values \
                else "none"
        print(f"  action {action:<6} ({len(entry['done'])} replayed): fired->taken "
              f"{pair(entry['taken'])}; fired->done (metrics queued) {pair(entry['done'])}")
    if others:
        print(f"  not replayed: {others}")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


# ---- self-test ----

NAMES = [
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_"
    "alignc4_execute_kernel_trt",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, "
    "std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, "
    "std::array<char*, 2ul>)",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"
    "(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)",
    "a.b*c+d?e(f)g[h]i{1,2}j|k^l$m\\n&o,p:q r",
    "operator()(float&, float const&) [clone .kd] {lambda(int)#1}",
    "k<" + "float*, " * 24 + "int>(" + "a.b, " * 6 + ")",  # under 255 bytes, not escaped
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t"
    "<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)"
    "::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()"
    "(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)",
]


def selftest_regex():
    problems, libc_checked = [], 0
    cut = NAMES[-1][:NAME_MAX_BYTES]  # as the launch path holds the long name
    ere, python_regex, exact = kernel_regex(cut)
    if exact or not re.search(python_regex, NAMES[-1]) or not re.search(python_regex, cut) \
            or not same_kernel(NAMES[-1], cut) or same_kernel(NAMES[-1], cut[:-1]):
        problems.append(f"a cut name: {ere[:60]}...")
    elif libc_regex_match(ere, cut) is False or libc_regex_match(ere, NAMES[-1]) is False:
        problems.append(f"regexec: {ere[:60]}... misses the cut or the whole name")
    for name in NAMES:
        ere, python_regex, exact = kernel_regex(name)
        others = [name + "x", "x" + name, name[:-1], name.replace("(", "x", 1),
                  name.replace("a", "b", 1)]
        others = [o for o in others if o != name]
        if len(ere.encode()) > REGEX_MAX_BYTES:
            problems.append(f"{ere[:40]}...: {len(ere.encode())} bytes")
        if not re.search(python_regex, name, re.DOTALL):
            problems.append(f"python {python_regex[:60]} misses its name")
        try:
            found = libc_regex_match(ere, name)
        except ValueError as error:
            problems.append(str(error))
            continue
        if found is None:
            continue
        libc_checked += 1
        if not found:
            problems.append(f"regexec: {ere[:60]}... misses its name")
        for other in others:
            expected = bool(re.search(python_regex, other, re.DOTALL))
            if exact and expected:
                problems.append(f"python: {python_regex[:60]} matches {other[:60]}")
            if libc_regex_match(ere, other) != expected:
                problems.append(f"regexec and Python disagree on {ere[:50]} / {other[:50]}")
    return problems, libc_checked


def make_session(directory, kernels, launches, passes, metrics, triggered, spans=(),
                 schema=10, drops=(), names=None):
    """A fake session with the columns these checks read."""
    os.makedirs(directory, exist_ok=True)
    db = sqlite3.connect(os.path.join(directory, "session.db"))
    db.executescript(
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
        "CREATE TABLE names(id INTEGER PRIMARY KEY, name TEXT UNIQUE);"
        "CREATE TABLE kernels(pid, device, stream_id, correlation_id, name_id, start_ns, end_ns,"
        " graph_id);"
        "CREATE TABLE drops(pid, source, detail, count);"
        "CREATE TABLE storms(pid, device, start_ns, end_ns, untimed_launches, still_open);"
        "CREATE TABLE replay_launches(pid, launch_id, device, kernel, launch_index, passes_run,"
        " declined, reason, begin_ns, end_ns, span_id);"
        "CREATE TABLE replay_passes(pid, launch_id, pass, start_ns, end_ns);"
        "CREATE TABLE replay_metrics(pid, launch_id, metric, value);"
        "CREATE TABLE replay_spans(pid, span_id, name, occurrence, device, kernels, copies,"
        " passes_run, declined, reason, begin_ns, end_ns);")
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (schema,))
    if schema >= 10:
        db.execute("CREATE TABLE triggered_replays(pid, id, rule_id, rule_text, comparison,"
                   " threshold, observed_value, action, target, why, fired_ns, taken_ns, done_ns,"
                   " status, reason, launch_id)")
        db.executemany("INSERT INTO triggered_replays VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       triggered)
    names = names or sorted({k[1] for k in kernels})
    db.executemany("INSERT INTO names(id, name) VALUES (?, ?)", list(enumerate(names, 1)))
    ids = {n: i for i, n in enumerate(names, 1)}
    db.executemany("INSERT INTO kernels VALUES (7, 0, 1, ?, ?, ?, ?, 0)",
                   [(c, ids[n], s, e) for c, n, s, e in kernels])
    db.executemany("INSERT INTO replay_launches VALUES (?,?,?,?,?,?,?,?,?,?,?)", launches)
    db.executemany("INSERT INTO replay_passes VALUES (?,?,?,?,?)", passes)
    db.executemany("INSERT INTO replay_metrics VALUES (?,?,?,?)", metrics)
    db.executemany("INSERT INTO replay_spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", spans)
    db.executemany("INSERT INTO drops VALUES (?,?,?,?)", drops)
    db.commit()
    db.close()


def fake_program(directory, digest, steps, replay_at=None):
    """out.sha256 and times.json as slow_phase.py writes them: step k spans
    [k s, k s + 900 ms]; the phase is steps 2 to 5."""
    step_ns = [[k * 1_000_000_000, k * 1_000_000_000 + 900_000_000] for k in range(steps)]
    with open(os.path.join(directory, "out.sha256"), "w") as handle:
        handle.write(digest + "\n")
    with open(os.path.join(directory, "times.json"), "w") as handle:
        json.dump({"steps": steps, "step_ns": step_ns, "sha256": digest,
                   "phase": {"first_step": 2, "last_step": 5, "start_ns": step_ns[2][0],
                             "end_ns": step_ns[5][1]}}, handle)


SOL = ["gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
       "dram__bytes_read.sum"]


def fake_slow_run(directory, slow, replay_step, nth_in_step, passes=4, digest="a" * 64,
                  replay_metric_scale=1.0, flare_replay=False, declined=0, triggered_extra=(),
                  schema=10, storm=False):
    """A slow_phase-like run: per step a small kernel, and in the phase 2
    launches of `slow` (21.6 ms each), with one of them replayed (pass 0
    plus passes - 1 re-runs recorded as kernels); a kernel submitted before
    the replay took the gate starts after begin_ns (the queued sibling)."""
    kernels, correlation = [], 0
    launch, passes_rows, replayed_place = None, [], None
    slow_seen = 0
    for step in range(8):
        base = step * 1_000_000_000
        correlation += 1
        kernels.append((correlation, "small", base + 1_000_000, base + 1_100_000))
        if not 2 <= step <= 5:
            continue
        for index in range(2):
            correlation += 1
            slow_seen += 1
            start = base + 2_000_000 + index * 22_000_000
            if launch is not None and launch[9] > start:  # held at the gate meanwhile
                start = launch[9] + 1_000_000
            if step == replay_step and index == nth_in_step:
                # The second launch of a step is taken while its sibling is
                # still queued: the sibling starts after begin_ns.
                begin = start - 23_000_000 if index else start - 100_000
                pass0_end = start + 21_700_000
                end = pass0_end + passes * 30_000_000
                launch = (7, 100, 0, slow, slow_seen - 1 if flare_replay else 0, passes, declined,
                          "", begin, end, None)
                passes_rows.append((7, 100, 0, start, pass0_end))
                kernels.append((correlation, slow, start, start + 21_600_000))
                replayed_place = slow_seen
                for rerun in range(1, passes):
                    correlation += 1
                    rerun_start = pass0_end + rerun * 30_000_000 - 25_000_000
                    passes_rows.append((7, 100, rerun, rerun_start - 10, rerun_start + 21_700_000))
                    kernels.append((correlation, slow, rerun_start, rerun_start + 21_600_000))
            else:
                kernels.append((correlation, slow, start, start + 21_600_000))
    metrics = [(7, 100, m, v * replay_metric_scale) for m, v in
               zip(SOL, (21_600_000.0, 71.5, 4.62e9))]
    metrics.append((7, 100, "sm__warps_active.avg.pct_of_peak_sustained_active", 0.0))
    triggered = [] if flare_replay else [
        (7, 1, 1, "kernel_duration_p99 > 10ms for 200ms over 1s action replay", ">", 1e7,
         2.16e7, "replay", slow, "its kernel furthest past the threshold", launch[8] - 5_000_000,
         launch[8], launch[9] + 3_000_000, "replayed", "", 100)]
    make_session(directory, kernels, [launch], passes_rows, metrics,
                 triggered + list(triggered_extra), schema=schema,
                 drops=[(7, "storm_guard", "kernel launches counted but not timed", 5)]
                 if storm else ())
    fake_program(directory, digest, 8)
    return replayed_place


def quietly(function, *args):
    """function(*args) with its printing kept: (result, printed text)."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        try:
            result = function(*args)
        except Failed as error:
            result = error
    return result, captured.getvalue()


def selftest():
    problems, checked = selftest_regex()
    print(f"selftest: kernel-name regexes ({checked} of {len(NAMES)} checked with regcomp)")
    for name in (NAMES[-2], NAMES[-1]):
        ere, _, exact = kernel_regex(name)
        print(f"  {len(name)}-byte name -> {len(ere.encode())}-byte regex "
              f"{ere[:24]}...{ere[-16:]} ({'exact' if exact else 'not exact'})")
    slow = NAMES[2]
    with tempfile.TemporaryDirectory() as temp:
        reference = os.path.join(temp, "reference.sha256")
        with open(reference, "w") as handle:
            handle.write("a" * 64 + "\n")
        cases, places = [], {}

        def case(label, expected, function, *args, extra=None):
            result, text = quietly(function, *args)
            ok = result == expected and (extra is None or extra())
            cases.append((label, ok, f"got {result!r}, expected {expected!r}:\n{text}"))

        for step, nth in ((3, 1), (4, 0), (5, 1)):
            run = os.path.join(temp, f"run-{step}-{nth}")
            place = places[step, nth] = fake_slow_run(run, slow, step, nth)
            target = os.path.join(run, "target.json")
            case(f"slowphase step {step} launch {nth}", 0, check_slowphase, run, reference,
                 target, extra=lambda: json.load(open(target))["launch"] == place)
            replay = os.path.join(temp, f"replay-{step}-{nth}")
            fake_slow_run(replay, slow, step, nth, flare_replay=True, replay_metric_scale=1.01)
            case(f"compare step {step} launch {nth}", 0, check_compare, run, replay, reference,
                 place, SOL, 2.0)
        for label, step, kwargs in (("metrics 3% apart", 3, {"replay_metric_scale": 1.03}),
                                    ("another step", 4, {}),
                                    ("other outputs", 3, {"digest": "b" * 64})):
            replay = os.path.join(temp, "replay-" + label.replace(" ", "-"))
            fake_slow_run(replay, slow, step, 1, flare_replay=True, **kwargs)
            case(f"compare fails: {label}", 1, check_compare, os.path.join(temp, "run-3-1"),
                 replay, reference, places[3, 1], SOL, 2.0)
        for label, kwargs in (("declined", {"declined": 1}), ("other outputs", {"digest": "c" * 64}),
                              ("outside the phase", {}), ("a storm", {"storm": True}),
                              ("two rows", {"triggered_extra": [
                                  (7, 2, 1, "r", ">", 1.0, 2.0, "replay", "x", "", 1, None, 2,
                                   "cancelled", "not launched", None)]})):
            run = os.path.join(temp, "bad-" + label.replace(" ", "-"))
            fake_slow_run(run, slow, 3, 1, **kwargs)
            if label == "outside the phase":  # the phase begins a step after the replay
                times = json.load(open(os.path.join(run, "times.json")))
                times["phase"]["start_ns"] = times["step_ns"][4][0]
                json.dump(times, open(os.path.join(run, "times.json"), "w"))
            target = os.path.join(run, "target.json")
            case(f"slowphase fails: {label}", 1, check_slowphase, run, reference, target,
                 extra=lambda: not os.path.exists(target))
        old = os.path.join(temp, "old-schema")
        fake_slow_run(old, slow, 3, 1, schema=9)
        result, _ = quietly(check_slowphase, old, reference, None)
        cases.append(("schema 9 refused", isinstance(result, Failed) and
                      "triggered_replays" in str(result), repr(result)))
        # A range run: one span of 3 kernels, in step 3 (the phase).
        span_run = os.path.join(temp, "range")
        span_kernels = [(1, "small", 100, 200), (2, slow, 300, 400), (3, slow, 500, 600)]
        begin, end = 3_010_000_000, 3_800_000_000
        for directory, declined in ((span_run, 0), (span_run + "-declined", 1)):
            make_session(directory, span_kernels,
                         [(7, 11, 0, "small", 0, 9, 0, "", begin, end, 10),
                          (7, 12, 0, slow, 0, 9, 0, "", begin, end, 10),
                          (7, 13, 0, slow, 1, 9, 0, "", begin, end, 10)],
                         [], [(7, 12, "gpu__time_duration.sum", 2.16e7)],
                         [(7, 1, 1, "r", ">", 1e7, 2e7, "range", "step", "range step",
                           begin - 60_000_000, begin, end + 5_000_000, "replayed", "", 10)],
                         spans=[(7, 10, "step", 4, 0, 3, 0, 9, declined,
                                 "memory allocated inside the span" if declined else "",
                                 begin, end)])
            fake_program(directory, "a" * 64, 8)
        case("range", 0, check_range, span_run, reference)
        case("range fails: declined", 1, check_range, span_run + "-declined", reference)
        case("latency", 0, latency, [os.path.join(temp, "run-3-1"), span_run])
        result, text = quietly(latency, [os.path.join(temp, "run-3-1"), span_run])
        cases.append(("latency numbers", "fired->done (metrics queued) 855.0 / 855.0" in text
                      and "fired->taken 5.0 / 5.0" in text, text))
    for label, ok, detail in cases:
        if not ok:
            problems.append(f"{label}: {detail}")
    print(f"selftest: {len(cases)} fake-session cases, {len(problems)} problems")
    for problem in problems:
        print(f"FAIL: selftest: {problem}")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1][len("usage:"):].strip())
    parser.add_argument("command", choices=("slowphase", "compare", "range", "latency",
                                            "selftest"))
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--target")
    parser.add_argument("--launch", type=int)
    parser.add_argument("--sol", default="")
    parser.add_argument("--tolerance", type=float, default=2.0)
    args = parser.parse_args()
    wanted = {"slowphase": 2, "compare": 3, "range": 2, "selftest": 0}
    if args.command in wanted and len(args.paths) != wanted[args.command] or \
            args.command == "latency" and not args.paths or \
            args.command == "compare" and args.launch is None:
        sys.exit(__doc__)
    try:
        if args.command == "slowphase":
            return check_slowphase(*args.paths, args.target)
        if args.command == "compare":
            sol = [m for m in args.sol.split(",") if m]
            return check_compare(*args.paths, args.launch, sol, args.tolerance)
        if args.command == "range":
            return check_range(*args.paths)
        if args.command == "latency":
            return latency(args.paths)
        return selftest()
    except (Failed, sqlite3.Error) as error:
        print(f"FAIL: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
