/*
 * test_store_sass.c: the sass_metrics table (src/store/store_sass.c, schema
 * 13): aggregates written inside a batch read back exact, with their
 * source line where they had one (in pc_lines, shared with PC samples:
 * one line per instruction whichever engine wrote it) and without one
 * where not, their function interned like kernel names (v_sass_metrics
 * names it); the same key written twice added up, a value of 0 kept; bad
 * arguments refused with nothing written; the per-line sums with their top
 * function and instruction count (store_read_sass_lines); a version 12
 * session read with no rows and a notice naming version 13, and `flare
 * index` bringing it up to a session that takes SASS metrics; and the
 * values split over the scopes their kernels ran in, by kernel time
 * (store_read_sass_by_scope: 3:1 kernel time gives 75% and 25% of each
 * metric, a function without a kernel in the window its own bucket), or by
 * launches where a SASS window's quiet left them untimed (untimed_launches,
 * schema 14).
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

#include "attrib/attrib.h"
#include "flare/flare.h"
#include "store/store.h"
#include "store/store_pc.h"
#include "store/store_sass.h"
#include "test_util.h"

#define PID  4242
#define INST "smsp__sass_inst_executed"
#define THRD "smsp__sass_thread_inst_executed"

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
    test_make_temp_dir(dir, sizeof(dir), "store-sass");
    return 0;
}

static int tear_down(void **state)
{
    (void)state;
    test_remove_dir(dir);
    return 0;
}

static void put_all(store *handle, const store_sass_row *rows, size_t count)
{
    for (size_t i = 0; i < count; i++)
        assert_int_equal(store_put_sass_metric(handle, &rows[i]), FLARE_OK);
}

/* What store_read_sass_metrics gave, copied (its strings live during the
 * call only); files[i] is "-" for a row read without a line. */
#define ROWS_MAX 12
typedef struct readback {
    int count;
    int stop_after; /* 0: never */
    store_sass_row rows[ROWS_MAX];
    char functions[ROWS_MAX][400];
    char metrics[ROWS_MAX][40];
    char files[ROWS_MAX][32];
} readback;

static int collect(const store_sass_row *row, void *user)
{
    readback *r = user;
    assert_true(r->count < ROWS_MAX);
    r->rows[r->count] = *row;
    snprintf(r->functions[r->count], sizeof(r->functions[0]), "%s", row->function);
    snprintf(r->metrics[r->count], sizeof(r->metrics[0]), "%s", row->metric);
    snprintf(r->files[r->count], sizeof(r->files[0]), "%s", row->file != NULL ? row->file : "-");
    r->count++;
    return r->stop_after != 0 && r->count >= r->stop_after;
}

static void read_all(readback *r)
{
    store *handle = open_mode(STORE_OPEN_READ);
    assert_int_equal(store_read_sass_metrics(handle, collect, r), 0);
    store_close(handle);
}

