/*
 * export_perfetto_gpu.c: the device side of a Perfetto export: kernels,
 * copies and memsets as complete ("X") events on a track per stream of each
 * device's track group, and a flow arrow from the API call that made each
 * one to it.
 *
 * Categories and args follow Kineto (PyTorch's profiler), whose traces
 * tools such as HTA read: cat "kernel", "gpu_memcpy", "gpu_memset"; args
 * "correlation", "device", "context", "stream", "grid", "block",
 * "registers per thread", "shared memory", "bytes", "memory bandwidth
 * (GB/s)"; then flare's own ("copy_kind", "failed", "graph_id",
 * "graph_node_id"; "replay", the results of the launch's replay; and
 * "replay_rerun": true on work a replay re-ran, a restore or a pass after
 * the first, which is flare's, not the program's). A flow is Kineto's "ac2g" pair: "s" on the
 * call's thread at the call's start, "f" (binding point "e": the enclosing
 * slice) on the stream at the work's start.
 *
 * It must never write half a flow (both ends are written together, from
 * one joined row, right after the GPU slice the "f" binds to), never reuse
 * a flow id (Perfetto never closes a JSON flow id, so a repeated one joins
 * the wrong slices: ids count up from 1, unique in the trace, and the
 * correlation id is in both slices' args), never draw an arrow backwards in
 * time (work that began before its call, clock trouble, gets none: it is
 * counted in otherData.flows_left_out), and never hold a table in memory.
 */
#include "cli/cli.h"
#include "cli/export_perfetto.h"
#include "flare/flare.h"

/* x,y,z] after the caller's ,"NAME":[ */
static void perfetto_dimensions(cli_output *output, const uint32_t values[3])
{
    cli_output_u64(output, values[0]);
    cli_output_char(output, ',');
    cli_output_u64(output, values[1]);
    cli_output_char(output, ',');
    cli_output_u64(output, values[2]);
    cli_output_char(output, ']');
}

/* The track of a device's stream: its group's pid and the stream's tid.
 * Returns 0, or -1 out of memory. */
static int perfetto_stream_track(perfetto_context *context, int64_t pid, int device,
                                 uint64_t stream_id, int64_t *trace_pid, int64_t *tid)
{
    *trace_pid = perfetto_gpu_pid(context, pid, device, NULL);
    if (*trace_pid < 0)
        return -1;
    *tid = perfetto_stream_tid(context, *trace_pid, stream_id);
    return *tid < 0 ? -1 : 0;
}

/* The start of a device slice: {"ph":"X","cat":...,"pid":..,"tid":..,"ts":..,"dur":.. */
static void perfetto_device_slice(perfetto_context *context, const char *category,
                                  int64_t trace_pid, int64_t tid, uint64_t start_ns,
                                  uint64_t end_ns)
{
    perfetto_event_start(context, "X");
    CLI_OUTPUT_LITERAL(context->output, ",\"cat\":\"");
    cli_output_text(context->output, category);
    cli_output_char(context->output, '"');
    perfetto_track(context, trace_pid, tid);
    perfetto_time_span(context, start_ns, end_ns);
}

/* One flow end: {"ph":PHASE,"id":ID,"pid":..,"tid":..,"ts":..,"cat":"ac2g","name":"ac2g"...} */
static void perfetto_flow_event(perfetto_context *context, const char *phase, uint64_t id,
                                int64_t trace_pid, int64_t tid, uint64_t time_ns)
{
    cli_output *output = context->output;
    perfetto_event_start(context, phase);
    CLI_OUTPUT_LITERAL(output, ",\"id\":");
    cli_output_u64(output, id);
    perfetto_track(context, trace_pid, tid);
    perfetto_timestamp(context, time_ns);
    /* "e": the "f" binds to the slice that encloses it (the GPU work that
     * begins at its ts), not to the next slice to begin. */
    if (phase[0] == 'f')
        CLI_OUTPUT_LITERAL(output, ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}");
    else
        CLI_OUTPUT_LITERAL(output, ",\"cat\":\"ac2g\",\"name\":\"ac2g\"}");
}

/* The arrow from a call to the GPU work just written on (trace_pid, tid),
 * which began at start_ns. Both ends or neither. */
static void perfetto_flow(perfetto_context *context, int64_t pid,
                          const store_export_call_link *call, int64_t trace_pid, int64_t tid,
                          uint64_t start_ns)
{
    if (!call->has_call)
        return;
    if (start_ns < call->start_ns) {
        context->flows_before++;
        return;
    }
    /* The call's thread was named when its slice was written (API calls
     * come before the GPU work); a call row that vanished in between
     * cannot, inside one snapshot, but naming is idempotent anyway. */
    perfetto_name_os_thread(context, pid, call->thread_id);
    uint64_t id = ++context->flows;
    perfetto_flow_event(context, "s", id, pid, call->thread_id, call->start_ns);
    perfetto_flow_event(context, "f", id, trace_pid, tid, start_ns);
}

