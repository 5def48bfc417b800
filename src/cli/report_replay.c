/*
 * report_replay.c: the two replay sections of `flare report`: kernel
 * replay (docs/replay.md: per kernel, a table of its chosen launches, the
 * reasons, and a table of metric values, launches side by side) and range
 * replay (docs/replay.md#range-replay: per span, what it recorded, its
 * passes and snapshot, and a table of its kernels with one column per
 * metric). Each is printed only when the session has any, so a plain
 * trace's report stays as it was.
 *
 * It must never print half a table when memory runs out (it says so and
 * the report fails), and never change what it reads: a kernel's launches
 * are copied out of the reader's callbacks, since their strings live only
 * for the callback, and laid out once all of them have been read.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "replay/replay.h"

/* ---- what both sections print ---- */

static void format_metric_value(double value, int has_value, char *buffer, size_t size)
{
    if (!has_value || isnan(value))
        snprintf(buffer, size, "n/a");
    else if (value == floor(value) && fabs(value) < 1e15)
        snprintf(buffer, size, "%.0f", value);
    else
        snprintf(buffer, size, "%.6g", value);
}

/* The value of metric name among count metrics: "n/a" when stored NULL,
 * "-" when there is no such metric at all (not collected there). */
static void metric_text(const char *const *names, const double *values, const int *has_value,
                        size_t count, const char *name, char *text, size_t size)
{
    snprintf(text, size, "-");
    for (size_t metric = 0; metric < count; metric++) {
        if (strcmp(names[metric], name) == 0) {
            format_metric_value(values[metric], has_value[metric], text, size);
            return;
        }
    }
}

/* Adds each of more (more_count names) that names (count so far) lacks, in
 * order, while there is room for it; returns the new count. So the union
 * of several lists keeps the order the names first appear in (the order
 * they were asked for). */
static size_t metric_union_add(const char **names, size_t count, size_t capacity,
                               const char *const *more, size_t more_count)
{
    for (size_t metric = 0; metric < more_count; metric++) {
        size_t seen = 0;
        while (seen < count && strcmp(names[seen], more[metric]) != 0)
            seen++;
        if (seen == count && count < capacity)
            names[count++] = more[metric];
    }
    return count;
}

/* "3", or "2/3" when fewer passes ran than were planned. */
static void format_passes(uint32_t run, uint32_t planned, char *text, size_t size)
{
    if (planned != 0 && planned != run)
        snprintf(text, size, "%u/%u", run, planned);
    else
        snprintf(text, size, "%u", run);
}

/* The mean length of one pass, or "-" when no pass time was kept. */
static void format_pass_mean(uint32_t passes_kept, uint64_t mean_ns, char *text, size_t size)
{
    if (passes_kept > 0)
        cli_format_duration(mean_ns, text, size);
    else
        snprintf(text, size, "-");
}

/* From begin to end, 0 when the end is not after the begin. */
static void format_elapsed(uint64_t begin_ns, uint64_t end_ns, char *text, size_t size)
{
    cli_format_duration(end_ns > begin_ns ? end_ns - begin_ns : 0, text, size);
}

/* Where the snapshot's shadows were: none, "device" or "host". */
static const char *shadow_name(uint64_t snapshot_bytes, int on_device, const char *none)
{
    if (snapshot_bytes == 0)
        return none;
    return on_device ? "device" : "host";
}

/* Reports a section's read that failed (status, the store reader's) or
 * ran out of memory (out_of_memory). Returns whether the read went well. */
static int replay_read_succeeded(cli_report_run *run, int status, int out_of_memory)
{
    if (status != 0)
        cli_report_failed(run, store_last_error(run->database));
    else if (out_of_memory)
        cli_report_failed(run, "out of memory");
    return status == 0 && !out_of_memory;
}

/* The closing "In all" line's sizes and time. */
typedef struct replay_totals_text {
    char snapshot[32];
    char restored[32];
    char took[32];
} replay_totals_text;

static void format_totals(uint64_t snapshot_bytes, uint64_t bytes_restored, uint64_t ns,
                          replay_totals_text *text)
{
    cli_format_bytes(snapshot_bytes, text->snapshot, sizeof(text->snapshot));
    cli_format_bytes(bytes_restored, text->restored, sizeof(text->restored));
    cli_format_duration(ns, text->took, sizeof(text->took));
}

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

/* Launches side by side in the metrics table: with the metric name's 56
 * columns, four fit a 120-column terminal. */
#define REPLAY_METRIC_COLUMNS 4

