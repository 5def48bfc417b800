/*
 * test_replay_cli.c: `flare replay` on the command line and the kernel
 * replay section of `flare report`.
 *
 * Usage errors are exit 2 with a message naming the offending option, and
 * nothing is prepared or run; --list-sets and --help answer without running
 * anything; the options reach the command as FLARE_REPLAY_* (and stale ones
 * from the caller's environment do not); the report shows replay rows per
 * kernel and nothing when there are none; and, end to end on the simulated
 * device, a chosen launch of a read-modify-write kernel is replayed, the
 * program's result is unchanged and the report shows the launch's metric
 * values; and a chosen span (--range step --occurrence 2) is replayed as a
 * whole, the program's results are unchanged, and the report shows the
 * span's table of kernels and metrics, or the reason it was declined. The
 * report's replay tables name metrics as people read them, in their units,
 * with long kernel names shortened in the middle, within $COLUMNS (100 when
 * unset); --wide shows them as stored. Runs the built flare
 * (FLARE_TEST_BIN_DIR) in child processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flare/flare.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_replay.h"
#include "cli_flare.h"
#include "test_util.h"

static void expect_absent(const char *text, const char *part)
{
    if (strstr(text, part) != NULL)
        fail_msg("'%s' unexpectedly found in:\n%s", part, text);
}

/* The line of text that starts with start (searched from text on), into
 * line; fails the test when there is none. */
static const char *line_from(const char *text, const char *start, char *line, size_t size)
{
    const char *found = strstr(text, start);
    if (found == NULL)
        fail_msg("no line starting '%s' in:\n%s", start, text);
    snprintf(line, size, "%.*s", (int)strcspn(found, "\n"), found);
    return line;
}

/* The whole line of text (searched from text on) that holds part, into
 * line; fails the test when there is none. */
static const char *line_with(const char *text, const char *part, char *line, size_t size)
{
    const char *found = strstr(text, part);
    if (found == NULL)
        fail_msg("no line holding '%s' in:\n%s", part, text);
    while (found > text && found[-1] != '\n')
        found--;
    snprintf(line, size, "%.*s", (int)strcspn(found, "\n"), found);
    return line;
}

/* A usage error leaves no session behind and says where help is. */
static void expect_usage_error(const char *message)
{
    expect_contains(err_text, message);
    expect_contains(err_text, "Run 'flare replay --help' for usage.");
    struct stat info;
    char path[400];
    snprintf(path, sizeof(path), "%s/out", scratch);
    if (stat(path, &info) == 0)
        fail_msg("a usage error prepared %s", path);
    snprintf(path, sizeof(path), "%s/ran", scratch);
    if (stat(path, &info) == 0)
        fail_msg("a usage error ran the command");
}

/* Each bad option alone, with a command that would leave a trace if run. */
#define BAD(message, ...)                                                                          \
    do {                                                                                           \
        assert_int_equal(FLARE("replay", "-o", "out", __VA_ARGS__, "--", "touch", "ran"), 2);      \
        expect_usage_error(message);                                                               \
    } while (0)

