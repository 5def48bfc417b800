/*
 * store_views.c: what schema version 7 adds for people who query a session
 * in SQL (docs/schema.md, "Views and name tables"): name tables for every
 * integer code, views over the raw tables, and the indexes the views need,
 * built once collection is over (store_views.h).
 *
 * The name tables and views hold no data of their own, so they are made
 * with the schema; the indexes are not, because each would cost the
 * collector a B-tree insert per row while the program runs. Must never
 * change a row of the session: it only adds tables, views, indexes and meta
 * keys.
 */
#include "store/store_views.h"

#include <stdio.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

/* Name tables and views: run with the schema (store.c) and when `flare
 * index` brings a version 6 session up to version 7. */
static const char *const views_ddl[] = {
    /* copies.copy_kind (src/backend/backend.h) */
    "CREATE TABLE IF NOT EXISTS enum_copy_kind (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "INSERT OR IGNORE INTO enum_copy_kind VALUES (0, 'unknown'), (1, 'host to device'),"
    " (2, 'device to host'), (3, 'device to device'), (4, 'host to host')",
    /* copies.status and any other flare_status: filled from flare.h's table */
    "CREATE TABLE IF NOT EXISTS enum_status"
    " (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL)",
    /* external_correlations.external_kind (CUPTI's CUpti_ExternalCorrelationKind) */
    "CREATE TABLE IF NOT EXISTS enum_external_kind (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "INSERT OR IGNORE INTO enum_external_kind VALUES (0, 'invalid'), (1, 'unknown'),"
    " (2, 'OpenACC'), (3, 'custom 0'), (4, 'custom 1'), (5, 'custom 2'), (6, 'SYCL')",
    /* pm_samples.overflow bits (docs/pm-sampling.md) */
    "CREATE TABLE IF NOT EXISTS enum_pm_flag"
    " (bit INTEGER PRIMARY KEY, name TEXT NOT NULL, meaning TEXT NOT NULL)",
    "INSERT OR IGNORE INTO enum_pm_flag VALUES"
    " (1, 'overflow', 'decoded from a hardware buffer that overflowed'),"
    " (2, 'after hole', 'the first sample after samples were lost'),"
    " (4, 'decode aligned', 'times aligned to the decode, not to the device clock'),"
    " (8, 'clamped start', 'start clamped to the window''s open (it covered the arming)')",

    "CREATE VIEW IF NOT EXISTS v_kernels AS"
    " SELECT k.pid, k.device, k.stream_id, k.correlation_id, n.name, k.start_ns, k.end_ns,"
    " k.end_ns - k.start_ns AS duration_ns, k.grid_x, k.grid_y, k.grid_z, k.block_x,"
    " k.block_y, k.block_z, k.shared_memory_bytes, k.registers_per_thread, k.graph_id,"
    " k.graph_node_id"
    " FROM kernels k JOIN names n ON n.id = k.name_id",

    "CREATE VIEW IF NOT EXISTS v_copies AS"
    " SELECT c.pid, c.device, c.stream_id, c.correlation_id,"
    " CASE WHEN c.is_memset THEN 'memset' ELSE COALESCE(e.name, 'unknown') END AS kind,"
    " c.bytes, c.start_ns, c.end_ns, c.end_ns - c.start_ns AS duration_ns,"
    " CASE WHEN c.end_ns > c.start_ns THEN c.bytes * 1.0 / (c.end_ns - c.start_ns) END"
    " AS gb_per_s,"
    " COALESCE(s.name, c.status) AS status, c.graph_id, c.graph_node_id"
    " FROM copies c LEFT JOIN enum_copy_kind e ON e.id = c.copy_kind"
    " LEFT JOIN enum_status s ON s.id = c.status",

    /* Per kernel name, filled by the index build once collection is over;
     * v_top_kernels reads it only while no kernel row came after it. */
    "CREATE TABLE IF NOT EXISTS kernel_name_stats (name_id INTEGER PRIMARY KEY,"
    " count INTEGER NOT NULL, total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL,"
    " max_ns INTEGER NOT NULL)",

    "CREATE VIEW IF NOT EXISTS v_top_kernels AS"
    " WITH fresh(ok) AS (SELECT (SELECT value FROM meta WHERE key = 'kernel_name_stats_rowid')"
    " IS (SELECT MAX(rowid) FROM kernels)),"
    " stats AS (SELECT name_id, count, total_ns, min_ns, max_ns FROM kernel_name_stats"
    " WHERE (SELECT ok FROM fresh)"
    " UNION ALL SELECT name_id, COUNT(*), SUM(end_ns - start_ns), MIN(end_ns - start_ns),"
    " MAX(end_ns - start_ns) FROM kernels WHERE NOT (SELECT ok FROM fresh) GROUP BY name_id)"
    " SELECT n.name, t.count, t.total_ns, t.total_ns * 1.0 / t.count AS mean_ns, t.min_ns,"
    " t.max_ns, 100.0 * t.total_ns / NULLIF(SUM(t.total_ns) OVER (), 0) AS percent_gpu_time"
    " FROM stats t JOIN names n ON n.id = t.name_id"
    " ORDER BY t.total_ns DESC",

    /* Busy time is the union of the kernels' intervals on a device (kernels
     * of several streams overlap): islands of overlapping kernels, each
     * counted once. */
    "CREATE VIEW IF NOT EXISTS v_gpu_busy AS"
    " WITH ordered AS (SELECT device, start_ns, end_ns, MAX(end_ns) OVER"
    " (PARTITION BY device ORDER BY start_ns, end_ns ROWS BETWEEN UNBOUNDED PRECEDING AND"
    " 1 PRECEDING) AS reach FROM kernels),"
    " marked AS (SELECT device, start_ns, end_ns, SUM(CASE WHEN reach IS NULL OR start_ns >"
    " reach THEN 1 ELSE 0 END) OVER (PARTITION BY device ORDER BY start_ns, end_ns ROWS"
    " UNBOUNDED PRECEDING) AS island FROM ordered),"
    " islands AS (SELECT device, MIN(start_ns) AS first_ns, MAX(end_ns) AS last_ns,"
    " COUNT(*) AS kernels FROM marked GROUP BY device, island)"
    " SELECT device, SUM(last_ns - first_ns) AS busy_ns, MIN(first_ns) AS first_ns,"
    " MAX(last_ns) AS last_ns, SUM(kernels) AS kernels,"
    " 100.0 * SUM(last_ns - first_ns) / NULLIF(MAX(last_ns) - MIN(first_ns), 0)"
    " AS percent_busy"
    " FROM islands GROUP BY device",

    /* A scope's GPU time: the part of each of its process's kernels that ran
     * inside it. The lower bound on start_ns (the longest kernel, kept in
     * meta by the index build) lets the kernels index answer each scope
     * with a short range. */
    "CREATE VIEW IF NOT EXISTS v_scope_gpu_time AS"
    " SELECT s.pid, s.thread_id, s.instance_id, n.name, s.depth, s.start_ns, s.end_ns,"
    " s.end_ns - s.start_ns AS duration_ns, s.still_open,"
    " COUNT(k.start_ns) AS kernels,"
    " COALESCE(SUM(MIN(k.end_ns, s.end_ns) - MAX(k.start_ns, s.start_ns)), 0) AS gpu_ns"
    " FROM scopes s JOIN names n ON n.id = s.name_id"
    " LEFT JOIN kernels k ON k.pid = s.pid AND k.start_ns < s.end_ns AND k.end_ns > s.start_ns"
    " AND k.start_ns >= s.start_ns - COALESCE("
    "(SELECT value FROM meta WHERE key = 'kernel_duration_max_ns'),"
    " (SELECT MAX(end_ns - start_ns) FROM kernels), 0)"
    " GROUP BY s.rowid",

    /* Flagged samples are counted, never summed (docs/pm-sampling.md). */
    "CREATE VIEW IF NOT EXISTS v_pm_by_scope AS"
    " SELECT pid, window_id, device, COALESCE(scope_name, '(no range)') AS scope_name, metric,"
    " SUM(overflow = 0) AS samples, SUM(CASE WHEN overflow = 0 THEN value END) AS total,"
    " AVG(CASE WHEN overflow = 0 THEN value END) AS mean,"
    " SUM(CASE WHEN overflow = 0 THEN end_ns - start_ns END) AS covered_ns,"
    " SUM(overflow != 0) AS flagged"
    " FROM pm_samples GROUP BY pid, window_id, device, scope_name, metric",

    /* PC samples with their function named (schema 11). */
    "CREATE VIEW IF NOT EXISTS v_pc_samples AS"
    " SELECT p.pid, p.window_id, p.device, n.name AS function, p.pc_offset, p.stall_reason,"
    " p.samples, p.first_ns, p.last_ns"
    " FROM pc_samples p JOIN names n ON n.id = p.name_id",

    /* PC samples on the source lines their instructions came from
     * (schema 12): only instructions whose binary carried line
     * information; v_pc_samples has every sample. */
    "CREATE VIEW IF NOT EXISTS v_pc_lines AS"
    " SELECT p.pid, p.window_id, p.device, n.name AS function, p.pc_offset, f.name AS file,"
    " l.line, p.stall_reason, p.samples, p.first_ns, p.last_ns"
    " FROM pc_samples p JOIN pc_lines l"
    " ON l.pid = p.pid AND l.name_id = p.name_id AND l.pc_offset = p.pc_offset"
    " JOIN names n ON n.id = p.name_id JOIN names f ON f.id = l.file_name_id",

    /* SASS metrics (schema 13) with the function named and, where the
     * instruction's binary carried line information, its source line
     * (NULL file and line where not). */
    "CREATE VIEW IF NOT EXISTS v_sass_metrics AS"
    " SELECT s.pid, s.window_id, s.device, n.name AS function, s.pc_offset, s.metric, s.value,"
    " f.name AS file, l.line"
    " FROM sass_metrics s JOIN names n ON n.id = s.name_id"
    " LEFT JOIN pc_lines l"
    " ON l.pid = s.pid AND l.name_id = s.name_id AND l.pc_offset = s.pc_offset"
    " LEFT JOIN names f ON f.id = l.file_name_id",

    /* The SASS text of sampled instructions without a source line (schema
     * 15), as the session's end disassembled them. */
    "CREATE VIEW IF NOT EXISTS v_pc_instructions AS"
    " SELECT i.pid, n.name AS function, i.pc_offset, i.sass"
    " FROM pc_instructions i JOIN names n ON n.id = i.name_id",

    "CREATE VIEW IF NOT EXISTS v_replay_metrics AS"
    " SELECT l.pid, l.launch_id, l.kernel, l.launch_index, l.device, l.stream_id, l.span_id,"
    " m.metric, m.value"
    " FROM replay_launches l JOIN replay_metrics m"
    " ON m.pid = l.pid AND m.launch_id = l.launch_id",

    /* The same with how each value was produced (schema 16): the method
     * (the launch's collector where no note says otherwise), the value's
     * status, its error bound and the PM samples behind it. */
    "CREATE VIEW IF NOT EXISTS v_replay_values AS"
    " SELECT l.pid, l.launch_id, l.kernel, l.launch_index, l.device, l.span_id,"
    " m.metric, m.value, coalesce(v.method, l.collector) AS method,"
    " coalesce(v.status, CASE WHEN m.value IS NULL THEN 'unavailable' ELSE 'measured' END)"
    " AS status, v.error_bound, v.samples"
    " FROM replay_launches l JOIN replay_metrics m"
    " ON m.pid = l.pid AND m.launch_id = l.launch_id"
    " LEFT JOIN replay_value_methods v"
    " ON v.pid = m.pid AND v.launch_id = m.launch_id AND v.metric = m.metric",

    /* The flight recorder's per-second picture of the whole run: the totals
     * of evicted rows (kernel_seconds, ...) and the same totals of the rows
     * still in detail, added up per second (a second may be split between
     * them). Seconds count from session.start_ns, as store_evict.c's. */
    "CREATE VIEW IF NOT EXISTS v_kernel_seconds AS"
    " WITH s(start_ns) AS (SELECT start_ns FROM session WHERE id = 1),"
    " parts AS (SELECT pid, second, name_id, count, gpu_ns FROM kernel_seconds"
    " UNION ALL SELECT k.pid, (k.start_ns - s.start_ns) / 1000000000, k.name_id, COUNT(*),"
    " SUM(k.end_ns - k.start_ns) FROM kernels k, s GROUP BY 1, 2, 3)"
    " SELECT p.pid, p.second, n.name, SUM(p.count) AS count, SUM(p.gpu_ns) AS gpu_ns"
    " FROM parts p JOIN names n ON n.id = p.name_id GROUP BY p.pid, p.second, p.name_id",

    "CREATE VIEW IF NOT EXISTS v_copy_seconds AS"
    " WITH s(start_ns) AS (SELECT start_ns FROM session WHERE id = 1),"
    " parts AS (SELECT pid, second, is_memset, copy_kind, count, bytes, gpu_ns FROM copy_seconds"
    " UNION ALL SELECT c.pid, (c.start_ns - s.start_ns) / 1000000000, c.is_memset, c.copy_kind,"
    " COUNT(*), SUM(c.bytes), SUM(c.end_ns - c.start_ns) FROM copies c, s GROUP BY 1, 2, 3, 4)"
    " SELECT p.pid, p.second,"
    " CASE WHEN p.is_memset THEN 'memset' ELSE COALESCE(e.name, 'unknown') END AS kind,"
    " SUM(p.count) AS count, SUM(p.bytes) AS bytes, SUM(p.gpu_ns) AS gpu_ns"
    " FROM parts p LEFT JOIN enum_copy_kind e ON e.id = p.copy_kind"
    " GROUP BY p.pid, p.second, p.is_memset, p.copy_kind",

    "CREATE VIEW IF NOT EXISTS v_api_call_seconds AS"
    " WITH s(start_ns) AS (SELECT start_ns FROM session WHERE id = 1),"
    " parts AS (SELECT pid, second, name_id, count, host_ns FROM api_call_seconds"
    " UNION ALL SELECT a.pid, (a.start_ns - s.start_ns) / 1000000000, a.name_id, COUNT(*),"
    " SUM(a.end_ns - a.start_ns) FROM api_calls a, s GROUP BY 1, 2, 3)"
    " SELECT p.pid, p.second, n.name, SUM(p.count) AS count, SUM(p.host_ns) AS host_ns"
    " FROM parts p JOIN names n ON n.id = p.name_id GROUP BY p.pid, p.second, p.name_id",

    "CREATE VIEW IF NOT EXISTS v_metric_seconds AS"
    " WITH s(start_ns) AS (SELECT start_ns FROM session WHERE id = 1),"
    " parts AS (SELECT pid, device, name_id, second, samples, min_value, max_value, sum_value"
    " FROM metric_seconds UNION ALL SELECT m.pid, m.device, m.name_id,"
    " (m.time_ns - s.start_ns) / 1000000000, COUNT(*), MIN(m.value), MAX(m.value), SUM(m.value)"
    " FROM metrics m, s GROUP BY 1, 2, 3, 4)"
    " SELECT p.pid, p.device, n.name, p.second, SUM(p.samples) AS samples,"
    " MIN(p.min_value) AS min_value, MAX(p.max_value) AS max_value,"
    " SUM(p.sum_value) AS sum_value, SUM(p.sum_value) * 1.0 / SUM(p.samples) AS mean"
    " FROM parts p JOIN names n ON n.id = p.name_id"
    " GROUP BY p.pid, p.device, p.name_id, p.second",
};

