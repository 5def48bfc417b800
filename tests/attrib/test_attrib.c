/*
 * test_attrib.c: sample-to-scope attribution and scope retention.
 *
 * The property test checks the sweep against the naive resolver over
 * thousands of random cases (nested scopes per thread, several threads,
 * free-floating cross-thread intervals, equal starts and ends, still-open
 * scopes, samples on and around every boundary); hand-written cases pin
 * each tie rule and the unattributed case; the retention tests pin the
 * watermark's conditions and the cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib/attrib.h"
#include "attrib/history.h"
#include "flare/flare.h"

/* ---- Deterministic random numbers (xorshift64*) ---- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t rng_below(uint64_t bound)
{
    return rng_next() % bound;
}

/* ---- Hand-written cases ---- */

static attrib_scope make_scope(uint64_t start, uint64_t end, uint32_t depth, uint64_t id,
                               int64_t thread)
{
    return (attrib_scope){
        .start_ns = start, .end_ns = end, .depth = depth, .instance_id = id, .thread_id = thread};
}

/* Resolves with both resolvers, checks they agree, and returns the sweep's answers. */
static void resolve_both(const attrib_scope *scopes, size_t scope_count, const uint64_t *times,
                         size_t sample_count, int64_t *winners)
{
    int64_t naive[64];
    assert_true(sample_count <= 64);
    assert_int_equal(attrib_resolve(scopes, scope_count, times, sample_count, winners, NULL),
                     FLARE_OK);
    assert_int_equal(attrib_resolve_naive(scopes, scope_count, times, sample_count, naive),
                     FLARE_OK);
    for (size_t i = 0; i < sample_count; i++)
        assert_int_equal(winners[i], naive[i]);
}

static void test_deepest_wins_and_boundaries_are_closed(void **state)
{
    (void)state;
    attrib_scope scopes[] = {make_scope(0, 100, 0, 1, 1), make_scope(10, 20, 1, 2, 1)};
    uint64_t times[] = {5, 10, 15, 20, 21, 100, 101};
    int64_t expected[] = {0, 1, 1, 1, 0, 0, ATTRIB_UNATTRIBUTED};
    int64_t winners[7];
    resolve_both(scopes, 2, times, 7, winners);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(winners[i], expected[i]);
}

static void test_deeper_beats_later_start(void **state)
{
    (void)state;
    /* A deep scope on one thread against a shallower, later one on another. */
    attrib_scope scopes[] = {make_scope(0, 100, 2, 1, 1), make_scope(10, 50, 1, 2, 2)};
    uint64_t times[] = {20};
    int64_t winners[1];
    resolve_both(scopes, 2, times, 1, winners);
    assert_int_equal(winners[0], 0);
}

static void test_equal_depth_latest_start_wins(void **state)
{
    (void)state;
    attrib_scope scopes[] = {make_scope(0, 100, 1, 7, 1), make_scope(10, 50, 1, 3, 2)};
    uint64_t times[] = {5, 20, 60};
    int64_t winners[3];
    resolve_both(scopes, 2, times, 3, winners);
    assert_int_equal(winners[0], 0);
    assert_int_equal(winners[1], 1); /* later start, despite the lower instance id */
    assert_int_equal(winners[2], 0);
}

static void test_equal_depth_and_start_greater_instance_id_wins(void **state)
{
    (void)state;
    uint64_t times[] = {10, 30, 40};
    int64_t winners[3];
    /* Both array orders: the answer must not depend on the input order. */
    attrib_scope forward[] = {make_scope(10, 50, 1, 5, 1), make_scope(10, 30, 1, 9, 2)};
    resolve_both(forward, 2, times, 3, winners);
    assert_int_equal(winners[0], 1);
    assert_int_equal(winners[1], 1);
    assert_int_equal(winners[2], 0);
    attrib_scope backward[] = {make_scope(10, 30, 1, 9, 2), make_scope(10, 50, 1, 5, 1)};
    resolve_both(backward, 2, times, 3, winners);
    assert_int_equal(winners[0], 0);
    assert_int_equal(winners[1], 0);
    assert_int_equal(winners[2], 1);
}

