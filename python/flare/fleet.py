"""flare.fleet: the analysis of many ranks' sessions on Dask (docs/fleet.md,
"Analysis on Dask").

    python3 -m flare.fleet runs/ [--scheduler ADDRESS] [--workers N]
        [--format text|json] [--step NAME] [--top N] [--threshold PCT]
        [--min-excess DURATION]

    tables = flare.fleet.analyse(["runs/"])   # a dict of pandas DataFrames

Each input is a session directory (one rank's, from `flare trace -o
'runs/%r'`, or one holding several rank processes), or a directory whose
subdirectories are sessions. Each session is one Dask task, which opens it
with flare.open on a worker and reads only the columns it needs: first a
survey of its processes, ranks and scope names (cheap), then, once the step
scope is chosen and the ranks are known to be distinct, the step scopes and
kernel intervals, reduced on the worker to a few rows per step and per
kernel name. Only those come back to the client, which matches steps across
ranks by occurrence (the n-th step of every rank is step n) and names, for
each step, the straggler: the rank with the most *work*, its step time
outside NCCL kernels, and how far that exceeds the median of the other
ranks' work. Not the rank with the longest step: in a synchronous job (DDP
and NCCL) the other ranks wait for the straggler inside their collectives,
so every rank's step lasts about as long as its. Without NCCL kernels, work
is step time.

The tables (analyse() returns them as DataFrames; --format json as lists):

* rank_steps: per rank and step, the step's time, the GPU busy time in it (the
  union of the process's kernel intervals, every device together, clipped to
  the step), the time in NCCL kernels in it (names containing "nccl", any
  case; their union, clipped) and its work (step time less NCCL time);
* steps: per step, its straggler, its step time and work, the others'
  median step time and work, and its excess (in ns, and in percent of the
  others' median step time);
* stragglers: the slow steps: those whose excess is above the threshold
  (percent) and above the minimum excess (ns);
* ranks: per rank, its steps, mean step time, how many slow steps it was the
  straggler of, its GPU busy and NCCL shares of step time, and whether its
  session is complete;
* top_kernels: per kernel name, the GPU time summed over ranks, the mean per
  rank and its spread (min, max, coefficient of variation over every rank);
* inputs: the sessions read.

Must never: write to a session; leave a cluster or client it started
running; read a table's columns it does not need; raise anything but
FleetError for a bad input (TypeError/ValueError for a bad argument). Dask
and pandas are imported when analyse() runs, so `import flare` works without
them.
"""
import argparse
import json
import logging
import math
import os
import re
import sys
from fractions import Fraction

from flare import reader

DEFAULT_STEP = "train_step"
DEFAULT_THRESHOLD_PCT = 10.0
DEFAULT_TOP = 10
TEXT_SLOW_STEPS = 40  # rows of the text form's slow steps; JSON and analyse() have all
TEXT_KERNEL_NAME = 60  # the text form cuts longer kernel names; JSON and analyse() keep them
DURATION_UNITS = {"ns": 1, "us": 1000, "ms": 1000000, "s": 1000000000}
INSTALL_HINT = "apt install python3-dask python3-distributed"


class FleetError(Exception):
    """An input the analysis cannot use: no directories, a directory that is not
    a session and holds none, a session the reader refuses, two inputs
    claiming one rank, no step scope anywhere, Dask not installed. The message
    says which and why; `status` is the exit status for the command (2: usage,
    1: the inputs)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


# ---- finding the sessions ----

def find_inputs(paths):
    """The session directories of paths, in order and each once (by real path):
    a path holding session.db is a session; any other directory stands for
    its subdirectories that hold one (one level, sorted by name). FleetError
    for no paths, a path that is missing or not a directory, or one that is
    not a session and holds none."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError("dirs must be a list of directories, not one %s" % type(paths).__name__)
    paths = [os.fsdecode(os.fspath(path)) for path in paths]
    if not paths:
        raise FleetError("no session directories given (give one per rank, or a directory "
                         "holding them)", status=2)
    sessions, seen = [], set()
    for path in paths:
        if not os.path.exists(path):
            raise FleetError("%s: no such directory" % path)
        if not os.path.isdir(path):
            raise FleetError("%s is not a directory (give a session directory, or a directory "
                             "of sessions)" % path)
        if os.path.exists(os.path.join(path, reader.DATABASE_NAME)):
            found = [path]
        else:
            try:
                names = sorted(name for name in os.listdir(path) if not name.startswith("."))
            except OSError as error:
                raise FleetError("cannot read %s: %s" % (path, error.strerror)) from None
            found = [os.path.join(path, name) for name in names
                     if os.path.isfile(os.path.join(path, name, reader.DATABASE_NAME))]
            if not found:
                raise FleetError("%s is not a flare session and holds none (no %s in it or its "
                                 "subdirectories)" % (path, reader.DATABASE_NAME))
        for session in found:
            real = os.path.realpath(session)
            if real not in seen:
                seen.add(real)
                sessions.append(session)
    return sessions


# ---- the tasks: each reads one session, on a worker ----

