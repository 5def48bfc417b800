/*
 * test_evaluator.c: the rule evaluator (src/rules/evaluator.c) on a fake
 * clock: warm-up, sustain, request, busy refusal, budget, blackout, recovery,
 * cooldown, rearm hysteresis, exhaustion, stale and missing readings, manual
 * windows, refused rules and summaries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "flare/flare.h"
#include "rules/evaluator.h"
#include "rules/rule.h"

#define MS 1000000ull
#define S  1000000000ull

/* over 200ms, for 300ms, a beat of 100ms. */
#define LOW_RATE                                                                                   \
    "kernel_launch_rate < 200/s for 300ms over 200ms bucket 100ms rearm 400/s cooldown 1s "        \
    "max_windows 2"

static rules_evaluator evaluator;

static size_t add_rule(const char *text, uint64_t now_ns)
{
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse(text, &rule, error, sizeof(error)), FLARE_OK);
    size_t index = 99;
    assert_int_equal(rules_evaluator_add(&evaluator, &rule, text, NULL, now_ns, &index), FLARE_OK);
    return index;
}

static rules_reading value_reading(double value, uint64_t now_ns)
{
    rules_reading reading = {.value = value, .source_time_ns = now_ns, .publish_time_ns = now_ns};
    return reading;
}

/* One beat with a fresh reading of value; blackout and this rule's outcome. */
static int beat(size_t index, double value, uint64_t now_ns, int blackout,
                rules_request_outcome outcome)
{
    rules_reading reading = value_reading(value, now_ns);
    rules_coordinator_view view = {.blackout = blackout, .outcome = outcome};
    return rules_evaluator_step(&evaluator, index, &reading, now_ns, &view);
}

static rules_evaluator_state state_of(size_t index)
{
    return rules_evaluator_get(&evaluator, index)->state;
}

