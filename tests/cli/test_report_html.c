/*
 * test_report_html.c: `flare report --html FILE` (docs/cli.md, "HTML
 * report") on sessions made three ways, and its failure cases.
 *
 * Sessions: one recorded in this process on the simulated device (kernels
 * with a hostile name, nested scopes, and a deep window whose PM samples
 * come from the simulated PM hardware through the real engine, decoder,
 * attribution and writer); one from `flare replay --range step` on
 * range_target (a span's kernels); one crafted through the store API with
 * values no simulated run has (NVML metrics, a launch storm, kernel replay
 * with speed-of-light metrics, warnings, drops, names made to break out of
 * a script block). Each page is checked by html_check.py: no fetch of any
 * kind, every section there, every JSON block parses, names round-trip.
 * The pages are copied to $FLARE_HTML_PAGES_DIR when it is set, for the
 * browser test (html_browser_check.py) that CTest runs after this one.
 *
 * Failures: a usage error is exit 2 and writes nothing; a FILE that cannot
 * be written, or a section that cannot be read, is exit 1 with no FILE (an
 * existing one is left as it was); a session cut short, or still being
 * written, is reported with a note on stderr and in the page, exit 0, as
 * `flare report` does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/sim/sim_pm.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_session.h"
#include "flare/flare.h"
#include "flare/sim.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_pm.h"
#include "store/store_pc.h"
#include "store/store_sass.h"
#include "store/store_triggered.h"
#include "cli_run.h"
#include "test_util.h"

#ifndef PYTHON3_PATH
#error "PYTHON3_PATH must be set (tests/cli/CMakeLists.txt)"
#endif

static char bin_dir[1024];
static char scratch[256];
static char out_text[1 << 20];
static char err_text[1 << 16];

#define ORIGIN       5000000000000ull
#define UNIX_START   1767225600000000000ll /* 2026-01-01 00:00:00 UTC */
#define PID          31337
#define MS           1000000ull
#define HOSTILE_NAME "k</script><script>alert('flare')</script><!--<script>"
#define HOSTILE_WARN "a warning with </script> & <b>markup</b>"

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
        fail_msg("'%s' not found in:\n%s", part, text);
}

static int exists(const char *name)
{
    char path[600];
    struct stat info;
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    return stat(path, &info) == 0;
}

/* No FILE.tmp-XXXXXX of a failed write is left in scratch. */
static void expect_no_temporary(void)
{
    char command[700];
    snprintf(command, sizeof command, "ls '%s' | grep -q '\\.tmp-'", scratch);
    if (system(command) == 0)
        fail_msg("a temporary file was left in %s", scratch);
}

/* Runs html_check.py on scratch/page with the NULL-terminated options;
 * fails the test with what it printed unless it passes. */
static void check_page(const char *page, const char *const *options)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", scratch, page);
    const char *arguments[48] = {REPORT_HTML_CHECK_PATH, path};
    int count = 2;
    for (; options != NULL && options[count - 2] != NULL && count < 47; count++)
        arguments[count] = options[count - 2];
    arguments[count] = NULL;
    static char out[1 << 16], err[1 << 14];
    int status =
        cli_run_program(PYTHON3_PATH, 0, arguments, scratch, out, sizeof out, err, sizeof err);
    if (status != 0)
        fail_msg("html_check.py %s failed (%d):\n%s%s", page, status, out, err);
}

#define CHECK_PAGE(page, ...) check_page(page, (const char *const[]){__VA_ARGS__, NULL})

/* Copies scratch/page to $FLARE_HTML_PAGES_DIR/name, when set, for the
 * browser test. */
static void keep_page(const char *page, const char *name)
{
    const char *pages = getenv("FLARE_HTML_PAGES_DIR");
    if (pages == NULL || pages[0] == '\0')
        return;
    char command[2400];
    snprintf(command, sizeof command, "mkdir -p '%s' && cp '%s/%s' '%s/%s'", pages, scratch, page,
             pages, name);
    assert_int_equal(system(command), 0);
}

/* ---- a session recorded on the simulated device ---- */