def _open(directory):
    """The session at directory, read into DataFrames (by the reader's fast
    path: numbers as packed arrays); SessionError as flare.open raises it."""
    return reader.open(directory, pandas=True)


def survey(directory):
    """What one session holds, cheaply: a dict with directory, schema_version,
    notice, session_ended, and processes (one dict each: pid, host, rank,
    world_size, job_id, ended, scopes {name: count}, top_scopes {name: count
    at depth 0}). A session the reader refuses gives {"directory", "error"}
    instead of raising, so that every bad input can be named at once."""
    try:
        with _open(directory) as session:
            facts = session.sql("SELECT end_ns IS NOT NULL AS ended, host FROM session "
                                "WHERE id = 1")
            ended = bool(facts["ended"].iloc[0]) if len(facts) else False
            session_host = str(facts["host"].iloc[0]) if len(facts) else "?"
            processes = session.sql(
                "SELECT p.pid, p.end_ns IS NOT NULL AS ended, r.host, r.rank, r.world_size,"
                " r.job_id FROM processes p LEFT JOIN process_ranks r ON r.pid = p.pid"
                " ORDER BY p.pid")
            scopes = session.sql(
                "SELECT s.pid, n.name, s.depth = 0 AS top, COUNT(*) AS count"
                " FROM scopes s JOIN names n ON n.id = s.name_id GROUP BY 1, 2, 3")
            result = {"directory": directory, "schema_version": session.schema_version,
                      "notice": session.notice, "session_ended": ended, "processes": []}
    except reader.SessionError as error:
        return {"directory": directory, "error": str(error)}
    for row in processes.itertuples(index=False):
        mine = scopes[scopes["pid"] == row.pid]
        counts = mine.groupby("name")["count"].sum()
        top = mine[mine["top"] != 0].groupby("name")["count"].sum()
        result["processes"].append({
            "pid": int(row.pid), "ended": bool(row.ended),
            "host": row.host if isinstance(row.host, str) else session_host,
            "rank": _integer(row.rank), "world_size": _integer(row.world_size),
            "job_id": row.job_id if isinstance(row.job_id, str) else None,
            "scopes": {str(k): int(v) for k, v in counts.items()},
            "top_scopes": {str(k): int(v) for k, v in top.items()}})
    return result


def _integer(value):
    """An int, or None for SQL NULL (NaN in a float column, None in an object one)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def _islands(starts, ends):
    """The union of intervals [starts, ends) as sorted, disjoint islands
    (island_starts, island_ends), by a running maximum of the ends."""
    import numpy
    if len(starts) == 0:
        empty = numpy.zeros(0, numpy.int64)
        return empty, empty
    order = numpy.argsort(starts, kind="stable")
    starts, ends = starts[order], numpy.maximum(ends[order], starts[order])
    reach = numpy.maximum.accumulate(ends)
    new = numpy.empty(len(starts), bool)
    new[0] = True
    new[1:] = starts[1:] > reach[:-1]
    first = numpy.flatnonzero(new)
    last = numpy.append(first[1:] - 1, len(starts) - 1)
    return starts[first], reach[last]


def _covered_before(island_starts, island_ends, times):
    """How much of the islands lies before each of times (an array), vectorised:
    the whole islands that started before it, less the part of the last one
    that reaches past it."""
    import numpy
    cumulative = numpy.concatenate(([0], numpy.cumsum(island_ends - island_starts)))
    started = numpy.searchsorted(island_starts, times, side="right")
    covered = cumulative[started]
    inside = started > 0
    last = started[inside] - 1
    covered[inside] -= numpy.maximum(island_ends[last] - times[inside], 0)
    return covered


def _time_inside(island_starts, island_ends, starts, ends):
    """The islands' time inside each interval [starts[i], ends[i])."""
    return (_covered_before(island_starts, island_ends, ends) -
            _covered_before(island_starts, island_ends, starts))


