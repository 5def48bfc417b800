/*
 * test_metric_labels.c: the replay metrics as people read them
 * (src/cli/metric_labels.c, compiled in with format.c): the labels of the
 * metrics flare's sets collect, the units guessed for unknown metrics from
 * their suffixes, values written in their units (NaN, 0, negative, huge,
 * infinite, and buffers too small), and names shortened with a middle
 * ellipsis counted in display characters, never splitting a UTF-8
 * sequence. Pure functions: no process, no file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/metric_labels.h"
#include "replay/replay.h"

#define ELLIPSIS "\xE2\x80\xA6"

/* ---- labels ---- */

static void expect_label(const char *metric, const char *name, cli_metric_unit unit, int of_peak,
                         int side)
{
    cli_metric_label label = cli_metric_label_of(metric);
    assert_string_equal(label.name, name);
    assert_int_equal(label.unit, unit);
    assert_int_equal(label.of_peak, of_peak);
    assert_int_equal(label.side, side);
}

static void test_known_metrics(void **state)
{
    (void)state;
    expect_label("gpu__time_duration.sum", "Duration", CLI_METRIC_UNIT_NANOSECONDS, 0, 0);
    expect_label("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput",
                 CLI_METRIC_UNIT_PERCENT, 1, 1);
    expect_label("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                 "Memory throughput", CLI_METRIC_UNIT_PERCENT, 1, 2);
    expect_label("dram__bytes_read.sum", "DRAM read", CLI_METRIC_UNIT_BYTES, 0, 2);
    expect_label("dram__bytes_write.sum", "DRAM write", CLI_METRIC_UNIT_BYTES, 0, 2);
    expect_label("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX throughput",
                 CLI_METRIC_UNIT_PERCENT, 1, 2);
    expect_label("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput",
                 CLI_METRIC_UNIT_PERCENT, 1, 2);
    expect_label("sm__cycles_active.avg", "SM active cycles", CLI_METRIC_UNIT_CYCLES, 0, 1);
    expect_label("smsp__inst_executed.sum", "Instructions executed", CLI_METRIC_UNIT_COUNT, 0, 1);
    /* Occupancy is a percentage of what an SM holds, not a throughput. */
    expect_label("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved occupancy",
                 CLI_METRIC_UNIT_PERCENT, 0, 1);
    expect_label("lts__t_sector_hit_rate.pct", "L2 hit rate", CLI_METRIC_UNIT_PERCENT, 0, 2);
    expect_label("lts__t_bytes.sum", "L2 bytes", CLI_METRIC_UNIT_BYTES, 0, 2);
    expect_label("l1tex__t_bytes.sum", "L1/TEX bytes", CLI_METRIC_UNIT_BYTES, 0, 2);
    expect_label("launch__grid_size", "Grid size", CLI_METRIC_UNIT_NONE, 0, 0);
    expect_label("launch__thread_count", "Threads", CLI_METRIC_UNIT_NONE, 0, 0);
}

/* Every metric of every set flare offers has a label of its own, so the
 * table cannot drift from src/replay/replay_selection.c. */
static void test_every_set_metric_is_known(void **state)
{
    (void)state;
    size_t count = 0;
    const replay_metric_set *sets = replay_metric_sets(&count);
    assert_true(count > 0);
    for (size_t set = 0; set < count; set++) {
        char list[2048];
        snprintf(list, sizeof(list), "%s", sets[set].metrics);
        for (char *save = NULL, *metric = strtok_r(list, ",", &save); metric != NULL;
             metric = strtok_r(NULL, ",", &save)) {
            if (cli_metric_rank(metric) < 0)
                fail_msg("set %s: metric %s has no label", sets[set].name, metric);
            assert_string_not_equal(cli_metric_label_of(metric).name, metric);
        }
    }
}

static void test_rank(void **state)
{
    (void)state;
    assert_int_equal(cli_metric_rank("gpu__time_duration.sum"), 0);
    assert_true(cli_metric_rank("sm__throughput.avg.pct_of_peak_sustained_elapsed") <
                cli_metric_rank("dram__bytes_read.sum"));
    assert_true(cli_metric_rank("dram__bytes_read.sum") <
                cli_metric_rank("smsp__inst_executed.sum"));
    assert_int_equal(cli_metric_rank("no__such_metric.sum"), -1);
    assert_int_equal(cli_metric_rank(""), -1);
    assert_int_equal(cli_metric_rank(NULL), -1);
}

/* Unknown metrics keep their raw name; the unit comes from the suffix. */
static void test_unknown_suffix_rules(void **state)
{
    (void)state;
    expect_label("foo__bar.pct", "foo__bar.pct", CLI_METRIC_UNIT_PERCENT, 0, 0);
    expect_label("x__y.avg.pct_of_peak_sustained_elapsed", "x__y.avg.pct_of_peak_sustained_elapsed",
                 CLI_METRIC_UNIT_PERCENT, 0, 0);
    expect_label("achieved_pct", "achieved_pct", CLI_METRIC_UNIT_PERCENT, 0, 0);
    /* A rate is a plain number, even of bytes. */
    expect_label("dram__bytes.sum.per_second", "dram__bytes.sum.per_second", CLI_METRIC_UNIT_NONE,
                 0, 0);
    expect_label("sm__inst_executed.avg.per_cycle_elapsed",
                 "sm__inst_executed.avg.per_cycle_elapsed", CLI_METRIC_UNIT_NONE, 0, 0);
    expect_label("lts__t_sectors_bytes.max", "lts__t_sectors_bytes.max", CLI_METRIC_UNIT_BYTES, 0,
                 0);
    expect_label("gpu__time_duration.avg", "gpu__time_duration.avg", CLI_METRIC_UNIT_NANOSECONDS, 0,
                 0);
    expect_label("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg", CLI_METRIC_UNIT_CYCLES, 0, 0);
    expect_label("smsp__inst_executed_op_ld.sum", "smsp__inst_executed_op_ld.sum",
                 CLI_METRIC_UNIT_COUNT, 0, 0);
    expect_label("lts__t_sectors.sum", "lts__t_sectors.sum", CLI_METRIC_UNIT_COUNT, 0, 0);
    expect_label("late.metric", "late.metric", CLI_METRIC_UNIT_NONE, 0, 0);
    expect_label("", "", CLI_METRIC_UNIT_NONE, 0, 0);
    expect_label(NULL, "", CLI_METRIC_UNIT_NONE, 0, 0);
}

/* ---- values ---- */

static void expect_format(const char *metric, double value, const char *text)
{
    char buffer[64];
    memset(buffer, 'x', sizeof(buffer));
    assert_ptr_equal(cli_metric_format(metric, value, buffer, sizeof(buffer)), buffer);
    if (strcmp(buffer, text) != 0)
        fail_msg("%s = %.17g: got '%s', expected '%s'", metric != NULL ? metric : "(null)", value,
                 buffer, text);
}

#define DURATION "gpu__time_duration.sum"
#define PERCENT  "sm__throughput.avg.pct_of_peak_sustained_elapsed"
#define BYTES    "dram__bytes_read.sum"
#define CYCLES   "sm__cycles_active.avg"
#define COUNT    "smsp__inst_executed.sum"
#define PLAIN    "launch__grid_size"
#define UNKNOWN  "late.metric"

static void test_format_nan_and_infinity(void **state)
{
    (void)state;
    static const char *const metrics[] = {DURATION, PERCENT, BYTES, CYCLES, COUNT, PLAIN, UNKNOWN};
    for (size_t metric = 0; metric < sizeof(metrics) / sizeof(metrics[0]); metric++) {
        expect_format(metrics[metric], NAN, "n/a");
        expect_format(metrics[metric], -NAN, "n/a");
        expect_format(metrics[metric], INFINITY, "inf");
        expect_format(metrics[metric], -INFINITY, "-inf");
    }
    expect_format(NULL, NAN, "n/a");
}

static void test_format_zero(void **state)
{
    (void)state;
    expect_format(DURATION, 0, "0 ns");
    expect_format(PERCENT, 0, "0.0%");
    expect_format(BYTES, 0, "0 B");
    expect_format(CYCLES, 0, "0 cycles");
    expect_format(COUNT, 0, "0");
    expect_format(PLAIN, 0, "0");
    expect_format(PLAIN, -0.0, "0");
    expect_format(UNKNOWN, 0, "0");
}

static void test_format_units(void **state)
{
    (void)state;
    /* Durations as the rest of the report writes them (cli_format_duration). */
    expect_format(DURATION, 2500, "2500 ns");
    expect_format(DURATION, 38001, "38.0 us");
    expect_format(DURATION, 123456, "123.5 us");
    expect_format(DURATION, 1234567.25, "1234.6 us");
    expect_format(DURATION, 12345678, "12.3 ms");
    expect_format(DURATION, 1e10, "10.00 s");
    expect_format(DURATION, 0.25, "0.25 ns");
    expect_format(DURATION, -5, "-5 ns");
    /* Percent with one decimal. */
    expect_format(PERCENT, 36.04, "36.0%");
    expect_format(PERCENT, 12.345678, "12.3%");
    expect_format(PERCENT, 100, "100.0%");
    expect_format(PERCENT, -0.5, "-0.5%");
    /* Bytes in decimal units, as Nsight Compute. */
    expect_format(BYTES, 999, "999 B");
    expect_format(BYTES, 0.5, "0.5 B");
    expect_format(BYTES, 1000, "1.0 kB");
    expect_format(BYTES, 999.96, "1.0 kB");
    expect_format(BYTES, 999949, "999.9 kB");
    expect_format(BYTES, 999960, "1.0 MB");
    expect_format(BYTES, 5.3e6, "5.3 MB");
    expect_format(BYTES, 36864, "36.9 kB");
    expect_format(BYTES, 2.5e9, "2.5 GB");
    expect_format(BYTES, 1e16, "10.0 PB");
    expect_format(BYTES, -2500, "-2.5 kB");
    /* Cycles and counts with k, M, G... */
    expect_format(CYCLES, 999, "999 cycles");
    expect_format(CYCLES, 12345, "12.3 k cycles");
    expect_format(CYCLES, 123456.7, "123.5 k cycles");
    expect_format(CYCLES, 2.5e9, "2.5 G cycles");
    expect_format(COUNT, 999, "999");
    expect_format(COUNT, 3.5, "3.5");
    expect_format(COUNT, 4.2e6, "4.2 M");
    expect_format(COUNT, 1e9, "1.0 G");
    expect_format(COUNT, -1500, "-1.5 k");
    /* Plain numbers: whole ones grouped. */
    expect_format(PLAIN, 4096, "4,096");
    expect_format(PLAIN, 1234567, "1,234,567");
    expect_format(PLAIN, 999, "999");
    expect_format(PLAIN, 100000, "100,000");
    expect_format(UNKNOWN, -1234, "-1,234");
    expect_format(UNKNOWN, 3.5, "3.5");
    expect_format(UNKNOWN, 0.25, "0.25");
    expect_format(UNKNOWN, -0.5, "-0.5");
    expect_format(UNKNOWN, 12.345678, "12.35");
    expect_format(UNKNOWN, 12345.678, "12,346");
    expect_format(NULL, 7, "7");
}

static void test_format_huge(void **state)
{
    (void)state;
    expect_format(PLAIN, 999999999999999, "999,999,999,999,999");
    expect_format(PLAIN, 1e15, "1e+15");
    expect_format(UNKNOWN, 1e16, "1e+16");
    expect_format(UNKNOWN, -DBL_MAX, "-1.798e+308");
    expect_format(BYTES, 999.9e18, "999.9 EB");
    expect_format(BYTES, 1e30, "1e+12 EB");
    expect_format(BYTES, DBL_MAX, "1.8e+290 EB");
    expect_format(COUNT, 1e30, "1e+12 E");
    expect_format(CYCLES, -1e30, "-1e+12 E cycles");
    expect_format(PERCENT, 1e300, "1e+300%");
    expect_format(PERCENT, 999999, "999999.0%");
    expect_format(DURATION, 1.8e19, "1.8e+10 s");
    expect_format(DURATION, DBL_MAX, "1.8e+299 s");
    /* Past a uint64: never the wrapped value of a conversion. */
    expect_format(DURATION, 1.7e19, "17000000000.00 s");
}

/* snprintf semantics: cut to the buffer, always terminated; nothing
 * written to a buffer of no size. */
static void test_format_small_buffers(void **state)
{
    (void)state;
    char buffer[8];
    memset(buffer, 'x', sizeof(buffer));
    assert_ptr_equal(cli_metric_format(BYTES, 5.3e6, buffer, 4), buffer);
    assert_string_equal(buffer, "5.3");
    assert_int_equal(buffer[4], 'x');
    cli_metric_format(PLAIN, 1234567, buffer, 5);
    assert_string_equal(buffer, "1,23");
    cli_metric_format(DURATION, NAN, buffer, 2);
    assert_string_equal(buffer, "n");
    cli_metric_format(PERCENT, 36.04, buffer, 1);
    assert_string_equal(buffer, "");
    memset(buffer, 'x', sizeof(buffer));
    cli_metric_format(PERCENT, 36.04, buffer, 0);
    assert_int_equal(buffer[0], 'x');
}

/* ---- names ---- */

static void expect_short(const char *name, size_t width, const char *text)
{
    char buffer[256];
    memset(buffer, 'x', sizeof(buffer));
    assert_ptr_equal(cli_shorten_name(name, width, buffer, sizeof(buffer)), buffer);
    if (strcmp(buffer, text) != 0)
        fail_msg("'%s' to %zu: got '%s', expected '%s'", name != NULL ? name : "(null)", width,
                 buffer, text);
    if (width >= 2 || cli_display_width(name) <= width)
        assert_true(cli_display_width(buffer) <= width);
}

static void test_shorten_ascii(void **state)
{
    (void)state;
    expect_short("abcdefghij", 20, "abcdefghij");
    expect_short("abcdefghij", 10, "abcdefghij");
    expect_short("abcdefghij", 9, "abcd" ELLIPSIS "ghij");
    expect_short("abcdefghij", 5, "ab" ELLIPSIS "ij");
    expect_short("abcdefghij", 4, "ab" ELLIPSIS "j");
    expect_short("abcdefghij", 3, "a" ELLIPSIS "j");
    expect_short("abcdefghij", 2, "a" ELLIPSIS);
    /* width < 2: as much as fits, no ellipsis. */
    expect_short("abcdefghij", 1, "a");
    expect_short("abcdefghij", 0, "");
    expect_short("", 0, "");
    expect_short("", 5, "");
    expect_short(NULL, 5, "");
    expect_short("abc", SIZE_MAX, "abc");
    /* Both ends of a C++ name stay readable. */
    expect_short("void at::native::vectorized_elementwise_kernel<4, float>(int, float)", 30,
                 "void at::native" ELLIPSIS "t>(int, float)");
}

static void test_shorten_utf8(void **state)
{
    (void)state;
    /* c a f é 日 本 語: 7 characters, 12 bytes. */
    const char *name = "caf\xC3\xA9\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E";
    assert_int_equal(cli_display_width(name), 7);
    expect_short(name, 7, name);
    expect_short(name, 6, "caf" ELLIPSIS "\xE6\x9C\xAC\xE8\xAA\x9E");
    expect_short(name, 5, "ca" ELLIPSIS "\xE6\x9C\xAC\xE8\xAA\x9E");
    expect_short(name, 4, "ca" ELLIPSIS "\xE8\xAA\x9E");
    expect_short(name, 1, "c");
    /* Cuts fall between characters on both sides. */
    expect_short("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3, "\xC3\xA9" ELLIPSIS "\xC3\xA9");
    expect_short("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", 1, "\xE6\x97\xA5");
    /* A 4-byte character (an emoji) is one. */
    expect_short("a\xF0\x9F\x98\x80"
                 "bcdef",
                 4, "a\xF0\x9F\x98\x80" ELLIPSIS "f");
}

/* Bytes that are not UTF-8 are one character each (shown as one
 * replacement), never joined to their neighbours. */
static void test_shorten_invalid_utf8(void **state)
{
    (void)state;
    assert_int_equal(cli_display_width("a\xC3(b"), 4);
    expect_short("a\xC3(b", 3, "a" ELLIPSIS "b");
    assert_int_equal(cli_display_width("\xE6\x97"), 2);         /* cut short */
    assert_int_equal(cli_display_width("\xED\xA0\x80"), 3);     /* a surrogate */
    assert_int_equal(cli_display_width("\xC0\xAF"), 2);         /* overlong */
    assert_int_equal(cli_display_width("\xF4\x90\x80\x80"), 4); /* past U+10FFFF */
    assert_int_equal(cli_display_width("\x80\xBF"), 2);         /* lone continuations */
    expect_short("\x80\x81\x82\x83\x84", 3, "\x80" ELLIPSIS "\x84");
    assert_int_equal(cli_display_width(NULL), 0);
    assert_int_equal(cli_display_width(""), 0);
}

/* A buffer too small for the result holds a prefix of whole characters. */
static void test_shorten_small_buffers(void **state)
{
    (void)state;
    char buffer[8];
    const char *name = "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"; /* 日本語 */
    memset(buffer, 'x', sizeof(buffer));
    cli_shorten_name(name, 10, buffer, 5);
    assert_string_equal(buffer, "\xE6\x97\xA5");
    cli_shorten_name(name, 10, buffer, 6);
    assert_string_equal(buffer, "\xE6\x97\xA5");
    cli_shorten_name(name, 10, buffer, 7);
    assert_string_equal(buffer, "\xE6\x97\xA5\xE6\x9C\xAC");
    cli_shorten_name(name, 10, buffer, 8);
    assert_string_equal(buffer, "\xE6\x97\xA5\xE6\x9C\xAC");
    cli_shorten_name("abcdefghij", 5, buffer, 4);
    assert_string_equal(buffer, "ab"); /* no room for the ellipsis's 3 bytes */
    cli_shorten_name("abc", 5, buffer, 1);
    assert_string_equal(buffer, "");
    memset(buffer, 'x', sizeof(buffer));
    cli_shorten_name("abc", 5, buffer, 0);
    assert_int_equal(buffer[0], 'x');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_metrics),
        cmocka_unit_test(test_every_set_metric_is_known),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_unknown_suffix_rules),
        cmocka_unit_test(test_format_nan_and_infinity),
        cmocka_unit_test(test_format_zero),
        cmocka_unit_test(test_format_units),
        cmocka_unit_test(test_format_huge),
        cmocka_unit_test(test_format_small_buffers),
        cmocka_unit_test(test_shorten_ascii),
        cmocka_unit_test(test_shorten_utf8),
        cmocka_unit_test(test_shorten_invalid_utf8),
        cmocka_unit_test(test_shorten_small_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
