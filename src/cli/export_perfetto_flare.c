/*
 * export_perfetto_flare.c: flare's own tracks in a Perfetto export, in each
 * process's track group: deep-profiling windows (table windows) as slices
 * named by what opened them (a PC or SASS window's findings in its args,
 * export_perfetto_pc.c, export_perfetto_sass.c), rule firings as instants, launch storms
 * (table storms) as slices, and kernel and range replay (tables
 * replay_launches, replay_metrics, replay_passes, replay_spans,
 * replay_value_methods).
 *
 * A replayed launch's results go in the args of its kernel's slice
 * ("replay": passes, costs, metric values, and "metric_notes" where the
 * values carry notes on how they were produced: a PM-sampled span's).
 * replay_launches has no correlation id: its launch_index is the launch's
 * place among the launches of that kernel name in its process, from 0, so
 * the match is the launch_index-th kernel row of that name and pid in
 * correlation-id order, leaving out CUDA graphs' kernels and the replays' own re-runs (each pass
 * after the first is recorded as a kernel of its own; those are marked
 * "replay_rerun") (store_export_replay_matches). In a process that had a launch storm the
 * storm's untimed launches have no kernel row, so that count no longer
 * says which row is which: the match is unavailable there, and the results
 * go on a slice of their own on the "flare kernel replay" track instead of
 * on a guessed kernel (as for a launch whose kernel row is missing). A span
 * of range replay is a slice on the "flare range replay" track with its
 * counts and pass facts; its kernels' results go on their kernels' slices
 * too, or, where unmatched, in the span's args.
 *
 * It must never guess a match, never hold a table in memory (what grows is
 * the replay match and the replays' re-run windows: a few numbers per
 * replayed launch or span, and the processes that had a storm), and never put two slices on one
 * track that overlap without nesting (each kind of slice, and each device's, has a track).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/export_perfetto.h"

/* ---- the replay match ---- */

static int perfetto_storm_process(int64_t pid, void *user)
{
    perfetto_context *context = user;
    if (cli_pair_map_find(&context->storm_processes, pid, 0) == NULL &&
        cli_pair_map_insert(&context->storm_processes, pid, 0, 1) != 0)
        context->out_of_memory = 1;
    return context->out_of_memory;
}

static int perfetto_replay_match(const store_export_replay_match_row *row, void *user)
{
    perfetto_context *context = user;
    if (cli_pair_map_find(&context->storm_processes, row->pid, 0) != NULL)
        return 0; /* unavailable: see the top of the file */
    /* One kernel row per correlation id: a second launch matched to the
     * same kernel (a damaged table) keeps the first, and has its own
     * slice. */
    if (cli_pair_map_find(&context->replay_by_kernel, row->pid, (int64_t)row->correlation_id) !=
        NULL)
        return 0;
    if (cli_pair_map_insert(&context->replay_by_kernel, row->pid, (int64_t)row->correlation_id,
                            (int64_t)row->launch_id) != 0 ||
        cli_pair_map_insert(&context->replay_matched, row->pid, (int64_t)row->launch_id, 1) != 0)
        context->out_of_memory = 1;
    return context->out_of_memory;
}

static int perfetto_replay_window(const store_export_replay_window_row *row, void *user)
{
    perfetto_context *context = user;
    if (context->replay_window_count == context->replay_window_capacity) {
        size_t capacity =
            context->replay_window_capacity == 0 ? 16 : context->replay_window_capacity * 2;
        store_export_replay_window_row *windows =
            realloc(context->replay_windows, capacity * sizeof *windows);
        if (windows == NULL) {
            context->out_of_memory = 1;
            return 1;
        }
        context->replay_windows = windows;
        context->replay_window_capacity = capacity;
    }
    context->replay_windows[context->replay_window_count++] = *row;
    return 0;
}

int perfetto_replay_prepare(perfetto_context *context)
{
    store *database = context->session->database;
    return perfetto_failed(
               context, "launch storms",
               store_export_storm_processes(database, perfetto_storm_process, context)) ||
           perfetto_failed(
               context, "replay_passes",
               store_export_replay_windows(database, perfetto_replay_window, context)) ||
           perfetto_failed(context, "replay_launches",
                           store_export_replay_matches(database, perfetto_replay_match, context));
}

/* -1, 0 or 1 as (pid, device, time_ns) comes before, at or after the
 * window's (pid, device, start). */
