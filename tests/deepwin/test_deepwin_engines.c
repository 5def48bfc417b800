/*
 * test_deepwin_engines.c: a window's choice of deep engine (issue 26, item
 * 3): a window asks for pm (the default) or pc; the coordinator arms the
 * engine asked for, or falls back to PM sampling and says why; the engine
 * that armed a window is the one that disarms it. The rule option `engine`
 * that asks: parsed, written in the canonical text only when not pm,
 * refused with a precise message when unknown or on a replay rule; and
 * engine auto's name and rule option (its choice: test_deepwin_auto.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "backend/sim/sim.h"
#include "deepwin/deepwin.h"
#include "flare/flare.h"
#include "rules/rule.h"

#define S 1000000000ull

/* A stand-in PC sampling engine that counts what it was asked. */
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
    (void)device;
    pc_disarms++;
    if (result != NULL)
        *result = (backend_engine_result){.disarmed_ns = now_ns, .samples = 123};
    return FLARE_OK;
}

static int pc_probe(int device, char *reason, size_t reason_size)
{
    (void)device, (void)reason, (void)reason_size;
    return FLARE_OK;
}

static const backend_engine_ops test_pc_engine = {
    .name = "test-pc", .arm = pc_arm, .disarm = pc_disarm, .probe = pc_probe};

static int setup(void **state)
{
    (void)state;
    sim_engine_reset();
    pc_arms = pc_disarms = pc_busy = 0;
    return 0;
}

static deepwin_record one_window(deepwin_coordinator *coordinator, deepwin_engine_kind engine)
{
    deepwin_token token = {.kind = DEEPWIN_TOKEN_MANUAL, .engine = engine};
    snprintf(token.label, sizeof(token.label), "engine test");
    deepwin_bounds bounds = {.max_duration_ns = 1 * S};
    assert_int_equal(deepwin_request_open(coordinator, &token, &bounds, NULL, 1 * S, NULL),
                     FLARE_OK);
    deepwin_tick(coordinator, 1 * S, 0);
    deepwin_close_now(coordinator, DEEPWIN_CLOSE_MANUAL, 2 * S, 0);
    deepwin_record record;
    assert_int_equal(deepwin_take_records(coordinator, &record, 1), 1);
    return record;
}

static deepwin_coordinator *make(const backend_engine_ops *pm, const backend_engine_ops *pc)
{
    deepwin_config config = {.engine = pm, .pc_engine = pc, .device = -1};
    deepwin_coordinator *coordinator = NULL;
    assert_int_equal(deepwin_create(&config, &coordinator), FLARE_OK);
    return coordinator;
}

static void test_pc_without_a_pc_engine_falls_back_to_pm(void **state)
{
    (void)state;
    deepwin_coordinator *coordinator = make(sim_engine(), NULL);
    deepwin_record record = one_window(coordinator, DEEPWIN_ENGINE_PC);
    assert_string_equal(record.engine, sim_engine()->name);
    assert_string_equal(record.engine_status, "disarmed");
    assert_string_equal(record.engine_reason,
                        "asked for pc: no PC sampling engine on this device; fell back to pm");
    sim_engine_stats stats;
    sim_engine_stats_get(&stats);
    assert_int_equal(stats.arms, 1);
    /* A pm window says nothing of engines. */
    record = one_window(coordinator, DEEPWIN_ENGINE_PM);
    assert_string_equal(record.engine_reason, "");
    deepwin_destroy(coordinator);
    /* No engine at all: the window runs without one and says so. */
    coordinator = make(NULL, NULL);
    record = one_window(coordinator, DEEPWIN_ENGINE_PC);
    assert_string_equal(record.engine, "none");
    assert_string_equal(record.engine_reason,
                        "asked for pc: no PC sampling engine on this device; fell back to none");
    deepwin_destroy(coordinator);
}

static void test_each_window_arms_and_disarms_its_own_engine(void **state)
{
    (void)state;
    deepwin_coordinator *coordinator = make(sim_engine(), &test_pc_engine);
    deepwin_record record = one_window(coordinator, DEEPWIN_ENGINE_PC);
    assert_string_equal(record.engine, "test-pc");
    assert_string_equal(record.engine_status, "disarmed");
    assert_int_equal(record.engine_samples, 123);
    assert_int_equal(pc_arms, 1);
    assert_int_equal(pc_disarms, 1);
    sim_engine_stats stats;
    sim_engine_stats_get(&stats);
    assert_int_equal(stats.arms, 0);
    record = one_window(coordinator, DEEPWIN_ENGINE_PM);
    assert_string_equal(record.engine, sim_engine()->name);
    sim_engine_stats_get(&stats);
    assert_int_equal(stats.arms, 1);
    assert_int_equal(pc_arms, 1);
    assert_int_equal(pc_disarms, 1);
    deepwin_destroy(coordinator);
}

