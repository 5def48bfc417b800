"""check_session.py: exact checks of a flare session database recorded on a
real GPU (scripts/gpu-check.sh). Exits non-zero with a message per failure.

usage: check_session.py known_work SESSION_DIR
       check_session.py known_work_light SESSION_DIR   (flare trace --mode light)
       check_session.py other_subscriber SESSION_DIR
       check_session.py train SESSION_DIR STEPS
       check_session.py storm SESSION_DIR LAUNCHED
       check_session.py storm_full SESSION_DIR LAUNCHED   (flare trace --mode full)
"""
import sqlite3
import sys


def rows(db, sql, *args):
    return db.execute(sql, args).fetchall()


def check_known_work(db, light=False):
    """known_work.cu's exact work; light: recorded under --mode light, which
    has the same GPU work and NVTX ranges but no launch callbacks."""
    failures = []
    kernels = dict(rows(db, "SELECT n.name, COUNT(*) FROM kernels k JOIN names n ON n.id = k.name_id GROUP BY n.name"))
    def count_like(fragment):
        return sum(c for name, c in kernels.items() if fragment in name)
    if count_like("scale_kernel") != 100:
        failures.append(f"scale_kernel launches: {count_like('scale_kernel')} != 100 ({kernels})")
    if count_like("add_one_kernel") != 50:
        failures.append(f"add_one_kernel launches: {count_like('add_one_kernel')} != 50")
    names = list(kernels)
    if not any(n.startswith("scale_kernel(") for n in names):
        failures.append(f"kernel names are not demangled: {names}")
    h2d = rows(db, "SELECT COUNT(*), SUM(bytes) FROM copies WHERE is_memset = 0 AND copy_kind = 1")[0]
    d2h = rows(db, "SELECT COUNT(*), SUM(bytes) FROM copies WHERE is_memset = 0 AND copy_kind = 2")[0]
    memset = rows(db, "SELECT COUNT(*), SUM(bytes) FROM copies WHERE is_memset = 1")[0]
    if tuple(h2d) != (3, 3 << 20):
        failures.append(f"host-to-device copies {tuple(h2d)} != (3, {3 << 20})")
    if tuple(d2h) != (2, 8192):
        failures.append(f"device-to-host copies {tuple(d2h)} != (2, 8192)")
    if tuple(memset) != (1, 65536):
        failures.append(f"memsets {tuple(memset)} != (1, 65536)")
    scopes = dict(rows(db, "SELECT n.name, COUNT(*) FROM scopes s JOIN names n ON n.id = s.name_id GROUP BY n.name"))
    for name in ("outer", "inner", "phase"):
        if scopes.get(name) != 1:
            failures.append(f"NVTX range '{name}' recorded {scopes.get(name, 0)} times, expected 1 ({scopes})")
    depth = dict(rows(db, "SELECT n.name, s.depth FROM scopes s JOIN names n ON n.id = s.name_id"))
    if depth.get("inner") != 1 or depth.get("outer") != 0:
        failures.append(f"NVTX nesting depths wrong: {depth}")
    # Kernels inside the "inner" range in time.
    inner = rows(db, "SELECT s.start_ns, s.end_ns FROM scopes s JOIN names n ON n.id = s.name_id WHERE n.name = 'inner'")
    bad = rows(db, "SELECT COUNT(*) FROM kernels WHERE end_ns < start_ns")[0][0]
    if bad:
        failures.append(f"{bad} kernels end before they start")
    pids = rows(db, "SELECT COUNT(*) FROM processes")[0][0]
    if pids != 1:
        failures.append(f"{pids} process rows, expected 1")
    devices = rows(db, "SELECT device, name, backend FROM devices")
    if not devices or devices[0][2] != "cuda":
        failures.append(f"devices table: {devices}")
    caps = dict(rows(db, "SELECT feature, status FROM capabilities"))
    active = ["kernels", "copies", "memsets", "nvtx", "nvml", "cuda_injection", "mode"]
    for feature in active + ([] if light else ["launch_callbacks"]):
        if caps.get(feature) != "active":
            failures.append(f"capability {feature}: {caps.get(feature)} (all: {caps})")
    launches = rows(db, "SELECT MAX(value) FROM metrics m JOIN names n ON n.id = m.name_id WHERE n.name = 'host_kernel_launches'")[0][0]
    if light:
        for feature in ("launch_callbacks", "api_calls", "storm_guard", "replay"):
            if caps.get(feature) != "off":
                failures.append(f"light mode: capability {feature} is {caps.get(feature)}, not off")
        if launches is not None:
            failures.append(f"light mode: host_kernel_launches recorded ({launches})")
        calls = rows(db, "SELECT COUNT(*) FROM api_calls")[0][0]
        if calls:
            failures.append(f"light mode: {calls} API calls recorded")
    elif launches is None or launches < 150:
        failures.append(f"host_kernel_launches {launches} < 150")
    util = rows(db, "SELECT COUNT(*) FROM metrics m JOIN names n ON n.id = m.name_id WHERE n.name = 'sm_clock_mhz' AND device = 0")[0][0]
    if util < 1:
        failures.append("no NVML samples (sm_clock_mhz) for device 0")
    drops = rows(db, "SELECT source, detail, count FROM drops WHERE count > 0")
    if drops:
        failures.append(f"drops: {drops}")
    if not light:
        failures += check_api_calls(db)
    return failures