static int perfetto_window_order(int64_t pid, int device, uint64_t time_ns,
                                 const store_export_replay_window_row *window)
{
    if (pid != window->pid)
        return pid < window->pid ? -1 : 1;
    if (device != window->device)
        return device < window->device ? -1 : 1;
    return time_ns < window->first_ns ? -1 : time_ns > window->first_ns;
}

int perfetto_replay_rerun(const perfetto_context *context, int64_t pid, int device,
                          uint64_t start_ns)
{
    /* The last window that begins before start_ns: a binary search over
     * the windows, sorted by pid, device and start (the reader's order). */
    size_t low = 0, high = context->replay_window_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (perfetto_window_order(pid, device, start_ns, &context->replay_windows[middle]) > 0)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == 0)
        return 0;
    const store_export_replay_window_row *window = &context->replay_windows[low - 1];
    return window->pid == pid && window->device == device && start_ns > window->first_ns &&
           start_ns <= window->last_ns;
}

void perfetto_replay_free(perfetto_context *context)
{
    free(context->replay_windows);
    context->replay_windows = NULL;
    context->replay_window_count = context->replay_window_capacity = 0;
    cli_pair_map_free(&context->replay_matched);
    cli_pair_map_free(&context->replay_by_kernel);
    cli_pair_map_free(&context->storm_processes);
}

/* ---- replay args ---- */

/* ,"KEY":VALUE for a double (null when NaN) */
static void perfetto_member_double(cli_output *output, const char *key, double value)
{
    cli_output_bytes(output, ",\"", 2);
    cli_output_text(output, key);
    cli_output_bytes(output, "\":", 2);
    cli_output_json_double(output, value);
}

/*
 * The facts of one replay run (STORE_REPLAY_RUN_MEMBERS, a launch's or a
 * span's), after a first member already written: passes, decline, the
 * collection's cost in time and bytes.
 */
#define PERFETTO_REPLAY_RUN(output, row)                                                           \
    do {                                                                                           \
        cli_output_json_member_u64(output, "passes_planned", (row)->passes_planned);               \
        cli_output_json_member_u64(output, "passes_run", (row)->passes_run);                       \
        cli_output_json_member_u64(output, "passes_kept", (row)->passes_kept);                     \
        if ((row)->passes_kept > 0)                                                                \
            cli_output_json_member_u64(output, "pass_mean_ns", (row)->pass_mean_ns);               \
        perfetto_member_bool(output, "declined", (row)->declined);                                 \
        if ((row)->reason[0] != '\0')                                                              \
            cli_output_json_member_string(output, "reason", (row)->reason);                        \
        cli_output_json_member_u64(                                                                \
            output, "collection_ns",                                                               \
            (row)->end_ns > (row)->begin_ns ? (row)->end_ns - (row)->begin_ns : 0);                \
        cli_output_json_member_u64(output, "drain_ns", (row)->drain_ns);                           \
        cli_output_json_member_u64(output, "snapshot_bytes", (row)->snapshot_bytes);               \
        if ((row)->snapshot_bytes > 0)                                                             \
            cli_output_json_member_string(output, "shadow",                                        \
                                          (row)->shadow_on_device ? "device" : "host");            \
        cli_output_json_member_u64(output, "snapshot_ns", (row)->snapshot_ns);                     \
        cli_output_json_member_u64(output, "restore_ns", (row)->restore_ns);                       \
        cli_output_json_member_u64(output, "bytes_restored", (row)->bytes_restored);               \
        if ((row)->collector[0] != '\0')                                                           \
            cli_output_json_member_string(output, "collector", (row)->collector);                  \
    } while (0)

/* Writes one metric of a launch inside "metrics":{...}; the first without
 * a comma. Counts the values with a note on how they were produced. */
typedef struct perfetto_metric_walk {
    cli_output *output;
    int count;
    int noted;
} perfetto_metric_walk;

static int perfetto_replay_metric(const store_export_replay_metric_row *row, void *user)
{
    perfetto_metric_walk *walk = user;
    if (walk->count++ > 0)
        cli_output_char(walk->output, ',');
    cli_output_json_string(walk->output, row->metric);
    cli_output_char(walk->output, ':');
    cli_output_json_double(walk->output, row->has_value ? row->value : NAN);
    walk->noted += row->method[0] != '\0';
    return cli_output_failed(walk->output);
}

