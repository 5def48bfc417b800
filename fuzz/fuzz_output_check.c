/*
 * fuzz_output_check.c: a strict JSON validator and a strict CSV validator
 * (fuzz_output_check.h), so that the fuzz targets can hold `flare export`
 * and `flare report --format` to their promise (src/cli/output.h): whatever
 * the database holds, output that succeeds is well-formed JSON or CSV and
 * valid UTF-8.
 *
 * Fuzz-only. It must never accept malformed input, never read past the
 * length it is given (the bytes need not be NUL-terminated), and never
 * recurse deeper than FUZZ_JSON_DEPTH_MAX.
 */
#include <stdint.h>

#include "fuzz_output_check.h"

typedef struct cursor {
    const unsigned char *bytes;
    size_t length;
    size_t at;
    const char *why;
} cursor;

static int fail(cursor *c, const char *why)
{
    c->why = why;
    return -1;
}

/* Length of the valid UTF-8 sequence at c->at (1..4), or 0 when it is not
 * one: overlong forms, surrogates and values past U+10FFFF are refused. */
static size_t utf8_sequence(const cursor *c)
{
    const unsigned char *p = c->bytes + c->at;
    size_t left = c->length - c->at;
    if (p[0] < 0x80)
        return 1;
    size_t size;
    uint32_t value;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        size = 2;
        value = p[0] & 0x1F;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        size = 3;
        value = p[0] & 0x0F;
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        size = 4;
        value = p[0] & 0x07;
    } else {
        return 0;
    }
    if (left < size)
        return 0;
    for (size_t i = 1; i < size; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        value = value << 6 | (p[i] & 0x3F);
    }
    if ((size == 3 && value < 0x800) || (size == 4 && value < 0x10000) || value > 0x10FFFF ||
        (value >= 0xD800 && value <= 0xDFFF))
        return 0;
    return size;
}

/* ---- JSON ---- */

static int json_value(cursor *c, int depth);

static void json_space(cursor *c)
{
    while (c->at < c->length && (c->bytes[c->at] == ' ' || c->bytes[c->at] == '\t' ||
                                 c->bytes[c->at] == '\n' || c->bytes[c->at] == '\r'))
        c->at++;
}

static int is_digit(unsigned char byte)
{
    return byte >= '0' && byte <= '9';
}

static int is_hex(unsigned char byte)
{
    return is_digit(byte) || (byte >= 'a' && byte <= 'f') || (byte >= 'A' && byte <= 'F');
}

static int json_string(cursor *c)
{
    c->at++; /* the opening quote */
    while (c->at < c->length) {
        unsigned char byte = c->bytes[c->at];
        if (byte == '"') {
            c->at++;
            return 0;
        }
        if (byte < 0x20)
            return fail(c, "a control character in a string");
        if (byte == '\\') {
            if (++c->at >= c->length)
                return fail(c, "a string ends in an escape");
            byte = c->bytes[c->at];
            if (byte == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (c->at + i >= c->length || !is_hex(c->bytes[c->at + i]))
                        return fail(c, "a bad \\u escape");
                c->at += 5;
                continue;
            }
            if (byte != '"' && byte != '\\' && byte != '/' && byte != 'b' && byte != 'f' &&
                byte != 'n' && byte != 'r' && byte != 't')
                return fail(c, "an unknown escape");
            c->at++;
            continue;
        }
        size_t size = utf8_sequence(c);
        if (size == 0)
            return fail(c, "invalid UTF-8 in a string");
        c->at += size;
    }
    return fail(c, "an unterminated string");
}

static int json_digits(cursor *c)
{
    if (c->at >= c->length || !is_digit(c->bytes[c->at]))
        return fail(c, "a digit expected");
    while (c->at < c->length && is_digit(c->bytes[c->at]))
        c->at++;
    return 0;
}

static int json_number(cursor *c)
{
    if (c->bytes[c->at] == '-')
        c->at++;
    if (c->at < c->length && c->bytes[c->at] == '0')
        c->at++;
    else if (json_digits(c) != 0)
        return -1;
    if (c->at < c->length && c->bytes[c->at] == '.') {
        c->at++;
        if (json_digits(c) != 0)
            return -1;
    }
    if (c->at < c->length && (c->bytes[c->at] == 'e' || c->bytes[c->at] == 'E')) {
        c->at++;
        if (c->at < c->length && (c->bytes[c->at] == '+' || c->bytes[c->at] == '-'))
            c->at++;
        if (json_digits(c) != 0)
            return -1;
    }
    return 0;
}

static int json_word(cursor *c, const char *word)
{
    for (size_t i = 0; word[i] != '\0'; i++, c->at++)
        if (c->at >= c->length || c->bytes[c->at] != (unsigned char)word[i])
            return fail(c, "an unknown word");
    return 0;
}

