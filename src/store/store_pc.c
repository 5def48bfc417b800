/*
 * store_pc.c: the pc_samples table (store_pc.h, docs/schema.md): PC samples
 * of deep windows, one row per (window, device, function, pc offset, stall
 * reason) aggregate.
 *
 * A window hands over up to the engine's aggregate capacity at once (16,384
 * keys by default), so the insert is one of the writer's persistent
 * statements (STORE_STATEMENT_PC_SAMPLE), not prepared per row. Must never
 * run on a launch path or outside the writer's handle; a session older than
 * version 11 has no such table and reads as none.
 *
 * Attribution to scopes (store_read_pc_by_scope) is computed when read, in
 * one query: CUDA hands samples over as counts per PC, with no time of
 * their own, so a function's samples in a window are split over the ranges
 * its kernels ran in, in proportion to that kernel time.
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
    return status;
}

static const char pc_select_sql[] =
    "SELECT p.pid, p.window_id, p.device, n.name, p.pc_offset, p.stall_reason, p.samples, "
    "p.first_ns, p.last_ns FROM pc_samples p JOIN names n ON n.id = p.name_id "
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
    return STORE_READER_CALL(store_pc_sample_callback, &row, user);
}

int store_read_pc_samples(store *handle, store_pc_sample_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_samples");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    return store_query_each(handle, pc_select_sql, NULL, pc_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read the PC samples");
}

/* Per window (opened and closed) and function with PC samples: the kernels
 * of that function on that device, clipped to the window; each credited to
 * the deepest range of its process open at its clipped midpoint (ties: the
 * latest start, then the greater instance id, as attrib.h decides for PM
 * samples); the function's samples of each stall reason split over those
 * ranges by kernel time. A function name of 255 bytes is one the engine
 * cut (PC_FUNCTION_MAX): it stands for every kernel name it begins. Samples
 * of a function with no kernel in its window go to "(no kernel in the
 * window)". */
static const char pc_by_scope_sql[] =
    "WITH win AS MATERIALIZED (SELECT pid, id AS window_id, opened_ns AS o, closed_ns AS c,"
    /* The earliest start a kernel overlapping the window can have (the
     * longest kernel, kept in meta by the index build): the kernels index
     * then answers each window with a short range. */
    "  opened_ns - COALESCE((SELECT value FROM meta WHERE key = 'kernel_duration_max_ns'),"
    "   (SELECT MAX(end_ns - start_ns) FROM kernels), 0) AS lo"
    "  FROM windows WHERE opened_ns IS NOT NULL AND closed_ns IS NOT NULL"
    "  AND id IN (SELECT window_id FROM pc_samples)),"
    /* The scopes each window can credit: those overlapping it. */
    " sw AS MATERIALIZED (SELECT w.pid, w.window_id, s.name_id, s.depth, s.start_ns, s.end_ns,"
    "  s.still_open, s.instance_id FROM win w JOIN scopes s ON s.pid = w.pid"
    "  AND s.start_ns <= w.c AND (s.end_ns >= w.o OR s.still_open != 0)),"
    " fn AS (SELECT DISTINCT pid, window_id, device, name_id FROM pc_samples),"
    " kn AS (SELECT pid, window_id, device, name_id, name_id AS kernel_name_id FROM fn"
    "  UNION SELECT f.pid, f.window_id, f.device, f.name_id, k.id FROM fn f"
    "  JOIN names n ON n.id = f.name_id AND length(CAST(n.name AS BLOB)) = 255"
    "  JOIN names k ON k.id != n.id"
    "  AND substr(CAST(k.name AS BLOB), 1, 255) = CAST(n.name AS BLOB)),"
    " clipped AS (SELECT f.pid, f.window_id, f.device, f.name_id,"
    "  MAX(k.start_ns, w.o) AS a, MIN(k.end_ns, w.c) AS b"
    "  FROM kn f JOIN win w ON w.pid = f.pid AND w.window_id = f.window_id"
    "  JOIN kernels k ON k.pid = f.pid AND k.device = f.device"
    "  AND k.name_id = f.kernel_name_id"
    "  AND k.start_ns >= w.lo AND k.start_ns < w.c AND k.end_ns > w.o),"
    " credited AS (SELECT pid, window_id, device, name_id, b - a AS ns,"
    "  (SELECT s.name_id FROM sw s WHERE s.pid = clipped.pid AND s.window_id = clipped.window_id"
    "   AND s.start_ns <= (a + b) / 2 AND (s.end_ns >= (a + b) / 2 OR s.still_open != 0)"
    "   ORDER BY s.depth DESC, s.start_ns DESC, s.instance_id DESC LIMIT 1) AS scope_id"
    "  FROM clipped),"
    " weight AS (SELECT pid, window_id, device, name_id, scope_id, SUM(ns) AS ns FROM credited"
    "  GROUP BY pid, window_id, device, name_id, scope_id),"
    " total AS (SELECT pid, window_id, device, name_id, SUM(ns) AS ns FROM weight"
    "  GROUP BY pid, window_id, device, name_id),"
    " split AS (SELECT p.pid, p.window_id, p.device,"
    "  CASE WHEN t.ns IS NULL OR t.ns <= 0 THEN '(no kernel in the window)'"
    "   ELSE COALESCE(sn.name, '(no range)') END AS scope_name,"
    "  p.stall_reason, p.samples * CASE WHEN t.ns IS NULL OR t.ns <= 0 THEN 1.0"
    "   ELSE CAST(w.ns AS REAL) / t.ns END AS samples"
    "  FROM pc_samples p"
    "  LEFT JOIN total t ON t.pid = p.pid AND t.window_id = p.window_id"
    "   AND t.device = p.device AND t.name_id = p.name_id"
    "  LEFT JOIN weight w ON t.ns > 0 AND w.pid = p.pid AND w.window_id = p.window_id"
    "   AND w.device = p.device AND w.name_id = p.name_id"
    "  LEFT JOIN names sn ON sn.id = w.scope_id)"
    " SELECT pid, window_id, device, scope_name, stall_reason, SUM(samples) AS samples"
    " FROM split GROUP BY pid, window_id, device, scope_name, stall_reason"
    " ORDER BY pid, window_id, device, scope_name, samples DESC, stall_reason";

static int pc_scope_row_handler(sqlite3_stmt *statement, void *user)
{
    store_pc_scope_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = (int32_t)sqlite3_column_int64(statement, 2),
        .scope_name = store_column_text_or_empty(statement, 3),
        .stall_reason = store_column_text_or_empty(statement, 4),
        .samples = sqlite3_column_double(statement, 5),
    };
    return STORE_READER_CALL(store_pc_scope_callback, &row, user);
}

int store_read_pc_by_scope(store *handle, store_pc_scope_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int found = store_has_table(handle, "pc_samples");
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    return store_query_each(handle, pc_by_scope_sql, NULL, pc_scope_row_handler,
                            &(store_reader_call){&callback, user},
                            "cannot attribute the PC samples to scopes");
}