/* ---- kernels ---- */

static int perfetto_kernel_row(const store_kernel_row *row, const store_export_call_link *call,
                               void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    int64_t trace_pid, tid;
    if (perfetto_stream_track(context, row->pid, row->device, row->stream_id, &trace_pid, &tid) !=
        0)
        return 1;
    perfetto_device_slice(context, "kernel", trace_pid, tid, row->start_ns, row->end_ns);
    CLI_OUTPUT_LITERAL(output, ",\"name\":");
    cli_output_json_string(output, row->name);
    CLI_OUTPUT_LITERAL(output, ",\"args\":{\"correlation\":");
    cli_output_u64(output, row->correlation_id);
    CLI_OUTPUT_LITERAL(output, ",\"device\":");
    cli_output_i64(output, row->device);
    CLI_OUTPUT_LITERAL(output, ",\"context\":");
    cli_output_u64(output, row->context_id);
    CLI_OUTPUT_LITERAL(output, ",\"stream\":");
    cli_output_u64(output, row->stream_id);
    CLI_OUTPUT_LITERAL(output, ",\"grid\":[");
    perfetto_dimensions(output, row->grid);
    CLI_OUTPUT_LITERAL(output, ",\"block\":[");
    perfetto_dimensions(output, row->block);
    CLI_OUTPUT_LITERAL(output, ",\"registers per thread\":");
    cli_output_u64(output, row->registers_per_thread);
    CLI_OUTPUT_LITERAL(output, ",\"shared memory\":");
    cli_output_u64(output, row->shared_memory_bytes);
    if (row->graph_id != 0) {
        cli_output_json_member_u64(output, "graph_id", row->graph_id);
        cli_output_json_member_u64(output, "graph_node_id", row->graph_node_id);
    }
    if (context->replay_window_count > 0 &&
        perfetto_replay_rerun(context, row->pid, row->device, row->start_ns))
        perfetto_member_bool(output, "replay_rerun", 1);
    if (perfetto_replay_kernel_args(context, row->pid, row->correlation_id) != 0)
        return 1;
    CLI_OUTPUT_LITERAL(output, "}}");
    perfetto_flow(context, row->pid, call, trace_pid, tid, row->start_ns);
    return perfetto_stopped(context);
}

int perfetto_write_kernels(perfetto_context *context)
{
    return perfetto_failed(
        context, "kernels",
        store_export_kernels_linked(context->session->database, perfetto_kernel_row, context));
}

/* ---- copies and memsets ---- */

static int perfetto_copy_row(const store_copy_row *row, const store_export_call_link *call,
                             void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    int64_t trace_pid, tid;
    if (perfetto_stream_track(context, row->pid, row->device, row->stream_id, &trace_pid, &tid) !=
        0)
        return 1;
    perfetto_device_slice(context, row->is_memset ? "gpu_memset" : "gpu_memcpy", trace_pid, tid,
                          row->start_ns, row->end_ns);
    const char *kind = cli_copy_kind_name(row->copy_kind, "unknown");
    cli_output_text(output, ",\"name\":\"");
    if (row->is_memset) {
        cli_output_text(output, "memset");
    } else {
        cli_output_text(output, "copy ");
        cli_output_text(output, kind);
    }
    cli_output_text(output, "\",\"args\":{\"correlation\":");
    cli_output_u64(output, row->correlation_id);
    cli_output_json_member_i64(output, "device", row->device);
    cli_output_json_member_u64(output, "stream", row->stream_id);
    cli_output_json_member_u64(output, "bytes", row->bytes);
    /* Bytes per nanosecond are GB/s. */
    if (row->end_ns > row->start_ns) {
        cli_output_text(output, ",\"memory bandwidth (GB/s)\":");
        cli_output_json_double(output, (double)row->bytes / (double)(row->end_ns - row->start_ns));
    }
    if (!row->is_memset)
        cli_output_json_member_string(output, "copy_kind", kind);
    /* A failed copy still took device time; say so rather than hide it. */
    if (row->status != 0)
        cli_output_json_member_string(output, "failed", flare_status_name(row->status));
    if (row->graph_id != 0) {
        cli_output_json_member_u64(output, "graph_id", row->graph_id);
        cli_output_json_member_u64(output, "graph_node_id", row->graph_node_id);
    }
    if (context->replay_window_count > 0 &&
        perfetto_replay_rerun(context, row->pid, row->device, row->start_ns))
        perfetto_member_bool(output, "replay_rerun", 1);
    cli_output_text(output, "}}");
    perfetto_flow(context, row->pid, call, trace_pid, tid, row->start_ns);
    return perfetto_stopped(context);
}

int perfetto_write_copies(perfetto_context *context)
{
    return perfetto_failed(
        context, "copies",
        store_export_copies_linked(context->session->database, perfetto_copy_row, context));
}