def check_api_calls(db):
    """Every kernel, copy and memset has exactly one API call (the host side,
    same correlation id) made before its GPU work began, and every call has
    its GPU work (schema 8, docs/schema.md)."""
    failures = []
    caps = dict(rows(db, "SELECT feature, status FROM capabilities"))
    if caps.get("api_calls") != "active":
        return [f"capability api_calls: {caps.get('api_calls')}"]
    for table in ("kernels", "copies"):
        missing = rows(db, f"SELECT COUNT(*) FROM {table} g WHERE NOT EXISTS (SELECT 1 FROM "
                           "api_calls a WHERE a.pid = g.pid AND a.correlation_id = g.correlation_id)")[0][0]
        if missing:
            failures.append(f"{missing} {table} rows without an API call")
        late = rows(db, f"SELECT COUNT(*) FROM {table} g JOIN api_calls a USING (pid, correlation_id) "
                        "WHERE a.start_ns > g.start_ns OR a.end_ns < a.start_ns")[0][0]
        if late:
            failures.append(f"{late} {table} rows whose API call starts after the GPU work")
    orphans = rows(db, "SELECT COUNT(*) FROM api_calls a WHERE NOT EXISTS (SELECT 1 FROM kernels k "
                       "WHERE k.pid = a.pid AND k.correlation_id = a.correlation_id) AND NOT EXISTS "
                       "(SELECT 1 FROM copies c WHERE c.pid = a.pid AND c.correlation_id = a.correlation_id)")[0][0]
    if orphans:
        failures.append(f"{orphans} API calls without GPU work")
    twice = rows(db, "SELECT COUNT(*) FROM (SELECT pid, correlation_id FROM api_calls "
                     "GROUP BY 1, 2 HAVING COUNT(*) > 1)")[0][0]
    if twice:
        failures.append(f"{twice} correlation ids with more than one API call")
    names = dict(rows(db, "SELECT n.name, COUNT(*) FROM api_calls a JOIN names n ON n.id = a.name_id GROUP BY 1"))
    if not any(name.startswith("cuLaunchKernel") for name in names):
        failures.append(f"no cuLaunchKernel API calls: {names}")
    print(f"api_calls: {sum(names.values())} calls {names}")
    return failures


def check_train(db, steps):
    failures = []
    step_count = rows(db, "SELECT COUNT(*) FROM scopes s JOIN names n ON n.id = s.name_id WHERE n.name = 'train_step'")[0][0]
    if step_count != steps + 20:
        failures.append(f"train_step ranges: {step_count} != {steps + 20}")
    kernel_count = rows(db, "SELECT COUNT(*) FROM kernels")[0][0]
    if kernel_count < (steps + 20) * 10:
        failures.append(f"only {kernel_count} kernels for {steps + 20} steps")
    gemm = rows(db, "SELECT COUNT(*) FROM kernels k JOIN names n ON n.id = k.name_id WHERE n.name LIKE '%gemm%' OR n.name LIKE '%Kernel%'")[0][0]
    if gemm == 0:
        failures.append("no GEMM-like kernels recorded")
    mangled = rows(db, "SELECT COUNT(*) FROM names WHERE name LIKE '\\_Z%' ESCAPE '\\'")[0][0]
    if mangled:
        failures.append(f"{mangled} kernel names left mangled")
    print(f"train: {kernel_count} kernels, {step_count} train_step ranges")
    failures += check_api_calls(db)
    return failures


