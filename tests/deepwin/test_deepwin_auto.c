/*
 * test_deepwin_auto.c: engine auto (issue 26, item 3): the slowdown
 * estimate, the deep budget's text, the launch rate the beat keeps, and the
 * coordinator's choice: pc when it fits the budget, pm when only pm does (a
 * high launch rate fed through the beat), a refusal that says why when
 * nothing fits, an unmeasured engine never chosen, and a busy pc giving way
 * to pm only when pm fits. Then with real threads (a beat thread ticking on
 * the real clock while the test asks), and in sessions on the simulated
 * device: flare_window_open with engine "auto", and a malformed
 * FLARE_DEEP_BUDGET reported as a malformed FLARE_DEEP_ENGINE is. Waits on
 * conditions, never on times. A rule with engine auto opens its window, or
 * is turned down for the moment without being refused itself. It must never
 * leave a session directory behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_engine_costs.h"
#include "backend/sim/sim.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_auto.h"
#include "deepwin/deepwin_session.h"
#include "flare/flare.h"
#include "test_sql.h"
#include "test_util.h"

#define MS 1000000ull
#define S  1000000000ull

/* ---- stand-in engines ---- */

/* A PC sampling engine that counts what it was asked; costs as the
 * simulated one's unless a test changes them (a copy of the table). */
static int pc_arms, pc_disarms, pc_busy;

static int pc_arm(int device, const backend_engine_config *config, uint64_t now_ns, char *reason,
                  size_t reason_size)
{
    (void)device, (void)config, (void)now_ns;
    if (pc_busy) {
        snprintf(reason, reason_size, "PC sampling busy, held by context 7");
        return BACKEND_ENGINE_BUSY;
    }
    pc_arms++;
    return FLARE_OK;
}

static int pc_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    (void)device, (void)now_ns;
    pc_disarms++;
    if (result != NULL)
        memset(result, 0, sizeof(*result));
    return FLARE_OK;
}

static int pc_probe(int device, char *reason, size_t reason_size)
{
    (void)device, (void)reason, (void)reason_size;
    return FLARE_OK;
}

static const backend_engine_ops test_pc = {.name = "test-pc",
                                           .arm = pc_arm,
                                           .disarm = pc_disarm,
                                           .probe = pc_probe,
                                           .cost_launch_ns = 1000,
                                           .cost_gpu = 0.02,
                                           .cost_source = "test (nominal)"};
static const backend_engine_ops unmeasured_pc = {
    .name = "test-pc-unmeasured", .arm = pc_arm, .disarm = pc_disarm, .probe = pc_probe};

static int setup(void **state)
{
    (void)state;
    sim_engine_reset();
    pc_arms = pc_disarms = pc_busy = 0;
    return 0;
}

static uint64_t sim_arms(void)
{
    sim_engine_stats stats;
    sim_engine_stats_get(&stats);
    return stats.arms;
}

/* ---- the arithmetic ---- */

static void test_estimate(void **state)
{
    (void)state;
    assert_true(fabs(deepwin_auto_slowdown(1250, 0.0006, 10000) - 0.0131) < 1e-12);
    assert_true(fabs(deepwin_auto_slowdown(600, 0.0003, 0) - 0.0003) < 1e-12);
    assert_true(fabs(deepwin_auto_slowdown(0, 0, 1e6)) < 1e-12);
    assert_true(fabs(deepwin_auto_estimate(&test_pc, 50000) - 0.07) < 1e-12);
    assert_true(deepwin_auto_estimate(&unmeasured_pc, 50000) < 0);
    assert_true(deepwin_auto_estimate(NULL, 50000) < 0);
    /* The engines this build has are all measured, or nominal. */
    assert_non_null(sim_engine()->cost_source);
    assert_true(fabs(deepwin_auto_estimate(sim_engine(), 10000) - 0.015) < 1e-12);
    /* What the CUDA backend asks at install: would pc ever fit? At 10,000
     * launches/s CUDA PC sampling is about 0.98%. */
    assert_true(deepwin_auto_fits_nominal(CUDA_PC_COST_LAUNCH_NS, CUDA_PC_COST_GPU, NULL));
    assert_true(deepwin_auto_fits_nominal(CUDA_PC_COST_LAUNCH_NS, CUDA_PC_COST_GPU, ""));
    assert_true(deepwin_auto_fits_nominal(CUDA_PC_COST_LAUNCH_NS, CUDA_PC_COST_GPU, "1.5%"));
    assert_false(deepwin_auto_fits_nominal(CUDA_PC_COST_LAUNCH_NS, CUDA_PC_COST_GPU, "0.9%"));
    assert_false(deepwin_auto_fits_nominal(CUDA_PC_COST_LAUNCH_NS, CUDA_PC_COST_GPU, "5"));
    assert_true(deepwin_auto_fits_nominal(CUDA_PM_COST_LAUNCH_NS, CUDA_PM_COST_GPU, "0.9%"));
    char text[32];
    deepwin_auto_format_percent(0.0131, text, sizeof(text));
    assert_string_equal(text, "1.3");
    deepwin_auto_format_percent(0.0006, text, sizeof(text));
    assert_string_equal(text, "0.06");
    deepwin_auto_format_percent(0.3125, text, sizeof(text));
    assert_string_equal(text, "31");
    deepwin_auto_format_percent(2.5, text, sizeof(text));
    assert_string_equal(text, "250");
}

