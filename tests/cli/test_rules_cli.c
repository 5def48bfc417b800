/*
 * test_rules_cli.c: `flare rules check` and `flare trace --deep-when` as a
 * user meets them: the canonical form or the exact refusal for each rule,
 * exit codes (0 all accepted, 1 any refused, 2 usage), help that tells the
 * truth, and a trace that reports a refused rule, still runs the command,
 * and hands every rule to it in FLARE_DEEP_WHEN.
 * Runs the built flare (FLARE_TEST_BIN_DIR) in child processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_flare.h"
#include "rules/rule.h"
#include "test_util.h"

static const char launch_rate_canonical[] =
    "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 500/s stale_after 4100ms "
    "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000";

static void test_check_prints_canonical_forms(void **state)
{
    (void)state;
    assert_int_equal(FLARE("rules", "check", "kernel_launch_rate < 500/s for 2s"), 0);
    char expected[1024];
    snprintf(expected, sizeof(expected), "ok: %s\n", launch_rate_canonical);
    assert_string_equal(out_text, expected);
    assert_string_equal(err_text, "");

    /* The canonical form is itself a rule, checked to the same text. */
    assert_int_equal(FLARE("rules", "check", "--", launch_rate_canonical), 0);
    assert_string_equal(out_text, expected);

    /* Several arguments, and several rules in one argument. */
    assert_int_equal(FLARE("rules", "check", "gpu1.power > 300W",
                           "custom.tokens < 50/s for 5s; gpu0.memory_used > 60GiB"),
                     0);
    assert_string_equal(out_text,
                        "ok: gpu1.power > 300W for 0s over 1s bucket 100ms rearm 300W stale_after "
                        "2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches 100000\n"
                        "ok: custom.tokens < 50/s for 5s over 1s bucket 100ms rearm 50/s "
                        "stale_after 7100ms cooldown 10s max_windows 3 deep_for 2s deep_launches "
                        "100000\n"
                        "ok: gpu0.memory_used > 60GiB for 0s over 1s bucket 100ms rearm 60GiB "
                        "stale_after 2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches "
                        "100000\n");
}

static void test_check_refusals_exit_1(void **state)
{
    (void)state;
    assert_int_equal(FLARE("rules", "check", "kernel_launch_rate < 500 for 2s",
                           "kernel_launch_rate < 500/s for 2s",
                           "costum.tokens < 5/s; kernel_launch_rate < 500/s stale_after 3s for 2s"),
                     1);
    char expected[4096];
    snprintf(expected, sizeof(expected),
             "refused: kernel_launch_rate < 500 for 2s\n"
             "  at column 22: '500' needs a unit: write 500/s\n"
             "ok: %s\n"
             "refused: costum.tokens < 5/s\n"
             "  at column 1: unknown metric 'costum.tokens'; known metrics: kernel_launch_rate, "
             "kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, gpu<N>.utilization, "
             "gpu<N>.power, gpu<N>.sm_clock, gpu<N>.memory_used, custom.<counter>\n"
             "refused: kernel_launch_rate < 500/s stale_after 3s for 2s\n"
             "  stale_after 3s is too short: it must be longer than over + for + bucket = 1s + "
             "2s + 100ms = 3100ms, or the rule would go stale before it could gather the "
             "evidence to fire\n",
             launch_rate_canonical);
    assert_string_equal(out_text, expected);

    /* Empty rules: a whole argument, or an item of a list (whose columns
     * count in the argument, so the argument is shown). */
    assert_int_equal(FLARE("rules", "check", ""), 1);
    assert_string_equal(out_text, "refused: \n  the rule is empty\n");
    assert_int_equal(FLARE("rules", "check", "kernel_launch_rate < 500/s;"), 1);
    assert_string_equal(out_text, "ok: kernel_launch_rate < 500/s for 0s over 1s bucket 100ms "
                                  "rearm 500/s stale_after 2100ms cooldown 10s max_windows 3 "
                                  "deep_for 2s deep_launches 100000\n"
                                  "refused: kernel_launch_rate < 500/s;\n"
                                  "  empty rule after the ';' at column 27\n");
}

static void expect_usage_error(int code, const char *word)
{
    assert_int_equal(code, 2);
    expect_contains(err_text, word);
}

static void test_usage_errors(void **state)
{
    (void)state;
    expect_usage_error(FLARE("rules"), "missing the subcommand");
    expect_usage_error(FLARE("rules", "chek", "kernel_launch_rate < 5/s"),
                       "unknown subcommand 'chek'");
    expect_usage_error(FLARE("rules", "--bogus"), "'--bogus'");
    expect_usage_error(FLARE("rules", "check"), "no rules given");
    expect_usage_error(FLARE("rules", "check", "--"), "no rules given");
    expect_usage_error(FLARE("rules", "check", "--bogus", "kernel_launch_rate < 5/s"), "'--bogus'");
    expect_usage_error(FLARE("trace", "--deep-when"), "'--deep-when' needs a rule");
    expect_usage_error(FLARE("trace", "--deep-when", "--", "true"), "'--deep-when' needs a rule");
    expect_usage_error(FLARE("trace", "--deep-when", " ", "--", "true"),
                       "'--deep-when' needs a rule");
    expect_usage_error(FLARE("trace", "--deep-when", "-q", "--", "true"), "found '-q'");
}

