/*
 * report_replay_common.c: the layout and formats both replay sections of
 * `flare report` use (report_replay_common.h). Must never hold state or
 * print anything but the cell or line it is asked for.
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

/* ---- layout of the readable tables ---- */

/* The width the readable tables fit in: $COLUMNS when it is a whole number
 * (held to 60..1000), else 100. Not the terminal's own size, so the report
 * is the same on a terminal, in a pipe and in a file unless COLUMNS says
 * otherwise (shells set it without exporting it: `COLUMNS=$COLUMNS flare
 * report` passes it on). */
size_t report_replay_width(void)
{
    const char *columns = getenv("COLUMNS");
    if (columns == NULL || columns[0] == '\0' || strspn(columns, "0123456789") != strlen(columns))
        return REPLAY_WIDTH_DEFAULT;
    if (strlen(columns) > 6)
        return REPLAY_WIDTH_MAX;
    size_t width = (size_t)strtoul(columns, NULL, 10);
    if (width < REPLAY_WIDTH_MIN)
        return REPLAY_WIDTH_MIN;
    return width > REPLAY_WIDTH_MAX ? REPLAY_WIDTH_MAX : width;
}

void report_line_space(report_table_line *line, size_t count)
{
    line->pending += count;
}

/* text in a column of width display characters, left- or right-aligned:
 * padded by what shows, not by bytes, since names may be UTF-8. */
void report_line_cell(report_table_line *line, const char *text, size_t width, int left)
{
    size_t shown = cli_display_width(text), pad = shown < width ? width - shown : 0;
    if (!left)
        report_line_space(line, pad);
    if (text[0] != '\0') {
        printf("%*s%s", (int)line->pending, "", text);
        line->pending = 0;
    }
    if (left)
        report_line_space(line, pad);
}

/* The key that orders metrics: their rank in metric_labels.c's table
 * (most telling first), unknown metrics after every known one. */
static unsigned metric_order(const char *name)
{
    int rank = cli_metric_rank(name);
    return rank < 0 ? UINT_MAX : (unsigned)rank;
}

/* Sorts names by metric_order, unknown metrics in the order they came (a
 * stable insertion sort: the lists are a few dozen names). */
void report_replay_sort_by_rank(const char **names, size_t count)
{
    for (size_t next = 1; next < count; next++) {
        const char *name = names[next];
        size_t at = next;
        while (at > 0 && metric_order(names[at - 1]) > metric_order(name)) {
            names[at] = names[at - 1];
            at--;
        }
        names[at] = name;
    }
}

/* ---- what both sections print ---- */

void report_replay_format_value(double value, int has_value, char *buffer, size_t size)
{
    if (!has_value || isnan(value))
        snprintf(buffer, size, "n/a");
    else if (value == floor(value) && fabs(value) < 1e15)
        snprintf(buffer, size, "%.0f", value);
    else
        snprintf(buffer, size, "%.6g", value);
}

/* The value of metric name among count metrics: "n/a" when stored NULL,
 * "-" when there is no such metric at all (not collected there); raw when
 * wide, else in the metric's unit (cli_metric_format). */
void report_replay_metric_text(const char *const *names, const double *values, const int *has_value,
                               size_t count, const char *name, int wide, char *text, size_t size)
{
    snprintf(text, size, "-");
    for (size_t metric = 0; metric < count; metric++) {
        if (strcmp(names[metric], name) != 0)
            continue;
        if (wide || !has_value[metric])
            report_replay_format_value(values[metric], has_value[metric], text, size);
        else
            cli_metric_format(name, values[metric], text, size);
        return;
    }
}

/* The error bound of value, as it goes beside it: a share of the value
 * ("±2.1%"; "±<0.1%" under a tenth of a percent), in the metric's unit
 * where the value is 0 ("±1.2 KB"), raw when wide ("±7312345"), "±inf"
 * where no sample bounded it. */