static void expect_budget(const char *text, double fraction)
{
    double parsed = -1;
    char why[160];
    assert_int_equal(deepwin_budget_parse(text, &parsed, why, sizeof(why)), 0);
    if (fabs(parsed - fraction) > 1e-15)
        fail_msg("'%s' read as %.17g, not %.17g", text, parsed, fraction);
    assert_string_equal(why, "");
}

static void expect_bad_budget(const char *text, const char *message)
{
    double parsed = 42;
    char why[160];
    assert_int_equal(deepwin_budget_parse(text, &parsed, why, sizeof(why)), -1);
    assert_true(parsed == 42);
    assert_string_equal(why, message);
}

static void test_budget_text(void **state)
{
    (void)state;
    expect_budget("5%", 0.05);
    expect_budget("0.5%", 0.005);
    expect_budget("12.5%", 0.125);
    expect_budget("100%", 1.0);
    expect_budget("0.01%", 0.0001);
    expect_budget("007%", 0.07);
    expect_bad_budget("0%", "'0%' must be more than 0%");
    expect_bad_budget("0.0%", "'0.0%' must be more than 0%");
    expect_bad_budget("101%", "'101%' is more than 100%");
    expect_bad_budget("100.5%", "'100.5%' is more than 100%");
    expect_bad_budget("5", "'5' needs a percent sign: write 5%");
    expect_bad_budget("abc", "'abc' is not a percentage: write a number and %, e.g. 5%");
    expect_bad_budget("-1%", "'-1%' is not a percentage: write a number and %, e.g. 5%");
    expect_bad_budget(".5%", "'.5%' needs a digit before the decimal point: write 0.5%");
    expect_bad_budget("5.%", "'5.%' needs a digit after the decimal point");
    expect_bad_budget("5%%", "unexpected '%%' in '5%%': write a number and %, e.g. 5%");
    expect_bad_budget("5 %", "unexpected ' %' in '5 %': write a number and %, e.g. 5%");
    expect_bad_budget("", "a deep budget is a percentage, e.g. 5%");
    expect_bad_budget(NULL, "a deep budget is a percentage, e.g. 5%");
    expect_bad_budget("1234567890123456789%",
                      "'1234567890123456789%' has more digits than a deep budget needs");
}

static void test_launch_rate(void **state)
{
    (void)state;
    deepwin_rate rate;
    memset(&rate, 0, sizeof(rate));
    assert_true(deepwin_rate_note(&rate, 10 * S, 500) == 0); /* one point: no rate */
    /* 10,000 launches a second, a beat every 5 ms for 3 s. */
    double seen = 0;
    for (uint64_t t = 5 * MS; t <= 3 * S; t += 5 * MS)
        seen = deepwin_rate_note(&rate, 10 * S + t, 500 + t / 100000);
    assert_true(fabs(seen - 10000) < 1e-6);
    assert_int_equal(rate.count, DEEPWIN_RATE_POINTS);
    /* A burst: 250,000 a second from now on. After half a second the rate
     * is over the last second or so (a mix); after 1.3 s, the burst's. */
    uint64_t base_t = 13 * S, base_launches = 500 + 3 * S / 100000;
    for (uint64_t t = 5 * MS; t <= 500 * MS; t += 5 * MS)
        seen = deepwin_rate_note(&rate, base_t + t, base_launches + t / 4000);
    assert_true(seen > 10000 && seen < 250000);
    for (uint64_t t = 505 * MS; t <= 1300 * MS; t += 5 * MS)
        seen = deepwin_rate_note(&rate, base_t + t, base_launches + t / 4000);
    assert_true(fabs(seen - 250000) < 1e-6);
    /* A beat that read its clock before the newest point adds nothing. */
    assert_true(deepwin_rate_note(&rate, base_t, base_launches) < 0);
    /* A count that goes back (another origin) starts afresh. */
    assert_true(deepwin_rate_note(&rate, base_t + 2 * S, 3) == 0);
    assert_int_equal(rate.count, 1);
    seen = deepwin_rate_note(&rate, base_t + 2 * S + 100 * MS, 103);
    assert_true(fabs(seen - 1000) < 1e-6);
}

