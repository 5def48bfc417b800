/*
 * duration.c: the one duration parser and canonical formatter
 * (duration.h). The grammar and its messages are the rule grammar's
 * (docs/rules.md), so a user sees the same refusal for `--deep-after .5s`,
 * FLARE_REPLAY_PASS_TIMEOUT=.5s and `cooldown .5s`.
 *
 * The value is converted with integer arithmetic only: the whole part is
 * accumulated with an overflow check, and the fraction is multiplied by the
 * unit's scale digit by digit from its last digit, which tells exactly
 * whether the product is a whole number of nanoseconds while holding at most
 * ten times the scale. Must never: read past the span, write past the error
 * buffer, round, or touch *out_ns on a refusal.
 */
#include "core/duration.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "flare/flare.h"

#define NS_PER_US     UINT64_C(1000)
#define NS_PER_MS     UINT64_C(1000000)
#define NS_PER_SECOND UINT64_C(1000000000)
#define NS_PER_MINUTE (60 * NS_PER_SECOND)
#define NS_PER_HOUR   (60 * NS_PER_MINUTE)

/* Small to large, for core_duration_format. Scales stay below 2^64 / 10 so
 * that a fraction digit's product with its carry cannot overflow. */
static const struct duration_unit {
    const char *name;
    uint64_t scale; /* nanoseconds in one */
} units[] = {
    {"ns", 1},
    {"us", NS_PER_US},
    {"ms", NS_PER_MS},
    {"s", NS_PER_SECOND},
    {"min", NS_PER_MINUTE},
    {"h", NS_PER_HOUR},
};
#define UNIT_COUNT (sizeof(units) / sizeof(units[0]))

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The rule grammar's blanks: what separates its tokens. */
static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Appends to buffer at *used; never overruns (a message that does not fit
 * is cut). */
static void append(char *buffer, size_t size, size_t *used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buffer, size_t size, size_t *used, const char *format, ...)
{
    if (*used >= size)
        return;
    va_list arguments;
    va_start(arguments, format);
    int written = vsnprintf(buffer + *used, size - *used, format, arguments);
    va_end(arguments);
    if (written > 0)
        *used += (size_t)written;
}

/* text[0..length) printable and bounded, as rules_quote writes it: bytes
 * outside printable ASCII as \xNN, and "..." after 48 characters. */
static void quote(const char *text, size_t length, char *buffer, size_t size)
{
    enum { SHOWN = 48 };
    size_t used = 0;
    buffer[0] = '\0';
    for (size_t i = 0; i < length && i < SHOWN; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c < 0x7f)
            append(buffer, size, &used, "%c", c);
        else
            append(buffer, size, &used, "\\x%02x", c);
    }
    if (length > SHOWN)
        append(buffer, size, &used, "...");
}

/* Writes the message (when there is room for one) and returns fault. */
static core_duration_fault refuse(core_duration_fault fault, char *error, size_t error_size,
                                  const char *format, ...) __attribute__((format(printf, 4, 5)));

static core_duration_fault refuse(core_duration_fault fault, char *error, size_t error_size,
                                  const char *format, ...)
{
    if (error != NULL && error_size > 0) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error, error_size, format, arguments);
        va_end(arguments);
    }
    return fault;
}

