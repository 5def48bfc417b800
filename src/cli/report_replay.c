/*
 * report_replay.c: the kernel replay section of `flare report`
 * (docs/replay.md: per kernel, a table of its chosen launches, the
 * reasons, and a table of metric values, launches side by side). Printed
 * only when the session has any, so a plain trace's report stays as it
 * was. The range replay section is report_span.c; what both share,
 * report_replay_common.c.
 *
 * By default metrics are shown as people read them (metric_labels.h:
 * "DRAM read", "5.3 MB"), most telling first, and kernel names shortened
 * with a middle ellipsis, in tables that fit the report's width ($COLUMNS,
 * else 100 columns). --wide (cli_report_run.wide) prints what the database
 * holds: raw metric names and values, whole kernel names, every metric.
 *
 * It must never print half a table when memory runs out (it says so and
 * the report fails), and never change what it reads: a kernel's launches
 * are copied out of the reader's callbacks, since their strings live only
 * for the callback, and laid out once all of them have been read.
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

/* ---- kernel replay ---- */

/* One launch copied out of the reader's callback (its strings and arrays
 * live only for the callback), so a kernel's launches can be laid out as
 * one table once they have all been read. */
typedef struct replay_launch_copy {
    store_replay_launch_row row; /* pointers cleared; the copies below hold the data */
    char *reason;
    char *collector;
    size_t metric_count;
    char **metric_names;
    double *metric_values;
    int *metric_has_value;
} replay_launch_copy;

typedef struct replay_section {
    int wide;     /* --wide: raw names and values, whole kernel names */
    size_t width; /* otherwise the width the tables fit (report_replay_width) */
    char *kernel; /* of the launches held */
    replay_launch_copy *launches;
    size_t count;
    size_t capacity;
    int failed; /* out of memory: the section says so instead of printing half */
    /* Totals over every kernel. */
    long long kernels;
    long long replayed;
    long long declined;
    unsigned long long passes;
    uint64_t snapshot_bytes;
    uint64_t bytes_restored;
    uint64_t collection_ns;
} replay_section;

static void replay_launch_copy_free(replay_launch_copy *copy)
{
    free(copy->reason);
    free(copy->collector);
    for (size_t index = 0; index < copy->metric_count; index++)
        free(copy->metric_names[index]);
    free(copy->metric_names);
    free(copy->metric_values);
    free(copy->metric_has_value);
}

static void replay_section_clear(replay_section *section)
{
    for (size_t index = 0; index < section->count; index++)
        replay_launch_copy_free(&section->launches[index]);
    section->count = 0;
    free(section->kernel);
    section->kernel = NULL;
}

static char *copy_text(const char *text)
{
    return strdup(text != NULL ? text : "");
}

/* Copies row into copy. Returns 0, or -1 out of memory (copy then holds
 * what was copied, for replay_launch_copy_free). */
static int replay_copy_launch(const store_replay_launch_row *row, replay_launch_copy *copy)
{
    memset(copy, 0, sizeof(*copy));
    copy->row = *row;
    copy->row.kernel = copy->row.reason = copy->row.collector = NULL;
    copy->row.metric_names = NULL;
    copy->row.metric_values = NULL;
    copy->row.metric_has_value = NULL;
    copy->reason = copy_text(row->reason);
    copy->collector = copy_text(row->collector);
    if (copy->reason == NULL || copy->collector == NULL)
        return -1;
    if (row->metric_count == 0)
        return 0;
    copy->metric_names = calloc(row->metric_count, sizeof(*copy->metric_names));
    copy->metric_values = calloc(row->metric_count, sizeof(*copy->metric_values));
    copy->metric_has_value = calloc(row->metric_count, sizeof(*copy->metric_has_value));
    if (copy->metric_names == NULL || copy->metric_values == NULL || copy->metric_has_value == NULL)
        return -1;
    for (size_t index = 0; index < row->metric_count; index++) {
        copy->metric_names[index] = copy_text(row->metric_names[index]);
        if (copy->metric_names[index] == NULL)
            return -1;
        copy->metric_count = index + 1;
        copy->metric_values[index] = row->metric_values[index];
        copy->metric_has_value[index] = row->metric_has_value[index];
    }
    return 0;
}

/* A launch column of a kernel's metrics table: the launch (its index in
 * the section) and, in the readable table, its width. */
