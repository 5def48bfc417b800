/*
 * rule_validate.c: checks a rule as a whole (rules_validate in rule.h).
 *
 * Fields are checked against their ranges first, then against each other,
 * because a rule can be wrong without any one field being wrong: a
 * stale_after shorter than the evidence it must wait for, a rearm value the
 * metric can never reach, a window that is not a whole number of buckets.
 * Such a rule would look healthy and never fire, or fire forever; it is
 * refused with the arithmetic spelled out instead.
 * Must never: accept a rule the evaluator could not run as written.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rules/rule_internal.h"

int rules_check_option_range(rules_option option, uint64_t value, char *error, size_t size)
{
    const rules_option_info *info = rules_option_at(option);
    if (!rules_option_is_number(info))
        return FLARE_OK;
    if (value >= info->minimum && value <= info->maximum)
        return FLARE_OK;
    char shown[32], range[96];
    if (info->type == RULES_OPTION_TYPE_DURATION)
        rules_format_duration(value, shown, sizeof(shown));
    else
        snprintf(shown, sizeof(shown), "%llu", (unsigned long long)value);
    rules_describe_option_range(option, range, sizeof(range));
    size_t used = 0;
    rules_append(error, size, &used, "%s %s is out of range: %s", info->key, shown, range);
    return FLARE_ERR_INVALID_ARGUMENT;
}

void rules_describe_quantity_range(const char *metric_text, rules_unit_kind kind, char *buffer,
                                   size_t size)
{
    const rules_kind_info *info = rules_kind(kind);
    char low[64] = "?", high[64] = "?";
    if (info != NULL) {
        rules_format_quantity((rules_quantity){kind, 0}, low, sizeof(low));
        rules_format_quantity((rules_quantity){kind, info->maximum}, high, sizeof(high));
    }
    snprintf(buffer, size, "%s takes %s to %s", metric_text, low, high);
}

int rules_check_quantity_range(const char *metric_text, rules_quantity quantity, const char *role,
                               char *error, size_t size)
{
    const rules_kind_info *kind = rules_kind(quantity.kind);
    if (kind == NULL || quantity.value <= kind->maximum)
        return FLARE_OK;
    char shown[64], range[256];
    rules_format_quantity(quantity, shown, sizeof(shown));
    rules_describe_quantity_range(metric_text, quantity.kind, range, sizeof(range));
    size_t used = 0;
    rules_append(error, size, &used, "%s%s%s is out of range: %s", role != NULL ? role : "",
                 role != NULL ? " " : "", shown, range);
    return FLARE_ERR_INVALID_ARGUMENT;
}

static int refuse(char *error, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *error, size_t size, const char *format, ...)
{
    if (error != NULL && size > 0) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error, size, format, arguments);
        va_end(arguments);
    }
    return FLARE_ERR_INVALID_ARGUMENT;
}

static int check_metric(const rules_rule *rule, const char *metric_text, char *error, size_t size)
{
    if ((unsigned)rule->metric >= RULES_METRIC_COUNT)
        return refuse(error, size, "unknown metric number %d; known metrics: %s", (int)rule->metric,
                      rules_metric_list);
    if (rules_metric_is_gpu(rule->metric)) {
        if (rule->device >= RULES_DEVICE_COUNT)
            return refuse(error, size, "device gpu%u is out of range: devices are gpu0 to gpu%d",
                          rule->device, RULES_DEVICE_COUNT - 1);
    } else if (rule->device != 0) {
        return refuse(error, size, "device %u is given for %s, which is not per device",
                      rule->device, metric_text);
    }
    size_t length = strnlen(rule->counter, sizeof(rule->counter));
    if (rule->metric != RULES_METRIC_CUSTOM_RATE) {
        if (length != 0)
            return refuse(error, size, "a counter name is given for %s, which watches no counter",
                          metric_text);
        return FLARE_OK;
    }
    if (length == 0)
        return refuse(error, size, "custom.<counter> needs a counter name, e.g. custom.tokens");
    if (length > FLARE_COUNTER_NAME_MAX)
        return refuse(error, size, "the counter name is not terminated within %d characters",
                      FLARE_COUNTER_NAME_MAX);
    for (size_t i = 0; i < length; i++) {
        if (!rules_is_counter_character((unsigned char)rule->counter[i]))
            return refuse(error, size,
                          "byte 0x%02x at offset %zu of the counter name is not allowed: names "
                          "are 1-%d characters of A-Z a-z 0-9 . _ -",
                          (unsigned)(unsigned char)rule->counter[i], i, FLARE_COUNTER_NAME_MAX);
    }
    return FLARE_OK;
}

/* A comparison against 0 or against a natural maximum (100%) that no
 * reading can satisfy, or that every reading satisfies, is refused: the
 * first never fires and the second fires on the first reading, whatever
 * the program does. */