static void test_choice_alone(void **state)
{
    (void)state;
    deepwin_auto_candidate both[] = {{&test_pc, "pc", NULL}, {sim_engine(), "pm", NULL}};
    deepwin_auto_choice choice;
    char reason[256];
    deepwin_auto_choose(both, 2, 10400, 0.05, &choice, reason, sizeof(reason));
    assert_ptr_equal(choice.engine, &test_pc);
    assert_false(choice.refused);
    assert_true(choice.fallback_fits);
    assert_string_equal(reason, "auto: pc, about 3% at 10,400 launches/s (budget 5%)");
    deepwin_auto_choose(both, 2, 50000, 0.05, &choice, reason, sizeof(reason));
    assert_ptr_equal(choice.engine, sim_engine());
    assert_string_equal(reason, "auto: pm, about 3.5% at 50,000 launches/s (budget 5%); pc about "
                                "7% is over the budget");
    deepwin_auto_choose(both, 2, 250000, 0.01, &choice, reason, sizeof(reason));
    assert_null(choice.engine);
    assert_true(choice.refused);
    assert_false(choice.fallback_fits);
    assert_string_equal(reason, "auto: no engine fits the 1% budget at 250,000 launches/s: pc "
                                "about 27%, pm about 14%");
    /* Unmeasured or missing engines are never chosen, and said so. */
    deepwin_auto_candidate unmeasured[] = {{&unmeasured_pc, "pc", NULL},
                                           {sim_engine(), "pm", NULL}};
    deepwin_auto_choose(unmeasured, 2, 0, 0.05, &choice, reason, sizeof(reason));
    assert_ptr_equal(choice.engine, sim_engine());
    assert_string_equal(reason, "auto: pm, about 1% at 0 launches/s (budget 5%); pc "
                                "(test-pc-unmeasured): cost not measured");
    deepwin_auto_candidate missing[] = {{NULL, "pc", NULL}, {sim_engine(), "pm", NULL}};
    deepwin_auto_choose(missing, 2, 1234567, 1.0, &choice, reason, sizeof(reason));
    assert_ptr_equal(choice.engine, sim_engine());
    assert_string_equal(reason, "auto: pm, about 63% at 1,234,567 launches/s (budget 100%); pc: "
                                "none on this device");
    deepwin_auto_candidate none[] = {{NULL, "pc", NULL}, {NULL, "pm", NULL}};
    deepwin_auto_choose(none, 2, 10, 0.05, &choice, reason, sizeof(reason));
    assert_null(choice.engine);
    assert_false(choice.refused);
    assert_string_equal(reason, "auto: no deep engine on this device");
    /* An unusable engine (CUDA PM sampling beside PC sampling) is passed
     * over whatever its cost; a refusal is "over budget" (worth asking
     * again later) only when a usable, measured engine was over it. */
    assert_true(choice.over_budget == 0);
    const char *beside = "never set up beside PC sampling (enabled in this process)";
    deepwin_auto_candidate pm_unusable[] = {{&test_pc, "pc", NULL}, {sim_engine(), "pm", beside}};
    deepwin_auto_choose(pm_unusable, 2, 10400, 0.05, &choice, reason, sizeof(reason));
    assert_ptr_equal(choice.engine, &test_pc);
    deepwin_auto_choose(pm_unusable, 2, 250000, 0.05, &choice, reason, sizeof(reason));
    assert_null(choice.engine);
    assert_true(choice.refused);
    assert_true(choice.over_budget);
    assert_false(choice.fallback_fits);
    assert_ptr_equal(choice.fallback_unusable, beside);
    assert_string_equal(reason, "auto: no engine fits the 5% budget at 250,000 launches/s: pc "
                                "about 27%, pm: never set up beside PC sampling (enabled in this "
                                "process)");
    deepwin_auto_candidate nothing_usable[] = {{&unmeasured_pc, "pc", NULL},
                                               {sim_engine(), "pm", beside}};
    deepwin_auto_choose(nothing_usable, 2, 10, 0.05, &choice, reason, sizeof(reason));
    assert_true(choice.refused);
    assert_false(choice.over_budget);
    /* Over the budget, pm as well: over_budget. */
    deepwin_auto_choose(both, 2, 250000, 0.01, &choice, reason, sizeof(reason));
    assert_true(choice.over_budget);
    /* A malformed budget refuses every engine, and not for the budget. */
    deepwin_auto_choose(both, 2, 10, -1, &choice, reason, sizeof(reason));
    assert_true(choice.refused);
    assert_false(choice.over_budget);
    assert_non_null(strstr(reason, "auto: no valid deep budget (FLARE_DEEP_BUDGET is malformed"));
    /* A small buffer is cut, never overrun. */
    char small[16];
    memset(small, 'x', sizeof(small));
    deepwin_auto_choose(both, 2, 250000, 0.01, &choice, small, 12);
    assert_string_equal(small, "auto: no en");
    assert_int_equal(small[12], 'x');
}

