/*
 * store_export_flare.c: the streaming readers the Perfetto export needs
 * beyond the plain tables of store_export.c (store_export.h, "Readers for
 * the complete trace"): kernels and copies with the API call that launched
 * them, application counter samples, PM samples, the windows a crash left
 * without a row, the launches of a replayed kernel's name matched to kernel
 * rows, and one replayed launch with its metrics.
 *
 * Each reader runs one SELECT and hands rows to its caller as SQLite steps
 * through them. It must never collect rows in memory, never sort a
 * high-rate table whole (the one join over kernels and api_calls lets
 * SQLite build a temporary index of api_calls in its temporary store, on
 * disk past a few megabytes of cache, never in this process's heap beyond
 * that), and never write: an export must not change the session it
 * exports, and a READ handle could not anyway.
 */
#include <math.h>
#include <stddef.h>

#include "flare/flare.h"
#include "store/store_export.h"
#include "store/store_internal.h"

/* ---- shared ---- */

/* The address of the caller's typed callback, as store_reader_call wants
 * it; NULL when the callback is NULL (the walk then refuses it). */
#define EXPORT_FLARE_CALLBACK(callback) ((callback) != NULL ? (const void *)&(callback) : NULL)

/* Steps through sql (with params, or NULL) handing each row to handler,
 * which converts it and calls the caller's callback. Same returns as the
 * other export readers. */
static int export_flare_walk(store *handle, const char *sql, const store_params *params,
                             const char *what, store_row_handler handler, const void *callback,
                             void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_reader_call call = {callback, user};
    return store_query_each(handle, sql, params, handler, &call, what);
}

/* Whether the session has table: 1, 0 (a session of an older flare), or
 * -1 with the error recorded. */
static int export_flare_has_table(store *handle, const char *table)
{
    sqlite3_stmt *statement = NULL;
    if (store_prepare(handle,
                      "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                      &statement, "cannot read the schema") != 0)
        return -1;
    sqlite3_bind_text(statement, 1, table, -1, SQLITE_STATIC);
    int found = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        found = sqlite3_column_int(statement, 0) > 0;
    else
        store_set_sqlite_error(handle, "cannot read the schema");
    sqlite3_finalize(statement);
    return found;
}

/* ---- kernels and copies with their API calls ---- */

/* What the kernel and copy readers add to each row: rowid first (a
 * duplicated api_calls row would repeat a kernel; the handler drops the
 * repeat), the call's thread and start last. */
typedef struct export_linked_walk {
    store_reader_call call;
    int64_t last_rowid;
    int any_row;
} export_linked_walk;

/* Fills link from the columns at first (thread_id, start_ns; NULL when no
 * call matched). */
static void export_call_link(sqlite3_stmt *statement, int first, store_export_call_link *link)
{
    link->has_call = sqlite3_column_type(statement, first) != SQLITE_NULL;
    link->thread_id = sqlite3_column_int64(statement, first);
    link->start_ns = (uint64_t)sqlite3_column_int64(statement, first + 1);
}

/* 1 when this row repeats the previous one's GPU row (two api_calls rows
 * of one correlation id): the repeat is skipped, so that every kernel and
 * copy is written once. */
static int export_linked_repeat(export_linked_walk *walk, sqlite3_stmt *statement)
{
    int64_t rowid = sqlite3_column_int64(statement, 0);
    int repeat = walk->any_row && rowid == walk->last_rowid;
    walk->any_row = 1;
    walk->last_rowid = rowid;
    return repeat;
}

static int export_linked_kernel_handler(sqlite3_stmt *statement, void *user)
{
    export_linked_walk *walk = user;
    if (export_linked_repeat(walk, statement))
        return 0;
    store_kernel_row row = {
        .pid = sqlite3_column_int64(statement, 1),
        .device = sqlite3_column_int(statement, 2),
        .stream_id = (uint64_t)sqlite3_column_int64(statement, 3),
        .correlation_id = (uint64_t)sqlite3_column_int64(statement, 4),
        .name = store_column_text_or_empty(statement, 5),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 6),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 7),
        .grid = {(uint32_t)sqlite3_column_int64(statement, 8),
                 (uint32_t)sqlite3_column_int64(statement, 9),
                 (uint32_t)sqlite3_column_int64(statement, 10)},
        .block = {(uint32_t)sqlite3_column_int64(statement, 11),
                  (uint32_t)sqlite3_column_int64(statement, 12),
                  (uint32_t)sqlite3_column_int64(statement, 13)},
        .shared_memory_bytes = (uint32_t)sqlite3_column_int64(statement, 14),
        .registers_per_thread = (uint32_t)sqlite3_column_int64(statement, 15),
        .context_id = (uint64_t)sqlite3_column_int64(statement, 16),
        .graph_id = (uint32_t)sqlite3_column_int64(statement, 17),
        .graph_node_id = (uint64_t)sqlite3_column_int64(statement, 18),
    };
    store_export_call_link link;
    export_call_link(statement, 19, &link);
    const store_reader_call *call = &walk->call;
    return (*(const store_export_linked_kernel_callback *)call->callback)(&row, &link,
                                                                          call->user) != 0;
}

