/*
 * rule_parse.c: rule text to rules_rule (rules_parse), and ';'-separated
 * lists of rules (rules_parse_list). The grammar is in docs/rules.md:
 *
 *     rule   = metric comparison quantity { option value }
 *     action = "window" | "replay" | "range" name       (the value of `action`)
 *
 * Text is split into words, comparison operators and ';'. Every refusal
 * names the offending token and its 1-based byte column, and says what
 * would have been accepted; a rule that parses is then checked as a whole
 * (rule_validate.c) before it is handed back.
 *
 * Numbers are decimal, with an optional fraction, and converted exactly into
 * the quantity's integer base unit with digit arithmetic (no floating point,
 * so no NaN, infinity, rounding or locale): a value finer than the base unit
 * or too large for 64 bits is refused, never rounded or clamped. Durations
 * are converted by core_duration_scan (core/duration.h), the parser every
 * other duration in flare goes through; this file keeps the checks that need
 * the rule around the token (the next token, the expected kind, the range).
 * Must never: read past the text's end or its RULES_TEXT_MAX bound; write
 * past the error buffer; leave *out half-filled on a refusal.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/duration.h"
#include "rules/rule_internal.h"

typedef enum token_kind {
    TOKEN_END,
    TOKEN_WORD,      /* a run of anything but blanks, operator characters and ';' */
    TOKEN_OPERATOR,  /* a run of < > = ! */
    TOKEN_SEMICOLON, /* ';', which separates rules in a list */
} token_kind;

typedef struct token {
    token_kind kind;
    size_t start; /* byte offset in the text; the text's length at the end */
    size_t length;
} token;

