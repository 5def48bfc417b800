/*
 * store_rules.c: the rules table: one row per deep-profiling rule, its
 * standing summary (store.h, docs/schema.md).
 *
 * Rules are few (at most 32 per process) and their summaries are written at
 * terminal states and at shutdown, so each write prepares its statement. A
 * write whose sequence is not larger than the stored one changes nothing:
 * the last summary wins. Never called on a hot path.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

static const char rule_upsert_sql[] =
    "INSERT INTO rules(pid, rule_id, text, canonical, status, reason, times_true, windows_fired, "
    "busy_refusals, stale_readings, missing_readings, last_value, sequence) VALUES (?1, ?2, ?3, "
    "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
    "ON CONFLICT(pid, rule_id) DO UPDATE SET text = excluded.text, canonical = "
    "excluded.canonical, status = excluded.status, reason = excluded.reason, times_true = "
    "excluded.times_true, windows_fired = excluded.windows_fired, busy_refusals = "
    "excluded.busy_refusals, stale_readings = excluded.stale_readings, missing_readings = "
    "excluded.missing_readings, last_value = excluded.last_value, sequence = excluded.sequence "
    "WHERE excluded.sequence > rules.sequence";

int store_put_rule(store *handle, const store_rule_row *row)
{
    int status = store_writer_ready(handle, row != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = NULL;
    status = store_prepare(handle, rule_upsert_sql, &statement, "cannot prepare the rule insert");
    if (status != 0)
        return status;
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, row->rule_id);
    store_bind_text_or_empty(statement, 3, row->text);
    store_bind_text_or_empty(statement, 4, row->canonical);
    store_bind_text_or_empty(statement, 5, row->status);
    store_bind_text_or_empty(statement, 6, row->reason);
    sqlite3_bind_int64(statement, 7, (int64_t)row->times_true);
    sqlite3_bind_int64(statement, 8, (int64_t)row->windows_fired);
    sqlite3_bind_int64(statement, 9, (int64_t)row->busy_refusals);
    sqlite3_bind_int64(statement, 10, (int64_t)row->stale_readings);
    sqlite3_bind_int64(statement, 11, (int64_t)row->missing_readings);
    if (row->has_last_value)
        sqlite3_bind_double(statement, 12, row->last_value);
    else
        sqlite3_bind_null(statement, 12);
    sqlite3_bind_int64(statement, 13, (int64_t)row->sequence);
    return store_step_and_finalize(handle, statement, "cannot write a rule");
}

static const char rule_select_sql[] =
    "SELECT pid, rule_id, text, canonical, status, reason, times_true, windows_fired, "
    "busy_refusals, stale_readings, missing_readings, last_value, sequence FROM rules "
    "ORDER BY pid, rule_id";

static int store_rule_row_handler(sqlite3_stmt *statement, void *user)
{
    store_rule_row row;
    memset(&row, 0, sizeof(row));
    row.pid = sqlite3_column_int64(statement, 0);
    row.rule_id = (uint32_t)sqlite3_column_int64(statement, 1);
    row.text = store_column_text(statement, 2);
    row.canonical = store_column_text(statement, 3);
    row.status = store_column_text(statement, 4);
    row.reason = store_column_text(statement, 5);
    row.times_true = (uint64_t)sqlite3_column_int64(statement, 6);
    row.windows_fired = (uint64_t)sqlite3_column_int64(statement, 7);
    row.busy_refusals = (uint64_t)sqlite3_column_int64(statement, 8);
    row.stale_readings = (uint64_t)sqlite3_column_int64(statement, 9);
    row.missing_readings = (uint64_t)sqlite3_column_int64(statement, 10);
    row.has_last_value = sqlite3_column_type(statement, 11) != SQLITE_NULL;
    row.last_value = sqlite3_column_double(statement, 11);
    row.sequence = (uint64_t)sqlite3_column_int64(statement, 12);
    return STORE_READER_CALL(store_rule_callback, &row, user);
}

int store_read_rules(store *handle, store_rule_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle, rule_select_sql, NULL, store_rule_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read the rules");
}
