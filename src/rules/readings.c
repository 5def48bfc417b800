/*
 * readings.c: metric sources and their readings (readings.h).
 *
 * Pure and clock-injected: nothing here reads a clock, logs, or touches a
 * file; the only allocation is a percentile window's buffers at init. It
 * must never block and never grow: every buffer is sized once.
 */
#include "rules/readings.h"

#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"

static int is_stale(uint64_t stale_after_ns, uint64_t source_time_ns, uint64_t now_ns)
{
    if (stale_after_ns == 0)
        return 0;
    /* A source time ahead of now (clock skew between threads' reads) is fresh. */
    return now_ns > source_time_ns && now_ns - source_time_ns > stale_after_ns;
}

/* ---- rates ---- */

int rules_rate_init(rules_rate *rate, const rules_rate_config *config)
{
    if (rate == NULL || config == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    uint64_t bucket_ns = config->bucket_ns != 0 ? config->bucket_ns : RULES_RATE_BUCKET_DEFAULT_NS;
    if (config->window_ns == 0 || config->window_ns % bucket_ns != 0 ||
        config->window_ns / bucket_ns > RULES_RATE_BUCKETS_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(rate, 0, sizeof(*rate));
    rate->config = *config;
    rate->config.bucket_ns = bucket_ns;
    rate->bucket_count = (uint32_t)(config->window_ns / bucket_ns);
    /* Index UINT64_MAX marks an unused bucket: no real time maps to it. */
    for (uint32_t i = 0; i < rate->bucket_count; i++)
        rate->buckets[i].index = UINT64_MAX;
    return FLARE_OK;
}

void rules_rate_add(rules_rate *rate, uint64_t source_time_ns, uint64_t increment)
{
    uint64_t index = source_time_ns / rate->config.bucket_ns;
    if (!rate->fed || source_time_ns > rate->newest_source_ns) {
        rate->newest_source_ns = source_time_ns;
        rate->newest_index = index;
    }
    rate->fed = 1;
    if (increment == 0)
        return;
    /* The ring holds bucket_count consecutive indexes ending at the newest;
     * anything before that would land in a bucket now owned by newer time. */
    if (index + rate->bucket_count <= rate->newest_index) {
        rate->too_old += increment;
        return;
    }
    rules_rate_bucket *bucket = &rate->buckets[index % rate->bucket_count];
    if (bucket->index != index) {
        bucket->index = index;
        bucket->count = 0;
    }
    bucket->count += increment;
}

void rules_rate_add_cumulative(rules_rate *rate, uint64_t source_time_ns, uint64_t cumulative)
{
    uint64_t increment = 0;
    if (rate->have_cumulative)
        increment = cumulative - rate->last_cumulative; /* modulo 2^64 on purpose */
    rate->have_cumulative = 1;
    rate->last_cumulative = cumulative;
    rules_rate_add(rate, source_time_ns, increment);
}

void rules_rate_read(rules_rate *rate, uint64_t now_ns, rules_reading *reading)
{
    memset(reading, 0, sizeof(*reading));
    reading->sequence = ++rate->sequence;
    reading->publish_time_ns = now_ns;
    if (!rate->fed) {
        reading->missing = 1;
        return;
    }
    reading->source_time_ns = rate->newest_source_ns;
    reading->stale = is_stale(rate->config.stale_after_ns, rate->newest_source_ns, now_ns);
    /* The window is the bucket_count buckets ending with now's bucket. */
    uint64_t now_index = now_ns / rate->config.bucket_ns;
    uint64_t oldest_index =
        now_index + 1 >= rate->bucket_count ? now_index + 1 - rate->bucket_count : 0;
    uint64_t total = 0;
    uint32_t used = 0;
    for (uint32_t i = 0; i < rate->bucket_count; i++) {
        const rules_rate_bucket *bucket = &rate->buckets[i];
        if (bucket->index == UINT64_MAX || bucket->index < oldest_index ||
            bucket->index > now_index)
            continue;
        total += bucket->count;
        used++;
    }
    reading->samples = used;
    reading->value = (double)total * 1e9 / (double)rate->config.window_ns;
}

/* ---- percentiles ---- */

int rules_percentiles_init(rules_percentiles *window, const rules_percentile_config *config)
{
    if (window == NULL || config == NULL || config->window_ns == 0 ||
        config->capacity > RULES_PERCENTILE_CAPACITY_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(window, 0, sizeof(*window));
    window->config = *config;
    if (window->config.capacity == 0)
        window->config.capacity = RULES_PERCENTILE_CAPACITY_DEFAULT;
    window->samples = calloc(window->config.capacity, sizeof(*window->samples));
    window->scratch = calloc(window->config.capacity, sizeof(*window->scratch));
    if (window->samples == NULL || window->scratch == NULL) {
        rules_percentiles_free(window);
        return FLARE_ERR_NO_MEMORY;
    }
    return FLARE_OK;
}

void rules_percentiles_free(rules_percentiles *window)
{
    if (window == NULL)
        return;
    free(window->samples);
    free(window->scratch);
    window->samples = NULL;
    window->scratch = NULL;
    window->count = 0;
}

void rules_percentiles_add(rules_percentiles *window, uint64_t end_ns, uint64_t duration_ns)
{
    uint32_t capacity = window->config.capacity;
    rules_duration_sample *slot = &window->samples[window->head];
    if (window->count == capacity) {
        /* Keep the newest: the oldest sample is the least likely to still be
         * in the window, and remembering its end time tells a reading whether
         * the loss touched it. */
        if (!window->evicted || slot->end_ns > window->newest_evicted_end_ns)
            window->newest_evicted_end_ns = slot->end_ns;
        window->evicted = 1;
        window->overwritten++;
    } else {
        window->count++;
    }
    slot->end_ns = end_ns;
    slot->duration_ns = duration_ns;
    window->head = window->head + 1 == capacity ? 0 : window->head + 1;
    if (end_ns > window->newest_end_ns)
        window->newest_end_ns = end_ns;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void rules_percentiles_read(rules_percentiles *window, uint64_t now_ns, const double *percentiles,
                            size_t count, rules_reading *readings)
{
    uint64_t sequence = ++window->sequence;
    uint64_t window_start =
        now_ns > window->config.window_ns ? now_ns - window->config.window_ns : 0;
    uint32_t in_window = 0;
    uint64_t newest = 0;
    for (uint32_t i = 0; i < window->count; i++) {
        const rules_duration_sample *sample = &window->samples[i];
        if (sample->end_ns <= window_start || sample->end_ns > now_ns)
            continue;
        window->scratch[in_window++] = sample->duration_ns;
        if (sample->end_ns > newest)
            newest = sample->end_ns;
    }
    /* A sample overwritten while it would still be in the window is a sample
     * this reading should have seen and did not. */
    int truncated = window->evicted && window->newest_evicted_end_ns > window_start;
    if (in_window > 1)
        qsort(window->scratch, in_window, sizeof(*window->scratch), compare_u64);
    for (size_t p = 0; p < count; p++) {
        rules_reading *reading = &readings[p];
        memset(reading, 0, sizeof(*reading));
        reading->sequence = sequence;
        reading->publish_time_ns = now_ns;
        reading->samples = in_window;
        reading->truncated = truncated;
        reading->source_time_ns = in_window > 0 ? newest : window->newest_end_ns;
        reading->stale = reading->source_time_ns != 0 &&
                         is_stale(window->config.stale_after_ns, reading->source_time_ns, now_ns);
        if (in_window == 0) {
            reading->missing = 1;
            continue;
        }
        double percentile = percentiles[p];
        if (percentile <= 0.0)
            percentile = 0.0;
        if (percentile > 100.0)
            percentile = 100.0;
        /* Nearest rank: ceil(p/100 * n), at least 1. Computed in integers of
         * hundredths-of-a-percent so 90% of 10 is exactly rank 9. */
        uint64_t scaled = (uint64_t)(percentile * 100.0 + 0.5);
        uint64_t rank = (scaled * in_window + 9999) / 10000;
        if (rank == 0)
            rank = 1;
        if (rank > in_window)
            rank = in_window;
        reading->value = (double)window->scratch[rank - 1];
    }
}

/* ---- gauges ---- */

void rules_gauge_init(rules_gauge *gauge, uint64_t stale_after_ns)
{
    memset(gauge, 0, sizeof(*gauge));
    gauge->stale_after_ns = stale_after_ns;
}

void rules_gauge_set(rules_gauge *gauge, uint64_t source_time_ns, double value)
{
    if (gauge->have && source_time_ns < gauge->source_time_ns)
        return;
    gauge->have = 1;
    gauge->value = value;
    gauge->source_time_ns = source_time_ns;
}

void rules_gauge_read(rules_gauge *gauge, uint64_t now_ns, rules_reading *reading)
{
    memset(reading, 0, sizeof(*reading));
    reading->sequence = ++gauge->sequence;
    reading->publish_time_ns = now_ns;
    if (!gauge->have) {
        reading->missing = 1;
        return;
    }
    reading->value = gauge->value;
    reading->samples = 1;
    reading->source_time_ns = gauge->source_time_ns;
    reading->stale = is_stale(gauge->stale_after_ns, gauge->source_time_ns, now_ns);
}

/* ---- counter rates ---- */

int rules_counter_rate_init(rules_counter_rate *counter, const rules_rate_config *config,
                            rules_counter_reader reader, void *user)
{
    if (counter == NULL || reader == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = rules_rate_init(&counter->rate, config);
    if (status != FLARE_OK)
        return status;
    counter->reader = reader;
    counter->user = user;
    counter->read_failures = 0;
    return FLARE_OK;
}

int rules_counter_rate_poll(rules_counter_rate *counter, uint64_t now_ns)
{
    uint64_t value = 0;
    int status = counter->reader(counter->user, &value);
    if (status != FLARE_OK) {
        counter->read_failures++;
        return status;
    }
    rules_rate_add_cumulative(&counter->rate, now_ns, value);
    return FLARE_OK;
}

void rules_counter_rate_read(rules_counter_rate *counter, uint64_t now_ns, rules_reading *reading)
{
    rules_rate_read(&counter->rate, now_ns, reading);
}

int rules_flare_counter_reader(void *user, uint64_t *value)
{
    return flare_counter_value((const flare_counter *)user, value);
}
