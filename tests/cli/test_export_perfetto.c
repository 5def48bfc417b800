/*
 * test_export_perfetto.c: the complete Perfetto trace of `flare export
 * --format perfetto`, checked by tests/cli/perfetto_check.py (a validator
 * of the trace-event format: phases, nesting, flows paired, tracks named
 * and sorted, counters numeric, and, against the session's database, one
 * arrow per API call and GPU work that followed it).
 *
 * Sessions: one crafted through the store API with every table the trace
 * draws and known answers (API calls with and without GPU work, work that
 * began before its call, a copy in two chunks; PM samples over two windows
 * with a hole, flagged samples and a window left without its row; rule,
 * manual and refused windows; storms, one still open; replayed launches
 * matched to kernels, one with no kernel, one in a process that had a
 * storm; a span); sessions recorded on the simulated device (flare-demo
 * under flare trace; a deep window with the simulated PM engine; a launch
 * storm forced with FLARE_STORM_RATE; flare replay of a kernel and of a
 * range); a session still being written and one cut short by SIGKILL. And
 * the command's own cases: gzip (by name and by --gzip, also to standard
 * output), an unwritable -o, an unknown format. Runs the built binaries
 * (FLARE_TEST_BIN_DIR) in child processes; needs python3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "backend/sim/sim_pm.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_session.h"
#include "flare/flare.h"
#include "flare/sim.h"
#include "storm/storm_completions.h"
#include "store/store.h"
#include "store/store_pm.h"
#include "store/store_replay.h"
#include "cli_run.h"
#include "test_util.h"

#ifndef PYTHON3_PATH
#error "PYTHON3_PATH and PERFETTO_CHECK_PATH are set by tests/cli/CMakeLists.txt"
#endif

static char bin_dir[1024];
static char scratch[256];
static char crafted_dir[512];
static char out_text[1 << 16];
static char err_text[1 << 16];

#define ORIGIN      1000000000000ull
#define PID         7001
#define STORM_PID   7003
#define MS          1000000ull
#define BIG_OUTLIER 1.0e12 /* a flagged PM sample's value: never drawn */

/* ---- running things ---- */

static int run_flare(const char *const *arguments)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/flare", bin_dir);
    int status = cli_run_program(path, 0, arguments, scratch, out_text, sizeof out_text, err_text,
                                 sizeof err_text);
    assert_true(status >= 0);
    return status;
}

#define FLARE(...) run_flare((const char *const[]){__VA_ARGS__, NULL})

static void expect_contains(const char *text, const char *part)
{
    if (strstr(text, part) == NULL)
        fail_msg("'%s' not found in:\n%.4000s", part, text);
}

/* Runs perfetto_check.py on scratch/trace with the NULL-terminated options
 * (--gz, --db, --expect ...); fails with its message unless it passes. */
static void check_trace(const char *trace, const char *const *options)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", scratch, trace);
    const char *arguments[16] = {PERFETTO_CHECK_PATH, path};
    int count = 2;
    for (; options != NULL && options[count - 2] != NULL && count < 15; count++)
        arguments[count] = options[count - 2];
    arguments[count] = NULL;
    static char out[1 << 14], err[1 << 14];
    int status =
        cli_run_program(PYTHON3_PATH, 0, arguments, scratch, out, sizeof out, err, sizeof err);
    if (status != 0)
        fail_msg("perfetto_check.py %s failed (%d):\n%s%s", trace, status, out, err);
}

#define CHECK_TRACE(trace, ...) check_trace(trace, (const char *const[]){__VA_ARGS__, NULL})

/* scratch/name read whole (NUL-terminated; the caller frees), or NULL. */
static char *read_scratch(const char *name, size_t *length)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return NULL;
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *bytes = malloc((size_t)size + 1);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)size, file), (size_t)size);
    fclose(file);
    bytes[size] = '\0';
    if (length != NULL)
        *length = (size_t)size;
    return bytes;
}

/* The line of text holding every one of the NULL-terminated parts, or
 * fails naming the first part. */
static void expect_line_with(const char *text, const char *const *parts)
{
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        int all = 1;
        for (size_t i = 0; parts[i] != NULL && all; i++) {
            const char *found = strstr(line, parts[i]);
            all = found != NULL && (size_t)(found - line) < length;
        }
        if (all)
            return;
        line = end != NULL ? end + 1 : NULL;
    }
    fail_msg("no line of the trace holds all of '%s', '%s'...", parts[0],
             parts[1] != NULL ? parts[1] : "");
}

#define EXPECT_LINE(text, ...) expect_line_with(text, (const char *const[]){__VA_ARGS__, NULL})