static int check_comparison_can_change(const rules_rule *rule, const char *metric_text, char *error,
                                       size_t size)
{
    const rules_kind_info *kind = rules_kind(rule->threshold.kind);
    char shown[64], condition[256];
    rules_format_quantity(rule->threshold, shown, sizeof(shown));
    snprintf(condition, sizeof(condition), "%s %s %s", metric_text,
             rules_comparison_text(rule->comparison), shown);
    int at_zero = rule->threshold.value == 0;
    int at_top = kind->maximum_is_natural && rule->threshold.value == kind->maximum;
    if (at_zero && rule->comparison == RULES_LESS)
        return refuse(error, size, "%s can never hold: %s is never below %s", condition,
                      metric_text, shown);
    if (at_zero && rule->comparison == RULES_GREATER_EQUAL)
        return refuse(error, size, "%s always holds: %s is never below %s", condition, metric_text,
                      shown);
    if (at_top && rule->comparison == RULES_GREATER)
        return refuse(error, size, "%s can never hold: %s is never above %s", condition,
                      metric_text, shown);
    if (at_top && rule->comparison == RULES_LESS_EQUAL)
        return refuse(error, size, "%s always holds: %s is never above %s", condition, metric_text,
                      shown);
    return FLARE_OK;
}

/*
 * After a window the rule rearms once a reading fails the comparison against
 * rearm instead of threshold: for "< T" a reading >= R, for "<= T" one > R,
 * for "> T" one <= R, for ">= T" one < R. So R must lie on the far side of T
 * (R == T rearms as soon as the comparison stops holding), and the rearm
 * reading must be one the metric can produce.
 */
static int check_rearm(const rules_rule *rule, const char *metric_text, char *error, size_t size)
{
    const rules_kind_info *kind = rules_kind(rule->threshold.kind);
    if (rule->rearm.kind != rule->threshold.kind) {
        const rules_kind_info *rearm_kind = rules_kind(rule->rearm.kind);
        return refuse(error, size, "rearm is %s, but the threshold of %s is %s, e.g. %s",
                      rearm_kind != NULL ? rearm_kind->noun : "of an unknown kind", metric_text,
                      kind->noun, kind->example);
    }
    int status = rules_check_quantity_range(metric_text, rule->rearm, "rearm", error, size);
    if (status != FLARE_OK)
        return status;
    char rearm[64], threshold[64], condition[256];
    rules_format_quantity(rule->rearm, rearm, sizeof(rearm));
    rules_format_quantity(rule->threshold, threshold, sizeof(threshold));
    snprintf(condition, sizeof(condition), "%s %s %s", metric_text,
             rules_comparison_text(rule->comparison), threshold);
    int below = rule->comparison == RULES_LESS || rule->comparison == RULES_LESS_EQUAL;
    static const char *const rearm_when[RULES_COMPARISON_COUNT] = {
        [RULES_LESS] = "at least",
        [RULES_LESS_EQUAL] = "above",
        [RULES_GREATER] = "at most",
        [RULES_GREATER_EQUAL] = "below",
    };
    const char *when = rearm_when[rule->comparison];
    if (below ? rule->rearm.value < rule->threshold.value
              : rule->rearm.value > rule->threshold.value)
        return refuse(error, size,
                      "rearm %s is on the wrong side of the threshold: %s rearms once a reading "
                      "is %s the rearm value, so rearm must be %s %s (equal: rearm as soon as "
                      "the comparison stops holding)",
                      rearm, condition, when, below ? "at least" : "at most", threshold);
    if (rule->comparison == RULES_LESS_EQUAL && kind->maximum_is_natural &&
        rule->rearm.value == kind->maximum)
        return refuse(error, size,
                      "rearm %s can never be reached: %s rearms once a reading is above %s, and "
                      "%s is never above %s",
                      rearm, condition, rearm, metric_text, rearm);
    if (rule->comparison == RULES_GREATER_EQUAL && rule->rearm.value == 0)
        return refuse(error, size,
                      "rearm %s can never be reached: %s rearms once a reading is below %s, and "
                      "%s is never below %s",
                      rearm, condition, rearm, metric_text, rearm);
    return FLARE_OK;
}