static void test_usage_errors(void **state)
{
    (void)state;
    BAD("'--kernel (abc': bad regular expression: ", "--kernel", "(abc");
    /* Found by fuzz/fuzz_trace_options: regcomp took gigabytes on stacked
     * repetitions; refused before it tries (17 '+': 2^17 copies). */
    BAD("repeats too much to compile", "--kernel", "sa+++++++++++++++++xpy");
    BAD("'--launch 2' and '--every 3' exclude each other", "--launch", "2", "--every", "3");
    BAD("'--launch 2' and '--every 3' exclude each other", "--every", "3", "--launch", "2");
    BAD("'--launch 0': launches are counted from 1", "--launch", "0");
    BAD("'--every 0': launches are counted from 1", "--every", "0");
    BAD("'--launch two': expected a whole number of at least 1", "--launch", "two");
    BAD("'--launch -1': expected a whole number of at least 1", "--launch", "-1");
    BAD("'--metrics a,b' and '--set time' exclude each other", "--metrics", "a,b", "--set", "time");
    BAD("'--metrics a,,b': empty metric name", "--metrics", "a,,b");
    BAD("'--metrics dram bytes': metric name \"dram bytes\" has ' '", "--metrics", "dram bytes");
    BAD("'--drain-timeout 10' needs a unit: write 10s", "--drain-timeout", "10");
    BAD("'--drain-timeout 10hours': unknown unit 'hours' in '10hours': a duration is written in "
        "ns, us, ms, s, min or h",
        "--drain-timeout", "10hours");
    BAD("'--pass-timeout 0': must be more than zero", "--pass-timeout", "0");
    BAD("'--pass-timeout 0s': '0s' must be more than zero", "--pass-timeout", "0s");
    BAD("'--pass-timeout 0.0000001ms': '0.0000001ms' is finer than a duration can be: the "
        "smallest step is 1ns",
        "--pass-timeout", "0.0000001ms");
    BAD("'--pass-timeout .5s': '.5s' needs a digit before the decimal point: write 0.5s",
        "--pass-timeout", ".5s");
    BAD("'--drain-timeout 1e3ms': '1e3ms': exponents are not accepted", "--drain-timeout", "1e3ms");
    BAD("'--footprint-budget 4096' needs a unit: write 4096MiB", "--footprint-budget", "4096");
    BAD("'--footprint-budget 4GB': unknown unit", "--footprint-budget", "4GB");
    BAD("option '--launch' given twice", "--launch", "1", "--launch", "2");
    /* Range replay: spans exclude launch selection, --occurrence needs a
     * name, and both are checked by the engine's own selection check. */
    BAD("--range and --range-api replay whole spans; they exclude --kernel, --launch and --every",
        "--range", "step", "--kernel", "rmw");
    BAD("--range and --range-api replay whole spans; they exclude --kernel, --launch and --every",
        "--range-api", "--every", "2");
    BAD("--occurrence needs --range", "--occurrence", "2");
    BAD("'--occurrence 0': occurrences are counted from 1", "--range", "step", "--occurrence", "0");
    BAD("'--occurrence second': expected a whole number of at least 1", "--range", "step",
        "--occurrence", "second");
    BAD("option '--range' given twice", "--range", "a", "--range", "b");
    char long_name[200];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    BAD("'--range': the name is longer than 127 characters", "--range", long_name);
    BAD("unknown option '--bogus'", "--bogus");
    /* The switches that pass through to CMD are checked here too. */
    setenv("FLARE_REPLAY_COUNTER_AVAILABILITY", "yes", 1);
    BAD("FLARE_REPLAY_COUNTER_AVAILABILITY=\"yes\" in the environment: expected 0 or 1", "--kernel",
        "rmw");
    unsetenv("FLARE_REPLAY_COUNTER_AVAILABILITY");
    setenv("FLARE_REPLAY_SERIAL_DEVICES", "yes", 1);
    BAD("FLARE_REPLAY_SERIAL_DEVICES=\"yes\" in the environment: expected 0 or 1", "--kernel",
        "rmw");
    unsetenv("FLARE_REPLAY_SERIAL_DEVICES");
    setenv("FLARE_REPLAY_HOST_SHADOW", "2", 1);
    BAD("FLARE_REPLAY_HOST_SHADOW=\"2\" in the environment: expected 0 or 1", "--kernel", "rmw");
    unsetenv("FLARE_REPLAY_HOST_SHADOW");
    setenv("FLARE_STORM_RATE", "12", 1);
    BAD("FLARE_STORM_RATE in the environment: '12' is outside 1000..100000000 launches per "
        "second (0: off)",
        "--kernel", "rmw");
    unsetenv("FLARE_STORM_RATE");

    /* An unknown set lists the sets, so the fix is on the screen. */
    BAD("unknown metric set 'sol'; the sets are:", "--set", "sol");
    expect_contains(err_text, "speed-of-light");
    expect_contains(err_text, "memory");

    /* Missing values and a missing command. */
    assert_int_equal(FLARE("replay", "--kernel"), 2);
    expect_usage_error("option '--kernel' needs a regular expression");
    assert_int_equal(FLARE("replay", "--launch", "--", "touch", "ran"), 2);
    expect_usage_error("option '--launch' needs a whole number of at least 1");
    assert_int_equal(FLARE("replay", "--set", "time"), 2);
    expect_usage_error("missing '--' and the command to run");
    assert_int_equal(FLARE("replay", "--set", "time", "--"), 2);
    expect_usage_error("missing the command after '--'");
    assert_int_equal(FLARE("replay", "-o", "out", "touch", "ran"), 2);
    expect_usage_error("expected '--' before the command, found 'touch'");
}

static void test_list_sets_and_help(void **state)
{
    (void)state;
    assert_int_equal(FLARE("replay", "--list-sets"), 0);
    size_t count = 0;
    const replay_metric_set *sets = replay_metric_sets(&count);
    assert_true(count >= 1);
    for (size_t index = 0; index < count; index++) {
        expect_contains(out_text, sets[index].name);
        expect_contains(out_text, sets[index].description);
        /* Every metric of the set, one a line. */
        char first[REPLAY_METRIC_NAME_MAX];
        snprintf(first, sizeof(first), "%.*s", (int)strcspn(sets[index].metrics, ","),
                 sets[index].metrics);
        expect_contains(out_text, first);
    }
    expect_contains(out_text, "dram__bytes_read.sum");
    expect_contains(out_text, "(the default)");

    assert_int_equal(FLARE("replay", "--help"), 0);
    const char *options[] = {
        "--kernel REGEX",      "--launch N",     "--every N",
        "--metrics A,B,C",     "--set NAME",     "--list-sets",
        "--drain-timeout",     "--pass-timeout", "--footprint-budget",
        "--range NAME",        "--occurrence N", "--range-api",
        "FLARE_REPLAY_KERNEL", "_RANGE_API",     "flare_replay_range_begin/end",
        "FLARE_REPLAY_KERNEL", "docs/replay.md", "flare report DIR"};
    for (size_t index = 0; index < sizeof(options) / sizeof(options[0]); index++)
        expect_contains(out_text, options[index]);
    assert_int_equal(FLARE("--help"), 0);
    expect_contains(out_text, "  replay ");
}

/* The options reach the command as given, and a FLARE_REPLAY_* variable in
 * the caller's environment that no option set is removed. */
