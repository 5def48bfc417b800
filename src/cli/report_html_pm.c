/*
 * report_html_pm.c: the PM section of `flare report --html` (report_html.h):
 * for each deep-profiling window that opened, its PM samples over time,
 * one chart per metric (reduced for drawing into fixed buckets; the
 * counts, minimum, mean and maximum shown are exact), and the scopes of
 * its process that overlapped it, for the page's scope lane under the
 * charts. Windows without samples say why (the engine's status and
 * reason, docs/windows.md).
 *
 * A flagged sample (docs/pm-sampling.md: overflow, after a hole, an
 * unverified time) is never drawn nor in a mean: it is counted, as in
 * `flare report`. It must never hold more than a fixed number of windows,
 * metrics and buckets in memory, whatever the session's size.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/metric_labels.h"
#include "cli/report_html.h"
#include "cli/report_html_series.h"
#include "store/store_charts.h"

/* Windows listed, windows whose samples are drawn, metrics per window,
 * and scopes in a window's lane, at most; the page says how many more. */
#define PM_WINDOWS_MAX 256
#define PM_DRAWN_MAX   24
#define PM_METRICS_MAX 16
#define PM_SCOPES_MAX  400
#define PM_DEPTH_MAX   6

typedef struct pm_metric {
    char *name;
    html_series series;
    uint64_t flagged;
    uint64_t no_value;
} pm_metric;

typedef struct pm_window {
    int64_t pid;
    uint64_t id;
    char *kind, *label, *engine, *engine_status, *engine_reason, *close_reason;
    uint64_t opened_ns, closed_ns, launches;
    int device; /* of its samples; -1 before the first */
    uint64_t sample_rows;
    int drawn; /* its samples are kept (one of the first PM_DRAWN_MAX with any) */
    pm_metric metrics[PM_METRICS_MAX];
    int metric_count;
    uint64_t metrics_left_out;
} pm_window;

typedef struct pm_section {
    html_report *report;
    pm_window *windows;
    int window_count;
    uint64_t windows_total; /* opened windows, listed or not */
    int drawn_count;
    int current; /* the window of the last sample; -1 */
    int out_of_memory;
} pm_section;

/* ---- reading ---- */

static char *copy_text(pm_section *pm, const char *text)
{
    char *copy = strdup(text != NULL ? text : "");
    pm->out_of_memory |= copy == NULL;
    return copy;
}

static int read_window(const store_window_row *row, void *user)
{
    pm_section *pm = user;
    if (row->opened_ns == 0)
        return 0;
    pm->windows_total++;
    if (pm->window_count == PM_WINDOWS_MAX)
        return 0;
    pm_window *window = &pm->windows[pm->window_count++];
    *window = (pm_window){
        .pid = row->pid,
        .id = row->id,
        .kind = copy_text(pm, row->token_kind),
        .label = copy_text(pm, html_report_window_label(row)),
        .engine = copy_text(pm, row->engine),
        .engine_status = copy_text(pm, row->engine_status),
        .engine_reason = copy_text(pm, row->engine_reason),
        .close_reason = copy_text(pm, row->close_reason),
        .opened_ns = row->opened_ns,
        .closed_ns = row->closed_ns > row->opened_ns ? row->closed_ns : pm->report->end_ns,
        .launches = row->launches,
        .device = -1,
    };
    if (window->closed_ns <= window->opened_ns)
        window->closed_ns = window->opened_ns + 1;
    return 0;
}

/* The listed window of (pid, id), or NULL. */
static pm_window *find_window(pm_section *pm, int64_t pid, uint64_t id)
{
    if (pm->current >= 0 && pm->windows[pm->current].pid == pid &&
        pm->windows[pm->current].id == id)
        return &pm->windows[pm->current];
    for (int i = 0; i < pm->window_count; i++) {
        if (pm->windows[i].pid == pid && pm->windows[i].id == id) {
            pm->current = i;
            return &pm->windows[i];
        }
    }
    return NULL;
}

/* The window's metric name, made when first seen; NULL past the limit
 * (counted) or when out of memory. Samples come by metric, so the last
 * one made is almost always the one. */
