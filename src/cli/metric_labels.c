/*
 * metric_labels.c: the human side of replay metrics (metric_labels.h): a
 * const table from CUPTI/Nsight Compute names to a name, a unit and a side
 * of speed of light; rules on a name's suffix for metrics the table does
 * not know; values written in their unit; and names shortened with a
 * middle ellipsis, counted in display characters.
 *
 * Pure presentation: it must never allocate, keep state, or change a
 * value (a label only says what the number is; --wide and --format json|csv
 * show the raw one), and never split a UTF-8 sequence or write past a
 * buffer (snprintf semantics: output is cut to the buffer, NUL-terminated).
 */
#include "cli/metric_labels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* ---- the table ---- */

typedef struct metric_entry {
    const char *metric;
    cli_metric_label label;
} metric_entry;

enum { SIDE_NONE = 0, SIDE_COMPUTE = 1, SIDE_MEMORY = 2 };

#define PCT   CLI_METRIC_UNIT_PERCENT
#define BYTES CLI_METRIC_UNIT_BYTES
#define NS    CLI_METRIC_UNIT_NANOSECONDS
#define CYC   CLI_METRIC_UNIT_CYCLES
#define COUNT CLI_METRIC_UNIT_COUNT
#define PLAIN CLI_METRIC_UNIT_NONE

/*
 * The metrics of flare's sets (src/replay/replay_selection.c), the launch
 * geometry the simulated device measures, the PM sampling metrics of
 * docs/pm-sampling.md, and a few more of Nsight Compute's speed of light.
 * Ordered from the most telling to the least: cli_metric_rank is the
 * place here, and the report's compact tables show the first ones first.
 * Only ".pct_of_peak" throughputs are of_peak; achieved occupancy is a
 * percentage of the warps an SM can hold, not a throughput, so it is not.
 */
static const metric_entry metric_table[] = {
    {"gpu__time_duration.sum", {"Duration", NS, 0, SIDE_NONE}},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", {"SM throughput", PCT, 1, SIDE_COMPUTE}},
    {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
     {"Memory throughput", PCT, 1, SIDE_MEMORY}},
    {"sm__warps_active.avg.pct_of_peak_sustained_active",
     {"Achieved occupancy", PCT, 0, SIDE_COMPUTE}},
    {"dram__bytes_read.sum", {"DRAM read", BYTES, 0, SIDE_MEMORY}},
    {"dram__bytes_write.sum", {"DRAM write", BYTES, 0, SIDE_MEMORY}},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
     {"DRAM throughput", PCT, 1, SIDE_MEMORY}},
    {"l1tex__throughput.avg.pct_of_peak_sustained_active",
     {"L1/TEX throughput", PCT, 1, SIDE_MEMORY}},
    {"lts__throughput.avg.pct_of_peak_sustained_elapsed", {"L2 throughput", PCT, 1, SIDE_MEMORY}},
    {"lts__t_sector_hit_rate.pct", {"L2 hit rate", PCT, 0, SIDE_MEMORY}},
    {"l1tex__t_sector_hit_rate.pct", {"L1/TEX hit rate", PCT, 0, SIDE_MEMORY}},
    {"lts__t_bytes.sum", {"L2 bytes", BYTES, 0, SIDE_MEMORY}},
    {"l1tex__t_bytes.sum", {"L1/TEX bytes", BYTES, 0, SIDE_MEMORY}},
    {"dram__bytes.sum", {"DRAM bytes", BYTES, 0, SIDE_MEMORY}},
    {"smsp__inst_executed.sum", {"Instructions executed", COUNT, 0, SIDE_COMPUTE}},
    {"sm__inst_executed_realtime.avg.per_cycle_active",
     {"Instructions per cycle", PLAIN, 0, SIDE_COMPUTE}},
    {"sm__busy.pct", {"SM busy", PCT, 0, SIDE_COMPUTE}},
    {"sm__cycles_active.avg", {"SM active cycles", CYC, 0, SIDE_COMPUTE}},
    {"gpc__cycles_elapsed.max", {"Elapsed cycles", CYC, 0, SIDE_NONE}},
    {"gr__cycles_elapsed.max", {"Elapsed cycles (GR)", CYC, 0, SIDE_NONE}},
    {"gr__cycles_active.avg", {"GR active cycles", CYC, 0, SIDE_NONE}},
    {"sm__pipe_tensor_cycles_active.avg", {"Tensor pipe cycles", CYC, 0, SIDE_COMPUTE}},
    {"sm__pipe_tensor_cycles_active_realtime.avg",
     {"Tensor pipe cycles (RT)", CYC, 0, SIDE_COMPUTE}},
    {"sm__pipe_tensor_op_hmma_cycles_active.avg", {"HMMA pipe cycles", CYC, 0, SIDE_COMPUTE}},
    {"sm__pipe_tensor_op_hmma_cycles_active_realtime.avg",
     {"HMMA pipe cycles (RT)", CYC, 0, SIDE_COMPUTE}},
    {"launch__grid_size", {"Grid size", PLAIN, 0, SIDE_NONE}},
    {"launch__block_size", {"Block size", PLAIN, 0, SIDE_NONE}},
    {"launch__thread_count", {"Threads", PLAIN, 0, SIDE_NONE}},
    {"launch__registers_per_thread", {"Registers per thread", PLAIN, 0, SIDE_NONE}},
};
#define METRIC_TABLE_COUNT (sizeof(metric_table) / sizeof(metric_table[0]))

