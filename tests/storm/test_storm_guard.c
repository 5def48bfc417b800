/*
 * test_storm_guard.c: the launch-storm guard (src/storm) on a fake clock:
 * rate parsing and its refusals, when a storm starts (only once confirmed),
 * sample slices, holds, the calm that ends it (with hysteresis), and that
 * every launch is charged to timed or untimed exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "storm/storm_guard.h"

#define MS   1000000ull
#define STEP (10 * MS)

/* A guard with the default timings and enter_rate. */
static storm_guard *make_guard(uint64_t enter_rate)
{
    storm_guard_config config;
    storm_guard_default_config(&config);
    config.enter_rate = enter_rate;
    storm_guard *guard = NULL;
    assert_int_equal(storm_guard_create(&config, 0, 0, &guard), FLARE_OK);
    return guard;
}

/* Drives the guard in 10 ms steps from *now for duration at rate launches
 * per second; returns how many of the launches fell in untimed steps by
 * the guard's own rule (a step's launches take the previous answer). */
typedef struct drive {
    uint64_t now_ns;
    uint64_t launches;
    bool timed; /* the last answer */
    uint64_t untimed_expected;
    uint64_t timed_steps;
    uint64_t untimed_steps;
} drive;

static void run_at(storm_guard *guard, drive *state, uint64_t rate, uint64_t duration_ns, bool hold)
{
    for (uint64_t spent = 0; spent < duration_ns; spent += STEP) {
        uint64_t launches = rate * STEP / 1000000000ull;
        state->now_ns += STEP;
        state->launches += launches;
        if (!state->timed)
            state->untimed_expected += launches;
        state->timed = storm_guard_step(guard, state->now_ns, state->launches, hold);
        if (state->timed)
            state->timed_steps++;
        else
            state->untimed_steps++;
    }
}

