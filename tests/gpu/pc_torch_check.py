#!/usr/bin/env python3
"""pc_torch_check.py: checks a session of tests/gpu/pc_torch.py traced with a PC-sampling
deep window (scripts/gpu-check-pcwindow.sh runs it on the H200). Issue 26: "the same for a
PyTorch program: samples land in the kernels that took the window's GPU time".

usage: pc_torch_check.py SESSION_DIR
       pc_torch_check.py --self-test

Reads the session with flare's reader (python/flare/reader.py of this checkout, through
tests/gpu/pc_window_check.py's load_reader). For every window that ran it takes the GPU time
of each kernel name inside the window (each kernel of the window's process clipped to
[opened_ns, closed_ns]) and the PC samples of each function; "the kernels that took the
window's GPU time" are the fewest names, most time first, that hold >= 90% of it. It fails
when:
  * no window ran, or one that ran did not run a PC engine (pc_window_check's rule: engine
    named pc, status disarmed, no "fell back" in its reason), or has no PC samples;
  * fewer than 95% of a window's samples are in functions whose name is, exactly, the name
    of a kernel that ran in the window: flare names both the same way (demangled), and a
    C++ kernel's samples that do not join its kernel records cannot be attributed;
  * fewer than 80% of a window's samples are in the kernels that took its GPU time;
  * a kernel with >= 20% of the window's GPU time has less than a quarter of that share
    of its samples (PC sampling takes a warp per SM sub-partition each period, so a kernel
    that fills the GPU gets about its share of time; a quarter leaves room for kernels
    that leave sub-partitions empty).
Prints, per window, each kernel name's share of GPU time beside its share of samples, the
joined share, and `pc_samples_total N`. Exit 0 when every check passed, 1 when one failed
(or the session cannot be read), 2 for a usage error.

--self-test builds synthetic sessions (the schema and views of src/store, as
pc_window_check.py's self-test does; no GPU) and asserts that the checker passes a good one
and fails each bad one for its reason.

Must never write to a session or anywhere but its own temporary directory (the self-test,
removed at the end).
"""
import collections
import contextlib
import io
import os
import shutil
import sqlite3
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pc_window_check  # noqa: E402  (its reader loader and engine rule)

MIN_JOINED = 0.95
TIME_COVER = 0.90
MIN_IN_TIME = 0.80
BIG_KERNEL = 0.20
MIN_SHARE_OF_SHARE = 0.25


def kernel_time_in(kernels, window):
    """{kernel name: ns of GPU time inside the window} for the window's process."""
    opened, closed = window["opened_ns"], window["closed_ns"]
    times = collections.Counter()
    for k in kernels:
        if k["pid"] != window["pid"]:
            continue
        overlap = min(k["end_ns"], closed) - max(k["start_ns"], opened)
        if overlap > 0:
            times[k["name"]] += overlap
    return times


def covering(times, cover=TIME_COVER):
    """The fewest names, most time first, that hold >= cover of the total."""
    total = sum(times.values())
    chosen, held = set(), 0
    for name, ns in times.most_common():
        if total and held >= cover * total:
            break
        chosen.add(name)
        held += ns
    return chosen


def share(part, whole):
    return part / whole if whole else 0.0


def check_window(window, kernels, rows, fail):
    """Checks one PC window's samples against its kernels; prints the table."""
    times = kernel_time_in(kernels, window)
    samples = collections.Counter()
    for r in rows:
        samples[r["function"]] += r["samples"]
    total_ns, total = sum(times.values()), sum(samples.values())
    print(f"pc_samples_total {total} window {window['id']} ({len(rows)} rows); kernels' GPU time in it "
          f"{total_ns / 1e6:.1f} ms over {(window['closed_ns'] - window['opened_ns']) / 1e6:.1f} ms")
    if total == 0:
        fail(f"window {window['id']} ran {window['engine']} but has no PC samples")
        return
    if total_ns == 0:
        fail(f"window {window['id']}: no kernel ran inside it")
        return
    print("   time    samples  name")
    for name in sorted(set(times) | set(samples), key=lambda n: (-times.get(n, 0), -samples.get(n, 0))):
        print(f"  {100 * share(times.get(name, 0), total_ns):5.1f}%  {100 * share(samples.get(name, 0), total):5.1f}%  "
              f"{name[:140]}")
    joined = sum(n for name, n in samples.items() if name in times)
    took = covering(times)
    in_took = sum(samples.get(name, 0) for name in took)
    print(f"window {window['id']}: {100 * share(joined, total):.1f}% of the samples join a kernel of the window "
          f"(>= {MIN_JOINED:.0%} needed); {len(took)} kernel name(s) took {TIME_COVER:.0%} of its GPU time and hold "
          f"{100 * share(in_took, total):.1f}% of the samples (>= {MIN_IN_TIME:.0%} needed)")
    if joined < MIN_JOINED * total:
        unjoined = [name for name, _ in samples.most_common() if name not in times][:3]
        fail(f"window {window['id']}: only {100 * share(joined, total):.1f}% of the samples are in functions named "
             f"like a kernel of the window (not joined: {'; '.join(n[:80] for n in unjoined)})")
    if in_took < MIN_IN_TIME * total:
        fail(f"window {window['id']}: only {100 * share(in_took, total):.1f}% of the samples are in the kernels "
             f"that took {TIME_COVER:.0%} of its GPU time")
    for name, ns in times.items():
        time_share, sample_share = share(ns, total_ns), share(samples.get(name, 0), total)
        if time_share >= BIG_KERNEL and sample_share < MIN_SHARE_OF_SHARE * time_share:
            fail(f"window {window['id']}: {name[:80]} took {100 * time_share:.1f}% of the GPU time but holds "
                 f"{100 * sample_share:.1f}% of the samples")


