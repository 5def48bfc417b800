/*
 * store_query.c: statements outside the writer's prepared table: preparing
 * them, binding and reading text, stepping a one-off write, and the
 * readers' one shape of a query: prepare, bind, step through the rows
 * handing each to a row handler, finalize, and turn a SQLite failure into
 * the handle's error (store_internal.h).
 *
 * Every reader in src/store walks its rows through store_query_each (or
 * store_statement_each, for a statement it keeps across calls), so the
 * step loop, the early stop and the error message are written once. It
 * must never write rows other than a WRITE handle's buffered ones (the
 * flush that lets a reader see its own open batch), never keep a statement
 * it prepared past the call, and never overwrite a handler's error with
 * SQLite's.
 */
#include <sqlite3.h>
#include <stdint.h>

#include "flare/flare.h"
#include "store/store_internal.h"

int store_prepare(store *handle, const char *sql, sqlite3_stmt **statement, const char *what)
{
    if (sqlite3_prepare_v2(handle->db, sql, -1, statement, NULL) != SQLITE_OK) {
        sqlite3_finalize(*statement);
        *statement = NULL;
        return store_set_sqlite_error(handle, what);
    }
    return 0;
}

const char *store_column_text(sqlite3_stmt *statement, int column)
{
    const unsigned char *text = sqlite3_column_text(statement, column);
    return text != NULL ? (const char *)text : NULL;
}

const char *store_column_text_or_empty(sqlite3_stmt *statement, int column)
{
    const char *text = store_column_text(statement, column);
    return text != NULL ? text : "";
}

uint64_t store_column_u64_rounded(sqlite3_stmt *statement, int column)
{
    double value = sqlite3_column_double(statement, column) + 0.5;
    /* 2^64 is exact as a double; NaN fails both comparisons. */
    if (!(value >= 1.0))
        return 0;
    if (value >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)value;
}

void store_bind_text_or_empty(sqlite3_stmt *statement, int index, const char *text)
{
    sqlite3_bind_text(statement, index, text != NULL ? text : "", -1, SQLITE_TRANSIENT);
}

int store_step_and_finalize(store *handle, sqlite3_stmt *statement, const char *what)
{
    int status = 0;
    if (sqlite3_step(statement) != SQLITE_DONE)
        status = store_set_sqlite_error(handle, what);
    sqlite3_finalize(statement);
    return status;
}

int store_statement_each(store *handle, sqlite3_stmt *statement, const store_params *params,
                         store_row_handler handler, void *user, const char *what)
{
    sqlite3_reset(statement);
    for (int index = 0; params != NULL && index < params->count; index++)
        sqlite3_bind_int64(statement, index + 1, params->values[index]);
    int status = 0;
    int rc;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
        int result = handler(statement, user);
        if (result != 0) {
            /* A stop is not an error; a handler's error is already recorded. */
            status = result < 0 ? result : 0;
            rc = SQLITE_DONE;
            break;
        }
    }
    /* Recorded before the reset, which would clear SQLite's message. */
    if (rc != SQLITE_DONE)
        status = store_set_sqlite_error(handle, what);
    sqlite3_reset(statement);
    return status;
}

int store_query_each(store *handle, const char *sql, const store_params *params,
                     store_row_handler handler, void *user, const char *what)
{
    if (handle == NULL || sql == NULL || handler == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_flush(handle);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = NULL;
    status = store_prepare(handle, sql, &statement, what);
    if (status != 0)
        return status;
    status = store_statement_each(handle, statement, params, handler, user, what);
    sqlite3_finalize(statement);
    return status;
}