/* ---- the coordinator, on a fake clock ---- */

static deepwin_coordinator *make(const backend_engine_ops *pm, const backend_engine_ops *pc,
                                 double budget)
{
    deepwin_config config = {.engine = pm, .pc_engine = pc, .device = -1, .budget = budget};
    deepwin_coordinator *coordinator = NULL;
    assert_int_equal(deepwin_create(&config, &coordinator), FLARE_OK);
    return coordinator;
}

/* Beats for 1.5 s of fake time from *now at rate launches a second. */
static void beat_at_rate(deepwin_coordinator *coordinator, uint64_t *now, uint64_t *launches,
                         uint64_t rate)
{
    for (int i = 0; i < 300; i++) {
        *now += 5 * MS;
        *launches += rate / 200;
        deepwin_tick(coordinator, *now, *launches);
    }
}

/* One auto window: asked for, one beat, closed; its record. */
static deepwin_record auto_window(deepwin_coordinator *coordinator, uint64_t *now,
                                  uint64_t launches)
{
    deepwin_token token = {.kind = DEEPWIN_TOKEN_MANUAL, .engine = DEEPWIN_ENGINE_AUTO};
    snprintf(token.label, sizeof(token.label), "auto test");
    deepwin_bounds bounds = {.max_duration_ns = 1 * S};
    assert_int_equal(deepwin_request_open(coordinator, &token, &bounds, NULL, *now, NULL),
                     FLARE_OK);
    *now += 5 * MS;
    deepwin_tick(coordinator, *now, launches);
    *now += 5 * MS;
    deepwin_close_now(coordinator, DEEPWIN_CLOSE_MANUAL, *now, launches);
    deepwin_record record;
    assert_int_equal(deepwin_take_records(coordinator, &record, 1), 1);
    return record;
}

