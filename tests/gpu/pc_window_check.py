#!/usr/bin/env python3
"""pc_window_check.py: checks a session of tests/gpu/pc_hot_loop.cu traced with a PC-sampling
deep window (`flare trace --deep-after ... --deep-for ... --deep-engine pc`; scripts/
gpu-check-pcwindow.sh runs it on the H200). Issue 26: "a CUDA C kernel with a known hot loop
(a dependent chain of global loads in one function, cheap arithmetic elsewhere) opens a window
with `pc`: the top stall reason is the memory-dependency one, and >= 80% of the samples land on
the hot loop".

usage: pc_window_check.py SESSION_DIR
       pc_window_check.py --self-test

Reads the session with flare's own reader (python/flare/reader.py, loaded from this checkout,
lists of dicts, no pandas) and fails when:
  * no deep window ran (windows.opened_ns set), or a window that ran did not run the PC
    sampling engine: its `engine` is not a PC engine (a name with the word `pc`:
    `sim-pc-sampling`, the CUDA one), its `engine_status` is not `disarmed`, or its
    `engine_reason` says it fell back (printed: `asked for pc: ...; fell back to pm`);
  * a PC window has no rows in pc_samples(), or a row whose first_ns..last_ns reaches outside
    the window's opened_ns..closed_ns;
  * a stall reason still carries CUPTI's prefix `smsp__pcsamp_warps_issue_stalled_` (flare
    stores the bare name: docs/schema.md);
  * hot_chain or cheap_math has no samples;
  * hot_chain's top stall reason is not long_scoreboard (long_scoreboard and
    long_scoreboard_not_issued are counted as one; it must have strictly more samples than
    any other reason, `selected` included);
  * fewer than 80% of hot_chain's samples lie in its densest 256 bytes of code: the
    most samples any [offset, offset + 256) holds, sliding over its sorted pc_offsets (the
    loop is about six 16-byte instructions);
  * cheap_math's top stall reason is long_scoreboard (counted as above; a tie counts);
  * hot_chain's samples have no source lines (v_pc_lines, schema 12: the program is built with
    nvcc -lineinfo), or fewer than 80% of them lie on the hot loop's lines of
    tests/gpu/pc_hot_loop.cu (the line marked `// HOT LOOP` and the next; read from the file).
Functions are matched by name as flare stores it: `hot_chain` (extern "C"), or a mangled or
signature form of it. Prints samples per function, the top 5 reasons of each, hot_chain's top
8 offsets with shares, the densest span, drops of source pc_sampling, and one line
`pc_samples_total N` per window and for the session. Exit 0 when every check passed, 1 when
one failed (or the session cannot be read), 2 for a usage error.

--self-test builds synthetic sessions in a temporary directory (the schema from
src/store/store_schema.c and the views from src/store/store_views.c, both read by
tests/gpu/pm_accuracy.py's c_ddl_statements; no GPU, no flare binary) and asserts that the checker
passes a good one and fails each bad one for its reason.

Must never write to a session (the reader opens it read-only) or anywhere but its own
temporary directory (the self-test, removed at the end).
"""
import collections
import contextlib
import importlib.util
import io
import os
import re
import shutil
import sqlite3
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HOT, CHEAP = "hot_chain", "cheap_math"
LONG_SCOREBOARD = "long_scoreboard"
LONG_SCOREBOARD_NAMES = ("long_scoreboard", "long_scoreboard_not_issued")
CUPTI_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
SPAN_BYTES = 256
MIN_SHARE = 0.80
HOT_SOURCE = os.path.join(HERE, "pc_hot_loop.cu")


def hot_loop_lines(path=HOT_SOURCE):
    """The line numbers of hot_chain's loop in pc_hot_loop.cu: the `for` marked
    `// HOT LOOP` and its one-statement body on the next line."""
    with open(path) as source:
        for number, text in enumerate(source, 1):
            if "// HOT LOOP" in text and "for (" in text:
                return {number, number + 1}
    raise ValueError(f"no line marked // HOT LOOP in {path}")


