/*
 * test_store_replay.c: kernel-replay and range-replay results in the
 * session database (store_replay.h): store_replay_record rows written as
 * the collector's batch writes them and read back as `flare report` and
 * `flare replay` read them; spans apart from launches replayed on their
 * own. (Turning the engine's replay_records into these rows is the replay
 * feature's, tested in tests/replay.)
 *
 * Each test works in its own mkdtemp directory under /tmp and removes it.
 * Where the API cannot show a property (how many pass rows exist, that a
 * value is SQL NULL), the test asks the file directly with SQLite.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store.h"
#include "store/store_replay.h"
#include "test_util.h"

#define TEST_PID 4321
/* Pass times a test record keeps (the engine keeps 64), and the longest
 * metric name the captures hold. */
#define TEST_PASS_MAX        64
#define TEST_METRIC_MAX      4
#define TEST_METRIC_NAME_MAX 128

/* ---- helpers ---- */

static store *open_store(const char *dir, store_open_mode mode)
{
    store *handle = NULL;
    char error[1024];
    int status = store_open(dir, mode, &handle, error, sizeof error);
    if (status != 0)
        print_error("store_open: %s\n", error);
    assert_int_equal(status, 0);
    return handle;
}

/* The first column of the first row of sql, on session.db directly. */
static int64_t sql_int(const char *dir, const char *sql)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, STORE_DATABASE_NAME);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &statement, NULL);
    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, sqlite3_errmsg(db));
    assert_int_equal(rc, SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int64_t value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

static void sql_exec(const char *dir, const char *sql)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, STORE_DATABASE_NAME);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *message = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &message);
    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, message);
    sqlite3_free(message);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
}

/* A record to write: the store's row and the arrays it points into. */
typedef struct test_record {
    store_replay_record row;
    uint64_t pass_start_ns[TEST_PASS_MAX];
    uint64_t pass_end_ns[TEST_PASS_MAX];
    const char *metric_names[TEST_METRIC_MAX];
    double metric_values[TEST_METRIC_MAX];
} test_record;

/* Writes the records' rows in one call (a NULL record stays NULL). */
static int write_records(store *writer, test_record *const *records, size_t count)
{
    const store_replay_record *rows[8] = {0};
    assert_true(count <= 8);
    for (size_t index = 0; index < count; index++)
        rows[index] = records[index] != NULL ? &records[index]->row : NULL;
    return store_write_replay_records(writer, TEST_PID, rows, count);
}

static test_record *make_record(void)
{
    test_record *record = calloc(1, sizeof(*record));
    assert_non_null(record);
    record->row.pass_start_ns = record->pass_start_ns;
    record->row.pass_end_ns = record->pass_end_ns;
    record->row.metric_names = record->metric_names;
    record->row.metric_values = record->metric_values;
    return record;
}

/* A replayed launch with passes p of [1000 * (p + 1), + 100 + p) and the
 * given metrics (names must outlive the record). */
static test_record *make_replayed(uint64_t launch_id, const char *kernel, uint64_t index,
                                  uint32_t passes, size_t metric_count, const char *const *names,
                                  const double *values)
{
    test_record *record = make_record();
    store_replay_record *row = &record->row;
    row->launch_id = launch_id;
    row->device = 1;
    row->stream_id = 77;
    row->name = kernel;
    row->launch_index = index;
    row->passes_planned = passes;
    row->passes_run = passes;
    row->begin_ns = 500;
    row->end_ns = 500 + 1000ull * (passes + 2);
    row->drain_ns = 40;
    row->snapshot_bytes = 1 << 20;
    row->shadow_on_device = 1;
    row->snapshot_ns = 30;
    row->restore_ns = 60;
    row->bytes_restored = (uint64_t)(passes - 1) << 20;
    row->pass_count = passes < TEST_PASS_MAX ? passes : TEST_PASS_MAX;
    for (uint32_t pass = 0; pass < row->pass_count; pass++) {
        record->pass_start_ns[pass] = 1000ull * (pass + 1);
        record->pass_end_ns[pass] = 1000ull * (pass + 1) + 100 + pass;
    }
    assert_true(metric_count <= TEST_METRIC_MAX);
    row->metric_count = (uint32_t)metric_count;
    for (size_t metric = 0; metric < metric_count; metric++) {
        record->metric_names[metric] = names[metric];
        record->metric_values[metric] = values[metric];
    }
    row->collector = "sim-metrics";
    return record;
}