static void test_duplicate_ranks_fall_back_to_lower_index(void **state)
{
    (void)state;
    /* A contract breach (same instance id twice) still gives one answer. */
    attrib_scope scopes[] = {make_scope(10, 50, 1, 4, 1), make_scope(10, 50, 1, 4, 2)};
    uint64_t times[] = {20};
    int64_t winners[1];
    resolve_both(scopes, 2, times, 1, winners);
    assert_int_equal(winners[0], 0);
}

static void test_uncovered_samples_stay_unattributed(void **state)
{
    (void)state;
    /* The open scope is "what is running now", but it did not cover the
     * samples before its start, in the gap, or before everything. */
    attrib_scope scopes[] = {make_scope(100, 200, 0, 1, 1), make_scope(300, ATTRIB_OPEN, 0, 2, 1)};
    uint64_t times[] = {0, 99, 201, 299, 300, 1000, UINT64_MAX};
    int64_t expected[] = {-1, -1, -1, -1, 1, 1, 1};
    int64_t winners[7];
    resolve_both(scopes, 2, times, 7, winners);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(winners[i], expected[i]);
}

static void test_inverted_interval_never_wins(void **state)
{
    (void)state;
    attrib_scope scopes[] = {make_scope(0, 100, 0, 1, 1), make_scope(50, 40, 3, 2, 1)};
    uint64_t times[] = {40, 45, 50};
    int64_t winners[3];
    resolve_both(scopes, 2, times, 3, winners);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(winners[i], 0);
}

