/*
 * test_store_damaged.c: the store's readers on damaged session databases,
 * the bugs fuzz/fuzz_session_reader found (docs/RELIABILITY.md) and others
 * of their kind. A database flare did not write, or one edited by hand, may
 * hold NULL where the schema says NOT NULL (a table rebuilt without its
 * constraints), or values no writer produces; `flare report` and `flare
 * export` must still read it without a crash or undefined behaviour.
 *
 * Each test writes a small session through the store's writer, damages it
 * with SQL (rebuilding a table without constraints first where NULL must go
 * into a NOT NULL column), and reads it back through the reader that
 * failed. The readers' contracts (store_replay.h, store.h, store_pm.h) say
 * which strings are never NULL: those must come back as "". Each test works
 * in its own mkdtemp directory under /tmp and removes it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store.h"
#include "store/store_pm.h"
#include "store/store_replay.h"
#include "test_util.h"

#define TEST_PID 4321

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

/* Runs sql (several statements) on session.db directly. */
static void damage(const char *dir, const char *sql)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, STORE_DATABASE_NAME);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *message = NULL;
    /* Tables are rebuilt under their own name; the views that name them
     * (schema version 7) must not stop the rename half-way. */
    int rc = sqlite3_exec(db, "PRAGMA legacy_alter_table = ON", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, &message);
    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, message);
    sqlite3_free(message);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
}

/* The SQL that rebuilds table without its constraints (NOT NULL, keys),
 * keeping its columns and rows, as a damaged or hand-made database may have
 * it. */
#define RELAX(table)                                                                               \
    "CREATE TABLE relaxed AS SELECT * FROM " table "; DROP TABLE " table "; ALTER TABLE relaxed "  \
    "RENAME TO " table "; "

/* A replay record of process TEST_PID with its two kept passes. */
typedef struct test_record {
    store_replay_record row;
    uint64_t pass_start_ns[2];
    uint64_t pass_end_ns[2];
} test_record;

static void init_record(test_record *record, int is_span, uint64_t launch_id, uint64_t span_id,
                        const char *name)
{
    memset(record, 0, sizeof *record);
    store_replay_record *row = &record->row;
    row->is_span = is_span;
    row->launch_id = launch_id;
    row->span_id = span_id;
    row->name = name;
    row->passes_planned = 2;
    row->passes_run = 2;
    row->reason = "a note";
    row->begin_ns = 100;
    row->end_ns = 900;
    row->snapshot_bytes = 4096;
    row->collector = "sim-metrics";
    row->pass_count = 2;
    record->pass_start_ns[0] = 200;
    record->pass_end_ns[0] = 300;
    record->pass_start_ns[1] = 400;
    record->pass_end_ns[1] = 500;
    row->pass_start_ns = record->pass_start_ns;
    row->pass_end_ns = record->pass_end_ns;
}

/* A session with one launch replayed on its own (id 1), and a span (id 10)
 * holding one kernel (id 11). */
static void write_replays(const char *dir)
{
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    test_record launch, span, kernel;
    init_record(&launch, 0, 1, 0, "alone");
    init_record(&span, 1, 10, 10, "step");
    init_record(&kernel, 0, 11, 10, "in_span");
    const store_replay_record *rows[] = {&launch.row, &span.row, &kernel.row};
    assert_int_equal(store_write_replay_records(writer, TEST_PID, rows, 3), 0);
    store_close(writer);
}

/* What a reader callback saw. */
typedef struct seen {
    int rows;
    int null_strings; /* documented-never-NULL strings that came back NULL */
    uint64_t pass_mean_ns;
} seen;

static int count_null(const char *text)
{
    return text == NULL;
}

static int see_span(const store_replay_span_row *row, void *user)
{
    seen *into = user;
    into->rows++;
    into->null_strings +=
        count_null(row->name) + count_null(row->reason) + count_null(row->collector);
    for (size_t index = 0; index < row->kernel_count; index++) {
        const store_replay_launch_row *kernel = &row->kernel_rows[index];
        into->null_strings +=
            count_null(kernel->kernel) + count_null(kernel->reason) + count_null(kernel->collector);
    }
    into->pass_mean_ns = row->pass_mean_ns;
    return 0;
}

static int see_launch(const store_replay_launch_row *row, void *user)
{
    seen *into = user;
    into->rows++;
    into->null_strings +=
        count_null(row->kernel) + count_null(row->reason) + count_null(row->collector);
    into->pass_mean_ns = row->pass_mean_ns;
    return 0;
}

/* ---- tests ---- */

/* Found by the fuzzer: a replay span whose collector (and reason, name) is
 * NULL reached `flare report` as a NULL string, which it dereferenced
 * (report_replay.c: row->collector[0]). The reader returns "" instead. */