static void test_auto_picks_pc_then_pm_as_the_rate_rises(void **state)
{
    (void)state;
    deepwin_coordinator *coordinator = make(sim_engine(), &test_pc, 0); /* default: 5% */
    uint64_t now = 100 * S, launches = 0;
    beat_at_rate(coordinator, &now, &launches, 10400);
    assert_true(fabs(deepwin_launch_rate(coordinator) - 10400) < 1);
    deepwin_record record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "test-pc");
    assert_string_equal(record.engine_status, "disarmed");
    assert_string_equal(record.engine_reason,
                        "auto: pc, about 3% at 10,400 launches/s (budget 5%)");
    assert_int_equal(pc_arms, 1);
    assert_int_equal(pc_disarms, 1);
    assert_int_equal(sim_arms(), 0);
    /* A launch storm: pc no longer fits, pm does. */
    beat_at_rate(coordinator, &now, &launches, 50000);
    record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "sim-pm");
    assert_string_equal(record.engine_status, "disarmed");
    assert_string_equal(record.engine_reason, "auto: pm, about 3.5% at 50,000 launches/s (budget "
                                              "5%); pc about 7% is over the budget");
    assert_int_equal(pc_arms, 1);
    assert_int_equal(sim_arms(), 1);
    /* A smaller budget from the next request on: nothing fits, refused. */
    deepwin_set_budget(coordinator, 0.01);
    beat_at_rate(coordinator, &now, &launches, 250000);
    record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "none");
    assert_string_equal(record.engine_status, "refused");
    assert_string_equal(record.close_reason, DEEPWIN_CLOSE_REFUSED);
    assert_int_equal(record.opened_ns, 0);
    assert_string_equal(record.engine_reason, "auto: no engine fits the 1% budget at 250,000 "
                                              "launches/s: pc about 27%, pm about 14%");
    assert_int_equal(pc_arms, 1); /* nothing armed */
    assert_int_equal(sim_arms(), 1);
    assert_int_equal(deepwin_opened_count(coordinator), 2);
    /* pm and pc windows are as they were: the budget is auto's alone. */
    deepwin_token token = {.kind = DEEPWIN_TOKEN_MANUAL, .engine = DEEPWIN_ENGINE_PC};
    deepwin_bounds bounds = {.max_duration_ns = 1 * S};
    assert_int_equal(deepwin_request_open(coordinator, &token, &bounds, NULL, now, NULL), FLARE_OK);
    deepwin_tick(coordinator, now + 5 * MS, launches);
    deepwin_close_now(coordinator, DEEPWIN_CLOSE_MANUAL, now + 10 * MS, launches);
    assert_int_equal(deepwin_take_records(coordinator, &record, 1), 1);
    assert_string_equal(record.engine, "test-pc");
    assert_string_equal(record.engine_reason, "");
    deepwin_destroy(coordinator);
}

static void test_auto_never_picks_an_unmeasured_engine(void **state)
{
    (void)state;
    deepwin_coordinator *coordinator = make(sim_engine(), &unmeasured_pc, 0.05);
    uint64_t now = 100 * S, launches = 0;
    deepwin_record record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "sim-pm");
    assert_string_equal(record.engine_reason, "auto: pm, about 1% at 0 launches/s (budget 5%); pc "
                                              "(test-pc-unmeasured): cost not measured");
    assert_int_equal(pc_arms, 0);
    deepwin_destroy(coordinator);
    /* No measured engine at all: refused, saying why. */
    static const backend_engine_ops unmeasured_pm = {.name = "test-pm-unmeasured"};
    coordinator = make(&unmeasured_pm, &unmeasured_pc, 1.0);
    record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine_status, "refused");
    assert_string_equal(record.engine_reason,
                        "auto: no engine fits the 100% budget at 0 launches/s: pc "
                        "(test-pc-unmeasured): cost not measured, pm (test-pm-unmeasured): cost "
                        "not measured");
    assert_int_equal(pc_arms, 0);
    deepwin_destroy(coordinator);
    /* No engine at all: runs without one, as a pm window would. */
    coordinator = make(NULL, NULL, 0);
    record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "none");
    assert_string_equal(record.engine_status, "none");
    assert_true(record.opened_ns > 0);
    assert_string_equal(record.engine_reason, "auto: no deep engine on this device");
    deepwin_destroy(coordinator);
    /* A malformed budget (FLARE_DEEP_BUDGET) refuses auto windows. */
    coordinator = make(sim_engine(), &test_pc, -1);
    record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine_status, "refused");
    assert_string_equal(record.engine_reason,
                        "auto: no valid deep budget (FLARE_DEEP_BUDGET is malformed; the "
                        "deep_windows capability says why)");
    deepwin_destroy(coordinator);
}

/* The simulated PM engine, made expensive: pm does not fit a 5% budget. */
static const backend_engine_ops *expensive_pm(void)
{
    static backend_engine_ops table;
    table = *sim_engine();
    table.name = "sim-pm-expensive";
    table.cost_gpu = 0.2;
    return &table;
}

