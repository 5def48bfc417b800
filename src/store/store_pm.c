/*
 * store_pm.c: the pm_samples writer (store_pm.h), and the one decoder of a
 * pm_samples row the readers share (store_pm_row_read, store_internal.h).
 *
 * A drain of samples arrives at once (a few hundred samples times a few
 * metrics), so each call prepares its statement once and steps it per row;
 * the rows join the collector's open transaction. Never on a hot path.
 */
#include "store/store_pm.h"

#include <math.h>
#include <sqlite3.h>

#include "flare/flare.h"
#include "store/store_internal.h"

static const char pm_insert_sql[] =
    "INSERT INTO pm_samples(pid, window_id, device, sample_index, start_ns, end_ns, "
    "scope_instance_id, scope_name, overflow, metric, value) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

int store_put_pm_samples(store *handle, const store_pm_row *rows, size_t count)
{
    if (handle == NULL || (rows == NULL && count > 0))
        return FLARE_ERR_INVALID_ARGUMENT;
    if (count == 0)
        return FLARE_OK;
    int status = store_require_writer(handle);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = NULL;
    status = store_prepare(handle, pm_insert_sql, &statement, "cannot prepare the PM insert");
    if (status != FLARE_OK)
        return status;
    for (size_t i = 0; i < count; i++) {
        const store_pm_row *row = &rows[i];
        sqlite3_reset(statement);
        sqlite3_clear_bindings(statement);
        sqlite3_bind_int64(statement, 1, row->pid);
        sqlite3_bind_int64(statement, 2, (int64_t)row->window_id);
        sqlite3_bind_int(statement, 3, row->device);
        sqlite3_bind_int64(statement, 4, (int64_t)row->sample_index);
        sqlite3_bind_int64(statement, 5, (int64_t)row->start_ns);
        sqlite3_bind_int64(statement, 6, (int64_t)row->end_ns);
        if (row->has_scope) {
            sqlite3_bind_int64(statement, 7, (int64_t)row->scope_instance_id);
            if (row->scope_name != NULL)
                sqlite3_bind_text(statement, 8, row->scope_name, -1, SQLITE_TRANSIENT);
        }
        sqlite3_bind_int(statement, 9, (int)row->flags);
        sqlite3_bind_text(statement, 10, row->metric != NULL ? row->metric : "", -1,
                          SQLITE_TRANSIENT);
        if (!isnan(row->value))
            sqlite3_bind_double(statement, 11, row->value);
        if (sqlite3_step(statement) != SQLITE_DONE) {
            status = store_set_sqlite_error(handle, "cannot insert a PM sample");
            store_batch_failed(handle);
            break;
        }
    }
    sqlite3_finalize(statement);
    return status;
}

int store_pm_name_scope(store *handle, int64_t pid, uint64_t instance_id, const char *name)
{
    int status = store_writer_ready(handle, name != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = NULL;
    status = store_prepare(handle,
                           "UPDATE pm_samples SET scope_name = ?3 WHERE pid = ?1 AND "
                           "scope_instance_id = ?2 AND scope_name IS NULL",
                           &statement, "cannot prepare the PM scope naming");
    if (status != FLARE_OK)
        return status;
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)instance_id);
    sqlite3_bind_text(statement, 3, name, -1, SQLITE_TRANSIENT);
    return store_step_and_finalize(handle, statement, "cannot name a PM sample's scope");
}

/* overflow holds the PM_SAMPLE_* flags: a flagged sample is counted, never
 * summed (its value may cover seconds, or a time not verified). */
static const char pm_summary_sql[] =
    "SELECT pid, window_id, CASE WHEN scope_instance_id IS NULL THEN '(no range)' "
    "  WHEN scope_name IS NULL THEN '(open range)' ELSE scope_name END AS range, metric, "
    "  SUM(overflow = 0 AND value IS NOT NULL) AS samples, SUM(overflow != 0) AS flagged, "
    "  SUM(CASE WHEN overflow = 0 THEN value END) AS total, "
    "  AVG(CASE WHEN overflow = 0 THEN value END) AS mean, "
    "  SUM(COUNT(*)) OVER (PARTITION BY pid, window_id, CASE WHEN scope_instance_id IS NULL THEN "
    "  '(no range)' WHEN scope_name IS NULL THEN '(open range)' ELSE scope_name END) AS weight "
    "FROM pm_samples GROUP BY pid, window_id, range, metric "
    "ORDER BY pid, window_id, weight DESC, range, metric";

static int store_pm_summary_handler(sqlite3_stmt *statement, void *user)
{
    store_pm_summary_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .range = store_column_text_or_empty(statement, 2),
        .metric = store_column_text_or_empty(statement, 3),
        .samples = (uint64_t)sqlite3_column_int64(statement, 4),
        .flagged = (uint64_t)sqlite3_column_int64(statement, 5),
        .has_value = sqlite3_column_type(statement, 6) != SQLITE_NULL,
        .sum = sqlite3_column_double(statement, 6),
        .mean = sqlite3_column_double(statement, 7),
    };
    return STORE_READER_CALL(store_pm_summary_callback, &row, user);
}

int store_read_pm_summary(store *handle, store_pm_summary_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle, pm_summary_sql, NULL, store_pm_summary_handler,
                            &(store_reader_call){&callback, user}, "cannot read the PM samples");
}

void store_pm_row_read(sqlite3_stmt *statement, store_pm_row *row)
{
    *row = (store_pm_row){
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = sqlite3_column_int(statement, 2),
        .sample_index = (uint64_t)sqlite3_column_int64(statement, 3),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 4),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 5),
        .has_scope = sqlite3_column_type(statement, 6) != SQLITE_NULL,
        .scope_instance_id = (uint64_t)sqlite3_column_int64(statement, 6),
        .scope_name = store_column_text(statement, 7),
        .flags = (uint32_t)sqlite3_column_int64(statement, 8),
        .metric = store_column_text_or_empty(statement, 9),
        .value = sqlite3_column_type(statement, 10) == SQLITE_NULL
                     ? NAN
                     : sqlite3_column_double(statement, 10),
    };
}