static void test_rows_round_trip_with_and_without_lines(void **state)
{
    (void)state;
    /* A C++ name longer than any fixed buffer of an engine's row. */
    char long_name[300];
    memset(long_name, 'x', sizeof(long_name) - 1);
    memcpy(long_name, "_ZN5flare", 9);
    long_name[sizeof(long_name) - 1] = '\0';
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    store_kernel_row kernel = {.pid = PID, .name = "gemm", .start_ns = 10, .end_ns = 20};
    assert_int_equal(store_put_kernel(handle, &kernel), 0);
    const store_sass_row rows[] = {
        {PID, 2, 0, "gemm", 0x40, INST, 120, "gemm.cu", 7, NULL, NULL},
        {PID, 2, 0, "gemm", 0x50, INST, 300, NULL, 0, NULL, NULL},
        {PID, 2, 0, "gemm", 0x40, THRD, 3840, "gemm.cu", 7, NULL, NULL},
        {PID, 2, 1, long_name, UINT64_MAX, INST, 9, "", 0, NULL, NULL}, /* empty file: no line */
        {PID, 3, 0, "gemm", 0x80, INST, 0, "gemm.cu", 9, NULL, NULL},   /* patched, not executed */
    };
    put_all(handle, rows, sizeof(rows) / sizeof(rows[0]));
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    /* The function interned as the kernel's name; one line per instruction
     * that had one. */
    assert_int_equal(query_int("SELECT COUNT(DISTINCT name_id) FROM sass_metrics"), 2);
    assert_int_equal(query_int("SELECT COUNT(*) FROM sass_metrics s JOIN kernels k"
                               " ON k.name_id = s.name_id"),
                     4);
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_lines"), 2);
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_sass_metrics"), 5);
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_sass_metrics WHERE file IS NULL"), 2);
    assert_int_equal(query_int("SELECT line FROM v_sass_metrics WHERE function = 'gemm'"
                               " AND pc_offset = 128"),
                     9);
    readback r = {0};
    read_all(&r);
    assert_int_equal(r.count, 5);
    /* By pid, window, device, metric, then largest value first. */
    assert_int_equal(r.rows[0].window_id, 2);
    assert_int_equal(r.rows[0].device, 0);
    assert_string_equal(r.metrics[0], INST);
    assert_int_equal(r.rows[0].pc_offset, 0x50);
    assert_int_equal(r.rows[0].value, 300);
    assert_string_equal(r.files[0], "-");
    assert_int_equal(r.rows[0].line, 0);
    assert_int_equal(r.rows[1].pc_offset, 0x40);
    assert_int_equal(r.rows[1].value, 120);
    assert_string_equal(r.files[1], "gemm.cu");
    assert_int_equal(r.rows[1].line, 7);
    assert_string_equal(r.metrics[2], THRD);
    assert_int_equal(r.rows[2].value, 3840);
    assert_string_equal(r.files[2], "gemm.cu");
    assert_int_equal(r.rows[3].device, 1);
    assert_int_equal(r.rows[3].pid, PID);
    assert_string_equal(r.functions[3], long_name);
    assert_int_equal(r.rows[3].pc_offset, UINT64_MAX);
    assert_string_equal(r.files[3], "-");
    assert_int_equal(r.rows[4].window_id, 3);
    assert_int_equal(r.rows[4].value, 0);
    assert_int_equal(r.rows[4].line, 9);
    /* A callback's non-zero stops the walk, not an error. */
    readback first = {.stop_after = 2};
    read_all(&first);
    assert_int_equal(first.count, 2);
}

static void test_the_same_key_adds_its_value(void **state)
{
    (void)state;
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    const store_sass_row row = {PID, 1, 0, "k", 0x10, INST, 40, "k.cu", 3, NULL, NULL};
    const store_sass_row again = {PID, 1, 0, "k", 0x10, INST, 2, NULL, 0, NULL, NULL};
    const store_sass_row other_window = {PID, 2, 0, "k", 0x10, INST, 5, NULL, 0, NULL, NULL};
    assert_int_equal(store_put_sass_metric(handle, &row), FLARE_OK);
    assert_int_equal(store_put_sass_metric(handle, &again), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    /* Outside a batch too, and in another batch. */
    assert_int_equal(store_put_sass_metric(handle, &row), FLARE_OK);
    assert_int_equal(store_put_sass_metric(handle, &other_window), FLARE_OK);
    store_close(handle);
    assert_int_equal(query_int("SELECT COUNT(*) FROM sass_metrics"), 2);
    assert_int_equal(query_int("SELECT value FROM sass_metrics WHERE window_id = 1"), 82);
    /* The line stays the first one written, for every window. */
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_sass_metrics WHERE file = 'k.cu'"
                               " AND line = 3"),
                     2);
    readback r = {0};
    read_all(&r);
    assert_int_equal(r.count, 2);
    assert_int_equal(r.rows[0].value, 82);
    assert_int_equal(r.rows[1].value, 5);
    assert_string_equal(r.files[1], "k.cu");
}

