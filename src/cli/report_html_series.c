/*
 * report_html_series.c: time series reduced for drawing (report_html_series.h):
 * min/max buckets for sampled metrics, and busy time per bucket from the
 * union of a device's kernels.
 *
 * A bucket's index is computed in integers from the sample's time, so no
 * sample falls outside the array whatever its time. It must never
 * allocate after init, and never let the reduction reach a number the page
 * prints: the exact totals live beside the buckets.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_html_series.h"

/* The bucket of time_ns among count buckets over [from_ns, to_ns]: the
 * first for earlier times, the last for later ones. */
static uint32_t bucket_of(uint64_t from_ns, uint64_t to_ns, uint32_t count, uint64_t time_ns)
{
    if (time_ns <= from_ns || to_ns <= from_ns)
        return 0;
    if (time_ns >= to_ns)
        return count - 1;
    unsigned __int128 offset = (unsigned __int128)(time_ns - from_ns) * count;
    uint64_t index = (uint64_t)(offset / (to_ns - from_ns));
    return index < count ? (uint32_t)index : count - 1;
}

/* The start of bucket index (index == count: to_ns). */
static uint64_t bucket_start(uint64_t from_ns, uint64_t to_ns, uint32_t count, uint32_t index)
{
    unsigned __int128 span = (unsigned __int128)(to_ns - from_ns) * index;
    return from_ns + (uint64_t)(span / count);
}

static double scaled(uint64_t time_ns, uint64_t origin_ns, double scale)
{
    return time_ns >= origin_ns ? (double)(time_ns - origin_ns) * scale
                                : -(double)(origin_ns - time_ns) * scale;
}

/* ---- sampled series ---- */

int html_series_init(html_series *series, uint64_t from_ns, uint64_t to_ns)
{
    memset(series, 0, sizeof *series);
    series->from_ns = from_ns;
    series->to_ns = to_ns > from_ns ? to_ns : from_ns + 1;
    series->bucket_count = HTML_SERIES_POINTS_MAX / 2;
    series->buckets = calloc(series->bucket_count, sizeof *series->buckets);
    if (series->buckets == NULL) {
        series->bucket_count = 0;
        return -1;
    }
    return 0;
}

void html_series_add(html_series *series, uint64_t time_ns, double value)
{
    if (isnan(value) || series->bucket_count == 0)
        return;
    if (series->samples == 0 || value < series->minimum)
        series->minimum = value;
    if (series->samples == 0 || value > series->maximum)
        series->maximum = value;
    series->samples++;
    series->sum += value;
    html_bucket *bucket =
        &series->buckets[bucket_of(series->from_ns, series->to_ns, series->bucket_count, time_ns)];
    if (bucket->count == 0 || value < bucket->minimum) {
        bucket->minimum = value;
        bucket->minimum_ns = time_ns;
    }
    if (bucket->count == 0 || value > bucket->maximum) {
        bucket->maximum = value;
        bucket->maximum_ns = time_ns;
    }
    bucket->count++;
}

/* Calls write for each point of the reduced series, in time order. */
static void series_points(const html_series *series, html_page *page, uint64_t origin_ns,
                          double scale, int times)
{
    for (uint32_t i = 0; i < series->bucket_count; i++) {
        const html_bucket *bucket = &series->buckets[i];
        if (bucket->count == 0)
            continue;
        int minimum_first = bucket->minimum_ns <= bucket->maximum_ns;
        uint64_t first_ns = minimum_first ? bucket->minimum_ns : bucket->maximum_ns;
        uint64_t second_ns = minimum_first ? bucket->maximum_ns : bucket->minimum_ns;
        double first = minimum_first ? bucket->minimum : bucket->maximum;
        double second = minimum_first ? bucket->maximum : bucket->minimum;
        if (times)
            html_json_double(page, NULL, scaled(first_ns, origin_ns, scale));
        else
            html_json_double(page, NULL, first);
        if (bucket->count == 1 || (first_ns == second_ns && first == second))
            continue;
        /* Two samples at one time would draw a vertical step at that
         * time: uPlot takes equal times in order. */
        if (times)
            html_json_double(page, NULL, scaled(second_ns, origin_ns, scale));
        else
            html_json_double(page, NULL, second);
    }
}