/* Whether a temporary file of an export (NAME.tmp-XXXXXX) is left in dir. */
static int temporary_left(const char *dir)
{
    DIR *listing = opendir(dir);
    if (listing == NULL)
        return 0;
    int found = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        found |= strstr(entry->d_name, ".tmp-") != NULL;
    closedir(listing);
    return found;
}

/* ---- the crafted session ---- */

static store *open_store(const char *dir)
{
    char error[1024];
    store *database = NULL;
    assert_int_equal(mkdir(dir, 0755), 0);
    if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof error) != 0)
        fail_msg("store_open %s: %s", dir, error);
    return database;
}

static void put_call(store *database, int64_t pid, int64_t thread, uint64_t correlation,
                     const char *name, uint64_t start)
{
    store_api_call_row row = {pid, thread, correlation, name, ORIGIN + start, ORIGIN + start + 40};
    assert_int_equal(store_put_api_call(database, &row), 0);
}

static void put_kernel(store *database, int64_t pid, uint64_t correlation, const char *name,
                       uint64_t start)
{
    store_kernel_row row = {
        .pid = pid,
        .device = 0,
        .stream_id = 7,
        .correlation_id = correlation,
        .name = name,
        .start_ns = ORIGIN + start,
        .end_ns = ORIGIN + start + 50,
        .grid = {4, 1, 1},
        .block = {128, 1, 1},
        .registers_per_thread = 24,
        .shared_memory_bytes = 512,
    };
    assert_int_equal(store_put_kernel(database, &row), 0);
}

static void put_copy(store *database, uint64_t correlation, int is_memset, uint64_t start)
{
    store_copy_row row = {PID,
                          0,
                          8,
                          correlation,
                          is_memset,
                          is_memset ? 0 : 1,
                          1 << 20,
                          ORIGIN + start,
                          ORIGIN + start + 64,
                          0,
                          0,
                          0};
    assert_int_equal(store_put_copy(database, &row), 0);
}

/* Two metrics per sample; value NAN is stored as NULL. */
static void put_pm(store *database, uint64_t window, uint64_t index, uint64_t start, uint32_t flags,
                   double value)
{
    const char *metrics[] = {"dram__bytes_read.sum", "sm__busy.pct"};
    for (int m = 0; m < 2; m++) {
        store_pm_row row = {
            .pid = PID,
            .window_id = window,
            .device = 0,
            .sample_index = index,
            .start_ns = ORIGIN + start,
            .end_ns = ORIGIN + start + 100,
            .flags = flags,
            .metric = metrics[m],
            .value = m == 0 ? value : (isnan(value) ? value : 50.0),
        };
        assert_int_equal(store_put_pm_samples(database, &row, 1), 0);
    }
}

static void put_windows(store *database)
{
    store_window_row rule = {
        .pid = PID,
        .id = 1,
        .token_kind = "rule",
        .label = "slow launches",
        .has_cause = 1,
        .rule_id = 1,
        .rule_text = "kernel_launch_rate < 500/s for 2s",
        .comparison = "<",
        .threshold = 500,
        .rate_window_ns = 100 * MS,
        .sustained_ns = 2000 * MS,
        .first_true_ns = ORIGIN + 1000,
        .observed_value = 120.5,
        .max_duration_ns = 1000,
        .requested_ns = ORIGIN + 1900,
        .opened_ns = ORIGIN + 2000,
        .closed_ns = ORIGIN + 3000,
        .close_reason = "duration",
        .launches = 3,
        .engine = "sim-pm",
        .engine_status = "disarmed",
        .engine_reason = "",
        .engine_samples = 8,
    };
    assert_int_equal(store_put_window(database, &rule), 0);
    store_window_row manual = rule;
    manual.id = 2;
    manual.token_kind = "manual";
    manual.label = "my \"label\"";
    manual.has_cause = 0;
    manual.rule_text = NULL;
    manual.comparison = NULL;
    manual.requested_ns = ORIGIN + 4000;
    manual.opened_ns = ORIGIN + 4000;
    manual.closed_ns = ORIGIN + 4500;
    manual.close_reason = "manual";
    assert_int_equal(store_put_window(database, &manual), 0);
    store_window_row refused = manual;
    refused.id = 3;
    refused.token_kind = "scheduled";
    refused.label = "deep-after 5us for 1us";
    refused.requested_ns = ORIGIN + 4900;
    refused.opened_ns = 0;
    refused.closed_ns = ORIGIN + 5000;
    refused.close_reason = "refused";
    refused.engine_status = "refused";
    refused.engine_reason = "PM sampling busy, held by context 7 on device 0";
    assert_int_equal(store_put_window(database, &refused), 0);
}

