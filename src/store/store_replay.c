/*
 * store_replay.c: the kernel-replay and range-replay tables replay_launches,
 * replay_spans, replay_passes and replay_metrics (store_replay.h,
 * docs/schema.md).
 *
 * Replayed launches and spans are few (each costs the program a device
 * drain and several passes), so each call prepares its statements rather
 * than taking slots in the writer's prepared table. One call's records land
 * whole or not at all: a replay row without its metrics would read as
 * "collected nothing", which is a different answer. A span's own record
 * never becomes a replay_launches row: it is not a kernel, and counting it
 * as one would put a kernel named after a scope in every launch table.
 * Never aborts, never called on a launch path; reports SQLite's message
 * through store_last_error.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"
#include "store/store_replay.h"

/* OR REPLACE everywhere: writing the same record twice (a collector that
 * retries) gives the same rows, and a duplicated metric name in one record
 * ("a,a") keeps one row instead of failing the whole call. */
static const char launch_insert_sql[] =
    "INSERT OR REPLACE INTO replay_launches(pid, launch_id, device, stream_id, kernel, "
    "launch_index, passes_planned, passes_run, declined, reason, begin_ns, end_ns, drain_ns, "
    "snapshot_bytes, shadow_on_device, snapshot_ns, restore_ns, bytes_restored, collector, "
    "span_id) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
    "?19, ?20)";
static const char span_insert_sql[] =
    "INSERT OR REPLACE INTO replay_spans(pid, span_id, name, occurrence, device, kernels, copies, "
    "passes_planned, passes_run, declined, reason, begin_ns, end_ns, drain_ns, snapshot_bytes, "
    "shadow_on_device, snapshot_ns, restore_ns, bytes_restored, collector) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
    "?19, ?20)";
static const char pass_insert_sql[] = "INSERT OR REPLACE INTO replay_passes(pid, launch_id, pass, "
                                      "start_ns, end_ns) VALUES (?1, ?2, ?3, ?4, ?5)";
static const char metric_insert_sql[] =
    "INSERT OR REPLACE INTO replay_metrics(pid, launch_id, metric, value) VALUES (?1, ?2, ?3, ?4)";
static const char note_insert_sql[] =
    "INSERT OR REPLACE INTO replay_value_methods(pid, launch_id, metric, method, status, "
    "error_bound, samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

static int step_once(store *handle, sqlite3_stmt *statement, const char *what)
{
    int status = 0;
    if (sqlite3_step(statement) != SQLITE_DONE)
        status = store_set_sqlite_error(handle, what);
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    return status;
}

/* The record's kept pass times; a span's go under its span id. */
static int write_passes(store *handle, int64_t pid, uint64_t id, const store_replay_record *record,
                        sqlite3_stmt *pass)
{
    int status = 0;
    for (uint32_t index = 0; index < record->pass_count && status == 0; index++) {
        sqlite3_bind_int64(pass, 1, pid);
        sqlite3_bind_int64(pass, 2, (int64_t)id);
        sqlite3_bind_int64(pass, 3, index);
        sqlite3_bind_int64(pass, 4, (int64_t)record->pass_start_ns[index]);
        sqlite3_bind_int64(pass, 5, (int64_t)record->pass_end_ns[index]);
        status = step_once(handle, pass, "cannot write a replay pass");
    }
    return status;
}

/* Binds the columns replay_launches and replay_spans share, passes_planned
 * to collector, from parameter first on (they stand in the same order in
 * both inserts). */
static void bind_run(sqlite3_stmt *statement, int first, const store_replay_record *record)
{
    sqlite3_bind_int64(statement, first, record->passes_planned);
    sqlite3_bind_int64(statement, first + 1, record->passes_run);
    sqlite3_bind_int64(statement, first + 2, record->declined != 0);
    store_bind_text_or_empty(statement, first + 3, record->reason);
    sqlite3_bind_int64(statement, first + 4, (int64_t)record->begin_ns);
    sqlite3_bind_int64(statement, first + 5, (int64_t)record->end_ns);
    sqlite3_bind_int64(statement, first + 6, (int64_t)record->drain_ns);
    sqlite3_bind_int64(statement, first + 7, (int64_t)record->snapshot_bytes);
    sqlite3_bind_int64(statement, first + 8, record->shadow_on_device != 0);
    sqlite3_bind_int64(statement, first + 9, (int64_t)record->snapshot_ns);
    sqlite3_bind_int64(statement, first + 10, (int64_t)record->restore_ns);
    sqlite3_bind_int64(statement, first + 11, (int64_t)record->bytes_restored);
    store_bind_text_or_empty(statement, first + 12, record->collector);
}

