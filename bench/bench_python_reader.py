"""bench_python_reader.py: what the Python reader costs on a big session (issue 21):
flare.open(DIR).kernels() on 1,000,000 kernels into a pandas DataFrame, target <= 2 s.

Writes a finished session of N kernels (and N/10 scopes and copies) with
bench_reader_session (the store's writer, built with the benchmarks), then
times, median of 5 runs each: open + kernels() into a DataFrame (when pandas
can be imported; also without the extension's fast path, as the sqlite3
module's rows give it) and into a list of dicts, and copies(), scopes() and
scopes(gpu_time=True) into a DataFrame. Writes only under a mkdtemp directory
(in /tmp unless FLARE_BENCH_DIR says otherwise) and removes it afterwards.

Usage: PYTHONPATH=BUILD/python python3 bench/bench_python_reader.py BUILD [kernels]
(BUILD: a build directory, e.g. build/release; the writer is BUILD/bench/bench_reader_session).
"""
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import flare

RUNS = 5
TARGET_S = 2.0


def median_seconds(function):
    """Median wall and CPU seconds of RUNS calls, and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(RUNS):
        result = None  # the previous result's memory is freed before timing
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def without_fast_path(session):
    session._columns = None  # DataFrames from the sqlite3 module's rows
    return session.kernels()


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    writer = os.path.join(sys.argv[1], "bench", "bench_reader_session")
    kernels = int(sys.argv[2]) if len(sys.argv) == 3 else 1000000
    try:
        import pandas
        frames = "pandas %s" % pandas.__version__
    except ImportError:
        pandas, frames = None, "no pandas"
    print("python %s, %s, %s, %d cpus" % (platform.python_version(), frames, platform.machine(),
                                          os.cpu_count()))
    directory = tempfile.mkdtemp(prefix="flare-bench-reader-",
                                 dir=os.environ.get("FLARE_BENCH_DIR"))
    try:
        started = time.perf_counter()
        subprocess.run([writer, directory, str(kernels)], check=True)
        size = os.path.getsize(os.path.join(directory, "session.db"))
        print("wrote %d kernels in %.1f s (session.db %.1f MB)"
              % (kernels, time.perf_counter() - started, size / 1e6))
        cases = [("kernels() into a list of dicts", False, lambda s: s.kernels())]
        if pandas is not None:
            cases = [("kernels() into a DataFrame", True, lambda s: s.kernels()),
                     ("  the same without the fast path", True, without_fast_path)] + cases + [
                ("copies() into a DataFrame", True, lambda s: s.copies()),
                ("scopes() into a DataFrame", True, lambda s: s.scopes()),
                ("scopes(gpu_time=True), DataFrame", True, lambda s: s.scopes(gpu_time=True)),
            ]
        for what, use_pandas, method in cases:
            def run():
                with flare.open(directory, pandas=use_pandas) as session:
                    return method(session)
            wall, cpu, result = median_seconds(run)
            targeted = what == "kernels() into a DataFrame"
            target = " (target <= %.0f s)" % TARGET_S if targeted else ""
            print("%-36s %.3f s wall, %.3f s CPU, median of %d (%d rows)%s"
                  % (what, wall, cpu, RUNS, len(result), target))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