/*
 * The action and what goes with it, so that the canonical form, which writes
 * range_name and the replay-only options only for a rule that replays, says
 * everything the rule holds: a range rule's name is one word the parser would
 * read back as the name (not an option's key), any other rule has none, and a
 * window rule holds the replay-only options' defaults.
 */
static int check_action(const rules_rule *rule, char *error, size_t size)
{
    if ((unsigned)rule->action > RULES_ACTION_RANGE)
        return refuse(error, size, "unknown action number %d; use window, replay or range NAME",
                      (int)rule->action);
    size_t length = strnlen(rule->range_name, sizeof(rule->range_name));
    if (rule->action != RULES_ACTION_RANGE) {
        if (length != 0)
            return refuse(error, size, "a range name is given, but this rule's action is %s",
                          rules_action_name(rule->action));
    } else if (length == 0) {
        return refuse(error, size, "'action range' needs the name of a scope or NVTX range");
    } else if (length == sizeof(rule->range_name)) {
        return refuse(error, size, "the range name is not terminated within %d bytes",
                      RULES_RANGE_NAME_MAX - 1);
    } else if (rules_option_find(rule->range_name, length) != RULES_OPTION_COUNT) {
        return refuse(error, size,
                      "range name '%s' is an option's key: the parser would read it as the "
                      "option, not as the name",
                      rule->range_name); /* a key: printable ASCII */
    }
    for (size_t i = 0; i < length; i++) {
        char c = rule->range_name[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == ';' ||
            c == '<' || c == '>' || c == '=' || c == '!')
            return refuse(error, size,
                          "byte 0x%02x at offset %zu of the range name is not allowed: a name is "
                          "one word, without blanks, ';' or < > = !",
                          (unsigned)(unsigned char)c, i);
    }
    if ((unsigned)rule->engine > RULES_ENGINE_SASS)
        return refuse(error, size, "unknown engine number %d; use pm, pc, sass or auto",
                      (int)rule->engine);
    if (rule->action != RULES_ACTION_WINDOW) {
        if (rule->engine != RULES_ENGINE_PM)
            return refuse(error, size,
                          "engine applies to action window; a replay's counters come from the "
                          "range profiler");
        return FLARE_OK;
    }
    for (int i = 0; i < RULES_OPTION_COUNT; i++) {
        const rules_option_info *info = rules_option_at((rules_option)i);
        if (info->replay_only && rules_option_get(rule, (rules_option)i) != info->fallback)
            return refuse(error, size,
                          "%s applies to action replay or range; this rule's action is window",
                          info->key);
    }
    return FLARE_OK;
}

/* A reading covers whole buckets; a span that is not a whole number of
 * them would be silently rounded by the evaluator, so it is refused with
 * the two nearest spans that are. */
static int check_whole_buckets(const char *key, uint64_t span, uint64_t bucket, char *error,
                               size_t size)
{
    if (span % bucket == 0)
        return FLARE_OK;
    char shown[32], width[32], lower[32], upper[32];
    rules_format_duration(span, shown, sizeof(shown));
    rules_format_duration(bucket, width, sizeof(width));
    uint64_t whole = span / bucket;
    rules_format_duration((whole + 1) * bucket, upper, sizeof(upper));
    if (whole == 0)
        return refuse(error, size,
                      "%s %s is shorter than one bucket of %s: write %s %s, or a narrower "
                      "bucket",
                      key, shown, width, key, upper);
    rules_format_duration(whole * bucket, lower, sizeof(lower));
    return refuse(error, size,
                  "%s %s is not a whole number of buckets of %s: write %s %s or %s %s, or "
                  "change bucket",
                  key, shown, width, key, lower, key, upper);
}

