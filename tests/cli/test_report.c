/*
 * test_report.c: `flare report --format json|csv` as a script meets it:
 * the JSON of a demo session read back by Python's json module and checked
 * against the session database and the text report (report_check.py), the
 * CSV read back by Python's csv module and checked field by field against
 * the JSON, --top, a damaged session (errors, exit 1, the other sections
 * written), --wide (text only), --format's usage errors, and names holding
 * control characters (an ESC is \u001b in JSON, never a raw byte on
 * standard output), and the values of a range replay by PM sampling with
 * how each was produced (method, status, error bound: schema 16) in the
 * text, JSON and CSV, and without them for a session that has no such
 * table. Runs the built flare (FLARE_TEST_BIN_DIR) and python3 in child
 * processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "flare/flare.h"
#include "replay/replay.h"
#include "store/store.h"
#include "cli_run.h"
#include "test_util.h"

#ifndef REPORT_CHECK_PATH
#error "REPORT_CHECK_PATH must name tests/cli/report_check.py (set by tests/cli/CMakeLists.txt)"
#endif
#ifndef PYTHON3_PATH
#error "PYTHON3_PATH must name python3 (set by tests/cli/CMakeLists.txt)"
#endif

static char bin_dir[1024];
static char scratch[256];
static char demo[600]; /* a traced flare-demo session */
static char out_text[1 << 18];
static char err_text[1 << 16];

/* Runs flare with arguments (NULL-terminated) in scratch; returns its exit
 * code. When keep is set, its standard output is kept as scratch/keep. */
static int flare(const char *keep, const char *const *arguments)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/flare", bin_dir);
    int code = cli_run_program(path, 0, arguments, scratch, out_text, sizeof(out_text), err_text,
                               sizeof(err_text));
    assert_true(code >= 0);
    if (keep != NULL) {
        char from[600], to[600];
        snprintf(from, sizeof(from), "%s/stdout.txt", scratch);
        snprintf(to, sizeof(to), "%s/%s", scratch, keep);
        assert_int_equal(rename(from, to), 0);
    }
    return code;
}

#define FLARE(keep, ...) flare(keep, (const char *const[]){__VA_ARGS__, NULL})

/* Runs report_check.py with arguments; fails the test with what it
 * printed unless it exits 0. */
static void check(const char *const *arguments)
{
    const char *argv[16] = {REPORT_CHECK_PATH};
    size_t count = 1;
    for (; arguments[count - 1] != NULL && count < 15; count++)
        argv[count] = arguments[count - 1];
    argv[count] = NULL;
    int code = cli_run_program(PYTHON3_PATH, 0, argv, scratch, out_text, sizeof(out_text), err_text,
                               sizeof(err_text));
    if (code != 0)
        fail_msg("report_check.py %s failed (%d):\n%s%s", arguments[0], code, out_text, err_text);
}

#define CHECK(...) check((const char *const[]){__VA_ARGS__, NULL})

/* ---- tests ---- */

/* The JSON against the database and the text report, with the default
 * --top (every demo kernel listed) and with --top 1. */
static void test_json(void **state)
{
    (void)state;
    char database[700];
    snprintf(database, sizeof(database), "%s/session.db", demo);
    assert_int_equal(FLARE("report.txt", "report", demo), 0);
    assert_int_equal(FLARE("report.json", "report", "--format", "json", demo), 0);
    assert_string_equal(err_text, "");
    CHECK("json", "report.json", database, "report.txt", "10", flare_version());

    assert_int_equal(FLARE("top1.txt", "report", "--top", "1", demo), 0);
    assert_int_equal(FLARE("top1.json", "report", "--top", "1", "--format=json", demo), 0);
    CHECK("json", "top1.json", database, "top1.txt", "1", flare_version());
}

/* The CSV holds what the JSON holds, and parses as CSV. */
static void test_csv(void **state)
{
    (void)state;
    assert_int_equal(FLARE("report.json", "report", "-f", "json", demo), 0);
    assert_int_equal(FLARE("report.csv", "report", "-f", "csv", demo), 0);
    assert_string_equal(err_text, "");
    CHECK("csv", "report.csv", "report.json");
    assert_int_equal(FLARE("top1.json", "report", "-f", "json", "--top", "1", demo), 0);
    assert_int_equal(FLARE("top1.csv", "report", "-f", "csv", "--top", "1", demo), 0);
    CHECK("csv", "top1.csv", "top1.json");
}