static void test_parse_rate(void **unused)
{
    (void)unused;
    uint64_t rate = 1;
    char error[256];
    assert_int_equal(storm_guard_parse_rate("50000", &rate, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rate, 50000);
    assert_int_equal(storm_guard_parse_rate("20000/s", &rate, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rate, 20000);
    assert_int_equal(storm_guard_parse_rate("0", &rate, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rate, 0);
    rate = 7;
    assert_int_equal(storm_guard_parse_rate("off", &rate, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rate, 0);
    rate = 7;
    assert_int_equal(storm_guard_parse_rate("0/s", &rate, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rate, 0);
    struct {
        const char *text;
        const char *says;
    } refused[] = {
        {"", "empty"},
        {"fast", "not a number"},
        {"-5", "not a number"},
        {"500", "outside 1000..100000000"},
        {"1e5", "unexpected 'e5'"},
        {"50000/m", "unexpected '/m'"},
        {"50000/s ", "unexpected '/s '"},
        {"99999999999999999999999", "outside"},
        {"100000001", "outside"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        rate = 123;
        error[0] = '\0';
        assert_int_equal(storm_guard_parse_rate(refused[i].text, &rate, error, sizeof(error)),
                         FLARE_ERR_INVALID_ARGUMENT);
        if (strstr(error, refused[i].says) == NULL)
            fail_msg("'%s': error '%s' does not say '%s'", refused[i].text, error, refused[i].says);
        assert_int_equal(rate, 123); /* untouched on refusal */
    }
}

static void test_create_refuses_bad_timings(void **unused)
{
    (void)unused;
    storm_guard_config config;
    storm_guard *guard = NULL;
    storm_guard_default_config(&config);
    config.sample_for_ns = config.sample_every_ns; /* a slice that never ends */
    assert_int_equal(storm_guard_create(&config, 0, 0, &guard), FLARE_ERR_INVALID_ARGUMENT);
    storm_guard_default_config(&config);
    config.sample_for_ns = 0;
    assert_int_equal(storm_guard_create(&config, 0, 0, &guard), FLARE_ERR_INVALID_ARGUMENT);
    storm_guard_default_config(&config);
    config.calm_ns = 0;
    assert_int_equal(storm_guard_create(&config, 0, 0, &guard), FLARE_ERR_INVALID_ARGUMENT);
    storm_guard_default_config(&config);
    config.confirm_ns = 0;
    assert_int_equal(storm_guard_create(&config, 0, 0, &guard), FLARE_ERR_INVALID_ARGUMENT);
    assert_null(guard);
    assert_int_equal(storm_guard_create(NULL, 0, 0, &guard), FLARE_ERR_INVALID_ARGUMENT);
}

static void test_below_the_rate_everything_is_timed(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 49000, 3000 * MS, false);
    assert_int_equal(state.untimed_steps, 0);
    assert_false(storm_guard_in_storm(guard));
    assert_int_equal(storm_guard_storms(guard), 0);
    assert_int_equal(storm_guard_untimed_launches(guard), 0);
    storm_guard_destroy(guard);
}

static void test_a_burst_shorter_than_the_confirmation_is_timed(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    for (int burst = 0; burst < 20; burst++) {
        run_at(guard, &state, 500000, 40 * MS, false); /* 10x the rate, under 50 ms */
        run_at(guard, &state, 1000, 20 * MS, false);
    }
    assert_int_equal(state.untimed_steps, 0);
    assert_int_equal(storm_guard_storms(guard), 0);
    storm_guard_destroy(guard);
}

static void test_a_storm_stops_timing_once_confirmed(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 100000, 40 * MS, false);
    assert_false(storm_guard_in_storm(guard)); /* 40 ms: not yet */
    run_at(guard, &state, 100000, 10 * MS, false);
    assert_true(storm_guard_in_storm(guard)); /* 50 ms over the rate */
    assert_false(state.timed);
    assert_int_equal(storm_guard_storms(guard), 1);
    run_at(guard, &state, 100000, 500 * MS, false);
    /* 50 steps of 1000 launches, all untimed (no slice before 1 s). */
    assert_int_equal(storm_guard_untimed_launches(guard), 50000);
    assert_int_equal(storm_guard_untimed_launches(guard), state.untimed_expected);
    assert_int_equal(storm_guard_storm_ns(guard), 500 * MS);
    storm_guard_destroy(guard);
}

static void test_sample_slices_time_every_kernel_briefly(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 200000, 50 * MS, false); /* storm from t = 50 ms */
    assert_true(storm_guard_in_storm(guard));
    uint64_t timed_before = state.timed_steps;
    run_at(guard, &state, 200000, 3000 * MS, false);
    /* Slices start at 1.05, 2.05 and 3.05 s (the last one inside this
     * run's final step), each of 20 ms: two steps timed per slice. */
    assert_int_equal(storm_guard_sample_slices(guard), 3);
    assert_int_equal(state.timed_steps - timed_before, 2 * 2 + 1);
    assert_int_equal(storm_guard_untimed_launches(guard), state.untimed_expected);
    /* Storm steps: 300 in all; 2 + 2 + (1, the last) timed. */
    assert_int_equal(storm_guard_untimed_launches(guard), (300 - 4) * 2000ull);
    storm_guard_destroy(guard);
}

static void test_calm_ends_a_storm_with_hysteresis(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 100000, 100 * MS, false);
    assert_true(storm_guard_in_storm(guard));
    /* Under the entry rate but over half of it: the storm goes on. */
    run_at(guard, &state, 30000, 2000 * MS, false);
    assert_true(storm_guard_in_storm(guard));
    /* Under half: 490 ms is not calm enough, 500 ms is. */
    run_at(guard, &state, 20000, 490 * MS, false);
    assert_true(storm_guard_in_storm(guard));
    run_at(guard, &state, 20000, 10 * MS, false);
    assert_false(storm_guard_in_storm(guard));
    assert_true(state.timed);
    assert_int_equal(storm_guard_storm_ns(guard), (100 - 50 + 2000 + 500) * MS);
    uint64_t untimed = storm_guard_untimed_launches(guard);
    assert_int_equal(untimed, state.untimed_expected);
    /* A second storm is counted apart; time adds up. */
    run_at(guard, &state, 100000, 200 * MS, false);
    assert_int_equal(storm_guard_storms(guard), 2);
    assert_int_equal(storm_guard_storm_ns(guard), (2550 + 150) * MS);
    assert_true(storm_guard_untimed_launches(guard) > untimed);
    assert_int_equal(storm_guard_untimed_launches(guard), state.untimed_expected);
    storm_guard_destroy(guard);
}

static void test_a_hold_times_everything_and_the_storm_goes_on(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 100000, 100 * MS, false);
    assert_false(state.timed);
    uint64_t untimed = storm_guard_untimed_launches(guard);
    run_at(guard, &state, 100000, 300 * MS, true);
    assert_true(state.timed);
    assert_true(storm_guard_in_storm(guard));
    /* Only the first held step's launches ran under the untimed answer. */
    assert_int_equal(storm_guard_untimed_launches(guard), untimed + 1000);
    run_at(guard, &state, 100000, 100 * MS, false);
    assert_false(state.timed);
    assert_int_equal(storm_guard_storms(guard), 1);
    assert_int_equal(storm_guard_untimed_launches(guard), state.untimed_expected);
    storm_guard_destroy(guard);
}

static void test_off_never_stops_timing(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(0);
    drive state = {.timed = true};
    run_at(guard, &state, 10000000, 2000 * MS, false);
    assert_int_equal(state.untimed_steps, 0);
    assert_int_equal(storm_guard_storms(guard), 0);
    storm_guard_destroy(guard);
}

static void test_clock_and_count_that_do_not_advance(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 100000, 100 * MS, false);
    assert_false(state.timed);
    uint64_t untimed = storm_guard_untimed_launches(guard);
    /* The same instant again: launches are charged, no rate judged. */
    assert_false(storm_guard_step(guard, state.now_ns, state.launches + 500, false));
    assert_int_equal(storm_guard_untimed_launches(guard), untimed + 500);
    /* Time going backwards and a count going backwards change nothing. */
    assert_false(storm_guard_step(guard, state.now_ns - 5 * MS, state.launches, false));
    assert_false(storm_guard_step(guard, state.now_ns + STEP, 0, false));
    assert_int_equal(storm_guard_untimed_launches(guard), untimed + 500);
    assert_true(storm_guard_in_storm(guard));
    storm_guard_destroy(guard);
}

