/*
 * test_report_html_series.c: the reduction for drawing of `flare report
 * --html` (src/cli/report_html_series.c), compiled in with the page writer
 * it writes through: a device's busy time is the exact union of its
 * kernels' intervals, however they overlap, and each bucket's share of it
 * stays in 0..100; a long series keeps at most 2,000 points, its minimum
 * and maximum among them, and its exact count, extremes and sum; samples
 * far outside the range land in the end buckets, never outside the array;
 * and a string with '<', '>' and '&' leaves the page writer as \u escapes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_html_page.h"
#include "cli/report_html_series.h"
#include "test_util.h"

static void test_busy_is_the_union_of_kernels(void **state)
{
    (void)state;
    html_busy busy;
    assert_int_equal(html_busy_init(&busy, 0, 1000000), 0);
    /* [100, 300) and [200, 400) overlap: 300 ns; [400, 500) touches the
     * end of the island: 100 more; [1000, 1100) nested in [900, 2000). */
    html_busy_add(&busy, 100, 300);
    html_busy_add(&busy, 200, 400);
    html_busy_add(&busy, 400, 500);
    html_busy_add(&busy, 900, 2000);
    html_busy_add(&busy, 1000, 1100);
    /* Past the end of the range: counted in the total, drawn to its end. */
    html_busy_add(&busy, 999000, 1001000);
    html_busy_finish(&busy);
    assert_int_equal(busy.kernels, 6);
    assert_int_equal(busy.busy_total_ns, 400 + 1100 + 2000);
    double drawn = 0;
    for (uint32_t i = 0; i < busy.bucket_count; i++) {
        double width = 1000000.0 / busy.bucket_count;
        assert_true(busy.busy_ns[i] >= 0 && busy.busy_ns[i] <= width + 1e-6);
        drawn += busy.busy_ns[i];
    }
    assert_true(fabs(drawn - (400 + 1100 + 1000)) < 1e-6);
    html_busy_free(&busy);
}

static void test_series_keeps_extremes_in_few_points(void **state)
{
    (void)state;
    html_series series;
    assert_int_equal(html_series_init(&series, 1000, 1000 + 100000000ull), 0);
    double sum = 0;
    for (uint64_t i = 0; i < 1000000; i++) {
        double value = (double)(i % 1000);
        if (i == 777777)
            value = 1e9; /* a spike in one sample of a million */
        html_series_add(&series, 1000 + i * 100, value);
        sum += value;
    }
    html_series_add(&series, 1000, NAN);     /* not a sample */
    html_series_add(&series, 0, -5);         /* before the range: the first bucket */
    html_series_add(&series, UINT64_MAX, 5); /* after it: the last */
    assert_int_equal(series.samples, 1000002);
    assert_true(series.maximum == 1e9);
    assert_true(series.minimum == -5);
    assert_true(fabs(series.sum - (sum - 5 + 5)) < 1e-3);
    uint64_t points = 0;
    int spike = 0;
    for (uint32_t i = 0; i < series.bucket_count; i++) {
        const html_bucket *bucket = &series.buckets[i];
        if (bucket->count == 0)
            continue;
        points += bucket->count == 1 ? 1 : 2;
        spike |= bucket->maximum == 1e9;
    }
    assert_true(points <= HTML_SERIES_POINTS_MAX);
    assert_true(spike);
    assert_true(series.buckets[0].minimum == -5);
    assert_true(series.buckets[series.bucket_count - 1].count > 0);
    html_series_free(&series);
}

/* The page writer's JSON: a hostile string and a series, read back. */
static void test_page_escapes_and_writes_points(void **state)
{
    (void)state;
    char dir[256], path[300], error[512];
    test_make_temp_dir(dir, sizeof dir, "html-series");
    snprintf(path, sizeof path, "%s/page.html", dir);
    html_page *page = NULL;
    assert_int_equal(html_page_open(path, &page, error, sizeof error), 0);
    html_page_section_begin(page, "test", "Test");
    html_json_string(page, "name", "</script><!-- a&b \"q\" \x01 bad \xC3\x28");
    html_series series;
    assert_int_equal(html_series_init(&series, 0, 1000000), 0);
    for (uint64_t t = 0; t < 1000000; t += 10)
        html_series_add(&series, t, (double)(t % 7));
    html_json_object(page, "series");
    html_series_write(&series, page, 0, 1e-9);
    html_json_end(page);
    html_series_free(&series);
    html_page_section_end(page, NULL);
    assert_int_equal(html_page_close(page, 1, error, sizeof error), 0);

    FILE *file = fopen(path, "r");
    assert_non_null(file);
    static char text[1 << 20];
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = '\0';
    const char *data = strstr(text, "id=\"data-test\">");
    assert_non_null(data);
    const char *end = strstr(data, "</script>");
    assert_non_null(end);
    assert_non_null(strstr(data, "\"name\":\"\\u003c/script\\u003e\\u003c!-- a\\u0026b \\\"q\\\" "
                                 "\\u0001 bad ?(\""));
    /* No '<' between the block's start and its end. */
    assert_null(memchr(data + 15, '<', (size_t)(end - data - 15)));
    const char *times = strstr(data, "\"t\":[");
    const char *values = strstr(data, "\"v\":[");
    assert_non_null(times);
    assert_non_null(values);
    size_t commas = 0;
    for (const char *c = times; c < values; c++)
        commas += *c == ',';
    assert_true(commas >= 1000 && commas <= HTML_SERIES_POINTS_MAX + 1);
    assert_non_null(strstr(data, "\"error\":null}"));
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_is_the_union_of_kernels),
        cmocka_unit_test(test_series_keeps_extremes_in_few_points),
        cmocka_unit_test(test_page_escapes_and_writes_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
