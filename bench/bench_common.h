/*
 * bench_common.h: timing and statistics helpers shared by the benchmarks.
 * Benchmarks print medians over repeated runs; this machine is shared and
 * noisy, so single runs mean little.
 */
#ifndef FLARE_BENCH_COMMON_H
#define FLARE_BENCH_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static int bench_compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts values in place and returns the median. */
static inline double bench_median(double *values, size_t count)
{
    qsort(values, count, sizeof(double), bench_compare_double);
    if (count % 2)
        return values[count / 2];
    return 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

static inline double bench_percentile(double *sorted, size_t count, double q)
{
    size_t index = (size_t)(q * (double)(count - 1));
    return sorted[index];
}

#endif /* FLARE_BENCH_COMMON_H */
