/*
 * test_deep_budget_cli.c: engine auto on the command line (issue 26, item
 * 3): `flare trace --deep-engine auto` and `--deep-budget PCT`. Every bad
 * budget, and a budget with no window that can use engine auto, is a usage
 * error (exit 2) that names the fix, and nothing runs; good values reach the
 * command as FLARE_DEEP_ENGINE / FLARE_DEEP_BUDGET; a rule's `engine auto`
 * passes `flare rules check`. End to end on the simulated device: scheduled
 * auto windows in real traces of window_target (which runs until told to
 * stop, whatever the machine's speed), whose windows rows name the engine
 * that ran and why (engine_reason "auto: ..."), or the refusal. Runs the
 * built flare (FLARE_TEST_BIN_DIR) in child processes; never sleeps to
 * synchronise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_flare.h"
#include "flare/flare.h"
#include "test_util.h"

#ifndef WINDOW_TARGET_PATH
#error "WINDOW_TARGET_PATH names window_target (tests/cli/CMakeLists.txt)"
#endif

static pid_t started; /* a trace not yet waited for: stopped by teardown */

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    unsetenv("FLARE_DEEP_WHEN");
    unsetenv("FLARE_DEEP_BUDGET");
    test_make_temp_dir(scratch, sizeof(scratch), "deep-budget-cli");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (started > 0) {
        kill(started, SIGTERM); /* forwarded to its command */
        waitpid(started, NULL, 0);
        started = 0;
    }
    test_remove_dir(scratch);
    return 0;
}

/* A usage error must leave no session behind: nothing was prepared or run. */
static void expect_usage(int status, const char *message)
{
    assert_int_equal(status, 2);
    expect_contains(err_text, message);
    expect_contains(err_text, "Run 'flare trace --help' for usage.");
    struct stat info;
    char path[400];
    snprintf(path, sizeof(path), "%s/out", scratch);
    assert_int_not_equal(stat(path, &info), 0);
}

#define AUTO_SCHEDULE "--deep-after", "1s", "--deep-for", "1s", "--deep-engine", "auto"

static void test_bad_budgets_are_usage_errors(void **state)
{
    (void)state;
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "0%", "--", "true"),
                 "flare trace: '--deep-budget 0%': '0%' must be more than 0%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "101%", "--", "true"),
                 "flare trace: '--deep-budget 101%': '101%' is more than 100%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "5", "--", "true"),
                 "flare trace: '--deep-budget 5': '5' needs a percent sign: write 5%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "abc", "--", "true"),
                 "flare trace: '--deep-budget abc': 'abc' is not a percentage: write a number "
                 "and %, e.g. 5%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", ".5%", "--", "true"),
                 "'--deep-budget .5%': '.5%' needs a digit before the decimal point: write 0.5%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "", "--", "true"),
                 "'--deep-budget ': a deep budget is a percentage, e.g. 5%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget"),
                 "flare trace: option '--deep-budget' needs a percentage, e.g. --deep-budget 5%");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "--", "true"),
                 "option '--deep-budget' needs a percentage");
    expect_usage(FLARE("trace", "-o", "out", AUTO_SCHEDULE, "--deep-budget", "5%", "--deep-budget",
                       "6%", "--", "true"),
                 "option '--deep-budget' given twice");
}

static void test_budget_needs_engine_auto(void **state)
{
    (void)state;
    const char *message = "flare trace: '--deep-budget 5%' applies only to engine auto: add "
                          "--deep-engine auto (with --deep-after and --deep-for) or a "
                          "--deep-when rule with 'engine auto'";
    expect_usage(FLARE("trace", "-o", "out", "--deep-budget", "5%", "--", "true"), message);
    expect_usage(FLARE("trace", "-o", "out", "--deep-budget", "5%", "--deep-after", "1s",
                       "--deep-for", "1s", "--deep-engine", "pc", "--", "true"),
                 message);
    expect_usage(FLARE("trace", "-o", "out", "--deep-budget", "5%", "--deep-after", "1s",
                       "--deep-for", "1s", "--", "true"),
                 message);
    expect_usage(FLARE("trace", "-o", "out", "--deep-budget", "5%", "-q", "--deep-when",
                       "kernel_launch_rate < 500/s for 2s engine pc", "--", "true"),
                 message);
    /* Checked before the rest whichever order they came in: a bad budget first. */
    expect_usage(FLARE("trace", "-o", "out", "--deep-budget", "0%", "--", "true"),
                 "'--deep-budget 0%': '0%' must be more than 0%");
}