static pm_metric *find_metric(pm_section *pm, pm_window *window, const char *name)
{
    for (int i = window->metric_count - 1; i >= 0; i--)
        if (strcmp(window->metrics[i].name, name) == 0)
            return &window->metrics[i];
    if (window->metric_count == PM_METRICS_MAX) {
        window->metrics_left_out++;
        return NULL;
    }
    pm_metric *metric = &window->metrics[window->metric_count];
    memset(metric, 0, sizeof *metric);
    metric->name = strdup(name);
    if (metric->name == NULL ||
        html_series_init(&metric->series, window->opened_ns, window->closed_ns) != 0) {
        free(metric->name);
        pm->out_of_memory = 1;
        return NULL;
    }
    window->metric_count++;
    return metric;
}

static int read_sample(const store_pm_row *row, void *user)
{
    pm_section *pm = user;
    pm_window *window = find_window(pm, row->pid, row->window_id);
    if (window == NULL)
        return 0;
    window->sample_rows++;
    if (row->flags != 0)
        pm->report->pm_flagged++;
    if (window->device < 0)
        window->device = row->device;
    if (!window->drawn) {
        if (pm->drawn_count == PM_DRAWN_MAX)
            return 0;
        window->drawn = 1;
        pm->drawn_count++;
    }
    pm_metric *metric = find_metric(pm, window, row->metric);
    if (metric == NULL)
        return pm->out_of_memory;
    uint64_t middle_ns = row->start_ns;
    if (row->end_ns > row->start_ns)
        middle_ns += (row->end_ns - row->start_ns) / 2;
    if (row->flags != 0)
        metric->flagged++;
    else if (isnan(row->value))
        metric->no_value++;
    else
        html_series_add(&metric->series, middle_ns, row->value);
    return 0;
}

/* ---- writing ---- */

static const char *unit_name(cli_metric_unit unit)
{
    switch (unit) {
    case CLI_METRIC_UNIT_PERCENT:
        return "percent";
    case CLI_METRIC_UNIT_BYTES:
        return "bytes";
    case CLI_METRIC_UNIT_NANOSECONDS:
        return "ns";
    case CLI_METRIC_UNIT_CYCLES:
        return "cycles";
    case CLI_METRIC_UNIT_COUNT:
        return "count";
    case CLI_METRIC_UNIT_NONE:
        break;
    }
    return "number";
}

/* A value as the text report's labels write it ("5.3 MB"). */
static void write_formatted(html_page *page, const char *key, const char *metric, double value)
{
    char text[64];
    html_json_string(page, key, cli_metric_format(metric, value, text, sizeof text));
}

static void write_metric(html_page *page, const pm_window *window, const pm_metric *metric)
{
    cli_metric_label label = cli_metric_label_of(metric->name);
    const html_series *series = &metric->series;
    double mean = series->samples > 0 ? series->sum / (double)series->samples : NAN;
    html_json_object(page, NULL);
    html_json_string(page, "metric", metric->name);
    html_json_string(page, "label", label.name);
    html_json_string(page, "unit", unit_name(label.unit));
    html_json_u64(page, "samples", series->samples);
    html_json_u64(page, "flagged", metric->flagged);
    html_json_u64(page, "no_value", metric->no_value);
    write_formatted(page, "min_text", metric->name, series->samples > 0 ? series->minimum : NAN);
    write_formatted(page, "mean_text", metric->name, mean);
    write_formatted(page, "max_text", metric->name, series->samples > 0 ? series->maximum : NAN);
    /* Milliseconds from the window's opening. */
    html_series_write(series, page, window->opened_ns, 1e-6);
    html_json_end(page);
}

typedef struct lane_list {
    html_page *page;
    const pm_window *window;
    uint64_t total;
} lane_list;

static double window_ms(const pm_window *window, uint64_t time_ns)
{
    if (time_ns <= window->opened_ns)
        return 0.0;
    if (time_ns >= window->closed_ns)
        time_ns = window->closed_ns;
    return (double)(time_ns - window->opened_ns) * 1e-6;
}

