/*
 * report_span.c: the range replay section of `flare report`
 * (docs/replay.md#range-replay: per span, what it recorded, its passes and
 * snapshot, and a table of its kernels with a column per metric, readable
 * by default and whole with --wide, as report_replay.c; a value with a
 * note on how it was produced, a PM-sampled span's, with its error bound
 * and status, under a line saying how). Printed only when the session has
 * any. Must never change what it reads.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/metric_labels.h"
#include "cli/report.h"
#include "cli/report_replay_common.h"
#include "replay/replay.h"

/* ---- range replay ---- */

typedef struct span_section {
    int wide;     /* --wide: raw names and values, whole kernel names, every metric */
    size_t width; /* otherwise the width the tables fit (report_replay_width) */
    int spans;
} span_section;

/* A value's text: with its error bound and status where it has a note. */
#define SPAN_VALUE_TEXT_MAX 96

static void span_metric_text(const store_replay_launch_row *launch, const char *name, int wide,
                             char *text, size_t size)
{
    report_replay_launch_metric_text(launch, name, wide, text, size);
}

/* The metric names of the span's kernels, each once, in the order they
 * first appear (the order asked for). Returns how many. */
static size_t span_metric_names(const store_replay_span_row *row, const char **names,
                                size_t capacity)
{
    size_t name_count = 0;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++)
        name_count = report_replay_union_add(names, name_count, capacity,
                                             row->kernel_rows[kernel].metric_names,
                                             row->kernel_rows[kernel].metric_count);
    return name_count;
}

/* The kernel name column's width: the longest name, at least "kernel". */
static size_t span_longest_name(const store_replay_span_row *row)
{
    size_t width = 6; /* "kernel" */
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        size_t length = cli_display_width(row->kernel_rows[kernel].kernel);
        width = length > width ? length : width;
    }
    return width;
}

/* A span's kernels as stored (--wide): one column per metric in the order
 * asked for, each as wide as its name (or its widest value), whole kernel
 * names. */
static void span_print_kernels_wide(const store_replay_span_row *row)
{
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = span_metric_names(row, names, sizeof(names) / sizeof(names[0]));
    /* The name column is padded only when metric columns follow it. */
    int pad = name_count > 0 ? (int)span_longest_name(row) : 0;
    printf("    %10s %5s %-*s", "launch", "nth", pad, "kernel");
    int widths[REPLAY_RECORD_METRIC_MAX * 2];
    for (size_t name = 0; name < name_count; name++) {
        widths[name] = (int)strlen(names[name]);
        for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
            char text[SPAN_VALUE_TEXT_MAX];
            span_metric_text(&row->kernel_rows[kernel], names[name], 1, text, sizeof(text));
            int shown = (int)cli_display_width(text);
            widths[name] = shown > widths[name] ? shown : widths[name];
        }
        printf("  %*s", widths[name], names[name]);
    }
    printf("\n");
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        printf("    %10llu %5llu ", (unsigned long long)launch->launch_id,
               (unsigned long long)launch->launch_index + 1);
        size_t shown = cli_display_width(launch->kernel);
        printf("%s%*s", launch->kernel, shown < (size_t)pad ? pad - (int)shown : 0, "");
        for (size_t name = 0; name < name_count; name++) {
            char text[SPAN_VALUE_TEXT_MAX];
            span_metric_text(launch, names[name], 1, text, sizeof(text));
            int length = (int)cli_display_width(text);
            printf("  %*s%s", length < widths[name] ? widths[name] - length : 0, "", text);
        }
        printf("\n");
    }
}

/* ---- range replay: the readable table ---- */

/* The kernel name column's least width while metric columns are being
 * fitted: longer names are shortened to it rather than drop a metric. */
#define SPAN_NAME_WIDTH_MIN 24
/* Headings: an unknown metric's raw name is shortened to this. */
#define SPAN_HEADING_MAX 24

/* A metric column: its heading (the label, on one line or split in two
 * at a space) and its width (the heading's, or its widest value's). */
typedef struct span_column {
    const char *metric;
    char label[SPAN_HEADING_MAX * 4 + 1];
    size_t split;       /* as laid out: bytes of label on the first line; 0: one line */
    size_t width;       /* as laid out: one of the two below */
    size_t split_at;    /* where the label splits best; 0: on one line whatever */
    size_t whole_width; /* with the label on one line */
    size_t split_width; /* with the label split where it is shortest */
} span_column;

