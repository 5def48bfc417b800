/*
 * export_perfetto_counters.c: the counter tracks of a Perfetto export
 * ("C" events, args.value): GPU metrics from NVML on each device's track
 * group and a process's own metrics on its group; application counters
 * (flare_counter_*, tables counters and counter_samples) as "counter NAME"
 * on their process; PM samples of deep windows (table pm_samples) as
 * "pm METRIC" on their device's group, one track per metric and device.
 *
 * A counter track holds its last value until the next one, so a PM track
 * is given a 0 at the end of the last sample before anything that is not a
 * sample of it: the end of its window, a hole in the stream, a sample left
 * out. Outside its windows it reads 0, never the last window's final value
 * drawn flat across the gap. Left out (the track reads 0 over it): a sample
 * without a value, and a sample flagged 2 (first after a hole: its value
 * may cover the hole) or 8 (its counters ran from before the window; on
 * the H200 one read 1.3e12 bytes among samples of about 1.2e6), which
 * flare never sums either (docs/pm-sampling.md). Flags 1 and 4 concern the
 * stream around the sample and its clock, not its value: drawn.
 *
 * It must never hold a table in memory: what grows is one entry per PM
 * track (metric x device x process), never per sample. Every C event's
 * args are numbers only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/export_perfetto.h"

/* Metrics with this prefix pair CUPTI correlation ids with a framework's own
 * ids: they are joins, not gauges, so they make no sense as counter tracks. */
#define CORRELATION_PREFIX "external_correlation."

/* PM sample flags (pm_samples.overflow, docs/pm-sampling.md) whose value is
 * not the sample's own interval's. */
#define PM_FLAG_AFTER_HOLE    2u
#define PM_FLAG_CLAMPED_START 8u

/* {"ph":"C","name":"PREFIXNAME","pid":P,"ts":T,"args":{"value": then the
 * value, which the caller writes and closes with }}. */
static void perfetto_counter_start(perfetto_context *context, const char *prefix, const char *name,
                                   int64_t trace_pid, uint64_t time_ns)
{
    cli_output *output = context->output;
    perfetto_event_start(context, "C");
    cli_output_text(output, ",\"name\":\"");
    cli_output_text(output, prefix); /* a plain word of ours: nothing to escape */
    cli_output_json_text(output, name);
    cli_output_char(output, '"');
    cli_output_json_member_i64(output, "pid", trace_pid);
    perfetto_timestamp(context, time_ns);
    cli_output_text(output, ",\"args\":{\"value\":");
}

/* ---- NVML and process metrics ---- */

