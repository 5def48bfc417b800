/*
 * export_perfetto_sass.c: a SASS metrics window's findings in a Perfetto
 * export, as args of its window slice (export_perfetto_flare.c), as
 * export_perfetto_pc.c does for PC samples: each metric's total, the
 * instructions executed most (smsp__sass_inst_executed) with their source
 * lines, the source lines executed most (with the share of executions
 * without line information) and the scopes the metric ran in (split by
 * kernel time), the same numbers `flare report` prints (report_sass.h).
 * Every row stays in `flare report --format json` (sections sass_metrics,
 * sass_by_scope, sass_lines): a slice's args hold a summary, and say how
 * many rows it summarises.
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
#include "cli/report_sass.h"
#include "flare/flare.h"

#define SASS_HOTTEST_SHOWN 3
#define SASS_LINES_SHOWN   3
#define SASS_SCOPES_SHOWN  5

/* One window's summary, its devices' one after another. */
typedef struct perfetto_sass_window {
    int64_t pid;
    uint64_t window_id;
    uint64_t rows;
    char totals[640], hottest[480], lines[480], scopes[400];
} perfetto_sass_window;

typedef struct sass_load {
    perfetto_context *context;
    report_sass_lines lines;
    report_sass_scopes scopes;
    int failed;
} sass_load;

static perfetto_sass_window *window_for(sass_load *load, int64_t pid, uint64_t window_id)
{
    perfetto_context *context = load->context;
    if (context->sass_window_count > 0) {
        perfetto_sass_window *last = &context->sass_windows[context->sass_window_count - 1];
        if (last->pid == pid && last->window_id == window_id)
            return last;
    }
    if (context->sass_window_count == context->sass_window_capacity) {
        size_t capacity =
            context->sass_window_capacity == 0 ? 8 : context->sass_window_capacity * 2;
        perfetto_sass_window *grown =
            realloc(context->sass_windows, capacity * sizeof(*context->sass_windows));
        if (grown == NULL)
            return NULL;
        context->sass_windows = grown;
        context->sass_window_capacity = capacity;
    }
    perfetto_sass_window *window = &context->sass_windows[context->sass_window_count++];
    memset(window, 0, sizeof(*window));
    window->pid = pid;
    window->window_id = window_id;
    return window;
}

/* Each metric's total, and how many more were counted past the held ones. */
static void add_totals(perfetto_sass_window *window, const report_sass_window *summary,
                       const char *separator)
{
    perfetto_append(window->totals, sizeof(window->totals), "%sdevice %d: ", separator,
                    summary->device);
    for (size_t i = 0; i < summary->metrics; i++)
        perfetto_append(window->totals, sizeof(window->totals), "%s%s %" PRIu64, i == 0 ? "" : ", ",
                        summary->totals[i].metric, summary->totals[i].value);
    if (summary->other_metrics != 0)
        perfetto_append(window->totals, sizeof(window->totals), ", %zu more metrics",
                        summary->other_metrics);
}

/* The instructions executed most, each with its line and share of the
 * device's executions. */
static void add_hottest(perfetto_sass_window *window, const report_sass_window *summary,
                        const char *separator)
{
    perfetto_append(window->hottest, sizeof(window->hottest), "%sdevice %d: ", separator,
                    summary->device);
    if (summary->instructions == 0) {
        perfetto_append(window->hottest, sizeof(window->hottest), REPORT_SASS_INST " not counted");
        return;
    }
    for (size_t i = 0; i < summary->top_count && i < SASS_HOTTEST_SHOWN; i++) {
        const report_sass_instruction *held = &summary->top[i];
        perfetto_append(window->hottest, sizeof(window->hottest), "%s%s+0x%" PRIx64,
                        i == 0 ? "" : ", ", held->function, held->pc_offset);
        if (held->file[0] != '\0')
            perfetto_append(window->hottest, sizeof(window->hottest), " %s:%" PRIu32, held->file,
                            held->source_line);
        perfetto_append(window->hottest, sizeof(window->hottest), " %.1f%%",
                        report_pc_share(held->counts.executed, summary->counts.executed));
    }
}

/* The device's hottest lines, each with its share of the device's
 * executions, then the share without line information; or that it has
 * none. Nothing when the lines could not be read or nothing was executed. */