static void test_auto_and_budget_reach_the_command(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "run1", "-q", "--deep-budget", "0.5%", AUTO_SCHEDULE,
                           "--", "sh", "-c", "echo \"[$FLARE_DEEP_ENGINE|$FLARE_DEEP_BUDGET]\""),
                     0);
    expect_contains(out_text, "[auto|0.5%]");
    /* Without a budget: none is passed on (each process uses 5%). */
    assert_int_equal(FLARE("trace", "-o", "run2", "-q", AUTO_SCHEDULE, "--", "sh", "-c",
                           "echo \"[$FLARE_DEEP_ENGINE|${FLARE_DEEP_BUDGET-unset}]\""),
                     0);
    expect_contains(out_text, "[auto|unset]");
    /* A rule's engine auto takes the budget too. */
    assert_int_equal(FLARE("trace", "-o", "run3", "--deep-when",
                           "kernel_launch_rate < 500/s for 2s engine auto", "--deep-budget",
                           "12.5%", "--", "sh", "-c", "echo \"[$FLARE_DEEP_BUDGET]\""),
                     0);
    expect_contains(out_text, "[12.5%]");
    expect_contains(err_text, "flare: rule 1 accepted: kernel_launch_rate < 500/s for 2s over 1s "
                              "bucket 100ms rearm 500/s stale_after 4100ms cooldown 10s "
                              "max_windows 3 deep_for 2s deep_launches 100000 engine auto");
    /* The messages name every engine. */
    expect_usage(FLARE("trace", "-o", "out", "--deep-after", "1s", "--deep-for", "1s",
                       "--deep-engine", "sas", "--", "true"),
                 "'--deep-engine sas': use pm (PM sampling, the default), pc (PC sampling), sass "
                 "(SASS metrics) or auto (the deepest within the deep budget)");
    expect_usage(FLARE("trace", "-o", "out", "--deep-engine"),
                 "option '--deep-engine' needs pm, pc, sass or auto");
}

static void test_rules_check_and_help(void **state)
{
    (void)state;
    assert_int_equal(FLARE("rules", "check", "gpu0.utilization < 20% engine auto"), 0);
    expect_contains(out_text, "ok: gpu0.utilization < 20% for 0s over 1s bucket 100ms rearm 20% "
                              "stale_after 2100ms cooldown 10s max_windows 3 deep_for 2s "
                              "deep_launches 100000 engine auto\n");
    assert_int_equal(FLARE("rules", "check", "gpu0.utilization < 20% engine auto action replay"),
                     1);
    expect_contains(out_text, "engine applies to action window");
    assert_int_equal(FLARE("trace", "--help"), 0);
    expect_contains(out_text, "[--deep-engine pm|pc|sass|auto]] [--deep-budget PCT]");
    expect_contains(out_text, "  --deep-budget PCT  the deep budget of engine auto");
    expect_contains(out_text, "e.g. 0.5%; default 5%.");
    expect_contains(out_text, "the command as FLARE_DEEP_BUDGET.");
}

/* ---- end to end ---- */

/* The first column of the first row of sql on scratch/name's database, or
 * -1 when it cannot be read (yet). */
static long long query_number(const char *name, const char *sql)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s/session.db", scratch, name);
    if (access(path, F_OK) != 0)
        return -1;
    sqlite3 *db = NULL;
    long long value = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *statement = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW)
            value = sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return value;
}