/* Reason and collector left NULL: they are written as "". */
static test_record *make_declined(uint64_t launch_id, const char *kernel, uint64_t index,
                                  const char *reason)
{
    test_record *record = make_record();
    store_replay_record *row = &record->row;
    row->launch_id = launch_id;
    row->name = kernel;
    row->launch_index = index;
    row->passes_planned = 4;
    row->passes_run = 1;
    row->declined = 1;
    row->reason = reason;
    row->begin_ns = 10;
    row->end_ns = 25;
    return record;
}

/* What the launch reader returned, copied out of the callback. */
typedef struct captured_launch {
    store_replay_launch_row row;
    char kernel[256];
    char reason[256];
    char collector[32];
    size_t metric_count;
    char metric_names[8][TEST_METRIC_NAME_MAX];
    double metric_values[8];
    int metric_has_value[8];
} captured_launch;

typedef struct capture {
    size_t count;
    size_t stop_after; /* 0: never stop */
    captured_launch launches[8];
} capture;

static int capture_launch(const store_replay_launch_row *row, void *user)
{
    capture *into = user;
    assert_true(into->count < 8);
    captured_launch *copy = &into->launches[into->count++];
    copy->row = *row;
    snprintf(copy->kernel, sizeof copy->kernel, "%s", row->kernel);
    snprintf(copy->reason, sizeof copy->reason, "%s", row->reason);
    snprintf(copy->collector, sizeof copy->collector, "%s", row->collector);
    copy->metric_count = row->metric_count;
    for (size_t index = 0; index < row->metric_count && index < 8; index++) {
        snprintf(copy->metric_names[index], TEST_METRIC_NAME_MAX, "%s", row->metric_names[index]);
        copy->metric_values[index] = row->metric_values[index];
        copy->metric_has_value[index] = row->metric_has_value[index];
    }
    return into->stop_after != 0 && into->count >= into->stop_after;
}

/* ---- tests ---- */

/* Replayed and declined launches of two kernels come back whole, grouped by
 * kernel, metrics in the order written, NaN as "no value". */
