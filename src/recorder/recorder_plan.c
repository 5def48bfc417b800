/*
 * recorder_plan.c: the flight recorder's pure decisions (recorder_plan.h):
 * its settings and their messages, marks, protected intervals, size
 * targets and how the work is spread. Sizes are parsed with integer
 * arithmetic only, as durations are (core/duration.c), so "1.5G" is
 * exactly 1610612736 bytes and "0.1K" is refused rather than rounded.
 * Must never read a clock, allocate, lock, touch SQLite, or round a size.
 */
#include "recorder/recorder_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/duration.h"
#include "flare/flare.h"

/* ---- settings ---- */

bool recorder_settings_on(const recorder_settings *settings)
{
    return settings != NULL && (settings->keep_ns != 0 || settings->max_bytes != 0);
}

static void say(char *error, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *error, size_t size, const char *format, ...)
{
    if (error == NULL || size == 0)
        return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, size, format, arguments);
    va_end(arguments);
}

/* text as a message shows it: printable ASCII, other bytes as \xNN, cut
 * after 48 characters. */
static void quote(const char *text, char *buffer, size_t size)
{
    size_t used = 0;
    buffer[0] = '\0';
    for (size_t i = 0; text[i] != '\0' && used + 5 < size; i++) {
        unsigned char c = (unsigned char)text[i];
        if (i == 48) {
            snprintf(buffer + used, size - used, "...");
            return;
        }
        used += (size_t)snprintf(buffer + used, size - used,
                                 c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
    }
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static const struct size_unit {
    const char *name;
    const char *binary; /* the same unit written with "iB" */
    uint64_t scale;
} size_units[] = {
    {"B", "B", 1},
    {"K", "KiB", 1ull << 10},
    {"M", "MiB", 1ull << 20},
    {"G", "GiB", 1ull << 30},
    {"T", "TiB", 1ull << 40},
};
#define SIZE_UNIT_COUNT (sizeof(size_units) / sizeof(size_units[0]))
#define SIZE_UNITS_TEXT "B, K, M, G or T (also KiB, MiB, GiB, TiB; binary: 1K = 1024 bytes)"

/* The unit named by text (from the first byte after the number): its
 * scale, or 0 with the reason in error. */
static uint64_t size_unit_scale(const char *whole, const char *unit, char *error, size_t size)
{
    char shown[256];
    quote(whole, shown, sizeof(shown));
    if (unit[0] == '\0')
        return 1;
    for (size_t u = 0; u < SIZE_UNIT_COUNT; u++)
        if (strcmp(unit, size_units[u].name) == 0 || strcmp(unit, size_units[u].binary) == 0)
            return size_units[u].scale;
    int number = (int)(unit - whole);
    for (size_t u = 1; u < SIZE_UNIT_COUNT; u++) {
        if (unit[0] == size_units[u].name[0] && strcmp(unit + 1, "B") == 0) {
            say(error, size, "'%s': write %.*s%c or %.*s%ciB (sizes are binary: 1%c = %llu bytes)",
                shown, number, whole, unit[0], number, whole, unit[0], unit[0],
                (unsigned long long)size_units[u].scale);
            return 0;
        }
    }
    if (strlen(unit) == 1 && strchr("kmgt", unit[0]) != NULL) {
        say(error, size, "'%s': units are upper-case: write %.*s%c", shown, number, whole,
            unit[0] - 'a' + 'A');
        return 0;
    }
    char unit_shown[64];
    quote(unit, unit_shown, sizeof(unit_shown));
    say(error, size, "'%s': unknown unit '%s'; a size is bytes, or a number with " SIZE_UNITS_TEXT,
        shown, unit_shown);
    return 0;
}

/* The number's form: digits, then optionally '.' and digits. Returns the
 * first byte after it, or NULL with the reason in error. */
static const char *size_number_end(const char *text, char *error, size_t size)
{
    char shown[256];
    quote(text, shown, sizeof(shown));
    const char *p = text;
    if (text[0] == '.' && is_digit(text[1])) {
        say(error, size, "'%s' needs a digit before the decimal point: write 0%s", shown, shown);
        return NULL;
    }
    if (!is_digit(*p)) {
        say(error, size,
            "'%s' is not a size: write bytes, or a number with " SIZE_UNITS_TEXT
            ", e.g. 512M or 2G",
            shown);
        return NULL;
    }
    while (is_digit(*p))
        p++;
    if (*p == '.') {
        if (!is_digit(p[1])) {
            say(error, size, "'%s' needs a digit after the decimal point", shown);
            return NULL;
        }
        p++;
        while (is_digit(*p))
            p++;
    }
    return p;
}

int recorder_parse_size(const char *text, uint64_t *out, char *error, size_t error_size)
{
    if (text == NULL || text[0] == '\0') {
        say(error, error_size, "a size is needed, e.g. 512M or 2G");
        return -1;
    }
    const char *end = size_number_end(text, error, error_size);
    if (end == NULL)
        return -1;
    uint64_t scale = size_unit_scale(text, end, error, error_size);
    if (scale == 0)
        return -1;
    char shown[256];
    quote(text, shown, sizeof(shown));
    uint64_t whole = 0;
    const char *p = text;
    for (; is_digit(*p); p++) {
        uint64_t digit = (uint64_t)(*p - '0');
        if (whole > (UINT64_MAX - digit) / 10 || whole * 10 + digit > UINT64_MAX / scale) {
            say(error, error_size, "'%s' is too large (at most 16 EiB)", shown);
            return -1;
        }
        whole = whole * 10 + digit;
    }
    /* The fraction times the scale, from its last digit: whole exactly
     * when every step divides by ten (never more than ten scales held). */
    uint64_t fraction = 0;
    if (*p == '.') {
        for (const char *digit = end - 1; digit > p; digit--) {
            uint64_t step = fraction + (uint64_t)(*digit - '0') * scale;
            if (step % 10 != 0) {
                say(error, error_size, "'%s' is not a whole number of bytes", shown);
                return -1;
            }
            fraction = step / 10;
        }
    }
    if (whole * scale > UINT64_MAX - fraction) {
        say(error, error_size, "'%s' is too large (at most 16 EiB)", shown);
        return -1;
    }
    *out = whole * scale + fraction;
    return 0;
}

int recorder_settings_parse(const char *keep, const char *max_size, recorder_settings *settings,
                            char *error, size_t error_size)
{
    recorder_settings parsed = {0, 0};
    char why[256];
    if (keep != NULL && keep[0] != '\0' &&
        core_duration_parse(keep, strlen(keep), RECORDER_KEEP_MIN_NS, RECORDER_KEEP_MAX_NS,
                            &parsed.keep_ns, why, sizeof(why)) != FLARE_OK) {
        say(error, error_size, "FLARE_KEEP: %s", why);
        return -1;
    }
    if (max_size != NULL && max_size[0] != '\0') {
        if (recorder_parse_size(max_size, &parsed.max_bytes, why, sizeof(why)) != 0) {
            say(error, error_size, "FLARE_MAX_SIZE: %s", why);
            return -1;
        }
        if (parsed.max_bytes < RECORDER_MAX_SIZE_MIN) {
            char shown[256];
            quote(max_size, shown, sizeof(shown));
            say(error, error_size, "FLARE_MAX_SIZE: '%s' is less than the minimum, 1M", shown);
            return -1;
        }
    }
    *settings = parsed;
    return 0;
}

void recorder_format_size(uint64_t bytes, char *buffer, size_t size)
{
    size_t chosen = 0;
    for (size_t u = 1; u < SIZE_UNIT_COUNT; u++)
        if (bytes != 0 && bytes % size_units[u].scale == 0)
            chosen = u;
    snprintf(buffer, size, "%llu%s", (unsigned long long)(bytes / size_units[chosen].scale),
             size_units[chosen].binary);
}

void recorder_settings_describe(const recorder_settings *settings, char *buffer, size_t size)
{
    char keep[32], cap[32];
    core_duration_format(settings->keep_ns, keep, sizeof(keep));
    recorder_format_size(settings->max_bytes, cap, sizeof(cap));
    if (settings->keep_ns != 0 && settings->max_bytes != 0)
        snprintf(buffer, size, "kept the last %s in detail, the database under %s", keep, cap);
    else if (settings->keep_ns != 0)
        snprintf(buffer, size, "kept the last %s in detail", keep);
    else if (settings->max_bytes != 0)
        snprintf(buffer, size, "kept the newest detail, the database under %s", cap);
    else
        snprintf(buffer, size, "kept everything in detail");
}

/* ---- marks ---- */

void recorder_marks_clear(recorder_marks *marks)
{
    marks->count = 0;
    marks->spacing_ns = 0;
}

void recorder_marks_add(recorder_marks *marks, const recorder_mark *mark)
{
    size_t count = marks->count;
    if (count >= 2 && marks->spacing_ns != 0 &&
        marks->items[count - 1].time_ns - marks->items[count - 2].time_ns < marks->spacing_ns) {
        marks->items[count - 1] = *mark; /* the newest moves on */
        return;
    }
    if (count == RECORDER_MARKS_MAX) {
        size_t kept = 0;
        for (size_t i = 0; i < count; i++)
            if (i % 2 == 0 || i + 1 == count)
                marks->items[kept++] = marks->items[i];
        marks->count = kept;
        uint64_t span = marks->items[kept - 1].time_ns - marks->items[0].time_ns;
        uint64_t average = span / (kept - 1);
        marks->spacing_ns = average > marks->spacing_ns ? average : marks->spacing_ns;
    }
    marks->items[marks->count++] = *mark;
}

const recorder_mark *recorder_marks_at(const recorder_marks *marks, uint64_t cutoff_ns,
                                       uint64_t after_ns)
{
    for (size_t i = marks->count; i-- > 0;) {
        const recorder_mark *mark = &marks->items[i];
        if (mark->time_ns <= after_ns)
            return NULL;
        if (mark->time_ns <= cutoff_ns)
            return mark;
    }
    return NULL;
}

const recorder_mark *recorder_marks_next(const recorder_marks *marks, uint64_t after_ns)
{
    for (size_t i = 0; i < marks->count; i++)
        if (marks->items[i].time_ns > after_ns)
            return &marks->items[i];
    return NULL;
}

void recorder_marks_forget_before(recorder_marks *marks, uint64_t time_ns)
{
    size_t first = 0;
    while (first < marks->count && marks->items[first].time_ns < time_ns)
        first++;
    if (first == 0)
        return;
    memmove(marks->items, marks->items + first, (marks->count - first) * sizeof(recorder_mark));
    marks->count -= first;
}

void recorder_marks_forget_from(recorder_marks *marks, uint64_t time_ns)
{
    while (marks->count > 0 && marks->items[marks->count - 1].time_ns >= time_ns)
        marks->count--;
}

/* ---- protected intervals ---- */

void recorder_protection_clear(recorder_protection *protection)
{
    protection->count = 0;
    protection->ceiling_ns = UINT64_MAX;
}

/* Drops intervals that start at or after the ceiling: no cutoff reaches
 * them, so no evicted row can overlap them. */
static void protection_trim(recorder_protection *protection)
{
    while (protection->count > 0 &&
           protection->items[protection->count - 1].lo_ns >= protection->ceiling_ns)
        protection->count--;
}

void recorder_protection_add(recorder_protection *protection, uint64_t lo_ns, uint64_t hi_ns,
                             uint64_t margin_ns)
{
    recorder_interval added = {
        .lo_ns = lo_ns > margin_ns ? lo_ns - margin_ns : 0,
        .hi_ns = hi_ns > UINT64_MAX - margin_ns ? UINT64_MAX : hi_ns + margin_ns,
    };
    if (added.hi_ns < added.lo_ns || added.lo_ns >= protection->ceiling_ns)
        return;
    /* Absorb every interval it overlaps. */
    size_t kept = 0;
    for (size_t i = 0; i < protection->count; i++) {
        recorder_interval *item = &protection->items[i];
        if (item->lo_ns <= added.hi_ns && added.lo_ns <= item->hi_ns) {
            added.lo_ns = item->lo_ns < added.lo_ns ? item->lo_ns : added.lo_ns;
            added.hi_ns = item->hi_ns > added.hi_ns ? item->hi_ns : added.hi_ns;
        } else {
            protection->items[kept++] = *item;
        }
    }
    protection->count = kept;
    if (protection->count == RECORDER_PROTECT_MAX) {
        recorder_interval *last = &protection->items[protection->count - 1];
        if (added.lo_ns >= last->lo_ns) {
            protection->ceiling_ns = added.lo_ns;
            protection_trim(protection);
            return;
        }
        protection->ceiling_ns = last->lo_ns;
        protection->count--;
    }
    size_t at = protection->count;
    while (at > 0 && protection->items[at - 1].lo_ns > added.lo_ns) {
        protection->items[at] = protection->items[at - 1];
        at--;
    }
    protection->items[at] = added;
    protection->count++;
    protection_trim(protection);
}

uint64_t recorder_protection_cutoff(const recorder_protection *protection, uint64_t cutoff_ns,
                                    recorder_interval *out, size_t max, size_t *out_count)
{
    uint64_t cutoff = cutoff_ns < protection->ceiling_ns ? cutoff_ns : protection->ceiling_ns;
    size_t count = 0;
    for (size_t i = 0; i < protection->count; i++) {
        const recorder_interval *item = &protection->items[i];
        if (item->lo_ns >= cutoff)
            break;
        if (count == max) {
            cutoff = item->lo_ns;
            break;
        }
        out[count++] = *item;
    }
    *out_count = count;
    return cutoff;
}

/* ---- size ---- */

uint64_t recorder_size_target(uint64_t cap_bytes, uint64_t growth_bytes)
{
    uint64_t target = cap_bytes / 10 * 9;
    uint64_t reserve = growth_bytes > UINT64_MAX / 2 ? UINT64_MAX : growth_bytes * 2;
    target = target > reserve ? target - reserve : 0;
    return target < cap_bytes / 2 ? cap_bytes / 2 : target;
}

uint64_t recorder_size_cutoff(uint64_t oldest_ns, uint64_t newest_ns, uint64_t used_bytes,
                              uint64_t target_bytes, unsigned attempt)
{
    if (attempt >= 3 || newest_ns <= oldest_ns || used_bytes == 0)
        return newest_ns;
    if (used_bytes <= target_bytes)
        return oldest_ns;
    double share = (double)(used_bytes - target_bytes) / (double)used_bytes;
    share *= 1.25 + 0.25 * attempt;
    if (share >= 1.0)
        return newest_ns;
    return oldest_ns + (uint64_t)(share * (double)(newest_ns - oldest_ns));
}

bool recorder_size_urgent(uint64_t used_bytes, uint64_t cap_bytes)
{
    return cap_bytes != 0 && used_bytes > cap_bytes / 100 * RECORDER_URGENT_PERCENT;
}

uint64_t recorder_size_room(uint64_t used_bytes, uint64_t cap_bytes)
{
    if (cap_bytes == 0)
        return UINT64_MAX;
    uint64_t limit = cap_bytes / 100 * RECORDER_URGENT_PERCENT;
    if (used_bytes > limit)
        return 0;
    uint64_t room = limit - used_bytes;
    if (room > cap_bytes / RECORDER_ROOM_SHARE)
        room = cap_bytes / RECORDER_ROOM_SHARE;
    room /= RECORDER_EVENT_BYTES;
    return room > 0 ? room : 1;
}

uint64_t recorder_chunk_rows(uint64_t behind, uint64_t now_ns, uint64_t next_pass_ns,
                             uint64_t batch_gap_ns)
{
    uint64_t batches = 1;
    if (batch_gap_ns != 0 && next_pass_ns > now_ns)
        batches += (next_pass_ns - now_ns) / batch_gap_ns;
    uint64_t share = behind / batches + (behind % batches != 0);
    if (share > RECORDER_CHUNK_MAX)
        return RECORDER_CHUNK_MAX;
    return share > RECORDER_CHUNK_MIN ? share : RECORDER_CHUNK_MIN;
}

uint64_t recorder_keep_cutoff(uint64_t now_ns, uint64_t keep_ns)
{
    return keep_ns != 0 && now_ns > keep_ns ? now_ns - keep_ns : 0;
}

bool recorder_pass_due(uint64_t last_pass_ns, uint64_t now_ns)
{
    return last_pass_ns == 0 ||
           (now_ns >= last_pass_ns && now_ns - last_pass_ns >= RECORDER_PERIOD_NS);
}
