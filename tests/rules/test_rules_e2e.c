/*
 * test_rules_e2e.c: a deep-profiling rule end to end on the simulated
 * device: FLARE_DEEP_WHEN, a workload that launches fast and then slowly,
 * exactly one window opened by the rule with its cause, and the rules table
 * (exhausted, metric missing, refused, never true).
 *
 * Rules read the wall clock, so the workloads here are shaped in time (a
 * launch every 5 ms); but no check counts on a thread being scheduled soon
 * (the suite passes on two cores kept busy, scripts/test.sh stress): what a
 * check needs is waited for with TEST_WAIT_UNTIL, and the one premise the
 * machine can break, a fast phase that really was fast, is measured and the
 * session run again when it was not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim.h"
#include "flare/flare.h"
#include "flare/sim.h"
#include "store/store.h"
#include "test_util.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_session.h"

#define MS 1000000ull

#define LOW_RATE_RULE                                                                              \
    "kernel_launch_rate < 200/s for 300ms over 200ms bucket 100ms deep_for 200ms max_windows 1"

static void noop_kernel(const flare_sim_launch *launch)
{
    (void)launch;
}

static void sleep_ms(long ms)
{
    test_pause_ms(ms);
}

/* Every case starts with no session, no fault and no rule variables, and
 * leaves them so even when it fails: a failure is that case's alone. */
static int reset_all(void **state)
{
    (void)state;
    if (flare_is_active())
        flare_shutdown();
    sim_fault_set(NULL);
    unsetenv("FLARE_DEEP_WHEN");
    unsetenv("FLARE_DELIVERY_MS");
    return 0;
}

typedef struct window_rows {
    int count;
    store_window_row row; /* the first, its strings copied */
    char kind[16];
    char rule_text[256];
    char comparison[8];
    char close_reason[32];
} window_rows;

static int collect_window(const store_window_row *row, void *user)
{
    window_rows *rows = user;
    if (rows->count++ == 0) {
        rows->row = *row;
        snprintf(rows->kind, sizeof(rows->kind), "%s", row->token_kind);
        snprintf(rows->rule_text, sizeof(rows->rule_text), "%s",
                 row->rule_text != NULL ? row->rule_text : "");
        snprintf(rows->comparison, sizeof(rows->comparison), "%s",
                 row->comparison != NULL ? row->comparison : "");
        snprintf(rows->close_reason, sizeof(rows->close_reason), "%s", row->close_reason);
    }
    return 0;
}

typedef struct rule_rows {
    int count;
    uint32_t ids[8];
    char status[8][32];
    char reason[8][256];
    char text[8][256];
    uint64_t fired[8];
    uint64_t times_true[8];
    uint64_t missing[8];
    uint64_t sequence[8];
} rule_rows;

static int collect_rule(const store_rule_row *row, void *user)
{
    rule_rows *rows = user;
    if (rows->count >= 8)
        return 1;
    int i = rows->count++;
    rows->ids[i] = row->rule_id;
    snprintf(rows->status[i], sizeof(rows->status[i]), "%s", row->status);
    snprintf(rows->reason[i], sizeof(rows->reason[i]), "%s", row->reason);
    snprintf(rows->text[i], sizeof(rows->text[i]), "%s", row->text);
    rows->fired[i] = row->windows_fired;
    rows->times_true[i] = row->times_true;
    rows->missing[i] = row->missing_readings;
    rows->sequence[i] = row->sequence;
    return 0;
}

static void launch(flare_sim_stream *stream, int kernel, int count)
{
    const uint32_t grid[3] = {1, 1, 1};
    for (int i = 0; i < count; i++)
        assert_int_equal(flare_sim_launch_kernel(stream, kernel, grid, grid, NULL, 0), FLARE_OK);
}

/* Whether the live session in dir has stored rule index with status (the
 * collector writes a rule's row when it reaches a final state). */
static int rule_stored_with_status(const char *dir, int index, const char *status)
{
    store *database;
    char error[512];
    if (store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)) != FLARE_OK)
        return 0;
    rule_rows rules = {0};
    int found = store_read_rules(database, collect_rule, &rules) == FLARE_OK &&
                rules.count > index && strcmp(rules.status[index], status) == 0;
    store_close(database);
    return found;
}

