/*
 * report_html_replay.c: the replay section of `flare report --html`
 * (report_html.h): kernel replay (docs/replay.md) per kernel, each
 * replayed launch's throughputs against their peaks as speed-of-light
 * bars (compute, then memory) and its other metrics as labelled values;
 * range replay per span, a table of the span's kernels in launch order,
 * one column per metric, each value with its error bound and status where
 * a note says how it was produced (range replay by PM sampling). Names,
 * units, values and bounds are written as the text report writes them
 * (metric_labels.h: "DRAM read 5.3 MB", "SM throughput 36.0%";
 * report_replay_common.h: "±2.1%"); a bar's length is the raw percentage,
 * capped at 100 for drawing only.
 *
 * It streams: a kernel's launches and a span's kernels are written while
 * the store's reader holds them, and nothing is kept after. It must never
 * show more than a fixed number of launches per kernel, kernels, spans,
 * rows or columns (the page says how many more there are), and never
 * change a value: labels present it, the raw metric name goes with it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/metric_labels.h"
#include "cli/report_html.h"
#include "cli/report_replay_common.h"
#include "store/store_replay.h"

#define REPLAY_KERNELS_MAX 200
#define REPLAY_RUNS_MAX    16
#define REPLAY_SPANS_MAX   100
#define REPLAY_ROWS_MAX    1000
#define REPLAY_COLUMNS_MAX 24

typedef struct replay_kernels {
    html_report *report;
    char *kernel; /* the kernel being written, or NULL */
    uint64_t launches, replayed, declined, runs;
    uint64_t kernels, kernels_left_out;
    int out_of_memory;
} replay_kernels;

/* ---- what launches and spans share ---- */

/* A label's side of speed of light (metric_labels.h), as the page's
 * style names it. */
static const char *side_name(int side)
{
    return side == 1 ? "compute" : side == 2 ? "memory" : "other";
}

static void write_value_text(html_page *page, const char *metric, double value, int has_value)
{
    char text[64];
    html_json_string(page, "text",
                     cli_metric_format(metric, has_value ? value : NAN, text, sizeof text));
}

/* The speed-of-light bars of one launch: its of-peak throughputs, the
 * compute side first, then memory, then any other. */
static void write_bars(html_page *page, const store_replay_launch_row *row)
{
    html_json_array(page, "bars");
    for (int side = 1; side <= 3; side++) {
        for (size_t i = 0; i < row->metric_count; i++) {
            cli_metric_label label = cli_metric_label_of(row->metric_names[i]);
            int label_side = label.side == 1 || label.side == 2 ? label.side : 3;
            if (!label.of_peak || label_side != side)
                continue;
            html_json_object(page, NULL);
            html_json_string(page, "metric", row->metric_names[i]);
            html_json_string(page, "label", label.name);
            html_json_string(page, "side", side_name(side));
            int has_value = row->metric_has_value[i] && !isnan(row->metric_values[i]);
            html_json_double(page, "pct", has_value ? row->metric_values[i] : NAN);
            write_value_text(page, row->metric_names[i], row->metric_values[i], has_value);
            html_json_end(page);
        }
    }
    html_json_end(page);
}

/* The launch's other metrics, in the order the labels rank them. */
static void write_values(html_page *page, const store_replay_launch_row *row)
{
    html_json_array(page, "values");
    for (size_t i = 0; i < row->metric_count; i++) {
        cli_metric_label label = cli_metric_label_of(row->metric_names[i]);
        if (label.of_peak)
            continue;
        html_json_object(page, NULL);
        html_json_string(page, "metric", row->metric_names[i]);
        html_json_string(page, "label", label.name);
        html_json_i64(page, "rank", cli_metric_rank(row->metric_names[i]));
        write_value_text(page, row->metric_names[i], row->metric_values[i],
                         row->metric_has_value[i]);
        html_json_end(page);
    }
    html_json_end(page);
}

/* ---- kernel replay ---- */

/* Closes the kernel being written with its counts. */
static void end_kernel(replay_kernels *kernels)
{
    if (kernels->kernel == NULL)
        return;
    html_page *page = kernels->report->page;
    html_json_end(page); /* runs */
    html_json_u64(page, "launches", kernels->launches);
    html_json_u64(page, "replayed", kernels->replayed);
    html_json_u64(page, "declined", kernels->declined);
    html_json_u64(page, "runs_left_out",
                  kernels->launches > REPLAY_RUNS_MAX ? kernels->launches - REPLAY_RUNS_MAX : 0);
    html_json_end(page); /* the kernel */
    free(kernels->kernel);
    kernels->kernel = NULL;
}

