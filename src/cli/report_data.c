/*
 * report_data.c: `flare report --format json|csv`: the sections of the text
 * report (report.c, report_replay.c) as flat tables of raw values, written
 * through report_emit.h, in the order of the table data_sections. Every
 * record is one level deep (keys with scalar values: integers in
 * nanoseconds, bytes and counts, strings as stored, null where a value is
 * absent), so that each table loads as it is into a data frame; where the
 * text report nests (a graph's kernels, a span's kernels, a launch's
 * metrics) the rows are flat and carry their parent's ids. The keys are
 * documented in docs/cli.md and must never change meaning without
 * CLI_REPORT_SCHEMA_VERSION changing too.
 *
 * Also the top-kernels read the text report's kernel table uses, with the
 * GPU time of every kernel for its "% GPU" column.
 *
 * It must never change the session, never leave the document unfinished
 * when a section cannot be read (the section is closed, named in "errors"
 * and on stderr, and the next one written), and never hold a table in
 * memory but the --top kernels.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "cli/report.h"
#include "cli/report_data.h"
#include "cli/report_emit.h"
#include "cli/report_pc.h"
#include "cli/report_pc_lines.h"
#include "cli/report_pc_scopes.h"
#include "cli/report_sass.h"
#include "cli/report_triggered.h"
#include "store/store_ranks.h"
#include "flare/flare.h"
#include "store/store_export.h"
#include "store/store_pm.h"
#include "store/store_replay.h"

/* ---- the top kernels, shared with the text report ---- */

typedef struct kernel_collect {
    cli_report_kernels *kernels;
    size_t top;
    size_t capacity;
    int out_of_memory;
} kernel_collect;

/* A reader callback: adds every kernel's time, keeps the first top rows. */
static int kernel_collect_row(const store_duration_stats *stats, void *user)
{
    kernel_collect *collect = user;
    cli_report_kernels *kernels = collect->kernels;
    kernels->all_ns += stats->total_ns;
    if (kernels->count >= collect->top)
        return 0;
    if (kernels->count == collect->capacity) {
        size_t capacity = collect->capacity ? collect->capacity * 2 : 16;
        store_duration_stats *rows = realloc(kernels->rows, capacity * sizeof *rows);
        if (rows == NULL)
            goto out_of_memory;
        kernels->rows = rows;
        collect->capacity = capacity;
    }
    store_duration_stats row = *stats;
    row.name = strdup(stats->name != NULL ? stats->name : "");
    if (row.name == NULL)
        goto out_of_memory;
    kernels->rows[kernels->count++] = row;
    return 0;
out_of_memory:
    collect->out_of_memory = 1;
    return 1;
}

const char *cli_report_kernels_read(store *database, uint32_t top, cli_report_kernels *kernels)
{
    *kernels = (cli_report_kernels){0};
    kernel_collect collect = {.kernels = kernels, .top = top};
    /* Every group, not only the top ones: their times make the total. */
    const char *failure = NULL;
    if (store_read_kernel_stats(database, 0, kernel_collect_row, &collect) != 0)
        failure = store_last_error(database);
    else if (collect.out_of_memory)
        failure = "out of memory";
    /* Never half a table. */
    if (failure != NULL)
        cli_report_kernels_free(kernels);
    return failure;
}

void cli_report_kernels_free(cli_report_kernels *kernels)
{
    for (size_t i = 0; i < kernels->count; i++)
        free((char *)kernels->rows[i].name);
    free(kernels->rows);
    *kernels = (cli_report_kernels){0};
}

double cli_report_share_pct(uint64_t part, uint64_t all)
{
    return all == 0 ? NAN : 100.0 * (double)part / (double)all;
}

/* ---- the report ---- */

/* Sections that could not be read, kept for "errors" at the end. More
 * than there are sections cannot happen; past that they are on stderr
 * only. */
#define DATA_ERRORS_MAX 32