typedef struct parser {
    const char *text;
    size_t length;
    size_t position; /* the next byte to scan */
    char *error;
    size_t error_size;
} parser;

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_operator_character(char c)
{
    return c == '<' || c == '>' || c == '=' || c == '!';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static token next_token(parser *p)
{
    while (p->position < p->length && is_blank(p->text[p->position]))
        p->position++;
    token t = {TOKEN_END, p->position, 0};
    if (p->position >= p->length)
        return t;
    const char *text = p->text;
    size_t end = p->position;
    if (text[end] == ';') {
        t.kind = TOKEN_SEMICOLON;
        end++;
    } else if (is_operator_character(text[end])) {
        t.kind = TOKEN_OPERATOR;
        while (end < p->length && is_operator_character(text[end]))
            end++;
    } else {
        t.kind = TOKEN_WORD;
        while (end < p->length && !is_blank(text[end]) && !is_operator_character(text[end]) &&
               text[end] != ';')
            end++;
    }
    t.length = end - p->position;
    p->position = end;
    return t;
}

static token peek_token(parser *p)
{
    size_t saved = p->position;
    token t = next_token(p);
    p->position = saved;
    return t;
}

static int token_is(const parser *p, token t, const char *word)
{
    return t.length == strlen(word) && memcmp(p->text + t.start, word, t.length) == 0;
}

/* Writes "at column N: MESSAGE" (N is 1-based) and returns the refusal. */
static int fail(parser *p, size_t offset, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(parser *p, size_t offset, const char *format, ...)
{
    if (p->error == NULL || p->error_size == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    int written = snprintf(p->error, p->error_size, "at column %zu: ", offset + 1);
    if (written > 0 && (size_t)written < p->error_size) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(p->error + written, p->error_size - (size_t)written, format, arguments);
        va_end(arguments);
    }
    return FLARE_ERR_INVALID_ARGUMENT;
}

static int refuse(char *error, size_t size, const char *message)
{
    if (error != NULL && size > 0)
        snprintf(error, size, "%s", message);
    return FLARE_ERR_INVALID_ARGUMENT;
}

/* The token as a printable, bounded string for a message. */
static void quote_token(const parser *p, token t, char *buffer, size_t size)
{
    rules_quote(p->text + t.start, t.length, buffer, size);
}

static int fail_semicolon(parser *p, token t)
{
    return fail(p, t.start, "';' separates rules in a list; one rule cannot contain it");
}

/* ---- numbers ---- */

typedef enum decimal_status {
    DECIMAL_OK,
    DECIMAL_TOO_LARGE, /* does not fit in 64 bits of the base unit */
    DECIMAL_NOT_EXACT, /* finer than one base unit */
} decimal_status;

/*
 * whole.fraction (decimal digits) times scale, exactly, as a uint64. The
 * number is held as one decimal digit per byte and multiplied digit by
 * digit, so any length of input is handled without overflow: a fraction
 * is exact only if the product's last fraction_length digits are zero, and
 * the digits above them must fit in 64 bits.
 */
static decimal_status scale_decimal(const char *whole, size_t whole_length, const char *fraction,
                                    size_t fraction_length, uint64_t scale, uint64_t *out)
{
    while (whole_length > 0 && whole[0] == '0') {
        whole++;
        whole_length--;
    }
    while (fraction_length > 0 && fraction[fraction_length - 1] == '0')
        fraction_length--;
    /* scale >= 1, so 21 significant digits (>= 10^20) can never fit. */
    if (whole_length > 20)
        return DECIMAL_TOO_LARGE;
    /* A fraction without trailing zeros that is odd, or not a multiple of 5,
     * needs 2^n or 5^n to divide scale to become whole: a 64-bit scale
     * covers at most 63 digits. */
    if (fraction_length > 63)
        return DECIMAL_NOT_EXACT;
    /* Least significant digit first; 20 digits of headroom for the
     * product with a scale of at most 10^15. */
    unsigned char digits[20 + 63 + 20];
    size_t count = 0;
    for (size_t i = fraction_length; i-- > 0;)
        digits[count++] = (unsigned char)(fraction[i] - '0');
    for (size_t i = whole_length; i-- > 0;)
        digits[count++] = (unsigned char)(whole[i] - '0');
    uint64_t carry = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t product = digits[i] * scale + carry;
        digits[i] = (unsigned char)(product % 10);
        carry = product / 10;
    }
    while (carry != 0 && count < sizeof(digits)) {
        digits[count++] = (unsigned char)(carry % 10);
        carry /= 10;
    }
    if (carry != 0) /* cannot happen with the bounds above; refuse rather than lose digits */
        return DECIMAL_TOO_LARGE;
    for (size_t i = 0; i < fraction_length; i++) {
        if (digits[i] != 0)
            return DECIMAL_NOT_EXACT;
    }
    uint64_t value = 0;
    for (size_t i = count; i-- > fraction_length;) {
        if (value > (UINT64_MAX - digits[i]) / 10)
            return DECIMAL_TOO_LARGE;
        value = value * 10 + digits[i];
    }
    *out = value;
    return DECIMAL_OK;
}

/* Whether the word starts like a spelling of NaN or infinity. */
static int is_not_a_number_word(const char *text, size_t length)
{
    static const char *const words[] = {"nan", "inf"};
    for (size_t w = 0; w < 2; w++) {
        if (length < 3)
            continue;
        size_t i = 0;
        for (; i < 3; i++) {
            char c = text[i];
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            if (c != words[w][i])
                break;
        }
        if (i == 3)
            return 1;
    }
    return 0;
}

/* Refusals every number shares: a sign, NaN or infinity, a word. range
 * says what the place takes ("for takes 0s to 1h"). */
static int check_number_start(parser *p, token t, const char *noun, const char *example,
                              const char *range)
{
    const char *s = p->text + t.start;
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    if (t.kind == TOKEN_SEMICOLON)
        return fail_semicolon(p, t);
    /* Callers report the end of the text themselves, with a better message. */
    if (t.kind != TOKEN_WORD)
        return fail(p, t.start, "expected %s such as %s, found '%s'", noun, example, shown);
    if (s[0] == '-')
        return fail(p, t.start, "'%s' is negative: %s", shown, range);
    if (s[0] == '+')
        return fail(p, t.start, "'%s': write the number without a sign", shown);
    if (is_not_a_number_word(s, t.length))
        return fail(p, t.start, "'%s' is not a number: expected %s such as %s", shown, noun,
                    example);
    if (s[0] == '.' && t.length > 1 && is_digit(s[1]))
        return fail(p, t.start, "'%s' needs a digit before the decimal point: write 0%s", shown,
                    shown);
    if (!is_digit(s[0]))
        return fail(p, t.start, "expected %s such as %s, found '%s'", noun, example, shown);
    return FLARE_OK;
}

/* What a place in the rule takes, for the messages about its value. */
typedef struct expectation {
    rules_unit_kind kind;
    const char *wants;   /* "kernel_launch_rate is compared with a rate" */
    const char *example; /* "500/s" */
    const char *range;   /* "kernel_launch_rate takes 0/s to 1000000000000/s" */
} expectation;

/* Parses a quantity of the expected kind from token t. */
static int parse_quantity(parser *p, token t, const expectation *expected, rules_quantity *out)
{
    const rules_kind_info *kind = rules_kind(expected->kind);
    int status = check_number_start(p, t, kind->noun, expected->example, expected->range);
    if (status != FLARE_OK)
        return status;
    const char *s = p->text + t.start;
    size_t n = t.length;
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    size_t i = 0;
    while (i < n && is_digit(s[i]))
        i++;
    size_t whole_length = i;
    const char *fraction = s + i;
    size_t fraction_length = 0;
    if (i < n && s[i] == '.') {
        i++;
        fraction = s + i;
        while (i < n && is_digit(s[i]))
            i++;
        fraction_length = (size_t)(s + i - fraction);
        if (fraction_length == 0)
            return fail(p, t.start, "'%s' needs a digit after the decimal point", shown);
    }
    const char *unit_text = s + i;
    size_t unit_length = n - i;
    char number[256];
    rules_quote(s, i, number, sizeof(number));
    if (unit_length == 0) {
        token after = peek_token(p);
        if (after.kind == TOKEN_WORD && rules_unit_find(p->text + after.start, after.length)) {
            char unit[64];
            quote_token(p, after, unit, sizeof(unit));
            return fail(p, t.start,
                        "'%s' needs its unit right after it, without a space: write %s%s", shown,
                        number, unit);
        }
        if (kind->unit_list != NULL)
            return fail(p, t.start, "'%s' needs a unit: write %s%s (%s is written in %s)", shown,
                        number, kind->hint_unit, kind->noun, kind->unit_list);
        return fail(p, t.start, "'%s' needs a unit: write %s%s", shown, number, kind->hint_unit);
    }
    if ((unit_text[0] == 'e' || unit_text[0] == 'E') && unit_length > 1 &&
        (is_digit(unit_text[1]) || unit_text[1] == '+' || unit_text[1] == '-'))
        return fail(p, t.start, "'%s': exponents are not accepted: write the number in full",
                    shown);
    const rules_unit *unit = rules_unit_find(unit_text, unit_length);
    if (unit == NULL) {
        char unit_shown[256];
        rules_quote(unit_text, unit_length, unit_shown, sizeof(unit_shown));
        return fail(p, t.start, "unknown unit '%s' in '%s': %s is written in %s", unit_shown, shown,
                    kind->noun, kind->unit_list != NULL ? kind->unit_list : kind->hint_unit);
    }
    if (unit->kind != expected->kind)
        return fail(p, t.start, "'%s' is %s, but %s, e.g. %s", shown, rules_kind(unit->kind)->noun,
                    expected->wants, expected->example);
    uint64_t value = 0;
    decimal_status converted = DECIMAL_OK;
    if (expected->kind == RULES_UNIT_DURATION) {
        /* Durations through the one duration parser, which every other
         * place that reads one (FLARE_DEEP_*, replay timeouts) uses too. */
        char detail[RULES_ERROR_MAX];
        core_duration_fault fault = core_duration_scan(s, n, &value, detail, sizeof(detail));
        /* The checks above refuse every token the parser would call
         * malformed; should the two ever drift apart, the parser's reason. */
        if (fault == CORE_DURATION_FAULT_FORM)
            return fail(p, t.start, "%s", detail);
        converted = fault == CORE_DURATION_FAULT_TOO_LARGE  ? DECIMAL_TOO_LARGE
                    : fault == CORE_DURATION_FAULT_TOO_FINE ? DECIMAL_NOT_EXACT
                                                            : DECIMAL_OK;
    } else {
        converted = scale_decimal(s, whole_length, fraction, fraction_length, unit->scale, &value);
    }
    if (converted == DECIMAL_TOO_LARGE)
        return fail(p, t.start, "'%s' is too large: %s", shown, expected->range);
    if (converted == DECIMAL_NOT_EXACT) {
        char step[64];
        rules_format_quantity((rules_quantity){expected->kind, 1}, step, sizeof(step));
        return fail(p, t.start, "'%s' is finer than %s can be: the smallest step is %s", shown,
                    kind->noun, step);
    }
    out->kind = expected->kind;
    out->value = value;
    return FLARE_OK;
}

/* A whole number without a unit (max_windows, deep_launches). */
static int parse_count(parser *p, token t, const char *key, const char *example, const char *range,
                       uint64_t *out)
{
    int status = check_number_start(p, t, "a whole number", example, range);
    if (status != FLARE_OK)
        return status;
    const char *s = p->text + t.start;
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    uint64_t value = 0;
    for (size_t i = 0; i < t.length; i++) {
        if (!is_digit(s[i]))
            return fail(p, t.start, "%s takes a whole number with no unit, found '%s'", key, shown);
    }
    for (size_t i = 0; i < t.length; i++) {
        uint64_t digit = (uint64_t)(s[i] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return fail(p, t.start, "'%s' is too large: %s", shown, range);
        value = value * 10 + digit;
    }
    *out = value;
    return FLARE_OK;
}

/* ---- metrics ---- */

static int fail_unknown_metric(parser *p, token t)
{
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    return fail(p, t.start, "unknown metric '%s'; known metrics: %s", shown, rules_metric_list);
}

static int parse_custom_metric(parser *p, token t, rules_rule *rule)
{
    static const char prefix[] = "custom.";
    const size_t prefix_length = sizeof(prefix) - 1;
    const char *name = p->text + t.start + prefix_length;
    size_t length = t.length - prefix_length;
    if (length == 0)
        return fail(p, t.start, "'custom.' needs a counter name, e.g. custom.tokens");
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)name[i];
        if (rules_is_counter_character(c))
            continue;
        if (c >= 0x20 && c < 0x7f)
            return fail(p, t.start + prefix_length + i,
                        "'%c' is not allowed in a counter name: names are 1-%d characters of "
                        "A-Z a-z 0-9 . _ -",
                        c, FLARE_COUNTER_NAME_MAX);
        return fail(p, t.start + prefix_length + i,
                    "byte 0x%02x is not allowed in a counter name: names are 1-%d characters of "
                    "A-Z a-z 0-9 . _ -",
                    (unsigned)c, FLARE_COUNTER_NAME_MAX);
    }
    if (length > FLARE_COUNTER_NAME_MAX)
        return fail(p, t.start + prefix_length,
                    "the counter name is %zu characters long: names are 1-%d characters of "
                    "A-Z a-z 0-9 . _ -",
                    length, FLARE_COUNTER_NAME_MAX);
    rule->metric = RULES_METRIC_CUSTOM_RATE;
    memcpy(rule->counter, name, length);
    rule->counter[length] = '\0';
    return FLARE_OK;
}