#define EXPORT_KERNEL_COLUMNS                                                                      \
    "SELECT k.rowid, k.pid, k.device, k.stream_id, k.correlation_id, n.name, k.start_ns,"          \
    " k.end_ns, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,"                    \
    " k.shared_memory_bytes, k.registers_per_thread, k.context_id, k.graph_id, k.graph_node_id"

/*
 * The LEFT JOIN on (pid, correlation_id) has no index to use in a saved
 * session (the collector writes none on api_calls: each would cost it a
 * B-tree insert per call); SQLite builds an automatic one over api_calls
 * for the statement, once (about 1 s for 1,000,000 calls on the 2-core
 * development VM, docs/PERFORMANCE.md), in its temporary store.
 */
int store_export_kernels_linked(store *handle, store_export_linked_kernel_callback callback,
                                void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int calls = export_flare_has_table(handle, "api_calls");
    if (calls < 0)
        return FLARE_ERR_STORE;
    const char *sql =
        calls ? EXPORT_KERNEL_COLUMNS
            ", a.thread_id, a.start_ns FROM kernels k"
            " LEFT JOIN names n ON n.id = k.name_id"
            " LEFT JOIN api_calls a ON a.pid = k.pid AND a.correlation_id = k.correlation_id"
            " ORDER BY k.rowid"
              : EXPORT_KERNEL_COLUMNS ", NULL, NULL FROM kernels k"
                                      " LEFT JOIN names n ON n.id = k.name_id ORDER BY k.rowid";
    export_linked_walk walk = {{EXPORT_FLARE_CALLBACK(callback), user}, 0, 0};
    return store_query_each(handle, sql, NULL, export_linked_kernel_handler, &walk,
                            "cannot read kernels");
}

static int export_linked_copy_handler(sqlite3_stmt *statement, void *user)
{
    export_linked_walk *walk = user;
    if (export_linked_repeat(walk, statement))
        return 0;
    store_copy_row row = {
        .pid = sqlite3_column_int64(statement, 1),
        .device = sqlite3_column_int(statement, 2),
        .stream_id = (uint64_t)sqlite3_column_int64(statement, 3),
        .correlation_id = (uint64_t)sqlite3_column_int64(statement, 4),
        .is_memset = sqlite3_column_int(statement, 5),
        .copy_kind = sqlite3_column_int(statement, 6),
        .bytes = (uint64_t)sqlite3_column_int64(statement, 7),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 8),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 9),
        .status = sqlite3_column_int(statement, 10),
        .graph_id = (uint32_t)sqlite3_column_int64(statement, 11),
        .graph_node_id = (uint64_t)sqlite3_column_int64(statement, 12),
    };
    store_export_call_link link;
    export_call_link(statement, 13, &link);
    const store_reader_call *call = &walk->call;
    return (*(const store_export_linked_copy_callback *)call->callback)(&row, &link, call->user) !=
           0;
}

#define EXPORT_COPY_COLUMNS                                                                        \
    "SELECT c.rowid, c.pid, c.device, c.stream_id, c.correlation_id, c.is_memset, c.copy_kind,"    \
    " c.bytes, c.start_ns, c.end_ns, c.status, c.graph_id, c.graph_node_id"

int store_export_copies_linked(store *handle, store_export_linked_copy_callback callback,
                               void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int calls = export_flare_has_table(handle, "api_calls");
    if (calls < 0)
        return FLARE_ERR_STORE;
    const char *sql =
        calls ? EXPORT_COPY_COLUMNS
            ", a.thread_id, a.start_ns FROM copies c"
            " LEFT JOIN api_calls a ON a.pid = c.pid AND a.correlation_id = c.correlation_id"
            " ORDER BY c.rowid"
              : EXPORT_COPY_COLUMNS ", NULL, NULL FROM copies c ORDER BY c.rowid";
    export_linked_walk walk = {{EXPORT_FLARE_CALLBACK(callback), user}, 0, 0};
    return store_query_each(handle, sql, NULL, export_linked_copy_handler, &walk,
                            "cannot read copies");
}

/* ---- application counters ---- */

