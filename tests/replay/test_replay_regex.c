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

static void expect_refused_because(const char *pattern, const char *why)
{
    char error[512] = "";
    if (replay_regex_check(pattern, error, sizeof error) != FLARE_ERR_INVALID_ARGUMENT)
        fail_msg("accepted: %s", pattern);
    if (strstr(error, why) == NULL)
        fail_msg("%s: refused with \"%s\", not \"%s\"", pattern, error, why);
}

static void expect_refused(const char *pattern)
{
    expect_refused_because(pattern, "repeats too much to compile");
}

static void expect_empty_repeat(const char *pattern, char repetition, size_t at)
{
    char why[64];
    snprintf(why, sizeof why, "('%c' at character %zu)", repetition, at);
    expect_refused_because(pattern, "repeats what can match nothing");
    expect_refused_because(pattern, why);
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
    expect_refused("(ab{,200}){200}");
    expect_refused("x{,2000}");
    /* Nested copies with optional parts: "((ab?){2,3}){2,3}..." 6 deep. */
    repeat(pattern, sizeof pattern, "", "(", 6, "ab?");
    for (int i = 0; i < 6; i++)
        strcat(pattern, "){2,3}");
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
    expect_accepted("a{0,3}b?c{2}d{1,}");
    expect_accepted("_{,2}gemm");
    expect_accepted("(_.*)?kernel(<.*>)?$");
    expect_accepted("(x|y+)*z");
    expect_accepted("^(a|b)+$");
    expect_accepted("(ab?)+");
    /* Malformed is regcomp's to refuse, with its own message. */
    char error[512];
    assert_int_equal(replay_regex_check("{1}a{,2}(", error, sizeof error), FLARE_OK);
}

/* Repetitions of what can match nothing: glibc's regcomp takes time
 * exponential in their nesting, far below the node bound ("-", twelve '?',
 * '+', five '?', "++++" took 26 s; "((a)?)+" nested 9 deep 67 s; "a?+" eight
 * times 4 s; "a", 60 '*' and 8 '+' 2 GB and 30 s; "^((a?){1,3}){150}$", no
 * loop at all, 6.7 s). Each refusal names the first such repetition. */
static void test_empty_repeats_refused(void **state)
{
    (void)state;
    expect_empty_repeat("-????????????+?????++++??????????????p", '?', 3);
    expect_empty_repeat("a?+?+?+?+?+?+?+?+p", '+', 3);
    expect_empty_repeat("a**", '*', 3);
    expect_empty_repeat("a*?*", '?', 3);
    expect_empty_repeat("((a)?)+", '+', 7);
    expect_empty_repeat("(a|)+", '+', 5);
    expect_empty_repeat("(a|b*)*", '*', 7);
    expect_empty_repeat("(a?b?){2,}", '{', 7);
    expect_empty_repeat("(a{0,2})+", '+', 9);
    expect_empty_repeat("(a*){300}", '{', 5);
    expect_empty_repeat("a??", '?', 3);
    expect_empty_repeat("^((a?){1,3}){150}$", '{', 7);
    expect_empty_repeat("(.*)?", '?', 5);
    /* "{,n}" is "{0,n}" to glibc: an interval like any other. */
    expect_empty_repeat("^((a?){,3}){,150}$", '{', 7);
    expect_empty_repeat("a{,3}+", '+', 6);
    expect_empty_repeat("(a{,}){2}", '{', 7);
    expect_empty_repeat("x()+", '+', 4);
    char pattern[256];
    repeat(pattern, sizeof pattern, "", "(", 9, "(a)");
    for (int i = 0; i < 9; i++)
        strcat(pattern, "?)+");
    expect_empty_repeat(pattern, '+', 15);
    /* A repetition with nothing before it is regcomp's to refuse or read. */
    char error[512];
    assert_int_equal(replay_regex_check("+a", error, sizeof error), FLARE_OK);
    assert_int_equal(replay_regex_check("(|a)", error, sizeof error), FLARE_OK);
}

/* Anchors and word edges inside a repetition: glibc duplicates nodes per
 * anchor context (bench_regex_check found 0.8 s with one in a repeated
 * group). Anchors outside repetitions stay accepted. */
static void test_repeated_anchors_refused(void **state)
{
    (void)state;
    static const struct {
        const char *pattern;
        const char *at;
    } cases[] = {
        {"(^)*", "('*' at character 4"},     {"(\\b)+", "('+' at character 5"},
        {"^+a", "('+' at character 2"},      {"(a|$){2}", "('{' at character 6"},
        {"x(\\<y)?", "('?' at character 7"}, {"x(^a|b){3}", "('{' at character 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_refused_because(cases[i].pattern, "repeats an anchor or a word edge");
        expect_refused_because(cases[i].pattern, cases[i].at);
    }
    expect_accepted("^(gemm|gemv)+$");
    expect_accepted("\\<sgemm_[0-9]+\\>");
    expect_accepted("(^|_)gemm($|_)");
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
        cmocka_unit_test(test_empty_repeats_refused),
        cmocka_unit_test(test_repeated_anchors_refused),
        cmocka_unit_test(test_selection_refuses_before_compiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
