/*
 * test_views.c: schema version 7's views and name tables, against sessions
 * written through the store's writer with known answers: kernels with
 * names, copies with kind names and bandwidth, top kernels (from the live
 * table and from the summary the index build leaves, which must agree, and
 * never a stale summary once more kernels came), GPU busy time as the union
 * of overlapping kernels, GPU time per scope by clipped overlap, PM samples
 * per scope with flagged samples counted and never summed; the index build;
 * and a version 6 session: read as it is with a notice, refused for
 * writing, brought up to version 7 by store_open_upgrading.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store.h"
#include "store/store_export.h"
#include "store/store_pm.h"
#include "store/store_views.h"
#include "test_util.h"

static char dir[256];

static store *open_write(void)
{
    store *handle = NULL;
    char error[512];
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof(error)) != 0)
        fail_msg("%s", error);
    return handle;
}

static void put_kernel(store *handle, const char *name, int device, uint64_t start_ns,
                       uint64_t end_ns)
{
    static uint64_t correlation;
    store_kernel_row row = {.pid = 7,
                            .device = device,
                            .stream_id = 1,
                            .correlation_id = ++correlation,
                            .name = name,
                            .start_ns = start_ns,
                            .end_ns = end_ns,
                            .grid = {1, 1, 1},
                            .block = {32, 1, 1}};
    assert_int_equal(store_put_kernel(handle, &row), 0);
}

static double query_double(const char *sql)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    double value = NAN;
    if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_type(statement, 0) != SQLITE_NULL)
        value = sqlite3_column_double(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

static void query_text(const char *sql, char *buffer, size_t size)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    buffer[0] = '\0';
    size_t used = 0;
    while (sqlite3_step(statement) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(statement); i++) {
            const char *text = (const char *)sqlite3_column_text(statement, i);
            used += (size_t)snprintf(buffer + used, size - used, "%s%s", i ? "|" : "",
                                     text != NULL ? text : "NULL");
        }
        used += (size_t)snprintf(buffer + used, size - used, ";");
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
}

static void exec(const char *sql)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *message = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &message) != SQLITE_OK)
        fail_msg("%s: %s", sql, message);
    sqlite3_close(db);
}

static int set_up(void **state)
{
    (void)state;
    test_make_temp_dir(dir, sizeof(dir), "views");
    return 0;
}

static int tear_down(void **state)
{
    (void)state;
    test_remove_dir(dir);
    return 0;
}

static void test_kernels_copies_and_names(void **state)
{
    (void)state;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, "gemm", 0, 1000, 3000);
    store_copy_row copy = {.pid = 7,
                           .device = 0,
                           .stream_id = 2,
                           .correlation_id = 90,
                           .copy_kind = 1,
                           .bytes = 4000,
                           .start_ns = 10,
                           .end_ns = 1010};
    assert_int_equal(store_put_copy(handle, &copy), 0);
    store_copy_row memset_row = {.pid = 7,
                                 .device = 0,
                                 .stream_id = 2,
                                 .correlation_id = 91,
                                 .is_memset = 1,
                                 .bytes = 64,
                                 .start_ns = 20,
                                 .end_ns = 20,
                                 .status = FLARE_ERR_TIMEOUT};
    assert_int_equal(store_put_copy(handle, &memset_row), 0);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    char text[1024];
    query_text("SELECT name, duration_ns FROM v_kernels", text, sizeof(text));
    assert_string_equal(text, "gemm|2000;");
    /* 4000 bytes in 1000 ns: 4 GB/s; a memset of no duration has none. */
    query_text("SELECT kind, bytes, gb_per_s, status FROM v_copies ORDER BY correlation_id", text,
               sizeof(text));
    assert_string_equal(text, "host to device|4000|4.0|OK;memset|64|NULL|ERR_TIMEOUT;");
    /* Every code has its name. */
    assert_true(query_double("SELECT COUNT(*) FROM enum_status") >= 13);
    query_text("SELECT name FROM enum_copy_kind WHERE id = 3", text, sizeof(text));
    assert_string_equal(text, "device to device;");
    query_text("SELECT name FROM enum_pm_flag WHERE bit = 8", text, sizeof(text));
    assert_string_equal(text, "clamped start;");
}

