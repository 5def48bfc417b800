/*
 * store_windows.c: the windows table: one row per deep-profiling window
 * (store.h, docs/schema.md).
 *
 * Windows are rare (a handful per session), so each write prepares its
 * statement instead of taking a slot in the writer's prepared table. Like
 * every store function it never aborts and reports SQLite's message through
 * store_last_error; it must never be called on a hot path.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

static const char window_insert_sql[] =
    "INSERT INTO windows(pid, id, token_kind, label, rule_id, rule_text, comparison, threshold, "
    "rate_window_ns, sustained_ns, first_true_ns, observed_value, observed_partial, "
    "max_duration_ns, max_launches, requested_ns, opened_ns, closed_ns, close_reason, launches, "
    "engine, engine_status, engine_reason, engine_samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
    "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24) "
    "ON CONFLICT(pid, id) DO UPDATE SET opened_ns = excluded.opened_ns, closed_ns = "
    "excluded.closed_ns, close_reason = excluded.close_reason, launches = excluded.launches, "
    "engine_status = excluded.engine_status, engine_reason = excluded.engine_reason, "
    "engine_samples = excluded.engine_samples";

/* Binds a time that 0 means "never" as NULL, so SQL sees the difference. */
static void bind_time(sqlite3_stmt *statement, int index, uint64_t time_ns)
{
    if (time_ns == 0)
        sqlite3_bind_null(statement, index);
    else
        sqlite3_bind_int64(statement, index, (int64_t)time_ns);
}

int store_put_window(store *handle, const store_window_row *row)
{
    int status = store_writer_ready(handle, row != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = NULL;
    status =
        store_prepare(handle, window_insert_sql, &statement, "cannot prepare the window insert");
    if (status != 0)
        return status;
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, (int64_t)row->id);
    store_bind_text_or_empty(statement, 3, row->token_kind);
    store_bind_text_or_empty(statement, 4, row->label);
    if (row->has_cause) {
        sqlite3_bind_int64(statement, 5, row->rule_id);
        store_bind_text_or_empty(statement, 6, row->rule_text);
        store_bind_text_or_empty(statement, 7, row->comparison);
        sqlite3_bind_double(statement, 8, row->threshold);
        sqlite3_bind_int64(statement, 9, (int64_t)row->rate_window_ns);
        sqlite3_bind_int64(statement, 10, (int64_t)row->sustained_ns);
        bind_time(statement, 11, row->first_true_ns);
        sqlite3_bind_double(statement, 12, row->observed_value);
    }
    /* Unbound parameters are NULL: a window without a rule has no cause. */
    sqlite3_bind_int(statement, 13, row->observed_partial ? 1 : 0);
    sqlite3_bind_int64(statement, 14, (int64_t)row->max_duration_ns);
    sqlite3_bind_int64(statement, 15, (int64_t)row->max_launches);
    sqlite3_bind_int64(statement, 16, (int64_t)row->requested_ns);
    bind_time(statement, 17, row->opened_ns);
    bind_time(statement, 18, row->closed_ns);
    store_bind_text_or_empty(statement, 19, row->close_reason);
    sqlite3_bind_int64(statement, 20, (int64_t)row->launches);
    store_bind_text_or_empty(statement, 21, row->engine);
    store_bind_text_or_empty(statement, 22, row->engine_status);
    store_bind_text_or_empty(statement, 23, row->engine_reason);
    sqlite3_bind_int64(statement, 24, (int64_t)row->engine_samples);
    return store_step_and_finalize(handle, statement, "cannot write a window");
}

static const char window_select_sql[] =
    "SELECT pid, id, token_kind, label, rule_id, rule_text, comparison, threshold, "
    "rate_window_ns, sustained_ns, first_true_ns, observed_value, observed_partial, "
    "max_duration_ns, max_launches, requested_ns, opened_ns, closed_ns, close_reason, launches, "
    "engine, engine_status, engine_reason, engine_samples FROM windows "
    "ORDER BY requested_ns, pid, id";

static uint64_t column_u64(sqlite3_stmt *statement, int column)
{
    return (uint64_t)sqlite3_column_int64(statement, column);
}

static int store_window_row_handler(sqlite3_stmt *statement, void *user)
{
    store_window_row row;
    memset(&row, 0, sizeof(row));
    row.pid = sqlite3_column_int64(statement, 0);
    row.id = column_u64(statement, 1);
    row.token_kind = store_column_text(statement, 2);
    row.label = store_column_text(statement, 3);
    row.has_cause = sqlite3_column_type(statement, 4) != SQLITE_NULL;
    row.rule_id = (uint32_t)sqlite3_column_int64(statement, 4);
    row.rule_text = store_column_text(statement, 5);
    row.comparison = store_column_text(statement, 6);
    row.threshold = sqlite3_column_double(statement, 7);
    row.rate_window_ns = column_u64(statement, 8);
    row.sustained_ns = column_u64(statement, 9);
    row.first_true_ns = column_u64(statement, 10);
    row.observed_value = sqlite3_column_double(statement, 11);
    row.observed_partial = sqlite3_column_int(statement, 12);
    row.max_duration_ns = column_u64(statement, 13);
    row.max_launches = column_u64(statement, 14);
    row.requested_ns = column_u64(statement, 15);
    row.opened_ns = column_u64(statement, 16);
    row.closed_ns = column_u64(statement, 17);
    row.close_reason = store_column_text(statement, 18);
    row.launches = column_u64(statement, 19);
    row.engine = store_column_text(statement, 20);
    row.engine_status = store_column_text(statement, 21);
    row.engine_reason = store_column_text(statement, 22);
    row.engine_samples = column_u64(statement, 23);
    return STORE_READER_CALL(store_window_callback, &row, user);
}

int store_read_windows(store *handle, store_window_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    /* store_query_each flushes first: a WRITE handle's readers must see the
     * open batch's buffered rows. */
    return store_query_each(handle, window_select_sql, NULL, store_window_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read the windows");
}
