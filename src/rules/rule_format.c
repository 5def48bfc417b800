/*
 * rule_format.c: a rule's canonical text, quantities as text, and rule
 * equality (rule.h).
 *
 * The canonical form spells out every option, in the order of the option
 * table (action and replay_budget, last in it, only for a rule that
 * replays), and writes each quantity in the largest unit that holds it as
 * a whole number (rates and percentages, which have one unit, with the
 * decimals they need). It is what `flare rules check` prints, and parsing
 * it gives back an equal rule: the fuzzer checks exactly that.
 * Must never: print a value the parser would read differently.
 */
#include <stdio.h>
#include <string.h>

#include "core/duration.h"
#include "rules/rule_internal.h"

/* value / divisor with its remainder as decimals, trailing zeros dropped:
 * (1500, 1000, 3) -> "1.5". */
static void format_decimal(uint64_t value, uint64_t divisor, int digits, char *buffer, size_t size)
{
    uint64_t whole = value / divisor;
    uint64_t fraction = value % divisor;
    if (fraction == 0) {
        snprintf(buffer, size, "%llu", (unsigned long long)whole);
        return;
    }
    char decimals[24];
    snprintf(decimals, sizeof(decimals), "%0*llu", digits, (unsigned long long)fraction);
    size_t length = strlen(decimals);
    while (length > 0 && decimals[length - 1] == '0')
        decimals[--length] = '\0';
    snprintf(buffer, size, "%llu.%s", (unsigned long long)whole, decimals);
}

/* The largest of units[] (ordered small to large) that divides value. */
static void format_in_largest_unit(uint64_t value, const char *const *names, const uint64_t *scales,
                                   size_t count, const char *zero_unit, char *buffer, size_t size)
{
    if (value == 0) {
        snprintf(buffer, size, "0%s", zero_unit);
        return;
    }
    size_t chosen = 0;
    for (size_t i = 0; i < count; i++) {
        if (value % scales[i] == 0)
            chosen = i;
    }
    snprintf(buffer, size, "%llu%s", (unsigned long long)(value / scales[chosen]), names[chosen]);
}

/* Kept as the rules' name for it (rule_tables.c and rule_validate.c call it
 * a dozen times); the form is core's, which duration parsers read back. */
void rules_format_duration(uint64_t ns, char *buffer, size_t size)
{
    core_duration_format(ns, buffer, size);
}

