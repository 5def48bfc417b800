/*
 * rule_tables.c: the single source of units, unit kinds, metrics and options
 * for the rule parser, validator and formatter (rule_internal.h), and the
 * text helpers their messages share.
 *
 * docs/rules.md repeats these tables for users; a change here is a change
 * there. Must never: hold mutable state.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rules/rule_internal.h"

/* ---- units ---- */

/* Every unit a number may carry. Spelling is exact (case matters: "mW" is
 * a milliwatt, "MHz" a megahertz), so no spelling means two things. */
static const rules_unit units[] = {
    {"/s", RULES_UNIT_RATE, 1000},
    {"ns", RULES_UNIT_DURATION, 1},
    {"us", RULES_UNIT_DURATION, RULES_NS_PER_US},
    {"ms", RULES_UNIT_DURATION, RULES_NS_PER_MS},
    {"s", RULES_UNIT_DURATION, RULES_NS_PER_SECOND},
    {"min", RULES_UNIT_DURATION, RULES_NS_PER_MINUTE},
    {"h", RULES_UNIT_DURATION, RULES_NS_PER_HOUR},
    {"%", RULES_UNIT_PERCENT, 100},
    {"mW", RULES_UNIT_POWER, 1},
    {"W", RULES_UNIT_POWER, 1000},
    {"MHz", RULES_UNIT_CLOCK, 1},
    {"GHz", RULES_UNIT_CLOCK, 1000},
    {"B", RULES_UNIT_BYTES, 1},
    {"KiB", RULES_UNIT_BYTES, UINT64_C(1) << 10},
    {"MiB", RULES_UNIT_BYTES, UINT64_C(1) << 20},
    {"GiB", RULES_UNIT_BYTES, UINT64_C(1) << 30},
    {"TiB", RULES_UNIT_BYTES, UINT64_C(1) << 40},
};

const rules_unit *rules_unit_find(const char *text, size_t length)
{
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].name) == length && memcmp(units[i].name, text, length) == 0)
            return &units[i];
    }
    return NULL;
}

/* Threshold limits are generous bounds that catch a mistyped number, not
 * physical limits, except for percentages, which cannot exceed 100%. */
static const rules_kind_info kinds[RULES_UNIT_KIND_COUNT] = {
    [RULES_UNIT_RATE] = {"a rate", "500/s", "/s", NULL, UINT64_C(1000000000000) * 1000, 0},
    [RULES_UNIT_DURATION] = {"a duration", "5ms", "s", "ns, us, ms, s, min or h", RULES_NS_PER_HOUR,
                             0},
    [RULES_UNIT_PERCENT] = {"a percentage", "20%", "%", NULL, 10000, 1},
    [RULES_UNIT_POWER] = {"a power", "300W", "W", "mW or W", UINT64_C(10000000), 0},
    [RULES_UNIT_CLOCK] = {"a clock frequency", "1200MHz", "MHz", "MHz or GHz", 10000, 0},
    [RULES_UNIT_BYTES] = {"a size", "60GiB", "GiB", "B, KiB, MiB, GiB or TiB", UINT64_C(64) << 40,
                          0},
};

const rules_kind_info *rules_kind(rules_unit_kind kind)
{
    if ((unsigned)kind >= RULES_UNIT_KIND_COUNT)
        return NULL;
    return &kinds[kind];
}

/* ---- metrics ---- */

static const char *const metric_names[RULES_METRIC_COUNT] = {
    [RULES_METRIC_KERNEL_LAUNCH_RATE] = "kernel_launch_rate",
    [RULES_METRIC_KERNEL_DURATION_P50] = "kernel_duration_p50",
    [RULES_METRIC_KERNEL_DURATION_P90] = "kernel_duration_p90",
    [RULES_METRIC_KERNEL_DURATION_P99] = "kernel_duration_p99",
    [RULES_METRIC_GPU_UTILIZATION] = "gpu<N>.utilization",
    [RULES_METRIC_GPU_POWER] = "gpu<N>.power",
    [RULES_METRIC_GPU_SM_CLOCK] = "gpu<N>.sm_clock",
    [RULES_METRIC_GPU_MEMORY_USED] = "gpu<N>.memory_used",
    [RULES_METRIC_CUSTOM_RATE] = "custom.<counter>",
};

static const rules_unit_kind metric_units[RULES_METRIC_COUNT] = {
    [RULES_METRIC_KERNEL_LAUNCH_RATE] = RULES_UNIT_RATE,
    [RULES_METRIC_KERNEL_DURATION_P50] = RULES_UNIT_DURATION,
    [RULES_METRIC_KERNEL_DURATION_P90] = RULES_UNIT_DURATION,
    [RULES_METRIC_KERNEL_DURATION_P99] = RULES_UNIT_DURATION,
    [RULES_METRIC_GPU_UTILIZATION] = RULES_UNIT_PERCENT,
    [RULES_METRIC_GPU_POWER] = RULES_UNIT_POWER,
    [RULES_METRIC_GPU_SM_CLOCK] = RULES_UNIT_CLOCK,
    [RULES_METRIC_GPU_MEMORY_USED] = RULES_UNIT_BYTES,
    [RULES_METRIC_CUSTOM_RATE] = RULES_UNIT_RATE,
};

