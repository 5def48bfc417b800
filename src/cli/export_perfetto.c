/*
 * export_perfetto.c: `flare export --format perfetto`, a session as Chrome
 * trace-event JSON, which the Perfetto UI and chrome://tracing open.
 *
 * Kernels, copies and memsets are complete ("X") events on a track per
 * device and stream; scopes (and NVTX ranges, stored as scopes) on a track
 * per thread of their process; NVML metrics are counter ("C") events on the
 * device's process. Times are microseconds from the session's start. Each
 * track is named ("M" events) before its first event.
 *
 * It must never hold a table in memory (only the set of named tracks
 * grows, in a cli_pair_map, with tracks, not rows), never write a negative
 * duration (viewers reject them), and never give a GPU track a pid that a
 * real process could have.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/export.h"
#include "cli/pair_map.h"
#include "flare/flare.h"

/* Metrics with this prefix pair CUPTI correlation ids with a framework's own
 * ids: they are joins, not gauges, so they make no sense as counter tracks. */
#define CORRELATION_PREFIX "external_correlation."

/*
 * Synthetic trace pids for the GPU tracks of (process, device) pairs start
 * here. Linux pids stay below 2^22 (the kernel's largest pid_max), so these
 * can never collide with a real process; trace viewers read pids as 32-bit
 * unsigned numbers, which these fit comfortably.
 */
#define PERFETTO_GPU_PID_BASE 1000000000LL
/* Stream ids above INT32_MAX (never seen from CUPTI, which uses 32 bits) get
 * thread ids counted up from here, for the same 32-bit reason. */
#define PERFETTO_LARGE_STREAM_TID_BASE 0x80000000LL

typedef struct perfetto_context {
    const cli_session *session;
    cli_export_failure *failure;
    cli_output *output;
    uint64_t origin_ns; /* the session's start: ts 0 */
    int any_event;      /* an event was written: the next needs a comma */
    int out_of_memory;
    cli_pair_map gpu_processes;   /* (pid, device) -> synthetic trace pid */
    cli_pair_map named_processes; /* (trace pid, 0) -> 1: process_name written */
    cli_pair_map threads;         /* (trace pid, stream or thread id) -> trace tid */
    int64_t next_gpu_pid;
    int64_t next_large_stream_tid;
} perfetto_context;

/* Non-zero when the walk must stop: the output failed or memory ran out. */
static int perfetto_stopped(const perfetto_context *context)
{
    return cli_output_failed(context->output) || context->out_of_memory;
}

/* ---- events ---- */

/* Starts an event object; one event a line keeps the file greppable. */
static void perfetto_event_start(perfetto_context *context, const char *phase)
{
    cli_output_text(context->output, context->any_event ? ",\n{\"ph\":\"" : "\n{\"ph\":\"");
    cli_output_text(context->output, phase);
    cli_output_text(context->output, "\"");
    context->any_event = 1;
}

/* ,"ts":T,"dur":D for a complete event. An end before its start (clock
 * trouble in a damaged row) becomes a zero duration, which viewers accept,
 * rather than a negative one, which they reject. */
static void perfetto_time_span(perfetto_context *context, uint64_t start_ns, uint64_t end_ns)
{
    cli_output_text(context->output, ",\"ts\":");
    cli_output_microseconds(context->output, (int64_t)(start_ns - context->origin_ns));
    cli_output_text(context->output, ",\"dur\":");
    cli_output_microseconds(context->output, end_ns > start_ns ? (int64_t)(end_ns - start_ns) : 0);
}

/* ,"pid":P,"tid":T: the track an event is on. */
static void perfetto_track(perfetto_context *context, int64_t trace_pid, int64_t tid)
{
    cli_output_json_member_i64(context->output, "pid", trace_pid);
    cli_output_json_member_i64(context->output, "tid", tid);
}

/* A metadata event naming a track: kind is "process_name" (tid 0) or
 * "thread_name". */
static void perfetto_track_name(perfetto_context *context, const char *kind, int64_t trace_pid,
                                int64_t tid, const char *name)
{
    perfetto_event_start(context, "M");
    cli_output_json_member_string(context->output, "name", kind);
    perfetto_track(context, trace_pid, tid);
    cli_output_text(context->output, ",\"args\":{\"name\":");
    cli_output_json_string(context->output, name);
    cli_output_text(context->output, "}}");
}