static int parse_gpu_metric(parser *p, token t, rules_rule *rule)
{
    const char *s = p->text + t.start;
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    size_t i = 3; /* after "gpu" */
    size_t digits_start = i;
    while (i < t.length && is_digit(s[i]))
        i++;
    size_t digit_count = i - digits_start;
    /* The rest of the token after the index (".power"), for the fixes below. */
    char rest[256];
    rules_quote(s + i, t.length - i, rest, sizeof(rest));
    if (digit_count == 0)
        return fail(p, t.start + i, "'%s' needs a device index after 'gpu', e.g. gpu0%s", shown,
                    rest);
    if (digit_count > 1 && s[digits_start] == '0') {
        size_t zeros = 0;
        while (zeros + 1 < digit_count && s[digits_start + zeros] == '0')
            zeros++;
        char index[64];
        rules_quote(s + digits_start, digit_count, index, sizeof(index));
        return fail(p, t.start + digits_start,
                    "device index '%s' in '%s' has a leading zero: write gpu%.*s%s", index, shown,
                    (int)(digit_count - zeros), s + digits_start + zeros, rest);
    }
    uint64_t device = 0;
    for (size_t d = digits_start; d < i && device < RULES_DEVICE_COUNT; d++)
        device = device * 10 + (uint64_t)(s[d] - '0');
    if (device >= RULES_DEVICE_COUNT) {
        char index[64];
        rules_quote(s + digits_start, digit_count, index, sizeof(index));
        return fail(p, t.start + digits_start,
                    "device index %s in '%s' is out of range: devices are gpu0 to gpu%d", index,
                    shown, RULES_DEVICE_COUNT - 1);
    }
    if (i >= t.length || s[i] != '.')
        return fail(p, t.start + i,
                    "expected '.' and a GPU metric after 'gpu%u' (gpu%u.utilization, "
                    "gpu%u.power, gpu%u.sm_clock or gpu%u.memory_used)",
                    (unsigned)device, (unsigned)device, (unsigned)device, (unsigned)device,
                    (unsigned)device);
    i++;
    const char *gauge = s + i;
    size_t gauge_length = t.length - i;
    for (int g = 0; g < 4; g++) {
        if (strlen(rules_gpu_metric_names[g]) == gauge_length &&
            memcmp(rules_gpu_metric_names[g], gauge, gauge_length) == 0) {
            rule->metric = (rules_metric)(RULES_METRIC_GPU_UTILIZATION + g);
            rule->device = (uint32_t)device;
            return FLARE_OK;
        }
    }
    char gauge_shown[256];
    rules_quote(gauge, gauge_length, gauge_shown, sizeof(gauge_shown));
    return fail(p, t.start + i,
                "unknown GPU metric '%s' in '%s'; GPU metrics: utilization, power, sm_clock, "
                "memory_used",
                gauge_shown, shown);
}