typedef struct launch_column {
    size_t launch;
    size_t width;
} launch_column;

static void launch_heading(const replay_launch_copy *copy, char *text, size_t size)
{
    snprintf(text, size, "launch %llu", (unsigned long long)copy->row.launch_id);
}

static void launch_metric_text(const replay_launch_copy *copy, const char *name, int wide,
                               char *text, size_t size)
{
    report_replay_metric_text((const char *const *)copy->metric_names, copy->metric_values,
                              copy->metric_has_value, copy->metric_count, name, wide, text, size);
}

/* --wide: launches side by side in the metrics table: with the metric
 * name's 56 columns, four fit a 120-column terminal. */
#define REPLAY_METRIC_COLUMNS 4

/* One block of the --wide metrics table: the launches columns[first..last). */
static void replay_print_metric_block(const replay_section *section, const launch_column *columns,
                                      size_t first, size_t last, const char *const *names,
                                      size_t name_count)
{
    printf("    %-56s", "metric");
    for (size_t column = first; column < last; column++) {
        char heading[32];
        launch_heading(&section->launches[columns[column].launch], heading, sizeof(heading));
        printf(" %16s", heading);
    }
    printf("\n");
    for (size_t name = 0; name < name_count; name++) {
        printf("    %-56s", names[name]);
        for (size_t column = first; column < last; column++) {
            char text[40];
            launch_metric_text(&section->launches[columns[column].launch], names[name], 1, text,
                               sizeof(text));
            printf(" %16s", text);
        }
        printf("\n");
    }
}

/* --wide: the metrics as stored, in the order asked for, a fixed number of
 * launches to a block. */
static void replay_print_metrics_wide(const replay_section *section, const launch_column *columns,
                                      size_t column_count, const char *const *names,
                                      size_t name_count)
{
    for (size_t first = 0; first < column_count; first += REPLAY_METRIC_COLUMNS) {
        size_t last = first + REPLAY_METRIC_COLUMNS < column_count ? first + REPLAY_METRIC_COLUMNS
                                                                   : column_count;
        replay_print_metric_block(section, columns, first, last, names, name_count);
    }
}

/* The readable table's metric column: as wide as its longest label, at
 * least "metric", at most this (longer raw names of unknown metrics are
 * shortened in the middle). */
#define REPLAY_LABEL_WIDTH_MAX 32

static size_t label_column_width(const char *const *names, size_t name_count)
{
    size_t width = 6; /* "metric" */
    for (size_t name = 0; name < name_count; name++) {
        size_t length = cli_display_width(cli_metric_label_of(names[name]).name);
        width = length > width ? length : width;
    }
    return width > REPLAY_LABEL_WIDTH_MAX ? REPLAY_LABEL_WIDTH_MAX : width;
}

/* A launch column's width in the readable table: its heading's, or its
 * widest value's. */
static size_t launch_column_width(const replay_launch_copy *copy, const char *const *names,
                                  size_t name_count)
{
    char text[48];
    launch_heading(copy, text, sizeof(text));
    size_t width = strlen(text);
    for (size_t name = 0; name < name_count; name++) {
        launch_metric_text(copy, names[name], 0, text, sizeof(text));
        size_t length = cli_display_width(text);
        width = length > width ? length : width;
    }
    return width;
}

/* One block of the readable table: a row per metric (its label), the
 * launches columns[first..last), two blanks between columns. */
static void replay_print_label_block(const replay_section *section, const launch_column *columns,
                                     size_t first, size_t last, const char *const *names,
                                     size_t name_count, size_t label_width)
{
    char text[REPLAY_LABEL_WIDTH_MAX * 4 + 1];
    report_table_line line = {4};
    report_line_cell(&line, "metric", label_width, 1);
    for (size_t column = first; column < last; column++) {
        launch_heading(&section->launches[columns[column].launch], text, sizeof(text));
        report_line_space(&line, 2);
        report_line_cell(&line, text, columns[column].width, 0);
    }
    printf("\n");
    for (size_t name = 0; name < name_count; name++) {
        line = (report_table_line){4};
        cli_shorten_name(cli_metric_label_of(names[name]).name, label_width, text, sizeof(text));
        report_line_cell(&line, text, label_width, 1);
        for (size_t column = first; column < last; column++) {
            launch_metric_text(&section->launches[columns[column].launch], names[name], 0, text,
                               sizeof(text));
            report_line_space(&line, 2);
            report_line_cell(&line, text, columns[column].width, 0);
        }
        printf("\n");
    }
}