static int export_counter_sample_handler(sqlite3_stmt *statement, void *user)
{
    store_export_counter_sample_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .index = (uint32_t)sqlite3_column_int64(statement, 1),
        .name = store_column_text_or_empty(statement, 2),
        .time_ns = (uint64_t)sqlite3_column_int64(statement, 3),
        .value = (uint64_t)sqlite3_column_int64(statement, 4),
    };
    return STORE_READER_CALL(store_export_counter_sample_callback, &row, user);
}

int store_export_counter_samples(store *handle, store_export_counter_sample_callback callback,
                                 void *user)
{
    /* counters' primary key (pid, counter) makes the join a lookup. */
    return export_flare_walk(handle,
                             "SELECT s.pid, s.counter, c.name, s.time_ns, s.value"
                             " FROM counter_samples s"
                             " LEFT JOIN counters c ON c.pid = s.pid AND c.counter = s.counter"
                             " ORDER BY s.rowid",
                             NULL, "cannot read counter_samples", export_counter_sample_handler,
                             EXPORT_FLARE_CALLBACK(callback), user);
}

/* ---- PM samples and the windows they belong to ---- */

static int export_pm_sample_handler(sqlite3_stmt *statement, void *user)
{
    store_pm_row row;
    store_pm_row_read(statement, &row);
    return STORE_READER_CALL(store_export_pm_sample_callback, &row, user);
}

int store_export_pm_samples(store *handle, store_export_pm_sample_callback callback, void *user)
{
    return export_flare_walk(handle, "SELECT " STORE_PM_COLUMNS " FROM pm_samples ORDER BY rowid",
                             NULL, "cannot read pm_samples", export_pm_sample_handler,
                             EXPORT_FLARE_CALLBACK(callback), user);
}

static int export_unrecorded_window_handler(sqlite3_stmt *statement, void *user)
{
    store_export_unrecorded_window_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .first_ns = (uint64_t)sqlite3_column_int64(statement, 2),
        .last_ns = (uint64_t)sqlite3_column_int64(statement, 3),
        .samples = (uint64_t)sqlite3_column_int64(statement, 4),
    };
    return STORE_READER_CALL(store_export_unrecorded_window_callback, &row, user);
}

/* One scan of pm_samples; windows' primary key (pid, id) makes the NOT
 * EXISTS a lookup; the grouping holds one entry per such window. */
int store_export_unrecorded_windows(store *handle, store_export_unrecorded_window_callback callback,
                                    void *user)
{
    return export_flare_walk(handle,
                             "SELECT p.pid, p.window_id, min(p.start_ns), max(p.end_ns),"
                             " count(DISTINCT p.sample_index) FROM pm_samples p"
                             " WHERE NOT EXISTS (SELECT 1 FROM windows w"
                             " WHERE w.pid = p.pid AND w.id = p.window_id)"
                             " GROUP BY p.pid, p.window_id ORDER BY p.pid, p.window_id",
                             NULL, "cannot read pm_samples", export_unrecorded_window_handler,
                             EXPORT_FLARE_CALLBACK(callback), user);
}

/* ---- launch storms, for the replay match ---- */

static int export_storm_process_handler(sqlite3_stmt *statement, void *user)
{
    int64_t pid = sqlite3_column_int64(statement, 0);
    return STORE_READER_CALL(store_export_storm_process_callback, pid, user);
}

int store_export_storm_processes(store *handle, store_export_storm_process_callback callback,
                                 void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int storms = export_flare_has_table(handle, "storms");
    if (storms < 0)
        return FLARE_ERR_STORE;
    /* The storm_guard drops say it for sessions before version 8 too. */
    const char *sql =
        storms ? "SELECT pid FROM drops WHERE source = 'storm_guard' AND count > 0"
                 " UNION SELECT pid FROM storms ORDER BY 1"
               : "SELECT DISTINCT pid FROM drops WHERE source = 'storm_guard' AND count > 0"
                 " ORDER BY 1";
    return export_flare_walk(handle, sql, NULL, "cannot read launch storms",
                             export_storm_process_handler, EXPORT_FLARE_CALLBACK(callback), user);
}

/* ---- replayed launches and their kernel rows ---- */

/*
 * Where each replay re-ran work: from the end of its pass 0 (the program's
 * own launch, or its own run of the span) to the replay's end, on its
 * device. The device's gate holds the program's other work on that device
 * for all that time, so every kernel, copy and memset that began there then
 * is flare's: a restore, or a pass after the first. Only replays that ran
 * more than one pass re-ran anything.
 */
