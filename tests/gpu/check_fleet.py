"""check_fleet.py: exact checks of the many-rank sessions that
scripts/gpu-check-fleet.sh records on the H200 from tests/gpu/ddp_steps.py.
Exits non-zero with a message per failure; prints what it saw.

usage: check_fleet.py one SESSION_DIR WORLD STEPS BACKEND
           (flare trace -- torchrun: one session, a process per rank)
       check_fleet.py ranks WORLD STEPS BACKEND SESSION_DIR...
           (one flare trace -o 'runs/%r' per rank: one rank each)
       check_fleet.py merged MERGED_DIR SESSION_DIR...
           (flare merge of those: every input's kernels and ranks, once)
       check_fleet.py window MERGED_DIR WORLD SPREAD_MS [shared]
           (flare window open --at on a live job, merged: one scheduled
           window per rank, opened within SPREAD_MS of each other; with
           "shared" the ranks share one GPU, whose PM sampling only one
           process can hold: the others' windows are refused with CUPTI's
           HARDWARE_BUSY, at the same moment, which is what is compared)
"""
import sqlite3
import sys


def connect(directory):
    return sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True)


def ranked(db):
    """{rank: pid} of the processes with a rank."""
    return {rank: pid for pid, rank in db.execute(
        "SELECT pid, rank FROM process_ranks WHERE rank IS NOT NULL")}


def per_rank(db, directory, world, steps, backend):
    """Failures of the ranks of one session: each of 0..world-1 once, with
    world_size, steps train_step scopes, kernels, NCCL kernels under NCCL."""
    failures = []
    ranks = ranked(db)
    sizes = {size for (size,) in db.execute(
        "SELECT world_size FROM process_ranks WHERE rank IS NOT NULL")}
    for rank, pid in sorted(ranks.items()):
        scopes = db.execute(
            "SELECT COUNT(*) FROM scopes s JOIN names n ON n.id = s.name_id "
            "WHERE s.pid = ? AND n.name = 'train_step' AND s.still_open = 0", (pid,)).fetchone()[0]
        kernels, nccl = db.execute(
            "SELECT COUNT(*), SUM(n.name LIKE '%nccl%') FROM kernels k "
            "JOIN names n ON n.id = k.name_id WHERE k.pid = ?", (pid,)).fetchone()
        print("  %s: rank %d pid %d: %d train_step, %d kernels, %d NCCL"
              % (directory, rank, pid, scopes, kernels, nccl or 0))
        if steps and scopes != steps:
            failures.append("%s rank %d: %d train_step scopes, not %d"
                            % (directory, rank, scopes, steps))
        if kernels == 0:
            failures.append("%s rank %d: no kernels" % (directory, rank))
        if backend == "nccl" and not nccl:
            failures.append("%s rank %d: no NCCL kernels under the NCCL backend"
                            % (directory, rank))
    if sizes != {world}:
        failures.append("%s: world sizes %s, not {%d}" % (directory, sorted(sizes), world))
    return failures, ranks


def check_one(directory, world, steps, backend):
    failures, ranks = per_rank(connect(directory), directory, world, steps, backend)
    if sorted(ranks) != list(range(world)):
        failures.append("%s: ranks %s, not 0..%d" % (directory, sorted(ranks), world - 1))
    return failures


def check_ranks(world, steps, backend, directories):
    failures, seen = [], []
    for directory in directories:
        found, ranks = per_rank(connect(directory), directory, world, steps, backend)
        failures += found
        if len(ranks) != 1:
            failures.append("%s: %d ranked processes, not 1" % (directory, len(ranks)))
        seen += list(ranks)
    if sorted(seen) != list(range(world)):
        failures.append("ranks across the sessions %s, not 0..%d" % (sorted(seen), world - 1))
    return failures


def check_merged(merged, inputs):
    failures = []
    db = connect(merged)
    total = db.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
    expected = sum(connect(d).execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
                   for d in inputs)
    input_ranks = sorted(r for d in inputs for r in ranked(connect(d)))
    print("  %s: %d kernels (inputs %d), ranks %s" % (merged, total, expected,
                                                     sorted(ranked(db))))
    if total != expected:
        failures.append("merged kernels %d != the inputs' %d" % (total, expected))
    if sorted(ranked(db)) != input_ranks:
        failures.append("merged ranks %s != the inputs' %s" % (sorted(ranked(db)), input_ranks))
    return failures


def check_window(merged, world, spread_ms, shared):
    failures = []
    db = connect(merged)
    ranks = ranked(db)
    acted, sampled = {}, 0
    for rank, pid in sorted(ranks.items()):
        windows = db.execute(
            "SELECT id, opened_ns, closed_ns, close_reason, engine, engine_status, "
            "engine_reason, engine_samples FROM windows WHERE pid = ? AND token_kind = 'scheduled'",
            (pid,)).fetchall()
        samples = db.execute("SELECT COUNT(*) FROM pm_samples WHERE pid = ?", (pid,)).fetchone()[0]
        print("  rank %d: windows %s, pm_samples %d" % (rank, windows, samples))
        if len(windows) != 1:
            failures.append("rank %d: %d scheduled windows, not 1" % (rank, len(windows)))
            continue
        _, opened, closed, _, engine, status, reason, _ = windows[0]
        if opened is not None:
            acted[rank] = opened
        elif shared and status == "refused" and "HARDWARE_BUSY" in (reason or ""):
            acted[rank] = closed  # refused at its time: another process samples the GPU
        else:
            failures.append("rank %d: its window never opened (%s: %s)" % (rank, status, reason))
            continue
        if engine == "cuda-pm" and status == "disarmed":
            sampled += 1
            if samples == 0:
                failures.append("rank %d: PM sampling ran but stored no samples" % rank)
    if len(ranks) == world and sampled == 0:
        failures.append("no rank's window was PM-sampled")
    if len(acted) == world:
        spread = (max(acted.values()) - min(acted.values())) / 1e6
        print("  windows opened (or, sharing the GPU, were refused) within %.3f ms of each "
              "other (merged clock); %d of %d PM-sampled" % (spread, sampled, world))
        if spread > spread_ms:
            failures.append("windows opened %.3f ms apart, more than %s ms" % (spread, spread_ms))
    elif len(ranks) != world:
        failures.append("%d ranks in %s, not %d" % (len(ranks), merged, world))
    return failures


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    what = argv[1]
    if what == "one":
        failures = check_one(argv[2], int(argv[3]), int(argv[4]), argv[5])
    elif what == "ranks":
        failures = check_ranks(int(argv[2]), int(argv[3]), argv[4], argv[5:])
    elif what == "merged":
        failures = check_merged(argv[2], argv[3:])
    elif what == "window":
        failures = check_window(argv[2], int(argv[3]), float(argv[4]),
                                len(argv) > 5 and argv[5] == "shared")
    else:
        sys.exit(__doc__)
    for failure in failures:
        print("FAIL: %s" % failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(sys.argv)
