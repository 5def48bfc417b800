/*
 * store_triggered.c: the triggered_replays table (store_triggered.h,
 * docs/schema.md): one row per replay a deep-profiling rule asked for.
 *
 * Rows are few (a rule's firings, bounded by its max_windows, cooldown and
 * replay_budget, and by the rules' session's own cap), so each write
 * prepares its statement. Never called on a hot path; a session older than
 * version 10 has no such table and reads as none.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"
#include "store/store_triggered.h"

static const char triggered_insert_sql[] =
    "INSERT OR REPLACE INTO triggered_replays(pid, id, rule_id, rule_text, comparison, "
    "threshold, observed_value, action, target, why, fired_ns, taken_ns, done_ns, status, "
    "reason, launch_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
    "?15, ?16)";

/* Binds a time or id that is 0 when absent: NULL then. */
static void bind_optional(sqlite3_stmt *statement, int index, uint64_t value)
{
    if (value != 0)
        sqlite3_bind_int64(statement, index, (int64_t)value);
    else
        sqlite3_bind_null(statement, index);
}

int store_put_triggered_replay(store *handle, const store_triggered_row *row)
{
    int status = store_writer_ready(handle, row != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = NULL;
    status = store_prepare(handle, triggered_insert_sql, &statement,
                           "cannot prepare the triggered replay insert");
    if (status != 0)
        return status;
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, (int64_t)row->id);
    sqlite3_bind_int64(statement, 3, row->rule_id);
    store_bind_text_or_empty(statement, 4, row->rule_text);
    store_bind_text_or_empty(statement, 5, row->comparison);
    sqlite3_bind_double(statement, 6, row->threshold);
    sqlite3_bind_double(statement, 7, row->observed_value);
    store_bind_text_or_empty(statement, 8, row->action);
    store_bind_text_or_empty(statement, 9, row->target);
    store_bind_text_or_empty(statement, 10, row->why);
    sqlite3_bind_int64(statement, 11, (int64_t)row->fired_ns);
    bind_optional(statement, 12, row->taken_ns);
    sqlite3_bind_int64(statement, 13, (int64_t)row->done_ns);
    store_bind_text_or_empty(statement, 14, row->status);
    store_bind_text_or_empty(statement, 15, row->reason);
    bind_optional(statement, 16, row->launch_id);
    return store_step_and_finalize(handle, statement, "cannot write a triggered replay");
}

static const char triggered_select_sql[] =
    "SELECT pid, id, rule_id, rule_text, comparison, threshold, observed_value, action, target, "
    "why, fired_ns, taken_ns, done_ns, status, reason, launch_id FROM triggered_replays "
    "ORDER BY pid, id";

static int triggered_row_handler(sqlite3_stmt *statement, void *user)
{
    store_triggered_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .id = (uint64_t)sqlite3_column_int64(statement, 1),
        .rule_id = (uint32_t)sqlite3_column_int64(statement, 2),
        .rule_text = store_column_text_or_empty(statement, 3),
        .comparison = store_column_text_or_empty(statement, 4),
        .threshold = sqlite3_column_double(statement, 5),
        .observed_value = sqlite3_column_double(statement, 6),
        .action = store_column_text_or_empty(statement, 7),
        .target = store_column_text_or_empty(statement, 8),
        .why = store_column_text_or_empty(statement, 9),
        .fired_ns = (uint64_t)sqlite3_column_int64(statement, 10),
        .taken_ns = (uint64_t)sqlite3_column_int64(statement, 11),
        .done_ns = (uint64_t)sqlite3_column_int64(statement, 12),
        .status = store_column_text_or_empty(statement, 13),
        .reason = store_column_text_or_empty(statement, 14),
        .launch_id = (uint64_t)sqlite3_column_int64(statement, 15),
    };
    return STORE_READER_CALL(store_triggered_callback, &row, user);
}

int store_read_triggered_replays(store *handle, store_triggered_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "triggered_replays");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    return store_query_each(handle, triggered_select_sql, NULL, triggered_row_handler,
                            &(store_reader_call){&callback, user},
                            "cannot read the triggered replays");
}
