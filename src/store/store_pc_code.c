/*
 * store_pc_code.c: the machine code of sampled functions without line
 * information (store_pc_code.h): pc_code and pc_cubins written beside an
 * engine's rows, pc_instructions by the disassembly pass.
 *
 * Must never: write a cubin's bytes twice for one process (each row of a
 * function without lines carries its cubin; the first one stores it), or
 * fail an engine's row because its code could not be kept (the caller's
 * status says so, the row itself is already written).
 */
#include "store/store_pc_code.h"

#include <sqlite3.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

/* Whether pc_cubins holds the process's cubin already: 1, 0, or a negative
 * status recorded. */
static int cubin_known(store *handle, int64_t pid, uint64_t crc)
{
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PC_CUBIN_KNOWN];
    sqlite3_reset(statement);
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)crc);
    int rc = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return store_set_sqlite_error(handle, "cannot look up a kept cubin");
}

int store_put_pc_code(store *handle, int64_t pid, int64_t name_id, const store_pc_code *code)
{
    /* A cubin over SQLite's length limit (1e9 bytes by default; flare keeps
     * 256 MiB a process unless FLARE_PC_CUBIN_MIB says more) is not kept:
     * its functions' instructions then count as without a text. */
    if (code == NULL || code->symbol == NULL || code->symbol[0] == '\0' || code->cubin == NULL ||
        code->cubin_size == 0 || code->cubin_crc == 0 ||
        code->cubin_size > (size_t)sqlite3_limit(handle->db, SQLITE_LIMIT_LENGTH, -1))
        return 0;
    /* Two cubins with a function of one name (a JIT module built twice,
     * two libraries' static kernels): their samples share one name_id, so
     * no offset can be said to be either's; the function gets no text
     * (cubin_crc 0, counted by store_read_pc_code_counts). */
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PC_CODE_CONFLICT];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, name_id);
    sqlite3_bind_int64(statement, 3, (int64_t)code->cubin_crc);
    int status = store_step(handle, statement, "cannot mark a function two cubins hold");
    if (status != 0)
        return status;
    statement = handle->statements[STORE_STATEMENT_PC_CODE];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, name_id);
    sqlite3_bind_int64(statement, 3, (int64_t)code->cubin_crc);
    sqlite3_bind_text(statement, 4, code->symbol, -1, SQLITE_STATIC);
    status = store_step(handle, statement, "cannot write where a function's code is");
    sqlite3_clear_bindings(statement);
    if (status != 0)
        return status;
    /* Every later row of the function finds its row there (OR IGNORE): its
     * cubin was seen to with the first, kept or refused, and is not asked
     * about again. */
    if (sqlite3_changes(handle->db) == 0)
        return 0;
    int known = cubin_known(handle, pid, code->cubin_crc);
    if (known != 0)
        return known < 0 ? known : 0;
    statement = handle->statements[STORE_STATEMENT_PC_CUBIN];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)code->cubin_crc);
    sqlite3_bind_blob(statement, 3, code->cubin, (int)code->cubin_size, SQLITE_STATIC);
    status = store_step(handle, statement, "cannot keep a cubin");
    sqlite3_clear_bindings(statement); /* the bytes are the caller's */
    return status;
}

static const char one_cubin_sql[] =
    "SELECT pid, cubin_crc, bytes FROM pc_cubins WHERE pid = ?1 AND cubin_crc = ?2";

static int cubin_handler(sqlite3_stmt *statement, void *user);

int store_read_pc_cubin(store *handle, int64_t pid, uint64_t cubin_crc,
                        store_pc_cubin_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_cubins");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : FLARE_OK;
    store_params params = {.count = 2, .values = {pid, (int64_t)cubin_crc}};
    store_reader_call call = {.callback = &callback, .user = user};
    return store_query_each(handle, one_cubin_sql, &params, cubin_handler, &call,
                            "cannot read a kept cubin");
}

static int unended_handler(sqlite3_stmt *statement, void *user)
{
    const store_reader_call *call = user;
    int (*callback)(int64_t, void *) = *(int (*const *)(int64_t, void *))call->callback;
    return callback(sqlite3_column_int64(statement, 0), call->user);
}

int store_read_unended_pids(store *handle, int (*callback)(int64_t pid, void *user), void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_reader_call call = {.callback = &callback, .user = user};
    return store_query_each(handle, "SELECT pid FROM processes WHERE end_ns IS NULL ORDER BY pid",
                            NULL, unended_handler, &call, "cannot read the processes");
}

static int cubin_handler(sqlite3_stmt *statement, void *user)
{
    const store_reader_call *call = user;
    store_pc_cubin_callback callback = *(const store_pc_cubin_callback *)call->callback;
    const void *bytes = sqlite3_column_blob(statement, 2);
    size_t size = (size_t)sqlite3_column_bytes(statement, 2);
    return callback(sqlite3_column_int64(statement, 0),
                    (uint64_t)sqlite3_column_int64(statement, 1), bytes, size, call->user);
}

int store_read_pc_cubins(store *handle, store_pc_cubin_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_cubins");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : FLARE_OK;
    store_reader_call call = {.callback = &callback, .user = user};
    return store_query_each(handle,
                            "SELECT pid, cubin_crc, bytes FROM pc_cubins ORDER BY pid, cubin_crc",
                            NULL, cubin_handler, &call, "cannot read the kept cubins");
}