/* A replay record with one metric (launches) or none (spans). */
typedef struct crafted_record {
    store_replay_record row;
    const char *names[1];
    double values[1];
} crafted_record;

static void put_replay(store *database, int64_t pid, uint64_t launch_id, uint64_t span_id,
                       int is_span, const char *name, uint64_t index, uint64_t begin)
{
    crafted_record record = {
        .row =
            {
                .is_span = is_span,
                .launch_id = launch_id,
                .span_id = span_id,
                .device = 0,
                .stream_id = 7,
                .name = name,
                .launch_index = index,
                .span_kernels = is_span ? 1 : 0,
                .passes_planned = 2,
                .passes_run = 2,
                .reason = "",
                .begin_ns = ORIGIN + begin,
                .end_ns = ORIGIN + begin + 300,
                .collector = "sim-metrics",
            },
        .names = {"gpu__time_duration.sum"},
        .values = {4242.5},
    };
    if (!is_span) {
        record.row.metric_count = 1;
        record.row.metric_names = record.names;
        record.row.metric_values = record.values;
    }
    const store_replay_record *rows[] = {&record.row};
    assert_int_equal(store_write_replay_records(database, pid, rows, 1), 0);
}

static void make_crafted_session(void)
{
    snprintf(crafted_dir, sizeof crafted_dir, "%s/crafted", scratch);
    store *database = open_store(crafted_dir);
    store_session_info info = {"crafted [session] for the trace", ORIGIN, 1700000000000000000ll,
                               "test-host", "0.1.0"};
    assert_int_equal(store_session_begin(database, &info), 0);
    assert_int_equal(store_process_begin(database, PID, 1, ORIGIN, "sim", "/bin/train"), 0);
    assert_int_equal(store_process_begin(database, STORM_PID, 1, ORIGIN, "sim", "/bin/storm"), 0);
    assert_int_equal(store_put_device(database, PID, 0, "sim GPU", "sim"), 0);

    /* Calls and their work: c1..c3 before it; c3's copy in two chunks; c4's
     * kernel began before the call (no arrow); c5 on another thread; c6
     * without work. Kernels of "gemm": correlation 1, 2, 4, 7, in order. */
    put_call(database, PID, PID, 1, "cuLaunchKernel", 100);
    put_call(database, PID, PID, 2, "cuLaunchKernel", 300);
    put_call(database, PID, PID, 3, "cuMemcpyHtoDAsync", 500);
    put_call(database, PID, PID, 4, "cuLaunchKernel", 900);
    put_call(database, PID, PID + 1, 5, "cuMemsetD8Async", 1000);
    put_call(database, PID, PID, 6, "cuLaunchKernel", 1200);
    put_kernel(database, PID, 1, "gemm", 200);
    put_kernel(database, PID, 2, "gemm", 400);
    put_copy(database, 3, 0, 600);
    put_copy(database, 3, 0, 700);
    put_kernel(database, PID, 4, "gemm", 850);
    put_copy(database, 5, 1, 1100);
    put_kernel(database, PID, 7, "gemm", 1300);
    put_kernel(database, STORM_PID, 1, "gemm", 1400);

    store_scope_row scope = {PID, PID, 1, "step", 0, ORIGIN + 50, ORIGIN + 1500, 0};
    assert_int_equal(store_put_scope(database, &scope), 0);
    store_scope_row open_scope = {PID, PID + 1, 2, "left open", 0, ORIGIN + 60, ORIGIN + 9000, 1};
    assert_int_equal(store_put_scope(database, &open_scope), 0);

    put_windows(database);
    /* Window 1: a flagged first sample (8: its value is not the window's),
     * four good ones, a hole, the first after it (flag 2), one more, one
     * without a value. Window 9 has samples but no row: still open when the
     * process ended. */
    put_pm(database, 1, 0, 2000, 8, BIG_OUTLIER);
    for (uint64_t i = 1; i <= 4; i++)
        put_pm(database, 1, i, 2000 + 100 * i, 0, 1000.0 * (double)i);
    put_pm(database, 1, 5, 2700, 2, 7777.0);
    put_pm(database, 1, 6, 2800, 1, 6000.0);
    put_pm(database, 1, 7, 2900, 0, NAN);
    for (uint64_t i = 0; i < 3; i++)
        put_pm(database, 9, i, 6000 + 100 * i, 0, 300.0 + (double)i);

    store_storm_row storms[] = {
        {STORM_PID, -1, ORIGIN + 100, ORIGIN + 800, 5000, 0},
        {STORM_PID, 0, ORIGIN + 900, ORIGIN + 9000, 1200, 1},
    };
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(store_put_storm(database, &storms[i]), 0);

    assert_int_equal(store_put_counter(database, PID, 0, "batches"), 0);
    assert_int_equal(store_put_counter_sample(database, PID, 0, ORIGIN + 100, 1), 0);
    assert_int_equal(store_put_counter_sample(database, PID, 0, ORIGIN + 900, 4), 0);
    store_metric_row metric = {PID, 0, "power_mw", ORIGIN + 300, 250000};
    assert_int_equal(store_put_metric(database, &metric), 0);

    /* Launch 10: gemm's second launch (correlation 2). Launch 11: its sixth,
     * which has no kernel row. Span 20's kernel 21: gemm's first launch
     * (correlation 1). Launch 30: in the process that had a storm. */
    put_replay(database, PID, 10, 0, 0, "gemm", 1, 3100);
    put_replay(database, PID, 11, 0, 0, "gemm", 5, 3500);
    put_replay(database, PID, 20, 0, 1, "step", 1, 3900);
    put_replay(database, PID, 21, 20, 0, "gemm", 0, 3900);
    put_replay(database, STORM_PID, 30, 0, 0, "gemm", 0, 3100);

    assert_int_equal(store_session_end(database, ORIGIN + 9000, 1, 0), 0);
    store_close(database);
}