static void no_op_kernel(const flare_sim_launch *launch)
{
    (void)launch;
}

static void window_open_and_wait(const flare_window_options *window)
{
    int status = flare_window_open(window);
    if (status == FLARE_ERR_TIMEOUT)
        TEST_WAIT_UNTIL(deepwin_current_state(deepwin_session_coordinator()) == DEEPWIN_OPEN);
    else
        assert_int_equal(status, FLARE_OK);
}

static void window_close_and_wait(void)
{
    int status = flare_window_close();
    if (status == FLARE_ERR_TIMEOUT)
        TEST_WAIT_UNTIL(deepwin_current_state(deepwin_session_coordinator()) == DEEPWIN_IDLE);
    else
        assert_int_equal(status, FLARE_OK);
}

/* One step: a scope around three launches of kernel, run to the end. */
static void run_step(flare_sim_stream *stream, int kernel)
{
    const uint32_t grid[3] = {8, 1, 1}, block[3] = {128, 1, 1};
    flare_scope_begin("step");
    for (int launch = 0; launch < 3; launch++)
        assert_int_equal(flare_sim_launch_kernel(stream, kernel, grid, block, NULL, 0), FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, 30000), FLARE_OK);
    test_pause_ms(1);
    flare_scope_end();
}

/* Kernels in steps inside an outer scope, and a deep window over some of
 * them that samples the simulated PM hardware (100 us interval) until it
 * has taken 60 samples. */
static void make_sim_session(const char *dir)
{
    deepwin_session_set_engine(sim_pm_engine());
    char reason[256] = "";
    assert_int_equal(sim_pm_prepare(0, "overview", 100000, reason, sizeof reason), FLARE_OK);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 20;
    assert_int_equal(flare_init(&options), FLARE_OK);
    int kernel;
    assert_int_equal(flare_sim_kernel_register(HOSTILE_NAME, no_op_kernel, &kernel), FLARE_OK);
    flare_sim_stream *stream;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    flare_scope_begin("outer <!-- scope");
    for (int step = 0; step < 3; step++)
        run_step(stream, kernel);
    flare_window_options window;
    flare_window_options_init(&window);
    window.label = "html test";
    window.max_duration_ms = 600000; /* closed by the test, however slow the machine */
    window_open_and_wait(&window);
    uint64_t deadline = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;
    for (int steps = 0; steps < 4 || sim_pm_samples_taken() < 60; steps++) {
        if (test_now_ns() > deadline)
            fail_msg("the simulated PM hardware took %llu samples in %d s",
                     (unsigned long long)sim_pm_samples_taken(), TEST_WAIT_SECONDS);
        run_step(stream, kernel);
    }
    window_close_and_wait();
    for (int step = 0; step < 2; step++)
        run_step(stream, kernel);
    flare_scope_end();
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    deepwin_session_set_engine(NULL);
    sim_pm_reset();
}

/* ---- a session crafted through the store API ---- */

static store *open_crafted(const char *name, const char *host)
{
    char dir[600], error[1024];
    snprintf(dir, sizeof dir, "%s/%s", scratch, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    store *database = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof error) != 0)
        fail_msg("store_open %s: %s", dir, error);
    store_session_info info = {
        .command = "train.py --html \"</script>\"",
        .start_ns = ORIGIN,
        .start_unix_ns = UNIX_START,
        .host = host,
        .flare_version = "0.0.0-html",
    };
    assert_int_equal(store_session_begin(database, &info), 0);
    return database;
}

