"""soak.py: a long launch-bound run under `flare trace --max-size`, watched from
outside (issue 22, item 4; scripts/gpu-check-soak.sh).

Runs tests/gpu/soak_loop.py (train.py's MLP step: about 40 kernels and an
NVTX range) for SECONDS under `flare trace --max-size CAP`, and every 10 s
samples: the session's files (session.db and its -wal), the traced
process's resident memory (VmRSS: the program's and flare's, together), and
the CPU time of flare's own threads (named flare-*, /proc/PID/task). At the
end it reads the session: kernels kept in detail, evicted (drops, source
flight_recorder), per-second totals, every other drop. Prints one line per
sample and a verdict against the targets: the database under the cap, RSS
growth after the first minute <= 4 MiB, no drop but evictions.

With --beside, the same loop also runs untraced, side by side on the same
GPU for the same time, its resident memory sampled at the same moments: the
growth a PyTorch program has of its own, so the traced run's growth can be
split into the program's and flare's (the traced one minus the untraced).

With --bare LIB (bench/cupti_bare_inject.c's library), the same loop runs
a third time beside them with bare CUPTI injected in the features flare's
default mode uses (kernel, copy, memset and external-correlation activity,
the timestamp callback, launch and copy callbacks, NVTX) and nothing of
flare: if it grows as the traced run does, the growth is CUPTI's, not
flare's code.

usage: soak.py FLARE WORK_DIR SECONDS CAP [--beside] [--bare LIB]
"""
import os
import sqlite3
import subprocess
import sys
import time

flare, work, seconds, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
extra = sys.argv[5:]
beside = "--beside" in extra
bare_lib = None
if "--bare" in extra:
    at = extra.index("--bare")
    if at + 1 >= len(extra):
        raise SystemExit("--bare takes the bare-CUPTI library's path")
    bare_lib = os.path.abspath(extra[at + 1])
    if not os.path.isfile(bare_lib):
        raise SystemExit("--bare: no library at %s" % bare_lib)
    del extra[at:at + 2]
if [word for word in extra if word != "--beside"]:
    raise SystemExit("unexpected arguments %s" % extra)
BARE_FEATURES = "kernel,copies,extcorr,clock,callbacks,copy_callbacks,nvtx"
here = os.path.dirname(os.path.abspath(__file__))
session = os.path.join(work, "soak")
subprocess.run(["rm", "-rf", session])
command = [flare, "trace", "-q", "-o", session, "--max-size", cap, "--",
           sys.executable, os.path.join(here, "soak_loop.py"), str(seconds)]
started = time.monotonic()
launcher = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
untraced = subprocess.Popen([sys.executable, os.path.join(here, "soak_loop.py"), str(seconds)],
                            stdout=subprocess.DEVNULL) if beside else None
