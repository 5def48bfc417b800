/*
 * export_perfetto.c: `flare export --format perfetto`, a session as Chrome
 * trace-event JSON, which the Perfetto UI and chrome://tracing open: the
 * walk over the session's tables, the trace's frame (traceEvents, then
 * otherData), the writing of events and the tracks (export_perfetto.h says
 * which file writes what).
 *
 * Tracks: each operating-system process is a track group (its pid) with a
 * track per thread (scopes, API calls) and flare's own tracks (windows,
 * rule firings, storms, replay); each device of each process is a track
 * group of its own (a synthetic pid) with a track per stream. Every group
 * and track is named and given its sort index ("M" events, category
 * "__metadata") before its first event: processes first by pid, then GPUs
 * by device; threads main first, streams ascending, flare's tracks last.
 * Times are microseconds from the session's start, exact to the nanosecond.
 *
 * It must never hold a table in memory (only the named tracks grow, in
 * cli_pair_maps, with tracks, not rows), never write a negative duration
 * (viewers reject them), never give a GPU track a pid that a real process
 * could have, and never write "displayTimeUnit": Perfetto versions of
 * 2020-2022 read `"displayTimeUnit":"ns"` as "ts is in nanoseconds" (and
 * "ms" as milliseconds), so only its absence means microseconds to every
 * reader; otherData.time_unit says "us".
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/export.h"
#include "cli/export_perfetto.h"
#include "cli/pair_map.h"
#include "flare/flare.h"
#include "store/store_ranks.h"

/* Sort indexes (process_sort_index, thread_sort_index): smaller first.
 * Operating-system processes by pid (below 2^22); GPU track groups after
 * every one of them, by device, then by process. */
#define PERFETTO_GPU_SORT_BASE    0x10000000LL
#define PERFETTO_GPU_SORT_DEVICE  0x400000LL /* one device's band: every pid */
#define PERFETTO_GPU_SORT_DEVICES 60         /* devices beyond share the last band */
#define PERFETTO_FLARE_SORT_BASE  0x40000000LL
#define PERFETTO_MAIN_THREAD_SORT (-1)

/* ---- events ---- */

int perfetto_stopped(const perfetto_context *context)
{
    return cli_output_failed(context->output) || context->out_of_memory;
}

void perfetto_event_start(perfetto_context *context, const char *phase)
{
    if (context->any_event)
        CLI_OUTPUT_LITERAL(context->output, ",\n{\"ph\":\"");
    else
        CLI_OUTPUT_LITERAL(context->output, "\n{\"ph\":\"");
    cli_output_char(context->output, phase[0]); /* phases are one letter */
    cli_output_char(context->output, '"');
    context->any_event = 1;
    context->events++;
}

void perfetto_timestamp(perfetto_context *context, uint64_t time_ns)
{
    CLI_OUTPUT_LITERAL(context->output, ",\"ts\":");
    cli_output_microseconds(context->output, (int64_t)(time_ns - context->origin_ns));
}

void perfetto_time_span(perfetto_context *context, uint64_t start_ns, uint64_t end_ns)
{
    perfetto_timestamp(context, start_ns);
    CLI_OUTPUT_LITERAL(context->output, ",\"dur\":");
    cli_output_microseconds(context->output, end_ns > start_ns ? (int64_t)(end_ns - start_ns) : 0);
}

void perfetto_track(perfetto_context *context, int64_t trace_pid, int64_t tid)
{
    CLI_OUTPUT_LITERAL(context->output, ",\"pid\":");
    cli_output_i64(context->output, trace_pid);
    CLI_OUTPUT_LITERAL(context->output, ",\"tid\":");
    cli_output_i64(context->output, tid);
}

void perfetto_member_bool(cli_output *output, const char *key, int value)
{
    cli_output_bytes(output, ",\"", 2);
    cli_output_text(output, key);
    cli_output_text(output, value ? "\":true" : "\":false");
}

