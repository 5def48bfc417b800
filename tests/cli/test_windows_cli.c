/*
 * test_windows_cli.c: scheduled deep-profiling windows on the command line
 * (`flare trace --deep-after D --deep-for D`) and the windows section of
 * `flare report`: usage errors are exit 2 with a message that names the way
 * out, in either flag order, and nothing runs; good values reach the command
 * as FLARE_DEEP_AFTER / FLARE_DEEP_FOR; a session's windows are reported.
 * Also the launch-storm guard's rate (`--storm-rate`, FLARE_STORM_RATE)
 * and the recording mode (`--mode`, FLARE_MODE), refused or passed on the
 * same way; the light mode records no API calls on the simulated device.
 * Runs the built flare (FLARE_TEST_BIN_DIR) in child processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/capability.h"
#include "flare/flare.h"
#include "cli_flare.h"
#include "test_util.h"

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("FLARE_TEST_BIN_DIR");
    snprintf(bin_dir, sizeof(bin_dir), "%s", dir != NULL ? dir : "bin");
    test_make_temp_dir(scratch, sizeof(scratch), "windows-cli");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

/* A usage error must leave no session behind: nothing was prepared or run. */
static void expect_nothing_ran(void)
{
    struct stat info;
    char path[400];
    snprintf(path, sizeof(path), "%s/out", scratch);
    assert_int_not_equal(stat(path, &info), 0);
    expect_contains(err_text, "Run 'flare trace --help' for usage.");
}

static void test_bare_number_is_refused(void **state)
{
    (void)state;
    assert_int_equal(
        FLARE("trace", "-o", "out", "--deep-after", "30", "--deep-for", "2s", "--", "true"), 2);
    expect_contains(err_text, "flare trace: '--deep-after 30': '30' needs a unit: write 30s (a "
                              "duration is written in ns, us, ms, s, min or h)");
    expect_nothing_ran();
    assert_int_equal(
        FLARE("trace", "-o", "out", "--deep-after", "30s", "--deep-for", "2", "--", "true"), 2);
    expect_contains(err_text, "'--deep-for 2': '2' needs a unit: write 2s");
    expect_nothing_ran();
    /* Durations are read as in rules (core/duration.h): h is a unit, 'hours' is not. */
    assert_int_equal(FLARE("trace", "--deep-for", "2hours", "--deep-after", "1s", "--", "true"), 2);
    expect_contains(err_text, "'--deep-for 2hours': unknown unit 'hours' in '2hours': a duration "
                              "is written in ns, us, ms, s, min or h");
    assert_int_equal(FLARE("trace", "--deep-for", "2h", "--deep-after", "1s", "--", "true"), 2);
    expect_contains(err_text, "'--deep-for 2h': a window lasts at most 600 s");
    assert_int_equal(FLARE("trace", "--deep-after", "0s", "--deep-for", "1s", "--", "true"), 2);
    expect_contains(err_text, "'--deep-after 0s': '0s' must be more than zero");
    assert_int_equal(FLARE("trace", "--deep-after", "25h", "--deep-for", "1s", "--", "true"), 2);
    expect_contains(err_text, "'--deep-after 25h': '25h' is more than the maximum, 24h");
    assert_int_equal(FLARE("trace", "--deep-after", ".5s", "--deep-for", "1s", "--", "true"), 2);
    expect_contains(err_text, "'--deep-after .5s': '.5s' needs a digit before the decimal point: "
                              "write 0.5s");
    assert_int_equal(FLARE("trace", "--deep-after", "1s", "--deep-for", "0.5ns", "--", "true"), 2);
    expect_contains(err_text, "'--deep-for 0.5ns': '0.5ns' is finer than a duration can be: the "
                              "smallest step is 1ns");
    assert_int_equal(FLARE("trace", "--deep-after", "1s", "--deep-for", "11min", "--", "true"), 2);
    expect_contains(err_text, "'--deep-for 11min': a window lasts at most 600 s");
    assert_int_equal(FLARE("trace", "--deep-after"), 2);
    expect_contains(err_text, "option '--deep-after' needs a duration, e.g. --deep-after 30s");
}

static void test_one_without_the_other_is_refused_in_either_order(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "out", "--deep-for", "2s", "--", "true"), 2);
    expect_contains(err_text, "flare trace: '--deep-for 2s' needs '--deep-after' too: add "
                              "--deep-after DURATION (e.g. --deep-after 30s --deep-for 2s)");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--deep-after", "30s", "--", "true"), 2);
    expect_contains(err_text, "'--deep-after 30s' needs '--deep-for' too: add --deep-for "
                              "DURATION");
    expect_nothing_ran();
    /* Options after the lone flag do not change the answer. */
    assert_int_equal(FLARE("trace", "--deep-for", "2s", "-o", "out", "--quiet", "--", "true"), 2);
    expect_contains(err_text, "'--deep-for 2s' needs '--deep-after' too");
    expect_nothing_ran();
}

