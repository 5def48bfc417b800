"""bench_fleet.py: what the fleet analysis costs on a big job (issue 24):
`python3 -m flare.fleet` over 64 rank sessions of 100,000 kernels each
(6,400,000 kernels), on a local Dask cluster of 1 and of 2 workers, target
<= 60 s.

Records the sessions once with tests/python/fleet_rank.c (built as
BUILD/tests/python/fleet_rank) under `flare trace -o DIR/r%r`: 1,000 steps
of 99 compute kernels and one NCCL kernel each (5 us kernels, so that the
launches do not outrun the tracer's rings), rank 7 stalling 20 ms in steps
100 and 500. They are kept in a cache directory (FLARE_BENCH_DIR, else /tmp,
named after the sizes) and reused while its `complete` marker is there;
remove the directory to record them again.

Then, for 1 and 2 workers, median of 3 runs each:
* the command as a user runs it, `python3 -m flare.fleet DIR --workers N
  --format json` (its start, the cluster's, the analysis), wall time;
* analyse() alone, on a cluster of N workers started beforehand (the
  scheduler's address given), wall time: the analysis without the start.

Usage: PYTHONPATH=BUILD/python python3 bench/bench_fleet.py BUILD [ranks] [kernels per rank]
(BUILD: a build directory, e.g. build/release).
"""
import logging
import os
import platform
import statistics
import subprocess
import sys
import time

RUNS = 3
TARGET_S = 60.0
WORKERS = (1, 2)
KERNELS_PER_STEP = 100  # 99 compute kernels and one collective


def record(fleet_rank, flare, directory, ranks, kernels):
    """Records ranks sessions of kernels kernels each under directory (several
    at once: the kernels sleep), unless the complete marker says it was done."""
    marker = os.path.join(directory, "complete")
    if os.path.exists(marker):
        print("reusing %d sessions in %s" % (ranks, directory))
        return
    os.makedirs(directory, exist_ok=True)
    environment = dict(os.environ, STEPS=str(kernels // KERNELS_PER_STEP),
                       KERNELS=str(KERNELS_PER_STEP - 1), KERNEL_US="5", NCCL_US="5",
                       SLOW_RANK="7", SLOW_STEPS="100,500", SLOW_MS="20")
    started = time.perf_counter()
    batch = 4 * (os.cpu_count() or 1)
    for first in range(0, ranks, batch):
        children = [subprocess.Popen([flare, "trace", "-q", "-o", os.path.join(directory, "r%r"),
                                      "--", fleet_rank], env=dict(environment, RANK=str(rank)))
                    for rank in range(first, min(first + batch, ranks))]
        for child in children:
            if child.wait() != 0:
                raise SystemExit("fleet_rank failed (%d)" % child.returncode)
    size = sum(os.path.getsize(os.path.join(directory, "r%d" % rank, "session.db"))
               for rank in range(ranks))
    print("recorded %d sessions of %d kernels in %.0f s (%.0f MB of session.db)"
          % (ranks, kernels, time.perf_counter() - started, size / 1e6))
    with open(marker, "w") as file:
        file.write("%d %d\n" % (ranks, kernels))


def median_wall(function):
    """Median wall seconds of RUNS calls, and every run's."""
    walls = []
    for _ in range(RUNS):
        started = time.perf_counter()
        function()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls), walls


def main():
    if len(sys.argv) not in (2, 3, 4):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    build = sys.argv[1]
    ranks = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    kernels = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
    import distributed
    import pandas
    from flare import fleet
    print("python %s, pandas %s, dask %s, %s, %d cpus"
          % (platform.python_version(), pandas.__version__, distributed.__version__,
             platform.machine(), os.cpu_count()))
    directory = os.path.join(os.environ.get("FLARE_BENCH_DIR", "/tmp"),
                             "flare-bench-fleet-%dx%d" % (ranks, kernels))
    record(os.path.join(build, "tests", "python", "fleet_rank"),
           os.path.join(build, "bin", "flare"), directory, ranks, kernels)

    for workers in WORKERS:
        command = [sys.executable, "-m", "flare.fleet", directory, "--workers", str(workers),
                   "--format", "json"]

        def run_command():
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        wall, walls = median_wall(run_command)
        print("%d worker(s): python3 -m flare.fleet  %.1f s wall, median of %d (%s), target "
              "<= %.0f s; load average %.1f"
              % (workers, wall, RUNS, ", ".join("%.1f" % w for w in walls), TARGET_S,
                 os.getloadavg()[0]))

        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, dashboard_address=None,
                                           silence_logs=logging.ERROR)
        try:
            address = cluster.scheduler_address
            result = {}

            def run_analysis():
                result.update(fleet.analyse([directory], scheduler=address))
            wall, walls = median_wall(run_analysis)
        finally:
            cluster.close()
        print("%d worker(s): analyse() on a running cluster  %.1f s wall, median of %d (%s); "
              "%d ranks, %d steps, %d slow; load average %.1f"
              % (workers, wall, RUNS, ", ".join("%.1f" % w for w in walls),
                 len(result["ranks"]), len(result["steps"]), len(result["stragglers"]),
                 os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