/* Where label splits at a space into the two lines whose longer one is
 * the shortest (into *split; 0 when no split is shorter); returns that
 * line's width. */
static size_t heading_split(const char *label, size_t *split)
{
    size_t best = cli_display_width(label);
    *split = 0;
    for (const char *space = strchr(label, ' '); space != NULL; space = strchr(space + 1, ' ')) {
        char first[SPAN_HEADING_MAX * 4 + 1];
        snprintf(first, sizeof(first), "%.*s", (int)(space - label), label);
        size_t one = cli_display_width(first), two = cli_display_width(space + 1);
        size_t longer = one > two ? one : two;
        if (longer < best) {
            best = longer;
            *split = (size_t)(space - label);
        }
    }
    return best;
}

static void span_column_make(const store_replay_span_row *row, const char *metric,
                             span_column *column)
{
    column->metric = metric;
    cli_shorten_name(cli_metric_label_of(metric).name, SPAN_HEADING_MAX, column->label,
                     sizeof(column->label));
    size_t values = 0;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        char text[SPAN_VALUE_TEXT_MAX];
        span_metric_text(&row->kernel_rows[kernel], metric, 0, text, sizeof(text));
        size_t length = cli_display_width(text);
        values = length > values ? length : values;
    }
    size_t whole = cli_display_width(column->label);
    size_t split = heading_split(column->label, &column->split_at);
    column->whole_width = whole > values ? whole : values;
    column->split_width = split > values ? split : values;
    /* A label that fits its column whole stays on one line. */
    if (whole <= column->split_width)
        column->split_at = 0;
}

/* Lays every column out with its label on one line, or each split in two. */
static void span_columns_use(span_column *columns, size_t count, int split)
{
    for (size_t column = 0; column < count; column++) {
        columns[column].width = split ? columns[column].split_width : columns[column].whole_width;
        columns[column].split = split ? columns[column].split_at : 0;
    }
}

/* How a span's readable table is laid out. */
typedef struct span_layout {
    size_t launch_width;
    size_t nth_width;
    size_t name_width;
    size_t shown; /* metric columns that fit, the first ones by rank */
} span_layout;

static size_t digits(unsigned long long value)
{
    size_t count = 1;
    while (value >= 10) {
        value /= 10;
        count++;
    }
    return count;
}

/* Fits the table to width: metric columns in rank order while the kernel
 * name column keeps SPAN_NAME_WIDTH_MIN (or its longest name, if
 * shorter), at least one; the names get what is left, up to the longest. */
static void span_layout_fit(const store_replay_span_row *row, const span_column *columns,
                            size_t column_count, size_t width, span_layout *layout)
{
    *layout = (span_layout){.launch_width = 6, .nth_width = 3};
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        size_t launch_digits = digits(launch->launch_id);
        size_t nth_digits = digits(launch->launch_index + 1);
        layout->launch_width =
            launch_digits > layout->launch_width ? launch_digits : layout->launch_width;
        layout->nth_width = nth_digits > layout->nth_width ? nth_digits : layout->nth_width;
    }
    size_t fixed = 4 + layout->launch_width + 1 + layout->nth_width + 1;
    size_t longest = span_longest_name(row);
    size_t name_least = longest < SPAN_NAME_WIDTH_MIN ? longest : SPAN_NAME_WIDTH_MIN;
    size_t used = fixed + name_least;
    while (layout->shown < column_count &&
           (layout->shown == 0 || used + 2 + columns[layout->shown].width <= width))
        used += 2 + columns[layout->shown++].width;
    size_t room = width > used ? width - used : 0;
    layout->name_width = name_least + room < longest ? name_least + room : longest;
}

/* The table's heading: a first line for the labels split in two (only
 * when one is), then launch, nth, kernel and the labels' last lines. */