def measure(directory, pids, step_name):
    """The steps and kernels of the processes pids of one session: a dict with
    steps (a DataFrame: pid, step (1-based occurrence in the process), start_ns,
    duration_ns, gpu_busy_ns, nccl_ns; finished steps only), open_steps
    ({pid: steps the session ended inside, left out}) and kernels (a
    DataFrame: pid, name, count, total_ns), or {"directory", "error"} for a
    session the reader refuses. Reads four columns of kernels, three of the
    step's scopes and the names; the interval arithmetic is numpy's."""
    import numpy
    import pandas
    pids = [int(pid) for pid in pids]
    marks = ",".join("?" * len(pids))
    try:
        with _open(directory) as session:
            scopes = session.sql(
                "SELECT pid, start_ns, end_ns, still_open FROM scopes WHERE pid IN (%s) AND"
                " name_id = (SELECT id FROM names WHERE name = ?)" % marks, pids + [step_name])
            kernels = session.sql(
                "SELECT %sname_id, start_ns, end_ns FROM kernels WHERE pid IN (%s)"
                % ("pid, " if len(pids) > 1 else "", marks), pids)
            names = session.sql("SELECT id, name, name LIKE '%nccl%' AS nccl FROM names")
    except reader.SessionError as error:
        return {"directory": directory, "error": str(error)}

    name_ids = _column(names, "id")
    nccl_ids = name_ids[_column(names, "nccl") != 0]
    k_name = _column(kernels, "name_id")
    k_start, k_end = _column(kernels, "start_ns"), _column(kernels, "end_ns")
    steps, totals, open_steps = [], [], {}
    for pid in pids:
        mine = scopes[scopes["pid"] == pid]
        open_steps[pid] = int((mine["still_open"] != 0).sum())
        mine = mine[mine["still_open"] == 0].sort_values("start_ns", kind="stable")
        start, end = _column(mine, "start_ns"), _column(mine, "end_ns")
        if len(pids) == 1:  # the usual session of one rank: no copies
            p_name, p_start, p_end = k_name, k_start, k_end
        else:
            chosen = _column(kernels, "pid") == pid
            p_name, p_start, p_end = k_name[chosen], k_start[chosen], k_end[chosen]
        is_nccl = numpy.isin(p_name, nccl_ids)
        busy = _time_inside(*_islands(p_start, p_end), start, end)
        nccl = _time_inside(*_islands(p_start[is_nccl], p_end[is_nccl]), start, end)
        steps.append(pandas.DataFrame({
            "pid": numpy.full(len(start), pid, numpy.int64),
            "step": numpy.arange(1, len(start) + 1, dtype=numpy.int64),
            "start_ns": start, "duration_ns": end - start,
            "gpu_busy_ns": busy, "nccl_ns": nccl}))
        # Per name: launches and GPU time (names' ids are small integers).
        size = int(p_name.max()) + 1 if len(p_name) else 0
        count = numpy.bincount(p_name, minlength=size)
        total = numpy.bincount(p_name, weights=p_end - p_start, minlength=size)
        used = numpy.flatnonzero(count)
        totals.append(pandas.DataFrame({
            "pid": numpy.full(len(used), pid, numpy.int64), "name_id": used,
            "count": count[used], "total_ns": numpy.rint(total[used]).astype(numpy.int64)}))
    totals = pandas.concat(totals, ignore_index=True)
    totals["name"] = totals["name_id"].map(pandas.Series(names["name"].to_numpy(),
                                                         index=name_ids))
    return {"directory": directory, "open_steps": open_steps,
            "steps": pandas.concat(steps, ignore_index=True),
            "kernels": totals[["pid", "name", "count", "total_ns"]]}


def _column(frame, name):
    """A column of the reader's DataFrame as int64 numbers (a view of the fast
    path's array; an empty result's column is an empty array)."""
    import numpy
    return frame[name].to_numpy(numpy.int64)


# ---- Dask ----

def _dask():
    """The dask and distributed modules; FleetError naming the packages when
    they or pandas are missing."""
    try:
        import dask
        import distributed
    except ImportError as error:
        raise FleetError("flare.fleet needs Dask (%s): %s" % (error, INSTALL_HINT)) from None
    try:
        import pandas  # noqa: F401 (the tables are DataFrames)
    except ImportError as error:
        raise FleetError("flare.fleet needs pandas (%s): apt install python3-pandas"
                         % error) from None
    return dask, distributed


class _Cluster:
    """A Dask client for the analysis: connected to the scheduler at address, or
    to a local cluster of `workers` worker processes (one thread each; None:
    the CPU count) started for it. Closes what it opened on exit."""

    def __init__(self, scheduler=None, workers=None):
        self.scheduler, self.workers = scheduler, workers
        self.cluster = self.client = None

    def __enter__(self):
        _, distributed = _dask()
        try:
            if self.scheduler is not None:
                self.client = distributed.Client(self.scheduler, timeout="10s")
            else:
                self.cluster = distributed.LocalCluster(
                    n_workers=self.workers or os.cpu_count() or 1, threads_per_worker=1,
                    processes=True, dashboard_address=None, silence_logs=logging.ERROR)
                self.client = distributed.Client(self.cluster)
        except (OSError, TimeoutError, ValueError) as error:
            self.__exit__(None, None, None)
            if self.scheduler is None and isinstance(error, ValueError):
                raise
            where = ("the Dask scheduler at %s" % self.scheduler if self.scheduler is not None
                     else "a local Dask cluster")
            raise FleetError("cannot connect to %s: %s" % (where, error)) from None
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def run(self, function, *arguments_per_task):
        """function over each tuple of arguments, one Dask task each, in order."""
        dask, _ = _dask()
        tasks = [dask.delayed(function, pure=False)(*arguments)
                 for arguments in arguments_per_task]
        try:
            return self.client.gather(self.client.compute(tasks))
        except ImportError as error:  # a worker of a running cluster without flare
            raise FleetError("a Dask worker cannot run the analysis (%s): every worker must "
                             "import flare (PYTHONPATH, or the package installed)" % error) \
                from None

    def __exit__(self, *exception):
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
        return False


# ---- the analysis ----

