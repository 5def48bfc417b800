"""check_graphs.py: checks sessions of tests/gpu/graph_work.cu and
tests/gpu/torch_graphs.py (scripts/gpu-check-graphs.sh).

usage:
  check_graphs.py c SESSION N          graph_work N under flare trace
  check_graphs.py torch SESSION L      torch_graphs.py L under flare trace
  check_graphs.py replay SESSION       graph_work under flare replay --kernel .
  check_graphs.py range SESSION        graph_work under flare replay --range graphs
  check_graphs.py storm SESSION R      graph_work storm R under flare trace (the guard
                                       counts each graph launch as its 20 kernels)
Prints PASS/FAIL lines; exit status 1 on any failure.
"""
import re
import sqlite3
import sys

failures = []


def expect(condition, message):
    print(("PASS " if condition else "FAIL ") + message)
    if not condition:
        failures.append(message)


def rows(db, sql, *args):
    return db.execute(sql, args).fetchall()


def one(db, sql, *args):
    return db.execute(sql, args).fetchone()[0]


def graph_kernels(db):
    return rows(db, "SELECT k.correlation_id, k.graph_id, k.graph_node_id, n.name FROM kernels k "
                    "JOIN names n ON n.id = k.name_id WHERE k.graph_id != 0")


def check_c(db, launches):
    kernels = graph_kernels(db)
    expect(len(kernels) == 2 * launches, f"{len(kernels)} graph kernels, expected {2 * launches}")
    expect(len({k[1] for k in kernels}) == 1, f"graph ids {sorted({k[1] for k in kernels})}: one graph")
    nodes = {(k[2], k[3]) for k in kernels}
    expect(len(nodes) == 2 and {n for _, n in nodes} == {"graph_add(float*, int)",
                                                          "graph_scale(float*, int)"},
           f"kernel nodes {sorted(nodes)}: graph_add and graph_scale, one node each")
    launch_ids = {k[0] for k in kernels}
    expect(len(launch_ids) == launches, f"{len(launch_ids)} distinct launches among graph kernels")
    copies = rows(db, "SELECT correlation_id, graph_node_id, is_memset FROM copies WHERE graph_id != 0")
    expect(len(copies) == 2 * launches and sum(c[2] for c in copies) == launches,
           f"{len(copies)} graph copies/memsets ({sum(c[2] for c in copies)} memsets), "
           f"expected {2 * launches} ({launches})")
    expect({c[0] for c in copies} == launch_ids, "graph copies carry their launches' correlation ids")
    recorded = rows(db, "SELECT correlation_id, scope_name, graph_exec FROM graph_launches")
    expect(len(recorded) == launches, f"{len(recorded)} graph_launches rows, expected {launches}")
    expect({r[0] for r in recorded} == launch_ids,
           "every graph kernel joins its graph_launches row by correlation id")
    expect({r[1] for r in recorded} == {"graphs"},
           f"graph launches attributed to {sorted({str(r[1]) for r in recorded})}: the 'graphs' range")
    expect(len({r[2] for r in recorded}) == 1, "one CUgraphExec launched")
    plain = one(db, "SELECT COUNT(*) FROM kernels k JOIN names n ON n.id = k.name_id "
                    "WHERE k.graph_id = 0 AND n.name LIKE 'graph_add%'")
    expect(plain == 7, f"{plain} plain graph_add kernels, expected 7")
    counted = one(db, "SELECT m.value FROM metrics m JOIN names n ON n.id = m.name_id WHERE "
                      "n.name = 'host_kernel_launches' ORDER BY m.time_ns DESC LIMIT 1")
    # N graph launches + 7 plain ones + the 2 launches made while capturing
    # (API calls that only add nodes: counted, docs/cli.md "CUDA graphs").
    expect(counted == launches + 7 + 2, f"host_kernel_launches {counted}, expected {launches + 9}")


