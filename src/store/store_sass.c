/*
 * store_sass.c: the sass_metrics table (store_sass.h, docs/schema.md): SASS
 * metrics of deep windows, one row per (window, device, function, pc
 * offset, metric) aggregate, the instruction's source line in pc_lines.
 *
 * Like PC samples (store_pc.c), a window hands over its whole table of
 * aggregates at once, so the insert is one of the writer's persistent
 * statements (STORE_STATEMENT_SASS_METRIC), not prepared per row, and the
 * line goes through store_pc.c's store_put_pc_line: one (pid, function,
 * offset) has one line whichever engine saw it. Must never run on a launch
 * path or outside the writer's handle; a session older than version 13 has
 * no such table and reads as none.
 */
#include "store/store_sass.h"

#include <sqlite3.h>
#include <stdint.h>

#include "flare/flare.h"
#include "store/store_internal.h"

/* ---- writing ---- */

static int sass_row_valid(const store_sass_row *row)
{
    return row != NULL && row->function != NULL && row->metric != NULL && row->metric[0] != '\0';
}

int store_put_sass_metric(store *handle, const store_sass_row *row)
{
    int status = store_writer_ready(handle, sass_row_valid(row));
    if (status != 0)
        return status;
    int64_t name_id = 0;
    status = store_intern(handle, row->function, &name_id);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_SASS_METRIC];
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, (int64_t)row->window_id);
    sqlite3_bind_int64(statement, 3, row->device);
    sqlite3_bind_int64(statement, 4, name_id);
    sqlite3_bind_int64(statement, 5, (int64_t)row->pc_offset);
    sqlite3_bind_text(statement, 6, row->metric, -1, SQLITE_STATIC);
    sqlite3_bind_int64(statement, 7, (int64_t)row->value);
    status = store_step(handle, statement, "cannot write a SASS metric");
    sqlite3_clear_bindings(statement); /* the metric's name is the caller's */
    if (status == 0)
        status = store_put_pc_line(handle, row->pid, name_id, row->pc_offset, row->file, row->line);
    /* The row is written: a failure to keep its function's code costs the
     * instruction its SASS text (sass_text's counts say so), never the row;
     * a failure SQLite rolled the batch back for fails the batch's commit. */
    if (status == 0 && (row->file == NULL || row->file[0] == '\0'))
        (void)store_put_pc_code(handle, row->pid, name_id, row->code);
    return status;
}

/* ---- reading ---- */

/* Every row, its line where pc_lines has one (NULL file and line where
 * not). */
static const char sass_select_sql[] =
    "SELECT s.pid, s.window_id, s.device, n.name, s.pc_offset, s.metric, s.value, f.name, l.line "
    "FROM sass_metrics s JOIN names n ON n.id = s.name_id "
    "LEFT JOIN pc_lines l ON l.pid = s.pid AND l.name_id = s.name_id AND "
    "l.pc_offset = s.pc_offset LEFT JOIN names f ON f.id = l.file_name_id "
    "ORDER BY s.pid, s.window_id, s.device, s.metric, s.value DESC, n.name, s.pc_offset";

/* With pc_instructions (schema 15): each row's SASS text too, NULL where
 * the session's end disassembled none. */
static const char sass_select_text_sql[] =
    "SELECT s.pid, s.window_id, s.device, n.name, s.pc_offset, s.metric, s.value, f.name, l.line, "
    "i.sass FROM sass_metrics s JOIN names n ON n.id = s.name_id "
    "LEFT JOIN pc_lines l ON l.pid = s.pid AND l.name_id = s.name_id AND "
    "l.pc_offset = s.pc_offset LEFT JOIN names f ON f.id = l.file_name_id "
    "LEFT JOIN pc_instructions i ON i.pid = s.pid AND i.name_id = s.name_id AND "
    "i.pc_offset = s.pc_offset "
    "ORDER BY s.pid, s.window_id, s.device, s.metric, s.value DESC, n.name, s.pc_offset";

/* A session whose pc_lines was dropped (a damaged one: every version with
 * sass_metrics has pc_lines): the rows without their lines. */
static const char sass_select_no_lines_sql[] =
    "SELECT s.pid, s.window_id, s.device, n.name, s.pc_offset, s.metric, s.value "
    "FROM sass_metrics s JOIN names n ON n.id = s.name_id "
    "ORDER BY s.pid, s.window_id, s.device, s.metric, s.value DESC, n.name, s.pc_offset";

