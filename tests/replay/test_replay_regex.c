/*
 * test_replay_regex.c: the cost check on kernel regular expressions
 * (replay_regex_check, replay.h), which fuzz/fuzz_trace_options made
 * necessary: `flare replay --kernel` with stacked or nested repetitions
 * ("a" and a run of '+') made glibc's regcomp take gigabytes, in the
 * command and in every traced process that compiled the selection.
 *
 * The check must refuse every expression whose repetitions multiply past
 * REPLAY_REGEX_COST_MAX nodes, however they are written (stacked, nested,
 * intervals, around what matches nothing), and accept the expressions
 * people write, which regcomp then compiles as before. No threads, no device: the selection is
 * applied and cleared in the test process.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "flare/flare.h"
#include "replay/replay.h"

/* pattern, repeated count times after prefix and before suffix. */
static void repeat(char *out, size_t size, const char *prefix, const char *pattern, int count,
                   const char *suffix)
{
    size_t used = (size_t)snprintf(out, size, "%s", prefix);
    for (int i = 0; i < count && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s", pattern);
    if (used < size)
        snprintf(out + used, size - used, "%s", suffix);
}

static void expect_refused(const char *pattern)
{
    char error[512] = "";
    if (replay_regex_check(pattern, error, sizeof error) != FLARE_ERR_INVALID_ARGUMENT)
        fail_msg("accepted: %s", pattern);
    assert_non_null(strstr(error, "repeats too much to compile"));
}

static void expect_accepted(const char *pattern)
{
    char error[512] = "";
    if (replay_regex_check(pattern, error, sizeof error) != FLARE_OK)
        fail_msg("refused: %s: %s", pattern, error);
    regex_t compiled;
    assert_int_equal(regcomp(&compiled, pattern, REG_EXTENDED | REG_NOSUB), 0);
    regfree(&compiled);
}

/* Stacked, nested and interval repetitions past the bound. */
static void test_costly_expressions_refused(void **state)
{
    (void)state;
    char pattern[256];
    repeat(pattern, sizeof pattern, "sa", "+", 17, "xpy"); /* 2^17 */
    expect_refused(pattern);
    repeat(pattern, sizeof pattern, "a", "+", 200, "");
    expect_refused(pattern);
    repeat(pattern, sizeof pattern, "", "(", 16, "a");
    for (int i = 0; i < 16; i++)
        strcat(pattern, ")+");
    expect_refused(pattern);
    expect_refused("a{200}{200}");
    expect_refused("(ab{100}){400}");
    expect_refused("x{2000}");
    expect_refused("a{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}");
    expect_refused("(a|b{300}){300}");
    /* Repetitions of what can match nothing: the epsilon closures grow
     * with the square ("a", 60 '*' and 8 '+' took 2 GB and 30 s). */
    repeat(pattern, sizeof pattern, "a", "*", 60, "++++++++");
    expect_refused(pattern);
    repeat(pattern, sizeof pattern, "", "(", 40, "a");
    for (int i = 0; i < 40; i++)
        strcat(pattern, ")*");
    strcat(pattern, "++++++");
    expect_refused(pattern);
    /* A group never closed still counts. */
    expect_refused("((a{200}){200}");
}

/* What people write, and repetitions that stay under the bound. */
static void test_ordinary_expressions_accepted(void **state)
{
    (void)state;
    expect_accepted("^saxpy$");
    expect_accepted("^(gemm|gemv)_[0-9]+.*kernel$");
    expect_accepted("void gemm<float, 128>\\(.*\\)");
    expect_accepted("[[:alpha:]_]+[+]{2}[]a-z]*");
    expect_accepted("a\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+");
    expect_accepted("x{1000}");
    expect_accepted("a{30}{30}");
    expect_accepted("(((((a+)+)+)+)+)+"); /* 2^6 */
    expect_accepted("(a*){300}");
    expect_accepted("a*?*?*?*?*?*?*?*?");
    /* Malformed is regcomp's to refuse, with its own message. */
    char error[512];
    assert_int_equal(replay_regex_check("{1}a{,2}(", error, sizeof error), FLARE_OK);
}

/* The selection refuses it too (a traced process reads it from
 * FLARE_REPLAY_KERNEL), before regcomp, and installs nothing. */
static void test_selection_refuses_before_compiling(void **state)
{
    (void)state;
    replay_selection selection;
    memset(&selection, 0, sizeof selection);
    repeat(selection.kernel_regex, sizeof selection.kernel_regex, "sa", "+", 17, "xpy");
    char error[512] = "";
    assert_int_equal(replay_selection_apply(&selection, error, sizeof error),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "repeats too much to compile"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_costly_expressions_refused),
        cmocka_unit_test(test_ordinary_expressions_accepted),
        cmocka_unit_test(test_selection_refuses_before_compiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
