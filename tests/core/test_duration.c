/*
 * test_duration.c: the one duration parser and formatter (src/core/duration.c):
 * every unit, fractions converted exactly, overflow at 2^64 ns, zero, junk and
 * its messages, spans that are not NUL-terminated, bounds, the canonical form
 * and its round trip, and agreement with the rule grammar, which converts its
 * durations through the same parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/duration.h"
#include "flare/flare.h"
#include "rules/rule.h"

#define US  UINT64_C(1000)
#define MS  UINT64_C(1000000)
#define S   UINT64_C(1000000000)
#define MIN (60 * S)
#define H   (60 * MIN)

/* Scans a NUL-terminated text; returns the fault, the value in *ns. */
static core_duration_fault scan(const char *text, uint64_t *ns, char *error, size_t error_size)
{
    return core_duration_scan(text, strlen(text), ns, error, error_size);
}

static void expect_ns(const char *text, uint64_t expected)
{
    uint64_t ns = 0;
    char error[256] = "";
    core_duration_fault fault = scan(text, &ns, error, sizeof(error));
    if (fault != CORE_DURATION_FAULT_NONE)
        fail_msg("'%s' refused: %s", text, error);
    if (ns != expected)
        fail_msg("'%s' gave %llu ns, expected %llu", text, (unsigned long long)ns,
                 (unsigned long long)expected);
    assert_string_equal(error, "");
}

/* The refusal's fault and exact message; *out_ns is left alone. */
static void expect_refusal(const char *text, size_t length, core_duration_fault fault,
                           const char *message)
{
    uint64_t ns = 12345;
    char error[256] = "junk";
    assert_int_equal(core_duration_scan(text, length, &ns, error, sizeof(error)), fault);
    assert_string_equal(error, message);
    assert_int_equal(ns, 12345);
}

static void expect_form(const char *text, const char *message)
{
    expect_refusal(text, strlen(text), CORE_DURATION_FAULT_FORM, message);
}

static void test_every_unit(void **state)
{
    (void)state;
    expect_ns("7ns", 7);
    expect_ns("7us", 7 * US);
    expect_ns("7ms", 7 * MS);
    expect_ns("7s", 7 * S);
    expect_ns("7min", 7 * MIN);
    expect_ns("7h", 7 * H);
    expect_ns("500ms", 500 * MS);
    expect_ns("10us", 10 * US);
    /* Units are exact spellings. */
    expect_form("2S", "unknown unit 'S' in '2S': a duration is written in ns, us, ms, s, min or h");
    expect_form("2Ms",
                "unknown unit 'Ms' in '2Ms': a duration is written in ns, us, ms, s, min or h");
    expect_form("5sec",
                "unknown unit 'sec' in '5sec': a duration is written in ns, us, ms, s, min or h");
    expect_form("2m", "unknown unit 'm' in '2m': a duration is written in ns, us, ms, s, min or h");
    expect_form("1d", "unknown unit 'd' in '1d': a duration is written in ns, us, ms, s, min or h");
    expect_form("1hr",
                "unknown unit 'hr' in '1hr': a duration is written in ns, us, ms, s, min or h");
    expect_form("3µs", "unknown unit '\\xc2\\xb5s' in '3\\xc2\\xb5s': a duration is written in ns, "
                       "us, ms, s, min or h");
}