void report_replay_format_bound(const char *name, double value, double bound, int wide, char *text,
                                size_t size)
{
    char number[48];
    if (isinf(bound))
        snprintf(number, sizeof(number), "inf");
    else if (wide)
        report_replay_format_value(bound, 1, number, sizeof(number));
    else if (value == 0 || !isfinite(value))
        cli_metric_format(name, bound, number, sizeof(number));
    else if (bound == 0)
        snprintf(number, sizeof(number), "0%%");
    else if (100.0 * bound / fabs(value) < 0.1)
        snprintf(number, sizeof(number), "<0.1%%");
    else if (100.0 * bound / fabs(value) < 10)
        snprintf(number, sizeof(number), "%.1f%%", 100.0 * bound / fabs(value));
    else
        snprintf(number, sizeof(number), "%.0f%%", 100.0 * bound / fabs(value));
    snprintf(text, size, "±%s", number);
}

/* Appends " word" to text (of size bytes) while it fits. */
static void append_word(char *text, size_t size, const char *word)
{
    size_t used = strlen(text);
    if (used + 1 < size)
        snprintf(text + used, size - used, " %s", word);
}

/*
 * A launch's value of metric name as report_replay_metric_text writes it,
 * and, where the value has a note (how it was produced: a PM-sampled
 * span's kernels, store_replay.h), its error bound and its status but
 * "measured": "348.05 MB ±2.1%", "1.2 GB ±4.0% flagged", and "— STATUS"
 * for a value the method gave none ("— below-minimum", "— not-sampled").
 * Without a note, the text is exactly report_replay_metric_text's.
 */
void report_replay_launch_metric_text(const store_replay_launch_row *launch, const char *name,
                                      int wide, char *text, size_t size)
{
    report_replay_metric_text(launch->metric_names, launch->metric_values, launch->metric_has_value,
                              launch->metric_count, name, wide, text, size);
    if (launch->metric_methods == NULL || launch->metric_statuses == NULL)
        return;
    size_t metric = 0;
    while (metric < launch->metric_count && strcmp(launch->metric_names[metric], name) != 0)
        metric++;
    if (metric == launch->metric_count || launch->metric_methods[metric][0] == '\0')
        return;
    const char *status = launch->metric_statuses[metric];
    int measured = status[0] == '\0' || strcmp(status, "measured") == 0;
    double value = launch->metric_values[metric];
    if (!launch->metric_has_value[metric] || isnan(value)) {
        if (!measured)
            snprintf(text, size, "— %s", status);
        return;
    }
    double bound = launch->metric_error_bounds != NULL ? launch->metric_error_bounds[metric] : NAN;
    if (!isnan(bound)) {
        char bound_text[64];
        report_replay_format_bound(name, value, bound, wide, bound_text, sizeof(bound_text));
        append_word(text, size, bound_text);
    }
    if (!measured)
        append_word(text, size, status);
}

/* Whether any value of launch has a note of method (NULL: of any). */
int report_replay_launch_noted(const store_replay_launch_row *launch, const char *method)
{
    if (launch->metric_methods == NULL)
        return 0;
    for (size_t metric = 0; metric < launch->metric_count; metric++) {
        const char *noted = launch->metric_methods[metric];
        if (noted[0] != '\0' && (method == NULL || strcmp(noted, method) == 0))
            return 1;
    }
    return 0;
}

/* The word of reason right after before ("10us" of "PM sampling every
 * 10us, ..."), when after follows it; 0 when the reason has none. */
static int reason_word(const char *reason, const char *before, const char *after, char *word,
                       size_t size)
{
    const char *at = strstr(reason, before);
    if (at == NULL)
        return 0;
    at += strlen(before);
    size_t length = strcspn(at, " ,;(");
    if (length == 0 || length >= size || strncmp(at + length, after, strlen(after)) != 0)
        return 0;
    snprintf(word, size, "%.*s", (int)length, at);
    return 1;
}