static void test_options_reach_the_command(void **state)
{
    (void)state;
    setenv("FLARE_REPLAY_EVERY", "5", 1);
    setenv("FLARE_REPLAY_SET", "memory", 1);
    assert_int_equal(FLARE("replay", "-o", "out", "-q", "--kernel", "^rmw_(add|sub)$", "--launch",
                           "2", "--metrics", "gpu__time_duration.sum,launch__grid_size",
                           "--drain-timeout", "1.5s", "--pass-timeout", "2min",
                           "--footprint-budget", "512MiB", "--", "sh", "-c",
                           "env | grep ^FLARE_REPLAY_ | sort > env.txt; exit 7"),
                     7);
    unsetenv("FLARE_REPLAY_EVERY");
    unsetenv("FLARE_REPLAY_SET");
    char path[400], env[4096];
    snprintf(path, sizeof(path), "%s/env.txt", scratch);
    cli_read_file(path, env, sizeof(env));
    assert_string_equal(env, "FLARE_REPLAY_DRAIN_TIMEOUT=1.5s\n"
                             "FLARE_REPLAY_FOOTPRINT_BUDGET=512MiB\n"
                             "FLARE_REPLAY_KERNEL=^rmw_(add|sub)$\n"
                             "FLARE_REPLAY_LAUNCH=2\n"
                             "FLARE_REPLAY_METRICS=gpu__time_duration.sum,launch__grid_size\n"
                             "FLARE_REPLAY_PASS_TIMEOUT=2min\n");

    /* With no option at all, the default set is chosen explicitly: the
     * engine replays nothing without a selection. */
    assert_int_equal(FLARE("replay", "-o", "out2", "-q", "--", "sh", "-c",
                           "env | grep ^FLARE_REPLAY_ | sort > env2.txt"),
                     0);
    snprintf(path, sizeof(path), "%s/env2.txt", scratch);
    cli_read_file(path, env, sizeof(env));
    assert_string_equal(env, "FLARE_REPLAY_SET=speed-of-light\n");

    /* Range replay's options, and a stale FLARE_REPLAY_RANGE_API removed. */
    setenv("FLARE_REPLAY_RANGE_API", "1", 1);
    assert_int_equal(FLARE("replay", "-o", "out3", "-q", "--range", "train step", "--occurrence",
                           "3", "--set", "memory", "--", "sh", "-c",
                           "env | grep ^FLARE_REPLAY_ | sort > env3.txt"),
                     0);
    unsetenv("FLARE_REPLAY_RANGE_API");
    snprintf(path, sizeof(path), "%s/env3.txt", scratch);
    cli_read_file(path, env, sizeof(env));
    assert_string_equal(env, "FLARE_REPLAY_OCCURRENCE=3\n"
                             "FLARE_REPLAY_RANGE=train step\n"
                             "FLARE_REPLAY_SET=memory\n");
    assert_int_equal(FLARE("replay", "-o", "out4", "-q", "--range-api", "--", "sh", "-c",
                           "env | grep ^FLARE_REPLAY_ | sort > env4.txt"),
                     0);
    snprintf(path, sizeof(path), "%s/env4.txt", scratch);
    cli_read_file(path, env, sizeof(env));
    assert_string_equal(env, "FLARE_REPLAY_RANGE_API=1\n"
                             "FLARE_REPLAY_SET=speed-of-light\n");
}

/* Replay rows, written through the store as the collector writes them,
 * come out of `flare report` per kernel; a session without any has no
 * replay section at all. */
static void test_report_section(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "session", "-q", "--", "true"), 0);
    assert_int_equal(FLARE("report", "session"), 0);
    expect_absent(out_text, "Kernel replay");

    char dir[400];
    snprintf(dir, sizeof(dir), "%s/session", scratch);
    store *database = NULL;
    char error[1024];
    assert_int_equal(store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)), 0);
    replay_record *records[3];
    for (int index = 0; index < 3; index++) {
        records[index] = calloc(1, sizeof(replay_record));
        assert_non_null(records[index]);
    }
    replay_record *replayed = records[0];
    replayed->launch_id = 17;
    snprintf(replayed->kernel_name, sizeof(replayed->kernel_name), "rmw_add");
    replayed->launch_index = 1;
    replayed->passes_planned = replayed->passes_run = 3;
    replayed->begin_ns = 1000;
    replayed->end_ns = 1000 + 2500000;
    replayed->snapshot_bytes = 16384;
    replayed->bytes_restored = 32768;
    replayed->shadow_on_device = 1;
    replayed->pass_count_kept = 3;
    for (int pass = 0; pass < 3; pass++) {
        replayed->pass_start_ns[pass] = 1000 + 800000ull * pass;
        replayed->pass_end_ns[pass] = 1000 + 800000ull * pass + 600000;
    }
    replayed->metric_count = 2;
    snprintf(replayed->metric_names[0], REPLAY_METRIC_NAME_MAX, "gpu__time_duration.sum");
    replayed->metric_values[0] = 123456;
    snprintf(replayed->metric_names[1], REPLAY_METRIC_NAME_MAX, "dram__bytes_read.sum");
    replayed->metric_values[1] = NAN;
    snprintf(replayed->collector, sizeof(replayed->collector), "sim-metrics");

    replay_record *declined = records[1];
    declined->launch_id = 18;
    snprintf(declined->kernel_name, sizeof(declined->kernel_name), "rmw_add");
    declined->launch_index = 2;
    declined->passes_planned = 3;
    declined->passes_run = 1;
    declined->declined = 1;
    snprintf(declined->reason, sizeof(declined->reason), "untracked memory: a module global");

    replay_record *other = records[2];
    other->launch_id = 40;
    snprintf(other->kernel_name, sizeof(other->kernel_name), "bystander");
    other->passes_planned = other->passes_run = 2;
    other->metric_count = 1;
    snprintf(other->metric_names[0], REPLAY_METRIC_NAME_MAX, "gpu__time_duration.sum");
    other->metric_values[0] = 0.25;

    assert_int_equal(replay_records_store(database, 4242, records, 3), 0);
    store_close(database);
    for (int index = 0; index < 3; index++)
        free(records[index]);

    assert_int_equal(FLARE("report", "session"), 0);
    const char *section = strstr(out_text, "Kernel replay");
    assert_non_null(section);
    /* Kernels by name: bystander, then rmw_add. */
    const char *bystander = strstr(section, "\n  bystander\n");
    const char *rmw = strstr(section, "\n  rmw_add\n");
    assert_non_null(bystander);
    assert_non_null(rmw);
    assert_true(bystander < rmw);
    expect_contains(rmw,
                    "1 launch(es) replayed, 1 declined; 3 passes; 2500.0 us in replay; metrics "
                    "from sim-metrics");
    expect_contains(rmw, "declined launch 18: untracked memory: a module global");
    expect_contains(rmw, "launch 17");
    expect_contains(rmw, "600.0 us"); /* mean pass */
    expect_contains(rmw, "device");
    /* The metrics table: a value in its unit, and "n/a" for the NaN, each
     * on its metric's own line, under its human name. */
    char line[512];
    expect_contains(line_from(rmw, "    Duration ", line, sizeof(line)), " 123.5 us");
    expect_contains(line_from(rmw, "    DRAM read ", line, sizeof(line)), " n/a");
    expect_contains(line_from(bystander, "    Duration ", line, sizeof(line)), " 0.25 ns");
    expect_absent(section, "gpu__time_duration.sum");
    expect_contains(section, "In all: 2 launch(es) of 2 kernel(s) replayed, 1 declined; 5 passes");

    /* --wide: the raw names and values, as stored. */
    assert_int_equal(FLARE("report", "--wide", "session"), 0);
    section = strstr(out_text, "Kernel replay");
    assert_non_null(section);
    rmw = strstr(section, "\n  rmw_add\n");
    bystander = strstr(section, "\n  bystander\n");
    assert_true(rmw != NULL && bystander != NULL);
    expect_contains(line_from(rmw, "    gpu__time_duration.sum ", line, sizeof(line)), " 123456");
    expect_contains(line_from(rmw, "    dram__bytes_read.sum ", line, sizeof(line)), " n/a");
    expect_contains(line_from(bystander, "    gpu__time_duration.sum ", line, sizeof(line)),
                    " 0.25");
    expect_absent(section, "Duration");
}