typedef struct data_error {
    const char *section;
    char message[512];
} data_error;

typedef struct report_data {
    const cli_session *session;
    store *database;
    report_emit *emit;
    uint32_t top;
    const char *section; /* the section being written: its key, and what a failure names */
    cli_report_kernels kernels;
    char kernels_failure[512]; /* why the kernels could not be read, or "" */
    data_error errors[DATA_ERRORS_MAX];
    size_t error_count;
    int status;
    int replay_noted; /* replay_metrics: the session notes how values were produced */
} report_data;

/* Prints "flare report: reading SECTION: detail", keeps it for "errors"
 * and marks the report failed; a section's later failures (a second read
 * of the same missing table) are left out. */
static void data_failed(report_data *data, const char *detail)
{
    if (data->error_count > 0 && data->errors[data->error_count - 1].section == data->section)
        return;
    data->status = cli_failure("report", "reading %s: %s", data->section, detail);
    if (data->error_count == DATA_ERRORS_MAX)
        return;
    data_error *error = &data->errors[data->error_count++];
    error->section = data->section;
    snprintf(error->message, sizeof error->message, "%s", detail);
}

/* Reports status, a store reader's, when it is a failure. */
static void data_check(report_data *data, int status)
{
    if (status != 0)
        data_failed(data, store_last_error(data->database));
}

static void emit_i64_if(report_emit *emit, const char *key, int64_t value, int present)
{
    if (present)
        report_emit_i64(emit, key, value);
    else
        report_emit_null(emit, key);
}

/* ---- session ---- */

static void data_session(report_data *data)
{
    const store_session_summary *summary = &data->session->summary;
    report_emit *emit = data->emit;
    report_emit_object_begin(emit, data->section);
    report_emit_string(emit, "directory", data->session->directory);
    report_emit_string(emit, "command", summary->command);
    report_emit_string(emit, "host", summary->host);
    report_emit_string(emit, "flare_version", summary->flare_version);
    report_emit_i64(emit, "database_schema_version", summary->schema_version);
    report_emit_u64(emit, "start_ns", summary->start_ns);
    /* end_ns 0: the session never ended (killed, or still running). */
    report_emit_u64_if(emit, "end_ns", summary->end_ns, summary->end_ns != 0);
    report_emit_u64_if(emit, "duration_ns", summary->end_ns - summary->start_ns,
                       summary->end_ns > summary->start_ns);
    emit_i64_if(emit, "start_unix_ns", summary->start_unix_ns, summary->start_unix_ns > 0);
    emit_i64_if(emit, "exit_status", summary->exit_status, summary->has_exit_status);
    report_emit_i64(emit, "process_count", summary->process_count);
    report_emit_i64(emit, "kernel_count", summary->kernel_count);
    report_emit_i64(emit, "copy_count", summary->copy_count);
    report_emit_i64(emit, "scope_count", summary->scope_count);
    report_emit_u64_if(emit, "kernel_gpu_ns", data->kernels.all_ns,
                       data->kernels_failure[0] == '\0');
    /* Unreadable drops leave these null; the drops section says why. */
    cli_report_untimed_work untimed;
    int read = cli_report_untimed(data->database, &untimed) == 0;
    report_emit_u64_if(emit, "untimed_kernel_launches", untimed.launches, read);
    report_emit_u64_if(emit, "untimed_copies", untimed.copies, read);
    report_emit_object_end(emit);
}

/* ---- where each process ran (schema 9; none in older sessions) ---- */

static int emit_rank_row(const store_rank_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_string(emit, "host", row->host);
    emit_i64_if(emit, "rank", row->rank, row->has_rank);
    emit_i64_if(emit, "local_rank", row->local_rank, row->has_local_rank);
    emit_i64_if(emit, "world_size", row->world_size, row->has_world_size);
    if (row->job_id != NULL)
        report_emit_string(emit, "job_id", row->job_id);
    else
        report_emit_null(emit, "job_id");
    report_emit_row_end(emit);
    return 0;
}

