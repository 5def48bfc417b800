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

usage: soak.py FLARE WORK_DIR SECONDS CAP [--beside]
"""
import os
import sqlite3
import subprocess
import sys
import time

flare, work, seconds, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
beside = sys.argv[5:] == ["--beside"]
here = os.path.dirname(os.path.abspath(__file__))
session = os.path.join(work, "soak")
subprocess.run(["rm", "-rf", session])
command = [flare, "trace", "-q", "-o", session, "--max-size", cap, "--",
           sys.executable, os.path.join(here, "soak_loop.py"), str(seconds)]
started = time.monotonic()
launcher = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
untraced = subprocess.Popen([sys.executable, os.path.join(here, "soak_loop.py"), str(seconds)],
                            stdout=subprocess.DEVNULL) if beside else None


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


samples = []
untraced_samples = []
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
    try:
        plain = rss_kib(untraced.pid) if untraced is not None and untraced.poll() is None else 0
    except OSError:
        plain = 0
    db, wal = size(os.path.join(session, "session.db")), size(os.path.join(session, "session.db-wal"))
    elapsed = time.monotonic() - started
    samples.append((elapsed, db, wal, rss, cpu))
    untraced_samples.append((elapsed, plain))
    print("t %6.0f s  session.db %7.1f MB  -wal %6.1f MB  RSS %7.1f MiB%s  flare CPU %s" % (
        elapsed, db / 1e6, wal / 1e6, rss / 1024.0,
        "  untraced %7.1f MiB" % (plain / 1024.0) if untraced is not None else "",
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
print("flare threads' CPU time: %.1f s of %.0f s (%s)" % (
    sum(final_cpu.values()), wall, ", ".join("%s %.1f s" % i for i in sorted(final_cpu.items()))))
print("kernels accounted (detail + totals) %d of %s launched" % (kept + totals, launched))