/* One block of the metrics table: the launches columns[first..last). */
static void replay_print_metric_block(const replay_section *section, const size_t *columns,
                                      size_t first, size_t last, const char *const *names,
                                      size_t name_count)
{
    printf("    %-56s", "metric");
    for (size_t column = first; column < last; column++) {
        char heading[32];
        snprintf(heading, sizeof(heading), "launch %llu",
                 (unsigned long long)section->launches[columns[column]].row.launch_id);
        printf(" %16s", heading);
    }
    printf("\n");
    for (size_t name = 0; name < name_count; name++) {
        printf("    %-56s", names[name]);
        for (size_t column = first; column < last; column++) {
            const replay_launch_copy *copy = &section->launches[columns[column]];
            char text[40];
            metric_text((const char *const *)copy->metric_names, copy->metric_values,
                        copy->metric_has_value, copy->metric_count, names[name], text,
                        sizeof(text));
            printf(" %16s", text);
        }
        printf("\n");
    }
}

/* The kernel's metric values: a row per metric, a column per launch that
 * collected any, REPLAY_METRIC_COLUMNS launches to a block. */
static void replay_print_metrics(const replay_section *section)
{
    /* Launches that collected anything, in table order. */
    size_t *columns = malloc((section->count > 0 ? section->count : 1) * sizeof(*columns));
    if (columns == NULL) {
        printf("    (metrics not shown: out of memory)\n");
        return;
    }
    size_t column_count = 0;
    for (size_t launch = 0; launch < section->count; launch++)
        if (!section->launches[launch].row.declined && section->launches[launch].metric_count > 0)
            columns[column_count++] = launch;
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = 0;
    for (size_t launch = 0; launch < section->count; launch++)
        name_count = metric_union_add(names, name_count, sizeof(names) / sizeof(names[0]),
                                      (const char *const *)section->launches[launch].metric_names,
                                      section->launches[launch].metric_count);
    for (size_t first = 0; first < column_count; first += REPLAY_METRIC_COLUMNS) {
        size_t last = first + REPLAY_METRIC_COLUMNS < column_count ? first + REPLAY_METRIC_COLUMNS
                                                                   : column_count;
        replay_print_metric_block(section, columns, first, last, names, name_count);
    }
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
        format_passes(row->passes_run, row->passes_planned, passes, sizeof(passes));
        cli_format_bytes(row->snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(row->bytes_restored, restored, sizeof(restored));
        format_pass_mean(row->passes_kept, row->pass_mean_ns, per_pass, sizeof(per_pass));
        shadow = shadow_name(row->snapshot_bytes, row->shadow_on_device, "-");
    }
    cli_format_duration(row->drain_ns, drain, sizeof(drain));
    format_elapsed(row->begin_ns, row->end_ns, total, sizeof(total));
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
    printf("\n  %s\n", section->kernel);
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
    replay_section replay = {0};
    int status = store_read_replay_launches(run->database, replay_collect_launch, &replay);
    if (replay_read_succeeded(run, status, replay.failed) && replay.kernel != NULL)
        replay_print_kernel(&replay);
    replay_section_clear(&replay);
    free(replay.launches);
    replay_totals_text totals;
    format_totals(replay.snapshot_bytes, replay.bytes_restored, replay.collection_ns, &totals);
    printf("\n  In all: %lld launch(es) of %lld kernel(s) replayed, %lld declined; "
           "%llu passes; %s snapshotted, %s restored; %s in replay\n",
           replay.replayed, replay.kernels, replay.declined, replay.passes, totals.snapshot,
           totals.restored, totals.took);
    return 0;
}

/* ---- range replay ---- */

/* Kernel names longer than this are cut with "..." in the span table, so a
 * demangled template name does not push the metric columns off screen; the
 * per-kernel tables of `flare report` and the database keep it whole. */
#define SPAN_KERNEL_NAME_WIDTH 48

typedef struct span_section {
    int spans;
    int failed; /* out of memory while laying out a table */
} span_section;

static void span_metric_text(const store_replay_launch_row *launch, const char *name, char *text,
                             size_t size)
{
    metric_text(launch->metric_names, launch->metric_values, launch->metric_has_value,
                launch->metric_count, name, text, size);
}

/* The metric names of the span's kernels (each once, in the order they
 * first appear) into names, and the width of each column into widths: its
 * name's, or its widest value's. Returns how many names. */