int cli_metric_rank(const char *metric)
{
    for (size_t index = 0; metric != NULL && index < METRIC_TABLE_COUNT; index++)
        if (strcmp(metric_table[index].metric, metric) == 0)
            return (int)index;
    return -1;
}

static int ends_with(const char *text, const char *suffix)
{
    size_t length = strlen(text), suffix_length = strlen(suffix);
    return length >= suffix_length && strcmp(text + length - suffix_length, suffix) == 0;
}

/* An unknown metric's unit, from its name: a percentage (".pct",
 * ".pct_of_peak_...", "_pct"), a rate (".per_second", ".per_cycle_...":
 * a plain number, so "bytes" in "dram__bytes.sum.per_second" is not taken
 * for a size), bytes, a duration, cycles, instructions, or a plain number. */
static cli_metric_unit unit_from_suffix(const char *metric)
{
    if (strstr(metric, ".pct") != NULL || ends_with(metric, "_pct"))
        return PCT;
    if (strstr(metric, ".per_") != NULL || strstr(metric, ".ratio") != NULL)
        return PLAIN;
    if (strstr(metric, "bytes") != NULL)
        return BYTES;
    if (strstr(metric, "duration") != NULL)
        return NS;
    if (strstr(metric, "cycles") != NULL)
        return CYC;
    if (strstr(metric, "inst_executed") != NULL || strstr(metric, "sectors") != NULL ||
        strstr(metric, "requests") != NULL)
        return COUNT;
    return PLAIN;
}

cli_metric_label cli_metric_label_of(const char *metric)
{
    const char *name = metric != NULL ? metric : "";
    int rank = cli_metric_rank(name);
    if (rank >= 0)
        return metric_table[rank].label;
    return (cli_metric_label){name, unit_from_suffix(name), 0, SIDE_NONE};
}

/* ---- values ---- */

/* A value scaled by thousands: its unit and the next larger ones, from the
 * one it is written in without a prefix. */
static const char *const byte_units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
static const char *const count_units[] = {"", "k", "M", "G", "T", "P", "E"};
static const char *const cycle_units[] = {"cycles",   "k cycles", "M cycles", "G cycles",
                                          "T cycles", "P cycles", "E cycles"};
#define UNIT_STEPS 7

/* magnitude (not negative) with one decimal, as it will print. */
static double rounded_to_tenths(double magnitude)
{
    return round(magnitude * 10.0) / 10.0;
}

/*
 * value in the largest unit in which it is at least 1 (one decimal there;
 * in the first unit a whole number stays whole: "512 B", "0.5 B"), past
 * the last unit in three significant digits. Returns snprintf's count.
 */
static int format_thousands(double value, const char *const *units, char *buffer, size_t size)
{
    const char *sign = value < 0 ? "-" : "";
    double magnitude = fabs(value);
    size_t step = 0;
    while (step + 1 < UNIT_STEPS && rounded_to_tenths(magnitude) >= 1000.0) {
        magnitude /= 1000.0;
        step++;
    }
    const char *space = units[step][0] != '\0' ? " " : "";
    if (rounded_to_tenths(magnitude) >= 1000.0)
        return snprintf(buffer, size, "%s%.3g%s%s", sign, magnitude, space, units[step]);
    int decimals = step == 0 && magnitude == floor(magnitude) ? 0 : 1;
    return snprintf(buffer, size, "%s%.*f%s%s", sign, decimals, magnitude, space, units[step]);
}

/* A whole number below 1e15 with its thousands grouped: "-1,234,567". */
static void format_grouped(double value, char *buffer, size_t size)
{
    char digits[32];
    snprintf(digits, sizeof(digits), "%.0f", fabs(value));
    size_t length = strlen(digits), used = 0;
    char grouped[48];
    if (value < 0)
        grouped[used++] = '-';
    for (size_t at = 0; at < length; at++) {
        if (at > 0 && (length - at) % 3 == 0)
            grouped[used++] = ',';
        grouped[used++] = digits[at];
    }
    grouped[used] = '\0';
    snprintf(buffer, size, "%s", grouped);
}

/* A plain number: whole numbers grouped ("4,096"), fractions in four
 * significant digits ("3.5", "0.25"), and from 1000 on rounded to whole
 * (grouped); from 1e15 on in four significant digits ("1e+16"). */
static void format_plain(double value, char *buffer, size_t size)
{
    double magnitude = fabs(value);
    if (magnitude >= 1e15)
        snprintf(buffer, size, "%.4g", value);
    else if (magnitude >= 1000.0 || value == floor(value))
        format_grouped(round(value), buffer, size);
    else
        snprintf(buffer, size, "%.4g", value);
}