void html_series_write(const html_series *series, html_page *page, uint64_t origin_ns, double scale)
{
    html_json_array(page, "t");
    series_points(series, page, origin_ns, scale, 1);
    html_json_end(page);
    html_json_array(page, "v");
    series_points(series, page, origin_ns, scale, 0);
    html_json_end(page);
}

void html_series_free(html_series *series)
{
    free(series->buckets);
    memset(series, 0, sizeof *series);
}

/* ---- busy time ---- */

int html_busy_init(html_busy *busy, uint64_t from_ns, uint64_t to_ns)
{
    memset(busy, 0, sizeof *busy);
    busy->from_ns = from_ns;
    busy->to_ns = to_ns > from_ns ? to_ns : from_ns + 1;
    busy->bucket_count = HTML_SERIES_POINTS_MAX;
    busy->busy_ns = calloc(busy->bucket_count, sizeof *busy->busy_ns);
    if (busy->busy_ns == NULL) {
        busy->bucket_count = 0;
        return -1;
    }
    return 0;
}

/* Spreads one run of overlapping kernels [start_ns, end_ns) over the
 * buckets it covers (the part inside [from_ns, to_ns] only). */
static void busy_spread(html_busy *busy, uint64_t start_ns, uint64_t end_ns)
{
    busy->busy_total_ns += end_ns - start_ns;
    if (busy->bucket_count == 0)
        return;
    if (start_ns < busy->from_ns)
        start_ns = busy->from_ns;
    if (end_ns > busy->to_ns)
        end_ns = busy->to_ns;
    if (end_ns <= start_ns)
        return;
    uint32_t first = bucket_of(busy->from_ns, busy->to_ns, busy->bucket_count, start_ns);
    uint32_t last = bucket_of(busy->from_ns, busy->to_ns, busy->bucket_count, end_ns - 1);
    for (uint32_t i = first; i <= last; i++) {
        uint64_t low = bucket_start(busy->from_ns, busy->to_ns, busy->bucket_count, i);
        uint64_t high = bucket_start(busy->from_ns, busy->to_ns, busy->bucket_count, i + 1);
        uint64_t from = start_ns > low ? start_ns : low;
        uint64_t to = end_ns < high ? end_ns : high;
        if (to > from)
            busy->busy_ns[i] += (double)(to - from);
    }
}

void html_busy_add(html_busy *busy, uint64_t start_ns, uint64_t end_ns)
{
    busy->kernels++;
    if (busy->in_island && start_ns <= busy->island_end_ns) {
        if (end_ns > busy->island_end_ns)
            busy->island_end_ns = end_ns;
        return;
    }
    if (busy->in_island)
        busy_spread(busy, busy->island_start_ns, busy->island_end_ns);
    busy->island_start_ns = start_ns;
    busy->island_end_ns = end_ns;
    busy->in_island = 1;
}

void html_busy_finish(html_busy *busy)
{
    if (busy->in_island)
        busy_spread(busy, busy->island_start_ns, busy->island_end_ns);
    busy->in_island = 0;
}

void html_busy_write(const html_busy *busy, html_page *page, uint64_t origin_ns, double scale)
{
    html_json_array(page, "t");
    for (uint32_t i = 0; i < busy->bucket_count; i++) {
        uint64_t low = bucket_start(busy->from_ns, busy->to_ns, busy->bucket_count, i);
        uint64_t high = bucket_start(busy->from_ns, busy->to_ns, busy->bucket_count, i + 1);
        html_json_double(page, NULL, scaled(low + (high - low) / 2, origin_ns, scale));
    }
    html_json_end(page);
    html_json_array(page, "v");
    for (uint32_t i = 0; i < busy->bucket_count; i++) {
        uint64_t low = bucket_start(busy->from_ns, busy->to_ns, busy->bucket_count, i);
        uint64_t high = bucket_start(busy->from_ns, busy->to_ns, busy->bucket_count, i + 1);
        double percent = high > low ? 100.0 * busy->busy_ns[i] / (double)(high - low) : 0.0;
        /* One decimal is all a chart can show; keeps the page small. */
        html_json_double(page, NULL, round((percent > 100.0 ? 100.0 : percent) * 10.0) / 10.0);
    }
    html_json_end(page);
}

void html_busy_free(html_busy *busy)
{
    free(busy->busy_ns);
    memset(busy, 0, sizeof *busy);
}