static void data_ranks(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    data_check(data, store_read_process_ranks(data->database, emit_rank_row, data));
    report_emit_table_end(data->emit);
}

/* ---- the tables of the text report ---- */

static void emit_duration_fields(report_emit *emit, const store_duration_stats *stats)
{
    report_emit_string(emit, "name", stats->name);
    report_emit_i64(emit, "count", stats->count);
    report_emit_u64(emit, "total_ns", stats->total_ns);
    report_emit_u64(emit, "mean_ns", stats->mean_ns);
    report_emit_u64(emit, "p50_ns", stats->p50_ns);
    report_emit_u64(emit, "p99_ns", stats->p99_ns);
    report_emit_u64(emit, "max_ns", stats->max_ns);
}

static void data_kernels(report_data *data)
{
    report_emit *emit = data->emit;
    report_emit_table_begin(emit, data->section);
    for (size_t i = 0; i < data->kernels.count; i++) {
        const store_duration_stats *stats = &data->kernels.rows[i];
        report_emit_row_begin(emit);
        emit_duration_fields(emit, stats);
        report_emit_double(emit, "gpu_time_pct",
                           cli_report_share_pct(stats->total_ns, data->kernels.all_ns));
        report_emit_row_end(emit);
    }
    report_emit_table_end(emit);
    if (data->kernels_failure[0] != '\0')
        data_failed(data, data->kernels_failure);
}

static int emit_copy_row(const store_copy_stats *stats, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_string(emit, "kind",
                       stats->is_memset ? "memset"
                                        : cli_copy_kind_name(stats->copy_kind, "unknown"));
    report_emit_bool(emit, "is_memset", stats->is_memset);
    report_emit_i64(emit, "copy_kind", stats->copy_kind);
    report_emit_i64(emit, "count", stats->count);
    report_emit_u64(emit, "bytes", stats->bytes);
    report_emit_u64(emit, "total_ns", stats->total_ns);
    report_emit_i64(emit, "failed", stats->failed);
    report_emit_row_end(emit);
    return 0;
}