/* Brings a new LOW_RATE rule to REQUESTED at 500ms (true from 200ms). */
static size_t fire_low_rate(void)
{
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule(LOW_RATE, 0);
    assert_int_equal(beat(rule, 100, 100 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 100, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 100, 300 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 100, 400 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 100, 500 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
    assert_int_equal(state_of(rule), RULES_EVAL_REQUESTED);
    return rule;
}

static void test_warming_up_then_armed(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule(LOW_RATE, 0);
    assert_int_equal(state_of(rule), RULES_EVAL_WARMING_UP);
    /* The rate window (over 200ms) has not filled: a true reading is no evidence. */
    assert_int_equal(beat(rule, 10, 100 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_WARMING_UP);
    assert_int_equal(rules_evaluator_get(&evaluator, rule)->times_true, 0);
    assert_int_equal(beat(rule, 1000, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_ARMED);
}

/* Each row: the reading at a beat, and the state after it. */
typedef struct transition_row {
    uint64_t now_ns;
    double value;
    rules_evaluator_state expected;
    int expected_step;
} transition_row;

static void run_table(const char *text, const transition_row *rows, size_t count)
{
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule(text, 0);
    for (size_t i = 0; i < count; i++) {
        int step = beat(rule, rows[i].value, rows[i].now_ns, 0, RULES_OUTCOME_NONE);
        if (step != rows[i].expected_step || state_of(rule) != rows[i].expected)
            fail_msg("row %zu (t=%llums, value %g): step %d state %s, expected %d %s", i,
                     (unsigned long long)(rows[i].now_ns / MS), rows[i].value, step,
                     rules_evaluator_state_name(state_of(rule)), rows[i].expected_step,
                     rules_evaluator_state_name(rows[i].expected));
    }
}

static void test_not_sustained_goes_back_to_armed(void **state)
{
    (void)state;
    const transition_row rows[] = {
        {200 * MS, 100, RULES_EVAL_PENDING, RULES_STEP_NONE},
        {300 * MS, 100, RULES_EVAL_PENDING, RULES_STEP_NONE},
        {400 * MS, 500, RULES_EVAL_ARMED, RULES_STEP_NONE}, /* false: first_true resets */
        {500 * MS, 100, RULES_EVAL_PENDING, RULES_STEP_NONE},
        {700 * MS, 100, RULES_EVAL_PENDING, RULES_STEP_NONE}, /* 200ms since 500ms */
        {800 * MS, 100, RULES_EVAL_REQUESTED, RULES_STEP_REQUEST},
    };
    run_table(LOW_RATE, rows, sizeof(rows) / sizeof(rows[0]));
    const rules_evaluator_rule *rule = rules_evaluator_get(&evaluator, 0);
    assert_int_equal(rule->times_true, 2);
    assert_int_equal(rule->last_first_true_ns, 500 * MS);
    assert_true(rule->request_value == 100.0);
}

static void test_sustained_is_a_span_between_observations(void **state)
{
    (void)state;
    /* Two observations 300ms apart are enough, however few beats between. */
    const transition_row rows[] = {
        {250 * MS, 100, RULES_EVAL_PENDING, RULES_STEP_NONE},
        {549 * MS, 100, RULES_EVAL_PENDING, RULES_STEP_NONE},
        {550 * MS, 100, RULES_EVAL_REQUESTED, RULES_STEP_REQUEST},
    };
    run_table(LOW_RATE, rows, sizeof(rows) / sizeof(rows[0]));
    /* for 0: the first reading that holds fires. */
    const transition_row immediate[] = {
        {1 * S, 100, RULES_EVAL_REQUESTED, RULES_STEP_REQUEST},
    };
    run_table("kernel_launch_rate < 200/s", immediate, 1);
}

static void test_busy_refusal_costs_nothing(void **state)
{
    (void)state;
    size_t rule = fire_low_rate();
    /* Another window was in the way: the coordinator said busy. */
    assert_int_equal(beat(rule, 100, 600 * MS, 1, RULES_OUTCOME_REFUSED_BUSY), RULES_STEP_NONE);
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->busy_refusals, 1);
    assert_int_equal(entry->windows_fired, 0);
    assert_int_equal(entry->state, RULES_EVAL_BLACKOUT);
    /* The other window closes: one clean rate window, then armed, budget intact. */
    assert_int_equal(beat(rule, 100, 700 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_RECOVERY);
    assert_int_equal(beat(rule, 100, 800 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_RECOVERY);
    assert_int_equal(beat(rule, 100, 900 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_PENDING);
    assert_int_equal(entry->windows_fired, 0);
}

static void test_opened_spends_budget_and_blackout_discards(void **state)
{
    (void)state;
    size_t rule = fire_low_rate();
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    /* Queued: still requested, readings discarded. */
    assert_int_equal(beat(rule, 100, 600 * MS, 1, RULES_OUTCOME_QUEUED), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_REQUESTED);
    assert_int_equal(entry->windows_fired, 0);
    /* Opened with this rule's token: one window spent. */
    assert_int_equal(beat(rule, 100, 700 * MS, 1, RULES_OUTCOME_OPENED), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_BLACKOUT);
    assert_int_equal(entry->windows_fired, 1);
    /* Its own window's overhead makes the rate hold: discarded, never fires. */
    for (uint64_t t = 800; t <= 1500; t += 100)
        assert_int_equal(beat(rule, 1, t * MS, 1, RULES_OUTCOME_OPENED), RULES_STEP_NONE);
    assert_int_equal(entry->windows_fired, 1);
    assert_int_equal(entry->times_true, 1);
    assert_true(entry->discarded_readings >= 8);
    /* Closed at 1550ms: recovery of one rate window (200ms), measured from the close. */
    rules_coordinator_view closed = {
        .blackout = 0, .outcome = RULES_OUTCOME_CLOSED, .closed_ns = 1550 * MS};
    rules_reading reading = value_reading(1, 1600 * MS);
    assert_int_equal(rules_evaluator_step(&evaluator, rule, &reading, 1600 * MS, &closed),
                     RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_RECOVERY);
    assert_int_equal(entry->windows_fired, 1); /* not spent twice */
    assert_int_equal(beat(rule, 1, 1700 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_RECOVERY);
    /* Recovery over: cooldown until 1550ms + 1s. */
    assert_int_equal(beat(rule, 1, 1800 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_COOLDOWN);
    assert_int_equal(beat(rule, 1, 2500 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_COOLDOWN);
    /* Cooldown over: waits to rearm; the rule still holds, so no window. */
    assert_int_equal(beat(rule, 1, 2600 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_WAITING_TO_REARM);
    /* Hysteresis: 300/s no longer holds (< 200/s) but is not back to rearm 400/s. */
    assert_int_equal(beat(rule, 300, 2700 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_WAITING_TO_REARM);
    assert_int_equal(beat(rule, 100, 2800 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_WAITING_TO_REARM);
    assert_int_equal(beat(rule, 400, 2900 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(entry->state, RULES_EVAL_ARMED);
    /* Armed again: fires again after for. */
    assert_int_equal(beat(rule, 100, 3000 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 100, 3300 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
    assert_int_equal(entry->times_true, 2);
}

static void test_exhausted_after_max_windows(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule("kernel_launch_rate < 200/s over 200ms cooldown 0s max_windows 1", 0);
    assert_int_equal(beat(rule, 100, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
    assert_false(rules_evaluator_take_summary_due(&evaluator, rule));
    /* Opened and closed between two beats: known only as closed; spent once. */
    assert_int_equal(beat(rule, 100, 300 * MS, 0, RULES_OUTCOME_CLOSED), RULES_STEP_NONE);
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->state, RULES_EVAL_EXHAUSTED);
    assert_int_equal(entry->windows_fired, 1);
    assert_true(rules_evaluator_take_summary_due(&evaluator, rule));
    assert_false(rules_evaluator_take_summary_due(&evaluator, rule));
    for (uint64_t t = 400; t < 3000; t += 100)
        assert_int_equal(beat(rule, 100, t * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    char status[64], reason[RULES_EVALUATOR_REASON_MAX];
    rules_evaluator_summary(&evaluator, rule, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "exhausted");
    assert_string_equal(reason, "fired 1 time: max_windows 1 spent");
}

static void test_engine_refusal_refuses_the_rule(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule("kernel_launch_rate < 200/s over 200ms", 0);
    assert_int_equal(beat(rule, 100, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
    rules_reading reading = value_reading(100, 300 * MS);
    rules_coordinator_view view = {.outcome = RULES_OUTCOME_REFUSED_ENGINE, .reason = "no PM"};
    assert_int_equal(rules_evaluator_step(&evaluator, rule, &reading, 300 * MS, &view),
                     RULES_STEP_NONE);
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->state, RULES_EVAL_REFUSED);
    assert_int_equal(entry->windows_fired, 0);
    assert_string_equal(entry->reason, "the deep engine could not be armed: no PM");
    assert_true(rules_evaluator_take_summary_due(&evaluator, rule));
    /* Refused per probe, before anything fired. */
    size_t probed = add_rule("kernel_launch_rate < 200/s", 0);
    rules_evaluator_refuse(&evaluator, probed, "engine sim-pm cannot arm: fault");
    assert_int_equal(state_of(probed), RULES_EVAL_REFUSED);
    assert_int_equal(beat(probed, 1, 5 * S, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
}

/* Engine auto found no engine within the deep budget at that moment: no
 * window is spent, and the rule asks again only after its recovery,
 * cooldown and rearm, as after a window (never at every beat). */
static void test_over_budget_spends_nothing(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule("kernel_launch_rate < 200/s over 200ms cooldown 1s engine auto", 0);
    assert_int_equal(beat(rule, 100, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
    assert_int_equal(beat(rule, 100, 300 * MS, 0, RULES_OUTCOME_OVER_BUDGET), RULES_STEP_NONE);
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->state, RULES_EVAL_RECOVERY);
    assert_int_equal(entry->windows_fired, 0);
    assert_int_equal(entry->busy_refusals, 0);
    assert_string_equal(entry->reason, "");
    assert_int_equal(beat(rule, 100, 600 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_COOLDOWN);
    assert_int_equal(beat(rule, 100, 1400 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_WAITING_TO_REARM);
    assert_int_equal(beat(rule, 300, 1500 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_ARMED);
    assert_int_equal(beat(rule, 100, 1600 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
    assert_int_equal(rules_evaluator_get(&evaluator, rule)->windows_fired, 0);
    char status[64], reason[256];
    rules_evaluator_summary(&evaluator, rule, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "never fired");
    assert_string_equal(reason, "held 2 times; turned down 1 time (engine auto: over the deep "
                                "budget)");
}

static void test_stale_source_never_fires(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule("gpu0.utilization < 20% over 200ms", 0);
    for (uint64_t t = 200; t <= 2000; t += 100) {
        rules_reading reading = value_reading(5, t * MS);
        reading.source_time_ns = 1;
        reading.stale = 1;
        assert_int_equal(rules_evaluator_step(&evaluator, rule, &reading, t * MS, NULL),
                         RULES_STEP_NONE);
    }
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->stale_readings, 19);
    assert_int_equal(entry->times_true, 0);
    char status[64], reason[RULES_EVALUATOR_REASON_MAX];
    rules_evaluator_summary(&evaluator, rule, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "stale source");
    /* A stale reading in the middle of a sustain resets it. */
    size_t sustain = add_rule(LOW_RATE, 0);
    assert_int_equal(beat(sustain, 100, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    rules_reading stale = value_reading(100, 400 * MS);
    stale.stale = 1;
    rules_evaluator_step(&evaluator, sustain, &stale, 400 * MS, NULL);
    assert_int_equal(state_of(sustain), RULES_EVAL_ARMED);
    assert_int_equal(beat(sustain, 100, 500 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(sustain, 100, 700 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(sustain, 100, 800 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
}

static void test_missing_percentile_never_fires(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule("kernel_duration_p99 > 5ms over 200ms", 0);
    for (uint64_t t = 200; t <= 1000; t += 100) {
        rules_reading reading = {.missing = 1, .publish_time_ns = t * MS};
        assert_int_equal(rules_evaluator_step(&evaluator, rule, &reading, t * MS, NULL),
                         RULES_STEP_NONE);
        /* No reading at all (a custom counter never registered) is missing too. */
        assert_int_equal(rules_evaluator_step(&evaluator, rule, NULL, t * MS, NULL),
                         RULES_STEP_NONE);
    }
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->missing_readings, 18);
    assert_int_equal(entry->windows_fired, 0);
    char status[64], reason[RULES_EVALUATOR_REASON_MAX];
    rules_evaluator_summary(&evaluator, rule, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "metric missing");
    /* 6ms in ns holds. */
    assert_int_equal(beat(rule, 6e6, 1100 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
}

static void test_manual_window_spends_no_budget(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t rule = add_rule(LOW_RATE, 0);
    assert_int_equal(beat(rule, 1000, 200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    /* A manual window opens: blackout, and no outcome of this rule's own. A stray
     * outcome with no request of its own outstanding changes nothing either. */
    assert_int_equal(beat(rule, 1, 300 * MS, 1, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 1, 400 * MS, 1, RULES_OUTCOME_OPENED), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_BLACKOUT);
    assert_int_equal(beat(rule, 1, 900 * MS, 1, RULES_OUTCOME_CLOSED), RULES_STEP_NONE);
    assert_int_equal(beat(rule, 1, 1000 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    assert_int_equal(state_of(rule), RULES_EVAL_RECOVERY);
    assert_int_equal(beat(rule, 1, 1200 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_NONE);
    /* Not its own window: no cooldown, no rearm; armed and already pending. */
    assert_int_equal(state_of(rule), RULES_EVAL_PENDING);
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, rule);
    assert_int_equal(entry->windows_fired, 0);
    assert_int_equal(entry->times_true, 1);
    assert_int_equal(beat(rule, 1, 1500 * MS, 0, RULES_OUTCOME_NONE), RULES_STEP_REQUEST);
}

static void test_refused_rules_and_summaries(void **state)
{
    (void)state;
    rules_evaluator_init(&evaluator);
    size_t index = 99;
    assert_int_equal(rules_evaluator_add(&evaluator, NULL, "kernel_launch_rate < 500",
                                         "at column 22: '500' needs a unit: write 500/s", 0,
                                         &index),
                     FLARE_OK);
    assert_int_equal(state_of(index), RULES_EVAL_REFUSED);
    assert_true(rules_evaluator_take_summary_due(&evaluator, index));
    char status[64], reason[RULES_EVALUATOR_REASON_MAX];
    rules_evaluator_summary(&evaluator, index, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "refused");
    assert_string_equal(reason, "at column 22: '500' needs a unit: write 500/s");
    /* A rule built in code that validation refuses. */
    rules_rule bad;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse("kernel_launch_rate < 500/s", &bad, error, sizeof(error)),
                     FLARE_OK);
    bad.window_ns = 250 * MS;
    assert_int_equal(rules_evaluator_add(&evaluator, &bad, NULL, NULL, 0, &index), FLARE_OK);
    assert_int_equal(state_of(index), RULES_EVAL_REFUSED);
    /* Never true, with its canonical form. */
    size_t quiet = add_rule("kernel_launch_rate < 200/s over 200ms", 0);
    assert_string_equal(rules_evaluator_get(&evaluator, quiet)->canonical,
                        "kernel_launch_rate < 200/s for 0s over 200ms bucket 100ms rearm 200/s "
                        "stale_after 1300ms cooldown 10s max_windows 3 deep_for 2s "
                        "deep_launches 100000");
    beat(quiet, 900, 300 * MS, 0, RULES_OUTCOME_NONE);
    rules_evaluator_summary(&evaluator, quiet, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "never true");
    assert_string_equal(reason, "never true; last value 900");
    /* Held but never long enough. */
    size_t brief = add_rule(LOW_RATE, 0);
    beat(brief, 100, 200 * MS, 0, RULES_OUTCOME_NONE);
    beat(brief, 900, 300 * MS, 0, RULES_OUTCOME_NONE);
    rules_evaluator_summary(&evaluator, brief, status, sizeof(status), reason, sizeof(reason));
    assert_string_equal(status, "held, not sustained");
    /* Full. */
    while (evaluator.count < RULES_EVALUATOR_MAX)
        add_rule(LOW_RATE, 0);
    rules_rule rule;
    assert_int_equal(rules_parse(LOW_RATE, &rule, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rules_evaluator_add(&evaluator, &rule, LOW_RATE, NULL, 0, &index),
                     FLARE_ERR_FULL);
    assert_int_equal(rules_evaluator_step(&evaluator, RULES_EVALUATOR_MAX, NULL, 0, NULL),
                     RULES_STEP_NONE);
    assert_null(rules_evaluator_get(&evaluator, RULES_EVALUATOR_MAX));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warming_up_then_armed),
        cmocka_unit_test(test_not_sustained_goes_back_to_armed),
        cmocka_unit_test(test_sustained_is_a_span_between_observations),
        cmocka_unit_test(test_busy_refusal_costs_nothing),
        cmocka_unit_test(test_opened_spends_budget_and_blackout_discards),
        cmocka_unit_test(test_exhausted_after_max_windows),
        cmocka_unit_test(test_engine_refusal_refuses_the_rule),
        cmocka_unit_test(test_over_budget_spends_nothing),
        cmocka_unit_test(test_stale_source_never_fires),
        cmocka_unit_test(test_missing_percentile_never_fires),
        cmocka_unit_test(test_manual_window_spends_no_budget),
        cmocka_unit_test(test_refused_rules_and_summaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