static void test_busy_pc_engine_falls_back_to_pm(void **state)
{
    (void)state;
    pc_busy = 1;
    /* The lease turns PC sampling down: the window gets PM sampling. */
    deepwin_coordinator *coordinator = make(sim_engine(), &test_pc_engine);
    deepwin_record record = one_window(coordinator, DEEPWIN_ENGINE_PC);
    assert_string_equal(record.engine, sim_engine()->name);
    assert_string_equal(record.engine_status, "disarmed");
    assert_string_equal(record.engine_reason,
                        "asked for pc: PC sampling busy, held by context 7; fell back to pm");
    assert_int_equal(pc_disarms, 0); /* nothing of the PC engine's was armed */
    sim_engine_stats stats;
    sim_engine_stats_get(&stats);
    assert_int_equal(stats.arms, 1);
    assert_int_equal(stats.disarms, 1);
    deepwin_destroy(coordinator);
    /* Without a PM engine the window runs without any, and says why. */
    coordinator = make(NULL, &test_pc_engine);
    record = one_window(coordinator, DEEPWIN_ENGINE_PC);
    assert_string_equal(record.engine_status, "busy");
    assert_string_equal(record.engine_reason, "PC sampling busy, held by context 7");
    assert_true(record.opened_ns > 0);
    assert_int_equal(pc_disarms, 0);
    deepwin_destroy(coordinator);
    /* The fallback's note comes first when the fallback is refused too. */
    sim_engine_fault_set(1, "PM sampling unavailable: counters busy");
    coordinator = make(sim_engine(), NULL);
    record = one_window(coordinator, DEEPWIN_ENGINE_PC);
    assert_string_equal(record.engine_status, "refused");
    assert_string_equal(record.engine_reason,
                        "asked for pc: no PC sampling engine on this device; fell back to pm; PM "
                        "sampling unavailable: counters busy");
    sim_engine_fault_set(0, NULL);
    deepwin_destroy(coordinator);
}

static void test_engine_kind_names(void **state)
{
    (void)state;
    deepwin_engine_kind kind = DEEPWIN_ENGINE_PM;
    assert_int_equal(deepwin_engine_kind_parse("pc", &kind), 0);
    assert_int_equal(kind, DEEPWIN_ENGINE_PC);
    assert_int_equal(deepwin_engine_kind_parse("pm", &kind), 0);
    assert_int_equal(kind, DEEPWIN_ENGINE_PM);
    assert_int_equal(deepwin_engine_kind_parse("auto", &kind), 0);
    assert_int_equal(kind, DEEPWIN_ENGINE_AUTO);
    assert_int_equal(deepwin_engine_kind_parse("sass", &kind), 0);
    assert_int_equal(kind, DEEPWIN_ENGINE_SASS);
    assert_int_equal(deepwin_engine_kind_parse("sas", &kind), -1);
    assert_int_equal(deepwin_engine_kind_parse("Auto", &kind), -1);
    assert_int_equal(deepwin_engine_kind_parse(NULL, &kind), -1);
    assert_string_equal(deepwin_engine_kind_name(DEEPWIN_ENGINE_PC), "pc");
    assert_string_equal(deepwin_engine_kind_name(DEEPWIN_ENGINE_AUTO), "auto");
    assert_string_equal(deepwin_engine_kind_name(DEEPWIN_ENGINE_SASS), "sass");
    assert_string_equal(deepwin_engine_kind_name((deepwin_engine_kind)9), "?");
}

static void expect_refused(const char *text, const char *message)
{
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse(text, &rule, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, message);
}

