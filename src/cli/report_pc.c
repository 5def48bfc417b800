/*
 * report_pc.c: the PC samples of a session's windows in `flare report`
 * (issue 26): the text section, per window that ran PC sampling, the stall
 * reasons by share, the scopes (report_pc_scopes.c), the hottest
 * instructions (function+offset, stall reason, samples, share) and the
 * hottest source lines (report_pc_lines.c); the JSON/CSV section
 * pc_samples, every row as stored (table pc_samples, docs/schema.md).
 *
 * Reads the rows in the store's order (pid, window, most samples first)
 * and holds one window at a time: at most REPORT_PC_TOP rows and
 * REPORT_PC_REASONS stall reasons (more reasons are summed as "other", and
 * said). Must never change a value or hide that rows were left out.
 */
#include "cli/report_pc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_pc_lines.h"
#include "cli/report_pc_scopes.h"
#include "flare/flare.h"
#include "store/store_pc.h"

typedef struct pc_walk {
    report_pc_window window;
    void (*done)(report_pc_window *window, void *user);
    void *user;
} pc_walk;

double report_pc_share(uint64_t part, uint64_t total)
{
    return total != 0 ? 100.0 * (double)part / (double)total : 0.0;
}

/* The reasons by samples, most first (insertion sort: at most 24). */
static void sort_reasons(report_pc_window *window)
{
    for (size_t i = 1; i < window->reasons; i++)
        for (size_t j = i; j > 0 && window->reason_samples[j] > window->reason_samples[j - 1];
             j--) {
            uint64_t samples = window->reason_samples[j];
            char name[32];
            memcpy(name, window->reason_names[j], sizeof(name));
            window->reason_samples[j] = window->reason_samples[j - 1];
            memcpy(window->reason_names[j], window->reason_names[j - 1], sizeof(name));
            window->reason_samples[j - 1] = samples;
            memcpy(window->reason_names[j - 1], name, sizeof(name));
        }
}

/* The text section's walk: the run, and the windows' samples by scope and
 * by source line. */
typedef struct pc_print {
    cli_report_run *run;
    report_pc_scopes scopes;
    report_pc_lines lines;
} pc_print;

static void print_window(report_pc_window *window, void *user)
{
    pc_print *print = user;
    cli_report_run *run = print->run;
    if (run->rows == 0)
        printf("\nPC samples (windows with engine pc: where in their kernels warps waited)\n");
    run->rows++;
    printf("  window %" PRIu64 " (pid %" PRId64 ", device %d): %" PRIu64 " samples\n",
           window->window_id, window->pid, window->device, window->total);
    printf("    stall reasons:");
    for (size_t i = 0; i < window->reasons; i++)
        printf("%s %s %.1f%%", i == 0 ? "" : ",", window->reason_names[i],
               report_pc_share(window->reason_samples[i], window->total));
    if (window->other_reasons != 0)
        printf(", other %.1f%%", report_pc_share(window->other_reasons, window->total));
    printf("\n");
    report_pc_scopes_print(&print->scopes, window->pid, window->window_id, window->device,
                           window->total);
    printf("    %10s %7s  %-20s %s\n", "samples", "share", "stall", "function+offset");
    for (size_t i = 0; i < window->lines; i++) {
        const report_pc_line *line = &window->top[i];
        printf("    %10" PRIu64 " %6.1f%%  %-20s %s+0x%" PRIx64, line->samples,
               report_pc_share(line->samples, window->total), line->stall_reason, line->function,
               line->pc_offset);
        if (line->file[0] != '\0')
            printf(" (%s:%" PRIu32 ")", line->file, line->source_line);
        else if (line->sass[0] != '\0')
            printf(" [%s]", line->sass);
        printf("\n");
    }
    if (window->rows > window->lines)
        printf("    %zu more instructions and reasons (flare report --format json has them "
               "all)\n",
               window->rows - window->lines);
    report_pc_lines_print(&print->lines, window->pid, window->window_id, window->device,
                          window->total);
}