void perfetto_append(char *text, size_t size, const char *format, ...)
{
    size_t used = strlen(text);
    if (used + 1 >= size)
        return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(text + used, size - used, format, arguments);
    va_end(arguments);
}

/* A metadata event: kind "process_name" or "thread_name" with a name, or
 * "process_sort_index" or "thread_sort_index" with a sort index. Process
 * events carry tid 0, as Chrome writes them. */
static void perfetto_metadata(perfetto_context *context, const char *kind, int64_t trace_pid,
                              int64_t tid, const char *name, int64_t sort_index)
{
    cli_output *output = context->output;
    perfetto_event_start(context, "M");
    cli_output_text(output, ",\"cat\":\"__metadata\"");
    cli_output_json_member_string(output, "name", kind);
    perfetto_track(context, trace_pid, tid);
    if (name != NULL) {
        cli_output_text(output, ",\"args\":{\"name\":");
        cli_output_json_string(output, name);
    } else {
        cli_output_text(output, ",\"args\":{\"sort_index\":");
        cli_output_i64(output, sort_index);
    }
    cli_output_text(output, "}}");
}

/* ---- tracks ---- */

static const char *executable_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL && slash[1] != '\0' ? slash + 1 : path;
}

/* Marks trace_pid's group named; 1 when it was already, 0 when the caller
 * names it now, -1 out of memory. */
static int perfetto_claim_process(perfetto_context *context, int64_t trace_pid)
{
    if (cli_pair_map_find(&context->named_processes, trace_pid, 0) != NULL)
        return 1;
    if (cli_pair_map_insert(&context->named_processes, trace_pid, 0, 1) != 0) {
        context->out_of_memory = 1;
        return -1;
    }
    return 0;
}

void perfetto_name_os_process(perfetto_context *context, int64_t pid, const char *executable)
{
    if (perfetto_claim_process(context, pid) != 0)
        return;
    char name[PATH_MAX + 96], rank[48] = "";
    /* A rank of a distributed job leads its name and orders the processes
     * (a merged session's ranks in rank order, docs/fleet.md). */
    const int64_t *ranked = cli_pair_map_find(&context->ranks, pid, 0);
    if (ranked != NULL)
        snprintf(rank, sizeof rank, "rank %lld: ", (long long)*ranked);
    if (executable != NULL && executable[0] != '\0')
        snprintf(name, sizeof name, "%sprocess %lld (%s)", rank, (long long)pid,
                 executable_base_name(executable));
    else
        snprintf(name, sizeof name, "%sprocess %lld", rank, (long long)pid);
    perfetto_metadata(context, "process_name", pid, 0, name, 0);
    perfetto_metadata(context, "process_sort_index", pid, 0, NULL, ranked != NULL ? *ranked : pid);
}

int64_t perfetto_gpu_pid(perfetto_context *context, int64_t pid, int device,
                         const char *device_name)
{
    int64_t *found = cli_pair_map_find(&context->gpu_processes, pid, device);
    if (found != NULL)
        return *found;
    int64_t trace_pid = context->next_gpu_pid++;
    if (cli_pair_map_insert(&context->gpu_processes, pid, device, trace_pid) != 0) {
        context->out_of_memory = 1;
        return -1;
    }
    char name[512];
    if (device_name != NULL && device_name[0] != '\0')
        snprintf(name, sizeof name, "GPU %d (%s) [pid %lld]", device, device_name, (long long)pid);
    else
        snprintf(name, sizeof name, "GPU %d [pid %lld]", device, (long long)pid);
    int band = device < 0                           ? 0
               : device < PERFETTO_GPU_SORT_DEVICES ? device
                                                    : PERFETTO_GPU_SORT_DEVICES;
    int64_t within =
        pid >= 0 && pid < PERFETTO_GPU_SORT_DEVICE ? pid : PERFETTO_GPU_SORT_DEVICE - 1;
    perfetto_metadata(context, "process_name", trace_pid, 0, name, 0);
    perfetto_metadata(context, "process_sort_index", trace_pid, 0, NULL,
                      PERFETTO_GPU_SORT_BASE + band * PERFETTO_GPU_SORT_DEVICE + within);
    return trace_pid;
}