/* ---- the readable report (metric_labels.h) ---- */

/* flare's speed-of-light set, in its order, and a value for each. */
static const char *const sol_metrics[] = {
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_active.avg",
    "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
};
static const char *const sol_labels[] = {
    "Duration",           "SM throughput",    "Memory throughput",
    "DRAM read",          "DRAM write",       "L1/TEX throughput",
    "L2 throughput",      "SM active cycles", "Instructions executed",
    "Achieved occupancy",
};
static const double sol_values[] = {1234567, 36.04, 71.96,    5.3e6, 1.2e6,
                                    40.5,    55.5,  123456.7, 4.2e6, 87.26};
#define SOL_COUNT (sizeof(sol_metrics) / sizeof(sol_metrics[0]))

/* A PyTorch-like name far longer than a line, and one in several scripts
 * (2- and 3-byte UTF-8) that is long too. */
#define LONG_KERNEL                                                                                \
    "void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, "                    \
    "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, "                           \
    "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
#define UTF8_KERNEL                                                                                \
    "void "                                                                                        \
    "caf\xC3\xA9::\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E::reduce_kernel<\xCE\xBB_functor<float>, "   \
    "512, 4>(float const*, float*, unsigned long, unsigned long, \xCE\xB1\xCE\xB2\xCE\xB3)"

static replay_record *sol_record(uint64_t launch_id, const char *kernel, uint64_t span_id)
{
    replay_record *record = calloc(1, sizeof(*record));
    assert_non_null(record);
    record->launch_id = launch_id;
    record->launch_index = launch_id % 7;
    snprintf(record->kernel_name, sizeof(record->kernel_name), "%s", kernel);
    record->passes_planned = record->passes_run = 4;
    record->begin_ns = 1000 * launch_id;
    record->end_ns = record->begin_ns + 900000;
    record->span_id = span_id;
    snprintf(record->collector, sizeof(record->collector), "sim-metrics");
    record->metric_count = SOL_COUNT;
    for (size_t metric = 0; metric < SOL_COUNT; metric++) {
        snprintf(record->metric_names[metric], REPLAY_METRIC_NAME_MAX, "%s", sol_metrics[metric]);
        record->metric_values[metric] =
            sol_values[metric] * (1.0 + 0.001 * (double)(launch_id % 100));
    }
    return record;
}

/* A session with six launches of LONG_KERNEL replayed on their own, and a
 * span of three kernels (LONG_KERNEL, UTF8_KERNEL, a short one), all with
 * the speed-of-light set. */
static void make_readable_session(void)
{
    assert_int_equal(FLARE("trace", "-o", "readable", "-q", "--", "true"), 0);
    char dir[400], error[1024];
    snprintf(dir, sizeof(dir), "%s/readable", scratch);
    store *database = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)), 0);
    replay_record *records[11];
    size_t count = 0;
    for (uint64_t launch = 1; launch <= 6; launch++)
        records[count++] = sol_record(100 + launch, LONG_KERNEL, 0);
    replay_record *span = sol_record(7, "step", 7);
    span->is_span = 1;
    span->launch_index = 2;
    span->metric_count = 0;
    span->span_kernels = 3;
    records[count++] = span;
    records[count++] = sol_record(200, LONG_KERNEL, 7);
    records[count++] = sol_record(201, UTF8_KERNEL, 7);
    records[count++] = sol_record(202, "ampere_sgemm_128x64_tn", 7);
    assert_int_equal(replay_records_store(database, 4242, records, count), 0);
    store_close(database);
    for (size_t index = 0; index < count; index++)
        free(records[index]);
}

/* The display width of a line of well-formed UTF-8 (fails the test on any
 * other): one column per code point. */