/* Nanoseconds as the rest of the report writes them (cli_format_duration:
 * "2500 ns", "38.0 us"), rounded to a whole nanosecond, below 10 ns with
 * two decimals when not whole ("0.25 ns"); past what a uint64 holds in
 * seconds with three significant digits. */
static void format_nanoseconds(double value, char *buffer, size_t size)
{
    const char *sign = value < 0 ? "-" : "";
    double magnitude = fabs(value);
    char text[40];
    if (magnitude < 10.0 && magnitude != floor(magnitude))
        snprintf(text, sizeof(text), "%.2f ns", magnitude);
    else if (magnitude < 1.8e19)
        cli_format_duration((uint64_t)(magnitude + 0.5), text, sizeof(text));
    else
        snprintf(text, sizeof(text), "%.3g s", magnitude / 1e9);
    snprintf(buffer, size, "%s%s", sign, text);
}

char *cli_metric_format(const char *metric, double value, char *buffer, size_t size)
{
    if (size == 0)
        return buffer;
    if (isnan(value)) {
        snprintf(buffer, size, "n/a");
        return buffer;
    }
    if (isinf(value)) {
        snprintf(buffer, size, "%s", value < 0 ? "-inf" : "inf");
        return buffer;
    }
    switch (cli_metric_label_of(metric).unit) {
    case CLI_METRIC_UNIT_PERCENT:
        if (fabs(value) >= 1e6)
            snprintf(buffer, size, "%.3g%%", value);
        else
            snprintf(buffer, size, "%.1f%%", value);
        break;
    case CLI_METRIC_UNIT_BYTES:
        format_thousands(value, byte_units, buffer, size);
        break;
    case CLI_METRIC_UNIT_NANOSECONDS:
        format_nanoseconds(value, buffer, size);
        break;
    case CLI_METRIC_UNIT_CYCLES:
        format_thousands(value, cycle_units, buffer, size);
        break;
    case CLI_METRIC_UNIT_COUNT:
        format_thousands(value, count_units, buffer, size);
        break;
    default:
        format_plain(value, buffer, size);
        break;
    }
    return buffer;
}

/* ---- names ---- */

/*
 * The length of the display character at text: a well-formed UTF-8
 * sequence (Unicode's table 3-7, as output.c checks it: no overlong forms,
 * no surrogates, nothing above U+10FFFF) or, when the bytes there do not
 * form one, that one byte. 0 at the end of text. Never reads past the NUL
 * (NUL is never a continuation byte).
 */
static size_t character_length(const unsigned char *text)
{
    unsigned char lead = text[0];
    if (lead < 0x80)
        return lead != 0;
    size_t length;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        low = lead == 0xE0 ? 0xA0 : 0x80;
        high = lead == 0xED ? 0x9F : 0xBF;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        low = lead == 0xF0 ? 0x90 : 0x80;
        high = lead == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 1;
    }
    if (text[1] < low || text[1] > high)
        return 1;
    for (size_t at = 2; at < length; at++)
        if (text[at] < 0x80 || text[at] > 0xBF)
            return 1;
    return length;
}

size_t cli_display_width(const char *text)
{
    size_t characters = 0;
    const unsigned char *at = (const unsigned char *)(text != NULL ? text : "");
    for (size_t length; (length = character_length(at)) != 0; at += length)
        characters++;
    return characters;
}

/* The text after the first count display characters of text. */
static const char *skip_characters(const char *text, size_t count)
{
    const unsigned char *at = (const unsigned char *)text;
    for (size_t length; count > 0 && (length = character_length(at)) != 0; count--)
        at += length;
    return (const char *)at;
}

/* Where a name is built: buffer of size bytes, used of them written. Once a
 * piece does not fit (with the NUL), nothing more is added, so the result
 * is a prefix of whole characters. */
typedef struct name_builder {
    char *buffer;
    size_t size;
    size_t used;
    int full;
} name_builder;

/* Appends the first count display characters of text, each only whole. */
static void append_characters(name_builder *name, const char *text, size_t count)
{
    const unsigned char *at = (const unsigned char *)text;
    for (size_t length; !name->full && count > 0 && (length = character_length(at)) != 0; count--) {
        if (name->used + length >= name->size) {
            name->full = 1;
            break;
        }
        memcpy(name->buffer + name->used, at, length);
        name->used += length;
        at += length;
    }
    name->buffer[name->used] = '\0';
}

char *cli_shorten_name(const char *name, size_t width, char *buffer, size_t size)
{
    if (size == 0)
        return buffer;
    const char *text = name != NULL ? name : "";
    name_builder built = {buffer, size, 0, 0};
    buffer[0] = '\0';
    size_t characters = cli_display_width(text);
    if (characters <= width || width < 2) {
        append_characters(&built, text, characters <= width ? characters : width);
        return buffer;
    }
    /* The ellipsis takes one character; the start gets the odd one. */
    size_t kept = width - 1, tail = kept / 2, head = kept - tail;
    append_characters(&built, text, head);
    append_characters(&built, "\xE2\x80\xA6", 1); /* U+2026 "…" */
    append_characters(&built, skip_characters(text, characters - tail), tail);
    return buffer;
}
