/*
 * test_readings.c: metric readings (src/rules/readings.h) on a fake clock:
 * rates over sliding windows, percentiles on known data, missing, truncated
 * and stale readings, sequence numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "flare/flare.h"
#include "rules/readings.h"

#define MS 1000000ull
#define S  1000000000ull

static void test_rate_counts_events_in_window(void **state)
{
    (void)state;
    rules_rate rate;
    rules_rate_config config = {.window_ns = 1 * S, .bucket_ns = 0, .stale_after_ns = 0};
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_OK);
    assert_int_equal(rate.bucket_count, 10);
    /* 50 events spread over the first second. */
    for (int i = 0; i < 50; i++)
        rules_rate_add(&rate, 10 * S + (uint64_t)i * 20 * MS, 1);
    rules_reading reading;
    rules_rate_read(&rate, 10 * S + 999 * MS, &reading);
    assert_false(reading.missing);
    assert_true(reading.value > 49.99 && reading.value < 50.01);
    assert_int_equal(reading.source_time_ns, 10 * S + 49 * 20 * MS);
    assert_int_equal(reading.publish_time_ns, 10 * S + 999 * MS);
    /* Half a second later, half of them have left the window. */
    rules_rate_read(&rate, 11 * S + 499 * MS, &reading);
    assert_true(reading.value > 24.99 && reading.value < 25.01);
}

static void test_rate_empty_window_is_zero_not_missing(void **state)
{
    (void)state;
    rules_rate rate;
    rules_rate_config config = {.window_ns = 1 * S, .bucket_ns = 100 * MS, .stale_after_ns = 0};
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_OK);
    rules_reading reading;
    rules_rate_read(&rate, 5 * S, &reading);
    assert_true(reading.missing); /* never fed: no value at all */

    rules_rate_add(&rate, 5 * S, 0); /* a heartbeat: alive, nothing happened */
    rules_rate_read(&rate, 5 * S + 10 * MS, &reading);
    assert_false(reading.missing);
    assert_true(reading.value == 0.0);

    rules_rate_add(&rate, 5 * S + 20 * MS, 7);
    rules_rate_read(&rate, 8 * S, &reading); /* long after: window empty again */
    assert_false(reading.missing);
    assert_true(reading.value == 0.0);
}

static void test_rate_cumulative_feed(void **state)
{
    (void)state;
    rules_rate rate;
    rules_rate_config config = {.window_ns = 2 * S, .bucket_ns = 100 * MS, .stale_after_ns = 0};
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_OK);
    rules_rate_add_cumulative(&rate, 1 * S, 1000); /* baseline: contributes nothing */
    rules_rate_add_cumulative(&rate, 1 * S + 500 * MS, 1100);
    rules_rate_add_cumulative(&rate, 2 * S, 1300);
    rules_reading reading;
    rules_rate_read(&rate, 2 * S + 50 * MS, &reading);
    assert_true(reading.value > 149.99 && reading.value < 150.01); /* 300 over 2 s */
    /* A counter that wraps modulo 2^64 still counts the right difference. */
    rules_rate wrapping;
    assert_int_equal(rules_rate_init(&wrapping, &config), FLARE_OK);
    rules_rate_add_cumulative(&wrapping, 1 * S, UINT64_MAX - 9);
    rules_rate_add_cumulative(&wrapping, 1 * S + 100 * MS, 10);
    rules_rate_read(&wrapping, 1 * S + 200 * MS, &reading);
    assert_true(reading.value > 9.99 && reading.value < 10.01); /* 20 over 2 s */
}

static void test_rate_rejects_bad_config_and_old_events(void **state)
{
    (void)state;
    rules_rate rate;
    rules_rate_config config = {.window_ns = 0};
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_ERR_INVALID_ARGUMENT);
    config.window_ns = 150 * MS; /* not a whole number of 100 ms buckets */
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_ERR_INVALID_ARGUMENT);
    config.window_ns = 601 * 100 * MS; /* more buckets than the ring holds */
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_ERR_INVALID_ARGUMENT);
    config.window_ns = 600 * 100 * MS;
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_OK);

    config.window_ns = 1 * S;
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_OK);
    rules_rate_add(&rate, 20 * S, 1);
    rules_rate_add(&rate, 10 * S, 5); /* a whole window behind the newest */
    assert_int_equal(rate.too_old, 5);
    rules_reading reading;
    rules_rate_read(&rate, 20 * S + 1, &reading);
    assert_true(reading.value > 0.99 && reading.value < 1.01);
}