static void test_empty_and_invalid_inputs(void **state)
{
    (void)state;
    uint64_t times[] = {1, 2};
    int64_t winners[2] = {5, 5};
    assert_int_equal(attrib_resolve(NULL, 0, times, 2, winners, NULL), FLARE_OK);
    assert_int_equal(winners[0], ATTRIB_UNATTRIBUTED);
    assert_int_equal(winners[1], ATTRIB_UNATTRIBUTED);
    attrib_scope scope = make_scope(0, 10, 0, 1, 1);
    assert_int_equal(attrib_resolve(&scope, 1, NULL, 0, NULL, NULL), FLARE_OK);
    assert_int_equal(attrib_resolve(NULL, 0, NULL, 0, NULL, NULL), FLARE_OK);
    assert_int_equal(attrib_resolve(NULL, 1, times, 2, winners, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(attrib_resolve(&scope, 1, NULL, 2, winners, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(attrib_resolve(&scope, 1, times, 2, NULL, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(attrib_resolve_naive(NULL, 1, times, 2, winners), FLARE_ERR_INVALID_ARGUMENT);
}

/* ---- The property test ---- */

#define PROPERTY_CASES   4000
#define PROPERTY_MAX     256
#define PROPERTY_THREADS 5
#define PROPERTY_DEPTH   8
#define PROPERTY_SAMPLES 512

/* Nested scopes of one thread: a random walk of opens and closes over a
 * coarse clock, where a zero step makes starts and ends coincide. */
static void generate_thread(attrib_scope *scopes, size_t *count, int64_t thread, uint64_t horizon)
{
    size_t stack[PROPERTY_DEPTH];
    size_t depth = 0;
    uint64_t now = rng_below(4);
    while (now < horizon && *count < PROPERTY_MAX / PROPERTY_THREADS * (size_t)(thread + 1)) {
        int open = depth == 0 || (depth < PROPERTY_DEPTH && rng_below(2) == 0);
        if (open) {
            scopes[*count] = make_scope(now, ATTRIB_OPEN, (uint32_t)depth, 0, thread);
            stack[depth++] = (*count)++;
        } else {
            scopes[stack[--depth]].end_ns = now;
        }
        now += rng_below(3);
    }
    /* Whatever is left stays open (the scope covering a sample is routinely
     * still running at a mid-run drain) or closes at the horizon. */
    while (depth > 0) {
        size_t index = stack[--depth];
        if (rng_below(2))
            scopes[index].end_ns = now;
    }
}

static void shuffle_scopes(attrib_scope *scopes, size_t count)
{
    for (size_t i = count; i > 1; i--) {
        size_t j = rng_below(i);
        attrib_scope swap = scopes[i - 1];
        scopes[i - 1] = scopes[j];
        scopes[j] = swap;
    }
}

static void test_sweep_matches_naive_on_random_cases(void **state)
{
    (void)state;
    static attrib_scope scopes[PROPERTY_MAX];
    static uint64_t times[PROPERTY_SAMPLES];
    static int64_t sweep[PROPERTY_SAMPLES];
    static int64_t naive[PROPERTY_SAMPLES];
    attrib_scratch scratch;
    attrib_scratch_init(&scratch);
    uint64_t attributed = 0, unattributed = 0;

    for (uint64_t seed = 1; seed <= PROPERTY_CASES; seed++) {
        rng_state = seed * 0x9E3779B97F4A7C15ull;
        uint64_t horizon = 4 + rng_below(seed % 3 == 0 ? 20 : 120);
        size_t count = 0;
        int threads = 1 + (int)rng_below(PROPERTY_THREADS);
        for (int thread = 0; thread < threads; thread++)
            generate_thread(scopes, &count, thread, horizon);
        /* Free-floating intervals, like NVTX start/end ranges that end on
         * another thread: any start, any end, any depth. */
        size_t extra = rng_below(6);
        for (size_t i = 0; i < extra && count < PROPERTY_MAX; i++) {
            uint64_t start = rng_below(horizon + 4);
            uint64_t end = rng_below(4) == 0 ? ATTRIB_OPEN : start + rng_below(horizon);
            scopes[count++] = make_scope(start, end, (uint32_t)rng_below(PROPERTY_DEPTH), 0, 99);
        }
        /* Unique instance ids in an order unrelated to start times, so the
         * id tie-break is exercised rather than mirroring start order. */
        shuffle_scopes(scopes, count);
        for (size_t i = 0; i < count; i++)
            scopes[i].instance_id = (uint64_t)(i * 7919 % 65521) + 1;
        shuffle_scopes(scopes, count);

        /* Samples on every boundary, one either side, and random ones. */
        size_t samples = 0;
        for (size_t i = 0; i < count && samples + 6 <= PROPERTY_SAMPLES / 2; i++) {
            uint64_t start = scopes[i].start_ns, end = scopes[i].end_ns;
            times[samples++] = start;
            times[samples++] = start + 1;
            if (start > 0)
                times[samples++] = start - 1;
            if (end != ATTRIB_OPEN) {
                times[samples++] = end;
                times[samples++] = end + 1;
                if (end > 0)
                    times[samples++] = end - 1;
            }
        }
        while (samples < PROPERTY_SAMPLES - 2)
            times[samples++] = rng_below(horizon + 10);
        times[samples++] = 0;
        times[samples++] = UINT64_MAX;

        assert_int_equal(attrib_resolve(scopes, count, times, samples, sweep, &scratch), FLARE_OK);
        assert_int_equal(attrib_resolve_naive(scopes, count, times, samples, naive), FLARE_OK);
        for (size_t i = 0; i < samples; i++) {
            if (sweep[i] != naive[i]) {
                fprintf(stderr, "case %llu sample %zu (t=%llu): sweep %lld, naive %lld\n",
                        (unsigned long long)seed, i, (unsigned long long)times[i],
                        (long long)sweep[i], (long long)naive[i]);
                fail();
            }
            if (sweep[i] < 0)
                unattributed++;
            else
                attributed++;
        }
    }
    attrib_scratch_release(&scratch);
    /* The generator must exercise both outcomes, or the test proves little. */
    assert_true(attributed > 100000);
    assert_true(unattributed > 1000);
}

/* ---- Retention ---- */

static attrib_decode_result clean_decode(uint64_t newest)
{
    return (attrib_decode_result){.exhausted = 1, .newest_sample_ns = newest};
}

static void test_watermark_is_monotonic(void **state)
{
    (void)state;
    attrib_history history;
    assert_int_equal(attrib_history_init(&history, 16), FLARE_OK);
    attrib_decode_result decode = clean_decode(100);
    assert_int_equal(attrib_watermark_advance(&history, &decode), 1);
    assert_int_equal(history.watermark_ns, 100);
    decode = clean_decode(50);
    assert_int_equal(attrib_watermark_advance(&history, &decode), 0);
    assert_int_equal(history.watermark_ns, 100);
    decode = clean_decode(100);
    assert_int_equal(attrib_watermark_advance(&history, &decode), 0);
    decode = clean_decode(150);
    assert_int_equal(attrib_watermark_advance(&history, &decode), 1);
    assert_int_equal(history.watermark_ns, 150);
    assert_int_equal(attrib_watermark_advance(&history, NULL), 0);
    attrib_history_destroy(&history);
}

static void test_watermark_holds_on_unproven_decodes(void **state)
{
    (void)state;
    attrib_history history;
    assert_int_equal(attrib_history_init(&history, 16), FLARE_OK);
    attrib_scope scope = make_scope(0, 10, 0, 1, 1);
    attrib_history_record_close(&history, &scope);

    attrib_decode_result decodes[] = {
        {.exhausted = 0, .newest_sample_ns = 500},                 /* buffer not exhausted */
        {.exhausted = 1, .overflow = 1, .newest_sample_ns = 500},  /* samples were lost */
        {.exhausted = 1, .failed = 1, .newest_sample_ns = 500},    /* decode failed */
        {.exhausted = 1, .truncated = 1, .newest_sample_ns = 500}, /* decode stopped early */
    };
    for (size_t i = 0; i < sizeof(decodes) / sizeof(decodes[0]); i++) {
        assert_int_equal(attrib_watermark_advance(&history, &decodes[i]), 0);
        assert_int_equal(history.watermark_ns, 0);
        assert_int_equal(history.count, 1); /* nothing trimmed either */
    }
    attrib_decode_result good = clean_decode(500);
    assert_int_equal(attrib_watermark_advance(&history, &good), 1);
    assert_int_equal(history.count, 0);
    assert_int_equal(history.trimmed, 1);
    attrib_history_destroy(&history);
}

static void test_trim_removes_only_scopes_ended_before_watermark(void **state)
{
    (void)state;
    attrib_history history;
    assert_int_equal(attrib_history_init(&history, 8), FLARE_OK);
    uint64_t ends[] = {150, 99, 100, 101, 20, 300};
    for (size_t i = 0; i < 6; i++) {
        attrib_scope scope = make_scope(0, ends[i], 0, i + 1, 1);
        attrib_history_record_close(&history, &scope);
    }
    assert_int_equal(attrib_history_trim(&history, 100), 2);
    assert_int_equal(history.count, 4);
    attrib_scope out[4];
    size_t out_count = 0;
    assert_int_equal(attrib_history_snapshot(&history, NULL, 0, NULL, 0, out, 4, &out_count),
                     FLARE_OK);
    assert_int_equal(out_count, 4);
    /* The survivors, in the order they were recorded. */
    uint64_t kept[] = {150, 100, 101, 300};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(out[i].end_ns, kept[i]);
    assert_int_equal(history.evictions, 0);
    attrib_history_destroy(&history);
}

static void test_cap_evicts_oldest_and_counts(void **state)
{
    (void)state;
    attrib_history history;
    assert_int_equal(attrib_history_init(&history, 3), FLARE_OK);
    for (uint64_t i = 1; i <= 7; i++) {
        attrib_scope scope = make_scope(i, i + 1, 0, i, 1);
        attrib_history_record_close(&history, &scope);
        assert_true(history.count <= 3);
    }
    assert_int_equal(history.count, 3);
    assert_int_equal(history.evictions, 4);
    attrib_scope out[3];
    size_t out_count = 0;
    assert_int_equal(attrib_history_snapshot(&history, NULL, 0, NULL, 0, out, 3, &out_count),
                     FLARE_OK);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(out[i].instance_id, 5 + i);
    /* Trimming wraps around the ring correctly too. */
    assert_int_equal(attrib_history_trim(&history, 7), 1);
    assert_int_equal(history.evictions, 4);
    attrib_history_destroy(&history);
}

static void test_history_init_rejects_zero_capacity(void **state)
{
    (void)state;
    attrib_history history;
    assert_int_equal(attrib_history_init(&history, 0), FLARE_ERR_INVALID_ARGUMENT);
    attrib_history_destroy(&history);
    attrib_scope scope = make_scope(0, 1, 0, 1, 1);
    attrib_history_record_close(&history, &scope); /* a no-op, not a crash */
    assert_int_equal(history.count, 0);
}

static void test_snapshot_caps_open_scopes_at_pending_close(void **state)
{
    (void)state;
    attrib_history history;
    assert_int_equal(attrib_history_init(&history, 4), FLARE_OK);
    attrib_scope closed = make_scope(0, 50, 0, 1, 1);
    attrib_history_record_close(&history, &closed);
    attrib_scope open[] = {make_scope(60, ATTRIB_OPEN, 0, 2, 1),
                           make_scope(70, ATTRIB_OPEN, 1, 3, 1)};
    /* Scope 3's close was timed at 80 but not yet published. */
    attrib_pending_close pending[] = {{.instance_id = 42, .end_ns = 10},
                                      {.instance_id = 3, .end_ns = 80}};
    attrib_scope out[3];
    size_t out_count = 0;
    assert_int_equal(attrib_history_snapshot_size(&history, 2), 3);
    assert_int_equal(attrib_history_snapshot(&history, open, 2, pending, 2, out, 2, &out_count),
                     FLARE_ERR_FULL);
    assert_int_equal(attrib_history_snapshot(&history, open, 2, pending, 2, out, 3, &out_count),
                     FLARE_OK);
    assert_int_equal(out_count, 3);
    assert_int_equal(out[0].end_ns, 50);
    assert_int_equal(out[1].end_ns, ATTRIB_OPEN);
    assert_int_equal(out[2].end_ns, 80);

    /* A sample after the pending close goes to the outer, truly open scope. */
    uint64_t times[] = {75, 90, 55};
    int64_t winners[3];
    resolve_both(out, out_count, times, 3, winners);
    assert_int_equal(winners[0], 2);
    assert_int_equal(winners[1], 1);
    assert_int_equal(winners[2], ATTRIB_UNATTRIBUTED);
    attrib_history_destroy(&history);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deepest_wins_and_boundaries_are_closed),
        cmocka_unit_test(test_deeper_beats_later_start),
        cmocka_unit_test(test_equal_depth_latest_start_wins),
        cmocka_unit_test(test_equal_depth_and_start_greater_instance_id_wins),
        cmocka_unit_test(test_duplicate_ranks_fall_back_to_lower_index),
        cmocka_unit_test(test_uncovered_samples_stay_unattributed),
        cmocka_unit_test(test_inverted_interval_never_wins),
        cmocka_unit_test(test_empty_and_invalid_inputs),
        cmocka_unit_test(test_sweep_matches_naive_on_random_cases),
        cmocka_unit_test(test_watermark_is_monotonic),
        cmocka_unit_test(test_watermark_holds_on_unproven_decodes),
        cmocka_unit_test(test_trim_removes_only_scopes_ended_before_watermark),
        cmocka_unit_test(test_cap_evicts_oldest_and_counts),
        cmocka_unit_test(test_history_init_rejects_zero_capacity),
        cmocka_unit_test(test_snapshot_caps_open_scopes_at_pending_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
