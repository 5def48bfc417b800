/*
 * export_json.c: `flare export --format json`, the kernel table as one
 * JSON object: {"session": {...}, "kernels": [{...}, ...]}, one kernel a
 * line, with the same fields as the csv format.
 *
 * It must never write a string unescaped (cli_output_json_string), nor
 * hold more than one row. A session that never ended has "end_ns": null,
 * one with no recorded exit status "exit_status": null.
 */
#include "cli/export.h"

typedef struct json_context {
    cli_output *output;
    int any_row; /* a row was written: a comma goes before the next */
} json_context;

static int json_row(const store_kernel_row *row, void *user)
{
    json_context *context = user;
    cli_output *output = context->output;
    cli_output_text(output, context->any_row ? ",\n{" : "\n{");
    cli_export_kernel_fields(output, row, 1, cli_output_json_string);
    cli_output_char(output, '}');
    context->any_row = 1;
    return cli_output_failed(output);
}

/* The "session" object, less its closing brace. */
static void json_session(const cli_session *session, cli_output *output)
{
    const store_session_summary *summary = &session->summary;
    cli_output_text(output, "{\"session\":{\"directory\":");
    cli_output_json_string(output, session->directory);
    cli_export_session_identity(output, summary);
    cli_output_json_member_u64(output, "start_ns", summary->start_ns);
    /* end_ns 0 means the session never ended (killed): unknown. */
    if (summary->end_ns != 0)
        cli_output_json_member_u64(output, "end_ns", summary->end_ns);
    else
        cli_output_text(output, ",\"end_ns\":null");
    cli_output_json_member_i64(output, "start_unix_ns", summary->start_unix_ns);
    if (summary->has_exit_status)
        cli_output_json_member_i64(output, "exit_status", summary->exit_status);
    else
        cli_output_text(output, ",\"exit_status\":null");
    cli_output_json_member_i64(output, "kernel_count", summary->kernel_count);
}

static int json_write(const cli_session *session, cli_output *output, cli_export_failure *failure)
{
    json_context context = {.output = output};
    json_session(session, output);
    cli_output_text(output, "},\"kernels\":[");
    if (cli_export_kernel_rows(session, output, json_row, &context, failure) != 0)
        return -1;
    cli_output_text(output, "\n]}\n");
    return 0;
}

const cli_export_format cli_export_json = {
    .name = "json",
    .write = json_write,
};
