/*
 * export_perfetto_pc.c: a PC sampling window's findings in a Perfetto
 * export, as args of its window slice (export_perfetto_flare.c): the
 * samples, the top stall reasons by share, the hottest instructions, the
 * hottest source lines (report_pc_lines.h, with the share of samples
 * without line information) and the scopes the samples ran in (split by
 * kernel time, report_pc_scopes.h), the same numbers `flare report`
 * prints. Every row stays in `flare report --format json` (sections
 * pc_samples, pc_lines, pc_by_scope): a slice's args hold a summary, and
 * say how many rows it summarises.
 *
 * Must never hold more than a summary per window, or put a window's
 * numbers on another window's slice.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/export_perfetto.h"
#include "cli/report_pc.h"
#include "cli/report_pc_lines.h"
#include "cli/report_pc_scopes.h"
#include "flare/flare.h"

#define PC_STALLS_SHOWN  5
#define PC_HOTTEST_SHOWN 3
#define PC_LINES_SHOWN   3
#define PC_SCOPES_SHOWN  5

/* One window's summary, its devices' one after another. */
typedef struct perfetto_pc_window {
    int64_t pid;
    uint64_t window_id;
    uint64_t samples, rows;
    char stalls[320], hottest[400], lines[480], scopes[320];
} perfetto_pc_window;

typedef struct pc_load {
    perfetto_context *context;
    report_pc_scopes scopes;
    report_pc_lines lines;
    int failed;
} pc_load;

static perfetto_pc_window *window_for(pc_load *load, int64_t pid, uint64_t window_id)
{
    perfetto_context *context = load->context;
    if (context->pc_window_count > 0) {
        perfetto_pc_window *last = &context->pc_windows[context->pc_window_count - 1];
        if (last->pid == pid && last->window_id == window_id)
            return last;
    }
    if (context->pc_window_count == context->pc_window_capacity) {
        size_t capacity = context->pc_window_capacity == 0 ? 8 : context->pc_window_capacity * 2;
        perfetto_pc_window *grown =
            realloc(context->pc_windows, capacity * sizeof(*context->pc_windows));
        if (grown == NULL)
            return NULL;
        context->pc_windows = grown;
        context->pc_window_capacity = capacity;
    }
    perfetto_pc_window *window = &context->pc_windows[context->pc_window_count++];
    memset(window, 0, sizeof(*window));
    window->pid = pid;
    window->window_id = window_id;
    return window;
}

/* The device's hottest lines, each with its top stall reason and share of
 * the window's samples, then the share without line information; or
 * that it has none. Nothing when the session does not record lines. */
static void add_lines(pc_load *load, perfetto_pc_window *window, const report_pc_window *summary,
                      const char *separator)
{
    if (!load->lines.recorded || load->lines.unreadable)
        return;
    perfetto_append(window->lines, sizeof(window->lines), "%sdevice %d: ", separator,
                    summary->device);
    const report_pc_lines_window *lines =
        report_pc_lines_of_window(&load->lines, summary->pid, summary->window_id, summary->device);
    if (lines == NULL) {
        perfetto_append(window->lines, sizeof(window->lines),
                        "no line information (nvcc -lineinfo)");
        return;
    }
    for (size_t i = 0; i < lines->shown && i < PC_LINES_SHOWN; i++) {
        const report_pc_source_line *line = &load->lines.rows[lines->first + i];
        perfetto_append(window->lines, sizeof(window->lines), "%s%s:%" PRIu32 " %s %.1f%%",
                        i == 0 ? "" : ", ", line->file, line->line, line->top_stall,
                        report_pc_share(line->samples, summary->total));
    }
    if (summary->total > lines->samples)
        perfetto_append(window->lines, sizeof(window->lines), ", no line %.1f%%",
                        report_pc_share(summary->total - lines->samples, summary->total));
}

