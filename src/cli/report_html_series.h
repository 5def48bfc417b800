/*
 * report_html_series.h: time series reduced for drawing in `flare report
 * --html` (report_html_series.c): a metric's samples kept as the minimum
 * and maximum of each of a fixed number of time buckets (so a chart of a
 * long session has at most two points per bucket, its peaks kept), and a
 * device's busy time: the union of its kernels' intervals, spread over
 * buckets as the percentage of each bucket the device was busy.
 *
 * Reduction is for drawing only: the counts and extremes a series keeps
 * over all its samples are exact, and every number the page prints as a
 * label must come from them or from the store, never from the buckets.
 * Memory is fixed at init (one array of buckets): adding must never
 * allocate, and no sample, whatever its time, may land outside the array.
 */
#ifndef FLARE_CLI_REPORT_HTML_SERIES_H
#define FLARE_CLI_REPORT_HTML_SERIES_H

#include <stdint.h>

#include "cli/report_html_page.h"

/* Points per track, at most: the bucket counts below keep under it. */
#define HTML_SERIES_POINTS_MAX 2000

typedef struct html_bucket {
    double minimum, maximum;
    uint64_t minimum_ns, maximum_ns; /* when each was sampled */
    uint32_t count;
} html_bucket;

/* A sampled quantity over [from_ns, to_ns]. */
typedef struct html_series {
    uint64_t from_ns, to_ns;
    uint32_t bucket_count;
    html_bucket *buckets;
    uint64_t samples;        /* every sample added */
    double minimum, maximum; /* over every sample (exact) */
    double sum;              /* of every sample, for the mean */
} html_series;

/* Prepares series for samples in [from_ns, to_ns] (to_ns > from_ns; a
 * sample outside it counts in the nearest bucket) in HTML_SERIES_POINTS_MAX
 * / 2 buckets. Returns 0, or -1 when out of memory (series then empty). */
int html_series_init(html_series *series, uint64_t from_ns, uint64_t to_ns);
/* Adds one sample; NaN values are not added. */
void html_series_add(html_series *series, uint64_t time_ns, double value);
/* Writes the members "t" (times as (time - origin_ns) * scale, in time
 * order) and "v" (values): for each bucket with samples, its minimum and
 * its maximum in the order they came, or its one sample. */
void html_series_write(const html_series *series, html_page *page, uint64_t origin_ns,
                       double scale);
void html_series_free(html_series *series);

/* A device's busy time over [from_ns, to_ns], from its kernels in start
 * order. */
typedef struct html_busy {
    uint64_t from_ns, to_ns;
    uint32_t bucket_count;
    double *busy_ns; /* per bucket */
    uint64_t island_start_ns, island_end_ns;
    int in_island;
    uint64_t kernels;       /* kernels added */
    uint64_t busy_total_ns; /* the union of their intervals (exact) */
} html_busy;

/* As html_series_init, with HTML_SERIES_POINTS_MAX buckets. */
int html_busy_init(html_busy *busy, uint64_t from_ns, uint64_t to_ns);
/* Adds a kernel [start_ns, end_ns); kernels must come by start. */
void html_busy_add(html_busy *busy, uint64_t start_ns, uint64_t end_ns);
/* Ends the last run of overlapping kernels: call before reading. */
void html_busy_finish(html_busy *busy);
/* Writes "t" (each bucket's middle, as html_series_write) and "v" (the
 * percentage of the bucket the device was busy, 0..100). */
void html_busy_write(const html_busy *busy, html_page *page, uint64_t origin_ns, double scale);
void html_busy_free(html_busy *busy);

#endif /* FLARE_CLI_REPORT_HTML_SERIES_H */