static void test_help_tells_the_truth(void **state)
{
    (void)state;
    assert_int_equal(FLARE("--help"), 0);
    expect_contains(out_text, "rules    check deep-profiling rules");
    assert_int_equal(FLARE("rules", "--help"), 0);
    expect_contains(out_text, "usage: flare rules check RULE...");
    expect_contains(out_text, "opens a deep-profiling window when a rule fires");
    assert_null(strstr(out_text, "not built yet"));
    expect_contains(out_text, "docs/rules.md");
    assert_int_equal(FLARE("rules", "check", "--help"), 0);
    expect_contains(out_text, "usage: flare rules check RULE...");
    assert_int_equal(FLARE("trace", "--help"), 0);
    expect_contains(out_text, "--deep-when RULE");
    expect_contains(out_text,
                    "A rule that fires opens a\n                     deep-profiling window");
    assert_null(strstr(out_text, "not opened yet"));
}

/* Every rule reaches the command in FLARE_DEEP_WHEN, as written, joined
 * with "; "; a refused one is a usage error before anything runs (exit 2,
 * the rule and the way out named), so a typo is found before the run. */
static void test_trace_passes_rules_on(void **state)
{
    (void)state;
    char dir[512], seen[512], script[1200];
    snprintf(dir, sizeof(dir), "%s/session", scratch);
    snprintf(seen, sizeof(seen), "%s/seen.txt", scratch);
    snprintf(script, sizeof(script), "printf %%s \"$FLARE_DEEP_WHEN\" > '%s'; exit 3", seen);
    assert_int_equal(FLARE("trace", "-o", dir, "--deep-when", "kernel_launch_rate < 500/s for 2s",
                           "--deep-when", "gpu0.power > 300W; custom.tokens < 5/s", "--", "sh",
                           "-c", script),
                     3);
    char child[1024];
    cli_read_file(seen, child, sizeof(child));
    assert_string_equal(
        child, "kernel_launch_rate < 500/s for 2s; gpu0.power > 300W; custom.tokens < 5/s");
    char expected[1024];
    snprintf(expected, sizeof(expected), "flare: rule 1 accepted: %s\n", launch_rate_canonical);
    expect_contains(err_text, expected);
    expect_contains(err_text, "flare: rule 2 accepted: gpu0.power > 300W");
    expect_contains(err_text, "flare: rule 3 accepted: custom.tokens < 5/s");
    /* Rules do open windows: no note may say otherwise. */
    assert_null(strstr(err_text, "not opened yet"));

    /* A refused rule: exit 2, the reason, the rule, the way out; the command
     * never ran and no session was made. */
    char refused_dir[512];
    snprintf(refused_dir, sizeof(refused_dir), "%s/refused", scratch);
    assert_int_equal(remove(seen), 0);
    assert_int_equal(FLARE("trace", "-o", refused_dir, "--deep-when",
                           "kernel_launch_rate < 500/s for 2s", "--deep-when",
                           "gpu0.power > 300; custom.tokens < 5/s", "--", "sh", "-c", script),
                     2);
    expect_contains(err_text, "flare trace: --deep-when rule 2 is refused: at column 14: '300' "
                              "needs a unit: write 300W (a power is written in mW or W)\n"
                              "flare trace:   gpu0.power > 300\n"
                              "flare trace: nothing was run: correct the rule or leave it out "
                              "('flare rules check RULE' checks one without running anything)\n");
    assert_null(strstr(err_text, "accepted"));
    struct stat info;
    assert_int_not_equal(stat(seen, &info), 0);
    assert_int_not_equal(stat(refused_dir, &info), 0);

    /* Quiet: the refusal still says why; accepted rules are not listed. */
    snprintf(dir, sizeof(dir), "%s/quiet", scratch);
    assert_int_equal(FLARE("trace", "-q", "-o", dir, "--deep-when", "kernel_launch_rate < 500/s",
                           "--deep-when", "bogus", "--", "true"),
                     2);
    expect_contains(err_text, "--deep-when rule 2 is refused: ");
    assert_int_equal(
        FLARE("trace", "-q", "-o", dir, "--deep-when", "kernel_launch_rate < 500/s", "--", "true"),
        0);
    assert_null(strstr(err_text, "accepted"));
    assert_null(strstr(err_text, "not opened yet"));

    /* More rules than one run takes: refused too. */
    static char many[(RULES_LIST_MAX + 1) * 32];
    size_t used = 0;
    for (int i = 0; i <= RULES_LIST_MAX; i++)
        used += (size_t)snprintf(many + used, sizeof(many) - used, "%skernel_launch_rate < 5/s",
                                 i ? ";" : "");
    assert_int_equal(FLARE("trace", "-q", "-o", dir, "--deep-when", many, "--", "true"), 2);
    expect_contains(err_text, "33 --deep-when rules: at most 32 per run; nothing was run");

    /* Without --deep-when, the command's environment is left alone. */
    snprintf(dir, sizeof(dir), "%s/plain", scratch);
    snprintf(script, sizeof(script), "printf %%s \"${FLARE_DEEP_WHEN-unset}\" > '%s'", seen);
    unsetenv("FLARE_DEEP_WHEN");
    assert_int_equal(FLARE("trace", "-q", "-o", dir, "--", "sh", "-c", script), 0);
    cli_read_file(seen, child, sizeof(child));
    assert_string_equal(child, "unset");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "rules-cli");
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
        cmocka_unit_test(test_check_prints_canonical_forms),
        cmocka_unit_test(test_check_refusals_exit_1),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_help_tells_the_truth),
        cmocka_unit_test(test_trace_passes_rules_on),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