static void test_crafted_trace(void **state)
{
    (void)state;
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "crafted.json"), 0);
    assert_string_equal(err_text, "");
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "crafted.json.gz"), 0);
    CHECK_TRACE("crafted.json", "--gz", "crafted.json.gz", "--db", "crafted/session.db", "--expect",
                "calls,flows,pm,counters,windows,rules,storms,replay,unrecorded-window,still-open");
    char *trace = read_scratch("crafted.json", NULL);
    assert_non_null(trace);
    /* Five arrows (c1, c2, both chunks of c3, c5); c4's kernel began first. */
    expect_contains(trace, "\"flows\":5,\"flows_left_out\":1");
    EXPECT_LINE(trace, "\"ph\":\"X\",\"cat\":\"cuda_driver\"", "\"name\":\"cuMemcpyHtoDAsync\"",
                "\"args\":{\"correlation\":3}");
    EXPECT_LINE(trace, "\"ph\":\"s\"", "\"cat\":\"ac2g\"");
    EXPECT_LINE(trace, "\"ph\":\"f\"", "\"bp\":\"e\"");
    /* Replay results on the matched kernels' slices. */
    EXPECT_LINE(trace, "\"cat\":\"kernel\"", "\"correlation\":2,", "\"replay\":{\"launch_id\":10,",
                "\"gpu__time_duration.sum\":4242.5");
    EXPECT_LINE(trace, "\"cat\":\"kernel\"", "\"correlation\":1,", "\"replay\":{\"launch_id\":21,",
                "\"span_id\":20");
    /* Not matched: a slice of their own, saying why. */
    EXPECT_LINE(trace, "\"name\":\"replay: gemm (launch 6)\"", "no kernel row is this launch's");
    EXPECT_LINE(trace, "\"pid\":7003", "\"name\":\"replay: gemm (launch 1)\"",
                "unavailable: a launch storm in this process");
    EXPECT_LINE(trace, "\"name\":\"range replay: step #1\"", "\"kernels_on_their_slices\":1");
    /* Windows by what opened them, the rule's firing, the unrecorded one. */
    EXPECT_LINE(trace, "\"ph\":\"X\"", "\"name\":\"rule: kernel_launch_rate < 500/s for 2s\"",
                "\"close_reason\":\"duration\"", "\"engine\":\"sim-pm\"");
    EXPECT_LINE(trace, "\"ph\":\"i\"", "\"name\":\"rule fired: kernel_launch_rate < 500/s for 2s\"",
                "\"observed_value\":120.5");
    EXPECT_LINE(trace, "\"name\":\"flare_window_open: my \\\"label\\\"\"");
    EXPECT_LINE(trace, "\"ph\":\"i\"", "\"name\":\"schedule: deep-after 5us for 1us (refused)\"");
    EXPECT_LINE(trace, "\"name\":\"window 9 (still open when the process ended)\"",
                "\"still_open\":true");
    EXPECT_LINE(trace, "\"name\":\"launch storm (still on at the end)\"", "\"device\":0",
                "\"untimed_launches\":1200");
    EXPECT_LINE(trace, "\"name\":\"flare launch storms (GPU 0)\"");
    /* PM: the flagged samples' values are never drawn; each run ends at 0. */
    assert_null(strstr(trace, "\"value\":1000000000000}"));
    assert_null(strstr(trace, "\"value\":7777}"));
    EXPECT_LINE(trace, "\"name\":\"pm dram__bytes_read.sum\"", "\"ts\":2.500,",
                "\"args\":{\"value\":0}");
    EXPECT_LINE(trace, "\"name\":\"pm dram__bytes_read.sum\"", "\"ts\":2.900,",
                "\"args\":{\"value\":0}");
    EXPECT_LINE(trace, "\"name\":\"counter batches\"", "\"args\":{\"value\":4}");
    /* Kineto's names. */
    EXPECT_LINE(trace, "\"cat\":\"gpu_memcpy\"", "\"memory bandwidth (GB/s)\":");
    EXPECT_LINE(trace, "\"cat\":\"gpu_memset\"", "\"correlation\":5");
    EXPECT_LINE(trace, "\"registers per thread\":24", "\"shared memory\":512");
    EXPECT_LINE(trace, "\"name\":\"process_sort_index\"", "\"pid\":7001");
    EXPECT_LINE(trace, "\"name\":\"thread_sort_index\"", "\"sort_index\":-1");
    free(trace);
}

