"""Cross-module check: a Python process ticks counters while the profiler reads.

Loads libflare the way a profiler already in the process would (ctypes,
RTLD_LOCAL), starts a session through its C API, then imports the `flare`
module, which must bind to that same copy. Python threads tick a counter
while this process reads it through libflare's C API; at the end the Python
module, the C API and the session database must all give the same value.

    cross_module_check.py LIBFLARE [--expect-split]

Exits 0 when the three agree, 1 when they do not. With --expect-split (run
with FLARE_RUNTIME_DISABLE_SHARING=1) it exits 0 only if it sees them
disagree: the proof that this check fails when the registry is not shared.
"""
import ctypes
import os
import shutil
import sqlite3
import sys
import tempfile
import threading

THREADS = 4
ADDS = 50000
NAME = "py.tokens"


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("session_dir", ctypes.c_char_p),
                ("flush_interval_ms", ctypes.c_uint32), ("ring_capacity", ctypes.c_uint32)]


def c_value(library, name):
    """The counter as libflare's C API reads it; None if never registered."""
    handle = ctypes.c_void_p()
    if library.flare_counter_find(name.encode(), ctypes.byref(handle)) != 0:
        return None
    value = ctypes.c_uint64()
    if library.flare_counter_value(handle, ctypes.byref(value)) != 0:
        return None
    return value.value


def session_value(directory, name):
    with sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True) as db:
        row = db.execute(
            "SELECT s.value FROM counter_samples s JOIN counters c ON c.pid = s.pid AND "
            "c.counter = s.counter WHERE c.name = ? ORDER BY s.time_ns DESC LIMIT 1",
            (name,)).fetchone()
    return None if row is None else row[0]


def main():
    library_path = sys.argv[1]
    expect_split = "--expect-split" in sys.argv[2:]
    library = ctypes.CDLL(library_path, mode=os.RTLD_LOCAL)
    library.flare_counter_find.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    library.flare_counter_value.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    library.flare_init.argtypes = [ctypes.POINTER(Options)]

    directory = tempfile.mkdtemp(prefix="flare-test-pycross-")
    options = Options(ctypes.sizeof(Options), directory.encode(), 10, 0)
    status = library.flare_init(ctypes.byref(options))
    if status != 0:
        print("flare_init failed: %d" % status)
        return 1

    import flare  # after libflare is mapped: must bind to that copy
    info = flare.runtime_info()
    print("flare module: %s" % info)

    counter = flare.counter(NAME)
    start = threading.Barrier(THREADS + 1)

    def tick():
        start.wait()
        for _ in range(ADDS):
            counter.add(3)

    threads = [threading.Thread(target=tick) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    start.wait()
    readings = []
    while any(thread.is_alive() for thread in threads):
        readings.append(c_value(library, NAME))  # the profiler reads while Python ticks
    for thread in threads:
        thread.join()
    expected = THREADS * ADDS * 3
    python_value = counter.value
    c_reading = c_value(library, NAME)
    library.flare_shutdown()
    db_value = session_value(directory, NAME)
    shutil.rmtree(directory, ignore_errors=True)
    print("python %s, C API %s, session %s, expected %d, %d readings while ticking"
          % (python_value, c_reading, db_value, expected, len(readings)))
    seen = [r for r in readings if r is not None]
    monotonic = all(a <= b for a, b in zip(seen, seen[1:]))
    agree = (python_value == expected and c_reading == expected and db_value == expected
             and monotonic and info["shared"])
    if expect_split:
        if agree or info["shared"]:
            print("FAIL: the modules agree although sharing is disabled")
            return 1
        print("ok: the split was detected")
        return 0
    if not agree:
        print("FAIL: the Python module and the profiler do not share one registry")
        return 1
    print("ok: one registry")
    return 0


if __name__ == "__main__":
    sys.exit(main())