/* ---- tracks ---- */

static const char *executable_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL && slash[1] != '\0' ? slash + 1 : path;
}

/* Names an operating-system process's track group once: from the processes
 * table up front, or, for a pid that table lacks, when first met. */
static void perfetto_name_os_process(perfetto_context *context, int64_t pid, const char *executable)
{
    if (cli_pair_map_find(&context->named_processes, pid, 0) != NULL)
        return;
    if (cli_pair_map_insert(&context->named_processes, pid, 0, 1) != 0) {
        context->out_of_memory = 1;
        return;
    }
    char name[PATH_MAX + 64];
    if (executable != NULL && executable[0] != '\0')
        snprintf(name, sizeof name, "process %lld (%s)", (long long)pid,
                 executable_base_name(executable));
    else
        snprintf(name, sizeof name, "process %lld", (long long)pid);
    perfetto_track_name(context, "process_name", pid, 0, name);
}

/* The synthetic trace pid of a device of a process, named the first time
 * the pair is met. device_name may be NULL (no devices row). Returns -1 out
 * of memory. */
static int64_t perfetto_gpu_pid(perfetto_context *context, int64_t pid, int device,
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
    perfetto_track_name(context, "process_name", trace_pid, 0, name);
    return trace_pid;
}

/* The trace tid of a stream of a GPU track group, named "stream N" the first
 * time it is met. Returns -1 out of memory. */
static int64_t perfetto_stream_tid(perfetto_context *context, int64_t trace_pid, uint64_t stream_id)
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
    perfetto_track_name(context, "thread_name", trace_pid, tid, name);
    return tid;
}

/* Names a thread of an operating-system process the first time it is met. */
static void perfetto_name_os_thread(perfetto_context *context, int64_t pid, int64_t thread_id)
{
    if (cli_pair_map_find(&context->threads, pid, thread_id) != NULL)
        return;
    if (cli_pair_map_insert(&context->threads, pid, thread_id, thread_id) != 0) {
        context->out_of_memory = 1;
        return;
    }
    char name[64];
    /* On Linux the main thread's id is the process id. */
    snprintf(name, sizeof name, "thread %lld%s", (long long)thread_id,
             thread_id == pid ? " (main)" : "");
    perfetto_track_name(context, "thread_name", pid, thread_id, name);
}

/* ---- rows ---- */

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

/* The common start of a kernel's or copy's event: the track, then the time. */
static int perfetto_device_event(perfetto_context *context, const char *category, int64_t pid,
                                 int device, uint64_t stream_id, uint64_t start_ns, uint64_t end_ns)
{
    int64_t trace_pid = perfetto_gpu_pid(context, pid, device, NULL);
    if (trace_pid < 0)
        return -1;
    int64_t tid = perfetto_stream_tid(context, trace_pid, stream_id);
    if (tid < 0)
        return -1;
    perfetto_event_start(context, "X");
    cli_output_json_member_string(context->output, "cat", category);
    perfetto_track(context, trace_pid, tid);
    perfetto_time_span(context, start_ns, end_ns);
    return 0;
}

/* ,"NAME":[x,y,z] */
static void perfetto_dimensions(cli_output *output, const char *name, const uint32_t values[3])
{
    cli_output_text(output, ",\"");
    cli_output_text(output, name);
    cli_output_text(output, "\":[");
    for (int axis = 0; axis < 3; axis++) {
        if (axis > 0)
            cli_output_char(output, ',');
        cli_output_u64(output, values[axis]);
    }
    cli_output_char(output, ']');
}