static void test_round_trip(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    const char *names[] = {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
                           "dram__bytes_read.sum", "gpu__time_duration.sum"};
    const double values[] = {87.5, NAN, 12345.0};
    test_record *records[4] = {
        make_replayed(900, "stencil", 1, 5, 3, names, values),
        make_declined(901, "reduce", 0, "footprint budget: 3.0 GiB needed, 1.0 GiB allowed"),
        NULL, /* skipped, not a crash */
        make_replayed(902, "stencil", 3, 2, 1, names + 2, values + 2),
    };

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(store_begin(writer), 0);
    assert_int_equal(write_records(writer, records, 4), 0);
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);

    store *reader = open_store(dir, STORE_OPEN_READ);
    capture got = {0};
    assert_int_equal(store_read_replay_launches(reader, capture_launch, &got), 0);
    assert_int_equal(got.count, 3);
    /* By kernel name: reduce first, then stencil by launch index. */
    assert_string_equal(got.launches[0].kernel, "reduce");
    assert_true(got.launches[0].row.declined);
    assert_string_equal(got.launches[0].reason,
                        "footprint budget: 3.0 GiB needed, 1.0 GiB allowed");
    assert_int_equal(got.launches[0].row.passes_run, 1);
    assert_int_equal(got.launches[0].row.passes_kept, 0);
    assert_int_equal(got.launches[0].metric_count, 0);
    assert_string_equal(got.launches[0].collector, "");

    const captured_launch *first = &got.launches[1];
    assert_string_equal(first->kernel, "stencil");
    assert_int_equal(first->row.pid, TEST_PID);
    assert_int_equal(first->row.launch_id, 900);
    assert_int_equal(first->row.device, 1);
    assert_int_equal(first->row.stream_id, 77);
    assert_int_equal(first->row.launch_index, 1);
    assert_int_equal(first->row.passes_planned, 5);
    assert_int_equal(first->row.passes_run, 5);
    assert_false(first->row.declined);
    assert_string_equal(first->reason, "");
    assert_int_equal(first->row.begin_ns, 500);
    assert_int_equal(first->row.end_ns, 7500);
    assert_int_equal(first->row.drain_ns, 40);
    assert_int_equal(first->row.snapshot_bytes, 1 << 20);
    assert_true(first->row.shadow_on_device);
    assert_int_equal(first->row.snapshot_ns, 30);
    assert_int_equal(first->row.restore_ns, 60);
    assert_int_equal(first->row.bytes_restored, 4 << 20);
    assert_string_equal(first->collector, "sim-metrics");
    assert_int_equal(first->row.passes_kept, 5);
    assert_int_equal(first->row.pass_mean_ns, 102); /* 100..104 */
    assert_int_equal(first->metric_count, 3);
    assert_string_equal(first->metric_names[0], names[0]);
    assert_string_equal(first->metric_names[1], names[1]);
    assert_string_equal(first->metric_names[2], names[2]);
    assert_true(first->metric_has_value[0]);
    assert_true(first->metric_values[0] == 87.5);
    assert_false(first->metric_has_value[1]);
    assert_true(isnan(first->metric_values[1]));
    assert_true(first->metric_has_value[2]);
    assert_true(first->metric_values[2] == 12345.0);

    assert_int_equal(got.launches[2].row.launch_id, 902);
    assert_int_equal(got.launches[2].metric_count, 1);
    assert_string_equal(got.launches[2].metric_names[0], "gpu__time_duration.sum");

    store_replay_summary summary;
    assert_int_equal(store_read_replay_summary(reader, &summary), 0);
    assert_int_equal(summary.launches, 3);
    assert_int_equal(summary.replayed, 2);
    assert_int_equal(summary.declined, 1);
    assert_int_equal(summary.kernels, 2);
    assert_int_equal(summary.passes, 7);
    assert_int_equal(summary.snapshot_bytes, 2 << 20);
    assert_int_equal(summary.bytes_restored, 5 << 20);
    assert_int_equal(summary.collection_ns, 7000 + 4000 + 15);
    assert_int_equal(summary.metric_values, 3); /* the NaN is not a value */
    assert_string_equal(summary.first_decline, "footprint budget: 3.0 GiB needed, 1.0 GiB allowed");
    store_close(reader);

    /* In the file: NaN is SQL NULL, not a number. */
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics WHERE value IS NULL AND "
                                  "metric = 'dram__bytes_read.sum'"),
                     1);
    for (int index = 0; index < 4; index++)
        free(records[index]);
    test_remove_dir(dir);
}

typedef struct pass_capture {
    uint32_t count;
    uint32_t next_expected;
    int in_order;
    uint64_t last_start_ns;
} pass_capture;

static int capture_pass(const store_replay_pass_row *row, void *user)
{
    pass_capture *into = user;
    if (row->pass != into->next_expected || row->end_ns < row->start_ns)
        into->in_order = 0;
    into->next_expected++;
    into->count++;
    into->last_start_ns = row->start_ns;
    return 0;
}

/* A launch of 70 passes whose first 64 passes' times were kept has 64 pass
 * rows and still says 70 ran. (Clamping a record's count of kept passes to
 * its arrays is the replay feature's: tests/replay.) */