static void test_rate_staleness_uses_source_time(void **state)
{
    (void)state;
    rules_rate rate;
    rules_rate_config config = {
        .window_ns = 1 * S, .bucket_ns = 100 * MS, .stale_after_ns = 500 * MS};
    assert_int_equal(rules_rate_init(&rate, &config), FLARE_OK);
    rules_rate_add(&rate, 1 * S, 3);
    rules_reading first, second, third;
    rules_rate_read(&rate, 1 * S + 100 * MS, &first);
    assert_false(first.stale);
    /* The source dies; readings keep being published with a later time. */
    rules_rate_read(&rate, 1 * S + 400 * MS, &second);
    rules_rate_read(&rate, 1 * S + 700 * MS, &third);
    assert_false(second.stale);
    assert_true(third.stale);
    assert_int_equal(third.source_time_ns, 1 * S);
    assert_true(third.publish_time_ns > second.publish_time_ns);
    assert_int_equal(first.sequence, 1);
    assert_int_equal(second.sequence, 2);
    assert_int_equal(third.sequence, 3);
    /* A heartbeat revives it. */
    rules_rate_add(&rate, 1 * S + 800 * MS, 0);
    rules_rate_read(&rate, 1 * S + 900 * MS, &third);
    assert_false(third.stale);
    assert_int_equal(third.sequence, 4);
}

static const double wanted[3] = {50.0, 90.0, 99.0};

static void test_percentiles_exact_nearest_rank(void **state)
{
    (void)state;
    rules_percentiles window;
    rules_percentile_config config = {.window_ns = 10 * S, .capacity = 1000};
    assert_int_equal(rules_percentiles_init(&window, &config), FLARE_OK);
    /* Durations 1..100 us, added out of order, ending within the window. */
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t duration = ((i * 37) % 100 + 1) * 1000;
        rules_percentiles_add(&window, 5 * S + i * MS, duration);
    }
    rules_reading readings[3];
    rules_percentiles_read(&window, 6 * S, wanted, 3, readings);
    assert_true(readings[0].value == 50000.0);
    assert_true(readings[1].value == 90000.0);
    assert_true(readings[2].value == 99000.0);
    for (int i = 0; i < 3; i++) {
        assert_false(readings[i].missing);
        assert_false(readings[i].truncated);
        assert_int_equal(readings[i].samples, 100);
        assert_int_equal(readings[i].source_time_ns, 5 * S + 99 * MS); /* newest kernel end */
        assert_int_equal(readings[i].sequence, 1);
    }
    /* Ten samples: p90 is rank 9 exactly, p99 rank 10, p50 rank 5. */
    rules_percentiles small;
    assert_int_equal(rules_percentiles_init(&small, &config), FLARE_OK);
    for (uint64_t i = 1; i <= 10; i++)
        rules_percentiles_add(&small, 1 * S + i, i * 10);
    rules_percentiles_read(&small, 2 * S, wanted, 3, readings);
    assert_true(readings[0].value == 50.0);
    assert_true(readings[1].value == 90.0);
    assert_true(readings[2].value == 100.0);
    rules_percentiles_free(&small);
    rules_percentiles_free(&window);
}

static void test_percentiles_empty_is_missing(void **state)
{
    (void)state;
    rules_percentiles window;
    rules_percentile_config config = {.window_ns = 1 * S, .capacity = 16, .stale_after_ns = 0};
    assert_int_equal(rules_percentiles_init(&window, &config), FLARE_OK);
    rules_reading readings[3];
    rules_percentiles_read(&window, 1 * S, wanted, 3, readings);
    assert_true(readings[0].missing && readings[1].missing && readings[2].missing);
    rules_percentiles_add(&window, 2 * S, 500);
    rules_percentiles_read(&window, 2 * S + 500 * MS, wanted, 3, readings);
    assert_false(readings[0].missing);
    /* Once its only sample leaves the window it is missing again, not 0. */
    rules_percentiles_read(&window, 4 * S, wanted, 3, readings);
    assert_true(readings[0].missing);
    assert_int_equal(readings[0].sequence, 3);
    rules_percentiles_free(&window);
}

static void test_percentiles_truncated_when_buffer_overflows(void **state)
{
    (void)state;
    rules_percentiles window;
    rules_percentile_config config = {.window_ns = 1 * S, .capacity = 8};
    assert_int_equal(rules_percentiles_init(&window, &config), FLARE_OK);
    for (uint64_t i = 0; i < 8; i++)
        rules_percentiles_add(&window, 10 * S + i * MS, 100 + i);
    rules_reading readings[3];
    rules_percentiles_read(&window, 10 * S + 100 * MS, wanted, 3, readings);
    assert_false(readings[0].truncated);
    /* Four more than fit: the four oldest, still in the window, are lost. */
    for (uint64_t i = 8; i < 12; i++)
        rules_percentiles_add(&window, 10 * S + i * MS, 100 + i);
    rules_percentiles_read(&window, 10 * S + 100 * MS, wanted, 3, readings);
    assert_true(readings[0].truncated && readings[1].truncated && readings[2].truncated);
    assert_int_equal(readings[0].samples, 8);
    assert_int_equal(window.overwritten, 4);
    assert_true(readings[0].value == 107.0); /* rank 4 of 104..111 */
    /* Once the lost samples would have left the window anyway, the reading
     * is complete again. */
    rules_percentiles_read(&window, 11 * S + 4 * MS, wanted, 3, readings);
    assert_false(readings[0].truncated);
    assert_false(readings[0].missing);
    rules_percentiles_free(&window);
}