static void add_reason(report_pc_window *window, const char *reason, uint64_t samples)
{
    for (size_t i = 0; i < window->reasons; i++)
        if (strncmp(window->reason_names[i], reason, sizeof(window->reason_names[i]) - 1) == 0) {
            window->reason_samples[i] += samples;
            return;
        }
    if (window->reasons == REPORT_PC_REASONS) {
        window->other_reasons += samples;
        return;
    }
    snprintf(window->reason_names[window->reasons], sizeof(window->reason_names[0]), "%s", reason);
    window->reason_samples[window->reasons++] = samples;
}

/* A window is finished: its reasons sorted, handed over, cleared. */
static void finish_window(pc_walk *walk)
{
    if (!walk->window.have)
        return;
    sort_reasons(&walk->window);
    walk->done(&walk->window, walk->user);
    memset(&walk->window, 0, sizeof(walk->window));
}

static int walk_row(const store_pc_sample_row *row, void *user)
{
    pc_walk *walk = user;
    report_pc_window *window = &walk->window;
    if (window->have && (window->pid != row->pid || window->window_id != row->window_id ||
                         window->device != row->device))
        finish_window(walk);
    window->have = 1;
    window->pid = row->pid;
    window->window_id = row->window_id;
    window->device = row->device;
    window->total += row->samples;
    window->rows++;
    add_reason(window, row->stall_reason, row->samples);
    if (window->lines < REPORT_PC_TOP) { /* rows come most samples first */
        report_pc_line *line = &window->top[window->lines++];
        snprintf(line->function, sizeof(line->function), "%s", row->function);
        line->pc_offset = row->pc_offset;
        snprintf(line->stall_reason, sizeof(line->stall_reason), "%s", row->stall_reason);
        line->samples = row->samples;
        if (row->file != NULL && row->file[0] != '\0') {
            report_pc_path_tail(line->file, sizeof(line->file), row->file);
            line->source_line = row->line;
        } else if (row->sass != NULL) {
            report_pc_fit_text(line->sass, sizeof(line->sass), row->sass);
        }
    }
    return 0;
}

int report_pc_windows(store *database, void (*done)(report_pc_window *window, void *user),
                      void *user)
{
    pc_walk *walk = calloc(1, sizeof(*walk)); /* about 10 KiB: off the stack */
    if (walk == NULL)
        return FLARE_ERR_NO_MEMORY;
    walk->done = done;
    walk->user = user;
    int status = store_read_pc_samples(database, walk_row, walk);
    if (status == FLARE_OK)
        finish_window(walk);
    free(walk);
    return status;
}

int cli_report_pc(cli_report_run *run)
{
    /* The samples are shown even when their attribution or their lines
     * cannot be read (a damaged session); that failure is reported after
     * them. */
    pc_print print = {.run = run};
    int scopes_status = report_pc_scopes_load(run->database, &print.scopes);
    int lines_status =
        report_pc_lines_load(run->database, run->summary->schema_version, &print.lines);
    int status = report_pc_windows(run->database, print_window, &print);
    report_pc_scopes_free(&print.scopes);
    report_pc_lines_free(&print.lines);
    if (status == FLARE_OK)
        status = scopes_status;
    return status != FLARE_OK ? status : lines_status;
}

static int emit_row(const store_pc_sample_row *row, void *user)
{
    report_emit *emit = user;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_i64(emit, "device", row->device);
    report_emit_string(emit, "function", row->function);
    report_emit_u64(emit, "pc_offset", row->pc_offset);
    report_emit_string(emit, "stall_reason", row->stall_reason);
    report_emit_u64(emit, "samples", row->samples);
    report_emit_u64(emit, "first_ns", row->first_ns);
    report_emit_u64(emit, "last_ns", row->last_ns);
    int has_line = row->file != NULL && row->file[0] != '\0';
    report_emit_string(emit, "file", has_line ? row->file : NULL);
    report_emit_u64_if(emit, "line", row->line, has_line);
    report_emit_string(emit, "sass", row->sass);
    report_emit_row_end(emit);
    return 0;
}

int report_pc_emit(store *database, report_emit *emit)
{
    return store_read_pc_samples(database, emit_row, emit);
}