static int perfetto_kernel_row(const store_kernel_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    if (perfetto_device_event(context, "kernel", row->pid, row->device, row->stream_id,
                              row->start_ns, row->end_ns) != 0)
        return 1;
    cli_output_json_member_string(output, "name", row->name);
    cli_output_text(output, ",\"args\":{\"correlation_id\":");
    cli_output_u64(output, row->correlation_id);
    cli_output_json_member_u64(output, "stream", row->stream_id);
    perfetto_dimensions(output, "grid", row->grid);
    perfetto_dimensions(output, "block", row->block);
    cli_output_json_member_u64(output, "registers_per_thread", row->registers_per_thread);
    cli_output_json_member_u64(output, "shared_memory_bytes", row->shared_memory_bytes);
    cli_output_json_member_u64(output, "context_id", row->context_id);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

static int perfetto_copy_row(const store_copy_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    if (perfetto_device_event(context, row->is_memset ? "memset" : "copy", row->pid, row->device,
                              row->stream_id, row->start_ns, row->end_ns) != 0)
        return 1;
    const char *kind = cli_copy_kind_name(row->copy_kind, "unknown");
    cli_output_text(output, ",\"name\":\"");
    if (row->is_memset) {
        cli_output_text(output, "memset");
    } else {
        cli_output_text(output, "copy ");
        cli_output_text(output, kind);
    }
    cli_output_text(output, "\",\"args\":{\"bytes\":");
    cli_output_u64(output, row->bytes);
    if (!row->is_memset)
        cli_output_json_member_string(output, "copy_kind", kind);
    cli_output_json_member_u64(output, "correlation_id", row->correlation_id);
    cli_output_json_member_u64(output, "stream", row->stream_id);
    /* A failed copy still took device time; say so rather than hide it. */
    if (row->status != 0)
        cli_output_json_member_string(output, "failed", flare_status_name(row->status));
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

static int perfetto_scope_row(const store_scope_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    perfetto_name_os_process(context, row->pid, NULL);
    perfetto_name_os_thread(context, row->pid, row->thread_id);
    if (perfetto_stopped(context))
        return 1;
    perfetto_event_start(context, "X");
    cli_output_json_member_string(output, "cat", "scope");
    perfetto_track(context, row->pid, row->thread_id);
    perfetto_time_span(context, row->start_ns, row->end_ns);
    cli_output_json_member_string(output, "name", row->name);
    cli_output_text(output, ",\"args\":{\"depth\":");
    cli_output_u64(output, row->depth);
    cli_output_json_member_u64(output, "instance_id", row->instance_id);
    cli_output_text(output, ",\"still_open\":");
    cli_output_text(output, row->still_open ? "true" : "false");
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

static int perfetto_metric_row(const store_metric_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
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
    perfetto_event_start(context, "C");
    cli_output_json_member_string(output, "name", row->name);
    cli_output_json_member_i64(output, "pid", trace_pid);
    cli_output_text(output, ",\"ts\":");
    cli_output_microseconds(output, (int64_t)(row->time_ns - context->origin_ns));
    cli_output_text(output, ",\"args\":{\"value\":");
    cli_output_i64(output, row->value);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

/* ---- the trace ---- */

/* otherData is the format's place for facts about the whole trace. */
static void perfetto_header(const cli_session *session, cli_output *output)
{
    cli_output_text(output, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"session\":");
    cli_output_json_string(output, session->directory);
    cli_export_session_identity(output, &session->summary);
    cli_output_json_member_i64(output, "start_unix_ns", session->summary.start_unix_ns);
    cli_output_json_member_u64(output, "start_ns", session->summary.start_ns);
    cli_output_text(output, "},\"traceEvents\":[");
}

/* Non-zero when the walk of table ended in failure: the reader's error
 * (status) or memory, with context->failure filled in, or a write error
 * (left in the output). */
static int perfetto_failed(perfetto_context *context, const char *table, int status)
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
    perfetto_header(session, output);
    /* Processes and devices first, so that every track that has a name gets
     * it before its first event, and GPU pids number in a stable order. A
     * table is walked only when every one before it succeeded. */
    int failed =
        perfetto_failed(c, "processes",
                        store_export_processes(database, perfetto_process_row, c)) ||
        perfetto_failed(c, "devices", store_export_devices(database, perfetto_device_row, c)) ||
        perfetto_failed(c, "kernels", store_export_kernels(database, perfetto_kernel_row, c)) ||
        perfetto_failed(c, "copies", store_export_copies(database, perfetto_copy_row, c)) ||
        perfetto_failed(c, "scopes", store_export_scopes(database, perfetto_scope_row, c)) ||
        perfetto_failed(c, "metrics", store_export_metrics(database, perfetto_metric_row, c));
    if (!failed)
        cli_output_text(output, "\n]}\n");
    cli_pair_map_free(&context.threads);
    cli_pair_map_free(&context.named_processes);
    cli_pair_map_free(&context.gpu_processes);
    return failed ? -1 : 0;
}

const cli_export_format cli_export_perfetto = {
    .name = "perfetto",
    .write = perfetto_write,
};