static void test_top_kernels_live_and_summarised_agree(void **state)
{
    (void)state;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, "a", 0, 0, 100);
    put_kernel(handle, "a", 0, 200, 500);
    put_kernel(handle, "b", 1, 0, 600);
    assert_int_equal(store_commit(handle), 0);
    const char *top = "SELECT name, count, total_ns, mean_ns, min_ns, max_ns, "
                      "ROUND(percent_gpu_time, 3) FROM v_top_kernels";
    char live[1024], summarised[1024], after[1024];
    query_text(top, live, sizeof(live));
    assert_string_equal(live, "b|1|600|600.0|600|600|60.0;a|2|400|200.0|100|300|40.0;");
    store_index_result result;
    assert_int_equal(store_build_indexes(handle, &result), 0);
    assert_int_equal(result.indexes, 2);
    assert_true(store_is_indexed(handle));
    query_text(top, summarised, sizeof(summarised));
    assert_string_equal(summarised, live);
    /* A kernel written after the build: the summary is stale and unused. */
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, "a", 0, 700, 1700);
    assert_int_equal(store_commit(handle), 0);
    query_text(top, after, sizeof(after));
    assert_string_equal(after,
                        "a|3|1400|466.666666666667|100|1000|70.0;b|1|600|600.0|600|600|30.0;");
    /* Building again brings the summary up to date. */
    assert_int_equal(store_build_indexes(handle, &result), 0);
    query_text(top, summarised, sizeof(summarised));
    assert_string_equal(summarised, after);
    store_close(handle);
}

/* A session without a kernel (a CPU-only program, a run that failed
 * early) is indexed too: the summary's high-water mark is 0, not NULL
 * (meta.value is NOT NULL; the build failed on it before). */
static void test_indexes_of_a_session_without_kernels(void **state)
{
    (void)state;
    store *handle = open_write();
    store_index_result result;
    assert_int_equal(store_build_indexes(handle, &result), 0);
    assert_true(store_is_indexed(handle));
    char text[256];
    query_text("SELECT COUNT(*) FROM v_top_kernels", text, sizeof(text));
    assert_string_equal(text, "0;");
    store_close(handle);
}

static void test_gpu_busy_is_the_union_of_kernels(void **state)
{
    (void)state;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    /* Device 0: [0,100) and [50,150) overlap (150 busy), [120,130) inside,
     * then [300,400): 250 of [0,400). Device 1: [10,20). */
    put_kernel(handle, "k", 0, 0, 100);
    put_kernel(handle, "k", 0, 50, 150);
    put_kernel(handle, "k", 0, 120, 130);
    put_kernel(handle, "k", 0, 300, 400);
    put_kernel(handle, "k", 1, 10, 20);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    char text[512];
    query_text("SELECT device, busy_ns, first_ns, last_ns, kernels, percent_busy FROM v_gpu_busy "
               "ORDER BY device",
               text, sizeof(text));
    assert_string_equal(text, "0|250|0|400|4|62.5;1|10|10|20|1|100.0;");
}