def _choose_step(surveys, step):
    """(step name, how it was chosen) from the surveys' scope names; FleetError
    listing the names seen when there is no such scope."""
    counts, top = {}, {}
    for found in surveys:
        for process in found["processes"]:
            for name, count in process["scopes"].items():
                counts[name] = counts.get(name, 0) + count
            for name, count in process["top_scopes"].items():
                top[name] = top.get(name, 0) + count
    seen = ", ".join("'%s' (%d)" % (name, count) for name, count in
                     sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:20])
    if step is not None:
        if step not in counts:
            raise FleetError("no scope named '%s' in any session; scope names seen: %s"
                             % (step, seen or "none (no scopes were recorded)"))
        return step, "--step"
    if DEFAULT_STEP in counts:
        return DEFAULT_STEP, "the default"
    if not top:
        raise FleetError("no step scope found in any session: no '%s' scope and no scopes at "
                         "all (record each step in a flare scope or an NVTX range, or name it "
                         "with --step)" % DEFAULT_STEP)
    name = sorted(top.items(), key=lambda item: (-item[1], item[0]))[0][0]
    return name, ("no '%s' scope: the most frequent top-level scope (%d occurrences; --step "
                  "NAME chooses another); scope names seen: %s"
                  % (DEFAULT_STEP, top[name], seen))


def _ranks(surveys, step_name):
    """One dict per rank (a process with a rank, or one without that recorded
    the step, named host:pid): label, rank, pid, host, directory, complete,
    status. FleetError when two processes claim one rank."""
    ranks, claimed = [], {}
    for found in surveys:
        for process in found["processes"]:
            if process["rank"] is None and step_name not in process["scopes"]:
                continue  # a launcher, a helper: no rank and no steps
            label = (str(process["rank"]) if process["rank"] is not None
                     else "%s:%d" % (process["host"], process["pid"]))
            if label in claimed:
                other = claimed[label]
                raise FleetError("rank %s is claimed by two inputs: %s (pid %d) and %s (pid %d); "
                                 "give each rank once" % (label, other["directory"], other["pid"],
                                                          found["directory"], process["pid"]))
            if not process["ended"]:
                status = "incomplete: its process never ended (it crashed or was killed)"
            elif not found["session_ended"]:
                status = "incomplete: its session never ended"
            else:
                status = "complete"
            rank = dict(process, label=label, directory=found["directory"],
                        complete=status == "complete", status=status)
            claimed[label] = rank
            ranks.append(rank)
    ranks.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0, r["label"]))
    return ranks


def _others_median(values, group_starts, sizes):
    """For groups of values sorted ascending within each group (group i is
    values[group_starts[i]:group_starts[i] + sizes[i]]), the median of each
    group without its last (largest) value; NaN for groups of one."""
    import numpy
    others = sizes - 1
    low = group_starts + numpy.maximum(others - 1, 0) // 2
    high = group_starts + numpy.maximum(others, 1) // 2
    median = (values[low] + values[high]) / 2.0
    return numpy.where(others > 0, median, numpy.nan)


# The columns of the steps table, in order (stragglers: all but slow).
STEP_COLUMNS = ["step", "ranks", "median_ns", "straggler", "straggler_ns", "straggler_work_ns",
                "others_median_ns", "others_work_median_ns", "excess_ns", "excess_pct", "slow"]


def _step_table(rank_steps, threshold, min_excess_ns=0):
    """Per step (across ranks): ranks, median_ns (of every rank's step time),
    straggler (the rank with the most work: step time less NCCL time),
    straggler_ns and straggler_work_ns (its step time and work),
    others_median_ns and others_work_median_ns (the other ranks' medians of
    the same), excess_ns (its work less the others' median work), excess_pct
    (excess_ns in percent of others_median_ns), slow (excess_pct above
    threshold and excess_ns above min_excess_ns). rank_steps needs rank,
    order, step, duration_ns and nccl_ns. Vectorised: sorted by step then
    work, the straggler is each group's last row; sorted again by step then
    step time with the straggler's moved last, the others' median step time
    comes the same way. A step of one rank has no others (NaN) and no
    straggler (None)."""
    import numpy
    import pandas
    if len(rank_steps) == 0:
        empty = {column: [] for column in STEP_COLUMNS}
        empty.update(step=numpy.zeros(0, numpy.int64), ranks=numpy.zeros(0, numpy.int64),
                     straggler=numpy.zeros(0, object), slow=numpy.zeros(0, bool))
        return pandas.DataFrame(empty)[STEP_COLUMNS]
    ordered = rank_steps.assign(work_ns=rank_steps["duration_ns"] - rank_steps["nccl_ns"])
    ordered = ordered.sort_values(["step", "work_ns", "order"], kind="stable")
    works = ordered["work_ns"].to_numpy(numpy.float64)
    durations = ordered["duration_ns"].to_numpy(numpy.float64)
    steps = ordered["step"].to_numpy()
    starts = numpy.flatnonzero(numpy.r_[True, steps[1:] != steps[:-1]])
    sizes = numpy.diff(numpy.r_[starts, len(steps)])
    last = starts + sizes - 1
    others_work = _others_median(works, starts, sizes)
    others_key = durations.copy()
    others_key[last] = numpy.inf  # the straggler's step time sorts last in its step
    others = _others_median(others_key[numpy.lexsort((others_key, steps))], starts, sizes)
    excess = works[last] - others_work
    with numpy.errstate(divide="ignore", invalid="ignore"):
        percent = numpy.where(others > 0, excess * 100.0 / others, numpy.nan)
    medians = ordered.groupby("step", sort=True)["duration_ns"].median().to_numpy()
    table = pandas.DataFrame({
        "step": steps[starts], "ranks": sizes, "median_ns": medians,
        "straggler": numpy.where(sizes > 1, ordered["rank"].to_numpy()[last], None),
        "straggler_ns": durations[last], "straggler_work_ns": works[last],
        "others_median_ns": others, "others_work_median_ns": others_work,
        "excess_ns": excess, "excess_pct": percent})
    table["slow"] = (table["excess_pct"] > threshold) & (table["excess_ns"] > min_excess_ns)
    return table