/* A switch takes effect a little after the step that asked for it, and
 * CUPTI may stop timing part-way through the switch: settle charges every
 * launch made while switching as untimed, whichever way it switched, so the
 * count can run high by a switch's worth but never low. */
static void test_settle_never_counts_low(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    uint64_t now = 0, launches = 0;
    bool timed = true;
    /* 100k/s: the storm starts at the fifth step (50 ms). */
    for (int step = 0; step < 5; step++) {
        now += STEP;
        launches += 1000;
        timed = storm_guard_step(guard, now, launches, false);
    }
    assert_false(timed);
    assert_int_equal(storm_guard_untimed_launches(guard), 0);
    /* 200 launches while CUPTI was switched off: maybe timed, maybe not. */
    storm_guard_settle(guard, launches + 200);
    assert_int_equal(storm_guard_untimed_launches(guard), 200);
    now += STEP;
    launches += 1000;
    assert_false(storm_guard_step(guard, now, launches, false));
    assert_int_equal(storm_guard_untimed_launches(guard), 1000);
    /* A window opens: timing back on, 300 launches while it switched. */
    now += STEP;
    launches += 1000;
    assert_true(storm_guard_step(guard, now, launches, true));
    assert_int_equal(storm_guard_untimed_launches(guard), 2000);
    storm_guard_settle(guard, launches + 300);
    assert_int_equal(storm_guard_untimed_launches(guard), 2300);
    now += STEP;
    launches += 1000;
    assert_true(storm_guard_step(guard, now, launches, true));
    assert_int_equal(storm_guard_untimed_launches(guard), 2300); /* the rest was timed */
    /* A second settle for the same step charges nothing more. */
    storm_guard_settle(guard, launches);
    assert_int_equal(storm_guard_untimed_launches(guard), 2300);
    storm_guard_destroy(guard);
}

