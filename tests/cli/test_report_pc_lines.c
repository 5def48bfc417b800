/*
 * test_report_pc_lines.c: the hottest source lines of PC sampling windows
 * in `flare report` (text, JSON, CSV) and `flare export --format perfetto`,
 * on a crafted session: a window whose samples are 38% on twelve lines of
 * one file (ten shown, two said to be left out, one line with two
 * instructions whose top stall has 75% of it, one path too long to show
 * whole) and 62% in code without line information; a window with no line
 * at all (one line saying how to get them, not an empty table); and the
 * same session as an older flare wrote it (schema 11, no pc_lines: not
 * recorded, never "no line information"). Must never depend on a GPU or
 * on time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_flare.h"
#include "flare/flare.h"
#include "store/store.h"
#include "store/store_pc.h"
#include "test_util.h"

#define PID    4242
#define ORIGIN 1000000000ull
#define MS     1000000ull
#define FILE_A "/home/user/src/attention.cu"

/* 160 bytes and more: shown as "..." and its last 156 bytes (long_tail). */
#define LONG_DIR                                                                                   \
    "/very/long/build/tree/that/goes/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/"  \
    "and/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on/and/on"
#define LONG_FILE LONG_DIR "/deep.cu"

static const char *long_tail(void)
{
    static char tail[200];
    snprintf(tail, sizeof tail, "...%s", LONG_FILE + strlen(LONG_FILE) - 156);
    return tail;
}

static void put_sample(store *database, uint64_t window_id, const char *function, uint64_t offset,
                       const char *stall, uint64_t samples, const char *file, uint32_t line)
{
    store_pc_sample_row row = {.pid = PID,
                               .window_id = window_id,
                               .device = 0,
                               .function = function,
                               .pc_offset = offset,
                               .stall_reason = stall,
                               .samples = samples,
                               .first_ns = ORIGIN + window_id * 20 * MS,
                               .last_ns = ORIGIN + window_id * 20 * MS + 5 * MS,
                               .file = file,
                               .line = line};
    assert_int_equal(store_put_pc_sample(database, &row), 0);
}

static void put_window(store *database, uint64_t id)
{
    store_window_row window = {.pid = PID,
                               .id = id,
                               .token_kind = "manual",
                               .label = "",
                               .requested_ns = ORIGIN + id * 20 * MS,
                               .opened_ns = ORIGIN + id * 20 * MS,
                               .closed_ns = ORIGIN + id * 20 * MS + 10 * MS,
                               .close_reason = "duration",
                               .launches = 10,
                               .engine = "sim-pc-sampling",
                               .engine_status = "disarmed",
                               .engine_reason = "",
                               .engine_samples = id == 1 ? 2000 : 500};
    assert_int_equal(store_put_window(database, &window), 0);
}

/* Window 1: 2,000 samples, 760 of them on twelve lines; window 2: 500
 * samples, none on a line. */
static void make_session(const char *name)
{
    char dir[600], error[1024];
    snprintf(dir, sizeof dir, "%s/%s", scratch, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    store *database = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof error) != 0)
        fail_msg("store_open %s: %s", dir, error);
    store_session_info info = {
        .command = "attention", .start_ns = ORIGIN, .host = "lines-host", .flare_version = "0"};
    assert_int_equal(store_session_begin(database, &info), 0);
    assert_int_equal(store_process_begin(database, PID, 1, ORIGIN, "sim", "attention"), 0);
    assert_int_equal(store_put_device(database, PID, 0, "Crafted GPU", "sim"), 0);
    put_window(database, 1);
    put_window(database, 2);
    /* Line 10: two instructions, 90 + 30 samples. */
    put_sample(database, 1, "attn_kernel", 0x10, "long_scoreboard", 90, FILE_A, 10);
    put_sample(database, 1, "attn_kernel", 0x20, "math_pipe_throttle", 30, FILE_A, 10);
    /* Lines 11 to 19: 110 down to 30; line 11's path is too long. */
    for (uint32_t i = 1; i < 10; i++)
        put_sample(database, 1, "attn_kernel", 0x20 + 0x10 * i, "barrier", 120 - 10 * i,
                   i == 1 ? LONG_FILE : FILE_A, 10 + i);
    /* Lines 20 and 21: 5 samples each, past the ten shown. */
    put_sample(database, 1, "attn_kernel", 0x200, "selected", 5, FILE_A, 20);
    put_sample(database, 1, "attn_kernel", 0x210, "selected", 5, FILE_A, 21);
    /* 1,240 samples in a library built without -lineinfo. */
    put_sample(database, 1, "lib_gemm", 0x80, "long_scoreboard", 1000, NULL, 0);
    put_sample(database, 1, "lib_gemm", 0x90, "selected", 240, NULL, 0);
    put_sample(database, 2, "lib_gemm", 0x80, "long_scoreboard", 500, NULL, 0);
    assert_int_equal(store_process_end(database, PID, ORIGIN + 100 * MS), 0);
    assert_int_equal(store_session_end(database, ORIGIN + 100 * MS, 1, 0), 0);
    store_close(database);
}

/* The lines from the one that starts with start to the next that starts
 * with "  window " (or the end), copied into part. */
static void window_part(const char *text, const char *start, char *part, size_t size)
{
    const char *begin = strstr(text, start);
    if (begin == NULL)
        fail_msg("'%s' not found in:\n%s", start, text);
    const char *end = strstr(begin + 1, "\n  window ");
    size_t length = end != NULL ? (size_t)(end + 1 - begin) : strlen(begin);
    if (length >= size)
        length = size - 1;
    memcpy(part, begin, length);
    part[length] = '\0';
}

