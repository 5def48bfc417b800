/*
 * store_counters.c: the counters and counter_samples tables (store.h).
 *
 * Low-rate writes (a row per counter that changed, per commit), so each is
 * one prepared statement stepped once; no blocks, no name interning (the
 * counter's index in its process's registry is the key). Like every writer
 * here it must never let a batch that lost a row commit. The reader runs
 * one query and never writes.
 */
#include "flare/flare.h"
#include "store/store_internal.h"

int store_put_counter(store *handle, int64_t pid, uint32_t index, const char *name)
{
    int status = store_writer_ready(handle, name != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_COUNTER];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, index);
    sqlite3_bind_text(statement, 3, name, -1, SQLITE_STATIC);
    return store_step(handle, statement, "cannot write a counters row");
}

int store_put_counter_sample(store *handle, int64_t pid, uint32_t index, uint64_t time_ns,
                             uint64_t value)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_COUNTER_SAMPLE];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, index);
    sqlite3_bind_int64(statement, 3, (int64_t)time_ns);
    sqlite3_bind_int64(statement, 4, (int64_t)value);
    return store_step(handle, statement, "cannot write a counter sample");
}

static int store_counter_row_handler(sqlite3_stmt *statement, void *user)
{
    store_counter_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .index = (uint32_t)sqlite3_column_int64(statement, 1),
        .name = store_column_text_or_empty(statement, 2),
        .value = (uint64_t)sqlite3_column_int64(statement, 3), /* NULL reads as 0 */
        .samples = sqlite3_column_int64(statement, 4),
        .last_ns = (uint64_t)sqlite3_column_int64(statement, 5),
    };
    return STORE_READER_CALL(store_counter_callback, &row, user);
}

int store_read_counters(store *handle, store_counter_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    /* SQLite takes a bare column of an aggregate query with max() from the
     * row holding the maximum: value is the last sample's. */
    static const char sql[] =
        "SELECT c.pid, c.counter, c.name, s.value, coalesce(s.samples, 0), s.last_ns"
        " FROM counters c LEFT JOIN"
        " (SELECT pid, counter, max(time_ns) AS last_ns, value, count(*) AS samples"
        "  FROM counter_samples GROUP BY pid, counter) s"
        " ON s.pid = c.pid AND s.counter = c.counter"
        " ORDER BY c.name, c.pid";
    return store_query_each(handle, sql, NULL, store_counter_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read counters");
}