/* One value's note inside "metric_notes":{...}, the first without a comma:
 * "metric":{"method":...,"status":...,"error_bound":...} (null: none known,
 * or unbounded). Values without a note are left out. */
static void perfetto_note(cli_output *output, int *count, const char *metric, const char *method,
                          const char *status, double error_bound)
{
    if (method[0] == '\0')
        return;
    if ((*count)++ > 0)
        cli_output_char(output, ',');
    cli_output_json_string(output, metric);
    cli_output_text(output, ":{\"method\":");
    cli_output_json_string(output, method);
    cli_output_json_member_string(output, "status", status);
    cli_output_text(output, ",\"error_bound\":");
    cli_output_json_double(output, error_bound);
    cli_output_char(output, '}');
}

static int perfetto_replay_note(const store_export_replay_metric_row *row, void *user)
{
    perfetto_metric_walk *walk = user;
    perfetto_note(walk->output, &walk->count, row->metric, row->method, row->status,
                  row->error_bound);
    return cli_output_failed(walk->output);
}

/* One launch's facts as an object's members after {"launch_id":N: */
static void perfetto_launch_members(cli_output *output, const store_replay_launch_row *row)
{
    cli_output_json_member_string(output, "kernel", row->kernel);
    cli_output_json_member_u64(output, "launch_index", row->launch_index);
    if (row->span_id != 0)
        cli_output_json_member_u64(output, "span_id", row->span_id);
    PERFETTO_REPLAY_RUN(output, row);
}

typedef struct perfetto_launch_args {
    perfetto_context *context;
    int status; /* the metrics walk's */
} perfetto_launch_args;

/* ,"replay":{launch...,"metrics":{...}} for the launch row. */
static int perfetto_replay_launch_row(const store_replay_launch_row *row, void *user)
{
    perfetto_launch_args *args = user;
    cli_output *output = args->context->output;
    cli_output_text(output, ",\"replay\":{\"launch_id\":");
    cli_output_u64(output, row->launch_id);
    perfetto_launch_members(output, row);
    cli_output_text(output, ",\"metrics\":{");
    store *database = args->context->session->database;
    perfetto_metric_walk walk = {output, 0, 0};
    args->status = store_export_replay_metrics(database, row->pid, row->launch_id,
                                               perfetto_replay_metric, &walk);
    cli_output_char(output, '}');
    if (args->status == 0 && walk.noted > 0) {
        cli_output_text(output, ",\"metric_notes\":{");
        walk.count = 0;
        args->status = store_export_replay_metrics(database, row->pid, row->launch_id,
                                                   perfetto_replay_note, &walk);
        cli_output_char(output, '}');
    }
    cli_output_char(output, '}');
    return 1; /* one row */
}

int perfetto_replay_kernel_args(perfetto_context *context, int64_t pid, uint64_t correlation_id)
{
    if (context->replay_by_kernel.count == 0)
        return 0;
    int64_t *launch = cli_pair_map_find(&context->replay_by_kernel, pid, (int64_t)correlation_id);
    if (launch == NULL)
        return 0;
    perfetto_launch_args args = {context, 0};
    int status = store_export_replay_launch(context->session->database, pid, (uint64_t)*launch,
                                            perfetto_replay_launch_row, &args);
    return perfetto_failed(context, "replay_launches", status != 0 ? status : args.status);
}

/* ---- replayed launches without a kernel slice ---- */

/* Why a launch's results are on a slice of their own. */
static const char *perfetto_unmatched_reason(perfetto_context *context, int64_t pid)
{
    if (cli_pair_map_find(&context->storm_processes, pid, 0) != NULL)
        return "unavailable: a launch storm in this process left launches without kernel rows, "
               "so the launch's place among its kernel's launches does not say which row is its";
    return "no kernel row is this launch's (the launch_index-th kernel of its name in the "
           "process, in correlation order, was not recorded)";
}

/* "metrics":{...} of a launch row from store_read_replay_* (its arrays),
 * and "metric_notes":{...} where any value has a note. */