/*
 * How a span's values were produced, where its kernels' values carry notes
 * (range replay by PM sampling): "measured by PM sampling every 10us:
 * values ± their error bound; kernels under 100us have none; GPU time from
 * the kernels' own times". The interval and the minimum kernel length are
 * the collector's reason's (pm_replay.c writes "PM sampling every 10us,
 * ... under 100us (no value)"); a reason without them leaves them out.
 * Returns 0 (text "") where no value has a note.
 */
int report_replay_span_method(const store_replay_span_row *row, char *text, size_t size)
{
    int sampled = 0, timed = 0;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        sampled |= report_replay_launch_noted(&row->kernel_rows[kernel], "pm-sampling");
        timed |= report_replay_launch_noted(&row->kernel_rows[kernel], "kernel-activity");
    }
    snprintf(text, size, "%s", "");
    if (!sampled && !timed)
        return 0;
    char interval[32], minimum[32], every[48] = "";
    if (reason_word(row->reason, "PM sampling every ", ",", interval, sizeof(interval)))
        snprintf(every, sizeof(every), " every %s", interval);
    int has_minimum =
        sampled && reason_word(row->reason, " under ", " (no value)", minimum, sizeof(minimum));
    snprintf(text, size, "%s%s%svalues ± their error bound%s%s%s%s",
             sampled ? "measured by PM sampling" : "", sampled ? every : "", sampled ? ": " : "",
             has_minimum ? "; kernels under " : "", has_minimum ? minimum : "",
             has_minimum ? " have none" : "",
             timed ? "; GPU time from the kernels' own times" : "");
    return 1;
}

/* Adds each of more (more_count names) that names (count so far) lacks, in
 * order, while there is room for it; returns the new count. So the union
 * of several lists keeps the order the names first appear in (the order
 * they were asked for). */
size_t report_replay_union_add(const char **names, size_t count, size_t capacity,
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
void report_replay_format_passes(uint32_t run, uint32_t planned, char *text, size_t size)
{
    if (planned != 0 && planned != run)
        snprintf(text, size, "%u/%u", run, planned);
    else
        snprintf(text, size, "%u", run);
}

/* The mean length of one pass, or "-" when no pass time was kept. */
void report_replay_format_pass_mean(uint32_t passes_kept, uint64_t mean_ns, char *text, size_t size)
{
    if (passes_kept > 0)
        cli_format_duration(mean_ns, text, size);
    else
        snprintf(text, size, "-");
}

/* From begin to end, 0 when the end is not after the begin. */
void report_replay_format_elapsed(uint64_t begin_ns, uint64_t end_ns, char *text, size_t size)
{
    cli_format_duration(end_ns > begin_ns ? end_ns - begin_ns : 0, text, size);
}

/* Where the snapshot's shadows were: none, "device" or "host". */
const char *report_replay_shadow_name(uint64_t snapshot_bytes, int on_device, const char *none)
{
    if (snapshot_bytes == 0)
        return none;
    return on_device ? "device" : "host";
}

/* Reports a section's read that failed (status, the store reader's) or
 * ran out of memory (out_of_memory). Returns whether the read went well. */
int report_replay_read_succeeded(cli_report_run *run, int status, int out_of_memory)
{
    if (status != 0)
        cli_report_failed(run, store_last_error(run->database));
    else if (out_of_memory)
        cli_report_failed(run, "out of memory");
    return status == 0 && !out_of_memory;
}

void report_replay_format_totals(uint64_t snapshot_bytes, uint64_t bytes_restored, uint64_t ns,
                                 report_replay_totals_text *text)
{
    cli_format_bytes(snapshot_bytes, text->snapshot, sizeof(text->snapshot));
    cli_format_bytes(bytes_restored, text->restored, sizeof(text->restored));
    cli_format_duration(ns, text->took, sizeof(text->took));
}