static void test_passes_beyond_the_kept_limit(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    test_record *many = make_replayed(1, "k", 0, 70, 0, NULL, NULL);
    assert_int_equal(many->row.pass_count, TEST_PASS_MAX);
    test_record *more = make_replayed(2, "k", 1, 66, 0, NULL, NULL);
    test_record *records[] = {many, more};

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(write_records(writer, records, 2), 0);
    store_close(writer);

    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes WHERE launch_id = 1"),
                     TEST_PASS_MAX);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes WHERE launch_id = 2"),
                     TEST_PASS_MAX);
    assert_int_equal(sql_int(dir, "SELECT max(pass) FROM replay_passes"), TEST_PASS_MAX - 1);

    store *reader = open_store(dir, STORE_OPEN_READ);
    capture got = {0};
    assert_int_equal(store_read_replay_launches(reader, capture_launch, &got), 0);
    assert_int_equal(got.count, 2);
    assert_int_equal(got.launches[0].row.passes_run, 70);
    assert_int_equal(got.launches[0].row.passes_kept, TEST_PASS_MAX);
    assert_int_equal(got.launches[1].row.passes_run, 66);

    pass_capture passes = {.in_order = 1};
    assert_int_equal(store_read_replay_passes(reader, TEST_PID, 1, capture_pass, &passes), 0);
    assert_int_equal(passes.count, TEST_PASS_MAX);
    assert_true(passes.in_order);
    assert_int_equal(passes.last_start_ns, 1000ull * TEST_PASS_MAX);
    store_close(reader);
    free(many);
    free(more);
    test_remove_dir(dir);
}

/* A replay write that fails leaves none of its rows and none of its
 * records, but the batch's other rows still commit. */
static void test_failure_keeps_the_batch(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    store_close(open_store(dir, STORE_OPEN_WRITE));
    sql_exec(dir, "CREATE TRIGGER abort_metric BEFORE INSERT ON replay_metrics"
                  " WHEN NEW.metric = 'poison' BEGIN SELECT RAISE(ABORT, 'injected'); END");
    const char *good[] = {"fine"};
    const char *bad[] = {"poison"};
    const double value[] = {1.0};
    test_record *records[] = {make_replayed(1, "k", 0, 2, 1, good, value),
                              make_replayed(2, "k", 1, 2, 1, bad, value)};

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(store_begin(writer), 0);
    store_kernel_row kernel = {.pid = TEST_PID, .name = "k", .start_ns = 1, .end_ns = 2};
    assert_int_equal(store_put_kernel(writer, &kernel), 0);
    assert_int_equal(write_records(writer, records, 2), FLARE_ERR_STORE);
    assert_non_null(strstr(store_last_error(writer), "cannot write a replay metric"));
    assert_non_null(strstr(store_last_error(writer), "injected"));
    assert_non_null(strstr(store_last_error(writer), dir));
    /* The batch goes on: its own rows and a later, good replay write. */
    assert_int_equal(write_records(writer, records, 1), 0);
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);

    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches"), 1);
    assert_int_equal(sql_int(dir, "SELECT launch_id FROM replay_launches"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes"), 2);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics"), 1);
    free(records[0]);
    free(records[1]);
    test_remove_dir(dir);
}

/* Writing a record twice (a retry) gives the same rows, and a metric named
 * twice in one record keeps one row. */
static void test_rewrite_replaces(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    const char *names[] = {"a", "b", "a"};
    const double values[] = {1.0, 2.0, 3.0};
    test_record *record = make_replayed(5, "k", 0, 3, 3, names, values);
    test_record *records[] = {record, record};
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(write_records(writer, records, 2), 0);
    assert_int_equal(write_records(writer, records, 1), 0);
    store_close(writer);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes"), 3);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics"), 2);
    assert_int_equal(sql_int(dir, "SELECT value FROM replay_metrics WHERE metric = 'a'"), 3);
    free(record);
    test_remove_dir(dir);
}