/* A span's own record: its replay_spans row and its passes. The engine
 * gives a span launch_id == span_id; span_id is what the kernels carry, so
 * it is the key (launch_id only when an older record left span_id 0). */
static int write_span(store *handle, int64_t pid, const store_replay_record *record,
                      sqlite3_stmt *span, sqlite3_stmt *pass)
{
    uint64_t span_id = record->span_id != 0 ? record->span_id : record->launch_id;
    sqlite3_bind_int64(span, 1, pid);
    sqlite3_bind_int64(span, 2, (int64_t)span_id);
    store_bind_text_or_empty(span, 3, record->name);
    sqlite3_bind_int64(span, 4, (int64_t)record->launch_index);
    sqlite3_bind_int64(span, 5, record->device);
    sqlite3_bind_int64(span, 6, record->span_kernels);
    sqlite3_bind_int64(span, 7, record->span_copies);
    bind_run(span, 8, record);
    int status = step_once(handle, span, "cannot write a replay span");
    if (status != 0)
        return status;
    return write_passes(handle, pid, span_id, record, pass);
}

/* The record's notes on how its values were produced, one row each. */
static int write_notes(store *handle, int64_t pid, const store_replay_record *record,
                       sqlite3_stmt *note)
{
    int status = 0;
    for (uint32_t index = 0; index < record->metric_count && status == 0; index++) {
        const store_replay_value_note *value_note = &record->metric_notes[index];
        if (value_note->method == NULL || value_note->method[0] == '\0')
            continue;
        sqlite3_bind_int64(note, 1, pid);
        sqlite3_bind_int64(note, 2, (int64_t)record->launch_id);
        store_bind_text_or_empty(note, 3, record->metric_names[index]);
        store_bind_text_or_empty(note, 4, value_note->method);
        store_bind_text_or_empty(note, 5, value_note->status);
        /* NULL for "none known"; an infinite bound (no sample overlapped)
         * is stored as SQLite's infinity, which readers show as such. */
        if (isnan(value_note->error_bound))
            sqlite3_bind_null(note, 6);
        else
            sqlite3_bind_double(note, 6, value_note->error_bound);
        sqlite3_bind_int64(note, 7, value_note->samples);
        status = step_once(handle, note, "cannot write how a replay value was produced");
    }
    return status;
}

static int write_record(store *handle, int64_t pid, const store_replay_record *record,
                        sqlite3_stmt *launch, sqlite3_stmt *pass, sqlite3_stmt *metric,
                        sqlite3_stmt *note)
{
    sqlite3_bind_int64(launch, 1, pid);
    sqlite3_bind_int64(launch, 2, (int64_t)record->launch_id);
    sqlite3_bind_int64(launch, 3, record->device);
    sqlite3_bind_int64(launch, 4, (int64_t)record->stream_id);
    store_bind_text_or_empty(launch, 5, record->name);
    sqlite3_bind_int64(launch, 6, (int64_t)record->launch_index);
    bind_run(launch, 7, record);
    /* NULL, not 0, for a launch replayed on its own: "no span" is not a
     * span id, and NULL keeps that out of any join on span_id. */
    if (record->span_id != 0)
        sqlite3_bind_int64(launch, 20, (int64_t)record->span_id);
    else
        sqlite3_bind_null(launch, 20);
    int status = step_once(handle, launch, "cannot write a replay launch");
    if (status == 0)
        status = write_passes(handle, pid, record->launch_id, record, pass);

    for (uint32_t index = 0; index < record->metric_count && status == 0; index++) {
        sqlite3_bind_int64(metric, 1, pid);
        sqlite3_bind_int64(metric, 2, (int64_t)record->launch_id);
        store_bind_text_or_empty(metric, 3, record->metric_names[index]);
        /* NULL, not NaN: SQL has no NaN, and NULL says "not available" to
         * any reader (SQLite would turn a NaN into NULL anyway; this makes
         * it deliberate). */
        if (isnan(record->metric_values[index]))
            sqlite3_bind_null(metric, 4);
        else
            sqlite3_bind_double(metric, 4, record->metric_values[index]);
        status = step_once(handle, metric, "cannot write a replay metric");
    }
    if (status == 0 && record->metric_notes != NULL)
        status = write_notes(handle, pid, record, note);
    return status;
}

