/*
 * store_charts.h: the readers `flare report --html` draws its charts from
 * (src/cli/report_html*.c): kernels as busy intervals per device in time
 * order, the PM samples of the deep windows one by one, the scopes that
 * overlap a time range, the GPU time of scopes by name (view
 * v_scope_gpu_time), and the log's warnings and errors.
 *
 * Like every reader (store.h, store_export.h) they stream rows to a
 * callback, strings valid during the callback only, and a callback
 * returning non-zero stops the walk (not an error). They must never write:
 * the report opens the session read-only, and may read one still being
 * written. Each returns 0, FLARE_ERR_INVALID_ARGUMENT for a NULL handle or
 * callback, or FLARE_ERR_STORE with a message in store_last_error().
 */
#ifndef FLARE_STORE_STORE_CHARTS_H
#define FLARE_STORE_STORE_CHARTS_H

#include <stdint.h>

#include "store/store.h"
#include "store/store_export.h"
#include "store/store_pm.h"

/* The last time anything in the session happened (flare clock): the
 * greatest end of its kernels, copies, scopes, metric samples, PM samples
 * and windows, into *last_ns (0 when it recorded nothing). For a session
 * that never recorded its end. One scan of each table. */
int store_chart_last_ns(store *store, uint64_t *last_ns);

/* One kernel's run on its device. */
typedef struct store_chart_interval {
    int device;
    uint64_t start_ns;
    uint64_t end_ns;
} store_chart_interval;
typedef int (*store_chart_interval_callback)(const store_chart_interval *row, void *user);

/* Every kernel with an end after its start, each device's by start, so
 * that a caller can merge overlapping kernels into busy time as they
 * come. With one_process set (the session has one process) they come by
 * start, devices interleaved, in the order of the index kernels_by_start
 * when there is one (no sort); otherwise by device, then start (SQLite
 * sorts them in bounded memory: it spills to a temporary file). */
int store_chart_kernel_intervals(store *store, int one_process,
                                 store_chart_interval_callback callback, void *user);

/* Every PM sample value (pm_samples rows) by pid, window, metric, then
 * start, in the writer's row type (store_pm.h): scope_name is NULL for a
 * sample of a range still open, has_scope 0 for one no range covered, and
 * value NaN where it was stored NULL. */
typedef int (*store_chart_pm_callback)(const store_pm_row *row, void *user);
int store_chart_pm_samples(store *store, store_chart_pm_callback callback, void *user);

/* The scopes of process pid that overlap [from_ns, to_ns), by start then
 * depth, in the writer's row type (store.h). */
int store_chart_scopes_between(store *store, int64_t pid, uint64_t from_ns, uint64_t to_ns,
                               store_export_scope_callback callback, void *user);

/* The GPU time of the scopes of one name (v_scope_gpu_time summed by
 * name): the part of each of its process's kernels that ran inside each
 * occurrence. A kernel inside nested scopes counts for each of them. */
typedef struct store_chart_scope_time {
    const char *name;
    int64_t count;        /* occurrences */
    uint64_t duration_ns; /* their wall time, summed */
    uint64_t gpu_ns;      /* kernel time inside them, summed */
    uint64_t kernels;     /* kernels overlapping them, summed */
} store_chart_scope_time;
typedef int (*store_chart_scope_time_callback)(const store_chart_scope_time *row, void *user);

/* Whether the session has the view v_scope_gpu_time (schema 7 and later)
 * and the index that makes it fast (kernels_by_start, built when `flare
 * trace` ends or by `flare index`), into *has_view and *indexed. */
int store_chart_scope_view_state(store *store, int *has_view, int *indexed);

/* Scopes by GPU time, most first, at most limit names (0: all). Needs the
 * view (store_chart_scope_view_state); without its index the view scans
 * every kernel for every scope. */
int store_chart_scope_gpu_time(store *store, int limit, store_chart_scope_time_callback callback,
                               void *user);

/* A line of flare's own log (table log). */
typedef struct store_chart_log_row {
    int64_t pid;
    uint64_t time_ns;
    const char *level;
    const char *message;
} store_chart_log_row;
typedef int (*store_chart_log_callback)(const store_chart_log_row *row, void *user);

/* The log's warnings and errors, by time, and how many there are in all
 * into *total (set before the first callback). */
int store_chart_warnings(store *store, int64_t *total, store_chart_log_callback callback,
                         void *user);

#endif /* FLARE_STORE_STORE_CHARTS_H */