static void add_window(report_pc_window *summary, void *user)
{
    pc_load *load = user;
    perfetto_pc_window *window = window_for(load, summary->pid, summary->window_id);
    if (window == NULL) {
        load->failed = 1;
        return;
    }
    /* Each device's part says which device it is. */
    const char *separator = window->samples != 0 || window->rows != 0 ? "; " : "";
    window->samples += summary->total;
    window->rows += summary->rows;
    perfetto_append(window->stalls, sizeof(window->stalls), "%sdevice %d: ", separator,
                    summary->device);
    perfetto_append(window->hottest, sizeof(window->hottest), "%sdevice %d: ", separator,
                    summary->device);
    for (size_t i = 0; i < summary->reasons && i < PC_STALLS_SHOWN; i++)
        perfetto_append(window->stalls, sizeof(window->stalls), "%s%s %.1f%%", i == 0 ? "" : ", ",
                        summary->reason_names[i],
                        report_pc_share(summary->reason_samples[i], summary->total));
    for (size_t i = 0; i < summary->lines && i < PC_HOTTEST_SHOWN; i++)
        perfetto_append(window->hottest, sizeof(window->hottest), "%s%s+0x%" PRIx64 " %s %.1f%%",
                        i == 0 ? "" : ", ", summary->top[i].function, summary->top[i].pc_offset,
                        summary->top[i].stall_reason,
                        report_pc_share(summary->top[i].samples, summary->total));
    add_lines(load, window, summary, separator);
    report_pc_scope_sum sums[PC_SCOPES_SHOWN];
    size_t more = 0;
    size_t count = report_pc_scopes_of_window(&load->scopes, summary->pid, summary->window_id,
                                              summary->device, sums, PC_SCOPES_SHOWN, &more);
    if (count > 0)
        perfetto_append(window->scopes, sizeof(window->scopes),
                        "%sdevice %d: ", window->scopes[0] != '\0' ? "; " : "", summary->device);
    for (size_t i = 0; i < count; i++)
        perfetto_append(
            window->scopes, sizeof(window->scopes), "%s%s %.1f%%", i == 0 ? "" : ", ", sums[i].name,
            summary->total != 0 ? 100.0 * sums[i].samples / (double)summary->total : 0.0);
}

int perfetto_pc_load(perfetto_context *context)
{
    pc_load load = {.context = context};
    store *database = context->session->database;
    /* The samples go on the slices even when their scopes cannot be read
     * (that failure is still returned, for the export to report). */
    int scopes_status = report_pc_scopes_load(database, &load.scopes);
    int lines_status =
        report_pc_lines_load(database, context->session->summary.schema_version, &load.lines);
    int status = report_pc_windows(database, add_window, &load);
    report_pc_scopes_free(&load.scopes);
    report_pc_lines_free(&load.lines);
    if (status == FLARE_OK && load.failed)
        status = FLARE_ERR_NO_MEMORY;
    if (status != FLARE_OK) {
        perfetto_pc_free(context);
        return status;
    }
    return scopes_status != FLARE_OK ? scopes_status : lines_status;
}

void perfetto_pc_window_args(perfetto_context *context, int64_t pid, uint64_t window_id)
{
    cli_output *output = context->output;
    for (size_t i = 0; i < context->pc_window_count; i++) {
        const perfetto_pc_window *window = &context->pc_windows[i];
        if (window->pid != pid || window->window_id != window_id)
            continue;
        cli_output_json_member_u64(output, "pc_samples", window->samples);
        cli_output_json_member_string(output, "pc_stalls", window->stalls);
        cli_output_json_member_string(output, "pc_hottest", window->hottest);
        if (window->lines[0] != '\0')
            cli_output_json_member_string(output, "pc_lines", window->lines);
        if (window->scopes[0] != '\0')
            cli_output_json_member_string(output, "pc_by_scope", window->scopes);
        cli_output_json_member_u64(output, "pc_rows", window->rows);
        return;
    }
}

void perfetto_pc_free(perfetto_context *context)
{
    free(context->pc_windows);
    context->pc_windows = NULL;
    context->pc_window_count = context->pc_window_capacity = 0;
}