static void put_kernels_and_scopes(store *database)
{
    static const char *const names[] = {"gemm_tile<128>", HOSTILE_NAME, "a&b>c \"quoted\""};
    for (uint64_t i = 0; i < 300; i++) {
        uint64_t start = ORIGIN + 2 * MS + i * 300000;
        store_kernel_row row = {.pid = PID,
                                .device = (int)(i % 2),
                                .stream_id = 7,
                                .correlation_id = 100 + i,
                                .name = names[i % 3],
                                .start_ns = start,
                                .end_ns = start + 50000 + (i % 3) * 40000,
                                .grid = {64, 1, 1},
                                .block = {256, 1, 1}};
        assert_int_equal(store_put_kernel(database, &row), 0);
    }
    for (uint64_t step = 0; step < 10; step++) {
        uint64_t start = ORIGIN + 2 * MS + step * 9 * MS;
        store_scope_row row = {PID, PID, 10 + step, "step", 0, start, start + 8 * MS, 0};
        assert_int_equal(store_put_scope(database, &row), 0);
        row = (store_scope_row){PID, PID,        100 + step,     "forward </b>",
                                1,   start + MS, start + 5 * MS, 0};
        assert_int_equal(store_put_scope(database, &row), 0);
    }
}

static void put_metrics(store *database)
{
    static const char *const gauges[] = {"gpu_utilization_pct", "power_mw", "sm_clock_mhz",
                                         "temperature_c", "memory_used_bytes"};
    for (uint64_t i = 0; i < 50; i++) {
        uint64_t time = ORIGIN + i * 2 * MS;
        const int64_t values[] = {(int64_t)(i * 7 % 100), 250000 + (int64_t)i * 1000, 1980,
                                  60 + (int64_t)i / 10, (int64_t)(8ull << 30)};
        for (int gauge = 0; gauge < 5; gauge++) {
            store_metric_row row = {PID, 0, gauges[gauge], time, values[gauge]};
            assert_int_equal(store_put_metric(database, &row), 0);
        }
    }
    /* Neither belongs on a device's timeline. */
    store_metric_row process = {PID, -1, "host_kernel_launches", ORIGIN + MS, 12};
    assert_int_equal(store_put_metric(database, &process), 0);
    store_metric_row pair = {PID, 0, "external_correlation.1.7", ORIGIN + MS, 99};
    assert_int_equal(store_put_metric(database, &pair), 0);
}

/* Window 1 with 100 samples of three metrics, each attributed to the step
 * or forward scope that covered it; one sample flagged. */
static void put_window_and_samples(store *database)
{
    store_window_row window = {.pid = PID,
                               .id = 1,
                               .token_kind = "rule",
                               .label = "",
                               .has_cause = 1,
                               .rule_id = 1,
                               .rule_text = "gpu_utilization_pct < 50 for 10ms",
                               .requested_ns = ORIGIN + 19 * MS,
                               .opened_ns = ORIGIN + 20 * MS,
                               .closed_ns = ORIGIN + 60 * MS,
                               .close_reason = "duration",
                               .launches = 130,
                               .engine = "sim-pm",
                               .engine_status = "disarmed",
                               .engine_reason = "",
                               .engine_samples = 100};
    assert_int_equal(store_put_window(database, &window), 0);
    static const char *const metrics[] = {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                          "dram__bytes_read.sum", "gr__cycles_elapsed.max"};
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t start = ORIGIN + 20 * MS + i * 400000;
        for (int metric = 0; metric < 3; metric++) {
            double values[] = {30.0 + (double)(i % 40), 1e6 * (double)(1 + i % 9), 7.5e5};
            store_pm_row row = {.pid = PID,
                                .window_id = 1,
                                .device = 0,
                                .sample_index = i,
                                .start_ns = start,
                                .end_ns = start + 400000,
                                .has_scope = 1,
                                .scope_instance_id = 10 + (i * 400000 + 18 * MS) / (9 * MS),
                                .scope_name = "step",
                                .flags = i == 50 ? 1u : 0u,
                                .metric = metrics[metric],
                                .value = values[metric]};
            assert_int_equal(store_put_pm_samples(database, &row, 1), 0);
        }
    }
}

static replay_record *replay_launch(uint64_t id, const char *kernel, uint64_t index)
{
    replay_record *record = calloc(1, sizeof *record);
    assert_non_null(record);
    record->launch_id = id;
    record->stream_id = 7;
    snprintf(record->kernel_name, sizeof record->kernel_name, "%s", kernel);
    record->launch_index = index;
    record->passes_planned = record->passes_run = 6;
    record->begin_ns = ORIGIN + 70 * MS + id * MS;
    record->end_ns = record->begin_ns + 500000;
    snprintf(record->collector, sizeof record->collector, "sim-metrics");
    return record;
}