/* An object or an array, whose opening byte is at c->at. */
static int json_container(cursor *c, int depth)
{
    unsigned char close = c->bytes[c->at] == '{' ? '}' : ']';
    c->at++;
    json_space(c);
    if (c->at < c->length && c->bytes[c->at] == close) {
        c->at++;
        return 0;
    }
    for (;;) {
        json_space(c);
        if (close == '}') {
            if (c->at >= c->length || c->bytes[c->at] != '"')
                return fail(c, "a member name expected");
            if (json_string(c) != 0)
                return -1;
            json_space(c);
            if (c->at >= c->length || c->bytes[c->at] != ':')
                return fail(c, "':' expected");
            c->at++;
        }
        if (json_value(c, depth + 1) != 0)
            return -1;
        json_space(c);
        if (c->at >= c->length)
            return fail(c, "an unterminated object or array");
        if (c->bytes[c->at] == close) {
            c->at++;
            return 0;
        }
        if (c->bytes[c->at] != ',')
            return fail(c, "',' expected");
        c->at++;
    }
}

static int json_value(cursor *c, int depth)
{
    if (depth > FUZZ_JSON_DEPTH_MAX)
        return fail(c, "nested too deeply");
    json_space(c);
    if (c->at >= c->length)
        return fail(c, "a value expected");
    switch (c->bytes[c->at]) {
    case '{':
    case '[':
        return json_container(c, depth);
    case '"':
        return json_string(c);
    case 't':
        return json_word(c, "true");
    case 'f':
        return json_word(c, "false");
    case 'n':
        return json_word(c, "null");
    default:
        if (c->bytes[c->at] == '-' || is_digit(c->bytes[c->at]))
            return json_number(c);
        return fail(c, "a value expected");
    }
}

int fuzz_check_json(const char *bytes, size_t length, size_t *where, const char **why)
{
    cursor c = {(const unsigned char *)bytes, length, 0, NULL};
    int status = json_value(&c, 0);
    if (status == 0) {
        json_space(&c);
        if (c.at != c.length)
            status = fail(&c, "bytes after the value");
    }
    *where = c.at;
    *why = c.why;
    return status;
}

/* ---- CSV ---- */

int fuzz_check_csv(const char *bytes, size_t length, size_t columns, int crlf, size_t *where,
                   const char **why)
{
    cursor c = {(const unsigned char *)bytes, length, 0, NULL};
    int status = 0;
    size_t fields = 1;
    int field_start = 1;
    if (length == 0)
        status = fail(&c, "no header");
    while (status == 0 && c.at < c.length) {
        unsigned char byte = c.bytes[c.at];
        if (byte == '"' && field_start) {
            /* A quoted field: anything, quotes doubled, up to the closing quote. */
            c.at++;
            for (;;) {
                if (c.at >= c.length) {
                    status = fail(&c, "an unterminated quoted field");
                    break;
                }
                if (c.bytes[c.at] == '"') {
                    if (c.at + 1 < c.length && c.bytes[c.at + 1] == '"') {
                        c.at += 2;
                        continue;
                    }
                    c.at++;
                    break;
                }
                size_t size = utf8_sequence(&c);
                if (size == 0) {
                    status = fail(&c, "invalid UTF-8");
                    break;
                }
                c.at += size;
            }
            if (status != 0)
                break;
            if (c.at < c.length && c.bytes[c.at] != ',' && c.bytes[c.at] != (crlf ? '\r' : '\n')) {
                status = fail(&c, "bytes after a quoted field");
                break;
            }
            field_start = 0;
            continue;
        }
        if (byte == ',') {
            fields++;
            c.at++;
            field_start = 1;
            continue;
        }
        if (byte == '\r' || byte == '\n') {
            /* The end of a record: CRLF, or LF alone. */
            size_t end = crlf ? 2 : 1;
            if (crlf ? byte != '\r' || c.at + 1 >= c.length || c.bytes[c.at + 1] != '\n'
                     : byte != '\n') {
                status = fail(&c, crlf ? "a line break other than CRLF" : "a carriage return");
                break;
            }
            if (fields != columns) {
                status = fail(&c, "a record of another width");
                break;
            }
            c.at += end;
            fields = 1;
            field_start = 1;
            continue;
        }
        if (byte == '"') {
            status = fail(&c, "a quote inside an unquoted field");
            break;
        }
        size_t size = utf8_sequence(&c);
        if (size == 0) {
            status = fail(&c, "invalid UTF-8");
            break;
        }
        c.at += size;
        field_start = 0;
    }
    /* The last record is terminated too: nothing may follow it unended. */
    if (status == 0 && length > 0 && bytes[length - 1] != '\n')
        status = fail(&c, "the last record has no line end");
    *where = c.at;
    *why = c.why;
    return status;
}