/* Starts the object of row's kernel when it is a new one; returns 0 when
 * the kernel is past the limit (its launches are counted, not written). */
static int begin_kernel(replay_kernels *kernels, const store_replay_launch_row *row)
{
    if (kernels->kernel != NULL && strcmp(kernels->kernel, row->kernel) == 0)
        return 1;
    end_kernel(kernels);
    if (kernels->kernels == REPLAY_KERNELS_MAX) {
        kernels->kernels_left_out++;
        return 0;
    }
    kernels->kernel = strdup(row->kernel);
    if (kernels->kernel == NULL) {
        kernels->out_of_memory = 1;
        return 0;
    }
    kernels->kernels++;
    kernels->launches = kernels->replayed = kernels->declined = 0;
    html_page *page = kernels->report->page;
    html_json_object(page, NULL);
    html_json_string(page, "kernel", row->kernel);
    html_json_array(page, "runs");
    return 1;
}

static int write_launch(const store_replay_launch_row *row, void *user)
{
    replay_kernels *kernels = user;
    if (!begin_kernel(kernels, row))
        return kernels->out_of_memory;
    kernels->launches++;
    if (row->declined)
        kernels->declined++;
    else
        kernels->replayed++;
    if (kernels->launches > REPLAY_RUNS_MAX)
        return 0;
    html_page *page = kernels->report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_u64(page, "launch_index", row->launch_index);
    html_json_i64(page, "device", row->device);
    html_json_bool(page, "declined", row->declined);
    html_json_string(page, "reason", row->reason);
    html_json_u64(page, "passes", row->passes_run);
    html_json_u64(page, "passes_planned", row->passes_planned);
    html_json_string(page, "collector", row->collector);
    write_bars(page, row);
    write_values(page, row);
    html_json_end(page);
    return 0;
}

/* ---- range replay ---- */

typedef struct replay_spans {
    html_report *report;
    uint64_t spans, spans_left_out;
} replay_spans;

static int compare_rank(const void *left, const void *right)
{
    const char *a = *(const char *const *)left, *b = *(const char *const *)right;
    int rank_a = cli_metric_rank(a), rank_b = cli_metric_rank(b);
    return (rank_a > rank_b) - (rank_a < rank_b);
}

/* The metrics of the span's kernels, each once, by the labels' rank:
 * the table's columns. Returns their count. */
static size_t span_columns(const store_replay_span_row *row, const char **columns)
{
    size_t count = 0;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        for (size_t i = 0; i < launch->metric_count; i++) {
            size_t seen = 0;
            while (seen < count && strcmp(columns[seen], launch->metric_names[i]) != 0)
                seen++;
            if (seen == count && count < REPLAY_COLUMNS_MAX)
                columns[count++] = launch->metric_names[i];
        }
    }
    /* Insertion order among equal ranks: a stable sort by hand (qsort is
     * not stable, and there are at most REPLAY_COLUMNS_MAX). */
    for (size_t i = 1; i < count; i++)
        for (size_t j = i; j > 0 && compare_rank(&columns[j - 1], &columns[j]) > 0; j--) {
            const char *swap = columns[j - 1];
            columns[j - 1] = columns[j];
            columns[j] = swap;
        }
    return count;
}

/* How value i of launch was produced, where it has a note (a PM-sampled
 * span's kernels, store_replay.h): method, status and, beside a value,
 * its error bound as the text report writes it ("±2.1%") and as stored
 * (error_bound, in the value's unit; null where unbounded). */
static void write_note(html_page *page, const store_replay_launch_row *launch, size_t i,
                       int has_value)
{
    if (launch->metric_methods == NULL || launch->metric_methods[i][0] == '\0')
        return;
    html_json_string(page, "method", launch->metric_methods[i]);
    html_json_string(page, "status", launch->metric_statuses[i]);
    double bound = launch->metric_error_bounds[i];
    if (!has_value || isnan(bound))
        return;
    char text[64];
    report_replay_format_bound(launch->metric_names[i], launch->metric_values[i], bound, 0, text,
                               sizeof text);
    html_json_string(page, "bound", text);
    html_json_double(page, "error_bound", bound);
}

