/*
 * store_evict.h: the flight recorder's SQL (docs/schema.md, "Flight
 * recorder"): evicting a process's oldest detail rows while keeping their
 * per-second totals, and the facts the recorder plans with (the newest
 * rowid of each detail table, the database's used size, the intervals that
 * must stay in detail).
 *
 * Eviction works on rowid ranges, never on an index: the high-rate tables
 * have none (each would cost the writer a B-tree insert per row), and rows
 * are appended in roughly the order they ended. A pass evicts the rows of
 * one process in (lo, hi] of each table that ended before the cutoff and
 * overlap no protected interval; for the tables with totals it first adds
 * exactly those rows to the per-second table (INSERT ... SELECT ... GROUP
 * BY ... ON CONFLICT DO UPDATE), then deletes them, with the same WHERE, in
 * the caller's open batch, under a savepoint: a pass lands whole or not at
 * all. Must never delete the newest row of a table (SQLite would hand its
 * rowid out again, below the recorder's cursor), a row of another process,
 * or a row it did not first add to its totals; and never keep per-row state.
 */
#ifndef FLARE_STORE_STORE_EVICT_H
#define FLARE_STORE_STORE_EVICT_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * The detail tables the recorder evicts. X(id, table, start column, end
 * column, what a drop row calls its rows). A table whose rows are instants
 * names its time column twice; external_correlations has no time at all
 * (empty columns): its rows are evicted by rowid alone (below).
 */
#define STORE_EVICT_TABLES(X)                                                                      \
    X(KERNELS, "kernels", "start_ns", "end_ns", "kernels")                                         \
    X(COPIES, "copies", "start_ns", "end_ns", "copies and memsets")                                \
    X(API_CALLS, "api_calls", "start_ns", "end_ns", "API calls")                                   \
    X(SCOPES, "scopes", "start_ns", "end_ns", "scopes")                                            \
    X(METRICS, "metrics", "time_ns", "time_ns", "metric samples")                                  \
    X(COUNTER_SAMPLES, "counter_samples", "time_ns", "time_ns", "counter samples")                 \
    X(GRAPH_LAUNCHES, "graph_launches", "time_ns", "time_ns", "graph launches")                    \
    X(EXTERNAL_CORRELATIONS, "external_correlations", "", "", "external correlations")

typedef enum store_evict_table {
#define STORE_EVICT_ENUM_(id, table, start, end, label) STORE_EVICT_##id,
    STORE_EVICT_TABLES(STORE_EVICT_ENUM_)
#undef STORE_EVICT_ENUM_
        STORE_EVICT_TABLE_COUNT
} store_evict_table;

/* Protected intervals one pass can honour; the recorder lowers the cutoff
 * below any further one (recorder_plan.h). */
#define STORE_EVICT_INTERVALS_MAX 8

/* The table's name ("kernels") and what its rows are called in drops
 * ("copies and memsets"); NULL for an id out of range. */
const char *store_evict_table_name(store_evict_table table);
const char *store_evict_table_label(store_evict_table table);

typedef struct store_evict_interval {
    uint64_t lo_ns;
    uint64_t hi_ns;
} store_evict_interval;

/* One eviction pass over every detail table, for one process. */
typedef struct store_evict_pass {
    int64_t pid;
    uint64_t session_start_ns; /* session.start_ns: second 0 of the totals */
    uint64_t cutoff_ns;        /* rows that ended at or after it stay */
    /* Per table: rows in (lo, hi] are candidates. hi is lowered to below
     * the table's newest row, and the hi used is written back. */
    int64_t lo[STORE_EVICT_TABLE_COUNT];
    int64_t hi[STORE_EVICT_TABLE_COUNT];
    /* counter_samples only: the lower bound the pass before started from,
     * so the sample it kept as each counter's newest is looked at again. */
    int64_t counter_samples_lo;
    /* Rows overlapping any of these (inclusive) stay; sorted or not. */
    store_evict_interval protect[STORE_EVICT_INTERVALS_MAX];
    size_t protect_count;
} store_evict_pass;

/*
 * Runs a pass inside the open batch (store_begin): for each table, the
 * totals of the rows to evict (kernels, copies, api_calls, metrics), then
 * their DELETE; evicted[t] gets how many rows went. A counter's newest
 * sample in the range is never evicted (its final value stays exact); an
 * external correlation stays when its correlation id lies within those of
 * the pass's protected kernels, copies and API calls. Returns 0; or
 * FLARE_ERR_INVALID_ARGUMENT, FLARE_ERR_STATE (no batch open), or
 * FLARE_ERR_STORE with the error recorded and the pass undone (the batch
 * itself stays usable unless SQLite rolled it back, which marks it failed).
 */
int store_evict_run(store *handle, store_evict_pass *pass,
                    uint64_t evicted[STORE_EVICT_TABLE_COUNT]);

/* The newest rowid of each detail table (0 for an empty table), after
 * writing the batch's buffered rows. 0 or FLARE_ERR_STORE. */
int store_evict_newest_rowids(store *handle, int64_t rowids[STORE_EVICT_TABLE_COUNT]);

/* The database's used size: (page_count - freelist_count) * page_size, as
 * the open batch sees it, and its file size in pages * page_size (what
 * the main file holds once checkpointed). 0 or FLARE_ERR_STORE. */
int store_evict_used_bytes(store *handle, uint64_t *used_bytes, uint64_t *file_bytes);

/* session.start_ns. 0, FLARE_ERR_NOT_FOUND without a session row, or
 * FLARE_ERR_STORE. */
int store_evict_session_start(store *handle, uint64_t *start_ns);

/* Each deep window that opened (opened_ns..closed_ns, or to UINT64_MAX
 * while the row says it never closed) and each replayed launch and span
 * (begin_ns..end_ns), of every process, whose end is at or after since_ns,
 * by start time. callback returns non-zero to stop. 0 or FLARE_ERR_STORE. */
typedef int (*store_evict_interval_callback)(uint64_t lo_ns, uint64_t hi_ns, void *user);
int store_evict_protected(store *handle, uint64_t since_ns, store_evict_interval_callback callback,
                          void *user);

/* Once, before the first pass on this connection: a DELETE no longer
 * zeroes the pages it frees (secure_delete FAST: only within pages written
 * anyway; a freed page's old bytes stay until it is reused). 0 or
 * FLARE_ERR_STORE. */
int store_evict_prepare(store *handle);

/* Keeps the write-ahead log small beside a capped database: checkpoints
 * every cap/16 bytes of log (at most SQLite's usual 10000 pages, at least
 * 64), and the -wal file truncated back to that after each checkpoint.
 * This connection only. 0 or FLARE_ERR_STORE. */
int store_evict_limit_wal(store *handle, uint64_t cap_bytes);

#endif /* FLARE_STORE_STORE_EVICT_H */
