/*
 * report_html_timeline.c: the timeline section of `flare report --html`
 * (report_html.h): per device, the GPU's busy time (the union of its
 * kernels' intervals, as a percentage of each slice of the session) and
 * its NVML metrics over time; across devices, the deep-profiling windows
 * and the launch storms, which the page shades on every chart.
 *
 * One pass over the kernels (each device's by start: the index's order in
 * a session of one process, sorted by SQLite otherwise) and
 * one over the metric samples, each reduced for drawing into fixed
 * buckets (report_html_series.h); the totals printed beside the charts
 * are exact. It must never hold more than a fixed number of buckets per
 * track in memory, whatever the session's size, and never show
 * external_correlation.* metrics (id pairs, not gauges) or a process's own
 * metrics (device -1) here.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/report_html.h"
#include "cli/report_html_series.h"
#include "store/store_charts.h"
#include "store/store_export.h"

/* Devices and metric tracks per device drawn, at most; more are counted. */
#define TIMELINE_DEVICES_MAX 64
#define TIMELINE_TRACKS_MAX  32

typedef struct timeline_track {
    char *name;
    html_series series;
} timeline_track;

typedef struct timeline_device {
    int device;
    char *name; /* from the devices table; NULL when unknown */
    int has_busy;
    html_busy busy;
    timeline_track tracks[TIMELINE_TRACKS_MAX];
    int track_count;
} timeline_device;

typedef struct timeline {
    html_report *report;
    timeline_device devices[TIMELINE_DEVICES_MAX];
    int device_count;
    uint64_t left_out; /* samples or kernels of devices or tracks past the limits */
    int out_of_memory;
} timeline;

/* The device's entry, made when it is first seen; NULL past the limit or
 * when out of memory (counted). */
static timeline_device *device_entry(timeline *line, int device)
{
    for (int i = 0; i < line->device_count; i++)
        if (line->devices[i].device == device)
            return &line->devices[i];
    if (line->device_count == TIMELINE_DEVICES_MAX) {
        line->left_out++;
        return NULL;
    }
    timeline_device *entry = &line->devices[line->device_count++];
    memset(entry, 0, sizeof *entry);
    entry->device = device;
    return entry;
}

static int compare_devices(const void *left, const void *right)
{
    const timeline_device *a = left, *b = right;
    return (a->device > b->device) - (a->device < b->device);
}

/* ---- reading ---- */

static int read_device(const store_export_device_row *row, void *user)
{
    timeline *line = user;
    if (row->device < 0)
        return 0;
    timeline_device *entry = device_entry(line, row->device);
    if (entry != NULL && entry->name == NULL && row->name != NULL && row->name[0] != '\0') {
        entry->name = strdup(row->name);
        line->out_of_memory |= entry->name == NULL;
    }
    return 0;
}

static int read_interval(const store_chart_interval *row, void *user)
{
    timeline *line = user;
    timeline_device *entry = device_entry(line, row->device);
    if (entry == NULL)
        return 0;
    if (!entry->has_busy) {
        if (html_busy_init(&entry->busy, line->report->origin_ns, line->report->end_ns) != 0) {
            line->out_of_memory = 1;
            return 1;
        }
        entry->has_busy = 1;
    }
    html_busy_add(&entry->busy, row->start_ns, row->end_ns);
    return 0;
}

/* The device's track of metric name, made when first seen; NULL past the
 * limit (counted) or when out of memory. */
static timeline_track *track_entry(timeline *line, timeline_device *entry, const char *name)
{
    for (int i = entry->track_count - 1; i >= 0; i--)
        if (strcmp(entry->tracks[i].name, name) == 0)
            return &entry->tracks[i];
    if (entry->track_count == TIMELINE_TRACKS_MAX) {
        line->left_out++;
        return NULL;
    }
    timeline_track *track = &entry->tracks[entry->track_count];
    track->name = strdup(name);
    if (track->name == NULL ||
        html_series_init(&track->series, line->report->origin_ns, line->report->end_ns) != 0) {
        free(track->name);
        track->name = NULL;
        line->out_of_memory = 1;
        return NULL;
    }
    entry->track_count++;
    return track;
}

static int read_metric(const store_metric_row *row, void *user)
{
    timeline *line = user;
    if (row->device < 0 || strncmp(row->name, "external_correlation.", 21) == 0)
        return 0;
    timeline_device *entry = device_entry(line, row->device);
    timeline_track *track = entry != NULL ? track_entry(line, entry, row->name) : NULL;
    if (track == NULL)
        return line->out_of_memory;
    html_series_add(&track->series, row->time_ns, (double)row->value);
    return 0;
}