#define EXPORT_REPLAY_WINDOWS_CTE                                                                  \
    "replay_windows AS MATERIALIZED ("                                                             \
    "SELECT l.pid AS pid, l.device AS device, COALESCE((SELECT p.end_ns FROM replay_passes p"      \
    " WHERE p.pid = l.pid AND p.launch_id = l.launch_id AND p.pass = 0), l.begin_ns) AS first_ns," \
    " l.end_ns AS last_ns FROM replay_launches l WHERE l.span_id IS NULL AND l.passes_run > 1"     \
    " UNION ALL SELECT s.pid, s.device, COALESCE((SELECT p.end_ns FROM replay_passes p"            \
    " WHERE p.pid = s.pid AND p.launch_id = s.span_id AND p.pass = 0), s.begin_ns), s.end_ns"      \
    " FROM replay_spans s WHERE s.passes_run > 1)"

static int export_replay_window_handler(sqlite3_stmt *statement, void *user)
{
    store_export_replay_window_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .device = sqlite3_column_int(statement, 1),
        .first_ns = (uint64_t)sqlite3_column_int64(statement, 2),
        .last_ns = (uint64_t)sqlite3_column_int64(statement, 3),
    };
    return STORE_READER_CALL(store_export_replay_window_callback, &row, user);
}

int store_export_replay_windows(store *handle, store_export_replay_window_callback callback,
                                void *user)
{
    return export_flare_walk(handle,
                             "WITH " EXPORT_REPLAY_WINDOWS_CTE
                             " SELECT pid, device, first_ns, last_ns FROM replay_windows"
                             " ORDER BY pid, device, first_ns",
                             NULL, "cannot read the replays' passes", export_replay_window_handler,
                             EXPORT_FLARE_CALLBACK(callback), user);
}

static int export_replay_match_handler(sqlite3_stmt *statement, void *user)
{
    store_export_replay_match_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .launch_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .correlation_id = (uint64_t)sqlite3_column_int64(statement, 2),
    };
    return STORE_READER_CALL(store_export_replay_match_callback, &row, user);
}

/*
 * replay_launches has no correlation id: launch_index says which launch of
 * the kernel's name in the process it was, from 0. So the kernels of the
 * replayed names (and only those: the IN keeps the window function's sort
 * to them) are numbered per (pid, name) in correlation-id order, the order
 * launches were made in, and the numbers equal to a launch_index are its
 * kernel. Left out of the count: kernels run by CUDA graphs (their launch
 * was the graph's, not the kernel's) and the re-runs of earlier replays
 * (passes after the first are recorded as kernels of their own, with
 * correlation ids of their own; replay_windows above).
 */
int store_export_replay_matches(store *handle, store_export_replay_match_callback callback,
                                void *user)
{
    return export_flare_walk(
        handle,
        "WITH " EXPORT_REPLAY_WINDOWS_CTE ","
        " wanted AS (SELECT r.pid, r.launch_id, r.launch_index, n.id AS name_id"
        " FROM replay_launches r JOIN names n ON n.name = r.kernel),"
        " ranked AS (SELECT k.pid, k.name_id, k.correlation_id, ROW_NUMBER() OVER"
        " (PARTITION BY k.pid, k.name_id ORDER BY k.correlation_id) - 1 AS nth FROM kernels k"
        " WHERE k.graph_id = 0 AND k.name_id IN (SELECT name_id FROM wanted)"
        " AND NOT EXISTS (SELECT 1 FROM replay_windows w WHERE w.pid = k.pid"
        " AND w.device = k.device AND k.start_ns > w.first_ns AND k.start_ns <= w.last_ns))"
        " SELECT w.pid, w.launch_id, k.correlation_id FROM wanted w JOIN ranked k"
        " ON k.pid = w.pid AND k.name_id = w.name_id AND k.nth = w.launch_index"
        " ORDER BY w.pid, w.launch_id",
        NULL, "cannot match replayed launches to kernels", export_replay_match_handler,
        EXPORT_FLARE_CALLBACK(callback), user);
}