def _check_arguments(step, scheduler, workers, threshold, top, min_excess_ns):
    """TypeError or ValueError, saying which, for a bad argument of analyse()."""
    if step is not None and (not isinstance(step, str) or not step):
        raise TypeError("step must be a scope name (str), not %r" % (step,))
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError("workers must be an int of 1 or more, not %r" % (workers,))
    if scheduler is not None and not isinstance(scheduler, str):
        raise TypeError("scheduler must be an address (str), not %r" % (scheduler,))
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or \
            not threshold >= 0:
        raise ValueError("threshold must be a percentage of 0 or more, not %r" % (threshold,))
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError("top must be an int of 1 or more, not %r" % (top,))
    if isinstance(min_excess_ns, bool) or not isinstance(min_excess_ns, int) or \
            min_excess_ns < 0:
        raise ValueError("min_excess_ns must be an int of 0 or more (ns), not %r"
                         % (min_excess_ns,))


def analyse(dirs, step=None, scheduler=None, workers=None, threshold=DEFAULT_THRESHOLD_PCT,
            top=DEFAULT_TOP, min_excess_ns=0):
    """The fleet analysis of the sessions in dirs (session directories, or
    directories of them), on Dask: a local cluster of `workers` processes
    (None: the CPU count), or the running cluster whose scheduler is at
    `scheduler` (its workers must import flare and read the same paths).
    step: the scope or NVTX range that is one step (None: 'train_step', else
    the most frequent top-level scope). Each step's straggler is the rank
    with the most work (step time outside NCCL kernels), and its excess is
    that less the other ranks' median work. A step is slow when its excess
    is above threshold percent of the others' median step time and above
    min_excess_ns (an int of ns; 0, the default, does not filter). top: how
    many kernel names top_kernels keeps.

    Returns a dict: the DataFrames 'ranks', 'steps', 'stragglers',
    'top_kernels', 'rank_steps' and 'inputs' (docs/fleet.md has their
    columns), 'step_name' (str) and 'notes' (a list of str: how the step was
    chosen, incomplete ranks, skipped steps). Times in ns, shares in percent.
    Raises FleetError for a bad input (its message says which and why),
    TypeError/ValueError for a bad argument."""
    _check_arguments(step, scheduler, workers, threshold, top, min_excess_ns)
    directories = [os.path.abspath(path) for path in find_inputs(dirs)]
    _dask()
    import pandas

    with _Cluster(scheduler, workers) as cluster:
        surveys = cluster.run(survey, *[(directory,) for directory in directories])
        _raise_errors(surveys)
        step_name, chosen_by = _choose_step(surveys, step)
        ranks = _ranks(surveys, step_name)
        if not ranks:
            raise FleetError("no rank in the sessions: no process has a rank or recorded a "
                             "'%s' scope" % step_name)
        work = [(found["directory"], [r["pid"] for r in ranks
                                      if r["directory"] == found["directory"]], step_name)
                for found in surveys]
        work = [task for task in work if task[1]]
        measured = cluster.run(measure, *work)
        _raise_errors(measured)

    by_process = {(r["directory"], r["pid"]): r for r in ranks}
    order = {r["label"]: index for index, r in enumerate(ranks)}
    step_frames, kernel_frames, notes = [], [], []
    if chosen_by == "--step":
        notes.append("step: '%s' (--step)" % step_name)
    elif chosen_by == "the default":
        notes.append("step: '%s' (the default)" % step_name)
    else:
        notes.append("step: '%s' (%s)" % (step_name, chosen_by))
    for result in measured:
        for pid, count in result["open_steps"].items():
            rank = by_process[(result["directory"], pid)]
            rank["open_steps"] = count
        for frame, into in ((result["steps"], step_frames), (result["kernels"], kernel_frames)):
            frame = frame.copy()
            frame["rank"] = [by_process[(result["directory"], pid)]["label"]
                             for pid in frame["pid"]]
            into.append(frame.drop(columns="pid"))
    rank_steps = pandas.concat(step_frames, ignore_index=True)
    rank_steps["order"] = rank_steps["rank"].map(order)
    rank_steps = rank_steps.sort_values(["order", "step"], kind="stable")
    steps = _step_table(rank_steps, threshold, min_excess_ns)
    rank_steps = rank_steps.drop(columns="order").reset_index(drop=True)
    rank_steps["work_ns"] = rank_steps["duration_ns"] - rank_steps["nccl_ns"]
    rank_steps = rank_steps[["rank", "step", "start_ns", "duration_ns", "gpu_busy_ns",
                             "nccl_ns", "work_ns"]]
    stragglers = steps[steps["slow"]].drop(columns="slow").reset_index(drop=True)

    for rank in ranks:
        if not rank["complete"]:
            notes.append("rank %s is %s; its data is used as far as it goes" %
                         (rank["label"], rank["status"]))
        if rank.get("open_steps"):
            notes.append("rank %s: %d '%s' step(s) the session ended inside were left out"
                         % (rank["label"], rank["open_steps"], step_name))
    _note_missing_ranks(ranks, notes)
    counts = rank_steps.groupby("rank")["step"].count().reindex(list(order), fill_value=0)
    if len(counts) and counts.min() != counts.max():
        notes.append("ranks recorded different numbers of steps (%d to %d): later steps compare "
                     "fewer ranks" % (counts.min(), counts.max()))

    return {"step_name": step_name, "notes": notes,
            "ranks": _rank_table(ranks, rank_steps, stragglers),
            "steps": steps, "stragglers": stragglers,
            "top_kernels": _kernel_table(kernel_frames, ranks, top),
            "rank_steps": rank_steps,
            "inputs": _input_table(surveys, ranks)}