static void test_replay_span_null_text(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "damaged-span");
    write_replays(dir);
    damage(dir,
           RELAX("replay_spans") RELAX("replay_launches") "UPDATE replay_spans SET name = NULL, "
                                                          "reason = NULL, collector = NULL;"
                                                          "UPDATE replay_launches SET kernel = "
                                                          "NULL, reason = NULL, collector = NULL;");
    store *reader = open_store(dir, STORE_OPEN_READ);
    seen spans = {0};
    assert_int_equal(store_read_replay_spans(reader, see_span, &spans), 0);
    assert_int_equal(spans.rows, 1);
    assert_int_equal(spans.null_strings, 0);
    store_close(reader);
    test_remove_dir(dir);
}

/* The same for a launch replayed on its own: kernel, reason and collector
 * come back as "", never NULL. */
static void test_replay_launch_null_text(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "damaged-launch");
    write_replays(dir);
    damage(dir, RELAX("replay_launches") "UPDATE replay_launches SET kernel = NULL, reason = NULL, "
                                         "collector = NULL;");
    store *reader = open_store(dir, STORE_OPEN_READ);
    seen launches = {0};
    assert_int_equal(store_read_replay_launches(reader, see_launch, &launches), 0);
    assert_int_equal(launches.rows, 1);
    assert_int_equal(launches.null_strings, 0);
    store_close(reader);
    test_remove_dir(dir);
}

/* A pass that ends long before it starts, or a mean past 2^64 ns (a REAL
 * in a rebuilt table), made the mean pass length a double converted to
 * uint64 out of its range: undefined behaviour, a wrapped value in
 * practice. It reads as 0 below zero and UINT64_MAX above the range. */
static void test_replay_pass_mean_out_of_range(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "damaged-passes");
    write_replays(dir);
    damage(dir,
           "UPDATE replay_passes SET end_ns = start_ns - 1000000 WHERE launch_id = 1;" RELAX(
               "replay_passes") "UPDATE replay_passes SET end_ns = 1e30 WHERE launch_id = 10;");
    store *reader = open_store(dir, STORE_OPEN_READ);
    seen launches = {0}, spans = {0};
    assert_int_equal(store_read_replay_launches(reader, see_launch, &launches), 0);
    assert_int_equal(launches.rows, 1);
    assert_true(launches.pass_mean_ns == 0);
    assert_int_equal(store_read_replay_spans(reader, see_span, &spans), 0);
    assert_int_equal(spans.rows, 1);
    assert_true(spans.pass_mean_ns == UINT64_MAX);
    store_close(reader);
    test_remove_dir(dir);
}

static int see_graph(const store_graph_row *row, void *user)
{
    seen *into = user;
    into->rows++;
    into->null_strings += count_null(row->kernel_name) + count_null(row->launched_from);
    return 0;
}

/* A graph kernel whose name is NULL in names reached the report's graph
 * table as a NULL string for %s. The reader returns "". */
static void test_graph_null_kernel_name(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "damaged-graph");
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    store_kernel_row kernel = {.pid = TEST_PID,
                               .correlation_id = 7,
                               .name = "graph_kernel",
                               .start_ns = 100,
                               .end_ns = 200,
                               .graph_id = 3,
                               .graph_node_id = 1};
    assert_int_equal(store_put_kernel(writer, &kernel), 0);
    store_close(writer);
    damage(dir, RELAX("names") "UPDATE names SET name = NULL;");
    store *reader = open_store(dir, STORE_OPEN_READ);
    seen graphs = {0};
    assert_int_equal(store_read_graphs(reader, see_graph, &graphs), 0);
    assert_int_equal(graphs.rows, 1);
    assert_int_equal(graphs.null_strings, 0);
    store_close(reader);
    test_remove_dir(dir);
}

static int see_pm(const store_pm_summary_row *row, void *user)
{
    seen *into = user;
    into->rows++;
    into->null_strings += count_null(row->range) + count_null(row->metric);
    return 0;
}

/* A PM sample whose metric is NULL reached the report as a NULL metric
 * name. The reader returns "". */
static void test_pm_summary_null_metric(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof dir, "damaged-pm");
    store *writer = open_store(dir, STORE_OPEN_WRITE);
    store_pm_row sample = {.pid = TEST_PID,
                           .window_id = 1,
                           .start_ns = 100,
                           .end_ns = 200,
                           .has_scope = 1,
                           .scope_instance_id = 5,
                           .scope_name = "forward",
                           .metric = "sm__busy.pct",
                           .value = 12.5};
    assert_int_equal(store_put_pm_samples(writer, &sample, 1), 0);
    store_close(writer);
    damage(dir, RELAX("pm_samples") "UPDATE pm_samples SET metric = NULL;");
    store *reader = open_store(dir, STORE_OPEN_READ);
    seen samples = {0};
    assert_int_equal(store_read_pm_summary(reader, see_pm, &samples), 0);
    assert_int_equal(samples.rows, 1);
    assert_int_equal(samples.null_strings, 0);
    store_close(reader);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_span_null_text),
        cmocka_unit_test(test_replay_launch_null_text),
        cmocka_unit_test(test_replay_pass_mean_out_of_range),
        cmocka_unit_test(test_graph_null_kernel_name),
        cmocka_unit_test(test_pm_summary_null_metric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