static int parse_metric(parser *p, token t, rules_rule *rule)
{
    const char *s = p->text + t.start;
    for (int m = RULES_METRIC_KERNEL_LAUNCH_RATE; m <= RULES_METRIC_KERNEL_DURATION_P99; m++) {
        if (token_is(p, t, rules_metric_name((rules_metric)m))) {
            rule->metric = (rules_metric)m;
            return FLARE_OK;
        }
    }
    if (t.length >= 7 && memcmp(s, "custom.", 7) == 0)
        return parse_custom_metric(p, t, rule);
    if (token_is(p, t, "custom"))
        return fail(p, t.start,
                    "'custom' needs a counter name: custom.<counter>, e.g. "
                    "custom.tokens");
    if (t.length >= 4 && memcmp(s, "gpu", 3) == 0 && (is_digit(s[3]) || s[3] == '.'))
        return parse_gpu_metric(p, t, rule);
    return fail_unknown_metric(p, t);
}

/* ---- the rule ---- */

static void set_defaults(rules_rule *rule)
{
    for (int i = 0; i < RULES_OPTION_COUNT; i++) {
        const rules_option_info *info = rules_option_at((rules_option)i);
        if (rules_option_is_number(info))
            rules_option_set(rule, (rules_option)i, info->fallback);
    }
    rule->action = RULES_ACTION_WINDOW; /* range_name stays all zero */
    rule->engine = RULES_ENGINE_PM;
}