/* The longest pause between two bursts of the fast phase that still keeps
 * every 200 ms above 200 launches a second (10 launches a burst, with room
 * for the rule's 100 ms buckets). */
#define FAST_GAP_MAX_NS (25 * MS)

/* Runs the fast phase (about 2000 launches a second for a second, 10 every
 * 5 ms) in a new session in dir; false, with the session shut down, when
 * the machine held this thread so long between two bursts that the launch
 * rate really fell below the rule's 200/s (then the rule is right to fire
 * and the phase proves nothing). */
static int fast_phase(char *dir, size_t dir_size, deepwin_coordinator **coordinator,
                      uint64_t *opened_before, uint64_t *opened_after, flare_sim_stream **stream,
                      int *kernel, uint64_t *start)
{
    test_make_temp_dir(dir, dir_size, "rules-e2e");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 100;
    *coordinator = deepwin_session_coordinator();
    *opened_before = *coordinator != NULL ? deepwin_opened_count(*coordinator) : 0;
    assert_int_equal(flare_init(&options), FLARE_OK);
    *coordinator = deepwin_session_coordinator();
    assert_non_null(*coordinator);
    assert_int_equal(flare_sim_kernel_register("rules_noop", noop_kernel, kernel), FLARE_OK);
    assert_int_equal(flare_sim_stream_create(0, stream), FLARE_OK);
    *start = flare_now_ns();
    uint64_t last_burst = *start, widest_gap = 0;
    while (flare_now_ns() - *start < 1000 * MS) {
        uint64_t now = flare_now_ns();
        if (now - last_burst > widest_gap)
            widest_gap = now - last_burst;
        last_burst = now;
        launch(*stream, *kernel, 10);
        sleep_ms(5);
    }
    /* The windows opened by the end of the phase (read before anything else
     * could hold this thread up), and the gap up to that end. */
    *opened_after = deepwin_opened_count(*coordinator);
    if (flare_now_ns() - last_burst > widest_gap)
        widest_gap = flare_now_ns() - last_burst;
    if (widest_gap <= FAST_GAP_MAX_NS)
        return 1;
    print_message("fast phase held up %.1f ms between two bursts: running it again\n",
                  widest_gap / 1e6);
    assert_int_equal(flare_sim_stream_synchronize(*stream, 60000), FLARE_OK);
    assert_int_equal(flare_sim_stream_destroy(*stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    test_remove_dir(dir);
    return 0;
}

static void test_rule_opens_one_window(void **state)
{
    (void)state;
    sim_engine_reset();
    char dir[128];
    setenv("FLARE_DEEP_WHEN",
           LOW_RATE_RULE "; custom.never_registered < 5/s; kernel_launch_rate < 500; "
                         "kernel_duration_p99 > 1h",
           1);
    deepwin_coordinator *coordinator;
    uint64_t opened_before, opened_after_fast, start;
    flare_sim_stream *stream;
    int kernel;
    /* A fast phase the machine did not hold up, within TEST_WAIT_SECONDS. */
    uint64_t give_up = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;
    while (!fast_phase(dir, sizeof(dir), &coordinator, &opened_before, &opened_after_fast, &stream,
                       &kernel, &start)) {
        if (test_now_ns() >= give_up)
            fail_msg("no fast phase in %d s kept above 200 launches a second", TEST_WAIT_SECONDS);
    }
    assert_int_equal(opened_after_fast, opened_before);
    /* Slow: about 20 a second, for at least 1.5 s and until the rule's window
     * has opened and closed (the rate only falls further when this thread
     * waits for a core). */
    uint64_t slow = flare_now_ns();
    for (;;) {
        uint64_t elapsed = flare_now_ns() - slow;
        int done = deepwin_opened_count(coordinator) > opened_before &&
                   !deepwin_blackout_active(coordinator);
        if (elapsed >= 1500 * MS && done)
            break;
        if (elapsed >= TEST_WAIT_SECONDS * 1000000000ull)
            fail_msg("the rule's window did not open and close in %d s", TEST_WAIT_SECONDS);
        launch(stream, kernel, 1);
        sleep_ms(50);
    }
    assert_int_equal(flare_sim_stream_synchronize(stream, 60000), FLARE_OK);
    /* The rule sees its window closed and is exhausted (its row is written
     * then). */
    TEST_WAIT_UNTIL(rule_stored_with_status(dir, 0, "exhausted"));
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_DEEP_WHEN");

    store *database;
    char error[512];
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), FLARE_OK);
    window_rows windows = {0};
    assert_int_equal(store_read_windows(database, collect_window, &windows), FLARE_OK);
    rule_rows rules = {0};
    assert_int_equal(store_read_rules(database, collect_rule, &rules), FLARE_OK);
    store_close(database);

    /* Exactly one window, opened by rule 1, with its cause. */
    assert_int_equal(windows.count, 1);
    assert_string_equal(windows.kind, "rule");
    assert_true(windows.row.has_cause);
    assert_int_equal(windows.row.rule_id, 1);
    assert_string_equal(windows.rule_text, LOW_RATE_RULE);
    assert_string_equal(windows.comparison, "<");
    assert_true(windows.row.threshold == 200.0);
    assert_int_equal(windows.row.rate_window_ns, 200 * MS);
    assert_int_equal(windows.row.sustained_ns, 300 * MS);
    assert_true(windows.row.first_true_ns > start);
    assert_true(windows.row.requested_ns >= windows.row.first_true_ns + 300 * MS);
    assert_true(windows.row.observed_value < 200.0);
    assert_true(windows.row.opened_ns != 0);
    assert_string_equal(windows.close_reason, "duration");
    assert_int_equal(windows.row.max_duration_ns, 200 * MS);

    /* Every rule's summary, the last one written. */
    assert_int_equal(rules.count, 4);
    assert_int_equal(rules.ids[0], 1);
    assert_string_equal(rules.text[0], LOW_RATE_RULE);
    assert_string_equal(rules.status[0], "exhausted");
    assert_int_equal(rules.fired[0], 1);
    assert_true(rules.times_true[0] >= 1);
    /* Written at exhaustion and again at shutdown: the later one stands. */
    assert_true(rules.sequence[0] > 1);
    assert_string_equal(rules.status[1], "metric missing");
    assert_true(rules.missing[1] > 0);
    assert_int_equal(rules.fired[1], 0);
    assert_string_equal(rules.status[2], "refused");
    assert_string_equal(rules.reason[2], "at column 22: '500' needs a unit: write 500/s");
    assert_string_equal(rules.status[3], "never true");
    assert_int_equal(rules.fired[3], 0);

    /* flare report shows the rules and the window. */
    const char *bin = getenv("FLARE_TEST_BIN_DIR");
    if (bin != NULL) {
        char command[512];
        snprintf(command, sizeof(command), "'%s/flare' report '%s' 2>&1", bin, dir);
        FILE *pipe = popen(command, "r");
        assert_non_null(pipe);
        static char output[65536];
        size_t length = fread(output, 1, sizeof(output) - 1, pipe);
        output[length] = '\0';
        assert_int_equal(pclose(pipe), 0);
        assert_non_null(strstr(output, "Deep-profiling rules"));
        assert_non_null(strstr(output, "exhausted"));
        assert_non_null(strstr(output, "never true"));
        assert_non_null(strstr(output, "metric missing"));
        assert_non_null(strstr(output, "'500' needs a unit"));
        assert_non_null(strstr(output, "rule 1: kernel_launch_rate < 200/s")); /* cut to 44 */
    }
    test_remove_dir(dir);
}

