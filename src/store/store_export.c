/*
 * store_export.c: the streaming readers behind `flare export`
 * (store_export.h).
 *
 * Each reader runs one SELECT and hands rows to its caller as SQLite steps
 * through them. It must never collect rows in memory (sessions hold
 * millions of kernels), never sort the high-rate tables (SQLite would build
 * a temporary B-tree as big as the table), and never write: a READ handle
 * is read-only, and an export must not change the session it exports.
 */
#include <stddef.h>

#include "flare/flare.h"
#include "store/store_export.h"
#include "store/store_internal.h"

/* ---- shared walk ---- */

/*
 * Steps through every row of sql (store_query_each), giving each to
 * handler, which turns it into the caller's row type and calls callback
 * (the address of the caller's typed callback, in a store_reader_call).
 * Stops early, without error, when the callback returns non-zero. what
 * names the table in error messages. Returns 0, FLARE_ERR_INVALID_ARGUMENT
 * for a NULL handle or callback, or FLARE_ERR_STORE (message recorded).
 */
/* What the export readers pass store_export_walk as callback: the address
 * of their typed callback, or NULL when that callback is NULL (the address
 * of a parameter never is, and the walk must refuse a NULL callback). */
#define STORE_EXPORT_CALLBACK(callback) ((callback) != NULL ? (const void *)&(callback) : NULL)

static int store_export_walk(store *handle, const char *sql, const char *what,
                             store_row_handler handler, const void *callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_reader_call call = {callback, user};
    return store_query_each(handle, sql, NULL, handler, &call, what);
}

/* ---- snapshot ---- */

int store_export_begin(store *handle)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    /* Inside a transaction already (a writer's batch): nothing to open. */
    if (!sqlite3_get_autocommit(handle->db))
        return 0;
    if (sqlite3_exec(handle->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot start reading");
    return 0;
}

void store_export_end(store *handle)
{
    if (handle == NULL || handle->db == NULL)
        return;
    /* A transaction open outside a writer's batch can only be the one
     * store_export_begin opened; a batch is its owner's to end. */
    if (!handle->in_batch && !sqlite3_get_autocommit(handle->db))
        sqlite3_exec(handle->db, "COMMIT", NULL, NULL, NULL);
}

/* ---- processes and devices ---- */

static int store_export_process_handler(sqlite3_stmt *statement, void *user)
{
    store_export_process_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .parent_pid = sqlite3_column_int64(statement, 1),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 2),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 3), /* NULL reads as 0 */
        .backend = store_column_text_or_empty(statement, 4),
        .executable = store_column_text_or_empty(statement, 5),
    };
    return STORE_READER_CALL(store_export_process_callback, &row, user);
}

int store_export_processes(store *handle, store_export_process_callback callback, void *user)
{
    return store_export_walk(handle,
                             "SELECT pid, parent_pid, start_ns, end_ns, backend, executable"
                             " FROM processes ORDER BY pid",
                             "cannot read processes", store_export_process_handler,
                             STORE_EXPORT_CALLBACK(callback), user);
}

static int store_export_device_handler(sqlite3_stmt *statement, void *user)
{
    store_export_device_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .device = sqlite3_column_int(statement, 1),
        .name = store_column_text_or_empty(statement, 2),
        .backend = store_column_text_or_empty(statement, 3),
    };
    return STORE_READER_CALL(store_export_device_callback, &row, user);
}

int store_export_devices(store *handle, store_export_device_callback callback, void *user)
{
    return store_export_walk(
        handle, "SELECT pid, device, name, backend FROM devices ORDER BY pid, device",
        "cannot read devices", store_export_device_handler, STORE_EXPORT_CALLBACK(callback), user);
}

/* ---- kernels, copies, scopes, metrics ---- */

/*
 * The names join is a primary-key lookup per row, cheaper than caching the
 * names table in memory and independent of how many names there are. LEFT
 * JOIN, so that a row whose name is missing (a damaged file) still exports,
 * with an empty name, rather than vanishing.
 */
static int store_export_kernel_handler(sqlite3_stmt *statement, void *user)
{
    store_kernel_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .device = sqlite3_column_int(statement, 1),
        .stream_id = (uint64_t)sqlite3_column_int64(statement, 2),
        .correlation_id = (uint64_t)sqlite3_column_int64(statement, 3),
        .name = store_column_text_or_empty(statement, 4),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 5),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 6),
        .grid = {(uint32_t)sqlite3_column_int64(statement, 7),
                 (uint32_t)sqlite3_column_int64(statement, 8),
                 (uint32_t)sqlite3_column_int64(statement, 9)},
        .block = {(uint32_t)sqlite3_column_int64(statement, 10),
                  (uint32_t)sqlite3_column_int64(statement, 11),
                  (uint32_t)sqlite3_column_int64(statement, 12)},
        .shared_memory_bytes = (uint32_t)sqlite3_column_int64(statement, 13),
        .registers_per_thread = (uint32_t)sqlite3_column_int64(statement, 14),
        .context_id = (uint64_t)sqlite3_column_int64(statement, 15),
        .graph_id = (uint32_t)sqlite3_column_int64(statement, 16),
        .graph_node_id = (uint64_t)sqlite3_column_int64(statement, 17),
    };
    return STORE_READER_CALL(store_export_kernel_callback, &row, user);
}

