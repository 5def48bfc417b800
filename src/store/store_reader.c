/*
 * store_reader.c: the queries behind `flare report`.
 *
 * Readers may allocate and sort (they run once, after the fact) but must
 * never write: a READ handle is read-only, and a report must not change the
 * session it reports on. Every reader works on a WRITE handle too, seeing
 * that handle's uncommitted batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

static void store_copy_text(char *buffer, size_t size, const unsigned char *text)
{
    snprintf(buffer, size, "%s", text != NULL ? (const char *)text : "");
}

/* ---- session ---- */

int store_read_session(store *handle, store_session_summary *out)
{
    if (handle == NULL || out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    int status = store_flush(handle);
    if (status != 0)
        return status;

    /* One read transaction, so the counts and the session row describe the
     * same moment while writers carry on. Inside a writer's batch the batch
     * already is that transaction. */
    int began = 0;
    if (sqlite3_get_autocommit(handle->db)) {
        if (sqlite3_exec(handle->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
            return store_set_sqlite_error(handle, "cannot read the session");
        began = 1;
    }

    sqlite3_stmt *statement = NULL;
    status = store_prepare(handle,
                           "SELECT (SELECT value FROM meta WHERE key = 'schema_version'),"
                           " (SELECT count(*) FROM processes), (SELECT count(*) FROM kernels),"
                           " (SELECT count(*) FROM copies), (SELECT count(*) FROM scopes)",
                           &statement, "cannot read the session");
    if (status == 0) {
        if (sqlite3_step(statement) == SQLITE_ROW) {
            out->schema_version = sqlite3_column_int(statement, 0);
            out->process_count = sqlite3_column_int64(statement, 1);
            out->kernel_count = sqlite3_column_int64(statement, 2);
            out->copy_count = sqlite3_column_int64(statement, 3);
            out->scope_count = sqlite3_column_int64(statement, 4);
        } else {
            status = store_set_sqlite_error(handle, "cannot count rows");
        }
        sqlite3_finalize(statement);
    }

    if (status == 0)
        status = store_prepare(handle,
                               "SELECT command, start_ns, end_ns, start_unix_ns, has_exit_status,"
                               " exit_status, host, flare_version FROM session WHERE id = 1",
                               &statement, "cannot read the session");
    if (status == 0) {
        int rc = sqlite3_step(statement);
        if (rc == SQLITE_ROW) {
            store_copy_text(out->command, sizeof out->command, sqlite3_column_text(statement, 0));
            out->start_ns = (uint64_t)sqlite3_column_int64(statement, 1);
            out->end_ns = (uint64_t)sqlite3_column_int64(statement, 2); /* NULL reads as 0 */
            out->start_unix_ns = sqlite3_column_int64(statement, 3);
            out->has_exit_status = sqlite3_column_int(statement, 4);
            out->exit_status = sqlite3_column_int(statement, 5);
            store_copy_text(out->host, sizeof out->host, sqlite3_column_text(statement, 6));
            store_copy_text(out->flare_version, sizeof out->flare_version,
                            sqlite3_column_text(statement, 7));
        } else if (rc != SQLITE_DONE) {
            /* No row is fine: the counts still describe what was written. */
            status = store_set_sqlite_error(handle, "cannot read the session row");
        }
        sqlite3_finalize(statement);
    }

    if (began)
        sqlite3_exec(handle->db, status == 0 ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/* ---- duration stats ---- */

typedef struct store_sample {
    int64_t name_id;
    uint64_t duration_ns;
} store_sample;

typedef struct store_group {
    int64_t name_id;
    store_duration_stats stats;
} store_group;

static int store_sample_compare(const void *left, const void *right)
{
    const store_sample *a = left;
    const store_sample *b = right;
    if (a->name_id != b->name_id)
        return a->name_id < b->name_id ? -1 : 1;
    if (a->duration_ns != b->duration_ns)
        return a->duration_ns < b->duration_ns ? -1 : 1;
    return 0;
}

/* Total descending; ties by name id so the order is reproducible. */
static int store_group_compare(const void *left, const void *right)
{
    const store_group *a = left;
    const store_group *b = right;
    if (a->stats.total_ns != b->stats.total_ns)
        return a->stats.total_ns > b->stats.total_ns ? -1 : 1;
    if (a->name_id != b->name_id)
        return a->name_id < b->name_id ? -1 : 1;
    return 0;
}

/* Nearest rank: the ceil(percent/100 * count)-th smallest, 1-based. */
static uint64_t store_nearest_rank(const store_sample *sorted, int64_t count, int64_t percent)
{
    int64_t rank = (percent * count + 99) / 100;
    if (rank < 1)
        rank = 1;
    return sorted[rank - 1].duration_ns;
}

/* The samples read so far; grows by doubling. */
typedef struct store_sample_list {
    store *handle;
    store_sample *samples;
    size_t used;
    size_t capacity;
} store_sample_list;

/* A row handler: appends the row's (name, duration). A row whose end
 * precedes its start counts as zero long. */
static int store_sample_row(sqlite3_stmt *statement, void *user)
{
    store_sample_list *list = user;
    if (list->used == list->capacity) {
        size_t grown = list->capacity == 0 ? 4096 : list->capacity * 2;
        store_sample *bigger = realloc(list->samples, grown * sizeof *bigger);
        if (bigger == NULL) {
            store_set_error(list->handle, "%s: out of memory reading durations",
                            list->handle->path);
            return FLARE_ERR_NO_MEMORY;
        }
        list->samples = bigger;
        list->capacity = grown;
    }
    uint64_t start = (uint64_t)sqlite3_column_int64(statement, 1);
    uint64_t end = (uint64_t)sqlite3_column_int64(statement, 2);
    list->samples[list->used].name_id = sqlite3_column_int64(statement, 0);
    list->samples[list->used].duration_ns = end > start ? end - start : 0;
    list->used++;
    return 0;
}

/* Reads every (name, duration) of the table, sorted by name then duration. */
static int store_read_samples(store *handle, const char *sql, store_sample **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    store_sample_list list = {.handle = handle};
    int status =
        store_query_each(handle, sql, NULL, store_sample_row, &list, "cannot read durations");
    if (status != 0) {
        free(list.samples);
        return status;
    }
    if (list.used > 1)
        qsort(list.samples, list.used, sizeof *list.samples, store_sample_compare);
    *out = list.samples;
    *count = list.used;
    return 0;
}

static int store_read_duration_stats(store *handle, const char *sql, int limit,
                                     store_duration_callback callback, void *user)
{
    if (handle == NULL || callback == NULL || limit < 0)
        return FLARE_ERR_INVALID_ARGUMENT;

    int status = store_flush(handle);
    if (status != 0)
        return status;
    store_sample *samples = NULL;
    size_t sample_count = 0;
    status = store_read_samples(handle, sql, &samples, &sample_count);
    if (status != 0)
        return status;

    size_t group_count = 0;
    for (size_t i = 0; i < sample_count; i++)
        if (i == 0 || samples[i].name_id != samples[i - 1].name_id)
            group_count++;
    store_group *groups = calloc(group_count > 0 ? group_count : 1, sizeof *groups);
    if (groups == NULL) {
        free(samples);
        store_set_error(handle, "%s: out of memory reading durations", handle->path);
        return FLARE_ERR_NO_MEMORY;
    }
    size_t group = 0;
    for (size_t first = 0; first < sample_count;) {
        size_t end = first;
        uint64_t total = 0;
        while (end < sample_count && samples[end].name_id == samples[first].name_id)
            total += samples[end++].duration_ns;
        int64_t count = (int64_t)(end - first);
        groups[group].name_id = samples[first].name_id;
        groups[group].stats = (store_duration_stats){
            .count = count,
            .total_ns = total,
            .mean_ns = total / (uint64_t)count,
            .p50_ns = store_nearest_rank(samples + first, count, 50),
            .p99_ns = store_nearest_rank(samples + first, count, 99),
            .max_ns = samples[end - 1].duration_ns,
        };
        group++;
        first = end;
    }
    free(samples);
    qsort(groups, group_count, sizeof *groups, store_group_compare);

    sqlite3_stmt *name = NULL;
    status =
        store_prepare(handle, "SELECT name FROM names WHERE id = ?1", &name, "cannot read names");
    for (size_t i = 0; status == 0 && i < group_count; i++) {
        if (limit > 0 && i >= (size_t)limit)
            break;
        sqlite3_bind_int64(name, 1, groups[i].name_id);
        int rc = sqlite3_step(name);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
            status = store_set_sqlite_error(handle, "cannot read names");
            break;
        }
        const unsigned char *text = rc == SQLITE_ROW ? sqlite3_column_text(name, 0) : NULL;
        groups[i].stats.name = text != NULL ? (const char *)text : "";
        int stop = callback(&groups[i].stats, user);
        sqlite3_reset(name);
        if (stop)
            break;
    }
    sqlite3_finalize(name);
    free(groups);
    return status;
}

int store_read_kernel_stats(store *handle, int limit, store_duration_callback callback, void *user)
{
    return store_read_duration_stats(handle, "SELECT name_id, start_ns, end_ns FROM kernels", limit,
                                     callback, user);
}

int store_read_scope_stats(store *handle, int limit, store_duration_callback callback, void *user)
{
    return store_read_duration_stats(handle, "SELECT name_id, start_ns, end_ns FROM scopes", limit,
                                     callback, user);
}

/* ---- copies, drops, capabilities, metrics ---- */

static int store_copy_stats_row(sqlite3_stmt *statement, void *user)
{
    store_copy_stats stats = {
        .is_memset = sqlite3_column_int(statement, 0),
        .copy_kind = sqlite3_column_int(statement, 1),
        .count = sqlite3_column_int64(statement, 2),
        .bytes = (uint64_t)sqlite3_column_int64(statement, 3),
        .total_ns = (uint64_t)sqlite3_column_int64(statement, 4),
        .failed = sqlite3_column_int64(statement, 5),
    };
    return STORE_READER_CALL(store_copy_callback, &stats, user);
}

int store_read_copy_stats(store *handle, store_copy_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(
        handle,
        "SELECT is_memset, copy_kind, count(*), sum(bytes), sum(max(end_ns - start_ns, 0)),"
        " sum(status != 0) FROM copies GROUP BY is_memset, copy_kind ORDER BY is_memset, copy_kind",
        NULL, store_copy_stats_row, &(store_reader_call){&callback, user},
        "cannot read copy stats");
}

static int store_drop_row_handler(sqlite3_stmt *statement, void *user)
{
    store_drop_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .source = store_column_text_or_empty(statement, 1),
        .detail = store_column_text_or_empty(statement, 2),
        .count = (uint64_t)sqlite3_column_int64(statement, 3),
    };
    return STORE_READER_CALL(store_drop_callback, &row, user);
}

int store_read_drops(store *handle, store_drop_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle,
                            "SELECT pid, source, detail, count FROM drops WHERE count != 0"
                            " ORDER BY pid, source, detail",
                            NULL, store_drop_row_handler, &(store_reader_call){&callback, user},
                            "cannot read drops");
}

static int store_capability_row_handler(sqlite3_stmt *statement, void *user)
{
    store_capability_row row = {
        .pid = sqlite3_column_int64(statement, 0),
        .feature = store_column_text_or_empty(statement, 1),
        .requested = sqlite3_column_int(statement, 2),
        .status = store_column_text_or_empty(statement, 3),
        .reason = store_column_text_or_empty(statement, 4),
    };
    return STORE_READER_CALL(store_capability_callback, &row, user);
}

int store_read_capabilities(store *handle, store_capability_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle,
                            "SELECT pid, feature, requested, status, reason FROM capabilities"
                            " ORDER BY pid, rowid",
                            NULL, store_capability_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read capabilities");
}

static int store_metric_stats_row(sqlite3_stmt *statement, void *user)
{
    store_metric_stats row = {
        .device = sqlite3_column_int(statement, 0),
        .name = store_column_text_or_empty(statement, 1),
        .count = sqlite3_column_int64(statement, 2),
        .minimum = sqlite3_column_int64(statement, 3),
        .maximum = sqlite3_column_int64(statement, 4),
        .mean = sqlite3_column_double(statement, 5),
    };
    return STORE_READER_CALL(store_metric_callback, &row, user);
}

int store_read_metric_stats(store *handle, store_metric_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle,
                            "SELECT m.device, n.name, COUNT(*), MIN(m.value), MAX(m.value),"
                            " AVG(m.value) FROM metrics m JOIN names n ON n.id = m.name_id"
                            " GROUP BY m.device, n.name ORDER BY m.device, n.name",
                            NULL, store_metric_stats_row, &(store_reader_call){&callback, user},
                            "cannot read metrics");
}
