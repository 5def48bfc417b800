/*
 * store_pc.c: the pc_samples table (store_pc.h, docs/schema.md): PC samples
 * of deep windows, one row per (window, device, function, pc offset, stall
 * reason) aggregate.
 *
 * A window hands over up to the engine's aggregate capacity at once (16,384
 * keys by default), so the insert is one of the writer's persistent
 * statements (STORE_STATEMENT_PC_SAMPLE), not prepared per row. Must never
 * run on a launch path or outside the writer's handle; a session older than
 * version 11 has no such table and reads as none (one older than 12, no
 * pc_lines). pc_lines is shared: the SASS metrics writer (store_sass.c)
 * puts its instructions' lines through store_put_pc_line too.
 *
 * Attribution to scopes (store_read_pc_by_scope) is store_pc_scope.c's.
 */
#include "store/store_pc.h"

#include <sqlite3.h>
#include <stdint.h>

#include "flare/flare.h"
#include "store/store_internal.h"

static int pc_row_valid(const store_pc_sample_row *row)
{
    return row != NULL && row->function != NULL && row->stall_reason != NULL &&
           row->stall_reason[0] != '\0' && row->samples > 0 && row->first_ns <= row->last_ns;
}

/* The instruction's line (store_internal.h), shared with the SASS metrics'
 * writer (store_sass.c): once per (pid, function, offset), so a later
 * window's sample of it, or another engine's row, finds the row there. */
int store_put_pc_line(store *handle, int64_t pid, int64_t name_id, uint64_t pc_offset,
                      const char *file, uint32_t line)
{
    if (file == NULL || file[0] == '\0')
        return 0;
    int64_t file_id = 0;
    int status = store_intern(handle, file, &file_id);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PC_LINE];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, name_id);
    sqlite3_bind_int64(statement, 3, (int64_t)pc_offset);
    sqlite3_bind_int64(statement, 4, file_id);
    sqlite3_bind_int64(statement, 5, line);
    return store_step(handle, statement, "cannot write an instruction's source line");
}

int store_put_pc_sample(store *handle, const store_pc_sample_row *row)
{
    int status = store_writer_ready(handle, pc_row_valid(row));
    if (status != 0)
        return status;
    int64_t name_id = 0;
    status = store_intern(handle, row->function, &name_id);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PC_SAMPLE];
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, (int64_t)row->window_id);
    sqlite3_bind_int64(statement, 3, row->device);
    sqlite3_bind_int64(statement, 4, name_id);
    sqlite3_bind_int64(statement, 5, (int64_t)row->pc_offset);
    sqlite3_bind_text(statement, 6, row->stall_reason, -1, SQLITE_STATIC);
    sqlite3_bind_int64(statement, 7, (int64_t)row->samples);
    sqlite3_bind_int64(statement, 8, (int64_t)row->first_ns);
    sqlite3_bind_int64(statement, 9, (int64_t)row->last_ns);
    status = store_step(handle, statement, "cannot write a PC sample");
    sqlite3_clear_bindings(statement); /* the stall reason is the caller's */
    if (status == 0)
        status = store_put_pc_line(handle, row->pid, name_id, row->pc_offset, row->file, row->line);
    /* The row is written: a failure to keep its function's code costs the
     * instruction its SASS text (sass_text's counts say so), never the row;
     * a failure SQLite rolled the batch back for fails the batch's commit. */
    if (status == 0 && (row->file == NULL || row->file[0] == '\0'))
        (void)store_put_pc_code(handle, row->pid, name_id, row->code);
    return status;
}

static const char pc_select_sql[] =
    "SELECT p.pid, p.window_id, p.device, n.name, p.pc_offset, p.stall_reason, p.samples, "
    "p.first_ns, p.last_ns FROM pc_samples p JOIN names n ON n.id = p.name_id "
    "ORDER BY p.pid, p.window_id, p.device, p.samples DESC, n.name, p.pc_offset, "
    "p.stall_reason";

/* With pc_lines (schema 12): each row's source line too, NULL when its
 * instruction has none. */
static const char pc_select_lines_sql[] =
    "SELECT p.pid, p.window_id, p.device, n.name, p.pc_offset, p.stall_reason, p.samples, "
    "p.first_ns, p.last_ns, f.name, l.line FROM pc_samples p JOIN names n ON n.id = p.name_id "
    "LEFT JOIN pc_lines l ON l.pid = p.pid AND l.name_id = p.name_id AND "
    "l.pc_offset = p.pc_offset LEFT JOIN names f ON f.id = l.file_name_id "
    "ORDER BY p.pid, p.window_id, p.device, p.samples DESC, n.name, p.pc_offset, "
    "p.stall_reason";