static int parse_comparison(parser *p, token t, const rules_rule *rule, const char *metric_text)
{
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    if (t.kind == TOKEN_END)
        return fail(p, t.start, "'%s' needs a comparison and a threshold after it, e.g. %s < %s",
                    metric_text, metric_text, rules_kind(rules_metric_unit(rule->metric))->example);
    if (t.kind == TOKEN_SEMICOLON)
        return fail_semicolon(p, t);
    if (t.kind == TOKEN_WORD) {
        if (rule->metric == RULES_METRIC_CUSTOM_RATE && token_is(p, t, "rate"))
            return fail(p, t.start,
                        "custom metrics are rates already: write '%s < 50/s', without 'rate'",
                        metric_text);
        return fail(p, t.start, "expected a comparison (<, <=, >, >=) after the metric, found '%s'",
                    shown);
    }
    static const char *const spellings[RULES_COMPARISON_COUNT] = {"<", "<=", ">", ">="};
    for (int c = 0; c < RULES_COMPARISON_COUNT; c++) {
        if (token_is(p, t, spellings[c]))
            return c;
    }
    return fail(p, t.start, "unknown comparison '%s'; use <, <=, > or >=", shown);
}

/* `action window`, `action replay` or `action range NAME`; value is the word
 * after `action`. The name is the next token, whatever word it is, except
 * an option's key: `action range replay_budget 30s` has forgotten the name,
 * and reading "replay_budget" as one would only move the refusal to '30s'. */
static int parse_action(parser *p, token value, rules_rule *rule)
{
    char shown[256];
    quote_token(p, value, shown, sizeof(shown));
    if (token_is(p, value, "window") || token_is(p, value, "replay")) {
        rule->action = token_is(p, value, "window") ? RULES_ACTION_WINDOW : RULES_ACTION_REPLAY;
        return FLARE_OK;
    }
    if (!token_is(p, value, "range"))
        return fail(p, value.start,
                    "expected window, replay or range NAME after 'action', not '%s'", shown);
    token name = next_token(p);
    if (name.kind != TOKEN_WORD)
        return fail(p, name.start, "'action range' needs the name of a scope or NVTX range");
    quote_token(p, name, shown, sizeof(shown));
    if (rules_option_find(p->text + name.start, name.length) != RULES_OPTION_COUNT)
        return fail(p, name.start,
                    "'action range' needs the name of a scope or NVTX range before the option "
                    "'%s'",
                    shown);
    if (name.length >= RULES_RANGE_NAME_MAX)
        return fail(p, name.start, "the range name is %zu bytes long: names are 1-%d bytes",
                    name.length, RULES_RANGE_NAME_MAX - 1);
    rule->action = RULES_ACTION_RANGE;
    memcpy(rule->range_name, p->text + name.start, name.length);
    rule->range_name[name.length] = '\0';
    return FLARE_OK;
}