static void test_busy_pc_gives_way_to_pm_only_within_the_budget(void **state)
{
    (void)state;
    pc_busy = 1;
    deepwin_coordinator *coordinator = make(sim_engine(), &test_pc, 0.05);
    uint64_t now = 100 * S, launches = 0;
    beat_at_rate(coordinator, &now, &launches, 10000);
    deepwin_record record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "sim-pm");
    assert_string_equal(record.engine_status, "disarmed");
    assert_string_equal(record.engine_reason,
                        "auto: pc, about 3% at 10,000 launches/s (budget 5%); pc busy: PC sampling "
                        "busy, held by context 7; fell back to pm, about 1.5%");
    assert_int_equal(sim_arms(), 1);
    assert_int_equal(pc_disarms, 0);
    deepwin_destroy(coordinator);
    /* pm over the budget: no fallback; the window runs without an engine,
     * as a busy one does, and says why. */
    coordinator = make(expensive_pm(), &test_pc, 0.05);
    beat_at_rate(coordinator, &now, &launches, 10000);
    record = auto_window(coordinator, &now, launches);
    assert_string_equal(record.engine, "test-pc");
    assert_string_equal(record.engine_status, "busy");
    assert_true(record.opened_ns > 0);
    assert_string_equal(record.engine_reason,
                        "auto: pc, about 3% at 10,000 launches/s (budget 5%); PC sampling busy, "
                        "held by context 7; pm about 20% is over the budget: no fallback");
    assert_int_equal(sim_arms(), 1);
    assert_int_equal(pc_disarms, 0);
    deepwin_destroy(coordinator);
}

/* ---- the coordinator, with real threads ---- */

typedef struct beat_thread {
    deepwin_coordinator *coordinator;
    _Atomic uint64_t rate; /* launches a second it feeds the beat */
    _Atomic int stop;
    pthread_t thread;
} beat_thread;

/* The collector's beat, on the real clock, with a launch count that grows
 * at the rate asked for. */
static void *beat_main(void *argument)
{
    beat_thread *beat = argument;
    uint64_t last = test_now_ns(), launches = 0, carry = 0;
    while (!atomic_load(&beat->stop)) {
        uint64_t now = test_now_ns();
        carry += (now - last) * atomic_load(&beat->rate); /* launch-nanoseconds, none lost */
        launches += carry / S;
        carry %= S;
        last = now;
        deepwin_tick(beat->coordinator, now, launches);
        test_pause_ms(2);
    }
    return NULL;
}

/* Asks for an auto window now (it may wait for a beat) and returns its
 * record once the beat has decided and the window finished. */
static deepwin_record threaded_auto_window(deepwin_coordinator *coordinator)
{
    deepwin_token token = {.kind = DEEPWIN_TOKEN_RULE, .rule_id = 1, .engine = DEEPWIN_ENGINE_AUTO};
    deepwin_bounds bounds = {.max_duration_ns = 20 * MS};
    deepwin_request_result result;
    assert_int_equal(
        deepwin_request_open(coordinator, &token, &bounds, NULL, test_now_ns(), &result), FLARE_OK);
    deepwin_record record;
    memset(&record, 0, sizeof(record));
    TEST_WAIT_UNTIL(deepwin_take_records(coordinator, &record, 1) == 1);
    assert_int_equal(record.id, result.window_id);
    return record;
}

static void test_auto_follows_the_rate_the_beat_sees(void **state)
{
    (void)state;
    beat_thread beat = {.coordinator = make(sim_engine(), &test_pc, 0.15)};
    atomic_store(&beat.rate, 200000);
    assert_int_equal(pthread_create(&beat.thread, NULL, beat_main, &beat), 0);
    /* 200,000 launches a second: pc about 22%, pm about 11% of a 15% budget. */
    TEST_WAIT_UNTIL(deepwin_launch_rate(beat.coordinator) > 150000);
    deepwin_record record = threaded_auto_window(beat.coordinator);
    assert_string_equal(record.engine, "sim-pm");
    assert_non_null(strstr(record.engine_reason, "auto: pm, about 11% at "));
    assert_non_null(strstr(record.engine_reason, " (budget 15%); pc about 22% is over the budget"));
    /* The storm ends: once the last second is quiet, pc fits again. */
    atomic_store(&beat.rate, 1000);
    TEST_WAIT_UNTIL(deepwin_launch_rate(beat.coordinator) < 1100);
    record = threaded_auto_window(beat.coordinator);
    assert_string_equal(record.engine, "test-pc");
    assert_non_null(strstr(record.engine_reason, "auto: pc, about 2.1% at "));
    /* A storm past any engine's reach: refused. */
    atomic_store(&beat.rate, 2000000);
    TEST_WAIT_UNTIL(deepwin_launch_rate(beat.coordinator) > 1500000);
    record = threaded_auto_window(beat.coordinator);
    assert_string_equal(record.engine_status, "refused");
    assert_non_null(strstr(record.engine_reason, "auto: no engine fits the 15% budget at "));
    atomic_store(&beat.stop, 1);
    pthread_join(beat.thread, NULL);
    assert_int_equal(pc_arms, 1);
    assert_int_equal(sim_arms(), 1);
    deepwin_destroy(beat.coordinator);
}

