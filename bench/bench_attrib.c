/*
 * bench_attrib.c: sample-to-scope attribution at PM-drain scale.
 *
 * 100,000 scopes (8 threads, nested up to depth 8, durations from a few
 * microseconds to milliseconds, idle gaps between top-level scopes, one still
 * open) and 1,000,000 samples over
 * the same span. Times attrib_resolve (median of 5) and the naive resolver
 * on a subset of the samples, extrapolated linearly to the full batch (the
 * naive cost is exactly linear in the sample count: every sample scans every
 * scope). Checks that both agree on the subset.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "attrib/attrib.h"
#include "bench_common.h"
#include "flare/flare.h"

#define SCOPES        100000
#define SAMPLES       1000000
#define NAIVE_SAMPLES 10000
#define THREADS       8
#define MAX_DEPTH     8
#define RUNS          5

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* One thread's nested scopes: a random walk of opens and closes with gaps
 * of 1..20 us between events, starting at a CLOCK_MONOTONIC-like origin. */
static size_t generate_thread(attrib_scope *scopes, size_t count, size_t limit, int64_t thread,
                              uint64_t *span_end)
{
    size_t stack[MAX_DEPTH];
    size_t depth = 0;
    uint64_t now = 1000000000000ull + rng_next() % 1000;
    while (count < limit || depth > 0) {
        int open = count < limit && (depth == 0 || (depth < MAX_DEPTH && rng_next() % 2 == 0));
        if (open) {
            scopes[count] = (attrib_scope){.start_ns = now,
                                           .end_ns = ATTRIB_OPEN,
                                           .instance_id = ((uint64_t)thread << 32) | count,
                                           .thread_id = thread,
                                           .depth = (uint32_t)depth};
            stack[depth++] = count++;
        } else {
            size_t index = stack[--depth];
            /* The outermost scope of the last thread stays open, as at a mid-run drain. */
            if (!(count >= limit && depth == 0 && thread == THREADS - 1))
                scopes[index].end_ns = now;
            /* Idle time between a thread's top-level scopes, so some
             * samples fall where no thread has a scope. */
            if (depth == 0)
                now += rng_next() % 400000;
        }
        now += 1000 + rng_next() % 19000;
    }
    if (now > *span_end)
        *span_end = now;
    return count;
}

int main(void)
{
    attrib_scope *scopes = malloc(SCOPES * sizeof(*scopes));
    uint64_t *times = malloc(SAMPLES * sizeof(*times));
    int64_t *winners = malloc(SAMPLES * sizeof(*winners));
    int64_t *naive = malloc(NAIVE_SAMPLES * sizeof(*naive));
    if (scopes == NULL || times == NULL || winners == NULL || naive == NULL) {
        fprintf(stderr, "bench_attrib: out of memory\n");
        return 1;
    }
    size_t count = 0;
    uint64_t span_end = 0;
    for (int thread = 0; thread < THREADS; thread++)
        count = generate_thread(scopes, count, (size_t)(thread + 1) * (SCOPES / THREADS), thread,
                                &span_end);
    uint64_t span_start = 1000000000000ull;
    /* Samples in arrival order within a drain (roughly increasing), with a
     * little jitter so the sort has real work to do. */
    for (size_t i = 0; i < SAMPLES; i++) {
        uint64_t base = span_start + (span_end - span_start) / SAMPLES * i;
        times[i] = base + rng_next() % 5000;
    }

    attrib_scratch scratch;
    attrib_scratch_init(&scratch);
    double runs[RUNS];
    for (int run = 0; run < RUNS; run++) {
        uint64_t begin = bench_now_ns();
        if (attrib_resolve(scopes, count, times, SAMPLES, winners, &scratch) != FLARE_OK) {
            fprintf(stderr, "bench_attrib: attrib_resolve failed\n");
            return 1;
        }
        runs[run] = (double)(bench_now_ns() - begin) / 1e9;
    }
    double sweep_s = bench_median(runs, RUNS);
    size_t attributed = 0;
    for (size_t i = 0; i < SAMPLES; i++)
        attributed += winners[i] >= 0;

    /* Naive on an evenly spaced subset, then extrapolated. */
    uint64_t *subset = malloc(NAIVE_SAMPLES * sizeof(*subset));
    if (subset == NULL)
        return 1;
    size_t stride = SAMPLES / NAIVE_SAMPLES;
    for (size_t i = 0; i < NAIVE_SAMPLES; i++)
        subset[i] = times[i * stride];
    uint64_t begin = bench_now_ns();
    attrib_resolve_naive(scopes, count, subset, NAIVE_SAMPLES, naive);
    double naive_subset_s = (double)(bench_now_ns() - begin) / 1e9;
    size_t mismatches = 0;
    for (size_t i = 0; i < NAIVE_SAMPLES; i++)
        mismatches += naive[i] != winners[i * stride];
    double naive_s = naive_subset_s * (double)SAMPLES / NAIVE_SAMPLES;

    printf("attribution: %d samples, %zu scopes (%d threads, depth <= %d)\n", SAMPLES, count,
           THREADS, MAX_DEPTH);
    printf("  sweep (attrib_resolve), median of %d: %.3f s (%.1f ns/sample)\n", RUNS, sweep_s,
           sweep_s * 1e9 / SAMPLES);
    printf("  attributed %zu of %d samples\n", attributed, SAMPLES);
    printf("  naive, measured on %d samples: %.3f s; extrapolated linearly to %d: %.1f s\n",
           NAIVE_SAMPLES, naive_subset_s, SAMPLES, naive_s);
    printf("  speedup (naive extrapolated / sweep): %.0fx\n", naive_s / sweep_s);
    printf("  sweep vs naive on the subset: %zu mismatches\n", mismatches);
    attrib_scratch_release(&scratch);
    free(subset);
    free(naive);
    free(winners);
    free(times);
    free(scopes);
    return mismatches == 0 ? 0 : 1;
}