/* `engine pm`, `engine pc`, `engine sass` or `engine auto`, by their names
 * in rule_tables.c. */
static int parse_engine(parser *p, token value, rules_rule *rule)
{
    for (rules_engine engine = RULES_ENGINE_PM; engine <= RULES_ENGINE_SASS; engine++)
        if (token_is(p, value, rules_engine_name(engine))) {
            rule->engine = engine;
            return FLARE_OK;
        }
    char shown[256];
    quote_token(p, value, shown, sizeof(shown));
    return fail(p, value.start,
                "unknown engine '%s'; use pm (PM sampling, the default), pc (PC sampling), sass "
                "(SASS metrics) or auto (the deepest within the deep budget)",
                shown);
}

static int parse_option_value(parser *p, rules_option option, token value, rules_rule *rule,
                              const char *metric_text)
{
    const rules_option_info *info = rules_option_at(option);
    char range[256], wants[256], message[RULES_ERROR_MAX];
    if (info->type == RULES_OPTION_TYPE_ACTION)
        return parse_action(p, value, rule);
    if (info->type == RULES_OPTION_TYPE_ENGINE)
        return parse_engine(p, value, rule);
    if (info->type == RULES_OPTION_TYPE_THRESHOLD) {
        const rules_kind_info *kind = rules_kind(rule->threshold.kind);
        rules_describe_quantity_range(metric_text, rule->threshold.kind, range, sizeof(range));
        snprintf(wants, sizeof(wants), "rearm takes %s, like the threshold", kind->noun);
        expectation expected = {rule->threshold.kind, wants, kind->example, range};
        int status = parse_quantity(p, value, &expected, &rule->rearm);
        if (status != FLARE_OK)
            return status;
        if (rules_check_quantity_range(metric_text, rule->rearm, "rearm", message,
                                       sizeof(message)) != FLARE_OK)
            return fail(p, value.start, "%s", message);
        return FLARE_OK;
    }
    rules_describe_option_range(option, range, sizeof(range));
    uint64_t number = 0;
    int status;
    if (info->type == RULES_OPTION_TYPE_COUNT) {
        status = parse_count(p, value, info->key, info->example, range, &number);
    } else {
        rules_quantity duration;
        snprintf(wants, sizeof(wants), "%s takes a duration", info->key);
        expectation expected = {RULES_UNIT_DURATION, wants, info->example, range};
        status = parse_quantity(p, value, &expected, &duration);
        number = duration.value;
    }
    if (status != FLARE_OK)
        return status;
    /* Checked before it is stored: a count is narrowed to 32 bits. */
    if (rules_check_option_range(option, number, message, sizeof(message)) != FLARE_OK)
        return fail(p, value.start, "%s", message);
    rules_option_set(rule, option, number);
    return FLARE_OK;
}

static int fail_unknown_option(parser *p, token t)
{
    char shown[256];
    quote_token(p, t, shown, sizeof(shown));
    if (t.kind == TOKEN_SEMICOLON)
        return fail_semicolon(p, t);
    if (token_is(p, t, "window"))
        return fail(p, t.start,
                    "unknown option 'window': the time a reading covers is 'over' (e.g. over "
                    "1s); a deep-profiling window is what 'action window' (the default) opens, "
                    "bounded by deep_for and deep_launches");
    if (token_is(p, t, "replay") || token_is(p, t, "range"))
        return fail(p, t.start, "unknown option '%s': write 'action %s%s'", shown, shown,
                    token_is(p, t, "range") ? " NAME" : "");
    if (t.kind == TOKEN_WORD && (is_letter(p->text[t.start]) || p->text[t.start] == '_'))
        return fail(p, t.start, "unknown option '%s'; options: %s", shown, rules_option_list);
    return fail(p, t.start, "expected an option (%s), found '%s'", rules_option_list, shown);
}