/* The sampled instructions of the cubin's functions with neither a line
 * nor a text. */
static const char wanted_sql[] =
    "WITH sampled(pid, name_id, pc_offset) AS ("
    "  SELECT pid, name_id, pc_offset FROM pc_samples WHERE pid = ?1"
    "  UNION SELECT pid, name_id, pc_offset FROM sass_metrics WHERE pid = ?1)"
    " SELECT c.name_id, c.symbol, s.pc_offset FROM pc_code c"
    " JOIN sampled s ON s.pid = c.pid AND s.name_id = c.name_id"
    " WHERE c.pid = ?1 AND c.cubin_crc = ?2"
    " AND NOT EXISTS (SELECT 1 FROM pc_lines l WHERE l.pid = c.pid AND l.name_id = c.name_id"
    "  AND l.pc_offset = s.pc_offset)"
    " AND NOT EXISTS (SELECT 1 FROM pc_instructions i WHERE i.pid = c.pid"
    "  AND i.name_id = c.name_id AND i.pc_offset = s.pc_offset)"
    " ORDER BY c.symbol, s.pc_offset";

static int wanted_handler(sqlite3_stmt *statement, void *user)
{
    store_pc_wanted_row row = {.name_id = sqlite3_column_int64(statement, 0),
                               .symbol = store_column_text_or_empty(statement, 1),
                               .pc_offset = (uint64_t)sqlite3_column_int64(statement, 2)};
    return STORE_READER_CALL(store_pc_wanted_callback, &row, user);
}

int store_read_pc_wanted(store *handle, int64_t pid, uint64_t cubin_crc,
                         store_pc_wanted_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_code");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : FLARE_OK;
    store_params params = {.count = 2, .values = {pid, (int64_t)cubin_crc}};
    store_reader_call call = {.callback = &callback, .user = user};
    return store_query_each(handle, wanted_sql, &params, wanted_handler, &call,
                            "cannot read the instructions to disassemble");
}

int store_put_pc_instruction(store *handle, int64_t pid, int64_t name_id, uint64_t pc_offset,
                             const char *sass)
{
    int status = store_writer_ready(handle, sass != NULL && sass[0] != '\0');
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PC_INSTRUCTION];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, name_id);
    sqlite3_bind_int64(statement, 3, (int64_t)pc_offset);
    sqlite3_bind_text(statement, 4, sass, -1, SQLITE_STATIC);
    status = store_step(handle, statement, "cannot write an instruction's SASS text");
    sqlite3_clear_bindings(statement);
    return status;
}

int store_drop_pc_cubin(store *handle, int64_t pid, uint64_t cubin_crc)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PC_CUBIN_DROP];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)cubin_crc);
    return store_step(handle, statement, "cannot drop a disassembled cubin");
}

static const char counts_sql[] =
    "WITH sampled(pid, name_id, pc_offset) AS ("
    "  SELECT pid, name_id, pc_offset FROM pc_samples WHERE pid = ?1"
    "  UNION SELECT pid, name_id, pc_offset FROM sass_metrics WHERE pid = ?1),"
    " bare AS (SELECT s.* FROM sampled s WHERE NOT EXISTS (SELECT 1 FROM pc_lines l"
    "  WHERE l.pid = s.pid AND l.name_id = s.name_id AND l.pc_offset = s.pc_offset))"
    " SELECT (SELECT count(*) FROM bare),"
    " (SELECT count(*) FROM bare b JOIN pc_instructions i ON i.pid = b.pid"
    "  AND i.name_id = b.name_id AND i.pc_offset = b.pc_offset),"
    " (SELECT count(*) FROM pc_cubins WHERE pid = ?1),"
    " (SELECT count(*) FROM pc_code WHERE pid = ?1 AND cubin_crc = 0)";

static int counts_handler(sqlite3_stmt *statement, void *user)
{
    store_pc_code_counts *counts = user;
    counts->without_line = (uint64_t)sqlite3_column_int64(statement, 0);
    counts->with_text = (uint64_t)sqlite3_column_int64(statement, 1);
    counts->cubins_kept = (uint64_t)sqlite3_column_int64(statement, 2);
    counts->shared_names = (uint64_t)sqlite3_column_int64(statement, 3);
    return 1;
}

int store_read_pc_code_counts(store *handle, int64_t pid, store_pc_code_counts *counts)
{
    if (handle == NULL || counts == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(counts, 0, sizeof(*counts));
    int found = store_has_table(handle, "pc_code");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : FLARE_OK;
    store_params params = {.count = 1, .values = {pid}};
    return store_query_each(handle, counts_sql, &params, counts_handler, counts,
                            "cannot count the instructions without a line");
}

int store_pc_cubins_compact(store *handle, uint64_t dropped_bytes)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int64_t pages = 0, page_size = 0;
    if (store_query_int(handle, "PRAGMA page_count", &pages, NULL) != SQLITE_OK ||
        store_query_int(handle, "PRAGMA page_size", &page_size, NULL) != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot read the database's size");
    uint64_t size = (uint64_t)pages * (uint64_t)page_size;
    if (dropped_bytes < (16u << 20) || dropped_bytes * 4 < size)
        return FLARE_OK;
    return store_exec(handle, "VACUUM", "cannot give the dropped cubins' space back");
}
