/*
 * test_integrate.c: per-kernel values from PM samples (src/attrib/
 * integrate.h). Worked cases with known answers (pro rata at both edges,
 * the time-weighted mean of a rate, a flagged sample never summed, holes,
 * too little coverage, a kernel below the minimum, a clamped sample looked
 * back for, bad arguments), then random cases against a plain loop over
 * every sample, and the bound's promise: where the samples hold only the
 * kernel's work inside it (other work may fill the rest of an edge sample),
 * the kernel's true total is within error_bound of the value; with holes or
 * flagged samples, where its rate is steady.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attrib/integrate.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (1.0 + fabs(b)))

static void expect_near(double got, double want, const char *what)
{
    if (!NEAR(got, want))
        fail_msg("%s: %.17g, expected %.17g", what, got, want);
}

/* 0-100, 100-200, 200-300 ns with 10, 20 and 30. */
static const attrib_pm_sample three[] = {{0, 100, 10, 0}, {100, 200, 20, 0}, {200, 300, 30, 0}};

static void test_pro_rata_at_both_edges(void **state)
{
    (void)state;
    attrib_integral r;
    assert_int_equal(attrib_integrate(three, 3, 50, 250, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_MEASURED);
    expect_near(r.value, 10 * 0.5 + 20 + 30 * 0.5, "sum");
    expect_near(r.error_bound, 10 * 0.5 + 30 * 0.5, "bound"); /* each edge: v * max(f, 1 - f) */
    assert_int_equal(r.duration_ns, 200);
    assert_int_equal(r.covered_ns, 200);
    assert_int_equal(r.samples, 3);
    assert_int_equal(r.flagged, 0);
    /* A kernel inside one sample: a fifth of it; the bound is the other 4/5. */
    assert_int_equal(attrib_integrate(three, 3, 120, 140, 1, 0, &r), 0);
    expect_near(r.value, 4, "inside one sample");
    expect_near(r.error_bound, 16, "inside one sample's bound");
    /* Samples that fit the kernel exactly: no edge, no bound. */
    assert_int_equal(attrib_integrate(three, 3, 0, 300, 1, 0, &r), 0);
    expect_near(r.value, 60, "whole");
    expect_near(r.error_bound, 0, "whole bound");
}

static void test_a_rate_is_averaged_by_overlap(void **state)
{
    (void)state;
    attrib_integral r;
    assert_int_equal(attrib_integrate(three, 3, 50, 250, 0, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_MEASURED);
    expect_near(r.value, (10.0 * 50 + 20.0 * 100 + 30.0 * 50) / 200, "mean");
    /* Half the overlap is on edges, the values spread over 20. */
    expect_near(r.error_bound, 0.5 * 20, "mean bound");
    assert_int_equal(attrib_integrate(three, 3, 110, 190, 0, 0, &r), 0);
    expect_near(r.value, 20, "inside one sample");
    expect_near(r.error_bound, 0, "one value: no spread");
}

static void test_flagged_never_summed(void **state)
{
    (void)state;
    const attrib_pm_sample flagged[] = {
        {0, 100, 10, 0}, {100, 200, 1.3e12, 8}, {200, 300, 30, 0}, {300, 400, 40, 2}};
    attrib_integral r;
    assert_int_equal(attrib_integrate(flagged, 4, 0, 300, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_FLAGGED);
    expect_near(r.value, 40, "the unflagged");
    assert_int_equal(r.covered_ns, 300); /* flagged time covers, as pm_accuracy.py counts */
    assert_int_equal(r.samples, 3);
    assert_int_equal(r.flagged, 1);
    assert_int_equal(r.flags, 8);
    /* The 100 ns not counted at the highest rate the rest allows. */
    expect_near(r.error_bound, 40.0 / 200 * 100, "missed time");
    assert_int_equal(attrib_integrate(flagged, 4, 250, 400, 1, 0, &r), 0);
    assert_int_equal(r.flags, 2);
    /* Only a flagged sample: nothing counted, no bound to give. */
    assert_int_equal(attrib_integrate(flagged, 4, 120, 180, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_FLAGGED);
    expect_near(r.value, 0, "nothing counted");
    assert_true(isinf(r.error_bound));
    assert_int_equal(attrib_integrate(flagged, 4, 0, 100, 0, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_MEASURED);
    expect_near(r.value, 10, "before the flagged one");
}

static void test_holes_and_coverage(void **state)
{
    (void)state;
    /* 85% covered: under the 90% needed. */
    const attrib_pm_sample holes[] = {{0, 85, 85, 0}, {100, 200, 100, 0}};
    attrib_integral r;
    assert_int_equal(attrib_integrate(holes, 2, 0, 100, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_UNCOVERED);
    expect_near(r.value, 85, "what was covered");
    expect_near(r.error_bound, 15, "15 ns at 1 a ns");
    assert_int_equal(attrib_integrate(holes, 2, 0, 190, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_MEASURED); /* 175 of 190 */
    /* No sample at all. */
    assert_int_equal(attrib_integrate(holes, 2, 500, 600, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_UNCOVERED);
    assert_int_equal(r.samples, 0);
    expect_near(r.value, 0, "nothing");
    assert_true(isinf(r.error_bound));
    assert_int_equal(attrib_integrate(NULL, 0, 500, 600, 0, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_UNCOVERED);
}

static void test_below_minimum(void **state)
{
    (void)state;
    attrib_integral r;
    assert_int_equal(attrib_integrate(three, 3, 50, 149, 1, 100, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_BELOW_MINIMUM);
    expect_near(r.value, 0, "no value");
    assert_int_equal(r.duration_ns, 99);
    assert_int_equal(r.samples, 2); /* what it overlapped is still said */
    assert_int_equal(attrib_integrate(three, 3, 50, 150, 1, 100, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_MEASURED);
}

static void test_clamped_sample_looked_back_for(void **state)
{
    (void)state;
    /* The second starts before the first ends (its start clamped). */
    const attrib_pm_sample clamped[] = {{0, 100, 100, 0}, {90, 200, 110, 0}, {200, 300, 1, 0}};
    attrib_integral r;
    assert_int_equal(attrib_integrate(clamped, 3, 95, 99, 1, 0, &r), 0);
    assert_int_equal(r.samples, 2);
    expect_near(r.value, 4 + 4, "both overlapping samples");
    /* Overlapping samples count 8 ns of a 4 ns kernel: nothing missed, and
     * each is an edge (96 and 106 outside it). */
    assert_int_equal(r.covered_ns, 8);
    expect_near(r.error_bound, 100 * 0.96 + 110 * (1 - 4.0 / 110), "overlap bound");
    /* A sample of no width is skipped. */
    const attrib_pm_sample empty[] = {{0, 100, 100, 0}, {100, 100, 1e9, 0}, {100, 200, 100, 0}};
    assert_int_equal(attrib_integrate(empty, 3, 0, 200, 1, 0, &r), 0);
    assert_int_equal(r.samples, 2);
    expect_near(r.value, 200, "zero-width skipped");
}

/* A sample that is NaN or infinite is never summed (said as a flag); a
 * kernel of no length holds no value. */
static void test_values_that_are_not_numbers(void **state)
{
    (void)state;
    const attrib_pm_sample odd[] = {{0, 100, 10, 0}, {100, 200, NAN, 0}, {200, 300, INFINITY, 0}};
    attrib_integral r;
    assert_int_equal(attrib_integrate(odd, 3, 0, 300, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_FLAGGED);
    assert_int_equal(r.flagged, 2);
    assert_int_equal(r.flags, ATTRIB_FLAG_NOT_FINITE);
    expect_near(r.value, 10, "the finite one");
    assert_true(isfinite(r.error_bound));
    assert_int_equal(attrib_integrate(odd, 3, 0, 300, 0, 0, &r), 0);
    expect_near(r.value, 10, "the finite one's mean");
    assert_int_equal(attrib_integrate(three, 3, 150, 150, 1, 0, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_UNCOVERED);
    assert_int_equal(attrib_integrate(three, 3, 150, 150, 1, 1, &r), 0);
    assert_int_equal(r.status, ATTRIB_INTEGRAL_BELOW_MINIMUM);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    attrib_integral r;
    memset(&r, 0x5a, sizeof(r));
    assert_int_equal(attrib_integrate(three, 3, 200, 100, 1, 0, &r), -1);
    assert_int_equal(attrib_integrate(NULL, 3, 0, 100, 1, 0, &r), -1);
    assert_int_equal(r.samples, 0x5a5a5a5a); /* untouched */
    assert_int_equal(attrib_integrate(three, 3, 0, 100, 1, 0, NULL), -1);
}

/* ---- random cases ---- */

static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

/* Samples 100 ns to 2 us wide, one after another from 0, with holes of up
 * to 500 ns where holes is set and flags on one in ten where flagged is.
 * Their values: rate(t) integrated over them, where rate is the kernel's
 * steady or_changing rate inside [ks, ke) and other work's outside. */
typedef struct world {
    uint64_t ks, ke;
    double kernel_rate, other_rate;
    int steady;
} world;

/* The kernel's work rate at t (per ns): steady, or a step at its middle. */
static double kernel_rate_at(const world *w, uint64_t t)
{
    return w->steady || t < (w->ks + w->ke) / 2 ? w->kernel_rate : 3 * w->kernel_rate;
}

/* The work of the kernel in [a, b) and of everything in [a, b). */
static double work_between(const world *w, uint64_t a, uint64_t b, int kernel_only)
{
    double total = 0;
    uint64_t middle = (w->ks + w->ke) / 2;
    uint64_t cuts[] = {a, w->ks, middle, w->ke, b};
    for (int i = 0; i < 4; i++) {
        uint64_t lo = cuts[i] < a ? a : cuts[i], hi = cuts[i + 1] > b ? b : cuts[i + 1];
        if (hi <= lo)
            continue;
        int inside = lo >= w->ks && hi <= w->ke;
        if (inside)
            total += kernel_rate_at(w, lo) * (double)(hi - lo);
        else if (!kernel_only)
            total += w->other_rate * (double)(hi - lo);
    }
    return total;
}

static size_t make_samples(uint64_t *random, const world *w, int holes, int flagged,
                           attrib_pm_sample *out, size_t max)
{
    size_t count = 0;
    for (uint64_t t = 0; t < 60000 && count < max;) {
        uint64_t width = 100 + next_random(random) % 1900;
        /* Where flagged, one in eight starts up to 50 ns before the last one ended: a clamped
         * start, which the PM engine flags (8); its end still follows the
         * last one's. */
        uint64_t back = flagged && count > 0 && t >= 50 && next_random(random) % 8 == 0
                            ? 1 + next_random(random) % 50
                            : 0;
        out[count] = (attrib_pm_sample){
            .start_ns = t - back,
            .end_ns = t + width,
            .value = work_between(w, t - back, t + width, 0),
            .flags = back > 0                                   ? 8u
                     : flagged && next_random(random) % 10 == 0 ? 1u
                                                                : 0u,
        };
        count++;
        t += width + (holes ? next_random(random) % 500 : 0);
    }
    return count;
}

/* The plain loop: every sample looked at. */
static double naive_sum(const attrib_pm_sample *s, size_t n, uint64_t ks, uint64_t ke,
                        uint64_t *covered)
{
    double sum = 0;
    *covered = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t lo = s[i].start_ns > ks ? s[i].start_ns : ks;
        uint64_t hi = s[i].end_ns < ke ? s[i].end_ns : ke;
        if (hi <= lo)
            continue;
        *covered += hi - lo;
        if (s[i].flags == 0)
            sum += s[i].value * (double)(hi - lo) / (double)(s[i].end_ns - s[i].start_ns);
    }
    return sum;
}

static void test_random_against_a_plain_loop_and_the_bound(void **state)
{
    (void)state;
    static attrib_pm_sample samples[1024];
    uint64_t random = 12345;
    int measured = 0;
    for (int round = 0; round < 4000; round++) {
        int holes = round % 4 == 1, flagged = round % 4 == 2;
        world w = {.ks = 1000 + next_random(&random) % 50000};
        w.ke = w.ks + next_random(&random) % 8000;
        w.kernel_rate = 0.5 + (double)(next_random(&random) % 1000) / 100.0;
        w.other_rate = (double)(next_random(&random) % 1000) / 100.0;
        w.steady = holes || flagged || round % 4 == 0;
        size_t n = make_samples(&random, &w, holes, flagged, samples, 1024);
        attrib_integral r;
        assert_int_equal(attrib_integrate(samples, n, w.ks, w.ke, 1, 0, &r), 0);
        uint64_t covered = 0;
        double naive = naive_sum(samples, n, w.ks, w.ke, &covered);
        if (!NEAR(r.value, naive) || r.covered_ns != covered)
            fail_msg("round %d: %.17g (covered %llu), the plain loop %.17g (%llu)", round, r.value,
                     (unsigned long long)r.covered_ns, naive, (unsigned long long)covered);
        double truth = work_between(&w, w.ks, w.ke, 1);
        if (fabs(r.value - truth) > r.error_bound * (1 + 1e-9) + 1e-6)
            fail_msg("round %d (holes %d, flagged %d, steady %d): value %.17g, truth %.17g, "
                     "bound %.17g",
                     round, holes, flagged, w.steady, r.value, truth, r.error_bound);
        measured += r.status == ATTRIB_INTEGRAL_MEASURED;
    }
    assert_true(measured > 1000); /* the cases are not all degenerate */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pro_rata_at_both_edges),
        cmocka_unit_test(test_a_rate_is_averaged_by_overlap),
        cmocka_unit_test(test_flagged_never_summed),
        cmocka_unit_test(test_holes_and_coverage),
        cmocka_unit_test(test_below_minimum),
        cmocka_unit_test(test_clamped_sample_looked_back_for),
        cmocka_unit_test(test_values_that_are_not_numbers),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_random_against_a_plain_loop_and_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