/* ---- writing ---- */

static void write_device(timeline *line, timeline_device *entry)
{
    html_page *page = line->report->page;
    double span_ns = (double)(line->report->end_ns - line->report->origin_ns);
    html_json_object(page, NULL);
    html_json_i64(page, "device", entry->device);
    html_json_string(page, "name", entry->name);
    if (entry->has_busy) {
        html_busy_finish(&entry->busy);
        html_json_u64(page, "kernels", entry->busy.kernels);
        html_json_u64(page, "busy_ns", entry->busy.busy_total_ns);
        html_json_double(page, "busy_pct", 100.0 * (double)entry->busy.busy_total_ns / span_ns);
        html_json_object(page, "busy");
        html_busy_write(&entry->busy, page, line->report->origin_ns, 1e-9);
        html_json_end(page);
    } else {
        html_json_u64(page, "kernels", 0);
        html_json_null(page, "busy");
    }
    html_json_array(page, "metrics");
    for (int i = 0; i < entry->track_count; i++) {
        const timeline_track *track = &entry->tracks[i];
        html_json_object(page, NULL);
        html_json_string(page, "name", track->name);
        html_json_u64(page, "samples", track->series.samples);
        html_json_double(page, "min", track->series.minimum);
        html_json_double(page, "max", track->series.maximum);
        html_json_double(page, "mean", track->series.sum / (double)track->series.samples);
        html_series_write(&track->series, page, line->report->origin_ns, 1e-9);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_end(page);
}

static int write_window(const store_window_row *row, void *user)
{
    html_report *report = user;
    if (row->opened_ns == 0)
        return 0; /* refused: never open */
    uint64_t closed_ns = row->closed_ns > row->opened_ns ? row->closed_ns : report->end_ns;
    html_page *page = report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_u64(page, "id", row->id);
    html_json_string(page, "kind", row->token_kind);
    html_json_string(page, "label", html_report_window_label(row));
    html_json_double(page, "start_s", html_report_seconds(report, row->opened_ns));
    html_json_double(page, "end_s", html_report_seconds(report, closed_ns));
    html_json_bool(page, "closed", row->closed_ns > row->opened_ns);
    html_json_end(page);
    return 0;
}

static int write_storm(const store_storm_row *row, void *user)
{
    html_report *report = user;
    html_page *page = report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_i64(page, "device", row->device);
    html_json_double(page, "start_s", html_report_seconds(report, row->start_ns));
    html_json_double(page, "end_s", html_report_seconds(report, row->end_ns));
    html_json_u64(page, "untimed_launches", row->untimed_launches);
    html_json_bool(page, "still_open", row->still_open);
    html_json_end(page);
    return 0;
}

static void timeline_free(timeline *line)
{
    for (int i = 0; i < line->device_count; i++) {
        timeline_device *entry = &line->devices[i];
        for (int track = 0; track < entry->track_count; track++) {
            free(entry->tracks[track].name);
            html_series_free(&entry->tracks[track].series);
        }
        if (entry->has_busy)
            html_busy_free(&entry->busy);
        free(entry->name);
    }
    free(line);
}

void html_section_timeline(html_report *report)
{
    html_page *page = report->page;
    html_json_double(page, "from_s", 0.0);
    html_json_double(page, "to_s", html_report_seconds(report, report->end_ns));
    timeline *line = calloc(1, sizeof *line);
    if (line == NULL) {
        html_report_failed(report, "out of memory");
        return;
    }
    line->report = report;
    store *database = report->database;
    html_report_check(report, store_export_devices(database, read_device, line));
    int one_process = report->session->summary.process_count == 1;
    html_report_check(report,
                      store_chart_kernel_intervals(database, one_process, read_interval, line));
    html_report_check(report, store_export_metrics(database, read_metric, line));
    if (line->out_of_memory)
        html_report_failed(report, "out of memory");
    qsort(line->devices, (size_t)line->device_count, sizeof line->devices[0], compare_devices);
    html_json_array(page, "devices");
    for (int i = 0; i < line->device_count; i++)
        write_device(line, &line->devices[i]);
    html_json_end(page);
    html_json_u64(page, "left_out", line->left_out);
    timeline_free(line);
    html_json_array(page, "windows");
    html_report_check(report, store_read_windows(database, write_window, report));
    html_json_end(page);
    html_json_array(page, "storms");
    html_report_check(report, store_export_storms(database, write_storm, report));
    html_json_end(page);
}