def check_torch(db, replays):
    kernels = graph_kernels(db)
    graphs = {k[1] for k in kernels}
    expect(len(graphs) == 1, f"graph ids {sorted(graphs)}: one captured graph")
    nodes = {k[2] for k in kernels}
    expect(len(kernels) == replays * len(nodes) and len(nodes) > 0,
           f"{len(kernels)} graph kernels = {replays} replays x {len(nodes)} kernel nodes")
    recorded = rows(db, "SELECT correlation_id, scope_name FROM graph_launches")
    expect(len(recorded) == replays, f"{len(recorded)} graph_launches rows, expected {replays}")
    expect({r[1] for r in recorded} == {"replay"},
           f"graph launches attributed to {sorted({str(r[1]) for r in recorded})}: the 'replay' range")
    expect({k[0] for k in kernels} == {r[0] for r in recorded},
           "every graph kernel joins its graph_launches row")


def check_replay(db):
    declined = rows(db, "SELECT kernel, reason FROM replay_launches WHERE declined = 1")
    graph = [d for d in declined if d[1] == "CUDA graph launch: graphs are not replayed"]
    expect(len(graph) >= 1, f"graph launches declined with their reason: {len(graph)} of {declined[:3]}")
    replayed = one(db, "SELECT COUNT(*) FROM replay_launches WHERE declined = 0 AND kernel LIKE 'graph_add%'")
    expect(replayed == 7, f"{replayed} plain graph_add launches replayed, expected 7")


def check_range(db):
    spans = rows(db, "SELECT declined, reason FROM replay_spans")
    expect(len(spans) >= 1 and all(s[0] == 1 and "CUDA graph launch" in (s[1] or "") for s in spans),
           f"the 'graphs' span declined for its graph launch: {spans}")


def metric(db, name):
    value = db.execute("SELECT m.value FROM metrics m JOIN names n ON n.id = m.name_id "
                       "WHERE n.name = ? ORDER BY m.time_ns DESC LIMIT 1", (name,)).fetchone()
    return value[0] if value else None


def check_storm(db, launches):
    # graph_work storm R: one graph of 20 tiny kernels, launched R + 1 times
    # (the first before the timed loop); its 20 kernels were captured as 20
    # launch calls, which count as host launches and run nothing.
    graph_kernels_run = 20 * (launches + 1)
    host = metric(db, "host_kernel_launches")
    expect(host == launches + 1 + 20, f"host launches {host}, expected {launches + 21}")
    weighed = metric(db, "graph_kernels_launched")
    expect(weighed == graph_kernels_run,
           f"graph kernels counted by the guard {weighed}, expected {graph_kernels_run}")
    recorded = one(db, "SELECT COUNT(*) FROM kernels WHERE graph_id != 0")
    untimed = one(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = 'storm_guard' "
                      "AND detail LIKE 'kernel launches%'")
    storm = db.execute("SELECT reason FROM capabilities WHERE feature = 'storm_guard'").fetchone()
    reason = storm[0] if storm else ""
    print(f"   graph kernels recorded {recorded}, untimed {untimed}; storm_guard: {reason}")
    storms = re.search(r"(\d+) storm\(s\)", reason)
    expect(storms is not None and int(storms.group(1)) >= 1,
           "the guard saw a storm of graph kernels")
    expect(untimed > 0 and recorded < graph_kernels_run,
           f"kernels left untimed in the storm: {untimed}")
    # Every graph kernel is either recorded or counted untimed; the count may
    # run high (the 20 captured launches, a switch's worth), never low.
    expect(recorded + untimed >= graph_kernels_run,
           f"recorded {recorded} + untimed {untimed} >= {graph_kernels_run} (no kernel silently lost)")
    expect(recorded + untimed <= graph_kernels_run + 20 + 20 * 2000,
           f"recorded + untimed {recorded + untimed} within a switch's worth of {graph_kernels_run}")
    expect(f"counted as their {graph_kernels_run} kernel nodes" in reason,
           "the storm_guard row says graph launches counted as their kernel nodes")


if __name__ == "__main__":
    mode, session = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
    if mode == "c":
        check_c(db, int(sys.argv[3]))
    elif mode == "torch":
        check_torch(db, int(sys.argv[3]))
    elif mode == "replay":
        check_replay(db)
    elif mode == "range":
        check_range(db)
    elif mode == "storm":
        check_storm(db, int(sys.argv[3]))
    else:
        sys.exit(__doc__)
    sys.exit(1 if failures else 0)