/* With pc_instructions (schema 15): each row's SASS text too. */
static const char pc_select_text_sql[] =
    "SELECT p.pid, p.window_id, p.device, n.name, p.pc_offset, p.stall_reason, p.samples, "
    "p.first_ns, p.last_ns, f.name, l.line, i.sass FROM pc_samples p "
    "JOIN names n ON n.id = p.name_id "
    "LEFT JOIN pc_lines l ON l.pid = p.pid AND l.name_id = p.name_id AND "
    "l.pc_offset = p.pc_offset LEFT JOIN names f ON f.id = l.file_name_id "
    "LEFT JOIN pc_instructions i ON i.pid = p.pid AND i.name_id = p.name_id AND "
    "i.pc_offset = p.pc_offset "
    "ORDER BY p.pid, p.window_id, p.device, p.samples DESC, n.name, p.pc_offset, "
    "p.stall_reason";

static int pc_row_handler(sqlite3_stmt *statement, void *user)
{
    store_pc_sample_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = (int32_t)sqlite3_column_int64(statement, 2),
        .function = store_column_text_or_empty(statement, 3),
        .pc_offset = (uint64_t)sqlite3_column_int64(statement, 4),
        .stall_reason = store_column_text_or_empty(statement, 5),
        .samples = (uint64_t)sqlite3_column_int64(statement, 6),
        .first_ns = (uint64_t)sqlite3_column_int64(statement, 7),
        .last_ns = (uint64_t)sqlite3_column_int64(statement, 8),
    };
    if (sqlite3_column_count(statement) > 10 && sqlite3_column_type(statement, 9) != SQLITE_NULL) {
        row.file = (const char *)sqlite3_column_text(statement, 9);
        row.line = (uint32_t)sqlite3_column_int64(statement, 10);
    }
    if (sqlite3_column_count(statement) > 11 && sqlite3_column_type(statement, 11) != SQLITE_NULL)
        row.sass = (const char *)sqlite3_column_text(statement, 11);
    return STORE_READER_CALL(store_pc_sample_callback, &row, user);
}

int store_read_pc_samples(store *handle, store_pc_sample_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_samples");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    int lines = store_has_table(handle, "pc_lines");
    int texts = store_has_table(handle, "pc_instructions");
    if (lines < 0 || texts < 0)
        return FLARE_ERR_STORE;
    const char *sql = lines == 0  ? pc_select_sql
                      : texts > 0 ? pc_select_text_sql
                                  : pc_select_lines_sql;
    return store_query_each(handle, sql, NULL, pc_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read the PC samples");
}

/* Per line: its samples by stall reason, then the line's total, its top
 * reason and its top function. */
static const char pc_lines_sql[] =
    "WITH x AS (SELECT p.pid, p.window_id, p.device, l.file_name_id AS file, l.line,"
    "  p.name_id, p.stall_reason, p.samples"
    "  FROM pc_samples p JOIN pc_lines l"
    "  ON l.pid = p.pid AND l.name_id = p.name_id AND l.pc_offset = p.pc_offset),"
    " by_reason AS (SELECT pid, window_id, device, file, line, stall_reason, SUM(samples) AS s,"
    "  ROW_NUMBER() OVER (PARTITION BY pid, window_id, device, file, line"
    "  ORDER BY SUM(samples) DESC, stall_reason) AS r"
    "  FROM x GROUP BY pid, window_id, device, file, line, stall_reason),"
    " by_function AS (SELECT pid, window_id, device, file, line, name_id,"
    "  ROW_NUMBER() OVER (PARTITION BY pid, window_id, device, file, line"
    "  ORDER BY SUM(samples) DESC, name_id) AS r"
    "  FROM x GROUP BY pid, window_id, device, file, line, name_id),"
    " total AS (SELECT pid, window_id, device, file, line, SUM(samples) AS s FROM x"
    "  GROUP BY pid, window_id, device, file, line)"
    " SELECT t.pid, t.window_id, t.device, f.name, t.line, fn.name, t.s, b.stall_reason, b.s"
    " FROM total t"
    " JOIN by_reason b USING (pid, window_id, device, file, line)"
    " JOIN by_function g USING (pid, window_id, device, file, line)"
    " JOIN names f ON f.id = t.file JOIN names fn ON fn.id = g.name_id"
    " WHERE b.r = 1 AND g.r = 1"
    " ORDER BY t.pid, t.window_id, t.device, t.s DESC, f.name, t.line";

static int pc_line_handler(sqlite3_stmt *statement, void *user)
{
    store_pc_line_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = (int32_t)sqlite3_column_int64(statement, 2),
        .file = store_column_text_or_empty(statement, 3),
        .line = (uint32_t)sqlite3_column_int64(statement, 4),
        .function = store_column_text_or_empty(statement, 5),
        .samples = (uint64_t)sqlite3_column_int64(statement, 6),
        .top_stall = store_column_text_or_empty(statement, 7),
        .top_stall_samples = (uint64_t)sqlite3_column_int64(statement, 8),
    };
    return STORE_READER_CALL(store_pc_line_callback, &row, user);
}

int store_read_pc_lines(store *handle, store_pc_line_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_lines");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    return store_query_each(handle, pc_lines_sql, NULL, pc_line_handler,
                            &(store_reader_call){&callback, user},
                            "cannot read the PC samples' source lines");
}