/* No replay rows: the readers call nothing and the summary is all zero;
 * a callback that asks to stop stops the walk. */
static void test_empty_and_early_stop(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    capture got = {0};
    assert_int_equal(store_read_replay_launches(writer, capture_launch, &got), 0);
    assert_int_equal(got.count, 0);
    store_replay_summary summary;
    memset(&summary, 0xff, sizeof summary);
    assert_int_equal(store_read_replay_summary(writer, &summary), 0);
    assert_int_equal(summary.launches, 0);
    assert_int_equal(summary.passes, 0);
    assert_string_equal(summary.first_decline, "");

    test_record *records[3];
    for (int index = 0; index < 3; index++)
        records[index] = make_declined((uint64_t)index + 1, "k", (uint64_t)index, "graph");
    /* Inside a batch, the writer's own readers see the batch. */
    assert_int_equal(store_begin(writer), 0);
    assert_int_equal(write_records(writer, records, 3), 0);
    got.stop_after = 2;
    assert_int_equal(store_read_replay_launches(writer, capture_launch, &got), 0);
    assert_int_equal(got.count, 2);
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);
    for (int index = 0; index < 3; index++)
        free(records[index]);
    test_remove_dir(dir);
}

/* ---- range replay (spans) ---- */

/* A span's own record as the engine queues it: name, occurrence, what it
 * recorded, its passes; a metric of the set, which is not stored. */
static test_record *make_span(uint64_t span_id, const char *name, uint64_t occurrence,
                              uint32_t passes, uint32_t kernels, uint32_t copies)
{
    static const char *const names[] = {"gpu__time_duration.sum"};
    static const double values[] = {1.0};
    test_record *record = make_replayed(span_id, name, occurrence, passes, 1, names, values);
    store_replay_record *row = &record->row;
    row->is_span = 1;
    row->span_id = span_id;
    row->device = 0;
    row->stream_id = 0;
    row->span_kernels = kernels;
    row->span_copies = copies;
    row->snapshot_bytes = 3 << 20;
    row->bytes_restored = (uint64_t)(passes - 1) * (3 << 20);
    row->restore_ns = 900;
    /* The engine lists the set's names on the span but stores values only
     * per kernel: none of these may reach replay_metrics. */
    return record;
}

static test_record *make_span_kernel(uint64_t launch_id, uint64_t span_id, const char *kernel,
                                     uint64_t index, const double *values)
{
    const char *names[] = {"launch__grid_size", "gpu__time_duration.sum"};
    test_record *record = make_replayed(launch_id, kernel, index, 2, 2, names, values);
    record->row.span_id = span_id;
    return record;
}

typedef struct captured_span {
    store_replay_span_row row;
    char name[256];
    char reason[256];
    char collector[32];
    size_t kernel_count;
    uint64_t kernel_ids[8];
    uint64_t kernel_span_ids[8];
    char kernels[8][64];
    size_t metric_counts[8];
    char metric_names[8][2][TEST_METRIC_NAME_MAX];
    double metric_values[8][2];
    int metric_has_value[8][2];
} captured_span;

typedef struct span_capture {
    size_t count;
    captured_span spans[4];
} span_capture;

static int capture_span(const store_replay_span_row *row, void *user)
{
    span_capture *into = user;
    assert_true(into->count < 4);
    captured_span *copy = &into->spans[into->count++];
    copy->row = *row;
    snprintf(copy->name, sizeof copy->name, "%s", row->name);
    snprintf(copy->reason, sizeof copy->reason, "%s", row->reason);
    snprintf(copy->collector, sizeof copy->collector, "%s", row->collector);
    copy->kernel_count = row->kernel_count;
    assert_true(row->kernel_count <= 8);
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        copy->kernel_ids[kernel] = launch->launch_id;
        copy->kernel_span_ids[kernel] = launch->span_id;
        snprintf(copy->kernels[kernel], sizeof copy->kernels[kernel], "%s", launch->kernel);
        copy->metric_counts[kernel] = launch->metric_count;
        for (size_t metric = 0; metric < launch->metric_count && metric < 2; metric++) {
            snprintf(copy->metric_names[kernel][metric], TEST_METRIC_NAME_MAX, "%s",
                     launch->metric_names[metric]);
            copy->metric_values[kernel][metric] = launch->metric_values[metric];
            copy->metric_has_value[kernel][metric] = launch->metric_has_value[metric];
        }
    }
    return 0;
}