/* Another switch (a SASS window's quiet) takes a span of launches: charge
 * books the launches up to its start under the guard's answer, skip moves
 * past the span without charging it (the other switch counted it), so a
 * storm's untimed count never counts the span a second time. */
static void test_charge_and_skip_leave_a_span_to_another(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    uint64_t now = 0, launches = 0;
    for (int step = 0; step < 5; step++) { /* 100k/s: a storm, untimed */
        now += STEP;
        launches += 1000;
        storm_guard_step(guard, now, launches, false);
    }
    assert_true(storm_guard_in_storm(guard));
    assert_int_equal(storm_guard_untimed_launches(guard), 0);
    storm_guard_charge(guard, launches + 400); /* untimed under the storm */
    assert_int_equal(storm_guard_untimed_launches(guard), 400);
    storm_guard_skip(guard, launches + 5400); /* the other switch's 5,000 */
    assert_int_equal(storm_guard_untimed_launches(guard), 400);
    storm_guard_skip(guard, launches); /* never backwards */
    now += STEP;
    launches += 6000;
    assert_false(storm_guard_step(guard, now, launches, false));
    assert_int_equal(storm_guard_untimed_launches(guard), 1000); /* only the 600 after it */
    storm_guard_destroy(guard);
}

/* The limits themselves: exactly enter_rate starts a storm, exactly half of
 * it is not calm. */
static void test_rate_boundaries(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    run_at(guard, &state, 50000, 50 * MS, false);
    assert_true(storm_guard_in_storm(guard));
    run_at(guard, &state, 25000, 2000 * MS, false);
    assert_true(storm_guard_in_storm(guard));
    run_at(guard, &state, 24900, 500 * MS, false);
    assert_false(storm_guard_in_storm(guard));
    storm_guard_destroy(guard);
    guard = make_guard(50000);
    state = (drive){.timed = true};
    run_at(guard, &state, 49900, 1000 * MS, false);
    assert_false(storm_guard_in_storm(guard));
    storm_guard_destroy(guard);
}

/* Irregular steps: one long step over the rate starts a storm at once; a
 * step longer than a slice still times one step; a storm that ends during a
 * slice leaves nothing open; a hold in a step with no time passed times. */
static void test_irregular_steps(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    uint64_t now = 100 * MS, launches = 10000; /* 100k/s over one 100 ms step */
    assert_false(storm_guard_step(guard, now, launches, false));
    assert_true(storm_guard_in_storm(guard));
    /* 50 ms steps (longer than the 20 ms slice): the slice due at 1.1 s
     * opens at the step at or after it and closes at the next step. */
    int timed_steps = 0;
    while (now < 1500 * MS) {
        now += 50 * MS;
        launches += 5000;
        timed_steps += storm_guard_step(guard, now, launches, false);
    }
    assert_int_equal(timed_steps, 1);
    assert_int_equal(storm_guard_sample_slices(guard), 1);
    /* Still stormy to 1.61 s, then calm: the storm ends at 2.11 s, inside the
     * slice that opened at 2.1 s; the slice ends with it. */
    while (now < 1610 * MS) {
        now += 10 * MS;
        launches += 1000;
        storm_guard_step(guard, now, launches, false);
    }
    while (now < 2100 * MS) {
        now += 10 * MS;
        launches += 100;
        storm_guard_step(guard, now, launches, false);
    }
    assert_true(storm_guard_in_storm(guard));
    assert_int_equal(storm_guard_sample_slices(guard), 2); /* the one at 2.1 s is open */
    now += 10 * MS;
    launches += 100;
    assert_true(storm_guard_step(guard, now, launches, false));
    assert_false(storm_guard_in_storm(guard));
    /* A new storm starts untimed (no slice left over); then a hold at the
     * same instant as the last step. */
    now += 100 * MS;
    launches += 10000;
    assert_false(storm_guard_step(guard, now, launches, false));
    assert_true(storm_guard_step(guard, now, launches, true));
    storm_guard_destroy(guard);
}