const char rules_metric_list[] =
    "kernel_launch_rate, kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, "
    "gpu<N>.utilization, gpu<N>.power, gpu<N>.sm_clock, gpu<N>.memory_used, custom.<counter>";

const char *const rules_gpu_metric_names[4] = {"utilization", "power", "sm_clock", "memory_used"};

const char *rules_metric_name(rules_metric metric)
{
    if ((unsigned)metric >= RULES_METRIC_COUNT)
        return "?";
    return metric_names[metric];
}

rules_unit_kind rules_metric_unit(rules_metric metric)
{
    if ((unsigned)metric >= RULES_METRIC_COUNT)
        return RULES_UNIT_KIND_COUNT;
    return metric_units[metric];
}

int rules_metric_is_gpu(rules_metric metric)
{
    return metric >= RULES_METRIC_GPU_UTILIZATION && metric <= RULES_METRIC_GPU_MEMORY_USED;
}

const char *rules_comparison_text(rules_comparison comparison)
{
    switch (comparison) {
    case RULES_LESS:
        return "<";
    case RULES_LESS_EQUAL:
        return "<=";
    case RULES_GREATER:
        return ">";
    case RULES_GREATER_EQUAL:
        return ">=";
    default:
        return "?";
    }
}

const char *rules_engine_name(rules_engine engine)
{
    switch (engine) {
    case RULES_ENGINE_PM:
        return "pm";
    case RULES_ENGINE_PC:
        return "pc";
    case RULES_ENGINE_AUTO:
        return "auto";
    case RULES_ENGINE_SASS:
        return "sass";
    default:
        return "?";
    }
}

const char *rules_action_name(rules_action action)
{
    switch (action) {
    case RULES_ACTION_WINDOW:
        return "window";
    case RULES_ACTION_REPLAY:
        return "replay";
    case RULES_ACTION_RANGE:
        return "range";
    default:
        return "?";
    }
}

/* ---- options ---- */

static const rules_option_info options[RULES_OPTION_COUNT] = {
    [RULES_OPTION_FOR] = {"for", RULES_OPTION_TYPE_DURATION, 0, RULES_NS_PER_HOUR, 0, "2s", 0},
    [RULES_OPTION_OVER] = {"over", RULES_OPTION_TYPE_DURATION, 10 * RULES_NS_PER_MS,
                           10 * RULES_NS_PER_MINUTE, RULES_NS_PER_SECOND, "1s", 0},
    [RULES_OPTION_BUCKET] = {"bucket", RULES_OPTION_TYPE_DURATION, 10 * RULES_NS_PER_MS,
                             10 * RULES_NS_PER_SECOND, 100 * RULES_NS_PER_MS, "100ms", 0},
    [RULES_OPTION_REARM] = {"rearm", RULES_OPTION_TYPE_THRESHOLD, 0, 0, 0, NULL, 0},
    [RULES_OPTION_STALE_AFTER] = {"stale_after", RULES_OPTION_TYPE_DURATION, 0,
                                  3 * RULES_NS_PER_HOUR, 0, "10s", 0},
    [RULES_OPTION_COOLDOWN] = {"cooldown", RULES_OPTION_TYPE_DURATION, 0, RULES_NS_PER_HOUR,
                               10 * RULES_NS_PER_SECOND, "30s", 0},
    [RULES_OPTION_MAX_WINDOWS] = {"max_windows", RULES_OPTION_TYPE_COUNT, 1, 64, 3, "5", 0},
    [RULES_OPTION_DEEP_FOR] = {"deep_for", RULES_OPTION_TYPE_DURATION, 10 * RULES_NS_PER_MS,
                               10 * RULES_NS_PER_MINUTE, 2 * RULES_NS_PER_SECOND, "2s", 0},
    [RULES_OPTION_DEEP_LAUNCHES] = {"deep_launches", RULES_OPTION_TYPE_COUNT, 1, 1000000000, 100000,
                                    "10000", 0},
    /* Written only when not pm, so a window rule keeps the text it had
     * before engines could be chosen. */
    [RULES_OPTION_ENGINE] = {"engine", RULES_OPTION_TYPE_ENGINE, 0, 0, RULES_ENGINE_PM, "pc", 0},
    /* Last, so that a window rule's canonical text, which leaves both out,
     * is the one it had before actions existed. */
    [RULES_OPTION_ACTION] = {"action", RULES_OPTION_TYPE_ACTION, 0, 0, RULES_ACTION_WINDOW,
                             "replay", 0},
    [RULES_OPTION_REPLAY_BUDGET] = {"replay_budget", RULES_OPTION_TYPE_DURATION,
                                    10 * RULES_NS_PER_MS, RULES_NS_PER_HOUR,
                                    5 * RULES_NS_PER_SECOND, "30s", 1},
};