static int perfetto_metric_row(const store_metric_row *row, void *user)
{
    perfetto_context *context = user;
    if (strncmp(row->name, CORRELATION_PREFIX, sizeof CORRELATION_PREFIX - 1) == 0)
        return 0;
    /* Device -1 is a metric of the process itself (launch counts...). */
    int64_t trace_pid = row->pid;
    if (row->device < 0)
        perfetto_name_os_process(context, row->pid, NULL);
    else
        trace_pid = perfetto_gpu_pid(context, row->pid, row->device, NULL);
    if (perfetto_stopped(context) || trace_pid < 0)
        return 1;
    perfetto_counter_start(context, "", row->name, trace_pid, row->time_ns);
    cli_output_i64(context->output, row->value);
    cli_output_text(context->output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_metrics(perfetto_context *context)
{
    return perfetto_failed(
        context, "metrics",
        store_export_metrics(context->session->database, perfetto_metric_row, context));
}

/* ---- application counters ---- */

static int perfetto_counter_sample_row(const store_export_counter_sample_row *row, void *user)
{
    perfetto_context *context = user;
    perfetto_name_os_process(context, row->pid, NULL);
    if (perfetto_stopped(context))
        return 1;
    /* "counter " keeps an application's name apart from flare's metrics
     * of the process, which share its track group. */
    perfetto_counter_start(context, "counter ", row->name, row->pid, row->time_ns);
    cli_output_u64(context->output, row->value);
    cli_output_text(context->output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_counters(perfetto_context *context)
{
    return perfetto_failed(context, "counter_samples",
                           store_export_counter_samples(context->session->database,
                                                        perfetto_counter_sample_row, context));
}

/* ---- PM samples ---- */

/* FNV-1a: the key of a metric's name in pm_track_index. */
static int64_t perfetto_name_hash(const char *text)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const unsigned char *at = (const unsigned char *)text; *at != '\0'; at++)
        hash = (hash ^ *at) * 0x100000001b3ull;
    return (int64_t)hash;
}

/* The PM track of metric in trace_pid's group, made (and nothing written)
 * the first time; NULL out of memory. Names that share a hash take the
 * next key up: the map finds each by probing until the name matches. */
static perfetto_pm_track *perfetto_pm_track_find(perfetto_context *context, int64_t trace_pid,
                                                 const char *metric)
{
    int64_t key = perfetto_name_hash(metric);
    for (;; key++) {
        int64_t *found = cli_pair_map_find(&context->pm_track_index, trace_pid, key);
        if (found == NULL)
            break;
        perfetto_pm_track *track = &context->pm_tracks[*found - 1];
        if (strcmp(track->metric, metric) == 0)
            return track;
    }
    if (context->pm_track_count == context->pm_track_capacity) {
        size_t capacity = context->pm_track_capacity == 0 ? 16 : context->pm_track_capacity * 2;
        perfetto_pm_track *tracks = realloc(context->pm_tracks, capacity * sizeof *tracks);
        if (tracks == NULL)
            goto out_of_memory;
        context->pm_tracks = tracks;
        context->pm_track_capacity = capacity;
    }
    char *copy = strdup(metric);
    if (copy == NULL)
        goto out_of_memory;
    if (cli_pair_map_insert(&context->pm_track_index, trace_pid, key,
                            (int64_t)context->pm_track_count + 1) != 0) {
        free(copy);
        goto out_of_memory;
    }
    perfetto_pm_track *track = &context->pm_tracks[context->pm_track_count++];
    *track = (perfetto_pm_track){.trace_pid = trace_pid, .metric = copy};
    return track;
out_of_memory:
    context->out_of_memory = 1;
    return NULL;
}

/* Writes the 0 that ends track's last value, at its last sample's end. */
static void perfetto_pm_close(perfetto_context *context, perfetto_pm_track *track)
{
    if (!track->open)
        return;
    perfetto_counter_start(context, "pm ", track->metric, track->trace_pid, track->last_end_ns);
    cli_output_char(context->output, '0');
    cli_output_text(context->output, "}}");
    track->open = 0;
}

static int perfetto_pm_sample_row(const store_pm_row *row, void *user)
{
    perfetto_context *context = user;
    int64_t trace_pid = perfetto_gpu_pid(context, row->pid, row->device, NULL);
    if (trace_pid < 0)
        return 1;
    perfetto_pm_track *track = perfetto_pm_track_find(context, trace_pid, row->metric);
    if (track == NULL)
        return 1;
    /* Another window, or a hole: more than half a sample's length since
     * the last one ended (samples follow each other end to start). */
    uint64_t slack = (track->last_end_ns - track->last_start_ns) / 2;
    if (track->open &&
        (row->window_id != track->window_id || row->start_ns > track->last_end_ns + slack))
        perfetto_pm_close(context, track);
    int usable =
        !isnan(row->value) && (row->flags & (PM_FLAG_AFTER_HOLE | PM_FLAG_CLAMPED_START)) == 0;
    if (!usable) {
        /* Left out: the track reads 0 over it rather than the last value. */
        perfetto_pm_close(context, track);
        return perfetto_stopped(context);
    }
    perfetto_counter_start(context, "pm ", row->metric, trace_pid, row->start_ns);
    cli_output_json_double(context->output, row->value);
    cli_output_text(context->output, "}}");
    track->window_id = row->window_id;
    track->last_start_ns = row->start_ns;
    track->last_end_ns = row->end_ns > row->start_ns ? row->end_ns : row->start_ns;
    track->open = 1;
    return perfetto_stopped(context);
}

int perfetto_write_pm_samples(perfetto_context *context)
{
    int failed = perfetto_failed(
        context, "pm_samples",
        store_export_pm_samples(context->session->database, perfetto_pm_sample_row, context));
    /* Every track's last window ends with its last sample. */
    for (size_t i = 0; !failed && i < context->pm_track_count; i++)
        perfetto_pm_close(context, &context->pm_tracks[i]);
    return failed || perfetto_stopped(context);
}

void perfetto_pm_tracks_free(perfetto_context *context)
{
    for (size_t i = 0; i < context->pm_track_count; i++)
        free(context->pm_tracks[i].metric);
    free(context->pm_tracks);
    context->pm_tracks = NULL;
    context->pm_track_count = context->pm_track_capacity = 0;
    cli_pair_map_free(&context->pm_track_index);
}