int64_t perfetto_stream_tid(perfetto_context *context, int64_t trace_pid, uint64_t stream_id)
{
    int64_t key = (int64_t)stream_id;
    int64_t *found = cli_pair_map_find(&context->threads, trace_pid, key);
    if (found != NULL)
        return *found;
    int64_t tid = stream_id <= INT32_MAX ? (int64_t)stream_id : context->next_large_stream_tid++;
    if (cli_pair_map_insert(&context->threads, trace_pid, key, tid) != 0) {
        context->out_of_memory = 1;
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "stream %llu", (unsigned long long)stream_id);
    perfetto_metadata(context, "thread_name", trace_pid, tid, name, 0);
    perfetto_metadata(context, "thread_sort_index", trace_pid, tid, NULL, tid);
    return tid;
}

void perfetto_name_os_thread(perfetto_context *context, int64_t pid, int64_t thread_id)
{
    perfetto_name_os_process(context, pid, NULL);
    if (cli_pair_map_find(&context->threads, pid, thread_id) != NULL)
        return;
    if (cli_pair_map_insert(&context->threads, pid, thread_id, thread_id) != 0) {
        context->out_of_memory = 1;
        return;
    }
    char name[64];
    /* On Linux the main thread's id is the process id. */
    int main_thread = thread_id == pid;
    snprintf(name, sizeof name, "thread %lld%s", (long long)thread_id,
             main_thread ? " (main)" : "");
    perfetto_metadata(context, "thread_name", pid, thread_id, name, 0);
    perfetto_metadata(context, "thread_sort_index", pid, thread_id, NULL,
                      main_thread ? PERFETTO_MAIN_THREAD_SORT : thread_id);
}

int64_t perfetto_flare_tid(perfetto_context *context, int64_t pid, perfetto_flare_track kind,
                           int device)
{
    static const char *const names[] = {
        [PERFETTO_FLARE_WINDOWS] = "flare deep windows",
        [PERFETTO_FLARE_RULES] = "flare rule firings",
        [PERFETTO_FLARE_STORMS] = "flare launch storms",
        [PERFETTO_FLARE_REPLAY] = "flare kernel replay",
        [PERFETTO_FLARE_RANGE_REPLAY] = "flare range replay",
    };
    int64_t slot = device < -1 || device > PERFETTO_FLARE_DEVICES - 2 ? PERFETTO_FLARE_DEVICES - 1
                                                                      : device + 1;
    int64_t tid = PERFETTO_FLARE_TID_BASE + (int64_t)kind * PERFETTO_FLARE_DEVICES + slot;
    perfetto_name_os_process(context, pid, NULL);
    if (cli_pair_map_find(&context->threads, pid, tid) != NULL)
        return tid;
    if (cli_pair_map_insert(&context->threads, pid, tid, tid) != 0) {
        context->out_of_memory = 1;
        return -1;
    }
    char name[96];
    if (device >= 0)
        snprintf(name, sizeof name, "%s (GPU %d)", names[kind], device);
    else
        snprintf(name, sizeof name, "%s", names[kind]);
    perfetto_metadata(context, "thread_name", pid, tid, name, 0);
    perfetto_metadata(context, "thread_sort_index", pid, tid, NULL,
                      PERFETTO_FLARE_SORT_BASE + (tid - PERFETTO_FLARE_TID_BASE));
    return tid;
}

/* ---- processes and devices ---- */

static int perfetto_rank_row(const store_rank_row *row, void *user)
{
    perfetto_context *context = user;
    if (row->has_rank && cli_pair_map_insert(&context->ranks, row->pid, 0, row->rank) != 0)
        context->out_of_memory = 1;
    return perfetto_stopped(context);
}

static int perfetto_process_row(const store_export_process_row *row, void *user)
{
    perfetto_context *context = user;
    perfetto_name_os_process(context, row->pid, row->executable);
    return perfetto_stopped(context);
}