int rules_format_quantity(rules_quantity quantity, char *buffer, size_t size)
{
    if (buffer == NULL || size == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    char text[64];
    uint64_t value = quantity.value;
    switch (quantity.kind) {
    case RULES_UNIT_RATE: {
        char number[40];
        format_decimal(value, 1000, 3, number, sizeof(number));
        snprintf(text, sizeof(text), "%s/s", number);
        break;
    }
    case RULES_UNIT_DURATION:
        rules_format_duration(value, text, sizeof(text));
        break;
    case RULES_UNIT_PERCENT: {
        char number[40];
        format_decimal(value, 100, 2, number, sizeof(number));
        snprintf(text, sizeof(text), "%s%%", number);
        break;
    }
    case RULES_UNIT_POWER: {
        static const char *const names[] = {"mW", "W"};
        static const uint64_t scales[] = {1, 1000};
        format_in_largest_unit(value, names, scales, 2, "W", text, sizeof(text));
        break;
    }
    case RULES_UNIT_CLOCK:
        /* Always MHz: it is what NVML and nvidia-smi report. */
        snprintf(text, sizeof(text), "%lluMHz", (unsigned long long)value);
        break;
    case RULES_UNIT_BYTES: {
        static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        static const uint64_t scales[] = {1, UINT64_C(1) << 10, UINT64_C(1) << 20,
                                          UINT64_C(1) << 30, UINT64_C(1) << 40};
        format_in_largest_unit(value, names, scales, 5, "B", text, sizeof(text));
        break;
    }
    default:
        buffer[0] = '\0';
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (strlen(text) >= size) {
        buffer[0] = '\0';
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    memcpy(buffer, text, strlen(text) + 1);
    return FLARE_OK;
}

void rules_format_metric(const rules_rule *rule, char *buffer, size_t size)
{
    if (rules_metric_is_gpu(rule->metric))
        snprintf(buffer, size, "gpu%u.%s", rule->device,
                 rules_gpu_metric_names[rule->metric - RULES_METRIC_GPU_UTILIZATION]);
    else if (rule->metric == RULES_METRIC_CUSTOM_RATE)
        snprintf(buffer, size, "custom.%.*s", FLARE_COUNTER_NAME_MAX, rule->counter);
    else
        snprintf(buffer, size, "%s", rules_metric_name(rule->metric));
}

/* Whether an option is part of the rule's canonical text: action and the
 * replay-only options appear only for a rule that replays, so that every
 * window rule keeps the text it had before actions existed. */
static int written_in_canonical(const rules_rule *rule, const rules_option_info *info)
{
    if (info->type == RULES_OPTION_TYPE_ENGINE)
        return rule->engine != RULES_ENGINE_PM;
    if (rule->action != RULES_ACTION_WINDOW)
        return 1;
    return info->type != RULES_OPTION_TYPE_ACTION && !info->replay_only;
}

int rules_format_canonical(const rules_rule *rule, char *buffer, size_t size)
{
    if (buffer == NULL || size == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    buffer[0] = '\0';
    if (rule == NULL || (unsigned)rule->metric >= RULES_METRIC_COUNT ||
        (unsigned)rule->comparison >= RULES_COMPARISON_COUNT ||
        (unsigned)rule->action > RULES_ACTION_RANGE || (unsigned)rule->engine > RULES_ENGINE_SASS)
        return FLARE_ERR_INVALID_ARGUMENT;
    char text[RULES_FORMAT_MAX + 64];
    size_t used = 0;
    char metric[FLARE_COUNTER_NAME_MAX + 16];
    char value[RULES_RANGE_NAME_MAX + 64];
    rules_format_metric(rule, metric, sizeof(metric));
    if (rules_format_quantity(rule->threshold, value, sizeof(value)) != FLARE_OK)
        return FLARE_ERR_INVALID_ARGUMENT;
    rules_append(text, sizeof(text), &used, "%s %s %s", metric,
                 rules_comparison_text(rule->comparison), value);
    for (int i = 0; i < RULES_OPTION_COUNT; i++) {
        const rules_option_info *info = rules_option_at((rules_option)i);
        uint64_t number = rules_option_get(rule, (rules_option)i);
        if (!written_in_canonical(rule, info))
            continue;
        switch (info->type) {
        case RULES_OPTION_TYPE_THRESHOLD:
            if (rules_format_quantity(rule->rearm, value, sizeof(value)) != FLARE_OK)
                return FLARE_ERR_INVALID_ARGUMENT;
            break;
        case RULES_OPTION_TYPE_DURATION:
            rules_format_duration(number, value, sizeof(value));
            break;
        case RULES_OPTION_TYPE_COUNT:
            snprintf(value, sizeof(value), "%llu", (unsigned long long)number);
            break;
        case RULES_OPTION_TYPE_ACTION:
            if (rule->action == RULES_ACTION_RANGE)
                snprintf(value, sizeof(value), "range %.*s", RULES_RANGE_NAME_MAX - 1,
                         rule->range_name);
            else
                snprintf(value, sizeof(value), "%s", rules_action_name(rule->action));
            break;
        case RULES_OPTION_TYPE_ENGINE:
            snprintf(value, sizeof(value), "%s", rules_engine_name(rule->engine));
            break;
        }
        rules_append(text, sizeof(text), &used, " %s %s", info->key, value);
    }
    if (used >= size || used >= RULES_FORMAT_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    memcpy(buffer, text, used + 1);
    return FLARE_OK;
}

int rules_rule_equal(const rules_rule *a, const rules_rule *b)
{
    return a->metric == b->metric && a->device == b->device &&
           strncmp(a->counter, b->counter, sizeof(a->counter)) == 0 &&
           a->comparison == b->comparison && a->threshold.kind == b->threshold.kind &&
           a->threshold.value == b->threshold.value && a->rearm.kind == b->rearm.kind &&
           a->rearm.value == b->rearm.value && a->sustained_ns == b->sustained_ns &&
           a->window_ns == b->window_ns && a->bucket_ns == b->bucket_ns &&
           a->stale_after_ns == b->stale_after_ns && a->cooldown_ns == b->cooldown_ns &&
           a->max_windows == b->max_windows && a->deep_ns == b->deep_ns &&
           a->deep_launches == b->deep_launches && a->action == b->action &&
           strncmp(a->range_name, b->range_name, sizeof(a->range_name)) == 0 &&
           a->replay_budget_ns == b->replay_budget_ns && a->engine == b->engine;
}