static void test_rule_option_engine(void **state)
{
    (void)state;
    rules_rule rule;
    char error[RULES_ERROR_MAX], text[RULES_FORMAT_MAX];
    assert_int_equal(
        rules_parse("kernel_duration_p99 > 5ms engine pc", &rule, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rule.engine, RULES_ENGINE_PC);
    assert_int_equal(rules_format_canonical(&rule, text, sizeof(text)), FLARE_OK);
    assert_non_null(strstr(text, " deep_launches 100000 engine pc"));
    rules_rule again;
    assert_int_equal(rules_parse(text, &again, error, sizeof(error)), FLARE_OK);
    assert_true(rules_rule_equal(&rule, &again));
    /* pm is the default, and a window rule's text stays what it was. */
    assert_int_equal(
        rules_parse("kernel_duration_p99 > 5ms engine pm", &rule, error, sizeof(error)), FLARE_OK);
    assert_int_equal(rule.engine, RULES_ENGINE_PM);
    assert_int_equal(rules_format_canonical(&rule, text, sizeof(text)), FLARE_OK);
    assert_null(strstr(text, "engine"));
    assert_false(rules_rule_equal(&rule, &again));
    expect_refused("kernel_duration_p99 > 5ms engine sas",
                   "at column 34: unknown engine 'sas'; use pm (PM sampling, the default), pc (PC "
                   "sampling), sass (SASS metrics) or auto (the deepest within the deep budget)");
    assert_int_equal(
        rules_parse("kernel_duration_p99 > 5ms engine sass", &rule, error, sizeof(error)),
        FLARE_OK);
    assert_int_equal(rule.engine, RULES_ENGINE_SASS);
    assert_int_equal(rules_format_canonical(&rule, text, sizeof(text)), FLARE_OK);
    assert_non_null(strstr(text, " engine sass"));
    assert_int_equal(rules_parse(text, &again, error, sizeof(error)), FLARE_OK);
    assert_true(rules_rule_equal(&rule, &again));
    expect_refused("kernel_duration_p99 > 5ms engine pc action replay",
                   "at column 27: engine applies to action window; a replay's counters come from "
                   "the range profiler");
    expect_refused("kernel_duration_p99 > 5ms engine",
                   "at column 33: option 'engine' needs a value after it, e.g. engine pc");
    expect_refused("kernel_duration_p99 > 5ms engine pc engine pm",
                   "at column 37: option 'engine' is given twice (first at column 27)");
    /* Built in code: validated as a whole. */
    assert_int_equal(
        rules_parse("kernel_duration_p99 > 5ms action replay", &rule, error, sizeof(error)),
        FLARE_OK);
    rule.engine = RULES_ENGINE_PC;
    assert_int_equal(rules_validate(&rule, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "engine applies to action window; a replay's counters come from "
                               "the range profiler");
    rule.engine = (rules_engine)7;
    assert_int_equal(rules_validate(&rule, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "unknown engine number 7; use pm, pc, sass or auto");
}

static void test_rule_option_engine_auto(void **state)
{
    (void)state;
    rules_rule rule, again;
    char error[RULES_ERROR_MAX], text[RULES_FORMAT_MAX];
    assert_int_equal(
        rules_parse("kernel_launch_rate < 500/s for 2s engine auto", &rule, error, sizeof(error)),
        FLARE_OK);
    assert_int_equal(rule.engine, RULES_ENGINE_AUTO);
    assert_string_equal(rules_engine_name(rule.engine), "auto");
    /* Canonical: every option spelled out, engine auto after deep_launches. */
    assert_int_equal(rules_format_canonical(&rule, text, sizeof(text)), FLARE_OK);
    assert_string_equal(text, "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 500/s "
                              "stale_after 4100ms cooldown 10s max_windows 3 deep_for 2s "
                              "deep_launches 100000 engine auto");
    assert_int_equal(rules_parse(text, &again, error, sizeof(error)), FLARE_OK);
    assert_true(rules_rule_equal(&rule, &again));
    char twice[RULES_FORMAT_MAX];
    assert_int_equal(rules_format_canonical(&again, twice, sizeof(twice)), FLARE_OK);
    assert_string_equal(twice, text);
    /* Where it is written does not matter; a replay rule refuses it. */
    assert_int_equal(
        rules_parse("kernel_duration_p99 > 5ms engine auto for 1s", &rule, error, sizeof(error)),
        FLARE_OK);
    assert_int_equal(rule.engine, RULES_ENGINE_AUTO);
    expect_refused("kernel_duration_p99 > 5ms engine auto action replay",
                   "at column 27: engine applies to action window; a replay's counters come from "
                   "the range profiler");
    expect_refused("kernel_duration_p99 > 5ms engine AUTO",
                   "at column 34: unknown engine 'AUTO'; use pm (PM sampling, the default), pc (PC "
                   "sampling), sass (SASS metrics) or auto (the deepest within the deep budget)");
    /* What a backend sets up before any rule fires. */
    assert_int_equal(rules_list_engines("kernel_launch_rate < 500/s engine auto"),
                     RULES_ENGINES_AUTO);
    assert_int_equal(rules_list_engines("kernel_launch_rate < 500/s engine auto; "
                                        "gpu0.utilization < 20% engine pc"),
                     RULES_ENGINES_AUTO | RULES_ENGINES_PC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_pc_without_a_pc_engine_falls_back_to_pm, setup),
        cmocka_unit_test_setup(test_each_window_arms_and_disarms_its_own_engine, setup),
        cmocka_unit_test_setup(test_busy_pc_engine_falls_back_to_pm, setup),
        cmocka_unit_test(test_engine_kind_names),
        cmocka_unit_test(test_rule_option_engine),
        cmocka_unit_test(test_rule_option_engine_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