def check_session(path, reader=None):
    """Checks the session at path, printing what it found. Returns the failures."""
    reader = reader or pc_window_check.load_reader()
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
        kernels = session.kernels()
    print(f"session {path}: {len(kernels)} kernels, {len(windows)} window(s)")
    ran = [w for w in windows if w["opened_ns"] is not None and w["closed_ns"] is not None]
    if not ran:
        fail("no deep window ran" + (": " + "; ".join(f"window {w['id']} {w['close_reason']}: "
                                                       f"{w['engine_reason']}" for w in windows) if windows else ""))
    for w in ran:
        reason = w["engine_reason"] or ""
        print(f"window {w['id']} (pid {w['pid']}): engine {w['engine']} {w['engine_status']}, close "
              f"{w['close_reason']}, engine_reason '{reason}'")
        if not pc_window_check.is_pc_engine(w["engine"]) or "fell back" in reason or w["engine_status"] != "disarmed":
            fail(f"window {w['id']} did not run PC sampling: engine {w['engine']} ({w['engine_status']}): "
                 f"{reason or 'no engine_reason given'}")
            continue
        check_window(w, kernels, [r for r in rows if (r["pid"], r["window_id"]) == (w["pid"], w["id"])], fail)
    print(f"pc_samples_total {sum(r['samples'] for r in rows)}")
    return failures


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    failures = check_session(argv[0])
    if failures:
        print(f"pc_torch_check: FAIL ({len(failures)}): " + "; ".join(failures))
        return 1
    print("pc_torch_check: PASS")
    return 0


# ---------------------------------------------------------------------------
# self-test: synthetic sessions with the real schema

PID = 5151
OPENED, CLOSED = 1_500_000_000, 2_500_000_000
GEMM = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
ADDCMUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::addcmul_cuda_kernel"
           "(at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const, "
           "at::detail::Array<char*, 4> >(int, float, at::detail::Array<char*, 4>)")
TANH = "void at::native::vectorized_elementwise_kernel<4, tanh_kernel_cuda, at::detail::Array<char*, 2> >"
WINDOW = dict(engine="cuda-pc-sampling", engine_status="disarmed", engine_reason="", opened=True)
# (name, start, end) in ns: the GEMM 63% of the kernels' time in the window, the element-wise kernels 37%,
# a kernel before the window that must not count.
KERNELS = ([(GEMM, OPENED + i * 10_000_000, OPENED + i * 10_000_000 + 6_000_000) for i in range(100)] +
           [(ADDCMUL, OPENED + i * 10_000_000 + 6_000_000, OPENED + i * 10_000_000 + 8_000_000) for i in range(100)] +
           [(TANH, OPENED + i * 10_000_000 + 8_000_000, OPENED + i * 10_000_000 + 9_500_000) for i in range(100)] +
           [("early_kernel", OPENED - 50_000_000, OPENED - 1_000_000)])
GOOD_SAMPLES = [(GEMM, 0x400, "math_pipe_throttle", 5000), (GEMM, 0x480, "selected", 1200),
                (ADDCMUL, 0x90, "long_scoreboard", 2000), (TANH, 0x70, "long_scoreboard", 1500)]