bare = subprocess.Popen([sys.executable, os.path.join(here, "soak_loop.py"), str(seconds)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                        env=dict(os.environ, CUDA_INJECTION64_PATH=bare_lib,
                                 NVTX_INJECTION64_PATH=bare_lib, BARE_CUPTI=BARE_FEATURES)
                        ) if bare_lib else None


def traced_pid():
    """The python process flare started (the launcher's child)."""
    try:
        with open("/proc/%d/task/%d/children" % (launcher.pid, launcher.pid)) as f:
            children = f.read().split()
        return int(children[0]) if children else None
    except OSError:
        return None


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def flare_cpu_s(pid):
    """utime + stime of the process's threads named flare-*, by name."""
    ticks = os.sysconf("SC_CLK_TCK")
    by_name = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            if not name.startswith("flare-"):
                continue
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            by_name[name] = by_name.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            continue
    return by_name


def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def beside_rss(process):
    """The resident memory (KiB) of a process run beside, 0 once it is gone."""
    try:
        return rss_kib(process.pid) if process is not None and process.poll() is None else 0
    except OSError:
        return 0


samples = []
untraced_samples = []
bare_samples = []
pid = None
while launcher.poll() is None:
    time.sleep(10)
    pid = pid or traced_pid()
    if pid is None:
        continue
    try:
        rss, cpu = rss_kib(pid), flare_cpu_s(pid)
    except OSError:
        break
    plain, bare_rss = beside_rss(untraced), beside_rss(bare)
    db, wal = size(os.path.join(session, "session.db")), size(os.path.join(session, "session.db-wal"))
    elapsed = time.monotonic() - started
    samples.append((elapsed, db, wal, rss, cpu))
    untraced_samples.append((elapsed, plain))
    bare_samples.append((elapsed, bare_rss))
    print("t %6.0f s  session.db %7.1f MB  -wal %6.1f MB  RSS %7.1f MiB%s%s  flare CPU %s" % (
        elapsed, db / 1e6, wal / 1e6, rss / 1024.0,
        "  untraced %7.1f MiB" % (plain / 1024.0) if untraced is not None else "",
        "  bare CUPTI %7.1f MiB" % (bare_rss / 1024.0) if bare is not None else "",
        ", ".join("%s %.1f s" % item for item in sorted(cpu.items()))), flush=True)
# The sampling loop also ends when the program is gone but the launcher is
# still writing the session's end: wait for it (its status is None until then).
stderr = launcher.stderr.read()
launcher.wait()
if launcher.returncode != 0:
    raise SystemExit("soak run failed (%d): %s" % (launcher.returncode, stderr[-2000:]))
wall = time.monotonic() - started
database = sqlite3.connect("file:%s?mode=ro" % os.path.join(session, "session.db"), uri=True)
one = lambda sql: database.execute(sql).fetchone()[0]
kept = one("SELECT COUNT(*) FROM kernels")
totals = one("SELECT COALESCE(SUM(count), 0) FROM kernel_seconds")
evicted = database.execute("SELECT detail, count FROM drops WHERE source = 'flight_recorder' "
                           "AND count > 0").fetchall()
other = database.execute("SELECT source, detail, count FROM drops WHERE source != "
                         "'flight_recorder' AND count > 0").fetchall()
launched = one("SELECT MAX(value) FROM metrics m JOIN names n ON n.id = m.name_id "
               "WHERE n.name = 'host_kernel_launches'")
print("ran %.0f s; kernels launched %s, in detail %d, in per-second totals %d; evicted %s" % (
    wall, launched, kept, totals, evicted))
print("other drops: %s" % (other or "none"))
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
cap_bytes = int(cap[:-1]) * units[cap[-1]] if cap[-1] in units else int(cap)
peak = max(db + wal for _, db, wal, _, _ in samples) if samples else 0
after_minute = [rss for elapsed, _, _, rss, _ in samples if elapsed >= 60]
growth_mib = (max(after_minute) - after_minute[0]) / 1024.0 if after_minute else float("nan")
final_cpu = samples[-1][4] if samples else {}
print("peak session.db + -wal %.1f MB of a %.1f MB cap: %s" % (
    peak / 1e6, cap_bytes / 1e6, "under" if peak <= cap_bytes else "OVER"))
print("RSS growth after the first minute: %.1f MiB (target <= 4 MiB): %s" % (
    growth_mib, "ok" if growth_mib <= 4 else "OVER"))
if untraced is not None:
    untraced.wait()
    plain_after = [rss for elapsed, rss in untraced_samples if elapsed >= 60 and rss > 0]
    plain_mib = (max(plain_after) - plain_after[0]) / 1024.0 if plain_after else float("nan")
    print("RSS growth after the first minute of the same loop untraced beside it: %.1f MiB; "
          "the traced run's beyond it (flare's share): %.1f MiB (target <= 4 MiB): %s" % (
              plain_mib, growth_mib - plain_mib,
              "ok" if growth_mib - plain_mib <= 4 else "OVER"))
if bare is not None:
    bare_stderr = bare.stderr.read()
    bare.wait()
    report = [line for line in bare_stderr.splitlines() if line.startswith("bare_cupti")]
    bare_after = [rss for elapsed, rss in bare_samples if elapsed >= 60 and rss > 0]
    bare_mib = (max(bare_after) - bare_after[0]) / 1024.0 if bare_after else float("nan")
    print("RSS growth after the first minute of the same loop under bare CUPTI (%s), no flare: "
          "%.1f MiB; the traced run's beyond it: %.1f MiB; bare CUPTI's report: %s" % (
              BARE_FEATURES, bare_mib, growth_mib - bare_mib, report[-1] if report else
              "none (exit %d): %s" % (bare.returncode, bare_stderr[-300:])))
print("flare threads' CPU time: %.1f s of %.0f s (%s)" % (
    sum(final_cpu.values()), wall, ", ".join("%s %.1f s" % i for i in sorted(final_cpu.items()))))
print("kernels accounted (detail + totals) %d of %s launched" % (kept + totals, launched))