static void test_fractions_are_exact(void **state)
{
    (void)state;
    expect_ns("1.5s", 1500 * MS);
    expect_ns("0.5s", 500 * MS);
    expect_ns("1.25min", 75 * S);
    expect_ns("0.5h", 30 * MIN);
    expect_ns("1.5us", 1500);
    expect_ns("0.001us", 1);
    expect_ns("0.000000001s", 1);
    expect_ns("2.000s", 2 * S);
    expect_ns("00002s", 2 * S);
    expect_ns("0002.5000ms", 2500 * US);
    /* Values a binary fraction would round: exact here. */
    expect_ns("8.2s", 8200 * MS);
    expect_ns("1.005ms", 1005 * US);
    expect_ns("0.3s", 300 * MS);
    /* A long fraction that still comes to whole nanoseconds: 2.5e-12 h is 9 ns. */
    expect_ns("0.0000000000025h", 9);
    expect_ns("1.000000000000000000000000000000000000000000000000000000000000000000000s", S);
    /* Finer than a nanosecond: refused, never rounded or truncated. */
    expect_refusal("0.5ns", 5, CORE_DURATION_FAULT_TOO_FINE,
                   "'0.5ns' is finer than a duration can be: the smallest step is 1ns");
    expect_refusal("1.5ns", 5, CORE_DURATION_FAULT_TOO_FINE,
                   "'1.5ns' is finer than a duration can be: the smallest step is 1ns");
    expect_refusal("1.0000000001s", 13, CORE_DURATION_FAULT_TOO_FINE,
                   "'1.0000000001s' is finer than a duration can be: the smallest step is 1ns");
    expect_refusal("0.0000001ms", 11, CORE_DURATION_FAULT_TOO_FINE,
                   "'0.0000001ms' is finer than a duration can be: the smallest step is 1ns");
    expect_refusal("1.999999999999s", 15, CORE_DURATION_FAULT_TOO_FINE,
                   "'1.999999999999s' is finer than a duration can be: the smallest step is 1ns");
    expect_refusal("0.000000000001h", 15, CORE_DURATION_FAULT_TOO_FINE,
                   "'0.000000000001h' is finer than a duration can be: the smallest step is 1ns");
    /* The point needs digits on both sides. */
    expect_form(".5s", "'.5s' needs a digit before the decimal point: write 0.5s");
    expect_form("5.s", "'5.s' needs a digit after the decimal point");
    expect_form("5.", "'5.' needs a digit after the decimal point");
    expect_form("1.2.3s", "unknown unit '.3s' in '1.2.3s': a duration is written in ns, us, ms, "
                          "s, min or h");
    expect_form(".s", "expected a duration such as 2s, found '.s'");
}

static void test_overflow(void **state)
{
    (void)state;
    expect_ns("18446744073709551615ns", UINT64_MAX);
    expect_ns("000000000000000000000000000001s", S);
    expect_ns("5124095h", UINT64_C(5124095) * H);
    expect_ns("5124095.5h", UINT64_C(5124095) * H + 30 * MIN);
    const char *big = "'%s' is too large: a duration is at most 18446744073709551615ns (about 584 "
                      "years)";
    const char *texts[] = {
        "18446744073709551616ns", /* 2^64 */
        "18446744073709551620ns",
        "100000000000000000000ns", /* 21 significant digits */
        "99999999999999999999s",
        "5124096h",
        "5124095.6h", /* the fraction carries it over */
        "18446744073709551615us",
        "99999999999999999999999999999999999999999999999.5s",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char message[256], shown[64];
        size_t length = strlen(texts[i]);
        snprintf(shown, sizeof(shown), "%.48s%s", texts[i], length > 48 ? "..." : "");
        snprintf(message, sizeof(message), big, shown);
        expect_refusal(texts[i], length, CORE_DURATION_FAULT_TOO_LARGE, message);
    }
    /* Both too fine and too large: a whole part within 20 digits is called
     * too fine, as the rule grammar's other quantities do. */
    expect_refusal("18446744073709551615.5ns", 24, CORE_DURATION_FAULT_TOO_FINE,
                   "'18446744073709551615.5ns' is finer than a duration can be: the smallest "
                   "step is 1ns");
}