/* ---- kernel-duration readings when the backend holds completions back ----
 * What happened on the H200: CUPTI hands kernel records over only when an
 * activity buffer is full, so at a low launch rate a kernel_duration rule
 * saw no completed kernel in its window and read "metric missing" for the
 * whole run. The simulated device holds completions back the same way
 * (sim_fault.hold_completions); the session's delivery thread
 * (FLARE_DELIVERY_MS) is what asks for them. */

#define DURATION_RULE                                                                              \
    "kernel_duration_p99 > 1ms for 200ms over 500ms bucket 100ms deep_for 100ms max_windows 1"

static void two_ms_kernel(const flare_sim_launch *launch)
{
    (void)launch;
    sleep_ms(2);
}

typedef struct delay_stats {
    int64_t rows;
    int64_t worst_ns;
} delay_stats;

static int collect_delay(const store_metric_stats *stats, void *user)
{
    delay_stats *delay = user;
    if (stats->device == -1 && strcmp(stats->name, "kernel_delivery_delay_ns") == 0) {
        delay->rows = stats->count;
        delay->worst_ns = stats->maximum;
    }
    return 0;
}

/* Runs 2 ms kernels with completions held back, until the rule's window has
 * opened or until_ms have passed (at least min_ms); returns the database's
 * rules, windows and delivery delays. */