/* `flare trace -q -o name --deep-after 50ms --deep-for 100ms --deep-engine
 * auto [--deep-budget budget] -- window_target stop`, in the background
 * until its window is written, then stopped; its exit status must be 0. */
static void trace_one_auto_window(const char *name, const char *budget)
{
    char flare[1100], log[700], stop[700];
    snprintf(flare, sizeof(flare), "%s/flare", bin_dir);
    snprintf(log, sizeof(log), "%s/%s.out", scratch, name);
    snprintf(stop, sizeof(stop), "%s/stop-%s", scratch, name);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        if (chdir(scratch) != 0)
            _exit(99);
        const char *arguments[] = {"flare",
                                   "trace",
                                   "-q",
                                   "-o",
                                   name,
                                   "--deep-after",
                                   "50ms",
                                   "--deep-for",
                                   "100ms",
                                   "--deep-engine",
                                   "auto",
                                   "--deep-budget",
                                   budget,
                                   "--",
                                   WINDOW_TARGET_PATH,
                                   stop,
                                   NULL};
        if (budget == NULL) /* leave --deep-budget out */
            memmove(&arguments[11], &arguments[13], 4 * sizeof(arguments[0]));
        execv(flare, (char *const *)arguments);
        _exit(98);
    }
    started = pid;
    /* The row is written once the window has finished (closed or refused). */
    TEST_WAIT_UNTIL(query_number(name, "SELECT COUNT(*) FROM windows") >= 1);
    int fd = open(stop, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    int status = 0;
    pid_t waited;
    while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    assert_int_equal(waited, pid);
    started = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        cli_read_file(log, out_text, sizeof(out_text));
        fail_msg("flare trace of %s ended with status %d:\n%s", name, status, out_text);
    }
}

static void expect_one_window(const char *name, const char *where)
{
    char sql[700];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM windows WHERE token_kind = 'scheduled' AND %s",
             where);
    if (query_number(name, "SELECT COUNT(*) FROM windows") != 1 || query_number(name, sql) != 1) {
        char command[1400];
        snprintf(command, sizeof(command), "%s/flare report %s/%s", bin_dir, scratch, name);
        fail_msg("no window of %s where %s (see: %s)", name, where, command);
    }
}

static void test_auto_windows_end_to_end(void **state)
{
    (void)state;
    /* window_target launches under 1,000 kernels a second: the simulated
     * PC sampling engine (nominal 1000 ns a launch + 2%) fits 5%. */
    trace_one_auto_window("default", NULL);
    expect_one_window("default", "engine = 'sim-pc-sampling' AND engine_status = 'disarmed' AND "
                                 "engine_reason LIKE 'auto: pc, about 2% at % launches/s (budget "
                                 "5%); sass about 500% is over the budget'");
    /* 1.5%: only the simulated PM engine (500 ns a launch + 1%) fits. */
    trace_one_auto_window("pm", "1.5%");
    expect_one_window("pm", "engine = 'sim-pm' AND engine_status = 'disarmed' AND engine_reason "
                            "LIKE 'auto: pm, about 1% at % launches/s (budget 1.5%); sass about "
                            "500% is over the budget; pc about 2% is over the budget'");
    /* 0.5%: nothing fits; the window is refused and says why. */
    trace_one_auto_window("refused", "0.5%");
    expect_one_window("refused", "engine = 'none' AND engine_status = 'refused' AND close_reason = "
                                 "'refused' AND opened_ns IS NULL AND engine_reason LIKE 'auto: "
                                 "no engine fits the 0.5% budget at % launches/s: sass about "
                                 "500%, pc about 2%, pm about 1%'");
    /* The report shows the engine that ran and why. */
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/pm", scratch);
    assert_int_equal(FLARE("report", dir), 0);
    expect_contains(out_text, "sim-pm");
    expect_contains(out_text, "auto: pm, about 1% at ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_budgets_are_usage_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_needs_engine_auto, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auto_and_budget_reach_the_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules_check_and_help, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auto_windows_end_to_end, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