/* The readable table: a row per metric, most telling first, and as many
 * launches side by side as fit the report's width (at least one), then
 * the next launches in a block of their own. Metrics are rows because a
 * kernel collects ten or so of them but may be replayed at many launches. */
static void replay_print_metrics_labelled(const replay_section *section, launch_column *columns,
                                          size_t column_count, const char **names,
                                          size_t name_count)
{
    report_replay_sort_by_rank(names, name_count);
    size_t label_width = label_column_width(names, name_count);
    for (size_t column = 0; column < column_count; column++)
        columns[column].width =
            launch_column_width(&section->launches[columns[column].launch], names, name_count);
    size_t last;
    for (size_t first = 0; first < column_count; first = last) {
        size_t used = 4 + label_width;
        for (last = first; last < column_count; last++) {
            if (last > first && used + 2 + columns[last].width > section->width)
                break;
            used += 2 + columns[last].width;
        }
        replay_print_label_block(section, columns, first, last, names, name_count, label_width);
    }
}

/* The kernel's metric values: a row per metric, a column per launch that
 * collected any. */
static void replay_print_metrics(const replay_section *section)
{
    /* Launches that collected anything, in table order. */
    launch_column *columns = calloc(section->count > 0 ? section->count : 1, sizeof(*columns));
    if (columns == NULL) {
        printf("    (metrics not shown: out of memory)\n");
        return;
    }
    size_t column_count = 0;
    for (size_t launch = 0; launch < section->count; launch++)
        if (!section->launches[launch].row.declined && section->launches[launch].metric_count > 0)
            columns[column_count++].launch = launch;
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = 0;
    for (size_t launch = 0; launch < section->count; launch++)
        name_count =
            report_replay_union_add(names, name_count, sizeof(names) / sizeof(names[0]),
                                    (const char *const *)section->launches[launch].metric_names,
                                    section->launches[launch].metric_count);
    if (section->wide)
        replay_print_metrics_wide(section, columns, column_count, names, name_count);
    else
        replay_print_metrics_labelled(section, columns, column_count, names, name_count);
    free(columns);
}

/* One launch's row of its kernel's table; a declined launch ran once, with
 * nothing snapshotted or restored. */