const char rules_option_list[] = "for, over, bucket, rearm, stale_after, cooldown, max_windows, "
                                 "deep_for, deep_launches, engine, action, replay_budget";

int rules_option_is_number(const rules_option_info *info)
{
    return info != NULL &&
           (info->type == RULES_OPTION_TYPE_DURATION || info->type == RULES_OPTION_TYPE_COUNT);
}

const rules_option_info *rules_option_at(rules_option option)
{
    if ((unsigned)option >= RULES_OPTION_COUNT)
        return NULL;
    return &options[option];
}

rules_option rules_option_find(const char *text, size_t length)
{
    for (int i = 0; i < RULES_OPTION_COUNT; i++) {
        if (strlen(options[i].key) == length && memcmp(options[i].key, text, length) == 0)
            return (rules_option)i;
    }
    return RULES_OPTION_COUNT;
}

uint64_t rules_option_get(const rules_rule *rule, rules_option option)
{
    switch (option) {
    case RULES_OPTION_FOR:
        return rule->sustained_ns;
    case RULES_OPTION_OVER:
        return rule->window_ns;
    case RULES_OPTION_BUCKET:
        return rule->bucket_ns;
    case RULES_OPTION_STALE_AFTER:
        return rule->stale_after_ns;
    case RULES_OPTION_COOLDOWN:
        return rule->cooldown_ns;
    case RULES_OPTION_MAX_WINDOWS:
        return rule->max_windows;
    case RULES_OPTION_DEEP_FOR:
        return rule->deep_ns;
    case RULES_OPTION_DEEP_LAUNCHES:
        return rule->deep_launches;
    case RULES_OPTION_REPLAY_BUDGET:
        return rule->replay_budget_ns;
    default:
        return 0;
    }
}

/* Counts are stored in 32 bits: callers range-check before setting, so the
 * narrowing below never changes a value (max_windows 4294967297 is refused
 * as out of range, never stored as 1). */
void rules_option_set(rules_rule *rule, rules_option option, uint64_t value)
{
    switch (option) {
    case RULES_OPTION_FOR:
        rule->sustained_ns = value;
        break;
    case RULES_OPTION_OVER:
        rule->window_ns = value;
        break;
    case RULES_OPTION_BUCKET:
        rule->bucket_ns = value;
        break;
    case RULES_OPTION_STALE_AFTER:
        rule->stale_after_ns = value;
        break;
    case RULES_OPTION_COOLDOWN:
        rule->cooldown_ns = value;
        break;
    case RULES_OPTION_MAX_WINDOWS:
        rule->max_windows = value > UINT32_MAX ? UINT32_MAX : (uint32_t)value;
        break;
    case RULES_OPTION_DEEP_FOR:
        rule->deep_ns = value;
        break;
    case RULES_OPTION_DEEP_LAUNCHES:
        rule->deep_launches = value > UINT32_MAX ? UINT32_MAX : (uint32_t)value;
        break;
    case RULES_OPTION_REPLAY_BUDGET:
        rule->replay_budget_ns = value;
        break;
    default:
        break;
    }
}

void rules_describe_option_range(rules_option option, char *buffer, size_t size)
{
    const rules_option_info *info = rules_option_at(option);
    size_t used = 0;
    if (size > 0)
        buffer[0] = '\0';
    if (!rules_option_is_number(info))
        return;
    if (info->type == RULES_OPTION_TYPE_COUNT) {
        rules_append(buffer, size, &used, "%s takes %llu to %llu", info->key,
                     (unsigned long long)info->minimum, (unsigned long long)info->maximum);
        return;
    }
    char low[32], high[32];
    rules_format_duration(info->minimum, low, sizeof(low));
    rules_format_duration(info->maximum, high, sizeof(high));
    rules_append(buffer, size, &used, "%s takes %s to %s", info->key, low, high);
}

/* ---- text helpers ---- */

void rules_append(char *buffer, size_t size, size_t *used, const char *format, ...)
{
    if (buffer == NULL || size == 0 || *used >= size)
        return;
    va_list arguments;
    va_start(arguments, format);
    int written = vsnprintf(buffer + *used, size - *used, format, arguments);
    va_end(arguments);
    if (written < 0)
        return;
    *used += (size_t)written;
    if (*used >= size)
        *used = size - 1;
}

void rules_quote(const char *text, size_t length, char *buffer, size_t size)
{
    enum { SHOWN = 48 };
    size_t used = 0;
    if (size == 0)
        return;
    buffer[0] = '\0';
    for (size_t i = 0; i < length && i < SHOWN; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c < 0x7f)
            rules_append(buffer, size, &used, "%c", c);
        else
            rules_append(buffer, size, &used, "\\x%02x", c);
    }
    if (length > SHOWN)
        rules_append(buffer, size, &used, "...");
}

int rules_is_counter_character(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}