/* One instruction, one line: whichever engine wrote it first. */
static void test_a_line_is_shared_with_pc_samples(void **state)
{
    (void)state;
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    const store_pc_sample_row sample = {
        PID, 1, 0, "chain", 0x40, "long_scoreboard", 70, 100, 200, "hot.cu", 12, NULL, NULL};
    assert_int_equal(store_put_pc_sample(handle, &sample), FLARE_OK);
    const store_sass_row rows[] = {
        {PID, 1, 0, "chain", 0x40, INST, 1000, "elsewhere.cu", 99, NULL,
         NULL}, /* the first line stays */
        {PID, 1, 0, "chain", 0x50, INST, 10, "hot.cu", 13, NULL, NULL},
    };
    put_all(handle, rows, 2);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_lines"), 2);
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_lines WHERE line = 99"), 0);
    readback r = {0};
    read_all(&r);
    assert_int_equal(r.count, 2);
    assert_string_equal(r.files[0], "hot.cu");
    assert_int_equal(r.rows[0].line, 12);
    assert_int_equal(r.rows[1].line, 13);
    /* The PC sample's line came through the same table. */
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_pc_lines"), 1);
}

static void test_bad_arguments_are_refused(void **state)
{
    (void)state;
    const store_sass_row good = {PID, 1, 0, "k", 16, INST, 3, "k.cu", 4, NULL, NULL};
    readback r = {0};
    assert_int_equal(store_put_sass_metric(NULL, &good), FLARE_ERR_INVALID_ARGUMENT);
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_read_sass_metrics(handle, NULL, &r), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_sass_metrics(NULL, collect, &r), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_sass_lines(handle, NULL, &r), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(store_put_sass_metric(handle, NULL), FLARE_ERR_INVALID_ARGUMENT);
    store_sass_row bad[3] = {good, good, good};
    bad[0].function = NULL;
    bad[1].metric = NULL;
    bad[2].metric = "";
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(store_put_sass_metric(handle, &bad[i]), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(store_last_error(handle), ""); /* a refusal records nothing */
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    /* Nothing of them: no row, no line, no name interned. */
    assert_int_equal(query_int("SELECT COUNT(*) FROM sass_metrics"), 0);
    assert_int_equal(query_int("SELECT COUNT(*) FROM pc_lines"), 0);
    assert_int_equal(query_int("SELECT COUNT(*) FROM names WHERE name IN ('k', 'k.cu')"), 0);
    /* Refusals leave a batch good: the next row is written. */
    handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(store_put_sass_metric(handle, &bad[0]), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_put_sass_metric(handle, &good), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT COUNT(*) FROM sass_metrics"), 1);
    /* A reader's handle writes nothing. */
    handle = open_mode(STORE_OPEN_READ);
    assert_int_equal(store_put_sass_metric(handle, &good), FLARE_ERR_STATE);
    store_close(handle);
    assert_int_equal(query_int("SELECT value FROM sass_metrics"), 3);
}

/* What store_read_sass_lines gave, copied. */
typedef struct line_readback {
    int count;
    store_sass_line_row rows[ROWS_MAX];
    char metrics[ROWS_MAX][40];
    char files[ROWS_MAX][32];
    char functions[ROWS_MAX][32];
} line_readback;

static int collect_line(const store_sass_line_row *row, void *user)
{
    line_readback *r = user;
    assert_true(r->count < ROWS_MAX);
    r->rows[r->count] = *row;
    snprintf(r->metrics[r->count], sizeof(r->metrics[0]), "%s", row->metric);
    snprintf(r->files[r->count], sizeof(r->files[0]), "%s", row->file);
    snprintf(r->functions[r->count], sizeof(r->functions[0]), "%s", row->function);
    r->count++;
    return 0;
}

static void test_lines_sum_their_instructions(void **state)
{
    (void)state;
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    /* hot.cu:12: two instructions of chain (0x40, 0x50) and one of an
     * inlined helper's copy in other (more than either of chain's, less
     * than both); hot.cu:20 one instruction; one without a line; the
     * thread metric on 0x40 only; a second window on 0x40. */
    const store_sass_row rows[] = {
        {PID, 1, 0, "chain", 0x40, INST, 70, "hot.cu", 12, NULL, NULL},
        {PID, 1, 0, "chain", 0x50, INST, 20, "hot.cu", 12, NULL, NULL},
        {PID, 1, 0, "other", 0x10, INST, 80, "hot.cu", 12, NULL, NULL},
        {PID, 1, 0, "chain", 0x90, INST, 30, "hot.cu", 20, NULL, NULL},
        {PID, 1, 0, "nolines", 0x10, INST, 5000, NULL, 0, NULL, NULL},
        {PID, 1, 0, "chain", 0x40, THRD, 2240, NULL, 0, NULL, NULL},
        {PID, 2, 0, "chain", 0x40, INST, 9, NULL, 0, NULL, NULL},
    };
    put_all(handle, rows, sizeof(rows) / sizeof(rows[0]));
    /* Read on the writer's own handle, inside its batch. */
    line_readback r = {0};
    assert_int_equal(store_read_sass_lines(handle, collect_line, &r), 0);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    assert_int_equal(r.count, 4);
    assert_int_equal(r.rows[0].pid, PID);
    assert_int_equal(r.rows[0].window_id, 1);
    assert_string_equal(r.metrics[0], INST);
    assert_string_equal(r.files[0], "hot.cu");
    assert_int_equal(r.rows[0].line, 12);
    assert_int_equal(r.rows[0].value, 170);
    assert_int_equal(r.rows[0].instructions, 3);
    assert_string_equal(r.functions[0], "chain"); /* 90 of the 170 */
    assert_int_equal(r.rows[1].line, 20);
    assert_int_equal(r.rows[1].value, 30);
    assert_int_equal(r.rows[1].instructions, 1);
    assert_string_equal(r.metrics[2], THRD);
    assert_int_equal(r.rows[2].line, 12);
    assert_int_equal(r.rows[2].value, 2240);
    assert_int_equal(r.rows[2].instructions, 1);
    assert_int_equal(r.rows[3].window_id, 2);
    assert_int_equal(r.rows[3].value, 9);
    assert_string_equal(r.functions[3], "chain");
}

/* A session of version 12 (before sass_metrics): read with no rows and a
 * notice; `flare index` adds the empty table, which then takes rows. */
static void test_version_12_session(void **state)
{
    (void)state;
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    const store_pc_sample_row sample = {PID, 1,   0,        "chain", 0x40, "selected", 5,
                                        100, 200, "hot.cu", 12,      NULL, NULL};
    assert_int_equal(store_put_pc_sample(handle, &sample), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    exec("DROP VIEW v_sass_metrics; DROP TABLE sass_metrics; DROP TABLE untimed_launches;"
         "DROP VIEW v_pc_instructions; DROP TABLE pc_instructions; DROP TABLE pc_cubins;"
         "DROP TABLE pc_code; UPDATE meta SET value = 12 WHERE key = 'schema_version'");
    handle = open_mode(STORE_OPEN_READ);
    const char *notice = store_read_notice(handle);
    assert_non_null(notice);
    assert_non_null(strstr(notice, "schema version 12 (an older flare): read without the SASS "
                                   "metrics of version 13, the untimed launches of version 14, "
                                   "the SASS text of version 15 and the replay value methods "
                                   "of version 16 (it recorded none); 'flare index' adds the "
                                   "empty tables"));
    readback r = {0};
    assert_int_equal(store_read_sass_metrics(handle, collect, &r), 0);
    assert_int_equal(r.count, 0);
    line_readback lines = {0};
    assert_int_equal(store_read_sass_lines(handle, collect_line, &lines), 0);
    assert_int_equal(lines.count, 0);
    store_close(handle);
    /* A writer of this version refuses it as it is. */
    char error[512];
    assert_int_equal(store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof(error)),
                     FLARE_ERR_UNSUPPORTED);
    assert_int_equal(store_open_upgrading(dir, &handle, error, sizeof(error)), 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT value FROM meta WHERE key = 'schema_version'"), 16);
    assert_int_equal(query_int("SELECT COUNT(*) FROM v_sass_metrics"), 0);
    assert_int_equal(query_int("SELECT COUNT(*) FROM untimed_launches"), 0); /* added, empty */
    /* Upgraded, it takes SASS metrics; the line the PC sample left is theirs. */
    handle = open_mode(STORE_OPEN_WRITE);
    assert_null(store_read_notice(handle));
    const store_sass_row row = {PID, 2, 0, "chain", 0x40, INST, 11, NULL, 0, NULL, NULL};
    assert_int_equal(store_put_sass_metric(handle, &row), FLARE_OK);
    store_close(handle);
    read_all(&r);
    assert_int_equal(r.count, 1);
    assert_string_equal(r.files[0], "hot.cu");
    assert_int_equal(r.rows[0].line, 12);
    assert_int_equal(r.rows[0].value, 11);
}

/* What store_read_sass_by_scope gave, copied. */
typedef struct scope_readback {
    int count;
    int stop_after; /* 0: never */
    char scopes[ROWS_MAX][40];
    char metrics[ROWS_MAX][40];
    double values[ROWS_MAX];
    uint64_t windows[ROWS_MAX];
    int32_t devices[ROWS_MAX];
} scope_readback;

static int collect_scope(const store_sass_scope_row *row, void *user)
{
    scope_readback *r = user;
    assert_true(r->count < ROWS_MAX);
    assert_int_equal(row->pid, PID);
    snprintf(r->scopes[r->count], sizeof(r->scopes[0]), "%s", row->scope_name);
    snprintf(r->metrics[r->count], sizeof(r->metrics[0]), "%s", row->metric);
    r->values[r->count] = row->value;
    r->windows[r->count] = row->window_id;
    r->devices[r->count] = row->device;
    r->count++;
    return r->stop_after != 0 && r->count >= r->stop_after;
}

/* One row store_read_sass_by_scope should give, in window 1. */
typedef struct scope_want {
    int32_t device;
    const char *metric, *scope;
    double value;
} scope_want;

/* r holds exactly want's rows, in order, values within 1e-9. */
static void expect_scopes(const scope_readback *r, const scope_want *want, size_t count)
{
    assert_int_equal(r->count, (int)count);
    for (int i = 0; i < r->count; i++) {
        assert_int_equal(r->windows[i], 1);
        assert_int_equal(r->devices[i], want[i].device);
        assert_string_equal(r->metrics[i], want[i].metric);
        assert_string_equal(r->scopes[i], want[i].scope);
        if (!(r->values[i] > want[i].value - 1e-9 && r->values[i] < want[i].value + 1e-9))
            fail_msg("row %d (%s in %s): %.17g, expected %.17g", i, r->metrics[i], r->scopes[i],
                     r->values[i], want[i].value);
    }
}

/* The resolver flare report passes: attrib.h's rule. */
static int resolve_scopes(const store_pc_scope_span *spans, size_t span_count,
                          const uint64_t *times, size_t count, int64_t *winners)
{
    attrib_scope scopes[16];
    assert_true(span_count <= 16);
    for (size_t i = 0; i < span_count; i++)
        scopes[i] = (attrib_scope){.start_ns = spans[i].start_ns,
                                   .end_ns = spans[i].end_ns,
                                   .instance_id = spans[i].instance_id,
                                   .depth = spans[i].depth};
    return attrib_resolve(scopes, span_count, times, count, winners, NULL);
}

static void put_kernel(store *handle, int device, const char *name, uint64_t start, uint64_t end)
{
    store_kernel_row kernel = {
        .pid = PID, .device = device, .name = name, .start_ns = start, .end_ns = end};
    assert_int_equal(store_put_kernel(handle, &kernel), 0);
}

/* A closed window of PID with its engine, disarmed. */
static void insert_window(int id, uint64_t opened_ns, uint64_t closed_ns, const char *engine)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "INSERT INTO windows (pid, id, token_kind, label, max_duration_ns, max_launches,"
             " requested_ns, opened_ns, closed_ns, close_reason, launches, engine, engine_status,"
             " engine_reason, engine_samples) VALUES (%d, %d, 'schedule', 'w%d', %llu, 0, %llu,"
             " %llu, %llu, 'duration', 0, '%s', 'disarmed', '', 0)",
             PID, id, id, (unsigned long long)(closed_ns - opened_ns),
             (unsigned long long)opened_ns, (unsigned long long)opened_ns,
             (unsigned long long)closed_ns, engine);
    exec(sql);
}

/* Window 1 of PID (1000..2000 ns), scope forward 1000..1500, backward
 * 1500..2000. gemm's kernels in it: 1100..1400 (300 ns, in forward) and
 * 1600..1700 (100 ns, in backward): 3:1; one after the window and one of
 * another function count for nothing. On device 1, gemm ran 1700..1900
 * (backward). relu ran only after the window. */
static void make_scoped_session(void)
{
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    put_kernel(handle, 0, "gemm", 1100, 1400);
    put_kernel(handle, 0, "gemm", 1600, 1700);
    put_kernel(handle, 0, "gemm", 2500, 2600);
    put_kernel(handle, 0, "copy", 1000, 2000);
    put_kernel(handle, 1, "gemm", 1700, 1900);
    put_kernel(handle, 0, "relu", 3000, 3100);
    const store_sass_row rows[] = {
        {PID, 1, 0, "gemm", 0x40, INST, 600, "gemm.cu", 7, NULL, NULL},
        {PID, 1, 0, "gemm", 0x50, INST, 200, NULL, 0, NULL, NULL},
        {PID, 1, 0, "gemm", 0x40, THRD, 19200, "gemm.cu", 7, NULL, NULL},
        {PID, 1, 0, "gemm", 0x50, THRD, 6400, NULL, 0, NULL, NULL},
        {PID, 1, 0, "relu", 0x10, INST, 40, NULL, 0, NULL, NULL},
        {PID, 1, 1, "gemm", 0x40, INST, 10, "gemm.cu", 7, NULL, NULL},
    };
    put_all(handle, rows, sizeof(rows) / sizeof(rows[0]));
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    insert_window(1, 1000, 2000, "sim-sass-metrics");
    exec("INSERT OR IGNORE INTO names (name) VALUES ('forward'), ('backward');"
         "INSERT INTO scopes SELECT 4242, 7, 1, id, 0, 1000, 1500, 0 FROM names"
         " WHERE name = 'forward';"
         "INSERT INTO scopes SELECT 4242, 7, 2, id, 0, 1500, 2000, 0 FROM names"
         " WHERE name = 'backward';");
}

static void test_values_split_over_scopes_by_kernel_time(void **state)
{
    (void)state;
    make_scoped_session();
    store *handle = open_mode(STORE_OPEN_READ);
    scope_readback r = {0};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &r), 0);
    /* By window, device, metric, largest first: gemm's 800 executions
     * 75% (600) in forward and 25% (200) in backward, its 25,600 threads
     * the same; relu's 40 without a kernel; device 1 on its own. */
    const scope_want want[] = {
        {0, INST, "forward", 600},
        {0, INST, "backward", 200},
        {0, INST, "(no kernel in the window)", 40},
        {0, THRD, "forward", 19200},
        {0, THRD, "backward", 6400},
        {1, INST, "backward", 10},
    };
    expect_scopes(&r, want, sizeof(want) / sizeof(want[0]));
    /* A callback's non-zero stops the walk, not an error. */
    scope_readback first = {.stop_after = 2};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &first), 0);
    assert_int_equal(first.count, 2);
    assert_int_equal(store_read_sass_by_scope(NULL, resolve_scopes, collect_scope, &r),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_sass_by_scope(handle, NULL, collect_scope, &r),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, NULL, &r),
                     FLARE_ERR_INVALID_ARGUMENT);
    store_close(handle);
}