/* ---- gzip, bad output, bad format ---- */

/* The gzip file scratch/name decompressed (the caller frees). */
static char *gunzip_scratch(const char *name, size_t *length)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    gzFile file = gzopen(path, "rb");
    assert_non_null(file);
    size_t size = 1 << 16, used = 0;
    char *bytes = malloc(size);
    assert_non_null(bytes);
    int got;
    while ((got = gzread(file, bytes + used, (unsigned)(size - used))) > 0) {
        used += (size_t)got;
        if (used == size) {
            size *= 2;
            bytes = realloc(bytes, size);
            assert_non_null(bytes);
        }
    }
    assert_true(got == 0);
    assert_int_equal(gzclose(file), Z_OK);
    *length = used;
    return bytes;
}

static void expect_gzip_of(const char *gz, const char *plain_name)
{
    size_t gz_length, plain_length, raw_length;
    char *raw = read_scratch(gz, &raw_length);
    assert_non_null(raw);
    assert_true(raw_length > 18);
    assert_int_equal((unsigned char)raw[0], 0x1f);
    assert_int_equal((unsigned char)raw[1], 0x8b);
    free(raw);
    char *unpacked = gunzip_scratch(gz, &gz_length);
    char *plain = read_scratch(plain_name, &plain_length);
    assert_non_null(plain);
    assert_int_equal(gz_length, plain_length);
    assert_memory_equal(unpacked, plain, plain_length);
    free(unpacked);
    free(plain);
}

static void test_gzip(void **state)
{
    (void)state;
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "plain.json"), 0);
    /* By name. */
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "named.json.gz"), 0);
    expect_gzip_of("named.json.gz", "plain.json");
    /* By --gzip, whatever the name, and to standard output. */
    assert_int_equal(FLARE("export", "crafted", "--gzip", "-f", "perfetto", "-o", "forced.json"),
                     0);
    expect_gzip_of("forced.json", "plain.json");
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-z"), 0);
    expect_gzip_of("stdout.txt", "plain.json");
    /* Other formats too. */
    assert_int_equal(FLARE("export", "crafted", "-f", "csv", "-o", "plain.csv"), 0);
    assert_int_equal(FLARE("export", "crafted", "-f", "csv", "-o", "kernels.csv.gz"), 0);
    expect_gzip_of("kernels.csv.gz", "plain.csv");
    assert_false(temporary_left(scratch));
}

static void test_unwritable_output(void **state)
{
    (void)state;
    /* A directory that does not exist; a file where the directory should
     * be; a place no one can create files in (root included). */
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "no/such/t.json.gz"), 1);
    expect_contains(err_text, "flare export: cannot write no/such/t.json.gz: directory no/such "
                              "does not exist");
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "plain.json/t.json"), 1);
    expect_contains(err_text, "plain.json is not a directory");
    assert_int_equal(FLARE("export", "crafted", "-f", "perfetto", "-o", "/proc/flare-t.json"), 1);
    expect_contains(err_text, "flare export: cannot create a temporary file beside "
                              "/proc/flare-t.json: ");
    assert_int_equal(access("/proc/flare-t.json", F_OK), -1);
    assert_string_equal(out_text, "");
    assert_false(temporary_left(scratch));
}

