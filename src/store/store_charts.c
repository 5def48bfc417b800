/*
 * store_charts.c: the readers of store_charts.h, for the charts of `flare
 * report --html`: time-ordered kernel intervals, PM samples one by one,
 * scopes in a time range, GPU time per scope name and the log's warnings.
 *
 * Each is one SQL statement walked through store_query_each (the readers'
 * one loop, store_query.c). They must never write a row, and never hold
 * rows in memory: the sorts are SQLite's, which spill to a temporary file.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>

#include "flare/flare.h"
#include "store/store_charts.h"
#include "store/store_internal.h"

/* ---- the session's extent ---- */

static int last_ns_handler(sqlite3_stmt *statement, void *user)
{
    int64_t value = sqlite3_column_int64(statement, 0);
    *(uint64_t *)user = value > 0 ? (uint64_t)value : 0;
    return 1;
}

int store_chart_last_ns(store *handle, uint64_t *last_ns)
{
    if (handle == NULL || last_ns == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *last_ns = 0;
    return store_query_each(handle,
                            "SELECT MAX(x) FROM ("
                            "SELECT MAX(end_ns) AS x FROM kernels"
                            " UNION ALL SELECT MAX(end_ns) FROM copies"
                            " UNION ALL SELECT MAX(end_ns) FROM scopes"
                            " UNION ALL SELECT MAX(time_ns) FROM metrics"
                            " UNION ALL SELECT MAX(end_ns) FROM pm_samples"
                            " UNION ALL SELECT MAX(closed_ns) FROM windows)",
                            NULL, last_ns_handler, last_ns, "cannot read the session's last time");
}

/* ---- kernels as intervals ---- */

static int interval_handler(sqlite3_stmt *statement, void *user)
{
    store_chart_interval row = {
        .device = sqlite3_column_int(statement, 0),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 1),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 2),
    };
    return STORE_READER_CALL(store_chart_interval_callback, &row, user);
}

int store_chart_kernel_intervals(store *handle, int one_process,
                                 store_chart_interval_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    /* With one pid, "pid, start_ns" is start order, and the index's. */
    return store_query_each(handle,
                            one_process ? "SELECT device, start_ns, end_ns FROM kernels"
                                          " WHERE end_ns > start_ns ORDER BY pid, start_ns"
                                        : "SELECT device, start_ns, end_ns FROM kernels"
                                          " WHERE end_ns > start_ns ORDER BY device, start_ns",
                            NULL, interval_handler, &(store_reader_call){&callback, user},
                            "cannot read the kernels' times");
}

/* ---- PM samples ---- */

static int pm_sample_handler(sqlite3_stmt *statement, void *user)
{
    store_pm_row row;
    store_pm_row_read(statement, &row);
    return STORE_READER_CALL(store_chart_pm_callback, &row, user);
}

int store_chart_pm_samples(store *handle, store_chart_pm_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle,
                            "SELECT " STORE_PM_COLUMNS
                            " FROM pm_samples ORDER BY pid, window_id, metric, start_ns, rowid",
                            NULL, pm_sample_handler, &(store_reader_call){&callback, user},
                            "cannot read the PM samples");
}

/* ---- scopes ---- */

static int scope_handler(sqlite3_stmt *statement, void *user)
{
    store_scope_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .thread_id = sqlite3_column_int64(statement, 1),
        .instance_id = (uint64_t)sqlite3_column_int64(statement, 2),
        .name = store_column_text_or_empty(statement, 3),
        .depth = (uint32_t)sqlite3_column_int64(statement, 4),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 5),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 6),
        .still_open = sqlite3_column_int(statement, 7),
    };
    return STORE_READER_CALL(store_export_scope_callback, &row, user);
}

int store_chart_scopes_between(store *handle, int64_t pid, uint64_t from_ns, uint64_t to_ns,
                               store_export_scope_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_params params = {3, {pid, (int64_t)from_ns, (int64_t)to_ns}};
    return store_query_each(handle,
                            "SELECT s.pid, s.thread_id, s.instance_id, n.name, s.depth, s.start_ns,"
                            " s.end_ns, s.still_open FROM scopes s"
                            " LEFT JOIN names n ON n.id = s.name_id"
                            " WHERE s.pid = ?1 AND s.start_ns < ?3 AND s.end_ns > ?2"
                            " ORDER BY s.start_ns, s.depth, s.rowid",
                            &params, scope_handler, &(store_reader_call){&callback, user},
                            "cannot read the scopes");
}

/* ---- GPU time per scope ---- */

static int view_state_handler(sqlite3_stmt *statement, void *user)
{
    int *state = user;
    state[0] = sqlite3_column_int(statement, 0) > 0;
    state[1] = sqlite3_column_int(statement, 1) > 0;
    return 1;
}

int store_chart_scope_view_state(store *handle, int *has_view, int *indexed)
{
    if (handle == NULL || has_view == NULL || indexed == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int state[2] = {0, 0};
    int status = store_query_each(
        handle,
        "SELECT (SELECT COUNT(*) FROM sqlite_schema WHERE type = 'view'"
        " AND name = 'v_scope_gpu_time'),"
        " (SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name = 'kernels_by_start')",
        NULL, view_state_handler, state, "cannot read the schema");
    *has_view = state[0];
    *indexed = state[1];
    return status;
}

static int scope_time_handler(sqlite3_stmt *statement, void *user)
{
    store_chart_scope_time row = {
        .name = store_column_text_or_empty(statement, 0),
        .count = sqlite3_column_int64(statement, 1),
        .duration_ns = (uint64_t)sqlite3_column_int64(statement, 2),
        .gpu_ns = (uint64_t)sqlite3_column_int64(statement, 3),
        .kernels = (uint64_t)sqlite3_column_int64(statement, 4),
    };
    return STORE_READER_CALL(store_chart_scope_time_callback, &row, user);
}

int store_chart_scope_gpu_time(store *handle, int limit, store_chart_scope_time_callback callback,
                               void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_params params = {1, {limit > 0 ? limit : -1}};
    return store_query_each(handle,
                            "SELECT name, COUNT(*), SUM(duration_ns), SUM(gpu_ns), SUM(kernels)"
                            " FROM v_scope_gpu_time GROUP BY name"
                            " ORDER BY SUM(gpu_ns) DESC, SUM(duration_ns) DESC, name LIMIT ?1",
                            &params, scope_time_handler, &(store_reader_call){&callback, user},
                            "cannot read the GPU time of scopes");
}

/* ---- the log ---- */

typedef struct warning_walk {
    store_reader_call call;
    int64_t *total;
} warning_walk;

static int warning_handler(sqlite3_stmt *statement, void *user)
{
    warning_walk *walk = user;
    *walk->total = sqlite3_column_int64(statement, 4);
    store_chart_log_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .time_ns = (uint64_t)sqlite3_column_int64(statement, 1),
        .level = store_column_text_or_empty(statement, 2),
        .message = store_column_text_or_empty(statement, 3),
    };
    return STORE_READER_CALL(store_chart_log_callback, &row, &walk->call);
}

int store_chart_warnings(store *handle, int64_t *total, store_chart_log_callback callback,
                         void *user)
{
    if (handle == NULL || total == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *total = 0;
    warning_walk walk = {{&callback, user}, total};
    return store_query_each(handle,
                            "SELECT pid, time_ns, level, message, COUNT(*) OVER () FROM log"
                            " WHERE level IN ('warning', 'error') ORDER BY time_ns, rowid",
                            NULL, warning_handler, &walk, "cannot read the log");
}
