#!/usr/bin/env python3
"""check_auto.py: checks a session traced with `flare trace --deep-engine auto` and one
scheduled window (scripts/gpu-check-auto.sh runs it on the H200; docs/windows.md, "Engine
auto").

usage: check_auto.py SESSION_DIR pc|pm|refused
       check_auto.py --self-test

Fails unless the session has exactly one window and:
  pc       it ran (opened and closed), its engine a PC sampling one, status disarmed, its
           engine_reason beginning "auto: pc", with samples; the pc_sampling capability
           active;
  pm       it ran with a PM engine (no "pc" in its name), status disarmed, engine_reason
           beginning "auto: pm", with samples; the pc_sampling capability not active (the
           budget kept PC sampling off);
  refused  it never opened: close_reason and engine_status "refused", engine_reason
           containing "auto: no engine fits".
Prints the window and the capabilities it read. Exit 0 when it passes, 1 when not, 2 for a
usage error. --self-test builds synthetic sessions (sqlite3, the columns read here) and
asserts each expectation passes its own case and fails the others.

Must never write to a session, or anywhere but its own temporary directory (the self-test).
"""
import os
import shutil
import sqlite3
import sys
import tempfile

EXPECTATIONS = ("pc", "pm", "refused")


def read(path):
    db = sqlite3.connect(f"file:{os.path.join(path, 'session.db')}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        windows = [dict(r) for r in db.execute(
            "SELECT id, opened_ns, closed_ns, close_reason, engine, engine_status, engine_reason, "
            "engine_samples FROM windows ORDER BY id")]
        capabilities = {r["feature"]: (r["status"], r["reason"]) for r in db.execute(
            "SELECT feature, status, reason FROM capabilities WHERE feature IN "
            "('pc_sampling', 'pm_sampling', 'deep_windows', 'kernels', 'storm_guard')")}
    finally:
        db.close()
    return windows, capabilities


def check(path, expect):
    """The failures (sentences) of the session at path against expect."""
    try:
        windows, capabilities = read(path)
    except sqlite3.Error as error:
        return [f"cannot read {path}: {error}"]
    for w in windows:
        print(f"window {w['id']}: engine {w['engine']} {w['engine_status']}, close {w['close_reason']}, "
              f"samples {w['engine_samples']}, reason '{w['engine_reason']}'")
    for feature, (status, reason) in sorted(capabilities.items()):
        print(f"capability {feature}: {status}: {reason}")
    if len(windows) != 1:
        return [f"{len(windows)} windows, not 1"]
    w = windows[0]
    reason = w["engine_reason"] or ""
    engine = w["engine"] or ""
    pc_status = capabilities.get("pc_sampling", ("none", ""))[0]
    failures = []
    if expect == "refused":
        if w["opened_ns"] is not None or w["close_reason"] != "refused" or w["engine_status"] != "refused":
            failures.append(f"the window was not refused (opened {w['opened_ns']}, close {w['close_reason']}, "
                            f"status {w['engine_status']})")
        if "auto: no engine fits" not in reason:
            failures.append(f"its reason does not say no engine fits: '{reason}'")
        # The storm beside PC sampling: kernels must stay timed (the guard
        # switched kernel activity off, and CUPTI refused it back on, session 16).
        kernels = capabilities.get("kernels", ("none", ""))
        if kernels[0] != "active":
            failures.append(f"kernels not timed to the end: {kernels[0]}: {kernels[1]}")
        return failures
    if w["opened_ns"] is None or w["closed_ns"] is None or w["engine_status"] != "disarmed":
        failures.append(f"the window did not run its engine (opened {w['opened_ns']}, status "
                        f"{w['engine_status']}): '{reason}'")
    if not reason.startswith(f"auto: {expect}"):
        failures.append(f"its reason does not begin 'auto: {expect}': '{reason}'")
    if not (w["engine_samples"] or 0) > 0:
        failures.append("the window took no samples")
    if expect == "pc" and ("pc" not in engine or pc_status != "active"):
        failures.append(f"not PC sampling: engine {engine}, pc_sampling {pc_status}")
    if expect == "pm" and ("pc" in engine or pc_status == "active"):
        failures.append(f"not PM sampling alone: engine {engine}, pc_sampling {pc_status}")
    return failures


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 2 or argv[1] not in EXPECTATIONS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    failures = check(argv[0], argv[1])
    for f in failures:
        print(f"FAIL: {f}")
    print(f"check_auto {argv[1]}: {'FAIL' if failures else 'PASS'}")
    return 1 if failures else 0


CASES = {
    "pc": dict(window=(1, 2, "duration", "cuda-pc-sampling", "disarmed",
                       "auto: pc, about 0.07% at 205 launches/s (budget 5%)", 750000), pc="active"),
    "pm": dict(window=(1, 2, "duration", "cuda-pm", "disarmed",
                       "auto: pm, about 0.04% at 205 launches/s (budget 0.5%)", 5000), pc="off"),
    "refused": dict(window=(None, 3, "refused", "none", "refused",
                            "auto: no engine fits the 5% budget at 250,000 launches/s: pc about 23%, "
                            "pm about 17%", 0), pc="active"),
}


def self_test():
    directory = tempfile.mkdtemp(prefix="check-auto-self-test-")
    problems = []
    try:
        for name, case in CASES.items():
            path = os.path.join(directory, name)
            os.makedirs(path)
            db = sqlite3.connect(os.path.join(path, "session.db"))
            db.execute("CREATE TABLE windows (id, opened_ns, closed_ns, close_reason, engine, engine_status, "
                       "engine_reason, engine_samples)")
            db.execute("CREATE TABLE capabilities (feature, status, reason)")
            db.execute("INSERT INTO windows VALUES (1, ?, ?, ?, ?, ?, ?, ?)", case["window"])
            db.execute("INSERT INTO capabilities VALUES ('pc_sampling', ?, 'x')", (case["pc"],))
            db.execute("INSERT INTO capabilities VALUES ('kernels', 'active', 'CUPTI activity')")
            db.commit()
            db.close()
            for expect in EXPECTATIONS:
                failures = check(path, expect)
                if bool(failures) == (expect == name):
                    problems.append(f"case {name} against {expect}: {failures or 'passed'}")
        empty = os.path.join(directory, "pc")
        db = sqlite3.connect(os.path.join(empty, "session.db"))
        db.execute("INSERT INTO windows VALUES (2, 1, 2, 'duration', 'cuda-pm', 'disarmed', 'auto: pm', 1)")
        db.commit()
        db.close()
        if not any("2 windows" in f for f in check(empty, "pc")):
            problems.append("two windows not refused")
        degraded = os.path.join(directory, "refused")
        db = sqlite3.connect(os.path.join(degraded, "session.db"))
        db.execute("UPDATE capabilities SET status = 'degraded', reason = 'kernel activity could not be "
                   "switched back on after a launch storm' WHERE feature = 'kernels'")
        db.commit()
        db.close()
        if not any("kernels not timed" in f for f in check(degraded, "refused")):
            problems.append("kernels left untimed after a storm not caught")
        if main([]) != 2 or main([empty, "sass"]) != 2:
            problems.append("usage errors not exit 2")
    finally:
        shutil.rmtree(directory)
    for p in problems:
        print(f"FAIL: {p}")
    print(f"self-test: {'FAIL' if problems else 'PASS'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