static void data_copies(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_copy_stats(data->database, emit_copy_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

/* One row per (graph, kernel name), the graph's totals on each. */
static int emit_graph_row(const store_graph_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "graph_id", row->graph_id);
    report_emit_u64(emit, "launches", row->launches);
    report_emit_u64(emit, "kernels", row->kernels);
    report_emit_u64(emit, "kernel_nodes", row->kernel_nodes);
    report_emit_u64(emit, "copies", row->copies);
    report_emit_u64(emit, "gpu_ns", row->gpu_ns);
    report_emit_string(emit, "launched_from", row->launched_from);
    report_emit_string(emit, "kernel_name", row->kernel_name);
    report_emit_u64(emit, "kernel_count", row->name_count);
    report_emit_u64(emit, "kernel_gpu_ns", row->name_gpu_ns);
    report_emit_row_end(emit);
    return 0;
}

static void data_graphs(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_graphs(data->database, emit_graph_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_scope_row(const store_duration_stats *stats, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    emit_duration_fields(emit, stats);
    report_emit_row_end(emit);
    return 0;
}

static void data_scopes(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_scope_stats(data->database, (int)data->top, emit_scope_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_counter_row(const store_counter_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "index", row->index);
    report_emit_string(emit, "name", row->name);
    report_emit_u64(emit, "value", row->value);
    report_emit_i64(emit, "samples", row->samples);
    report_emit_u64_if(emit, "last_ns", row->last_ns, row->samples > 0);
    report_emit_row_end(emit);
    return 0;
}

static void data_counters(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_counters(data->database, emit_counter_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_metric_row(const store_metric_stats *stats, void *user)
{
    /* Id pairs, not gauges: left out, as in the text report. */
    if (strncmp(stats->name, "external_correlation.", 21) == 0)
        return 0;
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    emit_i64_if(emit, "device", stats->device, stats->device >= 0);
    report_emit_string(emit, "name", stats->name);
    report_emit_i64(emit, "samples", stats->count);
    report_emit_i64(emit, "min", stats->minimum);
    report_emit_double(emit, "mean", stats->mean);
    report_emit_i64(emit, "max", stats->maximum);
    report_emit_row_end(emit);
    return 0;
}

static void data_metrics(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_metric_stats(data->database, emit_metric_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_rule_row(const store_rule_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "rule_id", row->rule_id);
    report_emit_string(emit, "text", row->text);
    report_emit_string(emit, "canonical", row->canonical);
    report_emit_string(emit, "status", row->status);
    report_emit_string(emit, "reason", row->reason);
    report_emit_u64(emit, "times_true", row->times_true);
    report_emit_u64(emit, "windows_fired", row->windows_fired);
    report_emit_u64(emit, "busy_refusals", row->busy_refusals);
    report_emit_u64(emit, "stale_readings", row->stale_readings);
    report_emit_u64(emit, "missing_readings", row->missing_readings);
    if (row->has_last_value)
        report_emit_double(emit, "last_value", row->last_value);
    else
        report_emit_null(emit, "last_value");
    report_emit_row_end(emit);
    return 0;
}

static void data_rules(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_rules(data->database, emit_rule_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static void data_triggered_replays(report_data *data)
{
    report_triggered triggered;
    int status = report_triggered_collect(data->database, SIZE_MAX, &triggered);
    report_emit_table_begin(data->emit, data->section);
    if (status == 0)
        report_triggered_emit(data->emit, &triggered);
    report_emit_table_end(data->emit);
    if (status == FLARE_ERR_NO_MEMORY)
        data_failed(data, "out of memory");
    else
        data_check(data, status);
    report_triggered_free(&triggered);
}

/* What a rule's window records of its cause; null for other windows. */
static void emit_window_cause(report_emit *emit, const store_window_row *row)
{
    int cause = row->has_cause;
    report_emit_u64_if(emit, "rule_id", row->rule_id, cause);
    report_emit_string(emit, "rule_text", cause ? row->rule_text : NULL);
    report_emit_string(emit, "comparison", cause ? row->comparison : NULL);
    report_emit_double(emit, "threshold", cause ? row->threshold : NAN);
    report_emit_u64_if(emit, "rate_window_ns", row->rate_window_ns, cause);
    report_emit_u64_if(emit, "sustained_ns", row->sustained_ns, cause);
    report_emit_u64_if(emit, "first_true_ns", row->first_true_ns, cause);
    report_emit_double(emit, "observed_value", cause ? row->observed_value : NAN);
    if (cause)
        report_emit_bool(emit, "observed_partial", row->observed_partial);
    else
        report_emit_null(emit, "observed_partial");
}

static int emit_window_row(const store_window_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "id", row->id);
    report_emit_string(emit, "kind", row->token_kind);
    report_emit_string(emit, "label", row->label);
    emit_window_cause(emit, row);
    report_emit_u64(emit, "max_duration_ns", row->max_duration_ns);
    report_emit_u64_if(emit, "max_launches", row->max_launches, row->max_launches != 0);
    report_emit_u64(emit, "requested_ns", row->requested_ns);
    /* 0: the window never opened (refused), or never closed. */
    report_emit_u64_if(emit, "opened_ns", row->opened_ns, row->opened_ns != 0);
    report_emit_u64_if(emit, "closed_ns", row->closed_ns, row->closed_ns != 0);
    report_emit_string(emit, "close_reason", row->close_reason);
    report_emit_u64(emit, "launches", row->launches);
    report_emit_string(emit, "engine", row->engine);
    report_emit_string(emit, "engine_status", row->engine_status);
    report_emit_string(emit, "engine_reason", row->engine_reason);
    report_emit_u64(emit, "engine_samples", row->engine_samples);
    report_emit_row_end(emit);
    return 0;
}

static void data_windows(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_windows(data->database, emit_window_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

/* The top ranges of each window, as the text report counts them. */
typedef struct data_pm {
    report_data *data;
    int64_t pid;
    uint64_t window_id;
    char range[FLARE_NAME_MAX + 16];
    uint32_t ranges; /* ranges of this window so far */
} data_pm;

static int emit_pm_row(const store_pm_summary_row *row, void *user)
{
    data_pm *pm = user;
    if (row->pid != pm->pid || row->window_id != pm->window_id) {
        pm->pid = row->pid;
        pm->window_id = row->window_id;
        pm->ranges = 0;
        pm->range[0] = '\0';
    }
    if (strcmp(row->range, pm->range) != 0) {
        snprintf(pm->range, sizeof pm->range, "%s", row->range);
        pm->ranges++;
    }
    if (pm->ranges > pm->data->top)
        return 0;
    report_emit *emit = pm->data->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_string(emit, "range", row->range);
    report_emit_string(emit, "metric", row->metric);
    report_emit_u64(emit, "samples", row->samples);
    report_emit_u64(emit, "flagged", row->flagged);
    report_emit_double(emit, "mean", row->has_value ? row->mean : NAN);
    report_emit_double(emit, "sum", row->has_value ? row->sum : NAN);
    report_emit_row_end(emit);
    return 0;
}

static void data_pm_samples(report_data *data)
{
    data_pm pm = {.data = data, .pid = -1, .window_id = UINT64_MAX};
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_pm_summary(data->database, emit_pm_row, &pm);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

/* ---- replay ---- */

/* What a launch's and a span's replay share (STORE_REPLAY_RUN_MEMBERS and
 * the kept passes), taken from either row. */
typedef struct replay_run {
    int declined;
    const char *reason;
    uint32_t passes_planned;
    uint32_t passes_run;
    uint32_t passes_kept;
    uint64_t pass_mean_ns;
    uint64_t begin_ns;
    uint64_t end_ns;
    uint64_t drain_ns;
    uint64_t snapshot_bytes;
    int shadow_on_device;
    uint64_t snapshot_ns;
    uint64_t restore_ns;
    uint64_t bytes_restored;
    const char *collector;
} replay_run;

#define REPLAY_RUN_OF(row)                                                                         \
    (replay_run)                                                                                   \
    {                                                                                              \
        .declined = (row)->declined, .reason = (row)->reason,                                      \
        .passes_planned = (row)->passes_planned, .passes_run = (row)->passes_run,                  \
        .passes_kept = (row)->passes_kept, .pass_mean_ns = (row)->pass_mean_ns,                    \
        .begin_ns = (row)->begin_ns, .end_ns = (row)->end_ns, .drain_ns = (row)->drain_ns,         \
        .snapshot_bytes = (row)->snapshot_bytes, .shadow_on_device = (row)->shadow_on_device,      \
        .snapshot_ns = (row)->snapshot_ns, .restore_ns = (row)->restore_ns,                        \
        .bytes_restored = (row)->bytes_restored, .collector = (row)->collector,                    \
    }

static void emit_replay_run(report_emit *emit, replay_run run)
{
    report_emit_bool(emit, "declined", run.declined);
    report_emit_string(emit, "reason", run.reason);
    /* Planned 0: until a continue callback stopped it. */
    report_emit_u64_if(emit, "passes_planned", run.passes_planned, run.passes_planned != 0);
    report_emit_u64(emit, "passes_run", run.passes_run);
    report_emit_u64(emit, "passes_kept", run.passes_kept);
    report_emit_u64_if(emit, "pass_mean_ns", run.pass_mean_ns, run.passes_kept > 0);
    report_emit_u64(emit, "begin_ns", run.begin_ns);
    report_emit_u64(emit, "end_ns", run.end_ns);
    report_emit_u64(emit, "drain_ns", run.drain_ns);
    report_emit_u64(emit, "snapshot_bytes", run.snapshot_bytes);
    /* Where the snapshot's shadows were; null when nothing was snapshotted. */
    const char *shadow = NULL;
    if (run.snapshot_bytes != 0)
        shadow = run.shadow_on_device ? "device" : "host";
    report_emit_string(emit, "shadow", shadow);
    report_emit_u64(emit, "snapshot_ns", run.snapshot_ns);
    report_emit_u64(emit, "restore_ns", run.restore_ns);
    report_emit_u64(emit, "bytes_restored", run.bytes_restored);
    report_emit_string(emit, "collector", run.collector);
}

/* One launch: replayed on its own (kernel_replay) or in a span
 * (range_replay_kernels); the same keys in both. */
static void emit_launch(report_emit *emit, const store_replay_launch_row *row)
{
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "launch_id", row->launch_id);
    report_emit_u64_if(emit, "span_id", row->span_id, row->span_id != 0);
    report_emit_string(emit, "kernel", row->kernel);
    report_emit_u64(emit, "launch_index", row->launch_index);
    report_emit_i64(emit, "device", row->device);
    report_emit_u64(emit, "stream_id", row->stream_id);
    emit_replay_run(emit, REPLAY_RUN_OF(row));
    report_emit_u64(emit, "metric_count", row->metric_count);
    report_emit_row_end(emit);
}

static int emit_launch_row(const store_replay_launch_row *row, void *user)
{
    emit_launch(((report_data *)user)->emit, row);
    return 0;
}

static void data_kernel_replay(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_replay_launches(data->database, emit_launch_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_span_row(const store_replay_span_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "span_id", row->span_id);
    report_emit_string(emit, "name", row->name);
    /* Explicit spans (flare_replay_range_begin) have no occurrence. */
    report_emit_u64_if(emit, "occurrence", row->occurrence, row->occurrence != 0);
    emit_i64_if(emit, "device", row->device, row->device >= 0);
    report_emit_u64(emit, "kernels", row->kernels);
    report_emit_u64(emit, "copies", row->copies);
    report_emit_u64(emit, "kernels_stored", row->kernel_count);
    emit_replay_run(emit, REPLAY_RUN_OF(row));
    report_emit_row_end(emit);
    return 0;
}

static void data_range_replay(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_replay_spans(data->database, emit_span_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_span_kernels(const store_replay_span_row *row, void *user)
{
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++)
        emit_launch(((report_data *)user)->emit, &row->kernel_rows[kernel]);
    return 0;
}

static void data_range_replay_kernels(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_replay_spans(data->database, emit_span_kernels, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

/* One row per (launch, metric), launches on their own first, then the
 * kernels of spans. Where the session notes how values were produced
 * (schema 16: a PM-sampled span), every row also has method, status and
 * error_bound, as v_replay_values reads them: a value without a note was
 * its launch's collector's own measurement. */
static void emit_launch_metrics(report_data *data, const store_replay_launch_row *row)
{
    report_emit *emit = data->emit;
    for (size_t metric = 0; metric < row->metric_count; metric++) {
        int has_value = row->metric_has_value[metric];
        report_emit_row_begin(emit);
        report_emit_i64(emit, "pid", row->pid);
        report_emit_u64(emit, "launch_id", row->launch_id);
        report_emit_u64_if(emit, "span_id", row->span_id, row->span_id != 0);
        report_emit_string(emit, "kernel", row->kernel);
        report_emit_string(emit, "metric", row->metric_names[metric]);
        report_emit_double(emit, "value", has_value ? row->metric_values[metric] : NAN);
        if (data->replay_noted) {
            int noted = row->metric_methods != NULL && row->metric_methods[metric][0] != '\0';
            report_emit_string(emit, "method",
                               noted ? row->metric_methods[metric] : row->collector);
            report_emit_string(emit, "status",
                               noted && row->metric_statuses[metric][0] != '\0'
                                   ? row->metric_statuses[metric]
                                   : (has_value ? "measured" : "unavailable"));
            report_emit_double(emit, "error_bound", noted ? row->metric_error_bounds[metric] : NAN);
        }
        report_emit_row_end(emit);
    }
}

static int emit_launch_metric_rows(const store_replay_launch_row *row, void *user)
{
    emit_launch_metrics(user, row);
    return 0;
}

static int emit_span_metric_rows(const store_replay_span_row *row, void *user)
{
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++)
        emit_launch_metrics(user, &row->kernel_rows[kernel]);
    return 0;
}

static void data_replay_metrics(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    data_check(data, store_export_replay_noted(data->database, &data->replay_noted));
    data_check(data, store_read_replay_launches(data->database, emit_launch_metric_rows, data));
    data_check(data, store_read_replay_spans(data->database, emit_span_metric_rows, data));
    report_emit_table_end(data->emit);
}

static void data_replay_summary(report_data *data)
{
    store_replay_summary summary;
    if (store_read_replay_summary(data->database, &summary) != 0) {
        report_emit_object_null(data->emit, data->section);
        data_check(data, -1);
        return;
    }
    report_emit *emit = data->emit;
    report_emit_object_begin(emit, data->section);
    report_emit_i64(emit, "launches", summary.launches);
    report_emit_i64(emit, "replayed", summary.replayed);
    report_emit_i64(emit, "declined", summary.declined);
    report_emit_i64(emit, "kernels", summary.kernels);
    report_emit_u64(emit, "passes", summary.passes);
    report_emit_u64(emit, "snapshot_bytes", summary.snapshot_bytes);
    report_emit_u64(emit, "bytes_restored", summary.bytes_restored);
    report_emit_u64(emit, "collection_ns", summary.collection_ns);
    report_emit_i64(emit, "metric_values", summary.metric_values);
    report_emit_string(emit, "first_decline", summary.first_decline);
    report_emit_i64(emit, "spans", summary.spans);
    report_emit_i64(emit, "spans_replayed", summary.spans_replayed);
    report_emit_i64(emit, "spans_declined", summary.spans_declined);
    report_emit_i64(emit, "span_kernels", summary.span_kernels);
    report_emit_u64(emit, "span_passes", summary.span_passes);
    report_emit_u64(emit, "span_snapshot_bytes", summary.span_snapshot_bytes);
    report_emit_u64(emit, "span_bytes_restored", summary.span_bytes_restored);
    report_emit_u64(emit, "span_collection_ns", summary.span_collection_ns);
    report_emit_i64(emit, "span_metric_values", summary.span_metric_values);
    report_emit_string(emit, "first_span_decline", summary.first_span_decline);
    report_emit_object_end(emit);
}

/* ---- capabilities, drops, errors ---- */

static int emit_capability_row(const store_capability_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_string(emit, "feature", row->feature);
    report_emit_bool(emit, "requested", row->requested);
    report_emit_string(emit, "status", row->status);
    report_emit_string(emit, "reason", row->reason);
    report_emit_row_end(emit);
    return 0;
}

static void data_capabilities(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_capabilities(data->database, emit_capability_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static int emit_drop_row(const store_drop_row *row, void *user)
{
    report_emit *emit = ((report_data *)user)->emit;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_string(emit, "source", row->source);
    report_emit_string(emit, "detail", row->detail);
    report_emit_u64(emit, "count", row->count);
    report_emit_row_end(emit);
    return 0;
}

static void data_drops(report_data *data)
{
    report_emit_table_begin(data->emit, data->section);
    int status = store_read_drops(data->database, emit_drop_row, data);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

/* The sections that could not be read: always last, never fails. */
static void data_errors(report_data *data)
{
    report_emit *emit = data->emit;
    report_emit_table_begin(emit, "errors");
    for (size_t i = 0; i < data->error_count; i++) {
        report_emit_row_begin(emit);
        report_emit_string(emit, "section", data->errors[i].section);
        report_emit_string(emit, "message", data->errors[i].message);
        report_emit_row_end(emit);
    }
    report_emit_table_end(emit);
}

/* ---- the document ---- */

/* The sections in document order, each a key of the JSON object and a
 * section of the CSV (docs/cli.md lists their keys). A section is written
 * by write, or, when that is NULL, is the table whose records rows writes
 * (it returns a store reader's status). */
typedef struct data_section {
    const char *name;
    void (*write)(report_data *data);
    int (*rows)(store *database, report_emit *emit);
} data_section;

/* A section that is one table of a module's rows (data_section.rows). */
static void data_rows(report_data *data, int (*rows)(store *database, report_emit *emit))
{
    report_emit_table_begin(data->emit, data->section);
    int status = rows(data->database, data->emit);
    report_emit_table_end(data->emit);
    data_check(data, status);
}

static const data_section data_sections[] = {
    {"session", data_session, NULL},
    {"ranks", data_ranks, NULL},
    {"kernels", data_kernels, NULL},
    {"copies", data_copies, NULL},
    {"graphs", data_graphs, NULL},
    {"scopes", data_scopes, NULL},
    {"counters", data_counters, NULL},
    {"metrics", data_metrics, NULL},
    {"rules", data_rules, NULL},
    {"windows", data_windows, NULL},
    {"triggered_replays", data_triggered_replays, NULL},
    {"pc_samples", NULL, report_pc_emit},
    {"pc_by_scope", NULL, report_pc_scopes_emit},
    {"pc_lines", NULL, report_pc_lines_emit},
    {"sass_metrics", NULL, report_sass_emit},
    {"sass_by_scope", NULL, report_sass_scopes_emit},
    {"sass_lines", NULL, report_sass_lines_emit},
    {"pm_samples", data_pm_samples, NULL},
    {"kernel_replay", data_kernel_replay, NULL},
    {"range_replay", data_range_replay, NULL},
    {"range_replay_kernels", data_range_replay_kernels, NULL},
    {"replay_metrics", data_replay_metrics, NULL},
    {"replay_summary", data_replay_summary, NULL},
    {"capabilities", data_capabilities, NULL},
    {"drops", data_drops, NULL},
};

int cli_report_data(const cli_session *session, uint32_t top, const report_emit_format *format)
{
    char error[3 * PATH_MAX];
    cli_output *output;
    if (cli_output_open(NULL, &output, error, sizeof error) != 0)
        return cli_failure("report", "%s", error);
    report_data *data = calloc(1, sizeof *data);
    report_emit *emit =
        data != NULL ? report_emit_begin(format, output, flare_version(), CLI_REPORT_SCHEMA_VERSION)
                     : NULL;
    if (emit == NULL) {
        free(data);
        cli_output_close(output, 0, error, sizeof error);
        return cli_failure("report", "out of memory");
    }
    *data = (report_data){
        .session = session,
        .database = session->database,
        .emit = emit,
        .top = top,
        .status = CLI_EXIT_OK,
    };
    /* Before the session section, which holds their total GPU time. */
    const char *failure = cli_report_kernels_read(data->database, top, &data->kernels);
    if (failure != NULL)
        snprintf(data->kernels_failure, sizeof data->kernels_failure, "%s", failure);
    for (size_t i = 0; i < sizeof data_sections / sizeof data_sections[0]; i++) {
        data->section = data_sections[i].name;
        if (data_sections[i].write != NULL)
            data_sections[i].write(data);
        else
            data_rows(data, data_sections[i].rows);
    }
    data_errors(data);
    report_emit_end(emit);
    int status = data->status;
    cli_report_kernels_free(&data->kernels);
    free(data);
    if (cli_output_close(output, 1, error, sizeof error) != 0)
        return cli_failure("report", "%s", error);
    return status;
}
