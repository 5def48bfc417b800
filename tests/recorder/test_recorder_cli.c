/*
 * test_recorder_cli.c: `flare trace --keep DURATION --max-size BYTES` as a
 * user runs it: a bad value is a usage error (exit 2) that names the option
 * or the variable and runs nothing, leaving no session behind; --help
 * documents both; a good run evicts, says so as asked (not as lost data),
 * and its report carries the flight recorder's line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_run.h"
#include "test_util.h"

static char bin[4096];
static char out[65536], err[65536];

static int flare(const char *directory, const char *const *arguments)
{
    char program[4200];
    snprintf(program, sizeof(program), "%s/flare", bin);
    return cli_run_program(program, 0, arguments, directory, out, sizeof(out), err, sizeof(err));
}

static void expect_refused(const char *directory, const char *option, const char *value,
                           const char *message)
{
    const char *arguments[] = {"trace", "-o", "never-made", option, value, "--", "true", NULL};
    assert_int_equal(flare(directory, arguments), 2);
    if (strstr(err, message) == NULL)
        fail_msg("%s %s: expected '%s' in: %s", option, value, message, err);
    char path[4400];
    struct stat info;
    snprintf(path, sizeof(path), "%s/never-made", directory);
    assert_int_not_equal(stat(path, &info), 0); /* nothing prepared, nothing run */
}

static void test_bad_values_are_usage_errors(void **unused)
{
    (void)unused;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "rec-cli");
    expect_refused(dir, "--keep", "0s",
                   "flare trace: '--keep 0s': '0s' is less than the minimum, 1s");
    expect_refused(dir, "--keep", "10", "'--keep 10': '10' needs a unit: write 10s");
    expect_refused(dir, "--keep", "721h", "is more than the maximum, 720h");
    expect_refused(dir, "--max-size", "512MB", "'--max-size 512MB': '512MB': write 512M or 512MiB");
    expect_refused(dir, "--max-size", "2g", "units are upper-case: write 2G");
    expect_refused(dir, "--max-size", "100K", "'100K' is less than the minimum, 1M");
    expect_refused(dir, "--max-size", "", "option '--max-size' needs a non-empty value");
    const char *twice[] = {"trace", "--keep", "1s", "--keep", "2s", "--", "true", NULL};
    assert_int_equal(flare(dir, twice), 2);
    assert_non_null(strstr(err, "option '--keep' given twice"));
    const char *missing[] = {"trace", "--max-size", "--", "true", NULL};
    assert_int_equal(flare(dir, missing), 2);
    assert_non_null(strstr(err, "option '--max-size' needs a size, e.g. --max-size 2G"));

    /* From the environment: refused by the launcher before anything runs. */
    const char *plain[] = {"trace", "-o", "never-made", "--", "true", NULL};
    setenv("FLARE_KEEP", "soon", 1);
    assert_int_equal(flare(dir, plain), 2);
    unsetenv("FLARE_KEEP");
    assert_non_null(strstr(err, "FLARE_KEEP: expected a duration such as 2s, found 'soon'"));
    assert_non_null(strstr(err, "nothing was run"));
    setenv("FLARE_MAX_SIZE", "1.5", 1);
    assert_int_equal(flare(dir, plain), 2);
    unsetenv("FLARE_MAX_SIZE");
    assert_non_null(strstr(err, "FLARE_MAX_SIZE: '1.5' is not a whole number of bytes"));

    const char *help[] = {"trace", "--help", NULL};
    assert_int_equal(flare(dir, help), 0);
    assert_non_null(strstr(out, "--keep DURATION"));
    assert_non_null(strstr(out, "--max-size BYTES"));
    test_remove_dir(dir);
}

static void test_a_long_run_is_kept_bounded(void **unused)
{
    (void)unused;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "rec-cli-run");
    char demo[4200];
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin);
    /* About 3 s on our 2-core VM (minutes under TSan): a first eviction
     * needs a little over 2 s, so a very fast machine may evict nothing. */
    const char *arguments[] = {"trace", "-o", "s",  "--keep", "1s", "--max-size",
                               "64M",   "--", demo, "4000",   NULL};
    assert_int_equal(flare(dir, arguments), 0);
    assert_null(strstr(err, "not everything")); /* never said as data lost */
    char session[4400];
    snprintf(session, sizeof(session), "%s/s", dir);
    const char *report[] = {"report", session, NULL};
    assert_int_equal(flare(dir, report), 0);
    if (strstr(out, "flight_recorder        active") == NULL)
        fail_msg("no active flight_recorder capability:\n%s", out);
    if (strstr(err, "flare: flight recorder: ") == NULL) {
        test_remove_dir(dir); /* nothing evicted: nothing more to say */
        return;
    }
    if (strstr(out, "  detail     kept the last 1s in detail, the database under 64MiB (flight "
                    "recorder): ") == NULL)
        fail_msg("no flight recorder line in the report:\n%s", out);
    assert_non_null(strstr(out, "kernels evicted (older than --keep)"));
    test_remove_dir(dir);
}

static int set_up(void **unused)
{
    (void)unused;
    unsetenv("FLARE_KEEP");
    unsetenv("FLARE_MAX_SIZE");
    return cli_test_environment(bin, sizeof(bin));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_values_are_usage_errors),
        cmocka_unit_test(test_a_long_run_is_kept_bounded),
    };
    return cmocka_run_group_tests(tests, set_up, NULL);
}