/* A replayed span with three kernels (queued out of launch order, as two
 * collector takes could deliver them), beside a launch replayed on its own:
 * the span comes back from the span reader with its kernels in launch order
 * and their metrics, never from the launch reader, and the summary counts
 * the two apart. */
static void test_span_round_trip(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    const double first[] = {8.0, 1500.0};
    const double second[] = {1.0, NAN};
    const double third[] = {16.0, 700.0};
    const char *alone_names[] = {"gpu__time_duration.sum"};
    const double alone_value[] = {42.0};
    test_record *records[] = {
        make_span_kernel(12, 10, "increment", 1, second),
        make_span_kernel(11, 10, "rmw", 0, first),
        make_replayed(20, "solo", 0, 2, 1, alone_names, alone_value),
        make_span_kernel(13, 10, "rmw", 1, third),
        make_span(10, "step", 2, 2, 3, 2),
    };
    size_t count = sizeof records / sizeof records[0];

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(store_begin(writer), 0);
    assert_int_equal(write_records(writer, records, count), 0);
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);

    /* In the file: the span is no launch, its passes sit under its id, it
     * has no metric rows of its own, and its kernels carry its id. */
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches"), 4);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches WHERE launch_id = 10"), 0);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches WHERE span_id = 10"), 3);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches WHERE span_id IS NULL"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_spans"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes WHERE launch_id = 10"), 2);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics WHERE launch_id = 10"), 0);

    store *reader = open_store(dir, STORE_OPEN_READ);
    span_capture spans = {0};
    assert_int_equal(store_read_replay_spans(reader, capture_span, &spans), 0);
    assert_int_equal(spans.count, 1);
    const captured_span *span = &spans.spans[0];
    assert_int_equal(span->row.pid, TEST_PID);
    assert_int_equal(span->row.span_id, 10);
    assert_string_equal(span->name, "step");
    assert_int_equal(span->row.occurrence, 2);
    assert_int_equal(span->row.device, 0);
    assert_int_equal(span->row.kernels, 3);
    assert_int_equal(span->row.copies, 2);
    assert_int_equal(span->row.passes_planned, 2);
    assert_int_equal(span->row.passes_run, 2);
    assert_false(span->row.declined);
    assert_string_equal(span->reason, "");
    assert_int_equal(span->row.begin_ns, 500);
    assert_int_equal(span->row.end_ns, 4500);
    assert_int_equal(span->row.drain_ns, 40);
    assert_int_equal(span->row.snapshot_bytes, 3 << 20);
    assert_true(span->row.shadow_on_device);
    assert_int_equal(span->row.snapshot_ns, 30);
    assert_int_equal(span->row.restore_ns, 900);
    assert_int_equal(span->row.bytes_restored, 3 << 20);
    assert_string_equal(span->collector, "sim-metrics");
    assert_int_equal(span->row.passes_kept, 2);
    assert_int_equal(span->row.pass_mean_ns, 101); /* 100 and 101, rounded */
    /* Kernels in launch order, each with its own values. */
    assert_int_equal(span->kernel_count, 3);
    assert_int_equal(span->kernel_ids[0], 11);
    assert_int_equal(span->kernel_ids[1], 12);
    assert_int_equal(span->kernel_ids[2], 13);
    assert_string_equal(span->kernels[0], "rmw");
    assert_string_equal(span->kernels[1], "increment");
    assert_string_equal(span->kernels[2], "rmw");
    assert_int_equal(span->kernel_span_ids[1], 10);
    assert_int_equal(span->metric_counts[0], 2);
    assert_string_equal(span->metric_names[0][0], "launch__grid_size");
    assert_string_equal(span->metric_names[0][1], "gpu__time_duration.sum");
    assert_true(span->metric_values[0][0] == 8.0);
    assert_true(span->metric_values[0][1] == 1500.0);
    assert_true(span->metric_values[1][0] == 1.0);
    assert_false(span->metric_has_value[1][1]);
    assert_true(isnan(span->metric_values[1][1]));
    assert_true(span->metric_values[2][0] == 16.0);

    /* The launch reader holds only the launch replayed on its own. */
    capture got = {0};
    assert_int_equal(store_read_replay_launches(reader, capture_launch, &got), 0);
    assert_int_equal(got.count, 1);
    assert_string_equal(got.launches[0].kernel, "solo");
    assert_int_equal(got.launches[0].row.span_id, 0);

    store_replay_summary summary;
    assert_int_equal(store_read_replay_summary(reader, &summary), 0);
    assert_int_equal(summary.launches, 1);
    assert_int_equal(summary.replayed, 1);
    assert_int_equal(summary.kernels, 1);
    assert_int_equal(summary.passes, 2);
    assert_int_equal(summary.metric_values, 1);
    assert_int_equal(summary.spans, 1);
    assert_int_equal(summary.spans_replayed, 1);
    assert_int_equal(summary.spans_declined, 0);
    assert_int_equal(summary.span_kernels, 3);
    assert_int_equal(summary.span_passes, 2);
    assert_int_equal(summary.span_snapshot_bytes, 3 << 20);
    assert_int_equal(summary.span_bytes_restored, 3 << 20);
    assert_int_equal(summary.span_collection_ns, 4000);
    assert_int_equal(summary.span_metric_values, 5); /* six values, one NaN */
    assert_string_equal(summary.first_span_decline, "");

    /* The span's passes through the pass reader, under its id. */
    pass_capture passes = {.in_order = 1};
    assert_int_equal(store_read_replay_passes(reader, TEST_PID, 10, capture_pass, &passes), 0);
    assert_int_equal(passes.count, 2);
    assert_true(passes.in_order);
    store_close(reader);
    for (size_t index = 0; index < count; index++)
        free(records[index]);
    test_remove_dir(dir);
}

