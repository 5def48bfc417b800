/*
 * test_recorder_plan.c: the flight recorder's pure decisions
 * (src/recorder/recorder_plan.h) on made-up numbers: the size grammar and
 * its messages, the settings, marks and their thinning, protected
 * intervals (overlapping, touching, too many), the size target and the
 * cutoff under size pressure. No threads, no SQLite.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "recorder/recorder_plan.h"

#define S RECORDER_NS_PER_S

static void expect_size(const char *text, uint64_t expected)
{
    uint64_t value = 0;
    char error[256] = "";
    if (recorder_parse_size(text, &value, error, sizeof(error)) != 0)
        fail_msg("'%s' refused: %s", text, error);
    assert_int_equal(value, expected);
}

static void expect_size_refused(const char *text, const char *message)
{
    uint64_t value = 12345;
    char error[256] = "";
    assert_int_equal(recorder_parse_size(text, &value, error, sizeof(error)), -1);
    assert_int_equal(value, 12345); /* untouched */
    if (strstr(error, message) == NULL)
        fail_msg("'%s': expected '%s' in '%s'", text, message, error);
}

static void test_sizes(void **unused)
{
    (void)unused;
    expect_size("1048576", 1048576);
    expect_size("1000B", 1000);
    expect_size("512M", 512ull << 20);
    expect_size("512MiB", 512ull << 20);
    expect_size("2G", 2ull << 30);
    expect_size("1.5G", 1610612736ull);
    expect_size("0.5K", 512);
    expect_size("1T", 1ull << 40);
}

static void test_size_refusals(void **unused)
{
    (void)unused;
    expect_size_refused("", "a size is needed");
    expect_size_refused("512X", "unknown unit 'X'");
    expect_size_refused("512MB", "write 512M or 512MiB");
    expect_size_refused("2GB", "write 2G or 2GiB");
    expect_size_refused("512m", "units are upper-case: write 512M");
    expect_size_refused(".5G", "needs a digit before the decimal point: write 0.5G");
    expect_size_refused("5.G", "needs a digit after the decimal point");
    expect_size_refused("0.1K", "not a whole number of bytes");
    expect_size_refused("1.5", "not a whole number of bytes");
    expect_size_refused("-1M", "is not a size");
    expect_size_refused(" 1M", "is not a size");
    expect_size_refused("1 M", "unknown unit ' M'");
    expect_size_refused("20000000T", "too large");
    expect_size_refused("18446744073709551616", "too large");
    expect_size("18446744073709551615", UINT64_MAX);
}

static void test_settings(void **unused)
{
    (void)unused;
    recorder_settings settings = {7, 7};
    char error[256] = "";
    assert_int_equal(recorder_settings_parse(NULL, "", &settings, error, sizeof(error)), 0);
    assert_false(recorder_settings_on(&settings));
    assert_int_equal(recorder_settings_parse("10min", "2G", &settings, error, sizeof(error)), 0);
    assert_int_equal(settings.keep_ns, 600 * S);
    assert_int_equal(settings.max_bytes, 2ull << 30);
    assert_true(recorder_settings_on(&settings));
    char described[160];
    recorder_settings_describe(&settings, described, sizeof(described));
    assert_string_equal(described, "kept the last 10min in detail, the database under 2GiB");

    recorder_settings before = settings;
    assert_int_equal(recorder_settings_parse("0s", NULL, &settings, error, sizeof(error)), -1);
    assert_string_equal(error, "FLARE_KEEP: '0s' is less than the minimum, 1s");
    assert_int_equal(recorder_settings_parse("721h", NULL, &settings, error, sizeof(error)), -1);
    assert_non_null(strstr(error, "more than the maximum, 720h"));
    assert_int_equal(recorder_settings_parse("10", NULL, &settings, error, sizeof(error)), -1);
    assert_non_null(strstr(error, "needs a unit"));
    assert_int_equal(recorder_settings_parse(NULL, "100K", &settings, error, sizeof(error)), -1);
    assert_string_equal(error, "FLARE_MAX_SIZE: '100K' is less than the minimum, 1M");
    assert_int_equal(recorder_settings_parse("1s", "1X", &settings, error, sizeof(error)), -1);
    assert_non_null(strstr(error, "FLARE_MAX_SIZE: '1X': unknown unit"));
    assert_memory_equal(&settings, &before, sizeof(settings)); /* untouched on refusal */

    char size[32];
    recorder_format_size(1536ull << 20, size, sizeof(size));
    assert_string_equal(size, "1536MiB");
    recorder_format_size(1000, size, sizeof(size));
    assert_string_equal(size, "1000B");
}