/* --format text is the report as it always was. */
static void test_text_is_the_default(void **state)
{
    (void)state;
    assert_int_equal(FLARE("default.txt", "report", demo), 0);
    static char first[sizeof(out_text)];
    memcpy(first, out_text, sizeof(first));
    assert_int_equal(FLARE(NULL, "report", "--format", "text", demo), 0);
    assert_string_equal(out_text, first);
    assert_non_null(strstr(out_text, "% GPU"));
}

/* --wide changes only the text's replay sections (the demo has none, so
 * its text is as without it: tests/cli/test_replay_cli.c and the golden
 * files cover the sections); json and csv are raw with or without it. */
static void test_wide(void **state)
{
    (void)state;
    static char plain[sizeof(out_text)];
    assert_int_equal(FLARE(NULL, "report", demo), 0);
    memcpy(plain, out_text, sizeof(plain));
    assert_int_equal(FLARE(NULL, "report", "--wide", demo), 0);
    assert_string_equal(out_text, plain);
    static const char *const formats[] = {"json", "csv"};
    for (size_t format = 0; format < 2; format++) {
        assert_int_equal(FLARE(NULL, "report", "-f", formats[format], demo), 0);
        memcpy(plain, out_text, sizeof(plain));
        assert_int_equal(FLARE(NULL, "report", "--wide", "-f", formats[format], demo), 0);
        assert_string_equal(out_text, plain);
    }
    assert_int_equal(FLARE(NULL, "report", "--help"), 0);
    assert_non_null(strstr(out_text, "--wide"));
}

static void test_usage_errors(void **state)
{
    (void)state;
    assert_int_equal(FLARE(NULL, "report", "--format", "yaml", demo), 2);
    assert_non_null(strstr(err_text, "'yaml'"));
    assert_non_null(strstr(err_text, "text, json, csv"));
    assert_string_equal(out_text, "");
    assert_int_equal(FLARE(NULL, "report", demo, "--format"), 2);
    assert_non_null(strstr(err_text, "--format"));
    assert_int_equal(FLARE(NULL, "report", "--format=", demo), 2);
    assert_int_equal(FLARE(NULL, "report", "--help"), 0);
    assert_non_null(strstr(out_text, "--format"));
}

/* Two tables dropped: both named in errors (and on stderr), exit 1, every
 * other section written, and the document still valid JSON and CSV. */
static void test_damaged_session(void **state)
{
    (void)state;
    char damaged[600], command[1400];
    snprintf(damaged, sizeof(damaged), "%s/damaged", scratch);
    snprintf(command, sizeof(command), "cp -r '%s' '%s'", demo, damaged);
    assert_int_equal(system(command), 0);
    char path[700];
    snprintf(path, sizeof(path), "%s/session.db", damaged);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "DROP TABLE counters; DROP TABLE capabilities;", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    assert_int_equal(FLARE("damaged.json", "report", "--format", "json", damaged), 1);
    assert_non_null(strstr(err_text, "flare report: reading counters:"));
    assert_non_null(strstr(err_text, "flare report: reading capabilities:"));
    CHECK("damaged", "damaged.json", "counters", "capabilities");
    assert_int_equal(FLARE("damaged.csv", "report", "--format", "csv", damaged), 1);
    CHECK("csv", "damaged.csv", "damaged.json");
}

/* A crafted session whose kernel names hold an ESC sequence, a DEL and a
 * C1 control (U+009B, CSI): JSON escapes the ESC, and the terminal filter
 * standard output goes through leaves no raw control byte in any format,
 * only '?' for the DEL and the C1 control. */