static void test_schedule_reaches_the_command(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "out", "--deep-for", "2s", "--quiet", "--deep-after",
                           "1.5s", "--", "sh", "-c",
                           "echo \"[$FLARE_DEEP_AFTER|$FLARE_DEEP_FOR]\""),
                     0);
    expect_contains(out_text, "[1.5s|2s]");
    assert_int_equal(FLARE("trace", "-o", "out2", "--deep-for", "250000us", "--quiet",
                           "--deep-after", "0.25h", "--", "sh", "-c",
                           "echo \"[$FLARE_DEEP_AFTER|$FLARE_DEEP_FOR]\""),
                     0);
    expect_contains(out_text, "[0.25h|250000us]");
    assert_int_equal(FLARE("trace", "--help"), 0);
    expect_contains(out_text, "--deep-after DURATION --deep-for DURATION");
}

static void test_deep_engine_is_checked_and_passed_on(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "out", "--deep-after", "1s", "--deep-for", "1s",
                           "--deep-engine", "sas", "--", "true"),
                     2);
    expect_contains(err_text, "flare trace: '--deep-engine sas': use pm (PM sampling, the "
                              "default), pc (PC sampling), sass (SASS metrics)");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--deep-engine", "pc", "--", "true"), 2);
    expect_contains(err_text, "'--deep-engine pc' is the scheduled window's engine: add "
                              "--deep-after DURATION --deep-for DURATION");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--deep-engine"), 2);
    expect_contains(err_text, "option '--deep-engine' needs pm, pc, sass or auto");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "-q", "--deep-engine", "pc", "--deep-after", "1s",
                           "--deep-for", "1s", "--", "sh", "-c", "echo \"[$FLARE_DEEP_ENGINE]\""),
                     0);
    expect_contains(out_text, "[pc]");
    assert_int_equal(FLARE("trace", "--help"), 0);
    expect_contains(out_text, "--deep-engine ENGINE");
}

static void test_storm_rate_is_checked_and_passed_on(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "out", "--storm-rate", "500", "--", "true"), 2);
    expect_contains(err_text, "flare trace: '--storm-rate 500': '500' is outside "
                              "1000..100000000 launches per second (0: off)");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--storm-rate", "50k", "--", "true"), 2);
    expect_contains(err_text, "unexpected 'k' after the number");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--storm-rate"), 2);
    expect_contains(err_text, "option '--storm-rate' needs launches per second");
    expect_nothing_ran();
    /* A bad value inherited from the environment: refused before CMD runs. */
    setenv("FLARE_STORM_RATE", "fast", 1);
    assert_int_equal(FLARE("trace", "-o", "out", "--", "true"), 2);
    expect_contains(err_text, "FLARE_STORM_RATE in the environment: 'fast' is not a number");
    expect_nothing_ran();
    /* The flag wins over the environment, and reaches the command. */
    assert_int_equal(FLARE("trace", "-o", "out", "-q", "--storm-rate", "20000/s", "--", "sh", "-c",
                           "echo \"[$FLARE_STORM_RATE]\""),
                     0);
    expect_contains(out_text, "[20000/s]");
    unsetenv("FLARE_STORM_RATE");
    assert_int_equal(FLARE("trace", "-o", "out2", "-q", "--storm-rate", "0", "--", "sh", "-c",
                           "echo \"[$FLARE_STORM_RATE]\""),
                     0);
    expect_contains(out_text, "[0]");
    assert_int_equal(FLARE("trace", "--help"), 0);
    expect_contains(out_text, "--storm-rate RATE");
}