static size_t occurrences(const char *text, const char *part)
{
    size_t count = 0;
    for (const char *at = strstr(text, part); at != NULL; at = strstr(at + 1, part))
        count++;
    return count;
}

static void test_text_report_lists_lines_and_says_what_is_missing(void **state)
{
    (void)state;
    make_session("lines");
    assert_int_equal(FLARE("report", "lines"), 0);
    static char part[16384];
    window_part(out_text, "  window 1 (pid 4242, device 0): 2000 samples", part, sizeof part);
    char expected[600];
    snprintf(expected, sizeof expected,
             "\n    hottest source lines:\n"
             "       samples   share  top stall            of line  file:line in function\n"
             "           120    6.0%%  long_scoreboard        75.0%%  " FILE_A
             ":10 in attn_kernel\n"
             "           110    5.5%%  barrier               100.0%%  %s:11 in attn_kernel\n",
             long_tail());
    expect_contains(part, expected);
    expect_contains(part, "            30    1.5%  barrier               100.0%  " FILE_A
                          ":19 in attn_kernel\n"
                          "    2 more lines (flare report --format json: section pc_lines)\n"
                          "    62.0% of the samples are in code without line information (nvcc "
                          "-lineinfo adds it)\n");
    /* Ten lines shown, the instructions' table as it was. */
    assert_int_equal(occurrences(part, " in attn_kernel\n"), 10);
    expect_contains(part, "      1000   50.0%  long_scoreboard      lib_gemm+0x80\n");
    window_part(out_text, "  window 2 (pid 4242, device 0): 500 samples", part, sizeof part);
    expect_contains(part, "\n    source lines: none (the sampled code has no line information: "
                          "build it with nvcc -lineinfo)\n");
    if (strstr(part, "hottest source lines") != NULL)
        fail_msg("a table of lines for a window without any:\n%s", part);
}

static void test_json_csv_and_perfetto_have_the_lines(void **state)
{
    (void)state;
    make_session("lines");
    assert_int_equal(FLARE("report", "--format", "json", "lines"), 0);
    const char *section = strstr(out_text, "\"pc_lines\":[\n");
    if (section == NULL)
        fail_msg("no pc_lines section:\n%s", out_text);
    /* Every line, not only the shown ones; window 2 has none. */
    const char *end = strstr(section, "]");
    size_t rows = 0;
    for (const char *at = strstr(section, "{\"pid\":"); at != NULL && at < end;
         at = strstr(at + 1, "{\"pid\":"))
        rows++;
    assert_int_equal(rows, 12);
    expect_contains(section, "{\"pid\":4242,\"window_id\":1,\"device\":0,\"file\":\"" FILE_A
                             "\",\"line\":10,\"function\":\"attn_kernel\",\"samples\":120,"
                             "\"top_stall_reason\":\"long_scoreboard\",\"top_stall_samples\":90}");
    expect_contains(section, "\"file\":\"" LONG_FILE "\",\"line\":11,"); /* whole */
    assert_int_equal(FLARE("report", "--format", "csv", "lines"), 0);
    expect_contains(out_text, "pc_lines,0,pid,4242\n");
    expect_contains(out_text, "pc_lines,0,top_stall_reason,long_scoreboard\n");
    expect_contains(out_text, "pc_lines,11,line,21\n");

    assert_int_equal(FLARE("export", "--format", "perfetto", "-o", "-", "lines"), 0);
    char expected[600];
    snprintf(expected, sizeof expected,
             "\"pc_lines\":\"device 0: " FILE_A
             ":10 long_scoreboard 6.0%%, %s:11 barrier 5.5%%, " FILE_A
             ":12 barrier 5.0%%, no line 62.0%%\"",
             long_tail());
    expect_contains(out_text, expected);
    expect_contains(out_text, "\"pc_lines\":\"device 0: no line information (nvcc -lineinfo)\"");
}

static void test_an_older_session_did_not_record_lines(void **state)
{
    (void)state;
    make_session("old");
    char path[700];
    snprintf(path, sizeof path, "%s/old/session.db", scratch);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP VIEW v_pc_lines; DROP TABLE pc_lines; UPDATE meta SET "
                                  "value = 11 WHERE key = 'schema_version'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(FLARE("report", "old"), 0);
    expect_contains(out_text, "  window 1 (pid 4242, device 0): 2000 samples\n");
    assert_int_equal(occurrences(out_text, "\n    source lines: not recorded (a session of an "
                                           "older flare: flare stores them since schema version "
                                           "12)\n"),
                     2);
    if (strstr(out_text, "no line information") != NULL)
        fail_msg("an older session's code said to lack line information:\n%s", out_text);
    assert_int_equal(FLARE("report", "--format", "json", "old"), 0);
    expect_contains(out_text, "\"pc_lines\":[],");
    expect_contains(out_text, "\"errors\":[]");
    assert_int_equal(FLARE("export", "--format", "perfetto", "-o", "-", "old"), 0);
    if (strstr(out_text, "\"pc_lines\"") != NULL)
        fail_msg("an older session's slices have pc_lines:\n%.3000s", out_text);
    expect_contains(out_text, "\"pc_hottest\":\"device 0: lib_gemm+0x80 long_scoreboard 50.0%");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof bin_dir) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof scratch, "report-pc-lines");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_text_report_lists_lines_and_says_what_is_missing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_csv_and_perfetto_have_the_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_older_session_did_not_record_lines, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