static void test_scope_gpu_time_clips_overlap(void **state)
{
    (void)state;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, "k", 0, 0, 100);   /* 50 inside the scope [50, 250) */
    put_kernel(handle, "k", 0, 100, 200); /* 100 inside */
    put_kernel(handle, "k", 0, 240, 400); /* 10 inside */
    put_kernel(handle, "k", 0, 250, 300); /* outside (ends where it starts) */
    store_scope_row scope = {
        .pid = 7, .thread_id = 7, .instance_id = 1, .name = "step", .start_ns = 50, .end_ns = 250};
    assert_int_equal(store_put_scope(handle, &scope), 0);
    store_scope_row empty = {.pid = 7,
                             .thread_id = 7,
                             .instance_id = 2,
                             .name = "idle",
                             .start_ns = 1000,
                             .end_ns = 2000};
    assert_int_equal(store_put_scope(handle, &empty), 0);
    assert_int_equal(store_commit(handle), 0);
    const char *sql = "SELECT name, kernels, gpu_ns FROM v_scope_gpu_time ORDER BY start_ns";
    char before[512], after[512];
    query_text(sql, before, sizeof(before));
    assert_string_equal(before, "step|3|160;idle|0|0;");
    store_index_result result;
    assert_int_equal(store_build_indexes(handle, &result), 0);
    store_close(handle);
    query_text(sql, after, sizeof(after));
    assert_string_equal(after, before);
}

static void test_pm_by_scope_leaves_flagged_samples_out(void **state)
{
    (void)state;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    store_pm_row rows[3] = {
        {.pid = 7,
         .window_id = 1,
         .sample_index = 0,
         .start_ns = 0,
         .end_ns = 871000,
         .has_scope = 1,
         .scope_instance_id = 1,
         .scope_name = "heavy",
         .flags = 8,
         .metric = "dram__bytes_read.sum",
         .value = 1.3e12},
        {.pid = 7,
         .window_id = 1,
         .sample_index = 1,
         .start_ns = 871000,
         .end_ns = 881000,
         .has_scope = 1,
         .scope_instance_id = 1,
         .scope_name = "heavy",
         .metric = "dram__bytes_read.sum",
         .value = 1.2e6},
        {.pid = 7,
         .window_id = 1,
         .sample_index = 2,
         .start_ns = 881000,
         .end_ns = 891000,
         .has_scope = 1,
         .scope_instance_id = 1,
         .scope_name = "heavy",
         .metric = "dram__bytes_read.sum",
         .value = 1.0e6},
    };
    assert_int_equal(store_put_pm_samples(handle, rows, 3), 0);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    char text[512];
    query_text("SELECT scope_name, samples, total, mean, covered_ns, flagged FROM v_pm_by_scope",
               text, sizeof(text));
    assert_string_equal(text, "heavy|2|2200000.0|1100000.0|20000|1;");
}

static void test_version_6_session(void **state)
{
    (void)state;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, "old", 0, 0, 100);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    /* What a version 6 session is: these tables, no views or name tables. */
    exec("DROP VIEW v_kernels; DROP VIEW v_copies; DROP VIEW v_top_kernels; DROP VIEW v_gpu_busy;"
         "DROP VIEW v_scope_gpu_time; DROP VIEW v_pm_by_scope; DROP VIEW v_pc_samples;"
         "DROP VIEW v_pc_lines; DROP VIEW v_sass_metrics; DROP VIEW v_pc_instructions;"
         "DROP VIEW v_replay_metrics;"
         "DROP TABLE enum_copy_kind; DROP TABLE enum_status; DROP TABLE enum_external_kind;"
         "DROP TABLE enum_pm_flag; DROP TABLE kernel_name_stats;"
         "UPDATE meta SET value = 6 WHERE key = 'schema_version'");
    char error[512];
    /* Read as it is, saying so. */
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, error, sizeof(error)), 0);
    const char *notice = store_read_notice(handle);
    assert_non_null(notice);
    assert_non_null(strstr(notice, "schema version 6"));
    assert_non_null(strstr(notice, "flare index"));
    store_session_summary summary;
    assert_int_equal(store_read_session(handle, &summary), 0);
    assert_int_equal(summary.kernel_count, 1);
    store_close(handle);
    /* Never written to as it is. */
    assert_int_equal(store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof(error)),
                     FLARE_ERR_UNSUPPORTED);
    assert_non_null(strstr(error, "has schema version 6"));
    /* Brought up to version 16: the views appear, no row changed. */
    assert_int_equal(store_open_upgrading(dir, &handle, error, sizeof(error)), 0);
    store_index_result result;
    assert_int_equal(store_build_indexes(handle, &result), 0);
    store_close(handle);
    assert_true(query_double("SELECT value FROM meta WHERE key = 'schema_version'") == 16);
    char text[256];
    query_text("SELECT name, duration_ns FROM v_kernels", text, sizeof(text));
    assert_string_equal(text, "old|100;");
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, error, sizeof(error)), 0);
    assert_null(store_read_notice(handle));
    store_close(handle);
    /* A newer version than this flare knows is refused for reading. */
    exec("UPDATE meta SET value = 17 WHERE key = 'schema_version'");
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, error, sizeof(error)),
                     FLARE_ERR_UNSUPPORTED);
    assert_non_null(strstr(error, "reads versions 6 to 16"));
}