static int perfetto_device_row(const store_export_device_row *row, void *user)
{
    perfetto_context *context = user;
    perfetto_gpu_pid(context, row->pid, row->device, row->name);
    return perfetto_stopped(context);
}

/* ---- the trace ---- */

int perfetto_failed(perfetto_context *context, const char *table, int status)
{
    cli_export_failure *failure = context->failure;
    if (cli_export_read_failed(context->session, status, table, failure))
        return 1;
    if (context->out_of_memory) {
        snprintf(failure->message, sizeof failure->message, "out of memory exporting %s", table);
        return 1;
    }
    return cli_output_failed(context->output);
}

/*
 * otherData, the format's place for facts about the whole trace, after the
 * events: a Perfetto of 2019 skipped to the file's first '[' to find the
 * events, and a command line may hold one.
 */
static void perfetto_other_data(const perfetto_context *context)
{
    const cli_session *session = context->session;
    cli_output *output = context->output;
    cli_output_text(output, "\n],\n\"otherData\":{\"session\":");
    cli_output_json_string(output, session->directory);
    cli_export_session_identity(output, &session->summary);
    cli_output_json_member_i64(output, "start_unix_ns", session->summary.start_unix_ns);
    cli_output_json_member_u64(output, "start_ns", session->summary.start_ns);
    if (session->summary.end_ns != 0)
        cli_output_json_member_u64(output, "end_ns", session->summary.end_ns);
    else
        cli_output_text(output, ",\"end_ns\":null");
    cli_output_text(output, ",\"time_unit\":\"us\",\"time_origin\":\"start_ns\"");
    cli_output_json_member_u64(output, "events", context->events);
    cli_output_json_member_u64(output, "flows", context->flows);
    cli_output_json_member_u64(output, "flows_left_out", context->flows_before);
    cli_output_text(output, "}}\n");
}

/* Writes the whole trace. Returns 0, or -1 with failure filled in or a
 * write error left in output. */
static int perfetto_write(const cli_session *session, cli_output *output,
                          cli_export_failure *failure)
{
    perfetto_context context = {
        .session = session,
        .failure = failure,
        .output = output,
        .origin_ns = session->summary.start_ns,
        .next_gpu_pid = PERFETTO_GPU_PID_BASE,
        .next_large_stream_tid = PERFETTO_LARGE_STREAM_TID_BASE,
    };
    store *database = session->database;
    perfetto_context *c = &context;
    cli_output_text(output, "{\"traceEvents\":[");
    /* Processes and devices first, so that GPU pids number in a stable
     * order; the replay match before the kernels it annotates; API calls
     * before the kernels, so that a flow's start follows its call's slice
     * in the file. A table is walked only when every one before it
     * succeeded. */
    int failed =
        perfetto_failed(c, "ranks", store_read_process_ranks(database, perfetto_rank_row, c)) ||
        perfetto_failed(c, "processes",
                        store_export_processes(database, perfetto_process_row, c)) ||
        perfetto_failed(c, "devices", store_export_devices(database, perfetto_device_row, c)) ||
        perfetto_replay_prepare(c) || perfetto_write_scopes(c) || perfetto_write_api_calls(c) ||
        perfetto_write_kernels(c) || perfetto_write_copies(c) || perfetto_write_metrics(c) ||
        perfetto_write_counters(c) || perfetto_write_pm_samples(c) || perfetto_write_windows(c) ||
        perfetto_write_storms(c) || perfetto_write_replay(c);
    if (!failed)
        perfetto_other_data(c);
    perfetto_pm_tracks_free(c);
    perfetto_replay_free(c);
    cli_pair_map_free(&context.threads);
    cli_pair_map_free(&context.named_processes);
    cli_pair_map_free(&context.ranks);
    cli_pair_map_free(&context.gpu_processes);
    return failed ? -1 : 0;
}

const cli_export_format cli_export_perfetto = {
    .name = "perfetto",
    .write = perfetto_write,
};
