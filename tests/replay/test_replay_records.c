/*
 * test_replay_records.c: the engine's replay_records turned into the
 * store's rows (replay_records_store, src/replay/replay_records.c): every
 * field lands in its column, a span in replay_spans, counts of kept passes
 * and metrics past the records' arrays are clamped to them, and strings
 * that fill their arrays without a NUL are bounded by the arrays, never
 * read past. The store's own behaviour is tests/store/test_store_replay.c's.
 *
 * Each test works in its own mkdtemp directory under /tmp and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_replay.h"
#include "test_util.h"

#define TEST_PID 777

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

static replay_record *new_record(void)
{
    replay_record *record = calloc(1, sizeof(*record));
    assert_non_null(record);
    return record;
}

/* What the launch reader returned, copied out of the callback. */
typedef struct captured {
    size_t count;
    store_replay_launch_row row;
    char kernel[300];
    char reason[300];
    char collector[64];
    size_t metric_count;
    char first_metric[200];
    int first_has_value;
    double first_value;
    int second_has_value;
} captured;

static int capture_launch(const store_replay_launch_row *row, void *user)
{
    captured *into = user;
    into->count++;
    into->row = *row;
    snprintf(into->kernel, sizeof into->kernel, "%s", row->kernel);
    snprintf(into->reason, sizeof into->reason, "%s", row->reason);
    snprintf(into->collector, sizeof into->collector, "%s", row->collector);
    into->metric_count = row->metric_count;
    if (row->metric_count > 1) {
        snprintf(into->first_metric, sizeof into->first_metric, "%s", row->metric_names[0]);
        into->first_has_value = row->metric_has_value[0];
        into->first_value = row->metric_values[0];
        into->second_has_value = row->metric_has_value[1];
    }
    return 0;
}

/* Every field of a launch record reaches its column; NaN becomes "no
 * value"; a NULL entry is skipped. */
static void test_launch_fields(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "replay-records");
    replay_record *record = new_record();
    record->launch_id = 41;
    record->device = 1;
    record->stream_id = 9;
    snprintf(record->kernel_name, sizeof record->kernel_name, "stencil");
    record->launch_index = 3;
    record->passes_planned = 4;
    record->passes_run = 4;
    record->begin_ns = 100;
    record->end_ns = 9100;
    record->drain_ns = 11;
    record->snapshot_bytes = 4096;
    record->shadow_on_device = 1;
    record->snapshot_ns = 12;
    record->restore_ns = 13;
    record->bytes_restored = 12288;
    record->pass_count_kept = 4;
    for (uint32_t pass = 0; pass < 4; pass++) {
        record->pass_start_ns[pass] = 1000 * (pass + 1);
        record->pass_end_ns[pass] = 1000 * (pass + 1) + 200;
    }
    record->metric_count = 2;
    snprintf(record->metric_names[0], REPLAY_METRIC_NAME_MAX, "gpu__time_duration.sum");
    record->metric_values[0] = 2.5;
    snprintf(record->metric_names[1], REPLAY_METRIC_NAME_MAX, "dram__bytes_read.sum");
    record->metric_values[1] = NAN;
    snprintf(record->collector, sizeof record->collector, "sim-metrics");
    record->span_id = 0;
    replay_record *records[] = {NULL, record};

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(replay_records_store(writer, TEST_PID, records, 2), 0);
    store_close(writer);

    store *reader = open_store(dir, STORE_OPEN_READ);
    captured got = {0};
    assert_int_equal(store_read_replay_launches(reader, capture_launch, &got), 0);
    store_close(reader);
    assert_int_equal(got.count, 1);
    assert_int_equal(got.row.pid, TEST_PID);
    assert_int_equal(got.row.launch_id, 41);
    assert_int_equal(got.row.span_id, 0);
    assert_int_equal(got.row.device, 1);
    assert_int_equal(got.row.stream_id, 9);
    assert_string_equal(got.kernel, "stencil");
    assert_int_equal(got.row.launch_index, 3);
    assert_int_equal(got.row.passes_planned, 4);
    assert_int_equal(got.row.passes_run, 4);
    assert_false(got.row.declined);
    assert_string_equal(got.reason, "");
    assert_int_equal(got.row.begin_ns, 100);
    assert_int_equal(got.row.end_ns, 9100);
    assert_int_equal(got.row.drain_ns, 11);
    assert_int_equal(got.row.snapshot_bytes, 4096);
    assert_true(got.row.shadow_on_device);
    assert_int_equal(got.row.snapshot_ns, 12);
    assert_int_equal(got.row.restore_ns, 13);
    assert_int_equal(got.row.bytes_restored, 12288);
    assert_string_equal(got.collector, "sim-metrics");
    assert_int_equal(got.row.passes_kept, 4);
    assert_int_equal(got.row.pass_mean_ns, 200);
    assert_int_equal(got.metric_count, 2);
    assert_string_equal(got.first_metric, "gpu__time_duration.sum");
    assert_true(got.first_has_value);
    assert_true(got.first_value == 2.5);
    assert_false(got.second_has_value);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches WHERE span_id IS NULL"), 1);
    free(record);
    test_remove_dir(dir);
}