static void test_unknown_format(void **state)
{
    (void)state;
    assert_int_equal(FLARE("export", "crafted", "-f", "pftrace", "-o", "never.json"), 2);
    expect_contains(err_text, "flare export: unknown format 'pftrace' (formats: perfetto, csv, "
                              "json)");
    expect_contains(err_text, "Run 'flare export --help' for usage.");
    assert_string_equal(out_text, "");
    char path[600];
    snprintf(path, sizeof path, "%s/never.json", scratch);
    assert_int_equal(access(path, F_OK), -1);
}

/* ---- sessions recorded on the simulated device ---- */

static void test_traced_demo(void **state)
{
    (void)state;
    char demo[1200];
    snprintf(demo, sizeof demo, "%s/flare-demo", bin_dir);
    assert_int_equal(FLARE("trace", "-q", "-o", "demo", "--", demo, "3"), 0);
    assert_int_equal(FLARE("export", "demo", "-f", "perfetto", "-o", "demo.json"), 0);
    assert_int_equal(FLARE("export", "demo", "-f", "perfetto", "-o", "demo.json.gz"), 0);
    CHECK_TRACE("demo.json", "--gz", "demo.json.gz", "--db", "demo/session.db", "--expect",
                "calls,flows,counters");
}

static void noop_kernel(const flare_sim_launch *launch)
{
    (void)launch;
}

static void start_session(const char *name, char *dir, size_t size)
{
    snprintf(dir, size, "%s/%s", scratch, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 10;
    assert_int_equal(flare_init(&options), FLARE_OK);
}

static void run_step(flare_sim_stream *stream, int kernel, flare_counter *steps)
{
    const uint32_t grid[3] = {8, 1, 1}, block[3] = {128, 1, 1};
    flare_scope_begin("step");
    for (int launch = 0; launch < 3; launch++)
        assert_int_equal(flare_sim_launch_kernel(stream, kernel, grid, block, NULL, 0), FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, 30000), FLARE_OK);
    flare_counter_add(steps, 1);
    test_pause_ms(1);
    flare_scope_end();
}

static void window_wait(int status, deepwin_state state)
{
    if (status == FLARE_ERR_TIMEOUT)
        TEST_WAIT_UNTIL(deepwin_current_state(deepwin_session_coordinator()) == state);
    else
        assert_int_equal(status, FLARE_OK);
}

/* A deep window over some steps, with the simulated PM engine. */
static void test_pm_window_session(void **state)
{
    (void)state;
    char dir[600];
    deepwin_session_set_engine(sim_pm_engine());
    start_session("pm", dir, sizeof dir);
    int kernel;
    assert_int_equal(flare_sim_kernel_register("pm_kernel", noop_kernel, &kernel), FLARE_OK);
    flare_sim_stream *stream;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    flare_counter *steps;
    assert_int_equal(flare_counter_get("test.steps", &steps), FLARE_OK);
    for (int step = 0; step < 2; step++)
        run_step(stream, kernel, steps);
    flare_window_options window;
    flare_window_options_init(&window);
    window.label = "perfetto test";
    window.max_duration_ms = 600000; /* closed by the test */
    window_wait(flare_window_open(&window), DEEPWIN_OPEN);
    uint64_t deadline = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;
    for (int step = 0; step < 3 || sim_pm_samples_taken() < 30; step++) {
        if (test_now_ns() > deadline)
            fail_msg("the simulated PM hardware took %llu samples",
                     (unsigned long long)sim_pm_samples_taken());
        run_step(stream, kernel, steps);
    }
    window_wait(flare_window_close(), DEEPWIN_IDLE);
    run_step(stream, kernel, steps);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    deepwin_session_set_engine(NULL);
    sim_pm_reset();

    assert_int_equal(FLARE("export", "pm", "-f", "perfetto", "-o", "pm.json"), 0);
    CHECK_TRACE("pm.json", "--db", "pm/session.db", "--expect", "calls,flows,pm,windows,counters");
    char *trace = read_scratch("pm.json", NULL);
    EXPECT_LINE(trace, "\"cat\":\"flare_window\"", "\"name\":\"flare_window_open: perfetto test\"",
                "\"close_reason\":\"manual\"");
    free(trace);
}

/* Launches in bursts on one thread until told to stop: a few 10,000 a
 * second, a storm for a guard at 2000/s. */
typedef struct launcher {
    pthread_t thread;
    int kernel;
    atomic_bool stop;
    int failed;
} launcher;

