/*
 * export_perfetto_host.c: the host side of a Perfetto export, on the
 * tracks of each operating-system thread: scopes and NVTX ranges (category
 * "scope"), and the kernel launch, copy and memset calls the thread made
 * (table api_calls; category "cuda_driver", as Kineto names driver calls,
 * with args.correlation, the id their GPU work carries).
 *
 * It must never hold a table in memory (one row at a time, from the
 * store's readers), and never write a flow arrow: arrows are written with
 * the GPU work they end on (export_perfetto_gpu.c), where both ends are
 * known, so that an arrow is never half written.
 */
#include "cli/export_perfetto.h"

/* ---- scopes ---- */

static int perfetto_scope_row(const store_scope_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    perfetto_name_os_thread(context, row->pid, row->thread_id);
    if (perfetto_stopped(context))
        return 1;
    perfetto_event_start(context, "X");
    cli_output_text(output, ",\"cat\":\"scope\"");
    perfetto_track(context, row->pid, row->thread_id);
    perfetto_time_span(context, row->start_ns, row->end_ns);
    cli_output_json_member_string(output, "name", row->name);
    cli_output_text(output, ",\"args\":{\"depth\":");
    cli_output_u64(output, row->depth);
    cli_output_json_member_u64(output, "instance_id", row->instance_id);
    /* A scope the session ended inside (or a crash cut short: then its
     * end is the session's end as the collector last wrote it). */
    perfetto_member_bool(output, "still_open", row->still_open);
    cli_output_text(output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_scopes(perfetto_context *context)
{
    return perfetto_failed(
        context, "scopes",
        store_export_scopes(context->session->database, perfetto_scope_row, context));
}

/* ---- API calls ---- */

static int perfetto_api_call_row(const store_api_call_row *row, void *user)
{
    perfetto_context *context = user;
    cli_output *output = context->output;
    perfetto_name_os_thread(context, row->pid, row->thread_id);
    if (perfetto_stopped(context))
        return 1;
    perfetto_event_start(context, "X");
    CLI_OUTPUT_LITERAL(output, ",\"cat\":\"cuda_driver\"");
    perfetto_track(context, row->pid, row->thread_id);
    perfetto_time_span(context, row->start_ns, row->end_ns);
    CLI_OUTPUT_LITERAL(output, ",\"name\":");
    cli_output_json_string(output, row->name);
    CLI_OUTPUT_LITERAL(output, ",\"args\":{\"correlation\":");
    cli_output_u64(output, row->correlation_id);
    CLI_OUTPUT_LITERAL(output, "}}");
    return perfetto_stopped(context);
}

int perfetto_write_api_calls(perfetto_context *context)
{
    return perfetto_failed(
        context, "api_calls",
        store_export_api_calls(context->session->database, perfetto_api_call_row, context));
}