int rules_validate(const rules_rule *rule, char *error, size_t error_size)
{
    if (error != NULL && error_size > 0)
        error[0] = '\0';
    if (rule == NULL)
        return refuse(error, error_size, "no rule");
    char metric_text[FLARE_COUNTER_NAME_MAX + 16];
    if ((unsigned)rule->metric < RULES_METRIC_COUNT)
        rules_format_metric(rule, metric_text, sizeof(metric_text));
    else
        snprintf(metric_text, sizeof(metric_text), "?");
    int status = check_metric(rule, metric_text, error, error_size);
    if (status != FLARE_OK)
        return status;
    if ((unsigned)rule->comparison >= RULES_COMPARISON_COUNT)
        return refuse(error, error_size,
                      "unknown comparison number %d; use <, <=, > or >=", (int)rule->comparison);

    const rules_kind_info *kind = rules_kind(rules_metric_unit(rule->metric));
    if (rule->threshold.kind != rules_metric_unit(rule->metric)) {
        const rules_kind_info *given = rules_kind(rule->threshold.kind);
        return refuse(error, error_size, "the threshold is %s, but %s is compared with %s, e.g. %s",
                      given != NULL ? given->noun : "of an unknown kind", metric_text, kind->noun,
                      kind->example);
    }
    status =
        rules_check_quantity_range(metric_text, rule->threshold, "threshold", error, error_size);
    if (status == FLARE_OK)
        status = check_comparison_can_change(rule, metric_text, error, error_size);
    if (status == FLARE_OK)
        status = check_rearm(rule, metric_text, error, error_size);
    if (status == FLARE_OK)
        status = check_action(rule, error, error_size);
    for (int i = 0; i < RULES_OPTION_COUNT && status == FLARE_OK; i++)
        status = rules_check_option_range((rules_option)i, rules_option_get(rule, (rules_option)i),
                                          error, error_size);
    if (status != FLARE_OK)
        return status;

    status = check_whole_buckets("over", rule->window_ns, rule->bucket_ns, error, error_size);
    if (status != FLARE_OK)
        return status;
    uint64_t buckets = rule->window_ns / rule->bucket_ns;
    if (buckets > RULES_BUCKETS_MAX) {
        char window[32], bucket[32];
        rules_format_duration(rule->window_ns, window, sizeof(window));
        rules_format_duration(rule->bucket_ns, bucket, sizeof(bucket));
        return refuse(error, error_size,
                      "over %s is %llu buckets of %s, more than %d: use a wider bucket", window,
                      (unsigned long long)buckets, bucket, RULES_BUCKETS_MAX);
    }
    status = check_whole_buckets("for", rule->sustained_ns, rule->bucket_ns, error, error_size);
    if (status != FLARE_OK)
        return status;

    /* Every field is range-checked above, so the sum cannot overflow (it is
     * at most 10min + 1h + 10s). */
    uint64_t evidence = rule->window_ns + rule->sustained_ns + rule->bucket_ns;
    if (rule->stale_after_ns <= evidence) {
        char stale[32], window[32], sustained[32], bucket[32], sum[32];
        rules_format_duration(rule->stale_after_ns, stale, sizeof(stale));
        rules_format_duration(rule->window_ns, window, sizeof(window));
        rules_format_duration(rule->sustained_ns, sustained, sizeof(sustained));
        rules_format_duration(rule->bucket_ns, bucket, sizeof(bucket));
        rules_format_duration(evidence, sum, sizeof(sum));
        return refuse(error, error_size,
                      "stale_after %s is too short: it must be longer than over + for + bucket "
                      "= %s + %s + %s = %s, or the rule would go stale before it could gather "
                      "the evidence to fire",
                      stale, window, sustained, bucket, sum);
    }
    return FLARE_OK;
}