/* Runs one statement without results (savepoint control). */
static int run_sql(store *handle, const char *sql, const char *what)
{
    if (sqlite3_exec(handle->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_set_sqlite_error(handle, what);
    return 0;
}

int store_write_replay_records(store *handle, int64_t pid,
                               const store_replay_record *const *records, size_t count)
{
    int status = store_writer_ready(handle, records != NULL || count == 0);
    if (status != 0 || count == 0)
        return status;

    /* A savepoint nests inside the collector's batch, so a failure here
     * undoes this call's rows without costing the batch its kernels; outside
     * a batch it is a transaction of its own. */
    status = run_sql(handle, "SAVEPOINT replay_records", "cannot start writing replay records");
    if (status != 0)
        return status;
    sqlite3_stmt *launch = NULL, *span = NULL, *pass = NULL, *metric = NULL, *note = NULL;
    status = store_prepare(handle, launch_insert_sql, &launch, "cannot prepare the replay insert");
    if (status == 0)
        status = store_prepare(handle, span_insert_sql, &span, "cannot prepare the replay insert");
    if (status == 0)
        status = store_prepare(handle, pass_insert_sql, &pass, "cannot prepare the replay insert");
    if (status == 0)
        status =
            store_prepare(handle, metric_insert_sql, &metric, "cannot prepare the replay insert");
    if (status == 0)
        status = store_prepare(handle, note_insert_sql, &note, "cannot prepare the replay insert");
    for (size_t index = 0; index < count && status == 0; index++) {
        const store_replay_record *record = records[index];
        if (record == NULL)
            continue;
        if (record->is_span)
            status = write_span(handle, pid, record, span, pass);
        else
            status = write_record(handle, pid, record, launch, pass, metric, note);
    }
    sqlite3_finalize(note);
    sqlite3_finalize(launch);
    sqlite3_finalize(span);
    sqlite3_finalize(pass);
    sqlite3_finalize(metric);

    if (status == 0)
        return run_sql(handle, "RELEASE replay_records", "cannot finish writing replay records");
    /* The error is already recorded; undoing must not overwrite it. Some
     * errors (a full disk, I/O) make SQLite roll back the whole transaction
     * itself: then there is no savepoint left, and inside a batch the batch
     * has lost rows, so it must fail rather than commit with a hole. */
    if (!sqlite3_get_autocommit(handle->db)) {
        sqlite3_exec(handle->db, "ROLLBACK TO replay_records; RELEASE replay_records", NULL, NULL,
                     NULL);
    } else if (handle->in_batch) {
        store_batch_failed(handle);
    }
    return status;
}

/* ---- readers ---- */

/* The columns of a launch row, in the order fill_launch_row reads them. */
#define LAUNCH_COLUMNS                                                                             \
    "SELECT l.pid, l.launch_id, l.device, l.stream_id, l.kernel, l.launch_index, "                 \
    "l.passes_planned, l.passes_run, l.declined, l.reason, l.begin_ns, l.end_ns, l.drain_ns, "     \
    "l.snapshot_bytes, l.shadow_on_device, l.snapshot_ns, l.restore_ns, l.bytes_restored, "        \
    "l.collector, "                                                                                \
    "(SELECT count(*) FROM replay_passes p WHERE p.pid = l.pid AND p.launch_id = l.launch_id), "   \
    "(SELECT avg(p.end_ns - p.start_ns) FROM replay_passes p WHERE p.pid = l.pid AND "             \
    "p.launch_id = l.launch_id AND p.end_ns >= p.start_ns), "                                      \
    "l.span_id "                                                                                   \
    "FROM replay_launches l "

/* A launch row that belongs to the per-launch tables: replayed on its own,
 * or a span kernel whose span row never arrived (a lost record), which is
 * shown there rather than nowhere. Its negation is "a kernel of a stored
 * span". */
#define OWN_LAUNCH                                                                                 \
    "(l.span_id IS NULL OR NOT EXISTS (SELECT 1 FROM replay_spans s WHERE s.pid = l.pid AND "      \
    "s.span_id = l.span_id))"

static const char launch_select_sql[] =
    LAUNCH_COLUMNS "WHERE " OWN_LAUNCH " ORDER BY l.kernel, l.pid, l.launch_index, l.launch_id";
/* Launch ids come from one per-process counter in submission order, so
 * launch_id order is the order the span launched its kernels. */
static const char span_kernel_select_sql[] =
    LAUNCH_COLUMNS "WHERE l.pid = ?1 AND l.span_id = ?2 ORDER BY l.launch_id";
/* rowid order is the order the engine listed the metrics in (the user's
 * --metrics order, or the set's). */
static const char metric_select_sql[] =
    "SELECT metric, value FROM replay_metrics WHERE pid = ?1 AND launch_id = ?2 ORDER BY rowid";
/* The same with how each value was produced (sessions of schema 16 on). */
static const char metric_note_select_sql[] =
    "SELECT m.metric, m.value, v.method, v.status, v.error_bound FROM replay_metrics m "
    "LEFT JOIN replay_value_methods v ON v.pid = m.pid AND v.launch_id = m.launch_id AND "
    "v.metric = m.metric WHERE m.pid = ?1 AND m.launch_id = ?2 ORDER BY m.rowid";

/* The metrics statement the readers use: with the notes where the session
 * has their table. */
static int prepare_metric_select(store *handle, sqlite3_stmt **out)
{
    return store_prepare(handle,
                         store_has_table(handle, "replay_value_methods") ? metric_note_select_sql
                                                                         : metric_select_sql,
                         out, "cannot read the replay metrics");
}

/* Reads the run columns (STORE_REPLAY_RUN_MEMBERS, in order) of the
 * current row, from column first on, into row: a launch or a span row (a
 * macro, so that one list serves both types). Text points into the row. */
#define READ_RUN_COLUMNS(statement, first, row)                                                    \
    do {                                                                                           \
        (row)->passes_planned = (uint32_t)sqlite3_column_int64((statement), (first));              \
        (row)->passes_run = (uint32_t)sqlite3_column_int64((statement), (first) + 1);              \
        (row)->declined = sqlite3_column_int((statement), (first) + 2) != 0;                       \
        (row)->reason = store_column_text_or_empty((statement), (first) + 3);                      \
        (row)->begin_ns = (uint64_t)sqlite3_column_int64((statement), (first) + 4);                \
        (row)->end_ns = (uint64_t)sqlite3_column_int64((statement), (first) + 5);                  \
        (row)->drain_ns = (uint64_t)sqlite3_column_int64((statement), (first) + 6);                \
        (row)->snapshot_bytes = (uint64_t)sqlite3_column_int64((statement), (first) + 7);          \
        (row)->shadow_on_device = sqlite3_column_int((statement), (first) + 8) != 0;               \
        (row)->snapshot_ns = (uint64_t)sqlite3_column_int64((statement), (first) + 9);             \
        (row)->restore_ns = (uint64_t)sqlite3_column_int64((statement), (first) + 10);             \
        (row)->bytes_restored = (uint64_t)sqlite3_column_int64((statement), (first) + 11);         \
        (row)->collector = store_column_text_or_empty((statement), (first) + 12);                  \
    } while (0)

/* Reads the current row of a LAUNCH_COLUMNS statement; text points into the
 * statement's row, valid until its next step. */
static void fill_launch_row(sqlite3_stmt *statement, store_replay_launch_row *row)
{
    memset(row, 0, sizeof(*row));
    row->pid = sqlite3_column_int64(statement, 0);
    row->launch_id = (uint64_t)sqlite3_column_int64(statement, 1);
    row->device = sqlite3_column_int(statement, 2);
    row->stream_id = (uint64_t)sqlite3_column_int64(statement, 3);
    row->kernel = store_column_text_or_empty(statement, 4);
    row->launch_index = (uint64_t)sqlite3_column_int64(statement, 5);
    READ_RUN_COLUMNS(statement, 6, row);
    row->passes_kept = (uint32_t)sqlite3_column_int64(statement, 19);
    row->pass_mean_ns = store_column_u64_rounded(statement, 20);
    row->span_id = (uint64_t)sqlite3_column_int64(statement, 21); /* NULL reads as 0 */
}

/* One launch's metrics, copied out of SQLite's row buffers (which the next
 * step invalidates) into arrays reused from launch to launch. */
typedef struct metric_buffer {
    size_t count;
    size_t capacity;
    char **names;
    double *values;
    int *has_value;
    char **methods;  /* "" where no note */
    char **statuses; /* "" where no note */
    double *bounds;  /* NaN where none */
} metric_buffer;

static void metric_buffer_clear(metric_buffer *buffer)
{
    for (size_t index = 0; index < buffer->count; index++) {
        free(buffer->names[index]);
        free(buffer->methods[index]);
        free(buffer->statuses[index]);
    }
    buffer->count = 0;
}

static void metric_buffer_free(metric_buffer *buffer)
{
    metric_buffer_clear(buffer);
    free(buffer->names);
    free(buffer->values);
    free(buffer->has_value);
    free(buffer->methods);
    free(buffer->statuses);
    free(buffer->bounds);
    memset(buffer, 0, sizeof(*buffer));
}

/* Grows one of the buffer's arrays to capacity elements of size bytes. */
static int grow(void **array, size_t capacity, size_t size)
{
    void *grown = realloc(*array, capacity * size);
    if (grown == NULL)
        return FLARE_ERR_NO_MEMORY;
    *array = grown;
    return 0;
}

/* One value; method and status NULL where the session has no note. */
static int metric_buffer_add(metric_buffer *buffer, const char *name, int has_value, double value,
                             const char *method, const char *status, double bound)
{
    if (buffer->count == buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity * 2 : 16;
        if (grow((void **)&buffer->names, capacity, sizeof(char *)) != 0 ||
            grow((void **)&buffer->values, capacity, sizeof(double)) != 0 ||
            grow((void **)&buffer->has_value, capacity, sizeof(int)) != 0 ||
            grow((void **)&buffer->methods, capacity, sizeof(char *)) != 0 ||
            grow((void **)&buffer->statuses, capacity, sizeof(char *)) != 0 ||
            grow((void **)&buffer->bounds, capacity, sizeof(double)) != 0)
            return FLARE_ERR_NO_MEMORY;
        buffer->capacity = capacity;
    }
    char *copy = strdup(name != NULL ? name : "");
    char *method_copy = strdup(method != NULL ? method : "");
    char *status_copy = strdup(status != NULL ? status : "");
    if (copy == NULL || method_copy == NULL || status_copy == NULL) {
        free(copy);
        free(method_copy);
        free(status_copy);
        return FLARE_ERR_NO_MEMORY;
    }
    buffer->names[buffer->count] = copy;
    buffer->values[buffer->count] = has_value ? value : NAN;
    buffer->has_value[buffer->count] = has_value;
    buffer->methods[buffer->count] = method_copy;
    buffer->statuses[buffer->count] = status_copy;
    buffer->bounds[buffer->count] = bound;
    buffer->count++;
    return 0;
}

/* What metric_row fills. */
typedef struct metric_read {
    store *handle;
    metric_buffer *buffer;
} metric_read;

static int metric_row(sqlite3_stmt *statement, void *user)
{
    const metric_read *read = user;
    int has_value = sqlite3_column_type(statement, 1) != SQLITE_NULL;
    int noted = sqlite3_column_count(statement) >= 5;
    double bound = noted && sqlite3_column_type(statement, 4) != SQLITE_NULL
                       ? sqlite3_column_double(statement, 4)
                       : NAN;
    int status = metric_buffer_add(read->buffer, store_column_text(statement, 0), has_value,
                                   sqlite3_column_double(statement, 1),
                                   noted ? store_column_text(statement, 2) : NULL,
                                   noted ? store_column_text(statement, 3) : NULL, bound);
    if (status != 0)
        store_set_error(read->handle, "%s: out of memory reading replay metrics",
                        read->handle->path);
    return status;
}

/* One launch's metrics into buffer, through the caller's metric_select_sql
 * statement. */
static int read_metrics(store *handle, sqlite3_stmt *statement, int64_t pid, uint64_t launch_id,
                        metric_buffer *buffer)
{
    metric_buffer_clear(buffer);
    store_params params = {2, {pid, (int64_t)launch_id}};
    return store_statement_each(handle, statement, &params, metric_row,
                                &(metric_read){handle, buffer}, "cannot read the replay metrics");
}

static void attach_metrics(store_replay_launch_row *row, const metric_buffer *buffer)
{
    row->metric_count = buffer->count;
    row->metric_names = (const char *const *)buffer->names;
    row->metric_values = buffer->values;
    row->metric_has_value = buffer->has_value;
    row->metric_methods = (const char *const *)buffer->methods;
    row->metric_statuses = (const char *const *)buffer->statuses;
    row->metric_error_bounds = buffer->bounds;
}

/* What launch_row needs besides the row: the metrics statement and the
 * buffer its rows are copied into, and the reader's callback. */
typedef struct launch_read {
    store *handle;
    sqlite3_stmt *metrics;
    metric_buffer buffer;
    store_replay_launch_callback callback;
    void *user;
} launch_read;

static int launch_row(sqlite3_stmt *statement, void *user)
{
    launch_read *read = user;
    store_replay_launch_row row;
    fill_launch_row(statement, &row);
    /* The metrics statement runs while the launch row is current; the
     * launch's text columns stay valid because it is another statement. */
    int status = read_metrics(read->handle, read->metrics, row.pid, row.launch_id, &read->buffer);
    if (status != 0)
        return status;
    attach_metrics(&row, &read->buffer);
    return read->callback(&row, read->user) != 0;
}

int store_read_replay_launches(store *handle, store_replay_launch_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_flush(handle);
    if (status != 0)
        return status;
    sqlite3_stmt *launches = NULL;
    launch_read read = {.handle = handle, .callback = callback, .user = user};
    status = store_prepare(handle, launch_select_sql, &launches, "cannot read the replay launches");
    if (status == 0)
        status = prepare_metric_select(handle, &read.metrics);
    if (status == 0)
        status = store_statement_each(handle, launches, NULL, launch_row, &read,
                                      "cannot read the replay launches");
    metric_buffer_free(&read.buffer);
    sqlite3_finalize(launches);
    sqlite3_finalize(read.metrics);
    return status;
}

/* ---- spans ---- */

static const char span_select_sql[] =
    "SELECT s.pid, s.span_id, s.name, s.occurrence, s.device, s.kernels, s.copies, "
    "s.passes_planned, s.passes_run, s.declined, s.reason, s.begin_ns, s.end_ns, s.drain_ns, "
    "s.snapshot_bytes, s.shadow_on_device, s.snapshot_ns, s.restore_ns, s.bytes_restored, "
    "s.collector, "
    "(SELECT count(*) FROM replay_passes p WHERE p.pid = s.pid AND p.launch_id = s.span_id), "
    "(SELECT avg(p.end_ns - p.start_ns) FROM replay_passes p WHERE p.pid = s.pid AND "
    "p.launch_id = s.span_id AND p.end_ns >= p.start_ns) "
    "FROM replay_spans s ORDER BY s.begin_ns, s.pid, s.span_id";

/* One span kernel held for the span's callback: the row, with its text and
 * metrics copied out (the kernel statement moves on to the next row). */
typedef struct kernel_copy {
    store_replay_launch_row row;
    char *kernel;
    char *reason;
    char *collector;
    metric_buffer metrics;
} kernel_copy;

typedef struct span_kernels {
    kernel_copy *copies;
    store_replay_launch_row *rows; /* what the callback sees, pointing into copies */
    size_t count;
    size_t capacity;
} span_kernels;

static void span_kernels_clear(span_kernels *kernels)
{
    for (size_t index = 0; index < kernels->count; index++) {
        kernel_copy *copy = &kernels->copies[index];
        free(copy->kernel);
        free(copy->reason);
        free(copy->collector);
        metric_buffer_free(&copy->metrics);
    }
    kernels->count = 0;
}

static void span_kernels_free(span_kernels *kernels)
{
    span_kernels_clear(kernels);
    free(kernels->copies);
    free(kernels->rows);
    memset(kernels, 0, sizeof(*kernels));
}

/* Appends the kernel statement's current row and its metrics. */
static int span_kernels_add(store *handle, span_kernels *kernels, sqlite3_stmt *statement,
                            sqlite3_stmt *metrics)
{
    if (kernels->count == kernels->capacity) {
        size_t capacity = kernels->capacity ? kernels->capacity * 2 : 16;
        kernel_copy *copies = realloc(kernels->copies, capacity * sizeof(*copies));
        if (copies == NULL)
            goto out_of_memory;
        kernels->copies = copies;
        store_replay_launch_row *rows = realloc(kernels->rows, capacity * sizeof(*rows));
        if (rows == NULL)
            goto out_of_memory;
        kernels->rows = rows;
        kernels->capacity = capacity;
    }
    kernel_copy *copy = &kernels->copies[kernels->count];
    memset(copy, 0, sizeof(*copy));
    kernels->count++; /* counted now, so a failure below frees what was taken */
    fill_launch_row(statement, &copy->row);
    copy->kernel = strdup(copy->row.kernel != NULL ? copy->row.kernel : "");
    copy->reason = strdup(copy->row.reason != NULL ? copy->row.reason : "");
    copy->collector = strdup(copy->row.collector != NULL ? copy->row.collector : "");
    if (copy->kernel == NULL || copy->reason == NULL || copy->collector == NULL)
        goto out_of_memory;
    copy->row.kernel = copy->kernel;
    copy->row.reason = copy->reason;
    copy->row.collector = copy->collector;
    int status = read_metrics(handle, metrics, copy->row.pid, copy->row.launch_id, &copy->metrics);
    if (status != 0)
        return status;
    attach_metrics(&copy->row, &copy->metrics);
    return 0;
out_of_memory:
    store_set_error(handle, "%s: out of memory reading replay spans", handle->path);
    return FLARE_ERR_NO_MEMORY;
}

/* What span_row and span_kernel_row need besides the row. */
typedef struct span_read {
    store *handle;
    sqlite3_stmt *kernel_rows;
    sqlite3_stmt *metrics;
    span_kernels kernels;
    store_replay_span_callback callback;
    void *user;
} span_read;

static int span_kernel_row(sqlite3_stmt *statement, void *user)
{
    span_read *read = user;
    return span_kernels_add(read->handle, &read->kernels, statement, read->metrics);
}

static int read_span_kernels(span_read *read, int64_t pid, uint64_t span_id)
{
    span_kernels *kernels = &read->kernels;
    span_kernels_clear(kernels);
    store_params params = {2, {pid, (int64_t)span_id}};
    int status = store_statement_each(read->handle, read->kernel_rows, &params, span_kernel_row,
                                      read, "cannot read the kernels of a replay span");
    /* The rows array is filled only now: copies may have moved while it grew. */
    for (size_t index = 0; status == 0 && index < kernels->count; index++)
        kernels->rows[index] = kernels->copies[index].row;
    return status;
}

static int span_row(sqlite3_stmt *spans, void *user)
{
    span_read *read = user;
    store_replay_span_row row;
    memset(&row, 0, sizeof(row));
    row.pid = sqlite3_column_int64(spans, 0);
    row.span_id = (uint64_t)sqlite3_column_int64(spans, 1);
    row.name = store_column_text_or_empty(spans, 2);
    row.occurrence = (uint64_t)sqlite3_column_int64(spans, 3);
    row.device = sqlite3_column_int(spans, 4);
    row.kernels = (uint32_t)sqlite3_column_int64(spans, 5);
    row.copies = (uint32_t)sqlite3_column_int64(spans, 6);
    READ_RUN_COLUMNS(spans, 7, &row);
    row.passes_kept = (uint32_t)sqlite3_column_int64(spans, 20);
    row.pass_mean_ns = store_column_u64_rounded(spans, 21);
    /* The span's text stays valid: the kernel and metric reads run on
     * other statements. */
    int status = read_span_kernels(read, row.pid, row.span_id);
    if (status != 0)
        return status;
    row.kernel_count = read->kernels.count;
    row.kernel_rows = read->kernels.rows;
    return read->callback(&row, read->user) != 0;
}

int store_read_replay_spans(store *handle, store_replay_span_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_flush(handle);
    if (status != 0)
        return status;
    sqlite3_stmt *spans = NULL;
    span_read read = {.handle = handle, .callback = callback, .user = user};
    status = store_prepare(handle, span_select_sql, &spans, "cannot read the replay spans");
    if (status == 0)
        status = store_prepare(handle, span_kernel_select_sql, &read.kernel_rows,
                               "cannot read the kernels of a replay span");
    if (status == 0)
        status = prepare_metric_select(handle, &read.metrics);
    if (status == 0)
        status = store_statement_each(handle, spans, NULL, span_row, &read,
                                      "cannot read the replay spans");
    span_kernels_free(&read.kernels);
    sqlite3_finalize(spans);
    sqlite3_finalize(read.kernel_rows);
    sqlite3_finalize(read.metrics);
    return status;
}

static const char pass_select_sql[] = "SELECT pass, start_ns, end_ns FROM replay_passes WHERE pid "
                                      "= ?1 AND launch_id = ?2 ORDER BY pass";

static int pass_row(sqlite3_stmt *statement, void *user)
{
    store_replay_pass_row row = {
        .pass = (uint32_t)sqlite3_column_int64(statement, 0),
        .start_ns = (uint64_t)sqlite3_column_int64(statement, 1),
        .end_ns = (uint64_t)sqlite3_column_int64(statement, 2),
    };
    return STORE_READER_CALL(store_replay_pass_callback, &row, user);
}

int store_read_replay_passes(store *handle, int64_t pid, uint64_t launch_id,
                             store_replay_pass_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    store_params params = {2, {pid, (int64_t)launch_id}};
    return store_query_each(handle, pass_select_sql, &params, pass_row,
                            &(store_reader_call){&callback, user}, "cannot read the replay passes");
}

/* The launches replayed on their own (OWN_LAUNCH). */
static const char launch_summary_sql[] =
    "SELECT count(*), coalesce(sum(declined = 0), 0), coalesce(sum(declined != 0), 0), "
    "count(DISTINCT kernel), "
    "coalesce(sum(CASE WHEN declined = 0 THEN passes_run ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN declined = 0 THEN snapshot_bytes ELSE 0 END), 0), "
    "coalesce(sum(bytes_restored), 0), "
    "coalesce(sum(CASE WHEN end_ns > begin_ns THEN end_ns - begin_ns ELSE 0 END), 0), "
    "(SELECT count(*) FROM replay_metrics m JOIN replay_launches l USING (pid, launch_id) "
    "WHERE m.value IS NOT NULL AND " OWN_LAUNCH "), "
    "(SELECT reason FROM replay_launches l WHERE declined != 0 AND " OWN_LAUNCH
    " ORDER BY begin_ns, pid, launch_id LIMIT 1) "
    "FROM replay_launches l WHERE " OWN_LAUNCH;

/* The spans, and their kernels (NOT OWN_LAUNCH). */
static const char span_summary_sql[] =
    "SELECT count(*), coalesce(sum(declined = 0), 0), coalesce(sum(declined != 0), 0), "
    "(SELECT count(*) FROM replay_launches l WHERE NOT " OWN_LAUNCH "), "
    "coalesce(sum(CASE WHEN declined = 0 THEN passes_run ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN declined = 0 THEN snapshot_bytes ELSE 0 END), 0), "
    "coalesce(sum(bytes_restored), 0), "
    "coalesce(sum(CASE WHEN end_ns > begin_ns THEN end_ns - begin_ns ELSE 0 END), 0), "
    "(SELECT count(*) FROM replay_metrics m JOIN replay_launches l USING (pid, launch_id) "
    "WHERE m.value IS NOT NULL AND NOT " OWN_LAUNCH "), "
    "(SELECT reason FROM replay_spans WHERE declined != 0 ORDER BY begin_ns, pid, span_id "
    "LIMIT 1) "
    "FROM replay_spans";

/* The ten columns both summary statements share, in order. */
typedef struct summary_part {
    int64_t *count, *replayed, *declined, *kernels;
    uint64_t *passes, *snapshot_bytes, *bytes_restored, *collection_ns;
    int64_t *metric_values;
    char *first_decline;
    size_t first_decline_size;
} summary_part;

static int read_summary_part(store *handle, const char *sql, const summary_part *part)
{
    sqlite3_stmt *statement = NULL;
    int status = store_prepare(handle, sql, &statement, "cannot read the replay summary");
    if (status != 0)
        return status;
    if (sqlite3_step(statement) == SQLITE_ROW) {
        *part->count = sqlite3_column_int64(statement, 0);
        *part->replayed = sqlite3_column_int64(statement, 1);
        *part->declined = sqlite3_column_int64(statement, 2);
        *part->kernels = sqlite3_column_int64(statement, 3);
        *part->passes = (uint64_t)sqlite3_column_int64(statement, 4);
        *part->snapshot_bytes = (uint64_t)sqlite3_column_int64(statement, 5);
        *part->bytes_restored = (uint64_t)sqlite3_column_int64(statement, 6);
        *part->collection_ns = (uint64_t)sqlite3_column_int64(statement, 7);
        *part->metric_values = sqlite3_column_int64(statement, 8);
        const char *reason = store_column_text(statement, 9);
        snprintf(part->first_decline, part->first_decline_size, "%s", reason != NULL ? reason : "");
    } else {
        status = store_set_sqlite_error(handle, "cannot read the replay summary");
    }
    sqlite3_finalize(statement);
    return status;
}

int store_read_replay_summary(store *handle, store_replay_summary *out)
{
    if (handle == NULL || out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof(*out));
    int status = store_flush(handle);
    if (status != 0)
        return status;
    summary_part launches = {&out->launches,
                             &out->replayed,
                             &out->declined,
                             &out->kernels,
                             &out->passes,
                             &out->snapshot_bytes,
                             &out->bytes_restored,
                             &out->collection_ns,
                             &out->metric_values,
                             out->first_decline,
                             sizeof(out->first_decline)};
    summary_part spans = {&out->spans,
                          &out->spans_replayed,
                          &out->spans_declined,
                          &out->span_kernels,
                          &out->span_passes,
                          &out->span_snapshot_bytes,
                          &out->span_bytes_restored,
                          &out->span_collection_ns,
                          &out->span_metric_values,
                          out->first_span_decline,
                          sizeof(out->first_span_decline)};
    status = read_summary_part(handle, launch_summary_sql, &launches);
    if (status == 0)
        status = read_summary_part(handle, span_summary_sql, &spans);
    if (status != 0) {
        /* Half a summary would read as fewer replays than there were. */
        memset(out, 0, sizeof(*out));
    }
    return status;
}