static void span_print_headings(const span_layout *layout, const span_column *columns)
{
    int split = 0;
    for (size_t column = 0; column < layout->shown; column++)
        split |= columns[column].split != 0;
    for (int first_line = split; first_line >= 0; first_line--) {
        report_table_line line = {4};
        report_line_cell(&line, first_line ? "" : "launch", layout->launch_width, 0);
        report_line_space(&line, 1);
        report_line_cell(&line, first_line ? "" : "nth", layout->nth_width, 0);
        report_line_space(&line, 1);
        report_line_cell(&line, first_line ? "" : "kernel", layout->shown ? layout->name_width : 0,
                         1);
        for (size_t column = 0; column < layout->shown; column++) {
            const span_column *heading = &columns[column];
            char text[SPAN_HEADING_MAX * 4 + 1];
            if (first_line)
                snprintf(text, sizeof(text), "%.*s", (int)heading->split, heading->label);
            else
                snprintf(text, sizeof(text), "%s",
                         heading->label + (heading->split ? heading->split + 1 : 0));
            report_line_space(&line, 2);
            report_line_cell(&line, text, heading->width, 0);
        }
        printf("\n");
    }
}

static void span_print_row(const store_replay_launch_row *launch, const span_layout *layout,
                           const span_column *columns)
{
    char text[REPLAY_WIDTH_MAX * 4 + 1];
    report_table_line line = {4};
    snprintf(text, sizeof(text), "%llu", (unsigned long long)launch->launch_id);
    report_line_cell(&line, text, layout->launch_width, 0);
    report_line_space(&line, 1);
    snprintf(text, sizeof(text), "%llu", (unsigned long long)launch->launch_index + 1);
    report_line_cell(&line, text, layout->nth_width, 0);
    report_line_space(&line, 1);
    cli_shorten_name(launch->kernel, layout->name_width, text, sizeof(text));
    report_line_cell(&line, text, layout->shown ? layout->name_width : 0, 1);
    for (size_t column = 0; column < layout->shown; column++) {
        span_metric_text(launch, columns[column].metric, 0, text, sizeof(text));
        report_line_space(&line, 2);
        report_line_cell(&line, text, columns[column].width, 0);
    }
    printf("\n");
}

/* Names the metric columns that did not fit, lines broken before width
 * (continuation lines indented by six). */
static void span_print_not_shown(const span_column *columns, size_t first, size_t count,
                                 size_t width)
{
    static const char intro[] = "    not shown (flare report --wide shows all):";
    size_t at = sizeof(intro) - 1;
    fputs(intro, stdout);
    for (size_t column = first; column < count; column++) {
        int comma = column + 1 < count;
        size_t length = 1 + cli_display_width(columns[column].label) + (size_t)comma;
        if (at > 6 && at + length > width) {
            printf("\n     ");
            at = 5;
        }
        printf(" %s%s", columns[column].label, comma ? "," : "");
        at += length;
    }
    printf("\n");
}

/*
 * A span's kernels, readable: a row per kernel in launch order, and the
 * metrics most telling first, as many as fit the width beside a kernel
 * name column of at least SPAN_NAME_WIDTH_MIN; a line names the others.
 * Kernels are rows, not columns, because a span may hold hundreds of
 * them and their names are long; a block per kernel would run to a dozen
 * lines each. The key metrics side by side compare kernels at a glance.
 */
static void span_print_kernels_labelled(const store_replay_span_row *row, size_t width)
{
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    span_column columns[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = span_metric_names(row, names, sizeof(names) / sizeof(names[0]));
    report_replay_sort_by_rank(names, name_count);
    for (size_t name = 0; name < name_count; name++)
        span_column_make(row, names[name], &columns[name]);
    /* Headings on two lines only when that shows more: another metric, or
     * more of the kernels' names. */
    span_layout layout, one_line;
    span_columns_use(columns, name_count, 0);
    span_layout_fit(row, columns, name_count, width, &one_line);
    span_columns_use(columns, name_count, 1);
    span_layout_fit(row, columns, name_count, width, &layout);
    if (one_line.shown == layout.shown && one_line.name_width == layout.name_width) {
        span_columns_use(columns, name_count, 0);
        layout = one_line;
    }
    span_print_headings(&layout, columns);
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++)
        span_print_row(&row->kernel_rows[kernel], &layout, columns);
    if (layout.shown < name_count)
        span_print_not_shown(columns, layout.shown, name_count, width);
}