static void add_lines(sass_load *load, perfetto_sass_window *window,
                      const report_sass_window *summary)
{
    if (load->lines.unreadable || summary->instructions == 0)
        return;
    perfetto_append(window->lines, sizeof(window->lines),
                    "%sdevice %d: ", window->lines[0] != '\0' ? "; " : "", summary->device);
    const report_sass_lines_window *lines = report_sass_lines_of_window(
        &load->lines, summary->pid, summary->window_id, summary->device);
    if (lines == NULL || lines->shown == 0) {
        perfetto_append(window->lines, sizeof(window->lines),
                        "no line information (nvcc -lineinfo)");
        return;
    }
    for (size_t i = 0; i < lines->shown && i < SASS_LINES_SHOWN; i++) {
        const report_sass_line *line = &load->lines.rows[lines->first + i];
        perfetto_append(window->lines, sizeof(window->lines), "%s%s:%" PRIu32 " %.1f%%",
                        i == 0 ? "" : ", ", line->file, line->line,
                        report_pc_share(line->counts.executed, summary->counts.executed));
    }
    if (summary->no_line_executed != 0)
        perfetto_append(window->lines, sizeof(window->lines), ", no line %.1f%%",
                        report_pc_share(summary->no_line_executed, summary->counts.executed));
}

/* The device's scopes by share of the split metric's total (named when it
 * is not smsp__sass_inst_executed). */
static void add_scopes(sass_load *load, perfetto_sass_window *window,
                       const report_sass_window *summary)
{
    report_sass_scope_split split;
    report_sass_scopes_of_window(&load->scopes, summary->pid, summary->window_id, summary->device,
                                 &split);
    if (split.metric == NULL)
        return;
    perfetto_append(window->scopes, sizeof(window->scopes), "%sdevice %d",
                    window->scopes[0] != '\0' ? "; " : "", summary->device);
    if (strcmp(split.metric, REPORT_SASS_INST) != 0)
        perfetto_append(window->scopes, sizeof(window->scopes), " (%s)", split.metric);
    perfetto_append(window->scopes, sizeof(window->scopes), ": ");
    for (size_t i = 0; i < split.count && i < SASS_SCOPES_SHOWN; i++)
        perfetto_append(window->scopes, sizeof(window->scopes), "%s%s %.1f%%", i == 0 ? "" : ", ",
                        split.rows[i].scope_name,
                        split.total > 0 ? 100.0 * split.rows[i].value / split.total : 0.0);
}

static void add_window(report_sass_window *summary, void *user)
{
    sass_load *load = user;
    if (summary->rows == 0) /* its engine stored nothing: the slice says why */
        return;
    perfetto_sass_window *window = window_for(load, summary->pid, summary->window_id);
    if (window == NULL) {
        load->failed = 1;
        return;
    }
    /* Each device's part says which device it is. */
    const char *separator = window->rows != 0 ? "; " : "";
    window->rows += summary->rows;
    add_totals(window, summary, separator);
    add_hottest(window, summary, separator);
    add_lines(load, window, summary);
    add_scopes(load, window, summary);
}

int perfetto_sass_load(perfetto_context *context)
{
    sass_load load = {.context = context};
    store *database = context->session->database;
    /* The metrics go on the slices even when their lines or scopes cannot
     * be read (that failure is still returned, for the export to report). */
    int lines_status = report_sass_lines_load(database, &load.lines);
    int scopes_status = report_sass_scopes_load(database, &load.scopes);
    int status = report_sass_windows(database, add_window, &load);
    report_sass_lines_free(&load.lines);
    report_sass_scopes_free(&load.scopes);
    if (status == FLARE_OK && load.failed)
        status = FLARE_ERR_NO_MEMORY;
    if (status != FLARE_OK) {
        perfetto_sass_free(context);
        return status;
    }
    return lines_status != FLARE_OK ? lines_status : scopes_status;
}

void perfetto_sass_window_args(perfetto_context *context, int64_t pid, uint64_t window_id)
{
    cli_output *output = context->output;
    for (size_t i = 0; i < context->sass_window_count; i++) {
        const perfetto_sass_window *window = &context->sass_windows[i];
        if (window->pid != pid || window->window_id != window_id)
            continue;
        cli_output_json_member_string(output, "sass_totals", window->totals);
        cli_output_json_member_string(output, "sass_hottest", window->hottest);
        if (window->lines[0] != '\0')
            cli_output_json_member_string(output, "sass_lines", window->lines);
        if (window->scopes[0] != '\0')
            cli_output_json_member_string(output, "sass_by_scope", window->scopes);
        cli_output_json_member_u64(output, "sass_rows", window->rows);
        return;
    }
}

void perfetto_sass_free(perfetto_context *context)
{
    free(context->sass_windows);
    context->sass_windows = NULL;
    context->sass_window_count = context->sass_window_capacity = 0;
}