static void test_mode_is_checked_and_passed_on(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "out", "--mode", "fast", "--", "true"), 2);
    expect_contains(err_text,
                    "flare trace: '--mode fast': 'fast' is not a mode: expected light, standard "
                    "or full");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--mode"), 2);
    expect_contains(err_text, "option '--mode' needs light, standard or full");
    expect_nothing_ran();
    assert_int_equal(FLARE("trace", "-o", "out", "--mode", "light", "--mode", "full", "--", "true"),
                     2);
    expect_contains(err_text, "option '--mode' given twice");
    expect_nothing_ran();
    /* What the light mode leaves out cannot be asked for beside it. */
    assert_int_equal(FLARE("trace", "-o", "out", "--mode", "light", "--deep-when",
                           "kernel_launch_rate > 5000/s for 1s", "--", "true"),
                     2);
    expect_contains(err_text, "a kernel_launch_rate rule needs host launch counts, which the "
                              "light mode does not record: use --mode standard");
    expect_nothing_ran();
    assert_int_equal(
        FLARE("trace", "-o", "out", "--storm-rate", "5000", "--mode", "light", "--", "true"), 2);
    expect_contains(err_text, "'--storm-rate 5000': the launch-storm guard needs host launch "
                              "counts, which the light mode does not record");
    expect_nothing_ran();
    /* The environment's mode is checked the same way, before CMD runs. */
    setenv("FLARE_MODE", "heavy", 1);
    assert_int_equal(FLARE("trace", "-o", "out", "--", "true"), 2);
    expect_contains(err_text, "FLARE_MODE: 'heavy' is not a mode");
    expect_nothing_ran();
    setenv("FLARE_MODE", "light", 1);
    assert_int_equal(
        FLARE("trace", "-o", "out", "--deep-when", "kernel_launch_rate < 5/s", "--", "true"), 2);
    expect_contains(err_text, "which the light mode does not record");
    expect_nothing_ran();
    /* The flag wins over the environment and reaches the command; a light
     * trace may still switch the guard off explicitly. */
    assert_int_equal(FLARE("trace", "-o", "out", "-q", "--mode", "full", "--", "sh", "-c",
                           "echo \"[$FLARE_MODE]\""),
                     0);
    expect_contains(out_text, "[full]");
    unsetenv("FLARE_MODE");
    assert_int_equal(FLARE("trace", "-o", "out2", "-q", "--mode", "light", "--storm-rate", "0",
                           "--", "sh", "-c", "echo \"[$FLARE_MODE]\""),
                     0);
    expect_contains(out_text, "[light]");
    assert_int_equal(FLARE("trace", "--help"), 0);
    expect_contains(out_text, "--mode MODE");
}

/* API calls recorded in a session (scratch/name/session.db). */
static int api_calls_in(const char *name)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s/session.db", scratch, name);
    sqlite3 *db = NULL;
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM api_calls", -1, &statement, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int count = sqlite3_column_int(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return count;
}

/* The mode decides what a process records: the simulated device's API
 * calls are left out in the light mode and kept in the default one. */
static void test_light_mode_records_no_api_calls(void **state)
{
    (void)state;
    char demo[1100];
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin_dir);
    assert_int_equal(FLARE("trace", "-q", "-o", "light", "--mode", "light", "--", demo, "20"), 0);
    assert_int_equal(FLARE("trace", "-q", "-o", "standard", "--", demo, "20"), 0);
    assert_int_equal(api_calls_in("light"), 0);
    assert_true(api_calls_in("standard") > 0);
}

/* Starts a session of this process in scratch/name (dir receives the path). */
static void start_session_in(char *dir, size_t size, const char *name)
{
    snprintf(dir, size, "%s/%s", scratch, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 5;
    assert_int_equal(flare_init(&options), FLARE_OK);
}

/* The launch-storm guard's untimed launches (a drop the CUDA tracer sets)
 * are said in the report's header, not only among the drops. */
static void test_report_says_launches_went_untimed(void **state)
{
    (void)state;
    char dir[400];
    start_session_in(dir, sizeof(dir), "storm");
    core_drops_set("storm_guard", "kernel launches counted but not timed (launch storm)", 188078);
    core_drops_set("storm_guard", "copies and memsets counted but not timed (launch storm)", 3);
    core_drops_set("ring", "thread 1", 5); /* another source: not added in */
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(FLARE("report", dir), 0);
    expect_contains(out_text, "  untimed    188078 more kernel launches and 3 copies/memsets, "
                              "counted but not timed during\n             launch storms");
    expect_contains(out_text, "storm_guard");
}

static void test_report_lists_windows(void **state)
{
    (void)state;
    char dir[400];
    start_session_in(dir, sizeof(dir), "session");
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 20;
    window.label = "from the cli test";
    assert_int_equal(flare_window_open(&window), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);

    assert_int_equal(FLARE("report", dir), 0);
    /* No storm, no word of untimed launches. */
    assert_null(strstr(out_text, "untimed"));
    expect_contains(out_text, "Deep-profiling windows (times from the session's start)");
    expect_contains(out_text, "manual 'from the cli test'");
    expect_contains(out_text, "sim-pm");
    if (strstr(out_text, " duration ") == NULL && strstr(out_text, " session end ") == NULL)
        fail_msg("no close reason in:\n%s", out_text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bare_number_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_without_the_other_is_refused_in_either_order,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_schedule_reaches_the_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_engine_is_checked_and_passed_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storm_rate_is_checked_and_passed_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mode_is_checked_and_passed_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_light_mode_records_no_api_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_lists_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_says_launches_went_untimed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