static int export_replay_launch_handler(sqlite3_stmt *statement, void *user)
{
    store_replay_launch_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .launch_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .span_id = (uint64_t)sqlite3_column_int64(statement, 2), /* NULL reads as 0 */
        .device = sqlite3_column_int(statement, 3),
        .stream_id = (uint64_t)sqlite3_column_int64(statement, 4),
        .kernel = store_column_text_or_empty(statement, 5),
        .launch_index = (uint64_t)sqlite3_column_int64(statement, 6),
        .passes_planned = (uint32_t)sqlite3_column_int64(statement, 7),
        .passes_run = (uint32_t)sqlite3_column_int64(statement, 8),
        .declined = sqlite3_column_int(statement, 9),
        .reason = store_column_text_or_empty(statement, 10),
        .begin_ns = (uint64_t)sqlite3_column_int64(statement, 11),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 12),
        .drain_ns = (uint64_t)sqlite3_column_int64(statement, 13),
        .snapshot_bytes = (uint64_t)sqlite3_column_int64(statement, 14),
        .shadow_on_device = sqlite3_column_int(statement, 15),
        .snapshot_ns = (uint64_t)sqlite3_column_int64(statement, 16),
        .restore_ns = (uint64_t)sqlite3_column_int64(statement, 17),
        .bytes_restored = (uint64_t)sqlite3_column_int64(statement, 18),
        .collector = store_column_text_or_empty(statement, 19),
        .passes_kept = (uint32_t)sqlite3_column_int64(statement, 20),
        .pass_mean_ns = store_column_u64_rounded(statement, 21),
    };
    return STORE_READER_CALL(store_export_replay_launch_callback, &row, user);
}

int store_export_replay_launch(store *handle, int64_t pid, uint64_t launch_id,
                               store_export_replay_launch_callback callback, void *user)
{
    store_params params = {2, {pid, (int64_t)launch_id}};
    return export_flare_walk(
        handle,
        "SELECT l.pid, l.launch_id, l.span_id, l.device, l.stream_id, l.kernel, l.launch_index,"
        " l.passes_planned, l.passes_run, l.declined, l.reason, l.begin_ns, l.end_ns, l.drain_ns,"
        " l.snapshot_bytes, l.shadow_on_device, l.snapshot_ns, l.restore_ns, l.bytes_restored,"
        " l.collector,"
        " (SELECT count(*) FROM replay_passes p WHERE p.pid = l.pid AND p.launch_id = l.launch_id),"
        " (SELECT avg(p.end_ns - p.start_ns) FROM replay_passes p"
        " WHERE p.pid = l.pid AND p.launch_id = l.launch_id)"
        " FROM replay_launches l WHERE l.pid = ?1 AND l.launch_id = ?2",
        &params, "cannot read replay_launches", export_replay_launch_handler,
        EXPORT_FLARE_CALLBACK(callback), user);
}

static int export_replay_metric_handler(sqlite3_stmt *statement, void *user)
{
    int noted = sqlite3_column_count(statement) >= 5;
    store_export_replay_metric_row row = {
        .metric = store_column_text_or_empty(statement, 0),
        .has_value = sqlite3_column_type(statement, 1) != SQLITE_NULL,
        .value = sqlite3_column_double(statement, 1),
        .method = noted ? store_column_text_or_empty(statement, 2) : "",
        .status = noted ? store_column_text_or_empty(statement, 3) : "",
        .error_bound = noted && sqlite3_column_type(statement, 4) != SQLITE_NULL
                           ? sqlite3_column_double(statement, 4)
                           : NAN,
    };
    return STORE_READER_CALL(store_export_replay_metric_callback, &row, user);
}

int store_export_replay_metrics(store *handle, int64_t pid, uint64_t launch_id,
                                store_export_replay_metric_callback callback, void *user)
{
    store_params params = {2, {pid, (int64_t)launch_id}};
    /* Sessions older than schema 16 have no notes. */
    int noted = handle != NULL ? export_flare_has_table(handle, "replay_value_methods") : 0;
    if (noted < 0)
        return FLARE_ERR_STORE;
    return export_flare_walk(
        handle,
        noted ? "SELECT m.metric, m.value, v.method, v.status, v.error_bound FROM replay_metrics m"
                " LEFT JOIN replay_value_methods v ON v.pid = m.pid"
                " AND v.launch_id = m.launch_id AND v.metric = m.metric"
                " WHERE m.pid = ?1 AND m.launch_id = ?2 ORDER BY m.rowid"
              : "SELECT metric, value FROM replay_metrics"
                " WHERE pid = ?1 AND launch_id = ?2 ORDER BY rowid",
        &params, "cannot read replay_metrics", export_replay_metric_handler,
        EXPORT_FLARE_CALLBACK(callback), user);
}

int store_export_replay_noted(store *handle, int *noted)
{
    if (handle == NULL || noted == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *noted = 0;
    int has_table = export_flare_has_table(handle, "replay_value_methods");
    if (has_table <= 0)
        return has_table < 0 ? FLARE_ERR_STORE : 0;
    int64_t any = 0;
    if (store_query_int(handle, "SELECT EXISTS (SELECT 1 FROM replay_value_methods)", &any, NULL) !=
        SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot read replay_value_methods");
    *noted = any != 0;
    return 0;
}
