/*
 * deepwin_auto.c: engine auto's arithmetic (deepwin_auto.h): the slowdown
 * estimate, the choice within the deep budget and the words that explain it,
 * the launch rate over about the last second, and the budget's text.
 *
 * Pure functions on the caller's numbers and buffers: nothing here may lock,
 * allocate, read a clock or the environment, or log, and nothing may pick an
 * engine whose cost was not measured.
 */
#include "deepwin/deepwin_auto.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

double deepwin_auto_slowdown(uint64_t cost_launch_ns, double cost_gpu, double launch_rate_per_s)
{
    return cost_gpu + (double)cost_launch_ns * launch_rate_per_s / 1e9;
}

double deepwin_auto_estimate(const backend_engine_ops *engine, double launch_rate_per_s)
{
    if (engine == NULL || engine->cost_source == NULL)
        return -1.0;
    return deepwin_auto_slowdown(engine->cost_launch_ns, engine->cost_gpu, launch_rate_per_s);
}

int deepwin_auto_fits_nominal(uint64_t cost_launch_ns, double cost_gpu, const char *budget_text)
{
    double budget = DEEPWIN_BUDGET_DEFAULT;
    char why[160];
    if (budget_text != NULL && budget_text[0] != '\0' &&
        deepwin_budget_parse(budget_text, &budget, why, sizeof(why)) != 0)
        return 0;
    return deepwin_auto_slowdown(cost_launch_ns, cost_gpu, DEEPWIN_AUTO_NOMINAL_RATE) <= budget;
}

void deepwin_auto_format_percent(double fraction, char *buffer, size_t size)
{
    double percent = fraction * 100.0;
    if (percent >= 99.5)
        snprintf(buffer, size, "%.0f", percent);
    else if (percent >= 0.01)
        snprintf(buffer, size, "%.2g", percent);
    else
        snprintf(buffer, size, "%.3f", percent > 0 ? percent : 0.0);
}

/* A deep budget as a percentage, as it was written ("5", "0.5", "12.5"). */
static void format_budget(double fraction, char *buffer, size_t size)
{
    snprintf(buffer, size, "%.4g", fraction * 100.0);
}

/* A count with thousands separators ("250,000"), rounded to a whole one. */
static void format_rate(double rate, char *buffer, size_t size)
{
    unsigned long long whole = rate > 0 ? (unsigned long long)(rate + 0.5) : 0;
    char digits[32];
    int length = snprintf(digits, sizeof(digits), "%llu", whole);
    size_t used = 0;
    for (int i = 0; i < length && used + 2 < size; i++) {
        if (i > 0 && (length - i) % 3 == 0)
            buffer[used++] = ',';
        buffer[used++] = digits[i];
    }
    if (size > 0)
        buffer[used < size ? used : size - 1] = '\0';
}

/* Appends a formatted text to buffer at *used, never past size (cut). */
static void append(char *buffer, size_t size, size_t *used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buffer, size_t size, size_t *used, const char *format, ...)
{
    if (*used + 1 >= size)
        return;
    va_list arguments;
    va_start(arguments, format);
    int written = vsnprintf(buffer + *used, size - *used, format, arguments);
    va_end(arguments);
    if (written > 0)
        *used = *used + (size_t)written < size ? *used + (size_t)written : size - 1;
}

/* Appends why candidates[0..stop) were not chosen: "; pc about 31% is over
 * the budget" after a choice (stop: the one chosen), "pc about 31%, pm about
 * 15%" after a refusal (stop: all of them). */
static void append_passed_over(const deepwin_auto_candidate *candidates, size_t stop, int refused,
                               double launch_rate_per_s, char *reason, size_t size, size_t *used)
{
    for (size_t i = 0; i < stop; i++) {
        const char *separator = !refused ? "; " : i > 0 ? ", " : "";
        double estimate = deepwin_auto_estimate(candidates[i].engine, launch_rate_per_s);
        char percent[32];
        deepwin_auto_format_percent(estimate, percent, sizeof(percent));
        if (candidates[i].engine == NULL)
            append(reason, size, used, "%s%s: none on this device", separator, candidates[i].kind);
        else if (candidates[i].unusable != NULL)
            append(reason, size, used, "%s%s: %s", separator, candidates[i].kind,
                   candidates[i].unusable);
        else if (estimate < 0)
            append(reason, size, used, "%s%s (%s): cost not measured", separator,
                   candidates[i].kind, candidates[i].engine->name);
        else
            append(reason, size, used, "%s%s about %s%%%s", separator, candidates[i].kind, percent,
                   refused ? "" : " is over the budget");
    }
}