def load_reader():
    """python/flare/reader.py of this checkout, as a module of its own (the package's
    __init__ needs the built extension; the reader alone does not)."""
    path = os.path.join(ROOT, "python", "flare", "reader.py")
    spec = importlib.util.spec_from_file_location("flare_reader_for_pc_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def function_key(name):
    """'hot_chain', 'void hot_chain(unsigned const*, ...)' or '_Z9hot_chainPKjjiPj' ->
    'hot_chain' (the same for cheap_math); any other name as it is."""
    match = (re.match(r"\s*(?:void\s+)?(hot_chain|cheap_math)\s*(?:\(|$)", name or "") or
             re.match(r"_Z\d+(hot_chain|cheap_math)", name or ""))
    return match.group(1) if match else name


def is_pc_engine(engine):
    """Whether windows.engine names a PC sampling engine ('sim-pc-sampling', 'cuda-pc...')."""
    return re.search(r"(^|[-_])pc([-_]|$)", engine or "") is not None


def reason_group(reason):
    return LONG_SCOREBOARD if reason in LONG_SCOREBOARD_NAMES else reason


def top_reason_is_long_scoreboard(reasons, strictly):
    """reasons: {stall reason: samples}. Whether long_scoreboard (with _not_issued) has more
    samples than every other reason (strictly) or at least as many (not strictly)."""
    grouped = collections.Counter()
    for reason, samples in reasons.items():
        grouped[reason_group(reason)] += samples
    mine = grouped.get(LONG_SCOREBOARD, 0)
    others = max([n for r, n in grouped.items() if r != LONG_SCOREBOARD], default=0)
    if mine == 0:
        return False
    return mine > others if strictly else mine >= others


def densest_span(offsets, span=SPAN_BYTES):
    """offsets: {pc_offset: samples}. The [low, high] of the offsets in the densest
    [o, o + span) starting at a sampled offset, and its samples: (low, high, samples);
    (None, None, 0) when there are none."""
    keys = sorted(offsets)
    best = (None, None, 0)
    total, first = 0, 0
    for offset in keys:
        total += offsets[offset]
        while offset - keys[first] >= span:
            total -= offsets[keys[first]]
            first += 1
        if total > best[2]:
            best = (keys[first], offset, total)
    return best


def share(part, whole):
    return 100.0 * part / whole if whole else 0.0


# ---------------------------------------------------------------------------
# the check


def check_session(path, reader=None):
    """Checks the session at path and prints what it found. Returns the failures, a list
    of sentences (empty when every check passed)."""
    reader = reader or load_reader()
    failures = []

    def fail(message):
        failures.append(message)
        print(f"FAIL: {message}")

    try:
        session = reader.open(path, pandas=False)
    except (reader.SessionError, OSError) as error:
        fail(f"cannot read the session: {error}")
        return failures
    with session:
        windows = session.windows()
        rows = session.pc_samples()
        line_rows = session.pc_lines() if hasattr(session, "pc_lines") else []
        drops = session.sql("SELECT source, detail, SUM(count) AS count FROM drops "
                            "WHERE source LIKE 'pc%' AND count != 0 GROUP BY source, detail")
    print(f"session {path} (schema {session.schema_version})")

    # 1. The windows: every one that ran ran the PC engine.
    pc_windows = []
    for w in windows:
        ran = w["opened_ns"] is not None
        length = (w["closed_ns"] - w["opened_ns"]) / 1e6 if ran and w["closed_ns"] is not None else None
        print(f"window {w['id']} (pid {w['pid']}, {w['token_kind']} '{w['label']}'): "
              f"{'ran %.1f ms' % length if length is not None else 'never opened'}, engine {w['engine']} "
              f"{w['engine_status']}, close {w['close_reason']}, engine_samples {w['engine_samples']}, "
              f"engine_reason '{w['engine_reason']}'")
        if not ran:
            continue
        reason = w["engine_reason"] or ""
        if not is_pc_engine(w["engine"]) or "fell back" in reason:
            fail(f"window {w['id']} ran engine {w['engine']} ({w['engine_status']}), not PC sampling: "
                 f"{reason or 'no engine_reason given'}")
        elif w["engine_status"] != "disarmed":
            fail(f"window {w['id']} ran without its engine {w['engine']} (status {w['engine_status']}): "
                 f"{reason or 'no engine_reason given'}")
        else:
            pc_windows.append(w)
    if not windows:
        fail("no deep window in the session")
    elif not any(w["opened_ns"] is not None for w in windows):
        fail("no deep window ran: " + "; ".join(f"window {w['id']} {w['close_reason']}: {w['engine_reason']}"
                                                for w in windows))

    # 2. Their samples.
    by_window = collections.defaultdict(list)
    for row in rows:
        by_window[(row["pid"], row["window_id"])].append(row)
    pc_rows = []
    for w in pc_windows:
        mine = by_window.get((w["pid"], w["id"]), [])
        total = sum(r["samples"] for r in mine)
        print(f"pc_samples_total {total} window {w['id']} ({len(mine)} rows; the engine reported "
              f"{w['engine_samples']})")
        if not mine:
            fail(f"window {w['id']} ran {w['engine']} but has no PC samples")
        # Every sample inside its window (session 19: a drain round between the close and
        # the disarm stamped samples after closed_ns; the engine clamps them now).
        outside = [r for r in mine if r["first_ns"] < w["opened_ns"] or
                   (w["closed_ns"] is not None and r["last_ns"] > w["closed_ns"])]
        if outside:
            r = outside[0]
            fail(f"window {w['id']} has {len(outside)} PC sample rows outside it (e.g. {r['first_ns']}.."
                 f"{r['last_ns']} against {w['opened_ns']}..{w['closed_ns']})")
        pc_rows.extend(mine)
    for detail in drops:
        print(f"drops {detail['source']} {detail['detail']}: {detail['count']}")

    prefixed = sorted({r["stall_reason"] for r in pc_rows if r["stall_reason"].startswith(CUPTI_PREFIX)})
    if prefixed:
        fail(f"stall reasons stored with CUPTI's prefix {CUPTI_PREFIX}: {', '.join(prefixed[:4])}")
    per_function = collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    hot_offsets = collections.Counter()
    hot_offset_reasons = collections.defaultdict(collections.Counter)
    for r in pc_rows:
        function = function_key(r["function"])
        reason = r["stall_reason"]
        if reason.startswith(CUPTI_PREFIX):
            reason = reason[len(CUPTI_PREFIX):]
        per_function[function] += r["samples"]
        reasons[function][reason] += r["samples"]
        if function == HOT:
            hot_offsets[r["pc_offset"]] += r["samples"]
            hot_offset_reasons[r["pc_offset"]][reason] += r["samples"]
    total = sum(per_function.values())
    print(f"pc_samples_total {total}")

    # 3. What the summary shows.
    if per_function:
        print("samples per function:")
        for function, samples in per_function.most_common():
            print(f"  {samples:10d} {share(samples, total):5.1f}%  {function}")
        for function, samples in per_function.most_common(10):
            top = ", ".join(f"{reason} {share(n, samples):.1f}%" for reason, n in reasons[function].most_common(5))
            lsb = sum(n for reason, n in reasons[function].items() if reason in LONG_SCOREBOARD_NAMES)
            print(f"  {function}: top reasons {top} (long_scoreboard with _not_issued "
                  f"{share(lsb, samples):.1f}%)")
    hot_total = per_function.get(HOT, 0)
    if hot_offsets:
        print(f"{HOT}: top offsets")
        for offset, samples in hot_offsets.most_common(8):
            reason, _ = hot_offset_reasons[offset].most_common(1)[0]
            print(f"  +0x{offset:04x} {samples:10d} {share(samples, hot_total):5.1f}%  (mostly {reason})")
    low, high, in_span = densest_span(hot_offsets)
    if low is not None:
        print(f"{HOT}: densest {SPAN_BYTES}-byte span +0x{low:x}..+0x{high:x} holds {in_span} of {hot_total} "
              f"samples ({share(in_span, hot_total):.1f}%; at least {MIN_SHARE:.0%} needed)")

    hot_lines = hot_loop_lines()
    on_lines = collections.Counter()
    pc_window_ids = {(w["pid"], w["id"]) for w in pc_windows}
    for r in line_rows:
        if (r["pid"], r["window_id"]) in pc_window_ids and function_key(r["function"]) == HOT:
            on_lines[(os.path.basename(r["file"]), r["line"])] += r["samples"]
    with_line = sum(on_lines.values())
    in_loop = sum(n for (file, line), n in on_lines.items()
                  if file == os.path.basename(HOT_SOURCE) and line in hot_lines)
    if on_lines:
        print(f"{HOT}: top source lines ({with_line} of {hot_total} samples have one)")
        for (file, line), samples in on_lines.most_common(6):
            mark = "  <- the hot loop" if file == os.path.basename(HOT_SOURCE) and line in hot_lines else ""
            print(f"  {file}:{line} {samples:10d} {share(samples, hot_total):5.1f}%{mark}")
    print(f"{HOT}: the hot loop's lines {sorted(hot_lines)} hold {in_loop} of {hot_total} samples "
          f"({share(in_loop, hot_total):.1f}%; at least {MIN_SHARE:.0%} needed)")

    # 4. The judgement.
    if pc_windows:
        for function in (HOT, CHEAP):
            if per_function.get(function, 0) == 0:
                fail(f"{function} has no PC samples")
        if hot_total:
            if not top_reason_is_long_scoreboard(reasons[HOT], strictly=True):
                fail(f"{HOT}'s top stall reason is {reasons[HOT].most_common(1)[0][0]}, not long_scoreboard "
                     f"(with long_scoreboard_not_issued)")
            if in_span < MIN_SHARE * hot_total:
                fail(f"only {share(in_span, hot_total):.1f}% of {HOT}'s samples lie in its densest "
                     f"{SPAN_BYTES} bytes (at least {MIN_SHARE:.0%} needed)")
            if with_line == 0:
                fail(f"{HOT}'s samples have no source lines (v_pc_lines is empty for it: built "
                     f"without -lineinfo, or CUPTI's SASS-to-source correlation failed; see the "
                     f"pc_source_lines capability)")
            elif in_loop < MIN_SHARE * hot_total:
                fail(f"only {share(in_loop, hot_total):.1f}% of {HOT}'s samples lie on the hot loop's "
                     f"lines {sorted(hot_lines)} (at least {MIN_SHARE:.0%} needed)")
        if per_function.get(CHEAP, 0) and top_reason_is_long_scoreboard(reasons[CHEAP], strictly=False):
            fail(f"{CHEAP}'s top stall reason is long_scoreboard: an arithmetic loop should not wait on memory")
    return failures


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    failures = check_session(argv[0])
    if failures:
        print(f"pc_window_check: FAIL ({len(failures)}): " + "; ".join(failures))
        return 1
    print("pc_window_check: PASS")
    return 0


# ---------------------------------------------------------------------------
# self-test: synthetic sessions with the real schema


PID = 4242
GOOD_WINDOW = dict(engine="cuda-pc-sampling", engine_status="disarmed", engine_reason="", opened=True)
# (function, pc_offset, stall_reason, samples): the loop at +0x90..+0xd0, as nvcc builds it.
GOOD_HOT = [(HOT, 0x10, "wait", 40), (HOT, 0x90, "selected", 300), (HOT, 0xa0, "long_scoreboard", 6000),
            (HOT, 0xa0, "long_scoreboard_not_issued", 900), (HOT, 0xb0, "wait", 200),
            (HOT, 0xc0, "branch_resolving", 150), (HOT, 0xd0, "no_instructions", 100),
            (HOT, 0x120, "lg_throttle", 60)]
GOOD_CHEAP = [(CHEAP, 0x60, "math_pipe_throttle", 3000), (CHEAP, 0x70, "wait", 2500),
              (CHEAP, 0x80, "selected", 1500), (CHEAP, 0x100, "long_scoreboard", 30)]


def good_line_of(function, offset):
    """The source line a -lineinfo build gives: hot_chain's loop (+0x90..+0xd0) on the
    hot loop's lines, the rest of it and cheap_math elsewhere in the file."""
    first = min(hot_loop_lines())
    if function_key(function) == HOT:
        return ("/work/tests/gpu/pc_hot_loop.cu",
                first + (1 if offset == 0xa0 else 0) if 0x90 <= offset <= 0xd0 else first + 3)
    return ("/work/tests/gpu/pc_hot_loop.cu", first + 12)


def make_session(directory, name, statements, windows, samples, line_of=good_line_of):
    """A session directory name under directory: the schema, windows (dicts of GOOD_WINDOW's
    keys, ids from 1) and samples ((window_id, function, pc_offset, reason, samples[, last_ns])), as
    the store writes them (functions interned in names), each instruction on the line
    line_of(function, offset) gives ((file, line), or None for none). Returns its path."""
    path = os.path.join(directory, name)
    os.makedirs(path)
    db = sqlite3.connect(os.path.join(path, "session.db"))
    db.execute("PRAGMA synchronous = OFF")  # a scratch file: no fsync per statement
    for statement in statements:
        db.execute(statement)
    for index, w in enumerate(windows, 1):
        opened = 1_500_000_000 if w["opened"] else None
        db.execute("INSERT INTO windows (pid, id, token_kind, label, max_duration_ns, max_launches, requested_ns, "
                   "opened_ns, closed_ns, close_reason, launches, engine, engine_status, engine_reason, "
                   "engine_samples) VALUES (?, ?, 'scheduled', 'deep-after 1500ms for 500ms', 500000000, 0, "
                   "1500000000, ?, 2000000000, ?, 90, ?, ?, ?, ?)",
                   (PID, index, opened, "duration" if w["opened"] else "refused", w["engine"],
                    w["engine_status"], w["engine_reason"],
                    sum(s[4] for s in samples if s[0] == index)))
    for window_id, function, offset, reason, count, *last in samples:
        db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (function,))
        db.execute("INSERT INTO pc_samples (pid, window_id, device, name_id, pc_offset, stall_reason, samples, "
                   "first_ns, last_ns) SELECT ?, ?, 0, id, ?, ?, ?, 1500100000, ? FROM names "
                   "WHERE name = ?", (PID, window_id, offset, reason, count, last[0] if last else 1999900000,
                                      function))
        where = line_of(function, offset)
        if where is not None:
            db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (where[0],))
            db.execute("INSERT OR IGNORE INTO pc_lines (pid, name_id, pc_offset, file_name_id, line) "
                       "SELECT ?, f.id, ?, l.id, ? FROM names f, names l WHERE f.name = ? AND l.name = ?",
                       (PID, offset, where[1], function, where[0]))
    db.execute("INSERT INTO drops (pid, source, detail, count) VALUES (?, 'pc_sampling', 'hardware buffer full', 0)",
               (PID,))
    db.commit()
    db.close()
    return path