static int parse_rule(parser *p, rules_rule *rule)
{
    set_defaults(rule);
    token t = next_token(p);
    if (t.kind == TOKEN_END)
        return refuse(p->error, p->error_size, "the rule is empty");
    if (t.kind == TOKEN_SEMICOLON)
        return fail_semicolon(p, t);
    if (t.kind == TOKEN_OPERATOR) {
        char shown[64];
        quote_token(p, t, shown, sizeof(shown));
        return fail(p, t.start, "expected a metric before '%s', e.g. kernel_launch_rate < 500/s",
                    shown);
    }
    int status = parse_metric(p, t, rule);
    if (status != FLARE_OK)
        return status;
    char metric_text[FLARE_COUNTER_NAME_MAX + 16];
    rules_format_metric(rule, metric_text, sizeof(metric_text));

    status = parse_comparison(p, next_token(p), rule, metric_text);
    if (status < 0)
        return status;
    rule->comparison = (rules_comparison)status;

    rules_unit_kind kind = rules_metric_unit(rule->metric);
    token threshold = next_token(p);
    if (threshold.kind == TOKEN_END)
        return fail(p, threshold.start, "'%s' needs a threshold after it, e.g. %s",
                    rules_comparison_text(rule->comparison), rules_kind(kind)->example);
    char range[256], wants[256], message[RULES_ERROR_MAX];
    rules_describe_quantity_range(metric_text, kind, range, sizeof(range));
    snprintf(wants, sizeof(wants), "%s is compared with %s", metric_text, rules_kind(kind)->noun);
    expectation expected = {kind, wants, rules_kind(kind)->example, range};
    status = parse_quantity(p, threshold, &expected, &rule->threshold);
    if (status != FLARE_OK)
        return status;
    if (rules_check_quantity_range(metric_text, rule->threshold, NULL, message, sizeof(message)) !=
        FLARE_OK)
        return fail(p, threshold.start, "%s", message);

    size_t given_at[RULES_OPTION_COUNT] = {0}; /* 1-based column; 0: not given */
    for (;;) {
        token key = next_token(p);
        if (key.kind == TOKEN_END)
            break;
        rules_option option = RULES_OPTION_COUNT;
        if (key.kind == TOKEN_WORD)
            option = rules_option_find(p->text + key.start, key.length);
        if (option == RULES_OPTION_COUNT)
            return fail_unknown_option(p, key);
        const rules_option_info *info = rules_option_at(option);
        if (given_at[option] != 0)
            return fail(p, key.start, "option '%s' is given twice (first at column %zu)", info->key,
                        given_at[option]);
        given_at[option] = key.start + 1;
        token value = next_token(p);
        const char *example =
            info->type == RULES_OPTION_TYPE_THRESHOLD ? rules_kind(kind)->example : info->example;
        if (value.kind == TOKEN_OPERATOR && token_is(p, value, "=")) {
            /* Show the user's own value in the fix when there is one. */
            token written = peek_token(p);
            char shown[256];
            if (written.kind == TOKEN_WORD)
                quote_token(p, written, shown, sizeof(shown));
            else
                snprintf(shown, sizeof(shown), "%s", example);
            return fail(p, value.start, "write options as '%s %s', without '='", info->key, shown);
        }
        if (value.kind != TOKEN_WORD)
            return fail(p, value.start, "option '%s' needs a value after it, e.g. %s %s", info->key,
                        info->key, example);
        status = parse_option_value(p, option, value, rule, metric_text);
        if (status != FLARE_OK)
            return status;
    }

    /* After the loop: `replay_budget 30s action replay` is a replay rule. */
    if (rule->action == RULES_ACTION_WINDOW) {
        for (int i = 0; i < RULES_OPTION_COUNT; i++) {
            if (given_at[i] != 0 && rules_option_at((rules_option)i)->replay_only)
                return fail(p, given_at[i] - 1,
                            "%s applies to action replay or range; this rule's action is window",
                            rules_option_at((rules_option)i)->key);
        }
    }
    if (rule->action != RULES_ACTION_WINDOW && given_at[RULES_OPTION_ENGINE] != 0)
        return fail(p, given_at[RULES_OPTION_ENGINE] - 1,
                    "engine applies to action window; a replay's counters come from the range "
                    "profiler");
    if (given_at[RULES_OPTION_REARM] == 0)
        rule->rearm = rule->threshold;
    /* Each term is range-checked above: the sum cannot overflow. */
    if (given_at[RULES_OPTION_STALE_AFTER] == 0)
        rule->stale_after_ns =
            rule->window_ns + rule->sustained_ns + rule->bucket_ns + RULES_STALE_MARGIN_NS;
    return rules_validate(rule, p->error, p->error_size);
}