static recorder_mark mark_at(uint64_t time_ns, int64_t rowid)
{
    recorder_mark mark = {.time_ns = time_ns};
    for (int t = 0; t < RECORDER_TABLES; t++)
        mark.rowid[t] = rowid + t;
    return mark;
}

static void test_marks(void **unused)
{
    (void)unused;
    static recorder_marks marks;
    recorder_marks_clear(&marks);
    assert_null(recorder_marks_at(&marks, 10 * S, 0));
    for (uint64_t second = 1; second <= 10; second++) {
        recorder_mark mark = mark_at(second * S, (int64_t)second * 100);
        recorder_marks_add(&marks, &mark);
    }
    /* The newest at or before the cutoff, after the cursor. */
    assert_int_equal(recorder_marks_at(&marks, 4500000000ull, 0)->rowid[0], 400);
    assert_int_equal(recorder_marks_at(&marks, 4 * S, 0)->rowid[0], 400);
    assert_null(recorder_marks_at(&marks, 4 * S, 4 * S));
    assert_null(recorder_marks_at(&marks, S / 2, 0));
    assert_int_equal(recorder_marks_next(&marks, 4 * S)->time_ns, 5 * S);
    assert_null(recorder_marks_next(&marks, 10 * S));

    recorder_marks_forget_before(&marks, 4 * S);
    assert_int_equal(marks.count, 7);
    assert_int_equal(marks.items[0].time_ns, 4 * S);
    recorder_marks_forget_from(&marks, 9 * S);
    assert_int_equal(marks.count, 5);
    assert_int_equal(marks.items[4].time_ns, 8 * S);
}

static void test_marks_thin_out_when_full(void **unused)
{
    (void)unused;
    static recorder_marks marks;
    recorder_marks_clear(&marks);
    uint64_t second = 0;
    for (; second < 10 * RECORDER_MARKS_MAX; second++) {
        recorder_mark mark = mark_at((second + 1) * S, (int64_t)second);
        recorder_marks_add(&marks, &mark);
        assert_true(marks.count <= RECORDER_MARKS_MAX);
    }
    /* The oldest and the newest stay; times still only grow. */
    assert_int_equal(marks.items[0].time_ns, S);
    assert_int_equal(marks.items[marks.count - 1].time_ns, second * S);
    for (size_t i = 1; i < marks.count; i++)
        assert_true(marks.items[i].time_ns > marks.items[i - 1].time_ns);
    /* Evenly spread: a cutoff anywhere finds a mark at or before it, never
     * after, and never more than twice the average gap before it. */
    uint64_t gap = (second - 1) * S / (RECORDER_MARKS_MAX / 2);
    for (uint64_t cutoff = S; cutoff < second * S; cutoff += 97 * S) {
        const recorder_mark *mark = recorder_marks_at(&marks, cutoff, 0);
        assert_non_null(mark);
        assert_true(mark->time_ns <= cutoff);
        if (cutoff - mark->time_ns > 2 * gap)
            fail_msg("cutoff %llu s: mark %llu s before it", (unsigned long long)(cutoff / S),
                     (unsigned long long)((cutoff - mark->time_ns) / S));
    }
}