def check_other_subscriber(db):
    failures = []
    caps = dict((f, (s, r)) for f, s, r in rows(db, "SELECT feature, status, reason FROM capabilities"))
    status, reason = caps.get("launch_callbacks", (None, ""))
    if status != "degraded" or "another CUPTI subscriber" not in reason:
        failures.append(f"launch_callbacks should be degraded by the other subscriber: {caps}")
    kernels = rows(db, "SELECT COUNT(*) FROM kernels")[0][0]
    if kernels != 10:
        failures.append(f"{kernels} kernels recorded through the activity API, expected 10")
    return failures


def check_window(db):
    """A scheduled window during a CUDA launch storm: opened, closed on its
    launch bound or duration, and counting CUDA launches from the driver
    callbacks."""
    failures = []
    windows = rows(db, "SELECT token_kind, close_reason, launches, opened_ns, closed_ns, "
                       "engine_status, engine_reason FROM windows")
    if len(windows) != 1:
        failures.append(f"{len(windows)} windows, expected 1: {windows}")
        return failures
    kind, reason, launches, opened, closed, engine, why = windows[0]
    if kind != "scheduled" or opened is None or closed is None:
        failures.append(f"window not opened and closed as scheduled: {windows[0]}")
        return failures
    if launches <= 0:
        failures.append(f"window counted {launches} launches: CUDA launches do not reach it")
    # The launch-storm guard holds while a window is open: the window's
    # kernels are timed (allowing a step, 10 ms, for the guard to see it),
    # although the storm around it is not.
    inside = rows(db, "SELECT COUNT(*) FROM kernels WHERE start_ns BETWEEN ? AND ?",
                  opened + 20_000_000, closed)[0][0]
    after = rows(db, "SELECT COUNT(*) FROM kernels WHERE start_ns > ?", closed + 100_000_000)[0][0]
    if launches > 0 and inside < launches // 2:
        failures.append(f"{inside} kernels timed inside the window of {launches} launches: "
                        f"the storm guard did not hold")
    print(f"window: {kind}, closed on {reason}, {launches} launches, "
          f"{(closed - opened) / 1e6:.1f} ms, engine {engine} {why}; {inside} kernels timed "
          f"inside it, {after} from 100 ms after it")
    return failures


def check_rule(db):
    """A launch-rate rule over a real CUDA launch storm: exactly one window,
    opened by rule 1 with its cause, and the rule's summary says so."""
    failures = []
    windows = rows(db, "SELECT token_kind, rule_id, comparison, observed_value, close_reason, "
                       "launches FROM windows")
    if len(windows) != 1 or windows[0][0] != "rule" or windows[0][1] != 1:
        failures.append(f"expected one window opened by rule 1: {windows}")
    summary = rows(db, "SELECT status, windows_fired, times_true, reason FROM rules")
    if len(summary) != 1 or summary[0][1] != 1:
        failures.append(f"rule summary: {summary}")
    if windows:
        print(f"rule window: {windows[0]}; rule summary: {summary}")
    return failures