static void test_control_characters(void **state)
{
    (void)state;
    char dir[600], error[1024];
    snprintf(dir, sizeof(dir), "%s/hostile", scratch);
    assert_int_equal(mkdir(dir, 0755), 0);
    store *database = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != 0)
        fail_msg("store_open: %s", error);
    store_session_info info = {.command = "x", .start_ns = 1000, .start_unix_ns = 1};
    assert_int_equal(store_session_begin(database, &info), 0);
    static const char *const names[] = {"esc\x1b[31mred", "del\x7f c1\xc2\x9b end"};
    for (size_t i = 0; i < 2; i++) {
        store_kernel_row row = {.pid = 1, .name = names[i], .start_ns = 2000, .end_ns = 3000};
        assert_int_equal(store_put_kernel(database, &row), 0);
    }
    store_close(database);

    for (int format = 0; format < 3; format++) {
        const char *word = format == 0 ? "json" : format == 1 ? "csv" : "text";
        assert_int_equal(FLARE(NULL, "report", "--format", word, dir), 0);
        const unsigned char *bytes = (const unsigned char *)out_text;
        for (size_t at = 0; bytes[at] != '\0'; at++)
            if ((bytes[at] < 0x20 && bytes[at] != '\n' && bytes[at] != '\t') || bytes[at] == 0x7f ||
                (bytes[at] == 0xc2 && bytes[at + 1] >= 0x80 && bytes[at + 1] <= 0x9f))
                fail_msg("%s: raw control byte 0x%02x at %zu", word, bytes[at], at);
        if (format == 0) {
            assert_non_null(strstr(out_text, "\"esc\\u001b[31mred\""));
            assert_non_null(strstr(out_text, "\"del? c1? end\""));
        } else if (format == 1) {
            assert_non_null(strstr(out_text, "kernels,0,name,esc?[31mred\n"));
        }
    }
    assert_int_equal(FLARE("hostile.json", "report", "--format", "json", dir), 0);
    CHECK("escape", "hostile.json", "6573631b5b33316d726564" /* "esc" ESC "[31mred" */);
}

/* ---- values with notes (range replay by PM sampling) ---- */

static replay_record *noted_record(uint64_t id, const char *kernel, uint64_t span_id)
{
    replay_record *record = calloc(1, sizeof *record);
    assert_non_null(record);
    record->launch_id = id;
    record->span_id = span_id;
    snprintf(record->kernel_name, sizeof record->kernel_name, "%s", kernel);
    record->passes_planned = record->passes_run = 2;
    record->begin_ns = 5000 + id * 1000;
    record->end_ns = record->begin_ns + 800;
    snprintf(record->collector, sizeof record->collector, "%s",
             span_id != 0 ? "pm-sampling" : "sim-metrics");
    return record;
}

/* Adds a value; with a note when method is not NULL (bound NAN: none). */
static void noted_value(replay_record *record, const char *metric, double value, const char *method,
                        const char *status, double bound)
{
    uint32_t at = record->metric_count++;
    snprintf(record->metric_names[at], sizeof record->metric_names[at], "%s", metric);
    record->metric_values[at] = value;
    if (method == NULL)
        return;
    replay_value_note *note = &record->metric_notes[at];
    snprintf(note->method, sizeof note->method, "%s", method);
    snprintf(note->status, sizeof note->status, "%s", status);
    note->error_bound = bound;
    note->samples = 7;
    record->has_notes = 1;
}

/* A launch replayed on its own (values without notes) and span "step"
 * measured by PM sampling: a kernel measured, a kernel flagged with an
 * unbounded value and one under the minimum length. */