/* Built after collection (store_build_indexes). */
static const char *const index_ddl[] = {
    /* v_scope_gpu_time's range of kernels per scope (and any query by time). */
    "CREATE INDEX IF NOT EXISTS kernels_by_start ON kernels(pid, start_ns)",
    /* A kernel's or copy's API call (export's flow arrows, joins by hand). */
    "CREATE INDEX IF NOT EXISTS api_calls_by_correlation ON api_calls(pid, correlation_id)",
    /* v_top_kernels' summary, marked with the last kernel row it saw. */
    "DELETE FROM kernel_name_stats",
    "INSERT INTO kernel_name_stats SELECT name_id, COUNT(*), SUM(end_ns - start_ns),"
    " MIN(end_ns - start_ns), MAX(end_ns - start_ns) FROM kernels GROUP BY name_id",
    "INSERT OR REPLACE INTO meta(key, value) SELECT 'kernel_name_stats_rowid', "
    "COALESCE(MAX(rowid), 0)"
    " FROM kernels",
};
/* Of index_ddl, the indexes proper. */
#define INDEX_COUNT 2

int store_views_create(store *handle)
{
    for (size_t i = 0; i < sizeof(views_ddl) / sizeof(views_ddl[0]); i++) {
        int status = store_exec(handle, views_ddl[i], "cannot create the views");
        if (status != 0)
            return status;
    }
    sqlite3_stmt *insert = NULL;
    if (sqlite3_prepare_v2(handle->db,
                           "INSERT OR IGNORE INTO enum_status(id, name, description) "
                           "VALUES (?, ?, ?)",
                           -1, &insert, NULL) != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot fill enum_status");
    int status = 0;
#define STORE_STATUS_ROW_(name, value, text)                                                       \
    if (status == 0) {                                                                             \
        sqlite3_bind_int(insert, 1, value);                                                        \
        sqlite3_bind_text(insert, 2, #name, -1, SQLITE_STATIC);                                    \
        sqlite3_bind_text(insert, 3, text, -1, SQLITE_STATIC);                                     \
        if (sqlite3_step(insert) != SQLITE_DONE)                                                   \
            status = store_set_sqlite_error(handle, "cannot fill enum_status");                    \
        sqlite3_reset(insert);                                                                     \
    }
    FLARE_STATUS_MAP(STORE_STATUS_ROW_)
#undef STORE_STATUS_ROW_
    sqlite3_finalize(insert);
    return status;
}

int store_build_indexes(store *handle, store_index_result *result)
{
    memset(result, 0, sizeof(*result));
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_require_writer(handle);
    if (status != 0)
        return status;
    status = store_exec(handle, "BEGIN IMMEDIATE", "cannot lock the database");
    if (status != 0)
        return status;
    for (size_t i = 0; status == 0 && i < sizeof(index_ddl) / sizeof(index_ddl[0]); i++)
        status = store_exec(handle, index_ddl[i], "cannot build the indexes");
    if (status == 0)
        status = store_exec(handle,
                            "INSERT OR REPLACE INTO meta(key, value) SELECT "
                            "'kernel_duration_max_ns', COALESCE(MAX(end_ns - start_ns), 0) "
                            "FROM kernels",
                            "cannot record the longest kernel");
    if (status == 0)
        status = store_exec(handle, "INSERT OR REPLACE INTO meta(key, value) VALUES ('indexed', 1)",
                            "cannot mark the session indexed");
    if (status == 0)
        status = store_exec(handle, "COMMIT", "cannot commit the indexes");
    if (status != 0) {
        sqlite3_exec(handle->db, "ROLLBACK", NULL, NULL, NULL);
        return status;
    }
    /* Statistics for the planner, so the views take the indexes. */
    store_exec(handle, "PRAGMA optimize", "cannot gather statistics");
    result->indexes = INDEX_COUNT;
    return 0;
}

int store_is_indexed(store *handle)
{
    int64_t indexed = 0;
    int found = 0;
    if (store_query_int(handle, "SELECT value FROM meta WHERE key = 'indexed'", &indexed, &found) !=
        SQLITE_OK)
        return 0;
    return found && indexed == 1;
}