int store_export_kernels(store *handle, store_export_kernel_callback callback, void *user)
{
    return store_export_walk(
        handle,
        "SELECT k.pid, k.device, k.stream_id, k.correlation_id, n.name, k.start_ns, k.end_ns,"
        " k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,"
        " k.shared_memory_bytes, k.registers_per_thread, k.context_id, k.graph_id, k.graph_node_id"
        " FROM kernels k LEFT JOIN names n ON n.id = k.name_id ORDER BY k.rowid",
        "cannot read kernels", store_export_kernel_handler, STORE_EXPORT_CALLBACK(callback), user);
}

static int store_export_copy_handler(sqlite3_stmt *statement, void *user)
{
    store_copy_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .device = sqlite3_column_int(statement, 1),
        .stream_id = (uint64_t)sqlite3_column_int64(statement, 2),
        .correlation_id = (uint64_t)sqlite3_column_int64(statement, 3),
        .is_memset = sqlite3_column_int(statement, 4),
        .copy_kind = sqlite3_column_int(statement, 5),
        .bytes = (uint64_t)sqlite3_column_int64(statement, 6),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 7),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 8),
        .status = sqlite3_column_int(statement, 9),
    };
    return STORE_READER_CALL(store_export_copy_callback, &row, user);
}

int store_export_copies(store *handle, store_export_copy_callback callback, void *user)
{
    return store_export_walk(handle,
                             "SELECT pid, device, stream_id, correlation_id, is_memset, copy_kind,"
                             " bytes, start_ns, end_ns, status FROM copies ORDER BY rowid",
                             "cannot read copies", store_export_copy_handler,
                             STORE_EXPORT_CALLBACK(callback), user);
}

static int store_export_scope_handler(sqlite3_stmt *statement, void *user)
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

int store_export_scopes(store *handle, store_export_scope_callback callback, void *user)
{
    return store_export_walk(
        handle,
        "SELECT s.pid, s.thread_id, s.instance_id, n.name, s.depth, s.start_ns, s.end_ns,"
        " s.still_open FROM scopes s LEFT JOIN names n ON n.id = s.name_id ORDER BY s.rowid",
        "cannot read scopes", store_export_scope_handler, STORE_EXPORT_CALLBACK(callback), user);
}

static int store_export_metric_handler(sqlite3_stmt *statement, void *user)
{
    store_metric_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .device = sqlite3_column_int(statement, 1),
        .name = store_column_text_or_empty(statement, 2),
        .time_ns = (uint64_t)sqlite3_column_int64(statement, 3),
        .value = sqlite3_column_int64(statement, 4),
    };
    return STORE_READER_CALL(store_export_metric_callback, &row, user);
}

int store_export_metrics(store *handle, store_export_metric_callback callback, void *user)
{
    return store_export_walk(handle,
                             "SELECT m.pid, m.device, n.name, m.time_ns, m.value FROM metrics m"
                             " LEFT JOIN names n ON n.id = m.name_id ORDER BY m.rowid",
                             "cannot read metrics", store_export_metric_handler,
                             STORE_EXPORT_CALLBACK(callback), user);
}

/* ---- version 8: API calls and launch storms ---- */

int store_has_table(store *handle, const char *table)
{
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(handle->db,
                           "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                           -1, &statement, NULL) != SQLITE_OK) {
        store_set_sqlite_error(handle, "cannot read the schema");
        return -1;
    }
    sqlite3_bind_text(statement, 1, table, -1, SQLITE_STATIC);
    int found = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        found = sqlite3_column_int(statement, 0) > 0;
    else
        store_set_sqlite_error(handle, "cannot read the schema");
    sqlite3_finalize(statement);
    return found;
}

/* store_export_walk over a table of version 8: no rows, and no error,
 * when an older session lacks it. */
static int store_export_walk_v8(store *handle, const char *table, const char *sql, const char *what,
                                store_row_handler handler, const void *callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, table);
    if (found < 0)
        return FLARE_ERR_STORE;
    return found ? store_export_walk(handle, sql, what, handler, callback, user) : 0;
}

static int store_export_api_call_handler(sqlite3_stmt *statement, void *user)
{
    store_api_call_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .thread_id = sqlite3_column_int64(statement, 1),
        .correlation_id = (uint64_t)sqlite3_column_int64(statement, 2),
        .name = store_column_text_or_empty(statement, 3),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 4),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 5),
    };
    return STORE_READER_CALL(store_export_api_call_callback, &row, user);
}

int store_export_api_calls(store *handle, store_export_api_call_callback callback, void *user)
{
    return store_export_walk_v8(handle, "api_calls",
                                "SELECT a.pid, a.thread_id, a.correlation_id, n.name, a.start_ns,"
                                " a.end_ns FROM api_calls a LEFT JOIN names n ON n.id = a.name_id"
                                " ORDER BY a.rowid",
                                "cannot read api_calls", store_export_api_call_handler,
                                STORE_EXPORT_CALLBACK(callback), user);
}

static int store_export_storm_handler(sqlite3_stmt *statement, void *user)
{
    store_storm_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .device = sqlite3_column_int(statement, 1),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 2),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 3),
        .untimed_launches = (uint64_t)sqlite3_column_int64(statement, 4),
        .still_open = sqlite3_column_int(statement, 5),
    };
    return STORE_READER_CALL(store_export_storm_callback, &row, user);
}

int store_export_storms(store *handle, store_export_storm_callback callback, void *user)
{
    return store_export_walk_v8(handle, "storms",
                                "SELECT pid, device, start_ns, end_ns, untimed_launches, still_open"
                                " FROM storms ORDER BY start_ns, rowid",
                                "cannot read storms", store_export_storm_handler,
                                STORE_EXPORT_CALLBACK(callback), user);
}