static void replay_print_launch(const store_replay_launch_row *row)
{
    char passes[32] = "1", snapshot[32] = "-", restored[32] = "-", per_pass[32] = "-";
    char drain[32], total[32];
    const char *shadow = "-";
    if (!row->declined) {
        report_replay_format_passes(row->passes_run, row->passes_planned, passes, sizeof(passes));
        cli_format_bytes(row->snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(row->bytes_restored, restored, sizeof(restored));
        report_replay_format_pass_mean(row->passes_kept, row->pass_mean_ns, per_pass,
                                       sizeof(per_pass));
        shadow = report_replay_shadow_name(row->snapshot_bytes, row->shadow_on_device, "-");
    }
    cli_format_duration(row->drain_ns, drain, sizeof(drain));
    report_replay_format_elapsed(row->begin_ns, row->end_ns, total, sizeof(total));
    printf("    %10llu %5llu %8lld %4d %8llu %9s %11s %11s %-6s %10s %10s %10s\n",
           (unsigned long long)row->launch_id, (unsigned long long)row->launch_index + 1,
           (long long)row->pid, row->device, (unsigned long long)row->stream_id, passes, snapshot,
           restored, shadow, drain, per_pass, total);
}

/* The kernel's line of totals, which also go into the section's. */
static void replay_print_kernel_totals(replay_section *section)
{
    long long replayed = 0, declined = 0;
    unsigned long long passes = 0;
    uint64_t collection_ns = 0;
    const char *collector = "";
    for (size_t index = 0; index < section->count; index++) {
        const replay_launch_copy *copy = &section->launches[index];
        if (copy->row.declined) {
            declined++;
        } else {
            replayed++;
            passes += copy->row.passes_run;
            section->snapshot_bytes += copy->row.snapshot_bytes;
            if (copy->collector[0] != '\0')
                collector = copy->collector;
        }
        section->bytes_restored += copy->row.bytes_restored;
        if (copy->row.end_ns > copy->row.begin_ns)
            collection_ns += copy->row.end_ns - copy->row.begin_ns;
    }
    section->kernels++;
    section->replayed += replayed;
    section->declined += declined;
    section->passes += passes;
    section->collection_ns += collection_ns;
    char took[32];
    cli_format_duration(collection_ns, took, sizeof(took));
    printf("    %lld launch(es) replayed, %lld declined; %llu passes; %s in replay%s%s\n", replayed,
           declined, passes, took, collector[0] ? "; metrics from " : "", collector);
}

/* One kernel: its totals, a table of its launches, the reasons, then its
 * metrics. */
static void replay_print_kernel(replay_section *section)
{
    char name[REPLAY_WIDTH_MAX * 4 + 1];
    if (section->wide)
        printf("\n  %s\n", section->kernel);
    else
        printf("\n  %s\n",
               cli_shorten_name(section->kernel, section->width - 2, name, sizeof(name)));
    replay_print_kernel_totals(section);
    printf("    %10s %5s %8s %4s %8s %9s %11s %11s %-6s %10s %10s %10s\n", "launch", "nth", "pid",
           "dev", "stream", "passes", "snapshot", "restored", "shadow", "drain", "per pass",
           "total");
    for (size_t index = 0; index < section->count; index++)
        replay_print_launch(&section->launches[index].row);
    for (size_t index = 0; index < section->count; index++) {
        const replay_launch_copy *copy = &section->launches[index];
        /* Span kernels come here only when their span's record was lost;
         * say so, or the launch would look replayed on its own. */
        if (copy->row.span_id != 0)
            printf("    launch %llu: recorded in span %llu, whose record was lost\n",
                   (unsigned long long)copy->row.launch_id, (unsigned long long)copy->row.span_id);
        if (copy->reason[0] == '\0')
            continue;
        printf("    %s launch %llu: %s\n", copy->row.declined ? "declined" : "note",
               (unsigned long long)copy->row.launch_id, copy->reason);
    }
    replay_print_metrics(section);
}

/* The reader's callback: holds the launches of one kernel (they come
 * together), printing the previous kernel when the name changes. */
static int replay_collect_launch(const store_replay_launch_row *row, void *user)
{
    replay_section *section = user;
    const char *kernel = row->kernel != NULL ? row->kernel : "";
    if (section->kernel != NULL && strcmp(section->kernel, kernel) != 0) {
        replay_print_kernel(section);
        replay_section_clear(section);
    }
    if (section->kernel == NULL) {
        section->kernel = strdup(kernel);
        if (section->kernel == NULL)
            goto out_of_memory;
    }
    if (section->count == section->capacity) {
        size_t capacity = section->capacity ? section->capacity * 2 : 16;
        replay_launch_copy *launches =
            realloc(section->launches, capacity * sizeof(*section->launches));
        if (launches == NULL)
            goto out_of_memory;
        section->launches = launches;
        section->capacity = capacity;
    }
    if (replay_copy_launch(row, &section->launches[section->count]) != 0) {
        replay_launch_copy_free(&section->launches[section->count]);
        goto out_of_memory;
    }
    section->count++;
    return 0;
out_of_memory:
    section->failed = 1;
    return 1;
}

int cli_report_kernel_replay(cli_report_run *run)
{
    if (store_read_replay_summary(run->database, &run->replay) != 0) {
        cli_report_failed(run, store_last_error(run->database));
        return 0;
    }
    if (run->replay.launches <= 0)
        return 0;
    /* Kernels recorded in spans are not here: they are listed under their
     * span, in the range replay section. */
    printf("\nKernel replay (flare replay; per kernel, each chosen launch)\n");
    replay_section replay = {.wide = run->wide, .width = report_replay_width()};
    int status = store_read_replay_launches(run->database, replay_collect_launch, &replay);
    if (report_replay_read_succeeded(run, status, replay.failed) && replay.kernel != NULL)
        replay_print_kernel(&replay);
    replay_section_clear(&replay);
    free(replay.launches);
    report_replay_totals_text totals;
    report_replay_format_totals(replay.snapshot_bytes, replay.bytes_restored, replay.collection_ns,
                                &totals);
    printf("\n  In all: %lld launch(es) of %lld kernel(s) replayed, %lld declined; "
           "%llu passes; %s snapshotted, %s restored; %s in replay\n",
           replay.replayed, replay.kernels, replay.declined, replay.passes, totals.snapshot,
           totals.restored, totals.took);
    return 0;
}