def check_storm(db, launched):
    """A CUDA launch storm under the launch-storm guard: a storm was seen,
    kernels were timed only part of the time, and every launch is either a
    kernel record or counted in the storm_guard drop (within 1%: CUPTI is
    switched a moment after the guard decides, and kernels in flight at the
    switch may or may not get a record)."""
    failures = []
    caps = {f: (s, r) for f, s, r in rows(db, "SELECT feature, status, reason FROM capabilities")}
    status, reason = caps.get("storm_guard", (None, ""))
    if status != "active" or "storm(s)" not in reason:
        failures.append(f"storm_guard capability: {status} {reason!r}")
    kernels = rows(db, "SELECT COUNT(*) FROM kernels")[0][0]
    untimed = rows(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = 'storm_guard' "
                       "AND detail LIKE 'kernel launches%'")[0][0]
    counted = rows(db, "SELECT MAX(value) FROM metrics m JOIN names n ON n.id = m.name_id "
                       "WHERE n.name = 'host_kernel_launches'")[0][0] or 0
    if counted != launched:
        failures.append(f"host_kernel_launches {counted}, the program launched {launched}")
    if untimed <= 0 or kernels >= launched:
        failures.append(f"no launches left untimed ({kernels} kernel records, {untimed} untimed)")
    accounted = kernels + untimed
    # Launches made while CUPTI switches count untimed even when they were
    # timed: the sum may run high by a switch's worth, never low (a launch
    # neither timed nor counted is silent loss).
    if accounted < launched:
        failures.append(f"kernel records {kernels} + untimed {untimed} = {accounted}, "
                        f"launched {launched}: {launched - accounted} launch(es) neither timed "
                        f"nor counted")
    elif accounted - launched > launched / 100:
        failures.append(f"kernel records {kernels} + untimed {untimed} = {accounted}, "
                        f"launched {launched} (more than 1% high)")
    bad = rows(db, "SELECT COUNT(*) FROM kernels WHERE end_ns < start_ns OR start_ns = 0")[0][0]
    if bad:
        failures.append(f"{bad} kernel records with impossible times")
    # launch_storm.cu: one memset before the storm, one copy after it (while
    # the storm may still be running): each recorded or counted untimed.
    copies = rows(db, "SELECT COUNT(*) FROM copies")[0][0]
    untimed_copies = rows(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                              "'storm_guard' AND detail LIKE 'copies%'")[0][0]
    if copies + untimed_copies != 2:
        failures.append(f"copies and memsets: {copies} recorded + {untimed_copies} untimed, "
                        f"the program made 2")
    print(f"storm: {launched} launched, {kernels} kernel records, {untimed} untimed "
          f"(accounted {accounted}, off by {accounted - launched}); copies {copies} recorded, "
          f"{untimed_copies} untimed; {reason}")
    return failures


def check_storm_full(db, launched):
    """The launch storm under --mode full: no guard, every launch timed
    (launch_storm.cu's 1,000 warm-up launches come on top)."""
    failures = []
    caps = {f: (s, r) for f, s, r in rows(db, "SELECT feature, status, reason FROM capabilities")}
    if caps.get("storm_guard", ("",))[0] != "off":
        failures.append(f"full mode: storm_guard capability {caps.get('storm_guard')}")
    kernels = rows(db, "SELECT COUNT(*) FROM kernels")[0][0]
    if kernels != launched:
        failures.append(f"full mode: {kernels} kernel records, the program launched {launched}")
    drops = rows(db, "SELECT source, detail, count FROM drops WHERE count > 0")
    if drops:
        failures.append(f"full mode: drops {drops}")
    print(f"storm_full: {launched} launched, {kernels} kernel records; {caps.get('mode')}")
    return failures


def check_backend(db):
    """Every process of a GPU session ran on the CUDA backend (issue 17:
    processes.backend said 'sim' for CUDA processes before)."""
    backends = rows(db, "SELECT pid, backend FROM processes")
    wrong = [(pid, backend) for pid, backend in backends if backend != "cuda"]
    if not backends or wrong:
        return [f"processes.backend should be 'cuda' for every process: {backends}"]
    return []


def main():
    mode, session = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
    if mode == "known_work":
        failures = check_known_work(db)
    elif mode == "known_work_light":
        failures = check_known_work(db, light=True)
    elif mode == "storm_full":
        failures = check_storm_full(db, int(sys.argv[3]))
    elif mode == "other_subscriber":
        failures = check_other_subscriber(db)
    elif mode == "window":
        failures = check_window(db)
    elif mode == "rule":
        failures = check_rule(db)
    elif mode == "storm":
        failures = check_storm(db, int(sys.argv[3]))
    else:
        failures = check_train(db, int(sys.argv[3]))
    failures += check_backend(db)
    for failure in failures:
        print(f"FAIL {mode}: {failure}")
    if not failures:
        print(f"PASS {mode}")
    sys.exit(1 if failures else 0)


main()