static void run_held(const char *delivery_ms, uint64_t min_ms, uint64_t until_ms, rule_rows *rules,
                     window_rows *windows, delay_stats *delay)
{
    sim_engine_reset();
    char dir[128];
    test_make_temp_dir(dir, sizeof(dir), "rules-held");
    setenv("FLARE_DEEP_WHEN", DURATION_RULE, 1);
    if (delivery_ms != NULL)
        setenv("FLARE_DELIVERY_MS", delivery_ms, 1);
    else
        unsetenv("FLARE_DELIVERY_MS");
    sim_fault fault = {.hold_completions = SIM_HELD_MAX};
    sim_fault_set(&fault);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 100;
    assert_int_equal(flare_init(&options), FLARE_OK);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    assert_non_null(coordinator);
    uint64_t opened_before = deepwin_opened_count(coordinator);
    int kernel;
    assert_int_equal(flare_sim_kernel_register("rules_two_ms", two_ms_kernel, &kernel), FLARE_OK);
    flare_sim_stream *stream;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    /* One launch per 5 ms or more: at most 4,000 in 20 s, under the
     * SIM_HELD_MAX that would hand the held ones over by itself. */
    uint64_t start = flare_now_ns();
    for (;;) {
        uint64_t elapsed = flare_now_ns() - start;
        int opened = deepwin_opened_count(coordinator) > opened_before;
        if ((elapsed >= min_ms * MS && opened) || elapsed >= until_ms * MS)
            break;
        launch(stream, kernel, 1);
        sleep_ms(5);
    }
    assert_int_equal(flare_sim_stream_synchronize(stream, 60000), FLARE_OK);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    sim_fault_set(NULL);
    unsetenv("FLARE_DEEP_WHEN");
    unsetenv("FLARE_DELIVERY_MS");

    store *database;
    char error[512];
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), FLARE_OK);
    assert_int_equal(store_read_rules(database, collect_rule, rules), FLARE_OK);
    assert_int_equal(store_read_windows(database, collect_window, windows), FLARE_OK);
    assert_int_equal(store_read_metric_stats(database, collect_delay, delay), FLARE_OK);
    store_close(database);
    test_remove_dir(dir);
}

/* The cause, reproduced: nobody asks for the held completions, so the rule
 * never sees a kernel. */
static void test_duration_rule_misses_held_completions(void **state)
{
    (void)state;
    rule_rows rules = {0};
    window_rows windows = {0};
    delay_stats delay = {0};
    run_held("0", 1500, 1500, &rules, &windows, &delay);
    assert_int_equal(rules.count, 1);
    assert_string_equal(rules.status[0], "metric missing");
    assert_true(rules.missing[0] > 0);
    assert_int_equal(rules.fired[0], 0);
    assert_int_equal(windows.count, 0);
    assert_int_equal(delay.rows, 0); /* no kernel reached the collector */
}

/* The fix: the delivery thread asks every 100 ms; the rule fires, and the
 * delay of every kernel record is on record. */
static void test_duration_rule_fires_with_delivery(void **state)
{
    (void)state;
    rule_rows rules = {0};
    window_rows windows = {0};
    delay_stats delay = {0};
    run_held(NULL, 0, 20000, &rules, &windows, &delay); /* the bound: see run_held */
    assert_int_equal(rules.count, 1);
    assert_int_equal(rules.fired[0], 1);
    assert_int_equal(windows.count, 1);
    assert_string_equal(windows.kind, "rule");
    assert_true(windows.row.observed_value > 1e6);
    assert_true(delay.rows > 0);
    assert_true(delay.worst_ns > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rule_opens_one_window, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_duration_rule_misses_held_completions, reset_all,
                                        reset_all),
        cmocka_unit_test_setup_teardown(test_duration_rule_fires_with_delivery, reset_all,
                                        reset_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