static size_t display_width(const char *line)
{
    size_t width = 0;
    for (const unsigned char *at = (const unsigned char *)line; *at != '\0';) {
        size_t length = *at < 0x80 ? 1 : *at >= 0xF0 ? 4 : *at >= 0xE0 ? 3 : *at >= 0xC2 ? 2 : 0;
        if (length == 0)
            fail_msg("a broken UTF-8 sequence in '%s'", line);
        for (size_t next = 1; next < length; next++)
            if ((at[next] & 0xC0) != 0x80)
                fail_msg("a broken UTF-8 sequence in '%s'", line);
        at += length;
        width++;
    }
    return width;
}

/* Every line of the tables (from the first line holding first up to the
 * next blank line) fits width; returns how many lines there were. */
static int expect_table_fits(const char *text, const char *first, size_t width)
{
    char line[2048];
    line_with(text, first, line, sizeof(line));
    const char *at = strstr(text, line);
    int lines = 0;
    while (at != NULL && *at != '\n' && *at != '\0') {
        snprintf(line, sizeof(line), "%.*s", (int)strcspn(at, "\n"), at);
        if (display_width(line) > width)
            fail_msg("a line of %zu columns (more than %zu): '%s'", display_width(line), width,
                     line);
        lines++;
        at = strchr(at, '\n');
        at = at != NULL ? at + 1 : NULL;
    }
    return lines;
}

/* By default: human names and units, kernel names shortened with "…"
 * (never splitting a character), tables within $COLUMNS (100 unset), the
 * metrics a span's table has no room for named below it; --wide: raw names
 * and values, whole kernel names, every metric. */
static void test_report_readable(void **state)
{
    (void)state;
    make_readable_session();
    assert_int_equal(FLARE("report", "readable"), 0);
    const char *kernels = strstr(out_text, "Kernel replay");
    const char *spans = strstr(out_text, "Range replay");
    assert_true(kernels != NULL && spans != NULL);
    char line[2048];
    /* Kernel replay: the name fits, both ends kept; a row per metric. */
    line_with(kernels, "void at::native::", line, sizeof(line));
    expect_contains(line, "\xE2\x80\xA6");
    expect_contains(line, "3ul>)");
    assert_int_equal(display_width(line), 100);
    for (size_t metric = 0; metric < SOL_COUNT; metric++) {
        char start[64];
        snprintf(start, sizeof(start), "    %s ", sol_labels[metric]);
        line_from(kernels, start, line, sizeof(line));
    }
    expect_contains(line_from(kernels, "    Duration ", line, sizeof(line)), " 1235.8 us");
    expect_contains(line_from(kernels, "    SM throughput ", line, sizeof(line)), " 36.1%");
    expect_contains(line_from(kernels, "    DRAM read ", line, sizeof(line)), " 5.3 MB");
    expect_contains(line_from(kernels, "    SM active cycles ", line, sizeof(line)),
                    " 123.6 k cycles");
    expect_contains(line_from(kernels, "    Instructions executed ", line, sizeof(line)), " 4.2 M");
    expect_contains(line_from(kernels, "    Achieved occupancy ", line, sizeof(line)), " 87.3%");
    /* Six launches do not fit side by side in 100 columns: two blocks. */
    assert_true(expect_table_fits(kernels, "    metric ", 100) == 2 * (SOL_COUNT + 1));
    const char *second = strstr(strstr(kernels, "    metric ") + 1, "    metric ");
    assert_non_null(second);
    assert_true(second < spans);
    assert_true(expect_table_fits(second, "    metric ", 100) == SOL_COUNT + 1);
    for (size_t metric = 0; metric < SOL_COUNT; metric++)
        expect_absent(kernels, sol_metrics[metric]);

    /* Range replay: the most telling metrics that fit, the others named. */
    int lines = expect_table_fits(spans, "    launch nth kernel", 100);
    char heading[2048];
    line_with(spans, "    launch nth kernel", heading, sizeof(heading));
    assert_true(strstr(heading, "Duration") != NULL);
    expect_contains(spans, "    not shown (flare report --wide shows all): ");
    expect_contains(spans, "Instructions executed");
    line_with(spans, "ampere_sgemm_128x64_tn", line, sizeof(line));
    expect_contains(line, " 1237.0 us");
    /* The UTF-8 name: shortened by characters, its start kept whole. */
    line_with(spans, "void caf\xC3\xA9::", line, sizeof(line));
    expect_contains(line, "\xE2\x80\xA6");
    (void)display_width(line);
    for (size_t metric = 0; metric < SOL_COUNT; metric++)
        expect_absent(spans, sol_metrics[metric]);

    /* A wider terminal: more of everything, still within it. */
    setenv("COLUMNS", "200", 1);
    assert_int_equal(FLARE("report", "readable"), 0);
    unsetenv("COLUMNS");
    spans = strstr(out_text, "Range replay");
    assert_non_null(spans);
    assert_true(expect_table_fits(spans, "    launch nth kernel", 200) <= lines);
    line_with(spans, "    launch nth kernel", line, sizeof(line));
    assert_true(strlen(line) > strlen(heading));
    kernels = strstr(out_text, "Kernel replay");
    assert_true(expect_table_fits(kernels, "    metric ", 200) == SOL_COUNT + 1);
    expect_contains(line_from(kernels, "    metric ", line, sizeof(line)), "launch 106");

    /* --wide: as stored. */
    assert_int_equal(FLARE("report", "--wide", "readable"), 0);
    kernels = strstr(out_text, "Kernel replay");
    spans = strstr(out_text, "Range replay");
    assert_true(kernels != NULL && spans != NULL);
    expect_contains(kernels, "\n  " LONG_KERNEL "\n");
    expect_contains(spans, " " UTF8_KERNEL " ");
    expect_absent(out_text, "\xE2\x80\xA6");
    expect_absent(out_text, "not shown (");
    line_from(spans, "        launch   nth kernel", line, sizeof(line));
    for (size_t metric = 0; metric < SOL_COUNT; metric++) {
        expect_contains(line, sol_metrics[metric]);
        char start[160];
        snprintf(start, sizeof(start), "    %s ", sol_metrics[metric]);
        line_from(kernels, start, heading, sizeof(heading));
    }
    expect_absent(kernels, "SM throughput");
}

