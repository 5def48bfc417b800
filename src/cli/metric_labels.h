/*
 * metric_labels.h: replay metrics (CUPTI/Nsight Compute names such as
 * "dram__bytes_read.sum") as people read them: a human name ("DRAM read"),
 * a unit, and values written in that unit ("5.3 MB", "36.0%", "38.0 us").
 * Shared by the text report's replay sections and the HTML report's
 * speed-of-light bars, so both say the same thing.
 *
 * A metric the table does not know keeps its raw name and is written as a
 * plain number: a label is a presentation, never a change of the value.
 * Must never allocate or keep state: lookups read a const table.
 */
#ifndef FLARE_CLI_METRIC_LABELS_H
#define FLARE_CLI_METRIC_LABELS_H

#include <stddef.h>

typedef enum cli_metric_unit {
    CLI_METRIC_UNIT_NONE = 0,    /* a plain number ("1,234,567" or "3.5") */
    CLI_METRIC_UNIT_PERCENT,     /* 0..100: "36.0%" */
    CLI_METRIC_UNIT_BYTES,       /* "5.3 MB" (decimal units, as Nsight Compute) */
    CLI_METRIC_UNIT_NANOSECONDS, /* "38.0 us", as cli_format_duration */
    CLI_METRIC_UNIT_CYCLES,      /* "12.3 k cycles" */
    CLI_METRIC_UNIT_COUNT,       /* an event count: "4.2 M" */
} cli_metric_unit;

typedef struct cli_metric_label {
    const char *name; /* "DRAM read"; the raw metric name when unknown */
    cli_metric_unit unit;
    /* A throughput against the unit's peak (a ".pct_of_peak_..." metric):
     * what a speed-of-light bar shows, 0..100. */
    int of_peak;
    /* Which side of speed of light: 1 compute (SM), 2 memory (DRAM, L1,
     * L2), 0 neither. */
    int side;
} cli_metric_label;

/* The label of metric (never NULL). Known metrics come from a table; an
 * unknown one gets its raw name, a unit guessed from its suffix
 * ("bytes", ".pct", "duration", "cycles") and of_peak 0. */
cli_metric_label cli_metric_label_of(const char *metric);

/* Writes value in the metric's unit into buffer ("n/a" for NaN); returns
 * buffer. Never truncates silently past size: snprintf semantics. */
char *cli_metric_format(const char *metric, double value, char *buffer, size_t size);

/* Shortens name to at most width display characters (UTF-8 aware),
 * replacing its middle with "…" when longer, so both the start (the
 * namespace) and the end (template arguments) stay readable; returns
 * buffer. width < 2 copies as much as fits. */
char *cli_shorten_name(const char *name, size_t width, char *buffer, size_t size);

/* Added for the text report's tables (the functions above are unchanged). */

/* The metric's place in the table of known metrics, which lists them from
 * the most telling to the least (time, speed of light, occupancy, traffic,
 * counts, launch geometry): 0 for gpu__time_duration.sum. -1 when unknown,
 * so a caller sorting by rank puts unknown metrics last. */
int cli_metric_rank(const char *metric);

/* The display characters of text as cli_shorten_name counts them: one per
 * well-formed UTF-8 sequence, one per byte that is not part of one (the
 * terminal shows it as one replacement). NULL counts 0. So a column of
 * names can be padded by what shows, not by bytes. An East Asian wide
 * character (CJK) takes two terminal columns and counts one here. */
size_t cli_display_width(const char *text);

#endif /* FLARE_CLI_METRIC_LABELS_H */