/* A declined span keeps its reason and ran once; the kernels it recorded
 * before the decline come with it, without values. A span kernel whose
 * span record never arrived is listed with the launches rather than lost. */
static void test_declined_span(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    test_record *span = make_span(30, "step", 0, 1, 1, 1);
    span->row.declined = 1;
    span->row.passes_run = 1;
    span->row.passes_planned = 2;
    span->row.snapshot_bytes = 0;
    span->row.bytes_restored = 0;
    span->row.pass_count = 0;
    span->row.reason = "memory allocated inside the span";
    test_record *kernel = make_declined(31, "rmw", 4, "memory allocated inside the span");
    kernel->row.span_id = 30;
    test_record *orphan = make_declined(41, "lost", 0, "device-to-host copy inside the span");
    orphan->row.span_id = 40; /* its span's record was never written */
    test_record *records[] = {kernel, span, orphan};

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(write_records(writer, records, 3), 0);
    store_close(writer);

    store *reader = open_store(dir, STORE_OPEN_READ);
    span_capture spans = {0};
    assert_int_equal(store_read_replay_spans(reader, capture_span, &spans), 0);
    assert_int_equal(spans.count, 1);
    assert_true(spans.spans[0].row.declined);
    assert_string_equal(spans.spans[0].reason, "memory allocated inside the span");
    assert_int_equal(spans.spans[0].row.occurrence, 0); /* an explicit span */
    assert_int_equal(spans.spans[0].row.passes_run, 1);
    assert_int_equal(spans.spans[0].row.passes_kept, 0);
    assert_int_equal(spans.spans[0].kernel_count, 1);
    assert_string_equal(spans.spans[0].kernels[0], "rmw");
    assert_int_equal(spans.spans[0].metric_counts[0], 0);

    capture got = {0};
    assert_int_equal(store_read_replay_launches(reader, capture_launch, &got), 0);
    assert_int_equal(got.count, 1);
    assert_string_equal(got.launches[0].kernel, "lost");
    assert_int_equal(got.launches[0].row.span_id, 40);

    store_replay_summary summary;
    assert_int_equal(store_read_replay_summary(reader, &summary), 0);
    assert_int_equal(summary.spans, 1);
    assert_int_equal(summary.spans_replayed, 0);
    assert_int_equal(summary.spans_declined, 1);
    assert_int_equal(summary.span_kernels, 1);
    assert_int_equal(summary.span_passes, 0);
    assert_string_equal(summary.first_span_decline, "memory allocated inside the span");
    assert_int_equal(summary.launches, 1); /* the orphan */
    assert_int_equal(summary.declined, 1);
    assert_string_equal(summary.first_decline, "device-to-host copy inside the span");
    store_close(reader);
    for (size_t index = 0; index < 3; index++)
        free(records[index]);
    test_remove_dir(dir);
}