int rules_parse(const char *text, rules_rule *out, char *error, size_t error_size)
{
    if (error != NULL && error_size > 0)
        error[0] = '\0';
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (text == NULL || out == NULL)
        return refuse(error, error_size, "no rule text");
    size_t length = strnlen(text, RULES_TEXT_MAX + 1);
    if (length > RULES_TEXT_MAX) {
        char message[96];
        snprintf(message, sizeof(message), "the rule is longer than %d characters", RULES_TEXT_MAX);
        return refuse(error, error_size, message);
    }
    parser p = {text, length, 0, error, error_size};
    rules_rule rule;
    memset(&rule, 0, sizeof(rule));
    int status = parse_rule(&p, &rule);
    if (status != FLARE_OK)
        return status;
    *out = rule;
    return FLARE_OK;
}

/* ---- lists ---- */

static void parse_list_item(const char *text, size_t length, size_t start, size_t end,
                            rules_list_entry *entry)
{
    memset(entry, 0, sizeof(*entry));
    size_t first = start, last = end;
    while (first < last && is_blank(text[first]))
        first++;
    while (last > first && is_blank(text[last - 1]))
        last--;
    entry->offset = first;
    entry->length = last - first;
    if (first == last) {
        /* Columns of the ';' around the empty item, 1-based in the list. */
        int before = start > 0, after = end < length;
        if (before && after)
            snprintf(entry->error, sizeof(entry->error),
                     "empty rule between the ';' at column %zu and the ';' at column %zu", start,
                     end + 1);
        else if (before)
            snprintf(entry->error, sizeof(entry->error), "empty rule after the ';' at column %zu",
                     start);
        else
            snprintf(entry->error, sizeof(entry->error), "empty rule before the ';' at column %zu",
                     end + 1);
        entry->status = FLARE_ERR_INVALID_ARGUMENT;
        return;
    }
    /* One byte more than a rule may hold, so rules_parse sees it is too long. */
    char item[RULES_TEXT_MAX + 2];
    size_t copied = entry->length < sizeof(item) - 1 ? entry->length : sizeof(item) - 1;
    memcpy(item, text + first, copied);
    item[copied] = '\0';
    entry->status = rules_parse(item, &entry->rule, entry->error, sizeof(entry->error));
}

int rules_parse_list(const char *text, rules_list_entry *entries, size_t capacity, size_t *count)
{
    if (count != NULL)
        *count = 0;
    if (text == NULL || count == NULL || (entries == NULL && capacity > 0))
        return FLARE_ERR_INVALID_ARGUMENT;
    size_t length = strlen(text);
    size_t blank = 0;
    while (blank < length && is_blank(text[blank]))
        blank++;
    if (blank == length)
        return FLARE_OK;
    size_t items = 0;
    size_t start = 0;
    for (;;) {
        size_t end = start;
        while (end < length && text[end] != ';')
            end++;
        if (items < capacity)
            parse_list_item(text, length, start, end, &entries[items]);
        items++;
        if (end >= length)
            break;
        start = end + 1;
    }
    *count = items;
    return items > capacity ? FLARE_ERR_FULL : FLARE_OK;
}

/* One item at a time, as rules_parse_list splits them, so that one entry
 * is on the stack rather than RULES_LIST_MAX of them (28 KiB). */
/* Walks the first RULES_LIST_MAX items of text, one entry on the stack at a
 * time, and gives each that parses to take. */
static void list_walk(const char *text, void (*take)(const rules_rule *rule, unsigned *bits),
                      unsigned *bits)
{
    if (text == NULL)
        return;
    size_t length = strlen(text);
    size_t start = 0;
    for (size_t item = 0; item < RULES_LIST_MAX; item++) {
        size_t end = start;
        while (end < length && text[end] != ';')
            end++;
        rules_list_entry entry;
        parse_list_item(text, length, start, end, &entry);
        if (entry.status == FLARE_OK)
            take(&entry.rule, bits);
        if (end >= length)
            break;
        start = end + 1;
    }
}

static void take_action(const rules_rule *rule, unsigned *bits)
{
    *bits |= 1u << rule->action;
}

static void take_engine(const rules_rule *rule, unsigned *bits)
{
    if (rule->action == RULES_ACTION_WINDOW)
        *bits |= 1u << rule->engine;
}

unsigned rules_list_actions(const char *text)
{
    unsigned actions = 0;
    list_walk(text, take_action, &actions);
    return actions;
}

unsigned rules_list_engines(const char *text)
{
    unsigned engines = 0;
    list_walk(text, take_engine, &engines);
    return engines;
}

int rules_list_wants_replay(const char *text)
{
    return (rules_list_actions(text) & (RULES_ACTIONS_REPLAY | RULES_ACTIONS_RANGE)) != 0;
}
