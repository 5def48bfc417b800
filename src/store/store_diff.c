/*
 * store_diff.c: the readers behind `flare diff` (store_diff.h): the names
 * table, and (name id, duration) of every finished kernel or scope.
 *
 * Each reader is one SELECT stepped row by row through store_query_each.
 * It must never sort or collect the high-rate tables (the caller groups
 * the rows, in memory it bounds itself), never join them to names (a
 * primary-key lookup per row would cost more than the whole scan; the
 * caller reads the names once), and never write.
 */
#include <stddef.h>
#include <stdint.h>

#include "flare/flare.h"
#include "store/store_diff.h"
#include "store/store_internal.h"

static int store_diff_name_row(sqlite3_stmt *statement, void *user)
{
    store_reader_call *call = user;
    /* CAST AS BLOB: the bytes as stored, whatever the column's type in a
     * damaged file; column_bytes after column_blob gives their length. */
    const char *name = sqlite3_column_blob(statement, 1);
    size_t length = name != NULL ? (size_t)sqlite3_column_bytes(statement, 1) : 0;
    store_diff_name_callback callback = *(const store_diff_name_callback *)call->callback;
    int result =
        callback(sqlite3_column_int64(statement, 0), name != NULL ? name : "", length, call->user);
    return result < 0 ? result : result != 0;
}

int store_diff_walk_names(store *handle, store_diff_name_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_reader_call call = {&callback, user};
    return store_query_each(handle, "SELECT id, CAST(name AS BLOB) FROM names", NULL,
                            store_diff_name_row, &call, "cannot read names");
}

static int store_diff_duration_row(sqlite3_stmt *statement, void *user)
{
    store_reader_call *call = user;
    /* As the report computes it (store_reader.c): uint64 through the cast
     * the writer stored them with; an end before the start counts as 0. */
    uint64_t start = (uint64_t)sqlite3_column_int64(statement, 1);
    uint64_t end = (uint64_t)sqlite3_column_int64(statement, 2);
    store_diff_duration_callback callback = *(const store_diff_duration_callback *)call->callback;
    int result =
        callback(sqlite3_column_int64(statement, 0), end > start ? end - start : 0, call->user);
    return result < 0 ? result : result != 0;
}

int store_diff_walk_durations(store *handle, store_diff_table table,
                              store_diff_duration_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    const char *sql;
    const char *what;
    switch (table) {
    case STORE_DIFF_KERNELS:
        sql = "SELECT name_id, start_ns, end_ns FROM kernels";
        what = "cannot read kernels";
        break;
    case STORE_DIFF_SCOPES:
        sql = "SELECT name_id, start_ns, end_ns FROM scopes WHERE still_open = 0";
        what = "cannot read scopes";
        break;
    default:
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    store_reader_call call = {&callback, user};
    return store_query_each(handle, sql, NULL, store_diff_duration_row, &call, what);
}