/* Whether the text starts like a spelling of NaN or infinity. */
static int is_not_a_number_word(const char *text, size_t length)
{
    static const char *const words[] = {"nan", "inf"};
    if (length < 3)
        return 0;
    for (size_t w = 0; w < 2; w++) {
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

/* The refusal of a text with blanks, offering the text without them when
 * that is a duration ("2 s": write 2s). */
static core_duration_fault refuse_blanks(const char *text, size_t length, const char *shown,
                                         char *error, size_t error_size)
{
    char joined[64];
    size_t used = 0;
    for (size_t i = 0; i < length && used < sizeof(joined); i++) {
        if (!is_blank(text[i]))
            joined[used++] = text[i];
    }
    uint64_t ignored;
    if (used > 0 && used < sizeof(joined) &&
        core_duration_scan(joined, used, &ignored, NULL, 0) == CORE_DURATION_FAULT_NONE) {
        char fixed[256];
        quote(joined, used, fixed, sizeof(fixed));
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s' has blanks in it: write %s", shown, fixed);
    }
    return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                  "'%s' has blanks in it: a duration is one word, such as 2s", shown);
}

core_duration_fault core_duration_scan(const char *text, size_t length, uint64_t *out_ns,
                                       char *error, size_t error_size)
{
    if (error != NULL && error_size > 0)
        error[0] = '\0';
    if (text == NULL || length == 0)
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "expected a duration with a unit, e.g. 500ms, 2s or 1min");
    char shown[256];
    quote(text, length, shown, sizeof(shown));
    for (size_t i = 0; i < length; i++) {
        if (is_blank(text[i]))
            return refuse_blanks(text, length, shown, error, error_size);
    }

    /* The number: refusals in the rule grammar's order and words. */
    if (text[0] == '-')
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s' is negative: a duration is 0s or more", shown);
    if (text[0] == '+')
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s': write the number without a sign", shown);
    if (is_not_a_number_word(text, length))
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s' is not a number: expected a duration such as 2s", shown);
    if (text[0] == '.' && length > 1 && is_digit(text[1]))
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s' needs a digit before the decimal point: write 0%s", shown, shown);
    if (!is_digit(text[0]))
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "expected a duration such as 2s, found '%s'", shown);
    size_t i = 0;
    while (i < length && is_digit(text[i]))
        i++;
    size_t whole_length = i;
    const char *fraction = text + i;
    size_t fraction_length = 0;
    if (i < length && text[i] == '.') {
        i++;
        fraction = text + i;
        while (i < length && is_digit(text[i]))
            i++;
        fraction_length = (size_t)(text + i - fraction);
        if (fraction_length == 0)
            return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                          "'%s' needs a digit after the decimal point", shown);
    }

    /* The unit, attached. */
    const char *unit_text = text + i;
    size_t unit_length = length - i;
    if (unit_length == 0)
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s' needs a unit: write %ss (a duration is written in " CORE_DURATION_UNITS
                      ")",
                      shown, shown);
    if ((unit_text[0] == 'e' || unit_text[0] == 'E') && unit_length > 1 &&
        (is_digit(unit_text[1]) || unit_text[1] == '+' || unit_text[1] == '-'))
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "'%s': exponents are not accepted: write the number in full", shown);
    uint64_t scale = 0;
    for (size_t u = 0; u < UNIT_COUNT; u++) {
        if (strlen(units[u].name) == unit_length &&
            memcmp(units[u].name, unit_text, unit_length) == 0)
            scale = units[u].scale;
    }
    if (scale == 0) {
        char unit_shown[256];
        quote(unit_text, unit_length, unit_shown, sizeof(unit_shown));
        return refuse(CORE_DURATION_FAULT_FORM, error, error_size,
                      "unknown unit '%s' in '%s': a duration is written in " CORE_DURATION_UNITS,
                      unit_shown, shown);
    }

    /* The value, exactly. More than 20 significant whole digits is at least
     * 10^20 ns, past 2^64 whatever the fraction. */
    size_t lead = 0;
    while (lead < whole_length && text[lead] == '0')
        lead++;
    if (whole_length - lead > 20)
        goto too_large;
    while (fraction_length > 0 && fraction[fraction_length - 1] == '0')
        fraction_length--;
    /* fraction x scale / 10^fraction_length, by long multiplication from the
     * last digit: each step's last decimal digit is a digit below the
     * nanosecond and must be 0; what is carried out of the last step is the
     * fraction's nanoseconds. The carry stays below scale. */
    uint64_t carry = 0;
    for (size_t k = fraction_length; k-- > 0;) {
        uint64_t step = (uint64_t)(fraction[k] - '0') * scale + carry;
        if (step % 10 != 0)
            return refuse(CORE_DURATION_FAULT_TOO_FINE, error, error_size,
                          "'%s' is finer than a duration can be: the smallest step is 1ns", shown);
        carry = step / 10;
    }
    uint64_t whole = 0;
    for (size_t k = lead; k < whole_length; k++) {
        uint64_t digit = (uint64_t)(text[k] - '0');
        if (whole > (UINT64_MAX - digit) / 10)
            goto too_large;
        whole = whole * 10 + digit;
    }
    if (whole > (UINT64_MAX - carry) / scale)
        goto too_large;
    *out_ns = whole * scale + carry;
    return CORE_DURATION_FAULT_NONE;
too_large:
    return refuse(CORE_DURATION_FAULT_TOO_LARGE, error, error_size,
                  "'%s' is too large: a duration is at most %lluns (about 584 years)", shown,
                  (unsigned long long)UINT64_MAX);
}

int core_duration_parse(const char *text, size_t length, uint64_t minimum_ns, uint64_t maximum_ns,
                        uint64_t *out_ns, char *error, size_t error_size)
{
    uint64_t value = 0;
    if (core_duration_scan(text, length, &value, error, error_size) != CORE_DURATION_FAULT_NONE)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (value >= minimum_ns && value <= maximum_ns) {
        *out_ns = value;
        return FLARE_OK;
    }
    char shown[256], bound[32];
    quote(text, length, shown, sizeof(shown));
    if (value < minimum_ns && minimum_ns == 1) {
        refuse(CORE_DURATION_FAULT_FORM, error, error_size, "'%s' must be more than zero", shown);
    } else if (value < minimum_ns) {
        core_duration_format(minimum_ns, bound, sizeof(bound));
        refuse(CORE_DURATION_FAULT_FORM, error, error_size, "'%s' is less than the minimum, %s",
               shown, bound);
    } else {
        core_duration_format(maximum_ns, bound, sizeof(bound));
        refuse(CORE_DURATION_FAULT_FORM, error, error_size, "'%s' is more than the maximum, %s",
               shown, bound);
    }
    return FLARE_ERR_INVALID_ARGUMENT;
}

void core_duration_format(uint64_t ns, char *buffer, size_t size)
{
    if (size == 0)
        return;
    if (ns == 0) {
        snprintf(buffer, size, "0s");
        return;
    }
    size_t chosen = 0;
    for (size_t u = 0; u < UNIT_COUNT; u++) {
        if (ns % units[u].scale == 0)
            chosen = u;
    }
    snprintf(buffer, size, "%llu%s", (unsigned long long)(ns / units[chosen].scale),
             units[chosen].name);
}