static void make_noted_session(const char *dir)
{
    char error[1024];
    assert_int_equal(mkdir(dir, 0755), 0);
    store *database = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof error) != 0)
        fail_msg("store_open: %s", error);
    store_session_info info = {.command = "x", .start_ns = 1000, .start_unix_ns = 1};
    assert_int_equal(store_session_begin(database, &info), 0);
    replay_record *records[5];
    records[0] = noted_record(1, "gemm", 0);
    noted_value(records[0], "dram__bytes_read.sum", 1e6, NULL, NULL, NAN);
    records[1] = noted_record(2, "step", 0);
    records[1]->is_span = 1;
    records[1]->span_id = 2;
    records[1]->span_kernels = 3;
    snprintf(records[1]->reason, sizeof records[1]->reason,
             "PM sampling every 20us, 1 configurations: 1 kernels measured, 1 flagged, 0 "
             "uncovered, 0 untimed, 0 failed, 1 under 250us (no value); 64 samples, 0 lost, 0 "
             "missing; 0 metrics not sampled");
    const char *const kernels[] = {"gemm", "softmax", "tiny"};
    for (int kernel = 0; kernel < 3; kernel++) {
        replay_record *record = noted_record(3 + (uint64_t)kernel, kernels[kernel], 2);
        records[2 + kernel] = record;
        noted_value(record, "gpu__time_duration.sum", 400000.0 / (kernel + 1), "kernel-activity",
                    "measured", 1000);
        if (kernel == 0)
            noted_value(record, "dram__bytes_read.sum", 348050000, "pm-sampling", "measured",
                        7300000);
        else if (kernel == 1)
            noted_value(record, "dram__bytes_read.sum", 1.2e8, "pm-sampling", "flagged", INFINITY);
        else
            noted_value(record, "dram__bytes_read.sum", NAN, "pm-sampling", "below-minimum", NAN);
    }
    assert_int_equal(replay_records_store(database, 77, records, 5), 0);
    for (int i = 0; i < 5; i++)
        free(records[i]);
    store_close(database);
}

/* The text shows each value's bound and status and the span's method; the
 * JSON and CSV have method, status and error_bound on every replay_metrics
 * row, as v_replay_values has them. A session without the table (as
 * before schema 16) reads as it always did. */
static void test_replay_value_notes(void **state)
{
    (void)state;
    char dir[600], database[700];
    snprintf(dir, sizeof dir, "%s/noted", scratch);
    snprintf(database, sizeof database, "%s/session.db", dir);
    make_noted_session(dir);

    assert_int_equal(FLARE(NULL, "report", dir), 0);
    assert_non_null(strstr(out_text, "    measured by PM sampling every 20us: values \u00b1 their "
                                     "error bound; kernels under 250us have none; GPU time from "
                                     "the kernels' own times\n"));
    assert_non_null(strstr(out_text, "348.1 MB \u00b12.1%"));
    assert_non_null(strstr(out_text, "120.0 MB \u00b1inf flagged"));
    assert_non_null(strstr(out_text, "\u2014 below-minimum"));
    assert_non_null(strstr(out_text, "400.0 us \u00b10.2%"));
    /* Kernel replay's launch has no note: its value as before. */
    const char *own = strstr(out_text, "    DRAM read ");
    assert_non_null(own);
    assert_true(strncmp(own + strcspn(own, "1"), "1.0 MB\n", 7) == 0);
    assert_int_equal(FLARE(NULL, "report", "--wide", dir), 0);
    assert_non_null(strstr(out_text, "348050000 \u00b17300000"));

    assert_int_equal(FLARE("noted.json", "report", "-f", "json", dir), 0);
    assert_string_equal(err_text, "");
    CHECK("values", "noted.json", database, "1");
    assert_int_equal(FLARE("noted.csv", "report", "-f", "csv", dir), 0);
    CHECK("csv", "noted.csv", "noted.json");

    /* Without the table: no notes anywhere, no error. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(database, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "DROP VIEW v_replay_values; DROP TABLE replay_value_methods;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(FLARE(NULL, "report", dir), 0);
    assert_null(strstr(out_text, "\u00b1"));
    assert_null(strstr(out_text, "below-minimum"));
    assert_non_null(strstr(out_text, "348.1 MB"));
    assert_int_equal(FLARE("old.json", "report", "-f", "json", dir), 0);
    assert_string_equal(err_text, "");
    CHECK("values", "old.json", database, "0");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "report");
    char program[1200];
    snprintf(demo, sizeof(demo), "%s/demo", scratch);
    snprintf(program, sizeof(program), "%s/flare-demo", bin_dir);
    if (FLARE(NULL, "trace", "-q", "-o", demo, "--", program, "4") != 0) {
        fprintf(stderr, "flare trace flare-demo failed: %s\n", err_text);
        return -1;
    }
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
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_text_is_the_default),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_damaged_session),
        cmocka_unit_test(test_control_characters),
        cmocka_unit_test(test_replay_value_notes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