/* ---- sessions on the simulated device ---- */

/* Runs one session in a new directory with the environment given (NAME=VALUE
 * pairs, unset after flare_init), then body, then reads the database. */
static sqlite3 *session(char *dir, size_t size, const char *const *environment, void (*body)(void))
{
    test_make_temp_dir(dir, size, "deepwin-auto");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 5;
    for (size_t i = 0; environment[i] != NULL; i += 2)
        setenv(environment[i], environment[i + 1], 1);
    assert_int_equal(flare_init(&options), FLARE_OK);
    for (size_t i = 0; environment[i] != NULL; i += 2)
        unsetenv(environment[i]);
    if (body != NULL)
        body();
    assert_int_equal(flare_shutdown(), FLARE_OK);
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

static void open_auto_window(void)
{
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 30;
    window.label = "auto from the API";
    window.engine = "auto";
    assert_int_equal(flare_window_open(&window), FLARE_OK);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    TEST_WAIT_UNTIL(deepwin_current_state(coordinator) == DEEPWIN_IDLE);
}

static void refused_auto_window(void)
{
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 30;
    window.engine = "auto";
    assert_int_equal(flare_window_open(&window), FLARE_ERR_UNSUPPORTED);
}

static void test_api_window_with_engine_auto(void **state)
{
    (void)state;
    char dir[256];
    /* No launches: pc about 2% of the default 5%, on the simulated device. */
    sqlite3 *db = session(dir, sizeof(dir), (const char *const[]){NULL}, open_auto_window);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine = "
                                      "'sim-pc-sampling' AND engine_status = 'disarmed' AND "
                                      "engine_reason LIKE 'auto: pc, about 2% at % launches/s "
                                      "(budget 5%); sass about 500% is over the budget' AND label "
                                      "= 'auto from the API'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
    /* A 1.5% budget: pm (about 1%). */
    db = session(dir, sizeof(dir), (const char *const[]){"FLARE_DEEP_BUDGET", "1.5%", NULL},
                 open_auto_window);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine = 'sim-pm' AND "
                                      "engine_reason LIKE 'auto: pm, about 1% at % launches/s "
                                      "(budget 1.5%); sass about 500% is over the budget; pc about "
                                      "2% is over the budget'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
    /* 0.5%: nothing fits; flare_window_open says the engine refused. */
    db = session(dir, sizeof(dir), (const char *const[]){"FLARE_DEEP_BUDGET", "0.5%", NULL},
                 refused_auto_window);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine = 'none' AND "
                                      "engine_status = 'refused' AND close_reason = 'refused' AND "
                                      "opened_ns IS NULL AND engine_reason LIKE 'auto: no engine "
                                      "fits the 0.5% budget at % launches/s: sass about 500%, pc "
                                      "about 2%, pm about 1%'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
}

/* Ticks a counter (about 2,000 a second) until a rule's window has been
 * asked for and has finished. */
static void tick_until_a_rule_window(void)
{
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    uint64_t queued = deepwin_queued_count(coordinator);
    uint64_t give_up = test_now_ns() + TEST_WAIT_SECONDS * S;
    while (deepwin_queued_count(coordinator) == queued ||
           deepwin_current_state(coordinator) != DEEPWIN_IDLE) {
        if (test_now_ns() >= give_up)
            fail_msg("no rule window in %d s", TEST_WAIT_SECONDS);
        assert_int_equal(flare_counter_tick("auto_ticks", 10), FLARE_OK);
        test_pause_ms(5);
    }
}

#define AUTO_RULE                                                                                  \
    "custom.auto_ticks > 100/s over 200ms bucket 100ms deep_for 50ms max_windows 1 engine auto"

static void test_rule_with_engine_auto(void **state)
{
    (void)state;
    char dir[256];
    sqlite3 *db =
        session(dir, sizeof(dir), (const char *const[]){"FLARE_DEEP_WHEN", AUTO_RULE, NULL},
                tick_until_a_rule_window);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE token_kind = 'rule' AND "
                                      "engine = 'sim-pc-sampling' AND engine_status = 'disarmed' "
                                      "AND engine_reason LIKE 'auto: pc, about 2% at %'"),
                     1);
    assert_int_equal(test_sql_int(db, "SELECT windows_fired FROM rules WHERE rule_id = 1"), 1);
    sqlite3_close(db);
    test_remove_dir(dir);
    /* Nothing fits 0.5%: the window is refused for the moment, and the rule
     * is not: it spent none of its windows and may ask again later. */
    db = session(
        dir, sizeof(dir),
        (const char *const[]){"FLARE_DEEP_WHEN", AUTO_RULE, "FLARE_DEEP_BUDGET", "0.5%", NULL},
        tick_until_a_rule_window);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE token_kind = 'rule' AND "
                                      "engine_status = 'refused' AND engine_reason LIKE 'auto: no "
                                      "engine fits the 0.5% budget at %'"),
                     1);
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM rules WHERE rule_id = 1 AND "
                         "windows_fired = 0 AND status = 'never fired' AND reason = 'held 1 "
                         "time; turned down 1 time (engine auto: over the deep "
                         "budget)'"),
        1);
    sqlite3_close(db);
    test_remove_dir(dir);
}