static int count_api_call(const store_api_call_row *row, void *user)
{
    (void)row;
    ++*(int *)user;
    return 0;
}

static int count_storm(const store_storm_row *row, void *user)
{
    (void)row;
    ++*(int *)user;
    return 0;
}

/* A version 7 session (before api_calls and storms): read as it is, its
 * new tables' readers walk no rows without an error, and `flare index`
 * brings it up to 8 with the tables empty. */
static void test_version_7_session(void **unused)
{
    (void)unused;
    store *handle = open_write();
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, "old", 0, 0, 100);
    store_api_call_row call = {.pid = 1,
                               .thread_id = 2,
                               .correlation_id = 3,
                               .name = "launch",
                               .start_ns = 10,
                               .end_ns = 20};
    assert_int_equal(store_put_api_call(handle, &call), 0);
    store_storm_row storm = {
        .pid = 1, .device = -1, .start_ns = 5, .end_ns = 50, .untimed_launches = 7};
    assert_int_equal(store_put_storm(handle, &storm), 0);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    char error[512];
    int calls = 0, storms = 0;
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, error, sizeof(error)), 0);
    assert_int_equal(store_export_api_calls(handle, count_api_call, &calls), 0);
    assert_int_equal(store_export_storms(handle, count_storm, &storms), 0);
    assert_int_equal(calls, 1);
    assert_int_equal(storms, 1);
    store_close(handle);
    exec("DROP TABLE api_calls; DROP TABLE storms;"
         "UPDATE meta SET value = 7 WHERE key = 'schema_version'");
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, error, sizeof(error)), 0);
    const char *notice = store_read_notice(handle);
    assert_non_null(notice);
    assert_non_null(strstr(notice, "schema version 7"));
    assert_non_null(strstr(notice, "read without the API calls and launch storms of version 8, "
                                   "the ranks and clock pairs of version 9, the triggered "
                                   "replays of version 10, the PC samples of version 11, "
                                   "the PC source lines of version 12, the SASS metrics of "
                                   "version 13, the untimed launches of version 14, the "
                                   "SASS text of version 15 and the replay value methods of "
                                   "version 16 (it recorded none); "
                                   "'flare index' adds the empty tables"));
    calls = storms = 0;
    assert_int_equal(store_export_api_calls(handle, count_api_call, &calls), 0);
    assert_int_equal(store_export_storms(handle, count_storm, &storms), 0);
    assert_int_equal(calls + storms, 0);
    store_close(handle);
    assert_int_equal(store_open_upgrading(dir, &handle, error, sizeof(error)), 0);
    store_close(handle);
    assert_true(query_double("SELECT value FROM meta WHERE key = 'schema_version'") == 16);
    assert_true(query_double("SELECT COUNT(*) FROM api_calls") == 0);
    assert_true(query_double("SELECT COUNT(*) FROM storms") == 0);
    assert_true(query_double("SELECT COUNT(*) FROM kernels") == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kernels_copies_and_names, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_top_kernels_live_and_summarised_agree, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_indexes_of_a_session_without_kernels, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_gpu_busy_is_the_union_of_kernels, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_scope_gpu_time_clips_overlap, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_pm_by_scope_leaves_flagged_samples_out, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_version_7_session, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_version_6_session, set_up, tear_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
