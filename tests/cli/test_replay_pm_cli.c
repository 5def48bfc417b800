/*
 * test_replay_pm_cli.c: `flare replay --method pm` on the command line:
 * its usage errors (exit 2, nothing prepared or run), the variables it
 * hands the command, and end to end on the simulated device a span of
 * range_target measured by PM sampling: the program's results unchanged,
 * one pass per sampling configuration, and every stored value with its
 * method and status. Runs the built flare (FLARE_TEST_BIN_DIR) in child
 * processes.
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

#define BAD(message, ...)                                                                          \
    do {                                                                                           \
        assert_int_equal(FLARE("replay", "-o", "out", __VA_ARGS__, "--", "touch", "ran"), 2);      \
        expect_usage_error(message);                                                               \
    } while (0)

static void test_usage_errors(void **state)
{
    (void)state;
    BAD("'--method sampling': expected profiler or pm", "--range", "step", "--method", "sampling");
    BAD("--method pm measures spans of work: it needs --range NAME or --range-api", "--method",
        "pm");
    BAD("--method pm measures spans of work: it needs --range NAME or --range-api", "--kernel",
        "rmw", "--method", "pm");
    BAD("--pm-interval and --pm-min-kernel need --method pm", "--range", "step", "--pm-interval",
        "20us");
    BAD("PM interval 5us is outside 10us to 1s", "--range", "step", "--method", "pm",
        "--pm-interval", "5us");
    BAD("'--pm-interval 10' needs a unit: write 10s", "--range", "step", "--method", "pm",
        "--pm-interval", "10");
    BAD("'--pm-min-kernel 1parsec': unknown unit", "--range", "step", "--method", "pm",
        "--pm-min-kernel", "1parsec");
    BAD("option '--method' given twice", "--method", "pm", "--method", "pm");
    assert_int_equal(FLARE("replay", "--help"), 0);
    expect_contains(out_text, "--method pm        PM sampling");
    expect_contains(out_text, "--pm-min-kernel DURATION");
    assert_int_equal(FLARE("replay", "--list-sets"), 0);
    expect_contains(out_text, "overview");
}

/* The options reach the command as FLARE_REPLAY_METHOD and the PM
 * variables; the default set of the method is overview. */
static void test_options_reach_the_command(void **state)
{
    (void)state;
    setenv("FLARE_REPLAY_PM_INTERVAL", "stale", 1);
    assert_int_equal(FLARE("replay", "-q", "-o", "env", "--range", "step", "--method", "pm",
                           "--pm-min-kernel", "50us", "--", "sh", "-c",
                           "echo \"m=$FLARE_REPLAY_METHOD i=${FLARE_REPLAY_PM_INTERVAL-unset} "
                           "k=$FLARE_REPLAY_PM_MIN_KERNEL s=$FLARE_REPLAY_SET\""),
                     0);
    unsetenv("FLARE_REPLAY_PM_INTERVAL");
    expect_contains(out_text, "m=pm i=unset k=50us s=overview");
}

typedef struct value_seen {
    int spans;
    int declined;
    char collector[64];
    char reason[256];
    size_t kernels;
    size_t durations;   /* gpu__time_duration.sum with a value, kernel-activity */
    size_t sampled;     /* dram__bytes_read.sum noted pm-sampling */
    size_t not_sampled; /* the share, noted not-sampled, no value */
    size_t unnoted;     /* a value without its method */
} value_seen;

static int see_span(const store_replay_span_row *row, void *user)
{
    value_seen *seen = user;
    seen->spans++;
    seen->declined = row->declined;
    snprintf(seen->collector, sizeof(seen->collector), "%s", row->collector);
    snprintf(seen->reason, sizeof(seen->reason), "%s", row->reason);
    seen->kernels = row->kernel_count;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        for (size_t m = 0; m < launch->metric_count; m++) {
            const char *name = launch->metric_names[m];
            const char *method = launch->metric_methods[m];
            const char *status = launch->metric_statuses[m];
            seen->unnoted += method[0] == '\0';
            if (strcmp(name, "gpu__time_duration.sum") == 0)
                seen->durations += launch->metric_has_value[m] &&
                                   strcmp(method, "kernel-activity") == 0 &&
                                   strcmp(status, "measured") == 0 && launch->metric_values[m] > 0;
            else if (strcmp(name, "dram__bytes_read.sum") == 0)
                seen->sampled += strcmp(method, "pm-sampling") == 0 && status[0] != '\0';
            else
                seen->not_sampled +=
                    !launch->metric_has_value[m] && strcmp(status, "not-sampled") == 0;
        }
    }
    return 0;
}

/* End to end on the simulated device: the second "step" of range_target
 * measured by PM sampling. Its kernels are microseconds long, so with a
 * 1 ns minimum some get a value and some are uncovered by 10 us samples:
 * the test asserts what every kernel must have (its time, its notes), not
 * which statuses the samples gave. */
static void test_range_measured_by_pm_sampling(void **state)
{
    (void)state;
    assert_int_equal(FLARE("replay", "-o", "pm", "--range", "step", "--occurrence", "2", "--method",
                           "pm", "--pm-min-kernel", "1ns", "--metrics",
                           "gpu__time_duration.sum,dram__bytes_read.sum,"
                           "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                           "--", RANGE_TARGET_PATH),
                     0);
    expect_contains(out_text, ": correct");
    /* The program's run, then one configuration (one pass). */
    expect_contains(err_text, "flare: replay: 1 span(s) replayed, 0 declined; 2 kernel(s) in "
                              "them, 2 passes");
    char dir[400], error[1024];
    snprintf(dir, sizeof(dir), "%s/pm", scratch);
    store *database = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), 0);
    value_seen seen = {0};
    assert_int_equal(store_read_replay_spans(database, see_span, &seen), 0);
    store_close(database);
    assert_int_equal(seen.spans, 1);
    assert_int_equal(seen.declined, 0);
    assert_string_equal(seen.collector, "pm-sampling");
    expect_contains(seen.reason, "PM sampling every 10us, 1 configurations");
    assert_int_equal(seen.kernels, 2);
    assert_int_equal(seen.durations, 2);
    assert_int_equal(seen.sampled, 2);
    assert_int_equal(seen.not_sampled, 2);
    assert_int_equal(seen.unnoted, 0);
}

static int setup(void **state)
{
    (void)state;
    return cli_test_environment(bin_dir, sizeof(bin_dir)) != 0 ? -1 : 0;
}

static int fresh_scratch(void **state)
{
    (void)state;
    test_make_temp_dir(scratch, sizeof(scratch), "replay-pm-cli");
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
        cmocka_unit_test_setup_teardown(test_options_reach_the_command, fresh_scratch,
                                        remove_scratch),
        cmocka_unit_test_setup_teardown(test_range_measured_by_pm_sampling, fresh_scratch,
                                        remove_scratch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