/* The metric value on the line of name within text (the first launch
 * column); fails the test when there is no number there. */
static double metric_value(const char *text, const char *name)
{
    char start[160], line[512];
    snprintf(start, sizeof(start), "    %s ", name);
    line_from(text, start, line, sizeof(line));
    double value = NAN;
    if (sscanf(line + strlen(start), "%lf", &value) != 1)
        fail_msg("no value on the line '%s'", line);
    return value;
}

static void read_summary(const char *session, store_replay_summary *summary)
{
    char dir[400], error[1024];
    snprintf(dir, sizeof(dir), "%s/%s", scratch, session);
    store *database = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), 0);
    assert_int_equal(store_read_replay_summary(database, summary), 0);
    store_close(database);
}

/* End to end on the simulated device: the chosen launch is replayed, the
 * program's own check of its read-modify-write result still passes (memory
 * was restored between passes), and the report shows the launch's values. */
static void test_end_to_end(void **state)
{
    (void)state;
    assert_int_equal(FLARE("replay", "-o", "one", "--kernel", "^rmw_add$", "--launch", "2", "--set",
                           "time", "--", REPLAY_TARGET_PATH),
                     0);
    expect_contains(out_text, "replay_target: 4 launches of rmw_add");
    expect_contains(out_text, ": correct");
    expect_contains(err_text, "flare: replay: 1 launch(es) of 1 kernel(s) replayed, 0 declined");
    assert_int_equal(FLARE("report", "one"), 0);
    const char *section = strstr(out_text, "\n  rmw_add\n");
    assert_non_null(section);
    char line[512];
    expect_contains(line_from(section, "    Duration ", line, sizeof(line)), "s"); /* ns, us, ms */
    /* The raw values, as stored, for the checks below. */
    assert_int_equal(FLARE("report", "--wide", "one"), 0);
    section = strstr(out_text, "\n  rmw_add\n");
    assert_non_null(section);
    expect_absent(out_text, "\n  bystander\n"); /* not chosen */
    expect_contains(section, "1 launch(es) replayed, 0 declined");
    /* The launch row, under its header: the second launch of rmw_add, 1
     * pass (the set "time" needs one). */
    const char *header = strstr(section, "        launch   nth");
    assert_non_null(header);
    unsigned long long launch_id = 0, nth = 0, passes = 0;
    long long pid = 0;
    int device = -1;
    unsigned long long stream = 0;
    assert_int_equal(sscanf(strchr(header, '\n') + 1, "%llu %llu %lld %d %llu %llu", &launch_id,
                            &nth, &pid, &device, &stream, &passes),
                     6);
    assert_int_equal(nth, 2);
    assert_int_equal(device, 0);
    assert_true(pid > 0);
    assert_int_equal(passes, 1);
    assert_true(metric_value(section, "gpu__time_duration.sum") > 0);

    /* Several passes with restores: every second launch, metrics that need
     * more than one pass on the simulated device. */
    assert_int_equal(FLARE("replay", "-o", "every", "--kernel", "rmw", "--every", "2", "--metrics",
                           "gpu__time_duration.sum,launch__grid_size,launch__block_size,"
                           "launch__thread_count,dram__bytes_read.sum",
                           "--", REPLAY_TARGET_PATH, "5"),
                     0);
    expect_contains(out_text, "replay_target: 5 launches of rmw_add");
    expect_contains(out_text, ": correct");
    store_replay_summary summary;
    read_summary("every", &summary);
    assert_int_equal(summary.replayed, 2); /* launches 2 and 4 of 5 */
    assert_int_equal(summary.declined, 0);
    assert_true(summary.passes >= 4);
    assert_true(summary.bytes_restored > 0);
    assert_int_equal(FLARE("report", "every"), 0);
    section = strstr(out_text, "\n  rmw_add\n");
    assert_non_null(section);
    expect_contains(line_from(section, "    Grid size ", line, sizeof(line)), " 16");
    expect_contains(line_from(section, "    Threads ", line, sizeof(line)), " 4,096");
    assert_int_equal(FLARE("report", "--wide", "every"), 0);
    section = strstr(out_text, "\n  rmw_add\n");
    assert_non_null(section);
    expect_contains(line_from(section, "    metric ", line, sizeof(line)), "launch ");
    assert_true(metric_value(section, "launch__grid_size") == 16);
    assert_true(metric_value(section, "launch__block_size") == 256);
    assert_true(metric_value(section, "launch__thread_count") == 4096);
    expect_contains(line_from(section, "    dram__bytes_read.sum ", line, sizeof(line)), " n/a");

    /* A metric the device does not know: checked on the device, the launch
     * is declined with the reason, runs once, and the program is unharmed. */
    assert_int_equal(FLARE("replay", "-o", "unknown", "--kernel", "rmw", "--launch", "1",
                           "--metrics", "no_such.metric", "--", REPLAY_TARGET_PATH),
                     0);
    expect_contains(out_text, ": correct");
    expect_contains(err_text, "1 launch(es) declined (they ran once); the first: ");
    expect_contains(err_text, "no_such.metric");
    assert_int_equal(FLARE("report", "unknown"), 0);
    expect_contains(out_text, "declined launch ");
    expect_contains(out_text, "no_such.metric");

    /* A regex that matches nothing: said loudly, not left as an empty table. */
    assert_int_equal(
        FLARE("replay", "-o", "none", "--kernel", "^no_kernel$", "--", REPLAY_TARGET_PATH), 0);
    expect_contains(err_text, "WARNING: no launch was replayed: no kernel launch matched --kernel "
                              "'^no_kernel$'");
    assert_int_equal(FLARE("report", "none"), 0);
    expect_absent(out_text, "Kernel replay");
}