static void add_metric(replay_record *record, const char *name, double value)
{
    uint32_t at = record->metric_count++;
    snprintf(record->metric_names[at], sizeof record->metric_names[at], "%s", name);
    record->metric_values[at] = value;
}

static void add_speed_of_light(replay_record *record, double scale)
{
    add_metric(record, "gpu__time_duration.sum", 125000.0 * scale);
    add_metric(record, "sm__throughput.avg.pct_of_peak_sustained_elapsed", 36.0 * scale);
    add_metric(record, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
               71.5 * scale);
    add_metric(record, "dram__bytes_read.sum", 5.3e6 * scale);
    add_metric(record, "dram__bytes_write.sum", NAN);
    add_metric(record, "lts__throughput.avg.pct_of_peak_sustained_elapsed", 44.0 * scale);
}

/* A note on value at of record: how range replay by PM sampling made it. */
static void note_value(replay_record *record, uint32_t at, const char *status, double bound)
{
    replay_value_note *note = &record->metric_notes[at];
    int timed = strcmp(record->metric_names[at], "gpu__time_duration.sum") == 0;
    snprintf(note->method, sizeof note->method, "%s", timed ? "kernel-activity" : "pm-sampling");
    snprintf(note->status, sizeof note->status, "%s", status);
    note->error_bound = bound;
    note->samples = 40;
    record->has_notes = 1;
}

/* Span "pm step", measured by PM sampling: a kernel measured (bounds), one
 * flagged, one shorter than the minimum (no values, the time only). */
static void put_pm_span(replay_record **records)
{
    records[0] = replay_launch(8, "pm step", 1);
    records[0]->is_span = 1;
    records[0]->span_id = 8;
    records[0]->span_kernels = 3;
    snprintf(records[0]->collector, sizeof records[0]->collector, "pm-sampling");
    snprintf(records[0]->reason, sizeof records[0]->reason,
             "PM sampling every 10us, 1 configurations: 1 kernels measured, 1 flagged, 0 "
             "uncovered, 0 untimed, 0 failed, 1 under 100us (no value); 512 samples, 0 lost, 0 "
             "missing; 0 metrics not sampled");
    const char *const names[] = {"gemm_tile<128>", "softmax", "tiny_add"};
    const char *const statuses[] = {"measured", "flagged", "below-minimum"};
    for (int kernel = 0; kernel < 3; kernel++) {
        replay_record *record = replay_launch(9 + (uint64_t)kernel, names[kernel], 3);
        records[1 + kernel] = record;
        record->span_id = 8;
        snprintf(record->collector, sizeof record->collector, "pm-sampling");
        add_speed_of_light(record, 0.6 + 0.2 * kernel);
        for (uint32_t at = 0; at < record->metric_count; at++) {
            int timed = strcmp(record->metric_names[at], "gpu__time_duration.sum") == 0;
            if (kernel == 2 && !timed)
                record->metric_values[at] = NAN;
            note_value(record, at, timed ? "measured" : statuses[kernel],
                       kernel == 2 && !timed ? NAN : 0.021 * record->metric_values[at]);
        }
    }
}

/* Kernel replay: two launches of gemm (one declined), one of the hostile
 * kernel; range replay: span "step" #2 with its two kernels, and span
 * "pm step" measured by PM sampling (values with notes). */
static void put_replay(store *database)
{
    replay_record *records[10];
    records[0] = replay_launch(1, "gemm_tile<128>", 0);
    add_speed_of_light(records[0], 1.0);
    records[1] = replay_launch(2, "gemm_tile<128>", 5);
    records[1]->declined = 1;
    records[1]->passes_run = 1;
    snprintf(records[1]->reason, sizeof records[1]->reason, "footprint over budget </script>");
    records[2] = replay_launch(3, HOSTILE_NAME, 0);
    add_speed_of_light(records[2], 0.5);
    records[3] = replay_launch(4, "step", 2);
    records[3]->is_span = 1;
    records[3]->span_id = 4;
    records[3]->span_kernels = 2;
    for (int kernel = 0; kernel < 2; kernel++) {
        records[4 + kernel] =
            replay_launch(5 + (uint64_t)kernel, kernel ? "a&b>c \"quoted\"" : "gemm_tile<128>", 9);
        records[4 + kernel]->span_id = 4;
        add_speed_of_light(records[4 + kernel], 0.8 + 0.2 * kernel);
    }
    put_pm_span(records + 6);
    assert_int_equal(replay_records_store(database, PID, records, 10), 0);
    for (int i = 0; i < 10; i++)
        free(records[i]);
}