static void *launch_until_stopped(void *argument)
{
    launcher *self = argument;
    flare_sim_stream *stream = NULL;
    if (flare_sim_stream_create(0, &stream) != FLARE_OK) {
        self->failed = 1;
        return NULL;
    }
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    for (uint64_t launched = 1; !atomic_load(&self->stop); launched++) {
        if (flare_sim_launch_kernel(stream, self->kernel, grid, block, NULL, 0) != FLARE_OK) {
            self->failed = 1;
            break;
        }
        if (launched % 20 == 0)
            test_pause_ms(1);
    }
    if (flare_sim_stream_destroy(stream) != FLARE_OK)
        self->failed = 1;
    return NULL;
}

static void test_storm_session(void **state)
{
    (void)state;
    char dir[600];
    setenv("FLARE_STORM_RATE", "2000/s", 1);
    start_session("storm", dir, sizeof dir);
    launcher storm = {0};
    assert_int_equal(flare_sim_kernel_register("storm_kernel", noop_kernel, &storm.kernel),
                     FLARE_OK);
    assert_int_equal(pthread_create(&storm.thread, NULL, launch_until_stopped, &storm), 0);
    TEST_WAIT_UNTIL(storm_completions_in_storm());
    test_pause_ms(100);
    atomic_store(&storm.stop, true);
    pthread_join(storm.thread, NULL);
    assert_false(storm.failed);
    /* Calm: the guard ends the storm (or the session ends inside it). */
    test_pause_ms(200);
    assert_int_equal(flare_sim_device_synchronize(0, 10000), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_STORM_RATE");

    assert_int_equal(FLARE("export", "storm", "-f", "perfetto", "-o", "storm.json.gz"), 0);
    assert_int_equal(FLARE("export", "storm", "-f", "perfetto", "-o", "storm.json"), 0);
    CHECK_TRACE("storm.json", "--gz", "storm.json.gz", "--db", "storm/session.db", "--expect",
                "calls,flows,storms");
}

/* The first column of the first row of sql on dir/session.db. */
static int64_t query_session(const char *dir, const char *sql)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s/session.db", scratch, dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &statement, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int64_t value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

/*
 * flare replay of every other launch of a kernel with a set of several
 * passes, and of a range, on the simulated device. Each pass after the
 * first is recorded as a kernel of its own: the match must skip them (the
 * second replayed launch is the kernel that the program's fourth launch
 * call made, found here through api_calls, which the re-runs lack), and
 * they are marked replay_rerun.
 */
static void test_replay_sessions(void **state)
{
    (void)state;
    assert_int_equal(FLARE("replay", "-o", "replayed", "-q", "--kernel", "^rmw_add$", "--every",
                           "2", "--set", "speed-of-light", "--", REPLAY_TARGET_PATH, "4"),
                     0);
    assert_int_equal(FLARE("export", "replayed", "-f", "perfetto", "-o", "replayed.json"), 0);
    CHECK_TRACE("replayed.json", "--db", "replayed/session.db", "--expect", "calls,flows,replay");
    assert_true(query_session("replayed", "SELECT count(*) FROM replay_launches WHERE passes_run "
                                          "> 1 AND NOT declined") == 2);
    int64_t fourth = query_session(
        "replayed", "SELECT k.correlation_id FROM kernels k JOIN names n ON n.id = k.name_id"
                    " JOIN api_calls a ON a.pid = k.pid AND a.correlation_id = k.correlation_id"
                    " WHERE n.name = 'rmw_add' ORDER BY k.correlation_id LIMIT 1 OFFSET 3");
    char correlation[64];
    snprintf(correlation, sizeof correlation, "\"correlation\":%lld,", (long long)fourth);
    char *trace = read_scratch("replayed.json", NULL);
    EXPECT_LINE(trace, "\"cat\":\"kernel\"", correlation,
                "\"replay\":{\"launch_id\":2,\"kernel\":\"rmw_add\",\"launch_index\":3,",
                "\"metrics\":{");
    EXPECT_LINE(trace, "\"cat\":\"kernel\"", "\"name\":\"rmw_add\"", "\"replay_rerun\":true");
    assert_null(strstr(trace, "\"cat\":\"flare_replay\""));
    free(trace);

    assert_int_equal(FLARE("replay", "-o", "ranged", "-q", "--range", "step", "--occurrence", "2",
                           "--set", "time", "--", RANGE_TARGET_PATH),
                     0);
    assert_int_equal(FLARE("export", "ranged", "-f", "perfetto", "-o", "ranged.json"), 0);
    CHECK_TRACE("ranged.json", "--db", "ranged/session.db", "--expect", "calls,replay");
    trace = read_scratch("ranged.json", NULL);
    EXPECT_LINE(trace, "\"cat\":\"flare_replay\"", "\"name\":\"range replay: step #2\"",
                "\"kernels_on_their_slices\":2}");
    EXPECT_LINE(trace, "\"cat\":\"kernel\"", "\"replay\":{\"launch_id\":", "\"span_id\":");
    free(trace);
}

/* ---- sessions without an end ---- */

/* A session of this very process, open while it is exported. */
static void test_session_still_being_written(void **state)
{
    (void)state;
    char dir[600];
    start_session("live", dir, sizeof dir);
    int kernel;
    assert_int_equal(flare_sim_kernel_register("live_kernel", noop_kernel, &kernel), FLARE_OK);
    flare_sim_stream *stream;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    flare_counter *steps;
    assert_int_equal(flare_counter_get("live.steps", &steps), FLARE_OK);
    for (int step = 0; step < 3; step++)
        run_step(stream, kernel, steps);
    test_pause_ms(100); /* several commits */
    int code = FLARE("export", "live", "-f", "perfetto", "-o", "live.json");
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(code, 0);
    char note[200];
    snprintf(note, sizeof note,
             "flare export: note: live is still being written (process %d runs): exporting what "
             "it had committed when the export began\n",
             (int)getpid());
    assert_string_equal(err_text, note);
    CHECK_TRACE("live.json", "--expect", "calls,flows");
}

/* Whether the live session in dir has committed what the cut-short trace is
 * checked for: a kernel with its launching API call (a flow) and PM samples. */
static int flows_and_samples_committed(const char *dir)
{
    char path[700];
    snprintf(path, sizeof path, "%s/session.db", dir);
    sqlite3 *db = NULL;
    int committed = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 1000);
        sqlite3_stmt *statement = NULL;
        if (sqlite3_prepare_v2(db,
                               "SELECT (SELECT COUNT(*) FROM kernels k JOIN api_calls a"
                               " ON a.pid = k.pid AND a.correlation_id = k.correlation_id),"
                               " (SELECT COUNT(*) FROM pm_samples)",
                               -1, &statement, NULL) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW)
            committed =
                sqlite3_column_int(statement, 0) > 0 && sqlite3_column_int(statement, 1) > 0;
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return committed;
}