/* ---- range replay ---- */

typedef struct span_result {
    int spans;
    store_replay_span_row row;
    char name[64];
    char reason[256];
    size_t kernel_count;
    char kernels[4][64];
    uint64_t launch_ids[4];
    uint64_t launch_indexes[4];
    size_t metric_counts[4];
    char metric_names[4][3][REPLAY_METRIC_NAME_MAX];
    double values[4][3];
    int has_value[4][3];
} span_result;

static int take_span(const store_replay_span_row *row, void *user)
{
    span_result *result = user;
    if (result->spans++ > 0)
        return 0;
    result->row = *row;
    snprintf(result->name, sizeof(result->name), "%s", row->name);
    snprintf(result->reason, sizeof(result->reason), "%s", row->reason);
    result->kernel_count = row->kernel_count;
    for (size_t kernel = 0; kernel < row->kernel_count && kernel < 4; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        snprintf(result->kernels[kernel], sizeof(result->kernels[kernel]), "%s", launch->kernel);
        result->launch_ids[kernel] = launch->launch_id;
        result->launch_indexes[kernel] = launch->launch_index;
        result->metric_counts[kernel] = launch->metric_count;
        for (size_t metric = 0; metric < launch->metric_count && metric < 3; metric++) {
            snprintf(result->metric_names[kernel][metric], REPLAY_METRIC_NAME_MAX, "%s",
                     launch->metric_names[metric]);
            result->values[kernel][metric] = launch->metric_values[metric];
            result->has_value[kernel][metric] = launch->metric_has_value[metric];
        }
    }
    return 0;
}

static void read_spans(const char *session, span_result *result)
{
    char dir[400], error[1024];
    snprintf(dir, sizeof(dir), "%s/%s", scratch, session);
    store *database = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), 0);
    memset(result, 0, sizeof(*result));
    assert_int_equal(store_read_replay_spans(database, take_span, result), 0);
    store_close(database);
}

/* The columns of a span table line after the launch id, nth and kernel
 * name: the metric texts, into columns; returns how many. */
static int span_line_columns(const char *line, char columns[][32], int capacity)
{
    unsigned long long launch_id = 0, nth = 0;
    char kernel[64];
    int used = 0;
    if (sscanf(line, "%llu %llu %63s%n", &launch_id, &nth, kernel, &used) != 3)
        return -1;
    int count = 0;
    const char *cursor = line + used;
    int advance = 0;
    while (count < capacity && sscanf(cursor, "%31s%n", columns[count], &advance) == 1) {
        cursor += advance;
        count++;
    }
    return count;
}

#define SPAN_METRICS "launch__grid_size,launch__thread_count,gpu__time_duration.sum"

/* End to end on the simulated device: the second "step" scope of the
 * program becomes a span; its work is replayed as a whole, the program's
 * own check of its order-sensitive results still passes, and the report
 * shows the span with one row per kernel and one column per metric. */