/* Rules' replays: one of gemm's launch 1, fired inside window 1; one of
 * the hostile kernel, declined, with no window around it. */
/* Window 1's PC samples: a hostile function name, three stall reasons;
 * gemm's instructions on source lines of a hostile file name, the hostile
 * kernel's without line information (20% of the samples). */
#define HOSTILE_FILE "src/</script><b>gemm</b>.cu"
static void put_pc_samples(store *database)
{
    const struct {
        const char *function;
        uint64_t offset;
        const char *stall;
        uint64_t samples;
        const char *file;
        uint32_t line;
    } rows[] = {
        {"gemm_tile<128>", 0x1a0, "long_scoreboard", 700, HOSTILE_FILE, 42},
        {HOSTILE_NAME, 0x40, "selected", 200, NULL, 0},
        {"gemm_tile<128>", 0x2c0, "math_pipe_throttle", 100, HOSTILE_FILE, 57},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        store_pc_sample_row row = {.pid = PID,
                                   .window_id = 1,
                                   .device = 0,
                                   .function = rows[i].function,
                                   .pc_offset = rows[i].offset,
                                   .stall_reason = rows[i].stall,
                                   .samples = rows[i].samples,
                                   .first_ns = ORIGIN + 20 * MS,
                                   .last_ns = ORIGIN + 30 * MS,
                                   .file = rows[i].file,
                                   .line = rows[i].line};
        assert_int_equal(store_put_pc_sample(database, &row), 0);
    }
}

/* Window 2 ran SASS metrics: gemm's instructions on the hostile file's
 * lines, one divergent and uncoalesced, the hostile kernel's without a
 * line; window 3 asked for them and was refused. */