static void test_percentiles_stale_and_bad_config(void **state)
{
    (void)state;
    rules_percentiles window;
    rules_percentile_config config = {.window_ns = 10 * S, .capacity = 0, .stale_after_ns = 1 * S};
    assert_int_equal(rules_percentiles_init(&window, &config), FLARE_OK);
    assert_int_equal(window.config.capacity, RULES_PERCENTILE_CAPACITY_DEFAULT);
    rules_percentiles_add(&window, 1 * S, 10);
    rules_reading reading;
    rules_percentiles_read(&window, 1 * S + 900 * MS, wanted, 1, &reading);
    assert_false(reading.stale);
    rules_percentiles_read(&window, 2 * S + 100 * MS, wanted, 1, &reading);
    assert_true(reading.stale);
    assert_false(reading.missing);
    rules_percentiles_free(&window);
    config.capacity = RULES_PERCENTILE_CAPACITY_MAX + 1;
    assert_int_equal(rules_percentiles_init(&window, &config), FLARE_ERR_INVALID_ARGUMENT);
}

static void test_gauge(void **state)
{
    (void)state;
    rules_gauge gauge;
    rules_gauge_init(&gauge, 300 * MS);
    rules_reading reading;
    rules_gauge_read(&gauge, 1 * S, &reading);
    assert_true(reading.missing);
    rules_gauge_set(&gauge, 1 * S, 87.0);
    rules_gauge_set(&gauge, 900 * MS, 10.0); /* older sample, out of order: ignored */
    rules_gauge_read(&gauge, 1 * S + 200 * MS, &reading);
    assert_true(reading.value == 87.0);
    assert_false(reading.stale);
    assert_int_equal(reading.source_time_ns, 1 * S);
    rules_gauge_read(&gauge, 1 * S + 400 * MS, &reading);
    assert_true(reading.stale);
    assert_int_equal(reading.sequence, 3);
}

typedef struct fake_counter {
    uint64_t value;
    int fail;
} fake_counter;

static int read_fake_counter(void *user, uint64_t *value)
{
    fake_counter *counter = user;
    if (counter->fail)
        return FLARE_ERR_NOT_FOUND;
    *value = counter->value;
    return FLARE_OK;
}

static void test_counter_rate(void **state)
{
    (void)state;
    fake_counter fake = {.value = 500};
    rules_counter_rate counter;
    rules_rate_config config = {
        .window_ns = 1 * S, .bucket_ns = 100 * MS, .stale_after_ns = 300 * MS};
    assert_int_equal(rules_counter_rate_init(&counter, &config, read_fake_counter, &fake),
                     FLARE_OK);
    for (int beat = 0; beat <= 10; beat++) {
        assert_int_equal(rules_counter_rate_poll(&counter, 1 * S + (uint64_t)beat * 100 * MS),
                         FLARE_OK);
        fake.value += 20;
    }
    rules_reading reading;
    rules_counter_rate_read(&counter, 2 * S, &reading);
    assert_true(reading.value > 199.99 && reading.value < 200.01); /* 20 per 100 ms */
    assert_false(reading.stale);
    /* The counter can no longer be read: it goes stale instead of reading 0. */
    fake.fail = 1;
    assert_int_equal(rules_counter_rate_poll(&counter, 2 * S + 200 * MS), FLARE_ERR_NOT_FOUND);
    assert_int_equal(rules_counter_rate_poll(&counter, 2 * S + 400 * MS), FLARE_ERR_NOT_FOUND);
    rules_counter_rate_read(&counter, 2 * S + 400 * MS, &reading);
    assert_true(reading.stale);
    assert_int_equal(counter.read_failures, 2);

    /* The real reader over flare's counters. */
    flare_counter *real;
    assert_int_equal(flare_counter_get("test_readings.steps", &real), FLARE_OK);
    rules_counter_rate live;
    assert_int_equal(rules_counter_rate_init(&live, &config, rules_flare_counter_reader, real),
                     FLARE_OK);
    assert_int_equal(rules_counter_rate_poll(&live, 1 * S), FLARE_OK);
    assert_int_equal(flare_counter_add(real, 30), FLARE_OK);
    assert_int_equal(rules_counter_rate_poll(&live, 1 * S + 500 * MS), FLARE_OK);
    rules_counter_rate_read(&live, 1 * S + 600 * MS, &reading);
    assert_true(reading.value > 29.99 && reading.value < 30.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_counts_events_in_window),
        cmocka_unit_test(test_rate_empty_window_is_zero_not_missing),
        cmocka_unit_test(test_rate_cumulative_feed),
        cmocka_unit_test(test_rate_rejects_bad_config_and_old_events),
        cmocka_unit_test(test_rate_staleness_uses_source_time),
        cmocka_unit_test(test_percentiles_exact_nearest_rank),
        cmocka_unit_test(test_percentiles_empty_is_missing),
        cmocka_unit_test(test_percentiles_truncated_when_buffer_overflows),
        cmocka_unit_test(test_percentiles_stale_and_bad_config),
        cmocka_unit_test(test_gauge),
        cmocka_unit_test(test_counter_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