def self_test():
    problems = []

    def check(condition, message):
        if not condition:
            problems.append(message)
            print(f"FAIL: {message}")

    # 1. The pieces by hand.
    check(densest_span({0x0: 5, 0xf0: 5, 0x100: 5}) == (0x0, 0xf0, 10) or
          densest_span({0x0: 5, 0xf0: 5, 0x100: 5}) == (0xf0, 0x100, 10),
          f"densest_span: +0x0 and +0xf0 share a span, +0x0 and +0x100 do not: "
          f"{densest_span({0x0: 5, 0xf0: 5, 0x100: 5})}")
    check(densest_span({0x0: 1, 0x400: 7, 0x480: 2, 0x500: 4}) == (0x400, 0x480, 9),
          f"densest_span: {densest_span({0x0: 1, 0x400: 7, 0x480: 2, 0x500: 4})}")
    check(densest_span({}) == (None, None, 0), "densest_span of nothing")
    check(function_key("_Z9hot_chainPKjjiPj") == HOT and function_key("void cheap_math(int, float*)") == CHEAP
          and function_key("hot_chain") == HOT and function_key("hot_chain_2") == "hot_chain_2",
          "function_key")
    check(is_pc_engine("sim-pc-sampling") and is_pc_engine("cuda-pc") and not is_pc_engine("cuda-pm")
          and not is_pc_engine("none") and not is_pc_engine(None), "is_pc_engine")
    check(top_reason_is_long_scoreboard({"long_scoreboard": 3, "long_scoreboard_not_issued": 3, "selected": 5},
                                        strictly=True), "long_scoreboard and _not_issued count as one")
    check(not top_reason_is_long_scoreboard({"long_scoreboard": 5, "selected": 5}, strictly=True) and
          top_reason_is_long_scoreboard({"long_scoreboard": 5, "selected": 5}, strictly=False), "a tie")

    # 2. Whole sessions through flare's reader.
    sys.path.insert(0, HERE)
    from pm_accuracy import c_ddl_statements, schema_statements  # one reader of the C tables
    statements = schema_statements() + c_ddl_statements("store_views.c", "views_ddl[] = {")
    reader = load_reader()
    hot = min(hot_loop_lines())
    check(hot_loop_lines() == {hot, hot + 1}, "hot_loop_lines: two lines")
    cases = [  # name, windows, samples, expected substring of a failure (None: passes)[, line_of]
        ("good", [GOOD_WINDOW], [(1,) + s for s in GOOD_HOT + GOOD_CHEAP], None),
        ("mangled names, long_scoreboard split, two windows", [GOOD_WINDOW, GOOD_WINDOW],
         [(1, "_Z9hot_chainPKjjiPj", 0xa0, "long_scoreboard", 3000),
          (1, "_Z9hot_chainPKjjiPj", 0xa0, "long_scoreboard_not_issued", 3000),
          (1, "_Z9hot_chainPKjjiPj", 0x90, "selected", 4000), (1, "_Z10cheap_mathiPf", 0x60, "wait", 10),
          (2, "_Z9hot_chainPKjjiPj", 0xa0, "long_scoreboard", 500),
          (2, "_Z10cheap_mathiPf", 0x70, "math_pipe_throttle", 10)], None),
        ("wrong top stall", [GOOD_WINDOW],
         [(1, HOT, 0xa0, "math_pipe_throttle", 8000)] + [(1,) + s for s in GOOD_HOT + GOOD_CHEAP],
         "hot_chain's top stall reason is math_pipe_throttle"),
        ("offsets spread out", [GOOD_WINDOW],
         [(1, HOT, 0x40 * i, "long_scoreboard", 100) for i in range(64)] + [(1,) + s for s in GOOD_CHEAP],
         "in its densest 256 bytes"),
        ("fell back to pm", [dict(GOOD_WINDOW, engine="cuda-pm", engine_reason="asked for pc: no PC sampling "
                                  "engine on this device; fell back to pm")], [],
         "ran engine cuda-pm (disarmed), not PC sampling: asked for pc: no PC sampling engine on this device; "
         "fell back to pm"),
        ("PC sampling busy", [dict(GOOD_WINDOW, engine="cuda-pm", engine_reason="asked for pc: PC sampling busy, "
                                   "held by another tool; fell back to pm")], [], "PC sampling busy"),
        ("still preparing", [dict(GOOD_WINDOW, engine_status="preparing", engine_reason="still being set up")],
         [], "ran without its engine cuda-pc-sampling (status preparing): still being set up"),
        ("no samples", [GOOD_WINDOW], [], "has no PC samples"),
        ("a sample after the close", [GOOD_WINDOW],
         [(1,) + s for s in GOOD_HOT + GOOD_CHEAP] + [(1, HOT, 0xa0, "wait", 5, 2000000100)],
         "PC sample rows outside it"),
        ("never opened", [dict(GOOD_WINDOW, opened=False, engine_status="refused",
                               engine_reason="CUPTI_ERROR_NOT_SUPPORTED")], [], "no deep window ran"),
        ("no window", [], [], "no deep window in the session"),
        ("cheap_math missing", [GOOD_WINDOW], [(1,) + s for s in GOOD_HOT], "cheap_math has no PC samples"),
        ("cheap_math waits on memory", [GOOD_WINDOW],
         [(1,) + s for s in GOOD_HOT] + [(1, CHEAP, 0x60, "long_scoreboard", 500), (1, CHEAP, 0x70, "wait", 500)],
         "cheap_math's top stall reason is long_scoreboard"),
        ("CUPTI's prefix kept", [GOOD_WINDOW],
         [(1, f, o, CUPTI_PREFIX + r, n) for f, o, r, n in GOOD_HOT + GOOD_CHEAP], "with CUPTI's prefix"),
        ("no source lines", [GOOD_WINDOW], [(1,) + s for s in GOOD_HOT + GOOD_CHEAP],
         "hot_chain's samples have no source lines", lambda function, offset: None),
        ("samples off the loop's lines", [GOOD_WINDOW], [(1,) + s for s in GOOD_HOT + GOOD_CHEAP],
         "lie on the hot loop's lines", lambda function, offset: ("pc_hot_loop.cu", hot + 20)),
        ("lines of another file", [GOOD_WINDOW], [(1,) + s for s in GOOD_HOT + GOOD_CHEAP],
         "lie on the hot loop's lines", lambda function, offset: ("other.cu", hot)),
    ]
    directory = tempfile.mkdtemp(prefix="pc-window-check-self-test-")
    try:
        for index, (name, windows, samples, expected, *line_of) in enumerate(cases):
            path = make_session(directory, f"case-{index}", statements, windows, samples,
                                *line_of)
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                failures = check_session(path, reader)
            if expected is None:
                check(not failures, f"{name}: should pass, failed: {failures}\n{output.getvalue()}")
            else:
                check(any(expected in f for f in failures),
                      f"{name}: should fail with '{expected}', got {failures}\n{output.getvalue()}")
            print(f"self-test case '{name}': {'passes' if not failures else 'fails'} "
                  f"({'; '.join(failures) if failures else 'as expected' if expected is None else ''})")
        # The good case's summary, once in full, and the exit codes of main.
        good = os.path.join(directory, "case-0")
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            status = main([good])
        print(output.getvalue(), end="")
        good_total = sum(s[3] for s in GOOD_HOT + GOOD_CHEAP)
        check(status == 0 and "+0x00a0" in output.getvalue() and f"pc_samples_total {good_total}\n" in
              output.getvalue(), f"main on the good session: exit {status}")
        with contextlib.redirect_stdout(io.StringIO()):
            check(main([os.path.join(directory, "case-2")]) == 1, "main on a bad session: exit 1")
            check(main([os.path.join(directory, "nothing-here")]) == 1, "main on no session: exit 1")
        with contextlib.redirect_stderr(io.StringIO()):
            check(main([]) == 2 and main(["a", "b"]) == 2, "main without a session: exit 2")
    finally:
        shutil.rmtree(directory)
    print(f"self-test: {'PASS' if not problems else 'FAIL (%d)' % len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