static void test_protection_merges_overlapping(void **unused)
{
    (void)unused;
    recorder_protection protection;
    recorder_protection_clear(&protection);
    recorder_protection_add(&protection, 10 * S, 12 * S, S);    /* 9..13 */
    recorder_protection_add(&protection, 30 * S, 31 * S, S);    /* 29..32 */
    recorder_protection_add(&protection, 13 * S, 14 * S, S);    /* 12..15: overlaps the first */
    recorder_protection_add(&protection, 20 * S, 20 * S, 0);    /* 20..20 */
    recorder_protection_add(&protection, 5 * S, UINT64_MAX, S); /* still open: swallows all */
    assert_int_equal(protection.count, 1);
    assert_int_equal(protection.items[0].lo_ns, 4 * S);
    assert_int_equal(protection.items[0].hi_ns, UINT64_MAX);

    recorder_protection_clear(&protection);
    recorder_protection_add(&protection, 30 * S, 31 * S, S);
    recorder_protection_add(&protection, 10 * S, 12 * S, S);
    recorder_protection_add(&protection, 13 * S, 14 * S, S);
    recorder_protection_add(&protection, 0, 0, S); /* the margin saturates at 0 */
    assert_int_equal(protection.count, 3);
    assert_int_equal(protection.items[0].lo_ns, 0);
    assert_int_equal(protection.items[0].hi_ns, S);
    assert_int_equal(protection.items[1].lo_ns, 9 * S);
    assert_int_equal(protection.items[1].hi_ns, 15 * S);
    assert_int_equal(protection.items[2].lo_ns, 29 * S);

    /* A cutoff inside the second interval passes both first ones in. */
    recorder_interval out[RECORDER_PASS_INTERVALS];
    size_t count = 0;
    assert_int_equal(
        recorder_protection_cutoff(&protection, 20 * S, out, RECORDER_PASS_INTERVALS, &count),
        20 * S);
    assert_int_equal(count, 2);
    assert_int_equal(recorder_protection_cutoff(&protection, 100 * S, out, 2, &count), 29 * S);
    assert_int_equal(count, 2);
}

static void test_protection_that_does_not_fit_lowers_the_cutoff(void **unused)
{
    (void)unused;
    recorder_protection protection;
    recorder_protection_clear(&protection);
    /* Twice as many disjoint intervals as fit, added newest first. */
    for (uint64_t i = 2 * RECORDER_PROTECT_MAX; i-- > 0;)
        recorder_protection_add(&protection, (10 * i + 100) * S, (10 * i + 101) * S, 0);
    assert_int_equal(protection.count, RECORDER_PROTECT_MAX);
    assert_int_equal(protection.ceiling_ns, (10 * RECORDER_PROTECT_MAX + 100) * S);
    recorder_interval out[RECORDER_PASS_INTERVALS];
    size_t count = 0;
    /* Far past everything: stopped at the first interval a pass cannot take. */
    uint64_t cutoff =
        recorder_protection_cutoff(&protection, UINT64_MAX, out, RECORDER_PASS_INTERVALS, &count);
    assert_int_equal(count, RECORDER_PASS_INTERVALS);
    assert_int_equal(cutoff, (10 * RECORDER_PASS_INTERVALS + 100) * S);
    /* Once the intervals left fit, the ceiling is what stops the cutoff. */
    recorder_interval all[RECORDER_PROTECT_MAX];
    uint64_t ceiling =
        recorder_protection_cutoff(&protection, UINT64_MAX, all, RECORDER_PROTECT_MAX, &count);
    assert_int_equal(ceiling, protection.ceiling_ns);
    assert_int_equal(count, RECORDER_PROTECT_MAX);
    /* An interval past the ceiling needs no room. */
    recorder_protection_add(&protection, UINT64_MAX - 5, UINT64_MAX, 0);
    assert_int_equal(protection.count, RECORDER_PROTECT_MAX);
}

