/*
 * store_ranks.c: the process_ranks and clock_pairs tables (store_ranks.h).
 *
 * Must never write outside a batch the caller opened, or keep a statement
 * (these rows come once or twice per process: prepared on each call).
 */
#include "store/store_ranks.h"

#include <sqlite3.h>

#include "flare/flare.h"
#include "store/store_internal.h"

/* Binds an optional integer: NULL when absent. */
static void bind_optional(sqlite3_stmt *statement, int index, bool present, int64_t value)
{
    if (present)
        sqlite3_bind_int64(statement, index, value);
    else
        sqlite3_bind_null(statement, index);
}

/* Prepares sql for a one-row write; NULL with the error recorded. */
static sqlite3_stmt *prepare_write(store *handle, const char *sql, const char *what)
{
    if (store_writer_ready(handle, 1) != 0)
        return NULL;
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(handle->db, sql, -1, &statement, NULL) != SQLITE_OK) {
        store_set_sqlite_error(handle, what);
        return NULL;
    }
    return statement;
}

int store_put_process_rank(store *handle, const store_rank_row *row)
{
    if (row == NULL || row->host == NULL)
        return store_writer_ready(handle, 0);
    sqlite3_stmt *statement = prepare_write(
        handle,
        "INSERT OR REPLACE INTO process_ranks(pid, host, rank, local_rank, world_size, job_id) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        "cannot write a process_ranks row");
    if (statement == NULL)
        return FLARE_ERR_STORE;
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_text(statement, 2, row->host, -1, SQLITE_STATIC);
    bind_optional(statement, 3, row->has_rank, row->rank);
    bind_optional(statement, 4, row->has_local_rank, row->local_rank);
    bind_optional(statement, 5, row->has_world_size, row->world_size);
    if (row->job_id != NULL && row->job_id[0] != '\0')
        sqlite3_bind_text(statement, 6, row->job_id, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(statement, 6);
    int status = store_step(handle, statement, "cannot write a process_ranks row");
    sqlite3_finalize(statement);
    return status;
}

int store_put_clock_pair(store *handle, int64_t pid, uint64_t clock_ns, uint64_t unix_ns)
{
    sqlite3_stmt *statement = prepare_write(
        handle, "INSERT OR REPLACE INTO clock_pairs(pid, clock_ns, unix_ns) VALUES (?1, ?2, ?3)",
        "cannot write a clock pair");
    if (statement == NULL)
        return FLARE_ERR_STORE;
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)clock_ns);
    sqlite3_bind_int64(statement, 3, (int64_t)unix_ns);
    int status = store_step(handle, statement, "cannot write a clock pair");
    sqlite3_finalize(statement);
    return status;
}

static int rank_row_handler(sqlite3_stmt *statement, void *user)
{
    store_rank_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .host = (const char *)sqlite3_column_text(statement, 1),
        .has_rank = sqlite3_column_type(statement, 2) != SQLITE_NULL,
        .rank = sqlite3_column_int64(statement, 2),
        .has_local_rank = sqlite3_column_type(statement, 3) != SQLITE_NULL,
        .local_rank = sqlite3_column_int64(statement, 3),
        .has_world_size = sqlite3_column_type(statement, 4) != SQLITE_NULL,
        .world_size = sqlite3_column_int64(statement, 4),
        .job_id = (const char *)sqlite3_column_text(statement, 5),
    };
    if (row.host == NULL)
        row.host = "";
    return STORE_READER_CALL(store_rank_callback, &row, user);
}

int store_read_process_ranks(store *handle, store_rank_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "process_ranks");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    store_reader_call call = {(const void *)&callback, user};
    return store_query_each(handle,
                            "SELECT pid, host, rank, local_rank, world_size, job_id FROM "
                            "process_ranks ORDER BY rank IS NULL, rank, pid",
                            NULL, rank_row_handler, &call, "cannot read process_ranks");
}