static void test_malformed_budget_is_reported(void **state)
{
    (void)state;
    char dir[256];
    /* With a scheduled auto window: the schedule is ignored, as it is for a
     * malformed FLARE_DEEP_ENGINE. */
    sqlite3 *db =
        session(dir, sizeof(dir),
                (const char *const[]){"FLARE_DEEP_AFTER", "1h", "FLARE_DEEP_FOR", "1s",
                                      "FLARE_DEEP_ENGINE", "auto", "FLARE_DEEP_BUDGET", "5", NULL},
                NULL);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM capabilities WHERE feature = "
                                      "'deep_windows' AND status = 'degraded' AND reason = "
                                      "'scheduled window ignored: FLARE_DEEP_BUDGET=5: ''5'' needs "
                                      "a percent sign: write 5%'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
    /* Without one: auto windows are refused, and the capability says why. */
    db = session(dir, sizeof(dir), (const char *const[]){"FLARE_DEEP_BUDGET", "101%", NULL},
                 refused_auto_window);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM capabilities WHERE feature = "
                                      "'deep_windows' AND status = 'degraded' AND reason = 'on "
                                      "request (flare_window_open); FLARE_DEEP_BUDGET=101%: "
                                      "''101%'' is more than 100%; engine auto windows are "
                                      "refused; default engine sim-pm'"),
                     1);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine_status = "
                                      "'refused' AND engine_reason LIKE 'auto: no valid deep "
                                      "budget%'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
    /* A good one beside a schedule: nothing to say. */
    db = session(dir, sizeof(dir),
                 (const char *const[]){"FLARE_DEEP_AFTER", "1h", "FLARE_DEEP_FOR", "1s",
                                       "FLARE_DEEP_ENGINE", "auto", "FLARE_DEEP_BUDGET", "2.5%",
                                       NULL},
                 NULL);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM capabilities WHERE feature = "
                                      "'deep_windows' AND status = 'active' AND reason = "
                                      "'scheduled: after 1h for 1s (engine auto); default "
                                      "engine sim-pm'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_budget_text),
        cmocka_unit_test(test_launch_rate),
        cmocka_unit_test(test_choice_alone),
        cmocka_unit_test_setup(test_auto_picks_pc_then_pm_as_the_rate_rises, setup),
        cmocka_unit_test_setup(test_auto_never_picks_an_unmeasured_engine, setup),
        cmocka_unit_test_setup(test_busy_pc_gives_way_to_pm_only_within_the_budget, setup),
        cmocka_unit_test_setup(test_auto_follows_the_rate_the_beat_sees, setup),
        cmocka_unit_test_setup(test_api_window_with_engine_auto, setup),
        cmocka_unit_test_setup(test_rule_with_engine_auto, setup),
        cmocka_unit_test_setup(test_malformed_budget_is_reported, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