static void test_zero(void **state)
{
    (void)state;
    expect_ns("0s", 0);
    expect_ns("0ns", 0);
    expect_ns("000ms", 0);
    expect_ns("0.0h", 0);
    expect_form("0",
                "'0' needs a unit: write 0s (a duration is written in ns, us, ms, s, min or h)");
    /* Zero is a duration; whether it is allowed is the bounds'. */
    uint64_t ns = 7;
    char error[256];
    assert_int_equal(core_duration_parse("0s", 2, 0, 10 * S, &ns, error, sizeof(error)), FLARE_OK);
    assert_int_equal(ns, 0);
    ns = 7;
    assert_int_equal(core_duration_parse("0ms", 3, 1, UINT64_MAX, &ns, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "'0ms' must be more than zero");
    assert_int_equal(ns, 7);
}

static void test_junk_and_empty(void **state)
{
    (void)state;
    expect_refusal("", 0, CORE_DURATION_FAULT_FORM,
                   "expected a duration with a unit, e.g. 500ms, 2s or 1min");
    expect_refusal(NULL, 0, CORE_DURATION_FAULT_FORM,
                   "expected a duration with a unit, e.g. 500ms, 2s or 1min");
    expect_refusal(NULL, 5, CORE_DURATION_FAULT_FORM,
                   "expected a duration with a unit, e.g. 500ms, 2s or 1min");
    expect_form("30",
                "'30' needs a unit: write 30s (a duration is written in ns, us, ms, s, min or h)");
    expect_form(
        "1.5", "'1.5' needs a unit: write 1.5s (a duration is written in ns, us, ms, s, min or h)");
    expect_form("s", "expected a duration such as 2s, found 's'");
    expect_form("ms", "expected a duration such as 2s, found 'ms'");
    expect_form("abc", "expected a duration such as 2s, found 'abc'");
    expect_form("-2s", "'-2s' is negative: a duration is 0s or more");
    expect_form("+2s", "'+2s': write the number without a sign");
    expect_form("1e3ms", "'1e3ms': exponents are not accepted: write the number in full");
    expect_form("1E3ms", "'1E3ms': exponents are not accepted: write the number in full");
    expect_form("1e-3s", "'1e-3s': exponents are not accepted: write the number in full");
    expect_form("inf", "'inf' is not a number: expected a duration such as 2s");
    expect_form("Infinitys", "'Infinitys' is not a number: expected a duration such as 2s");
    expect_form("NaNs", "'NaNs' is not a number: expected a duration such as 2s");
    expect_form("0x10s",
                "unknown unit 'x10s' in '0x10s': a duration is written in ns, us, ms, s, min or h");
    expect_form("1,000s", "unknown unit ',000s' in '1,000s': a duration is written in ns, us, ms, "
                          "s, min or h");
    expect_form("1_000s", "unknown unit '_000s' in '1_000s': a duration is written in ns, us, ms, "
                          "s, min or h");
    /* Blanks: refused, with the joined text when that is a duration. */
    expect_form("2 s", "'2 s' has blanks in it: write 2s");
    expect_form(" 2s", "' 2s' has blanks in it: write 2s");
    expect_form("2s ", "'2s ' has blanks in it: write 2s");
    expect_form("2s\n", "'2s\\x0a' has blanks in it: write 2s");
    expect_form("1.5\tms", "'1.5\\x09ms' has blanks in it: write 1.5ms");
    expect_form("two s", "'two s' has blanks in it: a duration is one word, such as 2s");
    expect_form(" ", "' ' has blanks in it: a duration is one word, such as 2s");
}

static void test_lengths(void **state)
{
    (void)state;
    uint64_t ns = 0;
    char error[256];
    /* Only the span is read: the rule parser hands over tokens in place. */
    assert_int_equal(core_duration_scan("2s500", 2, &ns, error, sizeof(error)),
                     CORE_DURATION_FAULT_NONE);
    assert_int_equal(ns, 2 * S);
    assert_int_equal(core_duration_scan("1.5msXYZ", 5, &ns, error, sizeof(error)),
                     CORE_DURATION_FAULT_NONE);
    assert_int_equal(ns, 1500 * US);
    assert_int_equal(core_duration_scan("10min", 4, &ns, error, sizeof(error)),
                     CORE_DURATION_FAULT_FORM);
    assert_string_equal(error,
                        "unknown unit 'mi' in '10mi': a duration is written in ns, us, ms, s, min "
                        "or h");
    expect_refusal("2s", 1, CORE_DURATION_FAULT_FORM,
                   "'2' needs a unit: write 2s (a duration is written in ns, us, ms, s, min or h)");
    /* A span with no NUL at its end: a buffer of exactly its bytes. */
    char exact[3] = {'4', 'm', 's'};
    assert_int_equal(core_duration_scan(exact, sizeof(exact), &ns, error, sizeof(error)),
                     CORE_DURATION_FAULT_NONE);
    assert_int_equal(ns, 4 * MS);
    /* A NUL inside the span is a byte like any other. */
    expect_refusal(
        "2\0s", 3, CORE_DURATION_FAULT_FORM,
        "unknown unit '\\x00s' in '2\\x00s': a duration is written in ns, us, ms, s, min "
        "or h");
    /* A long text is quoted up to 48 characters. */
    char long_text[80];
    memset(long_text, '1', 60);
    memcpy(long_text + 60, "parsecs", 8);
    uint64_t before = ns;
    assert_int_equal(core_duration_scan(long_text, strlen(long_text), &ns, error, sizeof(error)),
                     CORE_DURATION_FAULT_FORM);
    assert_non_null(strstr(error, "in '111111111111111111111111111111111111111111111111...': a "
                                  "duration is written in"));
    assert_int_equal(ns, before);
    /* Small, one-byte and absent error buffers. */
    char small[8];
    assert_int_equal(core_duration_scan("5sec", 4, &ns, small, sizeof(small)),
                     CORE_DURATION_FAULT_FORM);
    assert_string_equal(small, "unknown");
    char one[1] = {'x'};
    assert_int_equal(core_duration_scan("5sec", 4, &ns, one, sizeof(one)),
                     CORE_DURATION_FAULT_FORM);
    assert_int_equal(one[0], '\0');
    assert_int_equal(core_duration_scan("5sec", 4, &ns, NULL, 0), CORE_DURATION_FAULT_FORM);
    assert_int_equal(core_duration_scan("5s", 2, &ns, NULL, 0), CORE_DURATION_FAULT_NONE);
    assert_int_equal(ns, 5 * S);
    assert_int_equal(core_duration_parse("5sec", 4, 1, UINT64_MAX, &ns, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(core_duration_parse("0s", 2, 1, UINT64_MAX, &ns, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
}

static void test_bounds(void **state)
{
    (void)state;
    uint64_t ns = 99;
    char error[256];
    assert_int_equal(core_duration_parse("24h", 3, 1, 24 * H, &ns, error, sizeof(error)), FLARE_OK);
    assert_int_equal(ns, 24 * H);
    assert_int_equal(core_duration_parse("1ns", 3, 1, 24 * H, &ns, error, sizeof(error)), FLARE_OK);
    assert_int_equal(ns, 1);
    ns = 99;
    assert_int_equal(core_duration_parse("25h", 3, 1, 24 * H, &ns, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "'25h' is more than the maximum, 24h");
    assert_int_equal(core_duration_parse("1440.5min", 9, 1, 24 * H, &ns, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "'1440.5min' is more than the maximum, 24h");
    assert_int_equal(core_duration_parse("5ms", 3, 10 * MS, 10 * MIN, &ns, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "'5ms' is less than the minimum, 10ms");
    assert_int_equal(core_duration_parse("1500ms", 6, 1, 1500 * MS - 1, &ns, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "'1500ms' is more than the maximum, 1499999999ns");
    assert_int_equal(ns, 99);
    /* A refusal of the text comes before the bounds. */
    assert_int_equal(core_duration_parse(".5s", 3, 1, 24 * H, &ns, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "'.5s' needs a digit before the decimal point: write 0.5s");
    assert_int_equal(
        core_duration_parse("18446744073709551616ns", 22, 0, UINT64_MAX, &ns, error, sizeof(error)),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "is too large"));
    assert_int_equal(ns, 99);
    /* The full range. */
    assert_int_equal(
        core_duration_parse("18446744073709551615ns", 22, 0, UINT64_MAX, &ns, error, sizeof(error)),
        FLARE_OK);
    assert_int_equal(ns, UINT64_MAX);
}

static void expect_text(uint64_t ns, const char *expected)
{
    char text[64];
    core_duration_format(ns, text, sizeof(text));
    assert_string_equal(text, expected);
}

static void test_format_and_round_trip(void **state)
{
    (void)state;
    expect_text(0, "0s");
    expect_text(1, "1ns");
    expect_text(999, "999ns");
    expect_text(US, "1us");
    expect_text(1500 * US, "1500us");
    expect_text(1500 * MS, "1500ms");
    expect_text(2 * S, "2s");
    expect_text(60 * S, "1min");
    expect_text(90 * S, "90s");
    expect_text(2 * MIN, "2min");
    expect_text(90 * MIN, "90min");
    expect_text(H, "1h");
    expect_text(24 * H, "24h");
    expect_text(4100 * MS, "4100ms");
    expect_text(UINT64_MAX, "18446744073709551615ns");
    /* Cut like snprintf. */
    char small[4] = "xyz";
    core_duration_format(1500 * MS, small, sizeof(small));
    assert_string_equal(small, "150");
    core_duration_format(1500 * MS, small, 0);
    assert_string_equal(small, "150");

    /* What it writes reads back to the same value. */
    const uint64_t values[] = {0,
                               1,
                               7,
                               999,
                               US,
                               1500 * US,
                               MS,
                               999 * MS,
                               S,
                               61 * S,
                               MIN,
                               H + 1,
                               3 * H,
                               24 * H,
                               600 * S,
                               UINT64_MAX,
                               UINT64_MAX - 1,
                               UINT64_C(5124095) * H};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char text[64];
        core_duration_format(values[i], text, sizeof(text));
        uint64_t back = values[i] + 1;
        assert_int_equal(scan(text, &back, NULL, 0), CORE_DURATION_FAULT_NONE);
        assert_int_equal(back, values[i]);
    }
}

/* The rule grammar converts its durations through core_duration_scan and
 * prints them with core_duration_format: a threshold accepts what the parser
 * accepts, with the same value, refuses what it refuses, and for the refusals
 * whose wording needs nothing from the rule says the same after the column. */
static void test_rules_agree(void **state)
{
    (void)state;
    const char *texts[] = {
        "7ns",
        "7us",
        "7ms",
        "7s",
        "7min",
        "1h",
        "1.5s",
        "0.5h",
        "0s",
        "2.000s",
        "00002s",
        "8.2s",
        "0.001us",
        "0.0000000000025h",
        ".5s",
        "5.s",
        "30",
        "1e3ms",
        "5sec",
        "2S",
        "0.5ns",
        "1.0000000001s",
        "+2s",
        "0x10s",
        "1,000s",
        "61min",
        "18446744073709551616ns",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char rule_text[128], rule_error[RULES_ERROR_MAX], error[256];
        snprintf(rule_text, sizeof(rule_text), "kernel_duration_p99 > %s", texts[i]);
        rules_rule rule;
        int rule_status = rules_parse(rule_text, &rule, rule_error, sizeof(rule_error));
        uint64_t ns = 0;
        core_duration_fault fault = scan(texts[i], &ns, error, sizeof(error));
        if (fault == CORE_DURATION_FAULT_NONE && ns <= H) {
            if (rule_status != FLARE_OK)
                fail_msg("'%s': the rule refused what the parser reads: %s", texts[i], rule_error);
            assert_int_equal(rule.threshold.value, ns);
            char shown[RULES_FORMAT_MAX], canonical[64];
            assert_int_equal(rules_format_quantity(rule.threshold, shown, sizeof(shown)), FLARE_OK);
            core_duration_format(ns, canonical, sizeof(canonical));
            assert_string_equal(shown, canonical);
            continue;
        }
        if (rule_status == FLARE_OK)
            fail_msg("'%s': the rule accepted what the parser refuses: %s", texts[i], error);
        if (fault == CORE_DURATION_FAULT_NONE || fault == CORE_DURATION_FAULT_TOO_LARGE)
            continue; /* the rule names its range instead */
        char expected[RULES_ERROR_MAX + 32];
        snprintf(expected, sizeof(expected), "at column 23: %s", error);
        assert_string_equal(rule_error, expected);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_unit),     cmocka_unit_test(test_fractions_are_exact),
        cmocka_unit_test(test_overflow),       cmocka_unit_test(test_zero),
        cmocka_unit_test(test_junk_and_empty), cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_bounds),         cmocka_unit_test(test_format_and_round_trip),
        cmocka_unit_test(test_rules_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
