/*
 * test_store_pc.c: the pc_samples table (src/store/store_pc.c, schema 11):
 * aggregates written inside a batch read back exact, their function
 * interned like kernel names (and named by v_pc_samples), the same key
 * written twice added up, bad arguments refused with nothing written, a
 * version 10 session read with no rows, its notice naming what version 11
 * added, and the samples attributed to scopes by kernel time
 * (store_read_pc_by_scope).
 *
 * Each test works in its own temporary directory and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store.h"
#include "attrib/attrib.h"
#include "store/store_pc.h"
#include "test_util.h"

#define PID 4242

static char dir[256];

static store *open_mode(store_open_mode mode)
{
    store *handle = NULL;
    char error[512];
    if (store_open(dir, mode, &handle, error, sizeof(error)) != 0)
        fail_msg("%s", error);
    return handle;
}

static int64_t query_int(const char *sql)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int64_t value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
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
    test_make_temp_dir(dir, sizeof(dir), "store-pc");
    return 0;
}

static int tear_down(void **state)
{
    (void)state;
    test_remove_dir(dir);
    return 0;
}

/* What the reader gave, copied (its strings live during the call only). */
#define ROWS_MAX 8
typedef struct readback {
    int count;
    int stop_after; /* 0: never */
    store_pc_sample_row rows[ROWS_MAX];
    char functions[ROWS_MAX][400];
    char reasons[ROWS_MAX][32];
} readback;

static int collect(const store_pc_sample_row *row, void *user)
{
    readback *r = user;
    assert_true(r->count < ROWS_MAX);
    r->rows[r->count] = *row;
    snprintf(r->functions[r->count], sizeof(r->functions[0]), "%s", row->function);
    snprintf(r->reasons[r->count], sizeof(r->reasons[0]), "%s", row->stall_reason);
    r->count++;
    return r->stop_after != 0 && r->count >= r->stop_after;
}