/* Outside any scope, a kernel's share goes to "(no range)"; a window never
 * closed has no kernel time to split by, so each value goes whole to "(no
 * kernel in the window)", none lost; a session of version 12 has nothing
 * to split. */
static void test_no_range_and_sessions_without_values(void **state)
{
    (void)state;
    make_scoped_session();
    exec("DELETE FROM scopes WHERE name_id = (SELECT id FROM names WHERE name = 'backward')");
    store *handle = open_mode(STORE_OPEN_READ);
    scope_readback r = {0};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &r), 0);
    store_close(handle);
    assert_int_equal(r.count, 6);
    assert_string_equal(r.scopes[1], "(no range)");
    assert_true(r.values[1] > 200 - 1e-9 && r.values[1] < 200 + 1e-9);
    assert_string_equal(r.scopes[5], "(no range)");
    exec("UPDATE windows SET closed_ns = NULL");
    handle = open_mode(STORE_OPEN_READ);
    scope_readback open = {0};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &open), 0);
    store_close(handle);
    assert_int_equal(open.count, 3);
    for (int i = 0; i < open.count; i++)
        assert_string_equal(open.scopes[i], "(no kernel in the window)");
    assert_string_equal(open.metrics[0], INST);
    assert_true(open.values[0] > 840 - 1e-9 && open.values[0] < 840 + 1e-9);
    assert_true(open.values[1] > 25600 - 1e-9 && open.values[1] < 25600 + 1e-9);
    assert_int_equal(open.devices[2], 1);
    exec("DROP VIEW v_sass_metrics; DROP TABLE sass_metrics;"
         "UPDATE meta SET value = 12 WHERE key = 'schema_version'");
    handle = open_mode(STORE_OPEN_READ);
    scope_readback none = {0};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &none), 0);
    store_close(handle);
    assert_int_equal(none.count, 0);
}