static void perfetto_metric_object(cli_output *output, const store_replay_launch_row *row)
{
    cli_output_text(output, ",\"metrics\":{");
    int noted = 0;
    for (size_t i = 0; i < row->metric_count; i++) {
        if (i > 0)
            cli_output_char(output, ',');
        cli_output_json_string(output, row->metric_names[i]);
        cli_output_char(output, ':');
        cli_output_json_double(output, row->metric_has_value[i] ? row->metric_values[i] : NAN);
        noted |= row->metric_methods != NULL && row->metric_methods[i][0] != '\0';
    }
    cli_output_char(output, '}');
    if (!noted)
        return;
    cli_output_text(output, ",\"metric_notes\":{");
    int count = 0;
    for (size_t i = 0; i < row->metric_count; i++)
        perfetto_note(output, &count, row->metric_names[i], row->metric_methods[i],
                      row->metric_statuses[i], row->metric_error_bounds[i]);
    cli_output_char(output, '}');
}

static int perfetto_replay_own_launch(const store_replay_launch_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    if (cli_pair_map_find(&context->replay_matched, row->pid, (int64_t)row->launch_id) != NULL)
        return 0; /* on its kernel's slice */
    int64_t tid = perfetto_flare_tid(context, row->pid, PERFETTO_FLARE_REPLAY, row->device);
    if (tid < 0)
        return 1;
    perfetto_event_start(context, "X");
    cli_output_text(output, ",\"cat\":\"flare_replay\"");
    perfetto_track(context, row->pid, tid);
    perfetto_time_span(context, row->begin_ns, row->end_ns);
    cli_output_text(output, ",\"name\":\"replay: ");
    cli_output_json_text(output, row->kernel);
    cli_output_text(output, " (launch ");
    cli_output_u64(output, row->launch_index + 1);
    cli_output_text(output, ")\",\"args\":{\"launch_id\":");
    cli_output_u64(output, row->launch_id);
    perfetto_launch_members(output, row);
    cli_output_json_member_i64(output, "device", row->device);
    cli_output_json_member_u64(output, "stream", row->stream_id);
    cli_output_json_member_string(output, "kernel_match",
                                  perfetto_unmatched_reason(context, row->pid));
    perfetto_metric_object(output, row);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

/* ---- spans ---- */

static int perfetto_replay_span(const store_replay_span_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    int64_t tid = perfetto_flare_tid(context, row->pid, PERFETTO_FLARE_RANGE_REPLAY, row->device);
    if (tid < 0)
        return 1;
    perfetto_event_start(context, "X");
    cli_output_text(output, ",\"cat\":\"flare_replay\"");
    perfetto_track(context, row->pid, tid);
    perfetto_time_span(context, row->begin_ns, row->end_ns);
    cli_output_text(output, ",\"name\":\"range replay: ");
    cli_output_json_text(output, row->name);
    if (row->occurrence > 0) {
        cli_output_text(output, " #");
        cli_output_u64(output, row->occurrence);
    }
    cli_output_text(output, "\",\"args\":{\"span_id\":");
    cli_output_u64(output, row->span_id);
    cli_output_json_member_u64(output, "occurrence", row->occurrence);
    cli_output_json_member_i64(output, "device", row->device);
    cli_output_json_member_u64(output, "kernels", row->kernels);
    cli_output_json_member_u64(output, "copies", row->copies);
    cli_output_json_member_u64(output, "kernels_stored", row->kernel_count);
    PERFETTO_REPLAY_RUN(output, row);
    /* Kernels whose results are on no kernel slice are listed here. */
    size_t matched = 0, listed = 0;
    for (size_t i = 0; i < row->kernel_count; i++) {
        const store_replay_launch_row *kernel = &row->kernel_rows[i];
        if (cli_pair_map_find(&context->replay_matched, kernel->pid, (int64_t)kernel->launch_id) !=
            NULL) {
            matched++;
            continue;
        }
        cli_output_text(output, listed++ == 0 ? ",\"unmatched_kernels\":[{\"launch_id\":"
                                              : ",{\"launch_id\":");
        cli_output_u64(output, kernel->launch_id);
        cli_output_json_member_string(output, "kernel", kernel->kernel);
        cli_output_json_member_u64(output, "launch_index", kernel->launch_index);
        perfetto_metric_object(output, kernel);
        cli_output_char(output, '}');
    }
    if (listed > 0) {
        cli_output_char(output, ']');
        cli_output_json_member_string(output, "kernel_match",
                                      perfetto_unmatched_reason(context, row->pid));
    }
    cli_output_json_member_u64(output, "kernels_on_their_slices", matched);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_replay(perfetto_context *context)
{
    store *database = context->session->database;
    return perfetto_failed(
               context, "replay_launches",
               store_read_replay_launches(database, perfetto_replay_own_launch, context)) ||
           perfetto_failed(context, "replay_spans",
                           store_read_replay_spans(database, perfetto_replay_span, context));
}

/* ---- windows and rule firings ---- */

/* A window row's text, "" for NULL (store_read_windows passes columns
 * through as they are; a damaged row may lack one). */
static const char *text_or_empty(const char *text)
{
    return text != NULL ? text : "";
}

/* The window's name: what opened it. */
static void perfetto_window_name(cli_output *output, const store_window_row *row,
                                 const char *suffix)
{
    const char *kind = text_or_empty(row->token_kind);
    const char *what = text_or_empty(row->label);
    const char *prefix = "window: ";
    if (strcmp(kind, "rule") == 0) {
        prefix = "rule: ";
        if (text_or_empty(row->rule_text)[0] != '\0')
            what = row->rule_text;
    } else if (strcmp(kind, "scheduled") == 0) {
        prefix = "schedule: ";
    } else if (strcmp(kind, "manual") == 0) {
        prefix = "flare_window_open: ";
    }
    cli_output_text(output, ",\"name\":\"");
    cli_output_text(output, prefix);
    if (what[0] != '\0') {
        cli_output_json_text(output, what);
    } else {
        cli_output_text(output, "window ");
        cli_output_u64(output, row->id);
    }
    cli_output_text(output, suffix);
    cli_output_char(output, '"');
}

static void perfetto_window_args(perfetto_context *context, const store_window_row *row)
{
    cli_output *output = context->output;
    cli_output_text(output, ",\"args\":{\"window_id\":");
    cli_output_u64(output, row->id);
    cli_output_json_member_string(output, "kind", text_or_empty(row->token_kind));
    if (text_or_empty(row->label)[0] != '\0')
        cli_output_json_member_string(output, "label", row->label);
    cli_output_json_member_string(output, "close_reason", text_or_empty(row->close_reason));
    cli_output_json_member_string(output, "engine", text_or_empty(row->engine));
    cli_output_json_member_string(output, "engine_status", text_or_empty(row->engine_status));
    if (text_or_empty(row->engine_reason)[0] != '\0')
        cli_output_json_member_string(output, "engine_reason", row->engine_reason);
    cli_output_json_member_u64(output, "engine_samples", row->engine_samples);
    cli_output_json_member_u64(output, "launches", row->launches);
    cli_output_json_member_u64(output, "max_duration_ns", row->max_duration_ns);
    if (row->max_launches != 0)
        cli_output_json_member_u64(output, "max_launches", row->max_launches);
    if (row->opened_ns >= row->requested_ns && row->opened_ns != 0)
        cli_output_json_member_u64(output, "queued_ns", row->opened_ns - row->requested_ns);
    if (row->has_cause)
        cli_output_json_member_u64(output, "rule_id", row->rule_id);
    perfetto_pc_window_args(context, row->pid, row->id);
    perfetto_sass_window_args(context, row->pid, row->id);
    perfetto_member_bool(output, "still_open", 0);
    cli_output_text(output, "}}");
}

/* The rule firing that asked for a rule's window: an instant at the
 * request, on the process's rule track. */
static void perfetto_rule_firing(perfetto_context *context, const store_window_row *row)
{
    cli_output *output = context->output;
    int64_t tid = perfetto_flare_tid(context, row->pid, PERFETTO_FLARE_RULES, -1);
    if (tid < 0)
        return;
    perfetto_event_start(context, "i");
    cli_output_text(output, ",\"s\":\"t\",\"cat\":\"flare_rule\"");
    perfetto_track(context, row->pid, tid);
    perfetto_timestamp(context, row->requested_ns);
    cli_output_text(output, ",\"name\":\"rule fired: ");
    cli_output_json_text(output, text_or_empty(row->rule_text));
    cli_output_text(output, "\",\"args\":{\"rule_id\":");
    cli_output_u64(output, row->rule_id);
    cli_output_json_member_u64(output, "window_id", row->id);
    if (row->comparison != NULL)
        cli_output_json_member_string(output, "comparison", row->comparison);
    perfetto_member_double(output, "threshold", row->threshold);
    perfetto_member_double(output, "observed_value", row->observed_value);
    perfetto_member_bool(output, "observed_partial", row->observed_partial);
    cli_output_json_member_u64(output, "rate_window_ns", row->rate_window_ns);
    cli_output_json_member_u64(output, "sustained_ns", row->sustained_ns);
    if (row->first_true_ns != 0 && row->requested_ns >= row->first_true_ns)
        cli_output_json_member_u64(output, "held_for_ns", row->requested_ns - row->first_true_ns);
    cli_output_text(output, "}}");
}

static int perfetto_window_row(const store_window_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    if (row->has_cause && strcmp(text_or_empty(row->token_kind), "rule") == 0)
        perfetto_rule_firing(context, row);
    int64_t tid = perfetto_flare_tid(context, row->pid, PERFETTO_FLARE_WINDOWS, -1);
    if (tid < 0 || perfetto_stopped(context))
        return 1;
    if (row->opened_ns != 0) {
        perfetto_event_start(context, "X");
        cli_output_text(output, ",\"cat\":\"flare_window\"");
        perfetto_track(context, row->pid, tid);
        perfetto_time_span(context, row->opened_ns,
                           row->closed_ns != 0 ? row->closed_ns : row->opened_ns);
        perfetto_window_name(output, row, "");
    } else {
        /* Refused or cancelled: it never opened; an instant when it ended. */
        perfetto_event_start(context, "i");
        cli_output_text(output, ",\"s\":\"t\",\"cat\":\"flare_window\"");
        perfetto_track(context, row->pid, tid);
        perfetto_timestamp(context, row->closed_ns != 0 ? row->closed_ns : row->requested_ns);
        perfetto_window_name(output, row,
                             strcmp(text_or_empty(row->close_reason), "refused") == 0
                                 ? " (refused)"
                                 : " (never opened)");
    }
    perfetto_window_args(context, row);
    return perfetto_stopped(context);
}

static int perfetto_unrecorded_window(const store_export_unrecorded_window_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    int64_t tid = perfetto_flare_tid(context, row->pid, PERFETTO_FLARE_WINDOWS, -1);
    if (tid < 0)
        return 1;
    perfetto_event_start(context, "X");
    cli_output_text(output, ",\"cat\":\"flare_window\"");
    perfetto_track(context, row->pid, tid);
    perfetto_time_span(context, row->first_ns, row->last_ns);
    cli_output_text(output, ",\"name\":\"window ");
    cli_output_u64(output, row->window_id);
    cli_output_text(output, " (still open when the process ended)\",\"args\":{\"window_id\":");
    cli_output_u64(output, row->window_id);
    cli_output_json_member_u64(output, "pm_samples", row->samples);
    perfetto_member_bool(output, "still_open", 1);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_windows(perfetto_context *context)
{
    store *database = context->session->database;
    /* The windows are written even when their PC samples or SASS metrics
     * cannot be read. */
    int pc_status = perfetto_pc_load(context);
    int sass_status = perfetto_sass_load(context);
    int stopped = perfetto_failed(context, "windows",
                                  store_read_windows(database, perfetto_window_row, context)) ||
                  perfetto_failed(context, "windows",
                                  store_export_unrecorded_windows(
                                      database, perfetto_unrecorded_window, context));
    perfetto_pc_free(context);
    perfetto_sass_free(context);
    return stopped || perfetto_failed(context, "pc samples", pc_status) ||
           perfetto_failed(context, "sass metrics", sass_status);
}

/* ---- launch storms ---- */

static int perfetto_storm_row(const store_storm_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    int64_t tid = perfetto_flare_tid(context, row->pid, PERFETTO_FLARE_STORMS, row->device);
    if (tid < 0)
        return 1;
    perfetto_event_start(context, "X");
    cli_output_text(output, ",\"cat\":\"flare_storm\"");
    perfetto_track(context, row->pid, tid);
    perfetto_time_span(context, row->start_ns, row->end_ns);
    cli_output_text(output, row->still_open ? ",\"name\":\"launch storm (still on at the end)\""
                                            : ",\"name\":\"launch storm\"");
    cli_output_text(output, ",\"args\":{\"device\":");
    cli_output_i64(output, row->device);
    cli_output_json_member_u64(output, "untimed_launches", row->untimed_launches);
    perfetto_member_bool(output, "still_open", row->still_open);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_storms(perfetto_context *context)
{
    return perfetto_failed(
        context, "storms",
        store_export_storms(context->session->database, perfetto_storm_row, context));
}