def _raise_errors(results):
    """FleetError naming every session a task could not read."""
    errors = [result["error"] for result in results if "error" in result]
    if errors:
        raise FleetError("\n".join(errors))


def _note_missing_ranks(ranks, notes):
    """A note when the ranks say how many there should be and some are absent."""
    sizes = {r["world_size"] for r in ranks if r["world_size"] is not None}
    present = {r["rank"] for r in ranks if r["rank"] is not None}
    if len(sizes) == 1:
        size = sizes.pop()
        missing = sorted(set(range(size)) - present)
        if missing:
            shown = ", ".join(str(rank) for rank in missing[:20])
            notes.append("world size %d, but no session of rank(s) %s%s" %
                         (size, shown, ", ..." if len(missing) > 20 else ""))


def _rank_table(ranks, rank_steps, stragglers):
    """Per rank: rank, steps, mean_step_ns, straggler_steps (slow steps it was
    the straggler of), step_ns, gpu_busy_ns, nccl_ns, gpu_busy_pct, nccl_pct
    (of its step time), status, pid, host, directory."""
    import numpy
    import pandas
    sums = rank_steps.groupby("rank")[["duration_ns", "gpu_busy_ns", "nccl_ns"]].sum()
    counts = rank_steps.groupby("rank")["step"].count()
    means = rank_steps.groupby("rank")["duration_ns"].mean()
    slow = stragglers["straggler"].value_counts()
    rows = []
    for rank in ranks:
        label = rank["label"]
        step_ns = int(sums["duration_ns"].get(label, 0))
        busy = int(sums["gpu_busy_ns"].get(label, 0))
        nccl = int(sums["nccl_ns"].get(label, 0))
        rows.append({"rank": label, "steps": int(counts.get(label, 0)),
                     "mean_step_ns": float(means.get(label, numpy.nan)),
                     "straggler_steps": int(slow.get(label, 0)), "step_ns": step_ns,
                     "gpu_busy_ns": busy, "nccl_ns": nccl,
                     "gpu_busy_pct": busy * 100.0 / step_ns if step_ns else numpy.nan,
                     "nccl_pct": nccl * 100.0 / step_ns if step_ns else numpy.nan,
                     "status": "complete" if rank["complete"] else "incomplete",
                     "pid": rank["pid"], "host": rank["host"], "directory": rank["directory"]})
    return pandas.DataFrame(rows)


def _kernel_table(kernel_frames, ranks, top):
    """Per kernel name, the top by GPU time summed over ranks: name, launches,
    total_ns, mean_ns (per rank), min_ns, max_ns (of a rank; 0 for a rank that
    never ran it), cv (standard deviation over mean, of the per-rank totals)."""
    import pandas
    columns = ["name", "launches", "total_ns", "mean_ns", "min_ns", "max_ns", "cv"]
    kernels = pandas.concat(kernel_frames, ignore_index=True)
    if len(kernels) == 0:
        return pandas.DataFrame({column: [] for column in columns})
    per_rank = (kernels.pivot_table(index="name", columns="rank", values="total_ns",
                                    aggfunc="sum", fill_value=0)
                .reindex(columns=[r["label"] for r in ranks], fill_value=0))
    table = pandas.DataFrame({
        "launches": kernels.groupby("name")["count"].sum(),
        "total_ns": per_rank.sum(axis=1), "mean_ns": per_rank.mean(axis=1),
        "min_ns": per_rank.min(axis=1), "max_ns": per_rank.max(axis=1),
        "cv": per_rank.std(axis=1, ddof=0) / per_rank.mean(axis=1)})
    table = table.sort_values(["total_ns"], ascending=False, kind="stable").head(top)
    return table.rename_axis("name").reset_index()[columns]