def make_session(directory, name, statements, windows, kernels, samples):
    """A session under directory: windows (dicts of WINDOW's keys, ids from 1), kernels
    ((name, start, end)) and samples ((window_id, function, pc_offset, reason, samples)),
    names interned as the store does. Returns its path."""
    path = os.path.join(directory, name)
    os.makedirs(path)
    db = sqlite3.connect(os.path.join(path, "session.db"))
    db.execute("PRAGMA synchronous = OFF")  # a scratch file: no fsync per statement
    for statement in statements:
        db.execute(statement)

    def name_id(text):
        db.execute("INSERT OR IGNORE INTO names (name) VALUES (?)", (text,))
        return db.execute("SELECT id FROM names WHERE name = ?", (text,)).fetchone()[0]

    for index, w in enumerate(windows, 1):
        db.execute("INSERT INTO windows (pid, id, token_kind, label, max_duration_ns, max_launches, requested_ns, "
                   "opened_ns, closed_ns, close_reason, launches, engine, engine_status, engine_reason, "
                   "engine_samples) VALUES (?, ?, 'scheduled', 'deep-after 1500ms for 1s', 1000000000, 0, ?, ?, ?, "
                   "?, 300, ?, ?, ?, 0)",
                   (PID, index, OPENED, OPENED if w["opened"] else None, CLOSED if w["opened"] else None,
                    "duration" if w["opened"] else "refused", w["engine"], w["engine_status"], w["engine_reason"]))
    for correlation, (kernel, start, end) in enumerate(kernels, 1):
        db.execute("INSERT INTO kernels (pid, device, stream_id, correlation_id, name_id, start_ns, end_ns, grid_x, "
                   "grid_y, grid_z, block_x, block_y, block_z, shared_memory_bytes, registers_per_thread) "
                   "VALUES (?, 0, 7, ?, ?, ?, ?, 132, 1, 1, 256, 1, 1, 0, 32)",
                   (PID, correlation, name_id(kernel), start, end))
    for window_id, function, offset, reason, count in samples:
        db.execute("INSERT INTO pc_samples (pid, window_id, device, name_id, pc_offset, stall_reason, samples, "
                   "first_ns, last_ns) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?)",
                   (PID, window_id, name_id(function), offset, reason, count, OPENED + 1000, CLOSED - 1000))
    db.commit()
    db.close()
    return path


def self_test():
    problems = []

    def check(condition, message):
        if not condition:
            problems.append(message)
            print(f"FAIL: {message}")

    times = collections.Counter({"a": 50, "b": 30, "c": 15, "d": 5})
    check(covering(times) == {"a", "b", "c"}, f"covering: {covering(times)}")
    check(covering(collections.Counter({"a": 95, "b": 5})) == {"a"}, "covering: one name enough")
    window = {"pid": 1, "opened_ns": 100, "closed_ns": 200}
    clipped = kernel_time_in([{"pid": 1, "name": "k", "start_ns": 50, "end_ns": 150},
                              {"pid": 1, "name": "k", "start_ns": 190, "end_ns": 300},
                              {"pid": 2, "name": "k", "start_ns": 100, "end_ns": 200},
                              {"pid": 1, "name": "j", "start_ns": 0, "end_ns": 99}], window)
    check(clipped == {"k": 60}, f"kernel_time_in clips to the window and its process: {clipped}")

    from pm_accuracy import c_ddl_statements, schema_statements  # one reader of the C tables
    statements = schema_statements() + c_ddl_statements("store_views.c", "views_ddl[] = {")
    reader = pc_window_check.load_reader()
    good = [(1,) + s for s in GOOD_SAMPLES]
    mangled_gemm = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
    cases = [  # name, windows, kernels, samples, expected substring of a failure (None: passes)
        ("good", [WINDOW], KERNELS, good, None),
        ("samples in a mangled name", [WINDOW], KERNELS,
         [(1, mangled_gemm if s[0] == GEMM else s[0]) + s[1:] for s in GOOD_SAMPLES],
         "of the samples are in functions named like a kernel of the window (not joined: _ZN7cutlass"),
        ("samples in a kernel outside the window", [WINDOW], KERNELS,
         good + [(1, "early_kernel", 0x10, "wait", 6000)], "are in the kernels that took"),
        ("a big kernel without its share", [WINDOW], KERNELS,
         [(1, GEMM, 0x400, "selected", 300), (1, ADDCMUL, 0x90, "long_scoreboard", 4000),
          (1, TANH, 0x70, "long_scoreboard", 4000)], "took 63.2% of the GPU time but holds 3.6%"),
        ("fell back to pm", [dict(WINDOW, engine="cuda-pm", engine_reason="asked for pc: PC sampling is switched "
                                  "off; fell back to pm")], KERNELS, [], "did not run PC sampling"),
        ("no samples", [WINDOW], KERNELS, [], "has no PC samples"),
        ("no kernels in the window", [WINDOW], KERNELS[-1:], [(1, GEMM, 0x400, "selected", 10)],
         "no kernel ran inside it"),
        ("never opened", [dict(WINDOW, opened=False)], KERNELS, [], "no deep window ran"),
    ]
    directory = tempfile.mkdtemp(prefix="pc-torch-check-self-test-")
    try:
        for index, (name, windows, kernels, samples, expected) in enumerate(cases):
            path = make_session(directory, f"case-{index}", statements, windows, kernels, samples)
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
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            status = main([os.path.join(directory, "case-0")])
        print(output.getvalue(), end="")
        check(status == 0 and "pc_samples_total 9700\n" in output.getvalue(), f"main on the good session: {status}")
        with contextlib.redirect_stdout(io.StringIO()):
            check(main([os.path.join(directory, "case-1")]) == 1, "main on a bad session: exit 1")
            check(main([os.path.join(directory, "nothing-here")]) == 1, "main on no session: exit 1")
        with contextlib.redirect_stderr(io.StringIO()):
            check(main([]) == 2 and main(["a", "b"]) == 2, "main without a session: exit 2")
    finally:
        shutil.rmtree(directory)
    print(f"self-test: {'PASS' if not problems else 'FAIL (%d)' % len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
