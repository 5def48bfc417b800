/*
 * store_evict.c: the flight recorder's SQL (store_evict.h).
 *
 * One pass is a handful of statements per detail table, prepared for the
 * pass and finalized after it: a pass runs at most once a second, so the
 * preparing costs nothing next to the rows, and the writer's hot path keeps
 * its statement table as it was. Every statement of a table shares one
 * WHERE clause text, so the rows added to the per-second totals are exactly
 * the rows deleted. Parameters, the same in every statement:
 *   ?1 lo, ?2 hi, ?3 pid, ?4 cutoff, ?5..?20 the protected intervals (lo, hi
 *   pairs), ?21 session.start_ns, ?22 counter_samples' lower bound,
 *   ?23..?24 the protected correlation ids (external_correlations).
 * Must never run outside the caller's batch, nor leave half a pass behind.
 */
#include "store/store_evict.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

#define EVICT_SQL_MAX 3072

typedef struct evict_table_info {
    const char *table;
    const char *start;
    const char *end;
    const char *label;
} evict_table_info;

static const evict_table_info evict_tables[STORE_EVICT_TABLE_COUNT] = {
#define STORE_EVICT_INFO_(id, table, start, end, label)                                            \
    [STORE_EVICT_##id] = {table, start, end, label},
    STORE_EVICT_TABLES(STORE_EVICT_INFO_)
#undef STORE_EVICT_INFO_
};

const char *store_evict_table_name(store_evict_table table)
{
    return (unsigned)table < STORE_EVICT_TABLE_COUNT ? evict_tables[table].table : NULL;
}

const char *store_evict_table_label(store_evict_table table)
{
    return (unsigned)table < STORE_EVICT_TABLE_COUNT ? evict_tables[table].label : NULL;
}

/* The per-second totals a table's evicted rows go to; "%s" is the WHERE
 * clause. NULL: the table keeps no totals. The second of a row is counted
 * from the session's start, as the v_*_seconds views count it. */
static const char *const evict_totals_sql[STORE_EVICT_TABLE_COUNT] = {
    [STORE_EVICT_KERNELS] =
        "INSERT INTO kernel_seconds(pid, second, name_id, count, gpu_ns)"
        " SELECT ?3, (start_ns - ?21) / 1000000000, name_id, COUNT(*), SUM(end_ns - start_ns)"
        " FROM kernels WHERE %s GROUP BY 2, 3 ON CONFLICT(pid, second, name_id) DO UPDATE SET"
        " count = count + excluded.count, gpu_ns = gpu_ns + excluded.gpu_ns",
    [STORE_EVICT_COPIES] =
        "INSERT INTO copy_seconds(pid, second, is_memset, copy_kind, count, bytes, gpu_ns)"
        " SELECT ?3, (start_ns - ?21) / 1000000000, is_memset, copy_kind, COUNT(*), SUM(bytes),"
        " SUM(end_ns - start_ns) FROM copies WHERE %s GROUP BY 2, 3, 4"
        " ON CONFLICT(pid, second, is_memset, copy_kind) DO UPDATE SET"
        " count = count + excluded.count, bytes = bytes + excluded.bytes,"
        " gpu_ns = gpu_ns + excluded.gpu_ns",
    [STORE_EVICT_API_CALLS] =
        "INSERT INTO api_call_seconds(pid, second, name_id, count, host_ns)"
        " SELECT ?3, (start_ns - ?21) / 1000000000, name_id, COUNT(*), SUM(end_ns - start_ns)"
        " FROM api_calls WHERE %s GROUP BY 2, 3 ON CONFLICT(pid, second, name_id) DO UPDATE SET"
        " count = count + excluded.count, host_ns = host_ns + excluded.host_ns",
    [STORE_EVICT_METRICS] =
        "INSERT INTO metric_seconds(pid, device, name_id, second, samples, min_value, max_value,"
        " sum_value) SELECT ?3, device, name_id, (time_ns - ?21) / 1000000000, COUNT(*),"
        " MIN(value), MAX(value), SUM(value) FROM metrics WHERE %s GROUP BY 2, 3, 4"
        " ON CONFLICT(pid, device, name_id, second) DO UPDATE SET"
        " samples = samples + excluded.samples, min_value = MIN(min_value, excluded.min_value),"
        " max_value = MAX(max_value, excluded.max_value), sum_value = sum_value + "
        "excluded.sum_value",
};

/* Appends to buffer (size EVICT_SQL_MAX); the texts are ours and fit. */
static void sql_append(char *buffer, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void sql_append(char *buffer, const char *format, ...)
{
    size_t used = strlen(buffer);
    va_list args;
    va_start(args, format);
    vsnprintf(buffer + used, EVICT_SQL_MAX - used, format, args);
    va_end(args);
}

/* "(start <= hi0 AND end >= lo0) OR ...": the row overlaps a protected
 * interval. Empty without intervals. */
static void overlap_clause(char *buffer, const evict_table_info *info, size_t count)
{
    buffer[0] = '\0';
    for (size_t i = 0; i < count; i++)
        sql_append(buffer, "%s(%s <= ?%zu AND %s >= ?%zu)", i > 0 ? " OR " : "", info->start,
                   6 + 2 * i, info->end, 5 + 2 * i);
}

/* The WHERE clause of the rows a pass evicts from table. */
static void evict_where(char *buffer, store_evict_table table, size_t protect_count)
{
    const evict_table_info *info = &evict_tables[table];
    buffer[0] = '\0';
    if (table == STORE_EVICT_EXTERNAL_CORRELATIONS) {
        sql_append(buffer, "rowid > ?1 AND rowid <= ?2 AND pid = ?3 AND NOT (correlation_id "
                           "BETWEEN ?23 AND ?24)");
        return;
    }
    int counters = table == STORE_EVICT_COUNTER_SAMPLES;
    sql_append(buffer, "rowid > ?%d AND rowid <= ?2 AND pid = ?3 AND %s < ?4", counters ? 22 : 1,
               info->end);
    if (protect_count > 0) {
        char overlap[EVICT_SQL_MAX];
        overlap_clause(overlap, info, protect_count);
        sql_append(buffer, " AND NOT (%s)", overlap);
    }
    if (counters)
        sql_append(buffer, " AND rowid NOT IN (SELECT MAX(rowid) FROM counter_samples WHERE"
                           " rowid > ?22 AND rowid <= ?2 AND pid = ?3 GROUP BY counter)");
}

/* A time as SQL compares it: past INT64_MAX (an interval still open) is
 * INT64_MAX, never a negative number. */
static int64_t time_value(uint64_t ns)
{
    return ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ns;
}

/* Binds the pass's parameters; those a statement does not use are refused
 * by SQLite (SQLITE_RANGE), which is harmless. */
static void bind_pass(sqlite3_stmt *statement, const store_evict_pass *pass,
                      store_evict_table table, const int64_t correlations[2])
{
    sqlite3_bind_int64(statement, 1, pass->lo[table]);
    sqlite3_bind_int64(statement, 2, pass->hi[table]);
    sqlite3_bind_int64(statement, 3, pass->pid);
    sqlite3_bind_int64(statement, 4, time_value(pass->cutoff_ns));
    for (size_t i = 0; i < pass->protect_count && i < STORE_EVICT_INTERVALS_MAX; i++) {
        sqlite3_bind_int64(statement, (int)(5 + 2 * i), time_value(pass->protect[i].lo_ns));
        sqlite3_bind_int64(statement, (int)(6 + 2 * i), time_value(pass->protect[i].hi_ns));
    }
    sqlite3_bind_int64(statement, 21, (int64_t)pass->session_start_ns);
    sqlite3_bind_int64(statement, 22, pass->counter_samples_lo);
    sqlite3_bind_int64(statement, 23, correlations[0]);
    sqlite3_bind_int64(statement, 24, correlations[1]);
}

/* Prepares sql, binds the pass and steps it to the end. *changes (may be
 * NULL) gets the rows it changed. 0 or FLARE_ERR_STORE. */
static int run_sql(store *handle, const char *sql, const store_evict_pass *pass,
                   store_evict_table table, const int64_t correlations[2], uint64_t *changes)
{
    sqlite3_stmt *statement = NULL;
    int status = store_prepare(handle, sql, &statement, "cannot prepare an eviction");
    if (status != 0)
        return status;
    bind_pass(statement, pass, table, correlations);
    int rc;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE)
        status = store_set_sqlite_error(handle, "cannot evict old rows");
    else if (changes != NULL)
        *changes = (uint64_t)sqlite3_changes(handle->db);
    sqlite3_finalize(statement);
    return status;
}

/* The range of correlation ids among the pass's protected rows of table
 * (kernels, copies, API calls), widened into range[0..1]. */
static int protected_correlations(store *handle, const store_evict_pass *pass,
                                  store_evict_table table, int64_t range[2])
{
    const evict_table_info *info = &evict_tables[table];
    char overlap[EVICT_SQL_MAX], sql[EVICT_SQL_MAX] = "";
    overlap_clause(overlap, info, pass->protect_count);
    sql_append(sql,
               "SELECT MIN(correlation_id), MAX(correlation_id) FROM %s WHERE rowid > ?1 AND "
               "rowid <= ?2 AND pid = ?3 AND %s < ?4 AND (%s)",
               info->table, info->end, overlap);
    sqlite3_stmt *statement = NULL;
    int status = store_prepare(handle, sql, &statement, "cannot prepare an eviction");
    if (status != 0)
        return status;
    const int64_t none[2] = {1, 0};
    bind_pass(statement, pass, table, none);
    int rc = sqlite3_step(statement);
    if (rc == SQLITE_ROW && sqlite3_column_type(statement, 0) != SQLITE_NULL) {
        int64_t low = sqlite3_column_int64(statement, 0), high = sqlite3_column_int64(statement, 1);
        if (range[0] > range[1] || low < range[0])
            range[0] = low;
        if (range[0] > range[1] || high > range[1])
            range[1] = high;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        status = store_set_sqlite_error(handle, "cannot read protected rows");
    }
    sqlite3_finalize(statement);
    return status;
}

/* Lowers each hi below its table's newest row (never deleted, so SQLite
 * never reuses a rowid) and never below lo. */
static int clamp_ranges(store *handle, store_evict_pass *pass)
{
    int64_t newest[STORE_EVICT_TABLE_COUNT];
    int status = store_evict_newest_rowids(handle, newest);
    if (status != 0)
        return status;
    for (int t = 0; t < STORE_EVICT_TABLE_COUNT; t++) {
        if (pass->hi[t] > newest[t] - 1)
            pass->hi[t] = newest[t] - 1;
        if (pass->hi[t] < pass->lo[t])
            pass->hi[t] = pass->lo[t];
    }
    if (pass->counter_samples_lo > pass->lo[STORE_EVICT_COUNTER_SAMPLES])
        pass->counter_samples_lo = pass->lo[STORE_EVICT_COUNTER_SAMPLES];
    return 0;
}

/* One table: its totals, then its DELETE. */
static int evict_table(store *handle, const store_evict_pass *pass, store_evict_table table,
                       const int64_t correlations[2], uint64_t *evicted)
{
    *evicted = 0;
    /* counter_samples looks again from where its range began before, but
     * only when it has new rows. */
    if (pass->hi[table] <= pass->lo[table])
        return 0;
    char where[EVICT_SQL_MAX], sql[EVICT_SQL_MAX] = "";
    evict_where(where, table, pass->protect_count);
    int status = 0;
    if (evict_totals_sql[table] != NULL) {
        sql_append(sql, evict_totals_sql[table], where);
        status = run_sql(handle, sql, pass, table, correlations, NULL);
        sql[0] = '\0';
    }
    if (status == 0) {
        sql_append(sql, "DELETE FROM %s WHERE %s", evict_tables[table].table, where);
        status = run_sql(handle, sql, pass, table, correlations, evicted);
    }
    return status;
}

static int evict_all(store *handle, store_evict_pass *pass,
                     uint64_t evicted[STORE_EVICT_TABLE_COUNT])
{
    int status = clamp_ranges(handle, pass);
    /* Correlation ids of the rows kept for a protected interval, so their
     * external correlations stay with them. */
    int64_t correlations[2] = {1, 0};
    static const store_evict_table correlated[] = {STORE_EVICT_KERNELS, STORE_EVICT_COPIES,
                                                   STORE_EVICT_API_CALLS};
    for (size_t i = 0; status == 0 && pass->protect_count > 0 && i < 3; i++)
        if (pass->hi[correlated[i]] > pass->lo[correlated[i]])
            status = protected_correlations(handle, pass, correlated[i], correlations);
    for (int t = 0; status == 0 && t < STORE_EVICT_TABLE_COUNT; t++)
        status = evict_table(handle, pass, (store_evict_table)t, correlations, &evicted[t]);
    return status;
}

int store_evict_run(store *handle, store_evict_pass *pass,
                    uint64_t evicted[STORE_EVICT_TABLE_COUNT])
{
    if (handle == NULL || pass == NULL || evicted == NULL ||
        pass->protect_count > STORE_EVICT_INTERVALS_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(evicted, 0, sizeof(uint64_t) * STORE_EVICT_TABLE_COUNT);
    int status = store_require_writer(handle);
    if (status != 0)
        return status;
    if (!handle->in_batch) {
        store_set_error(handle, "%s: eviction needs an open batch", handle->path);
        return FLARE_ERR_STATE;
    }
    /* The batch's buffered rows first: a savepoint rolled back must not
     * take rows that were written inside it with it. */
    status = store_flush(handle);
    if (status == 0)
        status = store_exec(handle, "SAVEPOINT flare_evict", "cannot begin an eviction");
    if (status != 0)
        return status;
    status = evict_all(handle, pass, evicted);
    if (status == 0 && store_exec(handle, "RELEASE flare_evict", "cannot end an eviction") == 0)
        return 0;
    memset(evicted, 0, sizeof(uint64_t) * STORE_EVICT_TABLE_COUNT);
    if (sqlite3_get_autocommit(handle->db)) {
        store_batch_failed(handle); /* SQLite rolled the whole batch back */
    } else {
        sqlite3_exec(handle->db, "ROLLBACK TO flare_evict", NULL, NULL, NULL);
        sqlite3_exec(handle->db, "RELEASE flare_evict", NULL, NULL, NULL);
    }
    return FLARE_ERR_STORE;
}

int store_evict_newest_rowids(store *handle, int64_t rowids[STORE_EVICT_TABLE_COUNT])
{
    if (handle == NULL || rowids == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_flush(handle);
    if (status != 0)
        return status;
    for (int t = 0; t < STORE_EVICT_TABLE_COUNT; t++) {
        char sql[96];
        snprintf(sql, sizeof(sql), "SELECT COALESCE(MAX(rowid), 0) FROM %s", evict_tables[t].table);
        rowids[t] = 0;
        if (store_query_int(handle, sql, &rowids[t], NULL) != SQLITE_OK)
            return store_set_sqlite_error(handle, "cannot read the newest rows");
    }
    return 0;
}

int store_evict_used_bytes(store *handle, uint64_t *used_bytes, uint64_t *file_bytes)
{
    if (handle == NULL || used_bytes == NULL || file_bytes == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int64_t pages = 0, free_pages = 0, page_size = 0;
    if (store_query_int(handle, "PRAGMA page_count", &pages, NULL) != SQLITE_OK ||
        store_query_int(handle, "PRAGMA freelist_count", &free_pages, NULL) != SQLITE_OK ||
        store_query_int(handle, "PRAGMA page_size", &page_size, NULL) != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot read the database's size");
    if (free_pages > pages)
        free_pages = pages;
    *used_bytes = (uint64_t)(pages - free_pages) * (uint64_t)page_size;
    *file_bytes = (uint64_t)pages * (uint64_t)page_size;
    return 0;
}

int store_evict_session_start(store *handle, uint64_t *start_ns)
{
    if (handle == NULL || start_ns == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int64_t value = 0;
    int found = 0;
    if (store_query_int(handle, "SELECT start_ns FROM session WHERE id = 1", &value, &found) !=
        SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot read the session's start");
    if (!found)
        return FLARE_ERR_NOT_FOUND;
    *start_ns = (uint64_t)value;
    return 0;
}

typedef struct protected_walk {
    store_evict_interval_callback callback;
    void *user;
} protected_walk;

static int protected_row(sqlite3_stmt *statement, void *user)
{
    protected_walk *walk = user;
    uint64_t lo = (uint64_t)sqlite3_column_int64(statement, 0);
    uint64_t hi = sqlite3_column_type(statement, 1) == SQLITE_NULL
                      ? UINT64_MAX
                      : (uint64_t)sqlite3_column_int64(statement, 1);
    return walk->callback(lo, hi < lo ? lo : hi, walk->user) != 0;
}

int store_evict_protected(store *handle, uint64_t since_ns, store_evict_interval_callback callback,
                          void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    /* A window's closed_ns is 0 or NULL only if it never closed. */
    static const char sql[] =
        "SELECT opened_ns, NULLIF(closed_ns, 0) FROM windows WHERE opened_ns > 0 AND"
        " (closed_ns IS NULL OR closed_ns = 0 OR closed_ns >= ?1)"
        " UNION ALL SELECT begin_ns, end_ns FROM replay_launches WHERE end_ns >= ?1"
        " UNION ALL SELECT begin_ns, end_ns FROM replay_spans WHERE end_ns >= ?1 ORDER BY 1";
    store_params params = {.count = 1, .values = {(int64_t)since_ns}};
    protected_walk walk = {.callback = callback, .user = user};
    return store_query_each(handle, sql, &params, protected_row, &walk,
                            "cannot read the protected intervals");
}

int store_evict_limit_wal(store *handle, uint64_t cap_bytes)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int64_t page_size = 4096;
    store_query_int(handle, "PRAGMA page_size", &page_size, NULL);
    if (page_size <= 0)
        page_size = 4096;
    uint64_t pages = cap_bytes / 16 / (uint64_t)page_size;
    if (pages > 10000)
        pages = 10000;
    if (pages < 64)
        pages = 64;
    char sql[128];
    snprintf(sql, sizeof(sql), "PRAGMA wal_autocheckpoint = %llu; PRAGMA journal_size_limit = %llu",
             (unsigned long long)pages, (unsigned long long)(pages * (uint64_t)page_size));
    return store_exec(handle, sql, "cannot limit the write-ahead log");
}

int store_evict_prepare(store *handle)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    /* Debian's SQLite zeroes every byte a DELETE frees (SECURE_DELETE),
     * which rewrites each freed page: twice the writes of the rows
     * themselves. FAST zeroes only within pages written anyway; the rest
     * is overwritten when the page is reused, which eviction makes soon. */
    return store_exec(handle, "PRAGMA secure_delete = FAST", "cannot set up eviction");
}