/* One row per kernel in launch order, then what was lost. */
static void span_print_kernels(const store_replay_span_row *row, const span_section *section)
{
    if (row->kernel_count == 0) {
        printf("    (no kernel recorded)\n");
        return;
    }
    if (section->wide)
        span_print_kernels_wide(row);
    else
        span_print_kernels_labelled(row, section->width);
    if (row->kernel_count < row->kernels)
        printf("    (%u kernel(s) recorded, %zu stored: the other records were lost; see "
               "Dropped data)\n",
               row->kernels, row->kernel_count);
}

/* The span's first line: which span, where, and what became of it. */
static void span_print_heading(const store_replay_span_row *row)
{
    char which[64], device[32];
    /* Explicit spans (flare_replay_range_begin) have no occurrence. */
    if (row->occurrence > 0)
        snprintf(which, sizeof(which), "occurrence %llu", (unsigned long long)row->occurrence);
    else
        snprintf(which, sizeof(which), "flare_replay_range_begin");
    if (row->device >= 0)
        snprintf(device, sizeof(device), "device %d", row->device);
    else
        snprintf(device, sizeof(device), "no device");
    printf("\n  span \"%s\" (%s; pid %lld, %s; span %llu): ", row->name, which, (long long)row->pid,
           device, (unsigned long long)row->span_id);
    if (row->declined)
        printf("declined: %s\n", row->reason);
    else
        printf("replayed\n");
}

/* How the span's values were produced, on a line of its own where its
 * kernels' values carry notes (range replay by PM sampling). */
static void span_print_method(const store_replay_span_row *row)
{
    char text[256];
    if (report_replay_span_method(row, text, sizeof(text)))
        printf("    %s\n", text);
}

/* A replayed span's passes, snapshot and note. */
static void span_print_replayed(const store_replay_span_row *row, const char *took)
{
    char passes[32], per_pass[32], snapshot[32], restore[32];
    report_replay_format_passes(row->passes_run, row->passes_planned, passes, sizeof(passes));
    report_replay_format_pass_mean(row->passes_kept, row->pass_mean_ns, per_pass, sizeof(per_pass));
    cli_format_bytes(row->snapshot_bytes, snapshot, sizeof(snapshot));
    cli_format_duration(row->restore_ns, restore, sizeof(restore));
    printf("    %u kernel(s), %u copies/memsets; %s pass(es), %s per pass; %s collecting in "
           "all\n",
           row->kernels, row->copies, passes, per_pass, took);
    printf("    %s snapshotted (%s shadows); restores took %s in all%s%s\n", snapshot,
           report_replay_shadow_name(row->snapshot_bytes, row->shadow_on_device, "no"), restore,
           row->collector[0] ? "; metrics from " : "", row->collector);
    if (row->reason[0] != '\0')
        printf("    note: %s\n", row->reason);
    span_print_method(row);
}

static int span_print(const store_replay_span_row *row, void *user)
{
    span_section *section = user;
    section->spans++;
    span_print_heading(row);
    char took[32];
    report_replay_format_elapsed(row->begin_ns, row->end_ns, took, sizeof(took));
    if (row->declined) {
        /* What a declined span recorded before the decline: its kernels
         * below ran once, with no values. */
        printf("    ran once, as without flare: nothing was snapshotted or restored; %s from its "
               "start to its end\n",
               took);
        printf("    recorded before the decline: %u kernel(s), %u copies/memsets\n", row->kernels,
               row->copies);
    } else {
        span_print_replayed(row, took);
    }
    span_print_kernels(row, section);
    return 0;
}

int cli_report_range_replay(cli_report_run *run)
{
    const store_replay_summary *summary = &run->replay;
    if (summary->spans <= 0)
        return 0;
    printf("\nRange replay (flare replay --range; per span, its kernels in launch order)\n");
    span_section spans = {.wide = run->wide, .width = report_replay_width()};
    int status = store_read_replay_spans(run->database, span_print, &spans);
    report_replay_read_succeeded(run, status, 0);
    report_replay_totals_text totals;
    report_replay_format_totals(summary->span_snapshot_bytes, summary->span_bytes_restored,
                                summary->span_collection_ns, &totals);
    printf("\n  In all: %lld span(s) replayed, %lld declined; %lld kernel(s) in them; %llu "
           "passes; %s snapshotted, %s restored; %s collecting\n",
           (long long)summary->spans_replayed, (long long)summary->spans_declined,
           (long long)summary->span_kernels, (unsigned long long)summary->span_passes,
           totals.snapshot, totals.restored, totals.took);
    return 0;
}