void deepwin_auto_choose(const deepwin_auto_candidate *candidates, size_t count,
                         double launch_rate_per_s, double budget, deepwin_auto_choice *choice,
                         char *reason, size_t reason_size)
{
    memset(choice, 0, sizeof(*choice));
    choice->fallback_estimate = -1.0;
    int engines = 0;
    size_t chosen = count;
    for (size_t i = 0; i < count; i++) {
        double estimate = deepwin_auto_estimate(candidates[i].engine, launch_rate_per_s);
        int usable = candidates[i].unusable == NULL;
        int fits = usable && estimate >= 0 && budget > 0 && estimate <= budget;
        engines += candidates[i].engine != NULL;
        if (usable && estimate > budget && budget > 0)
            choice->over_budget = 1;
        if (i + 1 == count) {
            choice->fallback_estimate = estimate;
            choice->fallback_fits = fits;
            choice->fallback_unusable = candidates[i].unusable;
        }
        if (chosen == count && fits) {
            chosen = i;
            choice->engine = candidates[i].engine;
            choice->estimate = estimate;
        }
    }
    choice->refused = engines > 0 && chosen == count;
    choice->over_budget = choice->over_budget && choice->refused;
    if (reason == NULL || reason_size == 0)
        return;
    reason[0] = '\0';
    size_t used = 0;
    char rate[32], budget_text[32], percent[32];
    format_rate(launch_rate_per_s, rate, sizeof(rate));
    format_budget(budget, budget_text, sizeof(budget_text));
    if (engines == 0) {
        append(reason, reason_size, &used, "auto: no deep engine on this device");
    } else if (chosen < count) {
        deepwin_auto_format_percent(choice->estimate, percent, sizeof(percent));
        append(reason, reason_size, &used, "auto: %s, about %s%% at %s launches/s (budget %s%%)",
               candidates[chosen].kind, percent, rate, budget_text);
        append_passed_over(candidates, chosen, 0, launch_rate_per_s, reason, reason_size, &used);
    } else if (budget > 0) {
        append(reason, reason_size, &used,
               "auto: no engine fits the %s%% budget at %s launches/s: ", budget_text, rate);
        append_passed_over(candidates, count, 1, launch_rate_per_s, reason, reason_size, &used);
    } else {
        append(reason, reason_size, &used,
               "auto: no valid deep budget (FLARE_DEEP_BUDGET is malformed; the deep_windows "
               "capability says why)");
    }
}

int deepwin_budget_parse(const char *text, double *fraction, char *why, size_t why_size)
{
    if (why_size > 0)
        why[0] = '\0';
    if (text == NULL || text[0] == '\0') {
        snprintf(why, why_size, "a deep budget is a percentage, e.g. 5%%");
        return -1;
    }
    /* Read as an integer mantissa and a count of decimals, so that "12.5%"
     * is 125 / 10 exactly as far as a double goes, never a sum of tenths. */
    const char *p = text;
    uint64_t mantissa = 0;
    int digits = 0, decimals = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if (digits < 18)
            mantissa = mantissa * 10 + (uint64_t)(*p - '0');
    if (digits == 0 && *p == '.') {
        snprintf(why, why_size, "'%.40s' needs a digit before the decimal point: write 0%.40s",
                 text, text);
        return -1;
    }
    if (digits == 0) {
        snprintf(why, why_size, "'%.40s' is not a percentage: write a number and %%, e.g. 5%%",
                 text);
        return -1;
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, decimals++)
            if (digits + decimals < 18)
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        if (decimals == 0) {
            snprintf(why, why_size, "'%.40s' needs a digit after the decimal point", text);
            return -1;
        }
    }
    if (*p == '\0') {
        snprintf(why, why_size, "'%.40s' needs a percent sign: write %.40s%%", text, text);
        return -1;
    }
    if (*p != '%' || p[1] != '\0') {
        snprintf(why, why_size, "unexpected '%.20s' in '%.40s': write a number and %%, e.g. 5%%", p,
                 text);
        return -1;
    }
    if (digits + decimals > 18) {
        snprintf(why, why_size, "'%.40s' has more digits than a deep budget needs", text);
        return -1;
    }
    double scale = 1.0;
    for (int i = 0; i < decimals; i++)
        scale *= 10.0;
    double percent = (double)mantissa / scale;
    if (percent <= 0) {
        snprintf(why, why_size, "'%.40s' must be more than 0%%", text);
        return -1;
    }
    if (percent > 100) {
        snprintf(why, why_size, "'%.40s' is more than 100%%", text);
        return -1;
    }
    *fraction = percent / 100.0;
    return 0;
}

double deepwin_rate_note(deepwin_rate *rate, uint64_t now_ns, uint64_t launches)
{
    if (rate->count > 0) {
        uint32_t newest = rate->newest;
        if (now_ns < rate->ns[newest])
            return -1.0; /* read its clock before the newest point: nothing to add */
        if (launches < rate->launches[newest])
            rate->count = 0; /* another origin: start afresh */
    }
    if (rate->count == 0 || now_ns - rate->ns[rate->newest] >= DEEPWIN_RATE_STEP_NS) {
        uint32_t slot = rate->count == 0 ? 0 : (rate->newest + 1) % DEEPWIN_RATE_POINTS;
        rate->ns[slot] = now_ns;
        rate->launches[slot] = launches;
        rate->newest = slot;
        if (rate->count < DEEPWIN_RATE_POINTS)
            rate->count++;
    }
    /* The base: the newest point at least a span before now, else the oldest. */
    uint32_t oldest = (rate->newest + DEEPWIN_RATE_POINTS + 1 - rate->count) % DEEPWIN_RATE_POINTS;
    uint32_t base = oldest;
    for (uint32_t i = 0; i < rate->count; i++) {
        uint32_t slot = (rate->newest + DEEPWIN_RATE_POINTS - i) % DEEPWIN_RATE_POINTS;
        if (now_ns - rate->ns[slot] >= DEEPWIN_RATE_SPAN_NS) {
            base = slot;
            break;
        }
    }
    if (now_ns <= rate->ns[base])
        return 0;
    return (double)(launches - rate->launches[base]) * 1e9 / (double)(now_ns - rate->ns[base]);
}