static size_t span_metric_columns(const store_replay_span_row *row, const char **names, int *widths,
                                  size_t capacity)
{
    size_t name_count = 0;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++)
        name_count =
            metric_union_add(names, name_count, capacity, row->kernel_rows[kernel].metric_names,
                             row->kernel_rows[kernel].metric_count);
    for (size_t name = 0; name < name_count; name++) {
        widths[name] = (int)strlen(names[name]);
        for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
            char text[40];
            span_metric_text(&row->kernel_rows[kernel], names[name], text, sizeof(text));
            if ((int)strlen(text) > widths[name])
                widths[name] = (int)strlen(text);
        }
    }
    return name_count;
}

/* The width of the kernel name column: the longest name, at least "kernel",
 * at most SPAN_KERNEL_NAME_WIDTH. */
static int span_name_width(const store_replay_span_row *row)
{
    int name_width = 6; /* "kernel" */
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        int length = (int)strlen(row->kernel_rows[kernel].kernel);
        if (length > name_width)
            name_width = length;
    }
    return name_width > SPAN_KERNEL_NAME_WIDTH ? SPAN_KERNEL_NAME_WIDTH : name_width;
}

/* One row per kernel in launch order, one column per metric, each column as
 * wide as its metric's name (or its widest value). */
static void span_print_kernels(const store_replay_span_row *row, span_section *section)
{
    if (row->kernel_count == 0) {
        printf("    (no kernel recorded)\n");
        return;
    }
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    int widths[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = span_metric_columns(row, names, widths, sizeof(names) / sizeof(names[0]));
    int name_width = span_name_width(row);
    char *line_name = malloc((size_t)name_width + 1);
    if (line_name == NULL) {
        printf("    (kernels not shown: out of memory)\n");
        section->failed = 1;
        return;
    }
    /* The name column is padded only when metric columns follow it. */
    int pad = name_count > 0 ? name_width : 0;
    printf("    %10s %5s %-*s", "launch", "nth", pad, "kernel");
    for (size_t name = 0; name < name_count; name++)
        printf("  %*s", widths[name], names[name]);
    printf("\n");
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        if ((int)strlen(launch->kernel) > name_width)
            snprintf(line_name, (size_t)name_width + 1, "%.*s...", name_width - 3, launch->kernel);
        else
            snprintf(line_name, (size_t)name_width + 1, "%s", launch->kernel);
        printf("    %10llu %5llu %-*s", (unsigned long long)launch->launch_id,
               (unsigned long long)launch->launch_index + 1, pad, line_name);
        for (size_t name = 0; name < name_count; name++) {
            char text[40];
            span_metric_text(launch, names[name], text, sizeof(text));
            printf("  %*s", widths[name], text);
        }
        printf("\n");
    }
    free(line_name);
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

/* A replayed span's passes, snapshot and note. */
static void span_print_replayed(const store_replay_span_row *row, const char *took)
{
    char passes[32], per_pass[32], snapshot[32], restore[32];
    format_passes(row->passes_run, row->passes_planned, passes, sizeof(passes));
    format_pass_mean(row->passes_kept, row->pass_mean_ns, per_pass, sizeof(per_pass));
    cli_format_bytes(row->snapshot_bytes, snapshot, sizeof(snapshot));
    cli_format_duration(row->restore_ns, restore, sizeof(restore));
    printf("    %u kernel(s), %u copies/memsets; %s pass(es), %s per pass; %s collecting in "
           "all\n",
           row->kernels, row->copies, passes, per_pass, took);
    printf("    %s snapshotted (%s shadows); restores took %s in all%s%s\n", snapshot,
           shadow_name(row->snapshot_bytes, row->shadow_on_device, "no"), restore,
           row->collector[0] ? "; metrics from " : "", row->collector);
    if (row->reason[0] != '\0')
        printf("    note: %s\n", row->reason);
}

static int span_print(const store_replay_span_row *row, void *user)
{
    span_section *section = user;
    section->spans++;
    span_print_heading(row);
    char took[32];
    format_elapsed(row->begin_ns, row->end_ns, took, sizeof(took));
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
    span_section spans = {0};
    int status = store_read_replay_spans(run->database, span_print, &spans);
    replay_read_succeeded(run, status, spans.failed);
    replay_totals_text totals;
    format_totals(summary->span_snapshot_bytes, summary->span_bytes_restored,
                  summary->span_collection_ns, &totals);
    printf("\n  In all: %lld span(s) replayed, %lld declined; %lld kernel(s) in them; %llu "
           "passes; %s snapshotted, %s restored; %s collecting\n",
           (long long)summary->spans_replayed, (long long)summary->spans_declined,
           (long long)summary->span_kernels, (unsigned long long)summary->span_passes,
           totals.snapshot, totals.restored, totals.took);
    return 0;
}