static int write_lane_scope(const store_scope_row *row, void *user)
{
    lane_list *lane = user;
    if (row->depth >= PM_DEPTH_MAX)
        return 0;
    if (lane->total++ >= PM_SCOPES_MAX)
        return 0;
    html_page *page = lane->page;
    html_json_object(page, NULL);
    html_json_string(page, "name", row->name);
    html_json_u64(page, "depth", row->depth);
    html_json_i64(page, "thread", row->thread_id);
    html_json_double(page, "start_ms", window_ms(lane->window, row->start_ns));
    html_json_double(page, "end_ms", window_ms(lane->window, row->end_ns));
    html_json_bool(page, "open", row->still_open);
    html_json_end(page);
    return 0;
}

/* Metrics by the labels' rank (metric_labels.h: the most telling first),
 * then by name. */
static int compare_metrics(const void *left, const void *right)
{
    const pm_metric *a = left, *b = right;
    int rank_a = cli_metric_rank(a->name), rank_b = cli_metric_rank(b->name);
    if (rank_a != rank_b)
        return (rank_a > rank_b) - (rank_a < rank_b);
    return strcmp(a->name, b->name);
}

static void write_window(html_report *report, pm_window *window)
{
    html_page *page = report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", window->pid);
    html_json_u64(page, "id", window->id);
    html_json_string(page, "kind", window->kind);
    html_json_string(page, "label", window->label);
    html_json_double(page, "open_s", html_report_seconds(report, window->opened_ns));
    html_json_double(page, "length_ms", (double)(window->closed_ns - window->opened_ns) * 1e-6);
    html_json_string(page, "close_reason", window->close_reason);
    html_json_u64(page, "launches", window->launches);
    html_json_string(page, "engine", window->engine);
    html_json_string(page, "engine_status", window->engine_status);
    html_json_string(page, "engine_reason", window->engine_reason);
    if (window->device >= 0)
        html_json_i64(page, "device", window->device);
    else
        html_json_null(page, "device");
    html_json_u64(page, "sample_rows", window->sample_rows);
    html_json_bool(page, "drawn", window->drawn);
    html_json_u64(page, "metrics_left_out", window->metrics_left_out);
    qsort(window->metrics, (size_t)window->metric_count, sizeof window->metrics[0],
          compare_metrics);
    html_json_array(page, "metrics");
    for (int i = 0; i < window->metric_count; i++)
        write_metric(page, window, &window->metrics[i]);
    html_json_end(page);
    lane_list lane = {page, window, 0};
    html_json_array(page, "scopes");
    if (window->drawn)
        html_report_check(report, store_chart_scopes_between(report->database, window->pid,
                                                             window->opened_ns, window->closed_ns,
                                                             write_lane_scope, &lane));
    html_json_end(page);
    html_json_u64(page, "scopes_total", lane.total);
    html_json_end(page);
}

static void pm_free(pm_section *pm)
{
    for (int i = 0; i < pm->window_count; i++) {
        pm_window *window = &pm->windows[i];
        for (int metric = 0; metric < window->metric_count; metric++) {
            free(window->metrics[metric].name);
            html_series_free(&window->metrics[metric].series);
        }
        free(window->kind);
        free(window->label);
        free(window->engine);
        free(window->engine_status);
        free(window->engine_reason);
        free(window->close_reason);
    }
    free(pm->windows);
    free(pm);
}

void html_section_pm(html_report *report)
{
    pm_section *pm = calloc(1, sizeof *pm);
    pm_window *windows = calloc(PM_WINDOWS_MAX, sizeof *windows);
    if (pm == NULL || windows == NULL) {
        free(pm);
        free(windows);
        html_report_failed(report, "out of memory");
        return;
    }
    pm->report = report;
    pm->windows = windows;
    pm->current = -1;
    html_report_check(report, store_read_windows(report->database, read_window, pm));
    html_report_check(report, store_chart_pm_samples(report->database, read_sample, pm));
    if (pm->out_of_memory)
        html_report_failed(report, "out of memory");
    html_page *page = report->page;
    html_json_u64(page, "windows_total", pm->windows_total);
    html_json_u64(page, "drawn_max", PM_DRAWN_MAX);
    html_json_u64(page, "scopes_max", PM_SCOPES_MAX);
    html_json_array(page, "windows");
    for (int i = 0; i < pm->window_count; i++)
        write_window(report, &pm->windows[i]);
    html_json_end(page);
    pm_free(pm);
}