static void test_rows_round_trip(void **state)
{
    (void)state;
    /* A C++ name longer than any fixed buffer of the engine's row. */
    char long_name[300];
    memset(long_name, 'x', sizeof(long_name) - 1);
    memcpy(long_name, "_ZN5flare", 9);
    long_name[sizeof(long_name) - 1] = '\0';
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    store_kernel_row kernel = {.pid = PID, .name = "gemm", .start_ns = 10, .end_ns = 20};
    assert_int_equal(store_put_kernel(handle, &kernel), 0);
    const store_pc_sample_row rows[] = {
        {PID, 2, 0, "gemm", 0x40, "long_scoreboard", 120, 1000, 5000, NULL, 0, NULL, NULL},
        {PID, 2, 0, "gemm", 0x40, "selected", 30, 1100, 4000, NULL, 0, NULL, NULL},
        {PID, 2, 1, long_name, UINT64_MAX, "math_pipe_throttle", 7, 2000, 2000, NULL, 0, NULL,
         NULL},
        {PID, 3, 0, "gemm", 0x80, "barrier", 1, 9000, 9000, NULL, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_int_equal(store_put_pc_sample(handle, &rows[i]), FLARE_OK);
    /* The same key again: its samples added, its times widened. */
    const store_pc_sample_row again = {PID, 2,    0,    "gemm", 0x40, "selected", 5,
                                       900, 4500, NULL, 0,      NULL, NULL};
    assert_int_equal(store_put_pc_sample(handle, &again), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);

    /* The function shares the kernel's interned name. */
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_samples"), 4);
    assert_int_equal(query_int("SELECT COUNT(DISTINCT p.name_id) FROM pc_samples p JOIN kernels k"
                               " ON k.name_id = p.name_id"),
                     1);
    assert_int_equal(query_int("SELECT SUM(samples) FROM v_pc_samples WHERE function = 'gemm'"),
                     156);

    handle = open_mode(STORE_OPEN_READ);
    readback r = {0};
    assert_int_equal(store_read_pc_samples(handle, collect, &r), 0);
    assert_int_equal(r.count, 4);
    /* By window, most samples first. */
    assert_int_equal(r.rows[0].window_id, 2);
    assert_string_equal(r.functions[0], "gemm");
    assert_string_equal(r.reasons[0], "long_scoreboard");
    assert_int_equal(r.rows[0].samples, 120);
    assert_int_equal(r.rows[0].pc_offset, 0x40);
    assert_int_equal(r.rows[0].first_ns, 1000);
    assert_int_equal(r.rows[0].last_ns, 5000);
    assert_string_equal(r.reasons[1], "selected");
    assert_int_equal(r.rows[1].samples, 35);
    assert_int_equal(r.rows[1].first_ns, 900);
    assert_int_equal(r.rows[1].last_ns, 4500);
    assert_string_equal(r.functions[2], long_name);
    assert_int_equal(r.rows[2].device, 1);
    assert_true(r.rows[2].pc_offset == UINT64_MAX); /* through the int64 cast, exact */
    assert_int_equal(r.rows[3].window_id, 3);
    assert_int_equal(r.rows[3].pid, PID);
    /* A callback's non-zero stops the walk, without an error. */
    readback first = {.stop_after = 1};
    assert_int_equal(store_read_pc_samples(handle, collect, &first), 0);
    assert_int_equal(first.count, 1);
    assert_int_equal(store_read_pc_samples(handle, NULL, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_pc_samples(NULL, collect, &r), FLARE_ERR_INVALID_ARGUMENT);
    /* A reader's handle writes nothing. */
    assert_int_equal(store_put_pc_sample(handle, &rows[0]), FLARE_ERR_STATE);
    store_close(handle);
}

static void test_bad_arguments_are_refused(void **state)
{
    (void)state;
    const store_pc_sample_row good = {PID, 1,   0,    "k", 16,   "selected", 3,
                                      100, 200, NULL, 0,   NULL, NULL};
    assert_int_equal(store_put_pc_sample(NULL, &good), FLARE_ERR_INVALID_ARGUMENT);
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(store_put_pc_sample(handle, NULL), FLARE_ERR_INVALID_ARGUMENT);
    store_pc_sample_row bad[5];
    for (size_t i = 0; i < 5; i++)
        bad[i] = good;
    bad[0].function = NULL;
    bad[1].stall_reason = NULL;
    bad[2].stall_reason = "";
    bad[3].samples = 0;
    bad[4].last_ns = bad[4].first_ns - 1;
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(store_put_pc_sample(handle, &bad[i]), FLARE_ERR_INVALID_ARGUMENT);
    /* Refusals leave the batch good: the next row is written. */
    assert_int_equal(store_put_pc_sample(handle, &good), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_samples"), 1);
    assert_int_equal(query_int("SELECT COUNT(*) FROM names WHERE name = 'k'"), 1);
}

/* A session of version 10 (before pc_samples): read with no rows and a
 * notice; `flare index` adds the empty table. */
static void test_version_10_session(void **state)
{
    (void)state;
    store_close(open_mode(STORE_OPEN_WRITE));
    exec("DROP VIEW v_pc_instructions; DROP TABLE pc_instructions; DROP TABLE pc_cubins;"
         "DROP TABLE pc_code; DROP TABLE untimed_launches; DROP VIEW v_sass_metrics;"
         "DROP TABLE sass_metrics;"
         "DROP VIEW v_pc_lines;"
         "DROP TABLE pc_lines; DROP VIEW v_pc_samples; DROP TABLE pc_samples;"
         "UPDATE meta SET value = 10 WHERE key = 'schema_version'");
    store *handle = open_mode(STORE_OPEN_READ);
    const char *notice = store_read_notice(handle);
    assert_non_null(notice);
    assert_non_null(strstr(notice, "schema version 10 (an older flare): read without the PC "
                                   "samples of version 11, the PC source lines of version 12, "
                                   "the SASS metrics of version 13, the untimed launches of "
                                   "version 14, the SASS text of version 15 and the replay "
                                   "value methods of version 16 (it recorded none)"));
    readback r = {0};
    assert_int_equal(store_read_pc_samples(handle, collect, &r), 0);
    assert_int_equal(r.count, 0);
    store_close(handle);
    char error[512];
    assert_int_equal(store_open_upgrading(dir, &handle, error, sizeof(error)), 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT value FROM meta WHERE key = 'schema_version'"), 16);
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_pc_samples"), 0);
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_pc_lines"), 0);
}

/* What store_read_pc_lines gave, copied. */
typedef struct line_readback {
    int count;
    uint64_t windows[ROWS_MAX];
    char files[ROWS_MAX][32];
    uint32_t lines[ROWS_MAX];
    char functions[ROWS_MAX][32];
    uint64_t samples[ROWS_MAX];
    char stalls[ROWS_MAX][32];
    uint64_t stall_samples[ROWS_MAX];
} line_readback;

static int collect_line(const store_pc_line_row *row, void *user)
{
    line_readback *r = user;
    assert_true(r->count < ROWS_MAX);
    r->windows[r->count] = row->window_id;
    snprintf(r->files[r->count], sizeof(r->files[0]), "%s", row->file);
    r->lines[r->count] = row->line;
    snprintf(r->functions[r->count], sizeof(r->functions[0]), "%s", row->function);
    r->samples[r->count] = row->samples;
    snprintf(r->stalls[r->count], sizeof(r->stalls[0]), "%s", row->top_stall);
    r->stall_samples[r->count] = row->top_stall_samples;
    r->count++;
    return 0;
}

static void test_source_lines(void **state)
{
    (void)state;
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    /* Two instructions of one line (0x40, 0x50), one of another, one with
     * no line information; a second window samples 0x40 again. */
    const store_pc_sample_row rows[] = {
        {PID, 1, 0, "chain", 0x40, "long_scoreboard", 70, 100, 200, "hot.cu", 12, NULL, NULL},
        {PID, 1, 0, "chain", 0x40, "selected", 5, 100, 200, "hot.cu", 12, NULL, NULL},
        {PID, 1, 0, "chain", 0x50, "long_scoreboard", 20, 100, 200, "hot.cu", 12, NULL, NULL},
        {PID, 1, 0, "chain", 0x90, "wait", 30, 100, 200, "hot.cu", 20, NULL, NULL},
        {PID, 1, 0, "other", 0x10, "selected", 500, 100, 200, NULL, 0, NULL, NULL},
        {PID, 2, 0, "chain", 0x40, "long_scoreboard", 9, 300, 400, "hot.cu", 12, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_int_equal(store_put_pc_sample(handle, &rows[i]), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    /* One row per instruction with a line, whatever the windows. */
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_lines"), 3);
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_pc_lines"), 5);
    handle = open_mode(STORE_OPEN_READ);
    line_readback r = {0};
    assert_int_equal(store_read_pc_lines(handle, collect_line, &r), 0);
    store_close(handle);
    assert_int_equal(r.count, 3);
    assert_int_equal(r.windows[0], 1);
    assert_string_equal(r.files[0], "hot.cu");
    assert_int_equal(r.lines[0], 12);
    assert_int_equal(r.samples[0], 95);
    assert_string_equal(r.stalls[0], "long_scoreboard");
    assert_int_equal(r.stall_samples[0], 90);
    assert_string_equal(r.functions[0], "chain");
    assert_int_equal(r.lines[1], 20);
    assert_int_equal(r.samples[1], 30);
    assert_string_equal(r.stalls[1], "wait");
    assert_int_equal(r.windows[2], 2);
    assert_int_equal(r.samples[2], 9);
}

/* What store_read_pc_by_scope gave, copied. */
typedef struct scope_readback {
    int count;
    char scopes[ROWS_MAX][48];
    char reasons[ROWS_MAX][32];
    double samples[ROWS_MAX];
    uint64_t windows[ROWS_MAX];
} scope_readback;

static int collect_scope(const store_pc_scope_row *row, void *user)
{
    scope_readback *r = user;
    assert_true(r->count < ROWS_MAX);
    snprintf(r->scopes[r->count], sizeof(r->scopes[0]), "%s", row->scope_name);
    snprintf(r->reasons[r->count], sizeof(r->reasons[0]), "%s", row->stall_reason);
    r->samples[r->count] = row->samples;
    r->windows[r->count] = row->window_id;
    r->count++;
    return 0;
}

/* The resolver flare report passes: attrib.h's rule, checked against its
 * reference (the naive resolver) on every call. */
static int resolve_scopes(const store_pc_scope_span *spans, size_t span_count,
                          const uint64_t *times, size_t count, int64_t *winners)
{
    attrib_scope scopes[16];
    int64_t naive[64];
    assert_true(span_count <= 16 && count <= 64);
    for (size_t i = 0; i < span_count; i++)
        scopes[i] = (attrib_scope){.start_ns = spans[i].start_ns,
                                   .end_ns = spans[i].end_ns,
                                   .instance_id = spans[i].instance_id,
                                   .depth = spans[i].depth};
    assert_int_equal(attrib_resolve_naive(scopes, span_count, times, count, naive), 0);
    int status = attrib_resolve(scopes, span_count, times, count, winners, NULL);
    for (size_t i = 0; status == 0 && i < count; i++)
        assert_int_equal(winners[i], naive[i]);
    return status;
}

static void put_kernel(store *handle, int device, const char *name, uint64_t start, uint64_t end)
{
    store_kernel_row kernel = {
        .pid = PID, .device = device, .name = name, .start_ns = start, .end_ns = end};
    assert_int_equal(store_put_kernel(handle, &kernel), 0);
}

/* Window 1 of PID, open from 1000 to 2000 ns, its PC engine disarmed. */
static void put_window_1(void)
{
    exec("INSERT INTO windows (pid, id, token_kind, label, max_duration_ns, max_launches,"
         " requested_ns, opened_ns, closed_ns, close_reason, launches, engine, engine_status,"
         " engine_reason, engine_samples) VALUES (4242, 1, 'schedule', 'w', 1000, 0, 1000, 1000,"
         " 2000, 'duration', 0, 'sim-pc-sampling', 'disarmed', '', 0)");
}

/* Window 1 (1000..2000 ns) samples gemm and relu on device 0. gemm's kernels
 * in it: 1000..1300 once clipped (midpoint in scope forward), 1500..1600 (in
 * backward, inside step), 1800..1900 (after step ended: no scope); one
 * outside the window and one on device 1 count for nothing. relu ran only
 * after the window. So gemm's samples split 3:1:1, relu's go to "(no kernel
 * in the window)". */
static void test_samples_split_over_scopes_by_kernel_time(void **state)
{
    (void)state;
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, 0, "gemm", 900, 1300);
    put_kernel(handle, 0, "gemm", 1500, 1600);
    put_kernel(handle, 0, "gemm", 1800, 1900);
    put_kernel(handle, 0, "gemm", 2500, 2600);
    put_kernel(handle, 1, "gemm", 1000, 2000);
    put_kernel(handle, 0, "relu", 3000, 3100);
    const store_pc_sample_row rows[] = {
        {PID, 1, 0, "gemm", 0x40, "long_scoreboard", 400, 1000, 2000, NULL, 0, NULL, NULL},
        {PID, 1, 0, "gemm", 0x80, "selected", 100, 1000, 2000, NULL, 0, NULL, NULL},
        {PID, 1, 0, "relu", 0x10, "selected", 10, 1000, 2000, NULL, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_int_equal(store_put_pc_sample(handle, &rows[i]), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    put_window_1();
    exec("INSERT OR IGNORE INTO names (name) VALUES ('step'), ('forward'), ('backward');"
         "INSERT INTO scopes SELECT 4242, 7, 1, id, 0, 0, 1750, 0 FROM names WHERE name = 'step';"
         "INSERT INTO scopes SELECT 4242, 7, 2, id, 1, 1100, 1400, 0 FROM names"
         " WHERE name = 'forward';"
         "INSERT INTO scopes SELECT 4242, 7, 3, id, 1, 1500, 1700, 0 FROM names"
         " WHERE name = 'backward';");

    handle = open_mode(STORE_OPEN_READ);
    scope_readback r = {0};
    assert_int_equal(store_read_pc_by_scope(handle, resolve_scopes, collect_scope, &r), 0);
    store_close(handle);
    const struct {
        const char *scope, *reason;
        double samples;
    } want[] = {
        {"(no kernel in the window)", "selected", 10},
        {"(no range)", "long_scoreboard", 80},
        {"(no range)", "selected", 20},
        {"backward", "long_scoreboard", 80},
        {"backward", "selected", 20},
        {"forward", "long_scoreboard", 240},
        {"forward", "selected", 60},
    };
    assert_int_equal(r.count, (int)(sizeof(want) / sizeof(want[0])));
    double total = 0;
    for (int i = 0; i < r.count; i++) {
        assert_string_equal(r.scopes[i], want[i].scope);
        assert_string_equal(r.reasons[i], want[i].reason);
        assert_true(r.samples[i] > want[i].samples - 1e-9 && r.samples[i] < want[i].samples + 1e-9);
        assert_int_equal(r.windows[i], 1);
        total += r.samples[i];
    }
    assert_true(total > 510 - 1e-6 && total < 510 + 1e-6);
    assert_int_equal(store_read_pc_by_scope(NULL, resolve_scopes, collect_scope, &r),
                     FLARE_ERR_INVALID_ARGUMENT);
}

/* A session written before PC samples kept whole names (the engine cut
 * them at 255 bytes until session 16): a sample names its kernel's first
 * 255 bytes, and is still credited to the scope its kernel ran in. */
static void test_a_cut_function_name_finds_its_kernel(void **state)
{
    (void)state;
    char full[400], cut[256];
    memset(full, 'k', sizeof(full) - 1);
    full[sizeof(full) - 1] = '\0';
    memcpy(full, "void at::native::kernel<", 24);
    memcpy(cut, full, 255);
    cut[255] = '\0';
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, 0, full, 1200, 1400);
    const store_pc_sample_row row = {PID,  1,    0, cut,  0x20, "long_scoreboard", 50, 1000,
                                     2000, NULL, 0, NULL, NULL};
    assert_int_equal(store_put_pc_sample(handle, &row), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    put_window_1();
    exec("INSERT OR IGNORE INTO names (name) VALUES ('layer');"
         "INSERT INTO scopes SELECT 4242, 7, 1, id, 0, 1100, 1500, 0 FROM names WHERE name = "
         "'layer';");
    handle = open_mode(STORE_OPEN_READ);
    scope_readback r = {0};
    assert_int_equal(store_read_pc_by_scope(handle, resolve_scopes, collect_scope, &r), 0);
    store_close(handle);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.scopes[0], "layer");
    assert_true(r.samples[0] > 50 - 1e-9 && r.samples[0] < 50 + 1e-9);
}

/* A kernel whose whole name is 255 bytes keeps its own samples: another
 * kernel whose name begins with it (as a cut name would) gets none of
 * them. Before the fix every such sample was split over both. */
static void test_a_whole_255_byte_name_is_its_own(void **state)
{
    (void)state;
    char exact[256], longer[400];
    memset(exact, 'e', 255);
    exact[255] = '\0';
    memcpy(longer, exact, 255);
    memset(longer + 255, 'x', sizeof(longer) - 256);
    longer[sizeof(longer) - 1] = '\0';
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, 0, exact, 1200, 1400);
    put_kernel(handle, 0, longer, 1500, 1700);
    const store_pc_sample_row row = {PID,  1,    0, exact, 0x20, "long_scoreboard", 50, 1000,
                                     2000, NULL, 0, NULL,  NULL};
    assert_int_equal(store_put_pc_sample(handle, &row), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    put_window_1();
    exec("INSERT OR IGNORE INTO names (name) VALUES ('first'), ('second');"
         "INSERT INTO scopes SELECT 4242, 7, 1, id, 0, 1100, 1450, 0 FROM names WHERE name = "
         "'first';"
         "INSERT INTO scopes SELECT 4242, 7, 2, id, 0, 1450, 1800, 0 FROM names WHERE name = "
         "'second';");
    handle = open_mode(STORE_OPEN_READ);
    scope_readback r = {0};
    assert_int_equal(store_read_pc_by_scope(handle, resolve_scopes, collect_scope, &r), 0);
    store_close(handle);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.scopes[0], "first");
    assert_true(r.samples[0] > 50 - 1e-9 && r.samples[0] < 50 + 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_round_trip, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_bad_arguments_are_refused, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_version_10_session, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_source_lines, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_samples_split_over_scopes_by_kernel_time, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_a_cut_function_name_finds_its_kernel, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_a_whole_255_byte_name_is_its_own, set_up, tear_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