def _input_table(surveys, ranks):
    """Per session read: directory, schema_version, processes, ranks (their
    labels, comma-separated), complete, notice."""
    import pandas
    rows = []
    for found in surveys:
        mine = [r for r in ranks if r["directory"] == found["directory"]]
        rows.append({"directory": found["directory"], "schema_version": found["schema_version"],
                     "processes": len(found["processes"]),
                     "ranks": ",".join(r["label"] for r in mine),
                     "complete": all(r["complete"] for r in mine) and found["session_ended"],
                     "notice": found["notice"]})
    return pandas.DataFrame(rows)


# ---- output ----

def _plain(value):
    """A JSON value of a cell: NaN and None as null, numpy scalars as Python's."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return round(value, 3)
    return value


def _records(frame):
    return [{column: _plain(value) for column, value in zip(frame.columns, row)}
            for row in frame.itertuples(index=False)]


def to_json(result, threshold, min_excess_ns=0):
    """The analysis as one JSON-ready dict: step_name, threshold_pct,
    min_excess_ns, notes, ranks, steps, stragglers, top_kernels, inputs (lists
    of row objects; kernel names in full)."""
    return {"step_name": result["step_name"], "threshold_pct": threshold,
            "min_excess_ns": min_excess_ns, "notes": result["notes"],
            "ranks": _records(result["ranks"]), "steps": _records(result["steps"]),
            "stragglers": _records(result["stragglers"]),
            "top_kernels": _records(result["top_kernels"]), "inputs": _records(result["inputs"])}


def _ms(value):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else "%.2f" % (value / 1e6)


def _pct(value):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else "%.1f" % value


def _table(headers, rows, left=()):
    """Aligned text: numbers right-aligned, the columns in left left-aligned."""
    widths = [max([len(header)] + [len(row[i]) for row in rows])
              for i, header in enumerate(headers)]

    def line(cells):
        return "  " + "  ".join(cell.ljust(width) if i in left else cell.rjust(width)
                                for i, (cell, width) in enumerate(zip(cells, widths))).rstrip()
    return [line(headers)] + [line(row) for row in rows]


def _duration_text(ns):
    """ns as milliseconds, without trailing zeros: 500000 -> '0.5 ms'."""
    return "%s ms" % ("%.6f" % (ns / 1e6)).rstrip("0").rstrip(".")


def _cut(name, width=TEXT_KERNEL_NAME):
    """name, or its first width - 3 characters and '...' when it is longer."""
    return name if len(name) <= width else name[:width - 3] + "..."


def _slow_step_lines(steps, stragglers, threshold, min_excess_ns):
    """The text form's slow steps: the heading, a note when most steps are
    slow, and the table (the TEXT_SLOW_STEPS with the largest excess)."""
    lines = ["Slow steps: %d of %d (the straggler, the rank with the most time outside NCCL "
             "kernels, exceeded the other ranks' median of it by more than %g%% of their median "
             "step time and by more than %s)"
             % (len(stragglers), len(steps), threshold, _duration_text(min_excess_ns))]
    if len(stragglers) >= 4 and len(stragglers) * 2 > len(steps):
        lines.append("  note: most steps are slow; the median excess of all steps, %s ms (%s%%), "
                     "is this job's own jitter: raise --threshold or set --min-excess above it"
                     % (_ms(steps["excess_ns"].median()), _pct(steps["excess_pct"].median())))
    shown = stragglers
    if len(stragglers) > TEXT_SLOW_STEPS:
        shown = stragglers.nlargest(TEXT_SLOW_STEPS, "excess_pct").sort_values("step")
        lines.append("  the %d with the largest excess (--format json lists all)"
                     % TEXT_SLOW_STEPS)
    if len(shown) == 0:
        return lines + ["  none"]
    return lines + _table(
        ["step", "ranks", "straggler", "its ms", "its ms outside NCCL",
         "others' median ms outside NCCL", "excess ms", "excess %"],
        [[str(row.step), str(row.ranks), str(row.straggler), _ms(row.straggler_ns),
          _ms(row.straggler_work_ns), _ms(row.others_work_median_ns), _ms(row.excess_ns),
          _pct(row.excess_pct)] for row in shown.itertuples()])


def to_text(result, threshold, min_excess_ns=0):
    """The analysis as readable, aligned text tables (a list of lines); kernel
    names longer than TEXT_KERNEL_NAME characters are cut."""
    ranks, steps, stragglers = result["ranks"], result["steps"], result["stragglers"]
    incomplete = int((ranks["status"] != "complete").sum())
    lines = ["flare fleet: %d rank(s) from %d session(s), %d step(s) of '%s'%s"
             % (len(ranks), len(result["inputs"]), len(steps), result["step_name"],
                ", %d incomplete" % incomplete if incomplete else "")]
    lines += ["  " + note for note in result["notes"]]
    lines += [""] + _slow_step_lines(steps, stragglers, threshold, min_excess_ns)
    lines += ["", "Ranks (shares of step time)"]
    lines += _table(["rank", "steps", "mean step ms", "straggler of", "GPU busy %", "NCCL %",
                     "status", "session"],
                    [[str(row.rank), str(row.steps), _ms(row.mean_step_ns),
                      str(row.straggler_steps), _pct(row.gpu_busy_pct), _pct(row.nccl_pct),
                      row.status, row.directory] for row in ranks.itertuples()],
                    left=(0, 6, 7))
    lines += ["", "Top kernels across ranks (GPU time; per rank: mean, min, max, coefficient "
              "of variation)"]
    if len(result["top_kernels"]) == 0:
        return lines + ["  none (no kernels recorded)"]
    lines += _table(["kernel", "launches", "total ms", "mean ms", "min ms", "max ms", "CV"],
                    [[_cut(str(row.name)), str(row.launches), _ms(row.total_ns),
                      _ms(row.mean_ns), _ms(row.min_ns), _ms(row.max_ns),
                      "-" if math.isnan(row.cv) else "%.3f" % row.cv]
                     for row in result["top_kernels"].itertuples()], left=(0,))
    return lines


def parse_duration(text):
    """The nanoseconds of a duration written as a number and a unit, ns, us, ms
    or s, with no space (500us, 1ms, 2.5ms, 1s), or a bare 0. ValueError,
    its message saying what is wrong, for anything else: no unit, a space, a
    sign, a fraction of a nanosecond."""
    match = re.fullmatch(r"([-+]?)(\d+(?:\.\d+)?)(ns|us|ms|s)?", text)
    if match is None:
        raise ValueError("'%s' is not a duration: want a number and a unit, ns, us, ms or s, "
                         "with no space (500us, 1ms, 2.5ms), or 0" % text)
    sign, number, unit = match.groups()
    if sign:
        raise ValueError("'%s': want a duration of 0 or more, with no sign" % text)
    value = Fraction(number)
    if unit is None and value != 0:
        raise ValueError("'%s' has no unit: write %sns, %sus, %sms or %ss"
                         % ((text,) + (number,) * 4))
    ns = value * DURATION_UNITS[unit or "ns"]
    if ns.denominator != 1:
        raise ValueError("'%s' is not a whole number of nanoseconds" % text)
    return int(ns)


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m flare.fleet",
        description="Steps, stragglers and kernels across the ranks of a distributed job, "
                    "from one flare session per rank (or one session of many ranks), on Dask "
                    "(docs/fleet.md).")
    parser.add_argument("dirs", nargs="*", metavar="DIR",
                        help="a session directory, or a directory of session directories")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="the scheduler of a running Dask cluster (tcp://HOST:8786); "
                             "default: a local cluster")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="worker processes of the local cluster (default: the CPU count)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--step", metavar="NAME",
                        help="the scope or NVTX range that is one step (default: train_step, "
                             "else the most frequent top-level scope)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                        help="kernel names in the top kernels (default %d)" % DEFAULT_TOP)
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                        help="a step is slow when its straggler's excess (its time outside "
                             "NCCL less the others' median of it) is more than PCT percent of "
                             "the others' median step time (default %g)" % DEFAULT_THRESHOLD_PCT)
    parser.add_argument("--min-excess", default="0", metavar="DURATION",
                        help="and only when that excess is more than DURATION (500us, 1ms, "
                             "2.5ms, 1s; default 0: any)")
    arguments = parser.parse_args(argv)
    if not arguments.dirs:
        parser.error("no session directories given (give one per rank, or a directory "
                     "holding them)")
    if arguments.workers is not None and arguments.workers < 1:
        parser.error("--workers must be 1 or more")
    if arguments.scheduler is not None and arguments.workers is not None:
        parser.error("--workers sizes a local cluster; with --scheduler the cluster is "
                     "already running")
    if arguments.top < 1:
        parser.error("--top must be 1 or more")
    if not arguments.threshold >= 0 or math.isinf(arguments.threshold):
        parser.error("--threshold must be a percentage of 0 or more")
    if arguments.step is not None and not arguments.step:
        parser.error("--step needs a scope name")
    try:
        arguments.min_excess_ns = parse_duration(arguments.min_excess)
    except ValueError as error:
        parser.error("--min-excess %s" % error)
    return arguments


def main(argv=None):
    """The command: python3 -m flare.fleet DIR... Returns the exit status: 0,
    1 for bad input (a message on stderr), 2 for bad usage."""
    arguments = _arguments(argv)
    try:
        result = analyse(arguments.dirs, step=arguments.step, scheduler=arguments.scheduler,
                         workers=arguments.workers, threshold=arguments.threshold,
                         top=arguments.top, min_excess_ns=arguments.min_excess_ns)
    except FleetError as error:
        for line in str(error).splitlines():
            print("flare.fleet: %s" % line, file=sys.stderr)
        return error.status
    if arguments.format == "json":
        json.dump(to_json(result, arguments.threshold, arguments.min_excess_ns), sys.stdout,
                  indent=1)
        sys.stdout.write("\n")
    else:
        print("\n".join(to_text(result, arguments.threshold, arguments.min_excess_ns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