/* A span write that fails takes its kernels with it (one call, one
 * savepoint), and the batch's other rows still commit. */
static void test_span_failure_is_all_or_nothing(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    store_close(open_store(dir, STORE_OPEN_WRITE));
    sql_exec(dir, "CREATE TRIGGER abort_span BEFORE INSERT ON replay_spans"
                  " WHEN NEW.name = 'poison' BEGIN SELECT RAISE(ABORT, 'injected'); END");
    const double values[] = {1.0, 2.0};
    test_record *records[] = {make_span_kernel(2, 1, "k", 0, values),
                              make_span(1, "poison", 1, 2, 1, 0)};
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(store_begin(writer), 0);
    store_kernel_row kernel = {.pid = TEST_PID, .name = "k", .start_ns = 1, .end_ns = 2};
    assert_int_equal(store_put_kernel(writer, &kernel), 0);
    assert_int_equal(write_records(writer, records, 2), FLARE_ERR_STORE);
    assert_non_null(strstr(store_last_error(writer), "cannot write a replay span"));
    assert_non_null(strstr(store_last_error(writer), "injected"));
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_spans"), 0);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches"), 0);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes"), 0);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics"), 0);
    free(records[0]);
    free(records[1]);
    test_remove_dir(dir);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "store-replay");
    store_close(open_store(dir, STORE_OPEN_WRITE));
    store *reader = open_store(dir, STORE_OPEN_READ);
    test_record *record = make_declined(1, "k", 0, "graph");
    const store_replay_record *row = &record->row;
    assert_int_equal(store_write_replay_records(NULL, 1, &row, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_write_replay_records(reader, 1, NULL, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_write_replay_records(reader, 1, &row, 1), FLARE_ERR_STATE);
    assert_non_null(strstr(store_last_error(reader), "opened for reading"));
    assert_int_equal(store_read_replay_launches(reader, NULL, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_replay_passes(NULL, 1, 1, capture_pass, NULL),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_replay_summary(reader, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_replay_spans(reader, NULL, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_replay_spans(NULL, capture_span, NULL), FLARE_ERR_INVALID_ARGUMENT);
    store_close(reader);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches"), 0);
    free(record);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_passes_beyond_the_kept_limit),
        cmocka_unit_test(test_failure_keeps_the_batch),
        cmocka_unit_test(test_rewrite_replaces),
        cmocka_unit_test(test_empty_and_early_stop),
        cmocka_unit_test(test_span_round_trip),
        cmocka_unit_test(test_declined_span),
        cmocka_unit_test(test_span_failure_is_all_or_nothing),
        cmocka_unit_test(test_invalid_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