/* Random rates, holds and step lengths: every launch is charged to the
 * answer in force while it happened, exactly once. */
static void test_every_launch_is_charged_once(void **unused)
{
    (void)unused;
    srand(12345);
    for (int round = 0; round < 20; round++) {
        storm_guard *guard = make_guard(50000);
        uint64_t now = 0, launches = 0, expected = 0;
        bool timed = true;
        for (int step = 0; step < 5000; step++) {
            uint64_t elapsed = (uint64_t)(1 + rand() % 30) * MS;
            uint64_t added = (uint64_t)(rand() % 4000);
            now += elapsed;
            launches += added;
            if (!timed)
                expected += added;
            timed = storm_guard_step(guard, now, launches, rand() % 50 == 0);
        }
        assert_int_equal(storm_guard_untimed_launches(guard), expected);
        assert_true(storm_guard_storms(guard) > 0);
        storm_guard_destroy(guard);
    }
}

/* The periods the session records: one per storm, taken once, spanning
 * its start and end steps, with the untimed launches charged in it; a
 * storm running at the end is reported as running, up to the last step. */
static void test_storm_periods_are_taken_once(void **unused)
{
    (void)unused;
    storm_guard *guard = make_guard(50000);
    drive state = {.timed = true};
    storm_guard_period period;
    assert_false(storm_guard_take_finished(guard, &period));
    assert_false(storm_guard_running(guard, &period));
    run_at(guard, &state, 200000, 2000 * MS, false);
    assert_true(storm_guard_in_storm(guard));
    assert_false(storm_guard_take_finished(guard, &period));
    assert_true(storm_guard_running(guard, &period));
    uint64_t started = period.start_ns;
    assert_true(started > 0 && started < 200 * MS);
    assert_int_equal(period.end_ns, state.now_ns);
    run_at(guard, &state, 1000, 1000 * MS, false);
    assert_false(storm_guard_in_storm(guard));
    assert_false(storm_guard_running(guard, &period));
    assert_true(storm_guard_take_finished(guard, &period));
    assert_int_equal(period.start_ns, started);
    assert_true(period.end_ns > 2000 * MS && period.end_ns <= state.now_ns);
    /* Every untimed launch of this run fell in this one storm. */
    assert_int_equal(period.untimed_launches, storm_guard_untimed_launches(guard));
    assert_true(period.untimed_launches > 0);
    assert_false(storm_guard_take_finished(guard, &period));
    /* A second storm counts only its own launches. */
    uint64_t before = storm_guard_untimed_launches(guard);
    run_at(guard, &state, 200000, 1000 * MS, false);
    run_at(guard, &state, 1000, 1000 * MS, false);
    assert_true(storm_guard_take_finished(guard, &period));
    assert_int_equal(period.untimed_launches, storm_guard_untimed_launches(guard) - before);
    assert_true(period.start_ns > started);
    storm_guard_destroy(guard);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_rate),
        cmocka_unit_test(test_create_refuses_bad_timings),
        cmocka_unit_test(test_below_the_rate_everything_is_timed),
        cmocka_unit_test(test_a_burst_shorter_than_the_confirmation_is_timed),
        cmocka_unit_test(test_a_storm_stops_timing_once_confirmed),
        cmocka_unit_test(test_sample_slices_time_every_kernel_briefly),
        cmocka_unit_test(test_calm_ends_a_storm_with_hysteresis),
        cmocka_unit_test(test_a_hold_times_everything_and_the_storm_goes_on),
        cmocka_unit_test(test_off_never_stops_timing),
        cmocka_unit_test(test_clock_and_count_that_do_not_advance),
        cmocka_unit_test(test_settle_never_counts_low),
        cmocka_unit_test(test_rate_boundaries),
        cmocka_unit_test(test_irregular_steps),
        cmocka_unit_test(test_every_launch_is_charged_once),
        cmocka_unit_test(test_storm_periods_are_taken_once),
        cmocka_unit_test(test_charge_and_skip_leave_a_span_to_another),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