/* A process killed (SIGKILL) inside a scope and a deep window, after its
 * samples were committed. */
static void test_session_cut_short(void **state)
{
    (void)state;
    char dir[600];
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        deepwin_session_set_engine(sim_pm_engine());
        start_session("killed", dir, sizeof dir);
        int kernel;
        flare_sim_stream *stream;
        flare_counter *steps;
        if (flare_sim_kernel_register("k", noop_kernel, &kernel) != FLARE_OK ||
            flare_sim_stream_create(0, &stream) != FLARE_OK ||
            flare_counter_get("killed.steps", &steps) != FLARE_OK)
            _exit(3);
        flare_scope_begin("never closed");
        flare_window_options window;
        flare_window_options_init(&window);
        window.label = "cut short";
        window.max_duration_ms = 600000;
        flare_window_open(&window);
        uint64_t deadline = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;
        for (int step = 0; step < 3 || (sim_pm_samples_taken() < 30 && test_now_ns() < deadline);
             step++)
            run_step(stream, kernel, steps);
        /* Killed once its flows and samples are committed (a fixed pause
         * was too short under TSan on a loaded machine), or at the deadline. */
        deadline = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;
        while (!flows_and_samples_committed(dir) && test_now_ns() < deadline)
            run_step(stream, kernel, steps);
        kill(getpid(), SIGKILL);
        _exit(4);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(FLARE("export", "killed", "-f", "perfetto", "-o", "killed.json"), 0);
    expect_contains(err_text, "flare export: note: killed never ended (killed or crashed): "
                              "exporting what it committed; what was open at its end is marked "
                              "still_open\n");
    CHECK_TRACE("killed.json", "--db", "killed/session.db", "--expect",
                "calls,flows,pm,unrecorded-window");
    /* Other formats export it too, with the note and without the marks. */
    assert_int_equal(FLARE("export", "killed", "-f", "csv", "-o", "killed.csv"), 0);
    expect_contains(err_text, "committed\n");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof bin_dir) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof scratch, "export-perfetto");
    make_crafted_session();
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
        cmocka_unit_test(test_crafted_trace),
        cmocka_unit_test(test_gzip),
        cmocka_unit_test(test_unwritable_output),
        cmocka_unit_test(test_unknown_format),
        cmocka_unit_test(test_session_cut_short),
        cmocka_unit_test(test_traced_demo),
        cmocka_unit_test(test_pm_window_session),
        cmocka_unit_test(test_storm_session),
        cmocka_unit_test(test_replay_sessions),
        cmocka_unit_test(test_session_still_being_written),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
