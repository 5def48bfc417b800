/*
 * recorder.h: the flight recorder, a session participant that keeps a long
 * run's database bounded (docs/cli.md, "Long runs: the flight recorder").
 *
 * With FLARE_KEEP (flare trace --keep DURATION) and/or FLARE_MAX_SIZE
 * (--max-size BYTES), inside the collector's open batches (a pass decides
 * once a second; each batch does its share of the work), it evicts this
 * process's detail rows (kernels, copies, api_calls, scopes,
 * metrics, counter_samples, external_correlations, graph_launches) that
 * ended before the last DURATION, and the oldest more while the database is
 * over about 90% of BYTES; never rows within a second of a deep window or a
 * replay. Evicted kernels, copies, API calls and metric samples leave their
 * per-second totals (kernel_seconds, ...) in the same transaction, and every
 * evicted row is counted in drops (source flight_recorder). The decisions
 * are recorder_plan.h's, the SQL store_evict.h's.
 *
 * Under --max-size the collector also asks it, as it drains, how much a
 * batch may still take (recorder_room), so that no batch, however large
 * the backlog it finds, takes the database past the cap before the
 * recorder's turn. Off (neither variable set) it costs one branch per
 * commit and writes nothing. Threads: begin and end run while the
 * collector does not; batch, committed and room on the collector thread;
 * recorder_stats_get from any thread. Must never keep per-row state (memory stays flat: a bounded
 * table of marks), evict a row younger than the cutoff or one it has not
 * first added to the totals, or block the collector beyond its pass.
 */
#ifndef FLARE_RECORDER_RECORDER_H
#define FLARE_RECORDER_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder/recorder_plan.h"
#include "store/store.h"

/* At session start: reads FLARE_KEEP and FLARE_MAX_SIZE. Unset: off. A bad
 * value (the launcher refuses those first, so one set by hand) is logged,
 * the capability row flight_recorder says why, and the session runs
 * without the recorder. */
void recorder_begin(uint64_t now_ns);
/* The same with settings given (tests, benchmarks); off when neither limit
 * is set. */
void recorder_begin_with(const recorder_settings *settings, uint64_t now_ns);

/* Collector thread, inside the open batch before its commit: a pass when
 * one is due (at most once a second), then this batch's share of the
 * eviction it decided. window_active: a deep window is pending, open or
 * closing now; what it covers stays in detail. */
void recorder_batch(store *database, int64_t pid, uint64_t now_ns, bool window_active);
/* Whether the batch committed: a pass's progress counts only then. */
void recorder_committed(int committed);
/* Collector thread, inside the open batch, as it drains: how many more
 * events the batch may take (recorder_size_room; UINT64_MAX without
 * --max-size or when the size cannot be read). 0: the database is over
 * the share of the cap at which the recorder evicts, so the batch commits
 * first, and its recorder_batch evicts at once, planning again first when
 * the last plan is used up (whatever the time since the last pass). */
uint64_t recorder_room(store *database);
/* After the collector stopped (and as cancel): the recorder is off. */
void recorder_end(void);

/* What the launcher checks before running anything: FLARE_KEEP and
 * FLARE_MAX_SIZE from the environment. 0, or -1 with the reason in error
 * ("FLARE_KEEP: '0s' is less than the minimum, 1s"). */
int recorder_check_environment(char *error, size_t error_size);

/* The committed totals so far, for tests and benchmarks (any thread). */
typedef struct recorder_stats {
    uint64_t passes;           /* passes committed */
    uint64_t urgent_passes;    /* of those, run early: the database near --max-size */
    uint64_t evicted_until_ns; /* the cursor: rows that ended before it may be gone */
    uint64_t evicted_rows;     /* every table, both reasons */
    uint64_t evicted_kernels;
    uint64_t used_bytes; /* the database's used size after the last pass (with --max-size) */
    /* The cursor's rowid in kernels: every kernel row at or below it is gone
     * unless a protected interval holds it (or it was the table's newest
     * row when its pass ran, which the store never evicts). */
    int64_t evicted_kernel_rowid;
} recorder_stats;
void recorder_stats_get(recorder_stats *stats);

#endif /* FLARE_RECORDER_RECORDER_H */