/* An untimed launch recorded in scope instance (1 forward, 2 backward, 0
 * none), whatever its time says. */
static void put_untimed(store *handle, int device, const char *name, uint64_t time_ns,
                        uint64_t scope)
{
    static uint64_t correlation = 100;
    store_untimed_launch_row row = {.pid = PID,
                                    .correlation_id = ++correlation,
                                    .thread_id = 7,
                                    .time_ns = time_ns,
                                    .device = device,
                                    .name = name,
                                    .scope_instance_id = scope};
    assert_int_equal(store_put_untimed_launch(handle, &row), 0);
}

/* A SASS window's quiet leaves its kernels untimed: a function launched
 * while the window counted is split by its launches, each in the scope
 * recorded with it (on its launching thread; other threads' scopes open at
 * that time do not compete). relu launched twice in forward, once in
 * backward and once outside any scope though forward was open then (on
 * another thread): 2:1:1 of its 40. gemm on device 1 launched once, from
 * forward, at a time only backward covers and where its own timed kernel
 * ran: the recorded scope decides. A launch after window 2 opened is not
 * window 1's, so gemm on device 0 keeps its 3:1 by kernel time. A version
 * 13 session (no table) splits by kernel time as before. */
static void test_untimed_launches_split_by_launch(void **state)
{
    (void)state;
    make_scoped_session();
    insert_window(2, 2400, 2450, "sim-pm");
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    put_untimed(handle, 0, "relu", 1200, 1);
    put_untimed(handle, 0, "relu", 1300, 1);
    put_untimed(handle, 0, "relu", 1800, 2);
    put_untimed(handle, 0, "relu", 1250, 0);
    put_untimed(handle, 1, "gemm", 1800, 1);
    put_untimed(handle, 0, "gemm", 2500, 2); /* window 2's */
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT COUNT(*) FROM untimed_launches WHERE scope_instance_id IS "
                               "NULL"),
                     1);
    handle = open_mode(STORE_OPEN_READ);
    scope_readback r = {0};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &r), 0);
    store_close(handle);
    const scope_want want[] = {
        {0, INST, "forward", 600 + 20}, {0, INST, "backward", 200 + 10},
        {0, INST, "(no range)", 10},    {0, THRD, "forward", 19200},
        {0, THRD, "backward", 6400},    {1, INST, "forward", 10},
    };
    expect_scopes(&r, want, sizeof(want) / sizeof(want[0]));
    exec("DROP VIEW v_pc_instructions; DROP TABLE pc_instructions; DROP TABLE pc_cubins;"
         "DROP TABLE pc_code; DROP TABLE untimed_launches;"
         "UPDATE meta SET value = 13 WHERE key = 'schema_version'");
    handle = open_mode(STORE_OPEN_READ);
    scope_readback old = {0};
    assert_int_equal(store_read_sass_by_scope(handle, resolve_scopes, collect_scope, &old), 0);
    store_close(handle);
    assert_int_equal(old.count, 6);
    assert_string_equal(old.scopes[2], "(no kernel in the window)");
    assert_string_equal(old.scopes[5], "backward");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_round_trip_with_and_without_lines, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_the_same_key_adds_its_value, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_a_line_is_shared_with_pc_samples, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_bad_arguments_are_refused, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_lines_sum_their_instructions, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_version_12_session, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_values_split_over_scopes_by_kernel_time, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_no_range_and_sessions_without_values, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_untimed_launches_split_by_launch, set_up, tear_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