/* A span record becomes a replay_spans row keyed by its span id, with its
 * passes under that id and none of its metric names stored. */
static void test_span_fields(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "replay-records");
    replay_record *span = new_record();
    span->is_span = 1;
    span->launch_id = 50;
    span->span_id = 50;
    snprintf(span->kernel_name, sizeof span->kernel_name, "step");
    span->launch_index = 2;
    span->span_kernels = 3;
    span->span_copies = 1;
    span->passes_planned = 2;
    span->passes_run = 1;
    span->declined = 1;
    snprintf(span->reason, sizeof span->reason, "memory allocated inside the span");
    span->pass_count_kept = 1;
    span->pass_start_ns[0] = 10;
    span->pass_end_ns[0] = 20;
    span->metric_count = 1;
    snprintf(span->metric_names[0], REPLAY_METRIC_NAME_MAX, "gpu__time_duration.sum");
    replay_record *kernel = new_record();
    kernel->launch_id = 51;
    kernel->span_id = 50;
    snprintf(kernel->kernel_name, sizeof kernel->kernel_name, "rmw");
    replay_record *records[] = {span, kernel};

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(replay_records_store(writer, TEST_PID, records, 2), 0);
    store_close(writer);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_spans WHERE span_id = 50 AND "
                                  "name = 'step' AND occurrence = 2 AND kernels = 3 AND "
                                  "copies = 1 AND declined = 1 AND reason = "
                                  "'memory allocated inside the span'"),
                     1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_launches"), 1);
    assert_int_equal(sql_int(dir, "SELECT span_id FROM replay_launches"), 50);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes WHERE launch_id = 50"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics"), 0);
    free(span);
    free(kernel);
    test_remove_dir(dir);
}

/* Counts past the arrays are clamped to them, and strings that fill their
 * arrays without a NUL are stored whole, never read past. */
static void test_bounded_by_the_arrays(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "replay-records");
    replay_record *record = new_record();
    record->launch_id = 1;
    record->passes_run = 70;
    record->pass_count_kept = 1000; /* more than the arrays hold */
    for (uint32_t pass = 0; pass < REPLAY_RECORD_PASS_MAX; pass++) {
        record->pass_start_ns[pass] = pass;
        record->pass_end_ns[pass] = pass + 1;
    }
    record->metric_count = 1000;
    for (uint32_t metric = 0; metric < REPLAY_RECORD_METRIC_MAX; metric++) {
        snprintf(record->metric_names[metric], REPLAY_METRIC_NAME_MAX, "m%u", metric);
        record->metric_values[metric] = metric;
    }
    memset(record->metric_names[0], 'n', REPLAY_METRIC_NAME_MAX);
    memset(record->kernel_name, 'k', sizeof record->kernel_name);
    memset(record->reason, 'r', sizeof record->reason);
    memset(record->collector, 'c', sizeof record->collector);
    replay_record *records[] = {record};

    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(replay_records_store(writer, TEST_PID, records, 1), 0);
    store_close(writer);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_passes"), REPLAY_RECORD_PASS_MAX);
    assert_int_equal(sql_int(dir, "SELECT max(pass) FROM replay_passes"),
                     REPLAY_RECORD_PASS_MAX - 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM replay_metrics"), REPLAY_RECORD_METRIC_MAX);
    assert_int_equal(sql_int(dir, "SELECT max(length(metric)) FROM replay_metrics"),
                     REPLAY_METRIC_NAME_MAX);
    assert_int_equal(sql_int(dir, "SELECT length(kernel) FROM replay_launches"),
                     sizeof record->kernel_name);
    assert_int_equal(sql_int(dir, "SELECT length(reason) FROM replay_launches"),
                     sizeof record->reason);
    assert_int_equal(sql_int(dir, "SELECT length(collector) FROM replay_launches"),
                     sizeof record->collector);
    free(record);
    test_remove_dir(dir);
}

/* No records: what the store says, without allocating; a READ handle
 * refuses like the store. */
static void test_empty_and_refused(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "replay-records");
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    assert_int_equal(replay_records_store(writer, TEST_PID, NULL, 0), 0);
    store_close(writer);
    store *reader = open_store(dir, STORE_OPEN_READ);
    replay_record *record = new_record();
    assert_int_equal(replay_records_store(NULL, TEST_PID, &record, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(replay_records_store(reader, TEST_PID, NULL, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(replay_records_store(reader, TEST_PID, &record, 1), FLARE_ERR_STATE);
    store_close(reader);
    free(record);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_fields),
        cmocka_unit_test(test_span_fields),
        cmocka_unit_test(test_bounded_by_the_arrays),
        cmocka_unit_test(test_empty_and_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