static void write_cell(html_page *page, const store_replay_launch_row *launch, const char *metric)
{
    for (size_t i = 0; i < launch->metric_count; i++) {
        if (strcmp(launch->metric_names[i], metric) != 0)
            continue;
        int has_value = launch->metric_has_value[i] && !isnan(launch->metric_values[i]);
        html_json_object(page, NULL);
        write_value_text(page, metric, launch->metric_values[i], has_value);
        if (cli_metric_label_of(metric).of_peak && has_value)
            html_json_double(page, "pct", launch->metric_values[i]);
        write_note(page, launch, i, has_value);
        html_json_end(page);
        return;
    }
    html_json_null(page, NULL); /* not collected for this kernel */
}

static void write_span_table(html_page *page, const store_replay_span_row *row)
{
    const char *columns[REPLAY_COLUMNS_MAX];
    size_t count = span_columns(row, columns);
    html_json_array(page, "columns");
    for (size_t i = 0; i < count; i++) {
        cli_metric_label label = cli_metric_label_of(columns[i]);
        html_json_object(page, NULL);
        html_json_string(page, "metric", columns[i]);
        html_json_string(page, "label", label.name);
        html_json_bool(page, "of_peak", label.of_peak);
        html_json_string(page, "side", side_name(label.side));
        html_json_end(page);
    }
    html_json_end(page);
    html_json_array(page, "rows");
    for (size_t kernel = 0; kernel < row->kernel_count && kernel < REPLAY_ROWS_MAX; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        html_json_object(page, NULL);
        html_json_string(page, "kernel", launch->kernel);
        html_json_u64(page, "launch_index", launch->launch_index);
        html_json_bool(page, "declined", launch->declined);
        html_json_string(page, "reason", launch->reason);
        html_json_array(page, "cells");
        for (size_t i = 0; i < count; i++)
            write_cell(page, launch, columns[i]);
        html_json_end(page);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "rows_left_out",
                  row->kernel_count > REPLAY_ROWS_MAX ? row->kernel_count - REPLAY_ROWS_MAX : 0);
}

static int write_span(const store_replay_span_row *row, void *user)
{
    replay_spans *spans = user;
    if (spans->spans == REPLAY_SPANS_MAX) {
        spans->spans_left_out++;
        return 0;
    }
    spans->spans++;
    html_page *page = spans->report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_u64(page, "span_id", row->span_id);
    html_json_string(page, "name", row->name);
    html_json_u64(page, "occurrence", row->occurrence);
    html_json_i64(page, "device", row->device);
    html_json_u64(page, "kernels", row->kernels);
    html_json_u64(page, "copies", row->copies);
    html_json_u64(page, "kernels_stored", row->kernel_count);
    html_json_bool(page, "declined", row->declined);
    html_json_string(page, "reason", row->reason);
    html_json_u64(page, "passes", row->passes_run);
    html_json_u64(page, "passes_planned", row->passes_planned);
    html_json_string(page, "collector", row->collector);
    /* How the values were produced, where they carry notes; "" otherwise. */
    char method[256];
    report_replay_span_method(row, method, sizeof method);
    html_json_string(page, "method", method);
    write_span_table(page, row);
    html_json_end(page);
    return 0;
}

/* ---- the section ---- */

static void write_summary(html_report *report)
{
    store_replay_summary summary;
    html_page *page = report->page;
    if (store_read_replay_summary(report->database, &summary) != 0) {
        html_report_check(report, -1);
        html_json_null(page, "summary");
        return;
    }
    html_json_object(page, "summary");
    html_json_i64(page, "launches", summary.launches);
    html_json_i64(page, "replayed", summary.replayed);
    html_json_i64(page, "declined", summary.declined);
    html_json_i64(page, "kernels", summary.kernels);
    html_json_string(page, "first_decline", summary.first_decline);
    html_json_i64(page, "spans", summary.spans);
    html_json_i64(page, "spans_replayed", summary.spans_replayed);
    html_json_i64(page, "spans_declined", summary.spans_declined);
    html_json_string(page, "first_span_decline", summary.first_span_decline);
    html_json_end(page);
}

void html_section_replay(html_report *report)
{
    html_page *page = report->page;
    write_summary(report);
    replay_kernels kernels = {.report = report};
    html_json_array(page, "kernels");
    int status = store_read_replay_launches(report->database, write_launch, &kernels);
    end_kernel(&kernels);
    html_json_end(page);
    html_report_check(report, status);
    if (kernels.out_of_memory)
        html_report_failed(report, "out of memory");
    html_json_u64(page, "kernels_left_out", kernels.kernels_left_out);
    replay_spans spans = {.report = report};
    html_json_array(page, "spans");
    html_report_check(report, store_read_replay_spans(report->database, write_span, &spans));
    html_json_end(page);
    html_json_u64(page, "spans_left_out", spans.spans_left_out);
}