static void test_size_pressure(void **unused)
{
    (void)unused;
    const uint64_t cap = 1000ull << 20;
    assert_int_equal(recorder_size_target(cap, 0), cap / 10 * 9);
    assert_int_equal(recorder_size_target(cap, 100ull << 20), cap / 10 * 9 - (200ull << 20));
    assert_int_equal(recorder_size_target(cap, cap), cap / 2); /* never under half */

    /* 10% over: a quarter more than 10% of the span, then more each try. */
    uint64_t first = recorder_size_cutoff(100 * S, 200 * S, 1000, 900, 0);
    assert_in_range(first, 100 * S + 12500000000ull - 1, 100 * S + 12500000000ull + 1);
    uint64_t second = recorder_size_cutoff(100 * S, 200 * S, 1000, 900, 1);
    assert_true(second > first);
    assert_int_equal(recorder_size_cutoff(100 * S, 200 * S, 1000, 900, 3), 200 * S);
    assert_int_equal(recorder_size_cutoff(100 * S, 200 * S, 900, 900, 0), 100 * S);
    assert_int_equal(recorder_size_cutoff(100 * S, 200 * S, 1000, 100, 0), 200 * S);
    assert_int_equal(recorder_size_cutoff(200 * S, 100 * S, 1000, 900, 0), 100 * S);

    /* A second's rows spread over the batches before the next pass. */
    assert_int_equal(recorder_chunk_rows(100000, 0, S, S / 10), 100000 / 11 + 1);
    assert_int_equal(recorder_chunk_rows(30000, S, S, S / 10), 30000);
    assert_int_equal(recorder_chunk_rows(30000, 2 * S, S, S / 10), 30000);
    assert_int_equal(recorder_chunk_rows(30000, 0, S, 0), 30000);
    /* Never more than a batch can afford, whatever is behind. */
    assert_int_equal(recorder_chunk_rows(10000000, 0, S, S / 10), RECORDER_CHUNK_MAX);
    assert_int_equal(recorder_chunk_rows(10, 0, S, S / 10), RECORDER_CHUNK_MIN);
    assert_int_equal(recorder_chunk_rows(0, 0, S, S / 10), RECORDER_CHUNK_MIN);

    /* Near the cap, a batch does not wait for the next pass. */
    assert_false(recorder_size_urgent(cap / 100 * RECORDER_URGENT_PERCENT, cap));
    assert_true(recorder_size_urgent(cap / 100 * RECORDER_URGENT_PERCENT + 1, cap));
    assert_true(recorder_size_urgent(2 * cap, cap));
    assert_false(recorder_size_urgent(cap / 2, cap));
    assert_false(recorder_size_urgent(UINT64_MAX, 0)); /* no --max-size */

    /* The room a batch has left, in events: none past the urgent share,
     * the bytes below it at RECORDER_EVENT_BYTES an event, asked again
     * after a twentieth of the cap at most. */
    const uint64_t limit = cap / 100 * RECORDER_URGENT_PERCENT;
    assert_int_equal(recorder_size_room(limit + 1, cap), 0);
    assert_int_equal(recorder_size_room(2 * cap, cap), 0);
    assert_int_equal(recorder_size_room(limit, cap), 1);
    assert_int_equal(recorder_size_room(limit - 10 * RECORDER_EVENT_BYTES, cap), 10);
    assert_int_equal(recorder_size_room(limit - 10 * RECORDER_EVENT_BYTES - 1, cap), 10);
    assert_int_equal(recorder_size_room(0, cap), cap / RECORDER_ROOM_SHARE / RECORDER_EVENT_BYTES);
    assert_true(recorder_size_room(UINT64_MAX, 0) == UINT64_MAX); /* no --max-size */

    assert_int_equal(recorder_keep_cutoff(10 * S, 3 * S), 7 * S);
    assert_int_equal(recorder_keep_cutoff(2 * S, 3 * S), 0);
    assert_int_equal(recorder_keep_cutoff(10 * S, 0), 0);
    assert_true(recorder_pass_due(0, 5));
    assert_false(recorder_pass_due(10 * S, 10 * S + S / 2));
    assert_true(recorder_pass_due(10 * S, 11 * S));
    assert_false(recorder_pass_due(10 * S, 9 * S));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_size_refusals),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_marks_thin_out_when_full),
        cmocka_unit_test(test_protection_merges_overlapping),
        cmocka_unit_test(test_protection_that_does_not_fit_lowers_the_cutoff),
        cmocka_unit_test(test_size_pressure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