static void test_range_end_to_end(void **state)
{
    (void)state;
    assert_int_equal(FLARE("replay", "-o", "span", "--range", "step", "--occurrence", "2",
                           "--metrics", SPAN_METRICS, "--", RANGE_TARGET_PATH),
                     0);
    expect_contains(out_text, "range_target: 3 steps");
    expect_contains(out_text, ": correct");
    expect_contains(err_text, "flare: replay: 1 span(s) replayed, 0 declined; 2 kernel(s) in "
                              "them, 3 passes");
    expect_absent(err_text, "launch(es) of"); /* no launch replayed on its own */
    expect_absent(err_text, "declined (they ran once)");

    /* What was stored: the span and its kernels, in launch order. */
    span_result span;
    read_spans("span", &span);
    assert_int_equal(span.spans, 1);
    assert_string_equal(span.name, "step");
    assert_int_equal(span.row.occurrence, 2);
    assert_int_equal(span.row.device, 0);
    assert_false(span.row.declined);
    assert_int_equal(span.row.kernels, 2);
    assert_int_equal(span.row.copies, 2); /* the upload and the memset */
    /* The program's own run records; two counting passes re-issue it. */
    assert_int_equal(span.row.passes_run, 3);
    /* Every tracked allocation of the device: data, input, other. */
    assert_int_equal(span.row.snapshot_bytes, 2 * 4096 * sizeof(float) + 4096);
    assert_int_equal(span.row.bytes_restored, 2 * span.row.snapshot_bytes);
    assert_int_equal(span.kernel_count, 2);
    assert_string_equal(span.kernels[0], "scale_add");
    assert_string_equal(span.kernels[1], "rmw_add");
    assert_true(span.launch_ids[0] < span.launch_ids[1]);
    assert_int_equal(span.launch_indexes[0], 1); /* the second launch of each */
    assert_int_equal(span.launch_indexes[1], 1);
    for (int kernel = 0; kernel < 2; kernel++) {
        assert_int_equal(span.metric_counts[kernel], 3);
        assert_string_equal(span.metric_names[kernel][0], "launch__grid_size");
        assert_string_equal(span.metric_names[kernel][2], "gpu__time_duration.sum");
        assert_false(span.has_value[kernel][2]); /* not measured per kernel on the sim */
    }
    assert_true(span.values[0][0] == 16 && span.values[0][1] == 4096);
    assert_true(span.values[1][0] == 8 && span.values[1][1] == 1024);

    /* The report: the span's header, then its table: by default the
     * metrics' human names as headings, most telling first, values in
     * their units. */
    assert_int_equal(FLARE("report", "span"), 0);
    const char *readable = strstr(out_text, "Range replay");
    assert_non_null(readable);
    char heading[512];
    line_from(readable, "    launch nth kernel", heading, sizeof(heading));
    const char *duration = strstr(heading, "Duration");
    const char *grid = strstr(heading, "Grid size");
    assert_true(duration != NULL && grid != NULL && duration < grid);
    expect_contains(heading, "Threads");
    expect_absent(readable, "launch__grid_size");
    line_with(readable, " scale_add ", heading, sizeof(heading));
    expect_contains(heading, " n/a");
    expect_contains(heading, " 16");
    expect_contains(heading, " 4,096");
    /* --wide: raw names, in the order asked for. */
    assert_int_equal(FLARE("report", "--wide", "span"), 0);
    expect_absent(out_text, "Kernel replay"); /* span kernels stay under their span */
    const char *section = strstr(out_text, "Range replay");
    assert_non_null(section);
    char line[512];
    expect_contains(line_from(section, "  span \"step\"", line, sizeof(line)),
                    "(occurrence 2; pid ");
    expect_contains(line, ", device 0; span ");
    expect_contains(line, "): replayed");
    expect_contains(section, "2 kernel(s), 2 copies/memsets; 3 pass(es)");
    expect_contains(section, "36.0 KiB snapshotted");
    expect_contains(section, "metrics from sim-metrics");
    const char *header = line_from(section, "        launch   nth kernel", line, sizeof(line));
    const char *launch__grid = strstr(header, "launch__grid_size");
    const char *threads = strstr(header, "launch__thread_count");
    const char *time = strstr(header, "gpu__time_duration.sum");
    assert_true(launch__grid != NULL && threads != NULL && time != NULL);
    assert_true(launch__grid < threads && threads < time);
    const char *rows = strstr(section, "        launch   nth kernel");
    rows = strchr(rows, '\n') + 1;
    char columns[4][32];
    /* First row scale_add, then rmw_add: launch order. */
    char first[512], second[512];
    snprintf(first, sizeof(first), "%.*s", (int)strcspn(rows, "\n"), rows);
    rows = strchr(rows, '\n') + 1;
    snprintf(second, sizeof(second), "%.*s", (int)strcspn(rows, "\n"), rows);
    expect_contains(first, " scale_add ");
    assert_int_equal(span_line_columns(first, columns, 4), 3);
    assert_string_equal(columns[0], "16");
    assert_string_equal(columns[1], "4096");
    assert_string_equal(columns[2], "n/a");
    expect_contains(second, " rmw_add ");
    assert_int_equal(span_line_columns(second, columns, 4), 3);
    assert_string_equal(columns[0], "8");
    assert_string_equal(columns[1], "1024");
    assert_string_equal(columns[2], "n/a");
    expect_contains(section, "In all: 1 span(s) replayed, 0 declined; 2 kernel(s) in them");

    /* A span that allocates is declined: the program's run stands, and the
     * reason is in the closing line and the report. */
    assert_int_equal(FLARE("replay", "-o", "alloc", "--range", "step", "--occurrence", "2",
                           "--metrics", SPAN_METRICS, "--", RANGE_TARGET_PATH, "3", "alloc"),
                     0);
    expect_contains(out_text, ": correct");
    expect_contains(err_text, "flare: replay: 0 span(s) replayed, 1 declined");
    expect_contains(err_text, "1 span(s) declined (they ran once); the first: memory allocated "
                              "inside the span");
    read_spans("alloc", &span);
    assert_int_equal(span.spans, 1);
    assert_true(span.row.declined);
    assert_int_equal(span.row.passes_run, 1);
    assert_int_equal(span.row.bytes_restored, 0);
    assert_int_equal(span.row.kernels, 1); /* scale_add, before the allocation */
    assert_int_equal(span.kernel_count, 1);
    assert_string_equal(span.kernels[0], "scale_add");
    assert_int_equal(span.metric_counts[0], 0);
    assert_int_equal(FLARE("report", "alloc"), 0);
    section = strstr(out_text, "Range replay");
    assert_non_null(section);
    expect_contains(line_from(section, "  span \"step\"", line, sizeof(line)),
                    "): declined: memory allocated inside the span");
    expect_contains(section, "ran once, as without flare");
    expect_contains(section, "recorded before the decline: 1 kernel(s), 1 copies/memsets");
    expect_contains(section, "In all: 0 span(s) replayed, 1 declined");

    /* An occurrence the program never reaches: said loudly. */
    assert_int_equal(FLARE("replay", "-o", "never", "--range", "step", "--occurrence", "4",
                           "--metrics", SPAN_METRICS, "--", RANGE_TARGET_PATH),
                     0);
    expect_contains(out_text, ": correct");
    expect_contains(err_text, "WARNING: no span was replayed: no flare scope or NVTX range named "
                              "'step' reached occurrence 4");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    return 0;
}

/* Every test in a fresh directory, so "out" and "ran" start absent. */
static int fresh_scratch(void **state)
{
    (void)state;
    test_make_temp_dir(scratch, sizeof(scratch), "replay-cli");
    return 0;
}

static int remove_scratch(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_usage_errors, fresh_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_list_sets_and_help, fresh_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_options_reach_the_command, fresh_scratch,
                                        remove_scratch),
        cmocka_unit_test_setup_teardown(test_report_section, fresh_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_report_readable, fresh_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_end_to_end, fresh_scratch, remove_scratch),
        cmocka_unit_test_setup_teardown(test_range_end_to_end, fresh_scratch, remove_scratch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