static int sass_row_handler(sqlite3_stmt *statement, void *user)
{
    store_sass_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = (int32_t)sqlite3_column_int64(statement, 2),
        .function = store_column_text_or_empty(statement, 3),
        .pc_offset = (uint64_t)sqlite3_column_int64(statement, 4),
        .metric = store_column_text_or_empty(statement, 5),
        .value = (uint64_t)sqlite3_column_int64(statement, 6),
    };
    if (sqlite3_column_count(statement) > 8 && sqlite3_column_type(statement, 7) != SQLITE_NULL) {
        row.file = (const char *)sqlite3_column_text(statement, 7);
        row.line = (uint32_t)sqlite3_column_int64(statement, 8);
    }
    if (sqlite3_column_count(statement) > 9 && sqlite3_column_type(statement, 9) != SQLITE_NULL)
        row.sass = (const char *)sqlite3_column_text(statement, 9);
    return STORE_READER_CALL(store_sass_callback, &row, user);
}

int store_read_sass_metrics(store *handle, store_sass_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "sass_metrics");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    int lines = store_has_table(handle, "pc_lines");
    int texts = store_has_table(handle, "pc_instructions");
    if (lines < 0 || texts < 0)
        return FLARE_ERR_STORE;
    const char *sql = lines == 0  ? sass_select_no_lines_sql
                      : texts > 0 ? sass_select_text_sql
                                  : sass_select_sql;
    return store_query_each(handle, sql, NULL, sass_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read the SASS metrics");
}

/* Per (window, device, metric, line): the line's total, how many
 * instructions it sums (the key makes each row of x one instruction of
 * the metric: COUNT(*) counts distinct (function, offset)), and the
 * function with the largest share (ties to the first interned). */
static const char sass_lines_sql[] =
    "WITH x AS (SELECT s.pid, s.window_id, s.device, s.metric, l.file_name_id AS file, l.line,"
    "  s.name_id, s.value"
    "  FROM sass_metrics s JOIN pc_lines l"
    "  ON l.pid = s.pid AND l.name_id = s.name_id AND l.pc_offset = s.pc_offset),"
    " by_function AS (SELECT pid, window_id, device, metric, file, line, name_id,"
    "  ROW_NUMBER() OVER (PARTITION BY pid, window_id, device, metric, file, line"
    "  ORDER BY SUM(value) DESC, name_id) AS r"
    "  FROM x GROUP BY pid, window_id, device, metric, file, line, name_id),"
    " total AS (SELECT pid, window_id, device, metric, file, line, SUM(value) AS v,"
    "  COUNT(*) AS n FROM x GROUP BY pid, window_id, device, metric, file, line)"
    " SELECT t.pid, t.window_id, t.device, t.metric, f.name, t.line, fn.name, t.v, t.n"
    " FROM total t"
    " JOIN by_function g USING (pid, window_id, device, metric, file, line)"
    " JOIN names f ON f.id = t.file JOIN names fn ON fn.id = g.name_id"
    " WHERE g.r = 1"
    " ORDER BY t.pid, t.window_id, t.device, t.metric, t.v DESC, f.name, t.line";

static int sass_line_handler(sqlite3_stmt *statement, void *user)
{
    store_sass_line_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = (int32_t)sqlite3_column_int64(statement, 2),
        .metric = store_column_text_or_empty(statement, 3),
        .file = store_column_text_or_empty(statement, 4),
        .line = (uint32_t)sqlite3_column_int64(statement, 5),
        .function = store_column_text_or_empty(statement, 6),
        .value = (uint64_t)sqlite3_column_int64(statement, 7),
        .instructions = (uint32_t)sqlite3_column_int64(statement, 8),
    };
    return STORE_READER_CALL(store_sass_line_callback, &row, user);
}

int store_read_sass_lines(store *handle, store_sass_line_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "sass_metrics");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    int lines = store_has_table(handle, "pc_lines");
    if (lines <= 0)
        return lines < 0 ? FLARE_ERR_STORE : 0;
    return store_query_each(handle, sass_lines_sql, NULL, sass_line_handler,
                            &(store_reader_call){&callback, user},
                            "cannot read the SASS metrics' source lines");
}