static void put_sass_metrics(store *database)
{
    for (uint64_t id = 2; id <= 3; id++) {
        store_window_row window = {.pid = PID,
                                   .id = id,
                                   .token_kind = "manual",
                                   .label = "counts",
                                   .requested_ns = ORIGIN + (id == 2 ? 62 : 70) * MS,
                                   .opened_ns = ORIGIN + (id == 2 ? 62 : 70) * MS,
                                   .closed_ns = ORIGIN + (id == 2 ? 68 : 70) * MS,
                                   .close_reason = id == 2 ? "duration" : "refused",
                                   .launches = id == 2 ? 4 : 0,
                                   .engine = "cuda-sass-metrics",
                                   .engine_status = id == 2 ? "disarmed" : "refused",
                                   .engine_reason = id == 2 ? "" : "patching failed </script>",
                                   .engine_samples = id == 2 ? 10 : 0};
        assert_int_equal(store_put_window(database, &window), 0);
    }
    const struct {
        const char *function;
        uint64_t offset, executed, threads, sectors, ideal;
        const char *file;
        uint32_t line;
    } rows[] = {
        {"gemm_tile<128>", 0x1a0, 4000, 31600, 16000, 4000, HOSTILE_FILE, 42},
        {"gemm_tile<128>", 0x2c0, 1000, 32000, 1000, 1000, HOSTILE_FILE, 57},
        {HOSTILE_NAME, 0x40, 500, 16000, 0, 0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *metrics[] = {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed",
                                 "smsp__sass_sectors_mem_global",
                                 "smsp__sass_sectors_mem_global_ideal"};
        uint64_t values[] = {rows[i].executed, rows[i].threads, rows[i].sectors, rows[i].ideal};
        for (size_t m = 0; m < (rows[i].ideal != 0 ? 4u : 2u); m++) {
            store_sass_row row = {.pid = PID,
                                  .window_id = 2,
                                  .device = 0,
                                  .function = rows[i].function,
                                  .pc_offset = rows[i].offset,
                                  .metric = metrics[m],
                                  .value = values[m],
                                  .file = rows[i].file,
                                  .line = rows[i].line};
            assert_int_equal(store_put_sass_metric(database, &row), 0);
        }
    }
}

static void put_triggered(store *database)
{
    const store_triggered_row rows[] = {
        {.pid = PID,
         .id = 1,
         .rule_id = 2,
         .rule_text = "kernel_duration_p99 > 100us for 10ms action replay",
         .comparison = ">",
         .threshold = 100000,
         .observed_value = 125000,
         .action = "replay",
         .target = "gemm_tile<128>",
         .why = "its longest kernel over the threshold in the last 1000.0 ms: 0.125 ms",
         .fired_ns = ORIGIN + 40 * MS,
         .taken_ns = ORIGIN + 71 * MS,
         .done_ns = ORIGIN + 71 * MS + 500000,
         .status = "replayed",
         .reason = "",
         .launch_id = 1},
        {.pid = PID,
         .id = 2,
         .rule_id = 3,
         .rule_text = "kernel_launch_rate > 10/s action replay",
         .comparison = ">",
         .threshold = 10,
         .observed_value = 2000,
         .action = "replay",
         .target = HOSTILE_NAME,
         .why = "the most GPU time in the last 1000.0 ms: 1.000 ms of 2 kernels",
         .fired_ns = ORIGIN + 90 * MS,
         .done_ns = ORIGIN + 90 * MS,
         .status = "declined",
         .reason = "replay budget 10ms spent </script>"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(store_put_triggered_replay(database, &rows[i]), 0);
}

static void put_the_rest(store *database)
{
    store_storm_row storm = {PID, 0, ORIGIN + 80 * MS, ORIGIN + 90 * MS, 5000, 0};
    assert_int_equal(store_put_storm(database, &storm), 0);
    assert_int_equal(store_set_drops(database, PID, "ring", "thread 31338", 12), 0);
    assert_int_equal(store_set_drops(database, PID, "storm_guard",
                                     "kernel launches counted but not timed (launch storm)", 5000),
                     0);
    assert_int_equal(store_put_log(database, PID, ORIGIN + 3 * MS, "warning", HOSTILE_WARN), 0);
    assert_int_equal(store_put_log(database, PID, ORIGIN + 4 * MS, "error", "an error line"), 0);
    assert_int_equal(store_put_log(database, PID, ORIGIN + 5 * MS, "info", "not listed"), 0);
    assert_int_equal(store_set_capability(database, PID, "kernels", 1, "active", "crafted"), 0);
    assert_int_equal(
        store_set_capability(database, PID, "nvml", 1, "degraded", "power not supported <x>"), 0);
}

/* The crafted session in scratch/name; ended unless pid is given (then
 * its process pid never ended, and the session has no end either). */
static void make_crafted_session(const char *name, int ended, int64_t pid, const char *host)
{
    store *database = open_crafted(name, host);
    assert_int_equal(store_process_begin(database, ended ? PID : pid, 1, ORIGIN, "sim", "train"),
                     0);
    assert_int_equal(store_put_device(database, PID, 0, "Crafted <GPU> 0", "sim"), 0);
    assert_int_equal(store_put_device(database, PID, 1, "Crafted GPU 1", "sim"), 0);
    put_kernels_and_scopes(database);
    put_metrics(database);
    put_window_and_samples(database);
    put_replay(database);
    put_triggered(database);
    put_pc_samples(database);
    put_sass_metrics(database);
    put_the_rest(database);
    if (ended) {
        assert_int_equal(store_process_end(database, PID, ORIGIN + 100 * MS), 0);
        assert_int_equal(store_session_end(database, ORIGIN + 100 * MS, 1, 0), 0);
    }
    store_close(database);
}

/* ---- the cases ---- */

static void test_simulated_session(void **state)
{
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/sim", scratch);
    assert_int_equal(mkdir(dir, 0755), 0);
    make_sim_session(dir);
    assert_int_equal(FLARE("report", "--html", "sim.html", "sim"), 0);
    CHECK_PAGE("sim.html", "--expect", "pm", "--expect", "kernels", "--name", HOSTILE_NAME,
               "--name", "outer <!-- scope");
    keep_page("sim.html", "simulated.html");
    /* --html=FILE and --top are taken too; the page lists one kernel. */
    assert_int_equal(FLARE("report", "--top", "1", "--html=sim2.html", "sim"), 0);
    CHECK_PAGE("sim2.html", "--expect", "kernels");
}

static void test_range_replay_session(void **state)
{
    (void)state;
    assert_int_equal(FLARE("replay", "-o", "span", "-q", "--range", "step", "--occurrence", "2",
                           "--set", "speed-of-light", "--", RANGE_TARGET_PATH),
                     0);
    assert_int_equal(FLARE("report", "--html", "span.html", "span"), 0);
    CHECK_PAGE("span.html", "--expect", "spans", "--expect", "kernels");
    keep_page("span.html", "range-replay.html");
}

static void test_crafted_session(void **state)
{
    (void)state;
    make_crafted_session("crafted", 1, 0, "html-host");
    assert_int_equal(FLARE("report", "--html", "crafted.html", "crafted"), 0);
    assert_string_equal(err_text, "");
    CHECK_PAGE("crafted.html", "--expect", "pm", "--expect", "replay", "--expect", "spans",
               "--expect", "noted", "--expect", "storms", "--expect", "metrics", "--expect",
               "kernels", "--expect", "triggered", "--expect", "pc", "--expect", "sass", "--name",
               HOSTILE_NAME, "--name", HOSTILE_WARN, "--name", HOSTILE_FILE, "--name",
               "footprint over budget </script>", "--name", "replay budget 10ms spent </script>",
               "--note", "counted but not timed", "--note", "flagged");
    keep_page("crafted.html", "crafted.html");
    /* Standard output: the same page. */
    assert_int_equal(FLARE("report", "--html", "-", "crafted"), 0);
    if (strncmp(out_text, "<!DOCTYPE html>", 15) != 0)
        fail_msg("--html - wrote:\n%.200s", out_text);
    expect_contains(out_text, "</html>\n");
}

static void test_usage_errors(void **state)
{
    (void)state;
    make_crafted_session("usage", 1, 0, "html-host");
    assert_int_equal(FLARE("report", "--html"), 2);
    expect_contains(err_text, "flare report: option '--html' needs a file name");
    assert_int_equal(FLARE("report", "--html=", "usage"), 2);
    expect_contains(err_text, "option '--html' needs a file name");
    assert_int_equal(FLARE("report", "--html", "--top", "3", "usage"), 2);
    expect_contains(err_text, "option '--html' needs a file name, not '--top'");
    assert_int_equal(FLARE("report", "--html", "a.html", "--html", "b.html", "usage"), 2);
    expect_contains(err_text, "option '--html' given twice");
    assert_int_equal(FLARE("report", "--html", "a.html", "--format", "json", "usage"), 2);
    expect_contains(err_text, "--html and --format exclude each other");
    assert_int_equal(FLARE("report", "--html", "a.html", "--bogus", "usage"), 2);
    expect_contains(err_text, "flare report: unknown option '--bogus'");
    assert_false(exists("a.html") || exists("b.html"));
    assert_int_equal(FLARE("report", "--help"), 0);
    expect_contains(out_text, "--html FILE");
}

static void test_unwritable_file(void **state)
{
    (void)state;
    make_crafted_session("target", 1, 0, "html-host");
    assert_int_equal(FLARE("report", "--html", "missing/dir/page.html", "target"), 1);
    expect_contains(err_text, "flare report: cannot write missing/dir/page.html: directory "
                              "missing/dir does not exist");
    assert_false(exists("missing"));
    assert_int_equal(FLARE("report", "--html", "target", "target"), 1);
    expect_contains(err_text, "flare report: cannot write target: it is a directory");
    if (geteuid() != 0) {
        char locked[400];
        snprintf(locked, sizeof locked, "%s/locked", scratch);
        assert_int_equal(mkdir(locked, 0555), 0);
        assert_int_equal(FLARE("report", "--html", "locked/page.html", "target"), 1);
        expect_contains(err_text, "flare report: cannot create a temporary file beside "
                                  "locked/page.html");
        assert_false(exists("locked/page.html"));
        chmod(locked, 0755);
    }
    assert_int_equal(FLARE("report", "--html", "page.html", "no-such-session"), 1);
    expect_contains(err_text, "flare report: no-such-session: No such file or directory");
    assert_false(exists("page.html"));
    expect_no_temporary();
}

/* A section that cannot be read (its table is gone): exit 1, the other
 * sections are still read and named, and FILE is not written: one that
 * existed keeps its old content. */
static void test_failed_section_writes_no_file(void **state)
{
    (void)state;
    make_crafted_session("broken", 1, 0, "html-host");
    char path[600];
    snprintf(path, sizeof path, "%s/broken/session.db", scratch);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "DROP TABLE pm_samples", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    snprintf(path, sizeof path, "%s/old.html", scratch);
    FILE *old = fopen(path, "w");
    assert_non_null(old);
    fputs("old page\n", old);
    fclose(old);
    assert_int_equal(FLARE("report", "--html", "old.html", "broken"), 1);
    expect_contains(err_text, "flare report: reading pm: ");
    expect_contains(err_text, "no such table: pm_samples");
    expect_contains(err_text, "flare report: old.html was not written: the report is incomplete");
    char content[64];
    cli_read_file(path, content, sizeof content);
    assert_string_equal(content, "old page\n");
    assert_int_equal(FLARE("report", "--html", "new.html", "broken"), 1);
    assert_false(exists("new.html"));
    expect_no_temporary();
}

/* A session that never recorded its end: cut short (its process is not
 * running here), or still being written (its process is this one). Both
 * are reported, with a note on stderr and in the page, exit 0. */
static void test_unfinished_sessions(void **state)
{
    (void)state;
    pid_t gone = fork();
    assert_true(gone >= 0);
    if (gone == 0)
        _exit(0);
    assert_int_equal(waitpid(gone, NULL, 0), gone);
    make_crafted_session("cut", 0, gone, "html-host");
    char host[256] = "";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    /* The launcher's process is gone but nothing else is: same host. */
    make_crafted_session("cut-here", 0, gone, host);
    make_crafted_session("live", 0, getpid(), host);

    assert_int_equal(FLARE("report", "--html", "cut.html", "cut"), 0);
    expect_contains(err_text, "flare report: note: The session was cut short: it never recorded "
                              "its end");
    CHECK_PAGE("cut.html", "--note", "cut short", "--expect", "pm");
    assert_int_equal(FLARE("report", "--html", "cut-here.html", "cut-here"), 0);
    expect_contains(err_text, "The session was cut short");
    assert_int_equal(FLARE("report", "--html", "live.html", "live"), 0);
    char expected[200];
    snprintf(expected, sizeof expected,
             "flare report: note: The session appears to be still being written (its process "
             "%lld is running)",
             (long long)getpid());
    expect_contains(err_text, expected);
    CHECK_PAGE("live.html", "--note", "still being written");
    keep_page("cut.html", "cut-short.html");
    /* The text report treats it the same way: what was recorded, exit 0. */
    assert_int_equal(FLARE("report", "cut"), 0);
    expect_contains(out_text, "did not end cleanly");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof bin_dir) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof scratch, "report-html");
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
    /* The browser test checks what this run keeps, nothing older. */
    const char *pages = getenv("FLARE_HTML_PAGES_DIR");
    if (pages != NULL && pages[0] != '\0') {
        char command[2200];
        snprintf(command, sizeof command, "rm -f '%s'/*.html", pages);
        if (system(command) != 0)
            return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_simulated_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_replay_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crafted_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_section_writes_no_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_sessions, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
