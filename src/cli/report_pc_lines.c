/*
 * report_pc_lines.c: the hottest source lines of PC sampling windows in
 * `flare report` (report_pc_lines.h). The sums are the store's
 * (store_read_pc_lines: per window, device, file and line, most samples
 * first); this file keeps each window's first REPORT_PC_LINES_TOP rows and
 * counts the rest, prints the text list, and writes every row as it is for
 * JSON and CSV.
 *
 * Must never change a value, drop a line silently (lines past the kept
 * bound are counted and said), print a share over a total other than the
 * window's, or say that code lacks line information when the session is
 * only too old to have stored it.
 */
#include "cli/report_pc_lines.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_pc.h"

void report_pc_path_tail(char *file, size_t size, const char *path)
{
    size_t length = strlen(path);
    if (length < size) {
        memcpy(file, path, length + 1);
        return;
    }
    snprintf(file, size, "...%s", path + length - (size - 4));
}

void report_pc_fit_text(char *out, size_t out_size, const char *text)
{
    size_t length = strlen(text);
    if (length < out_size) {
        memcpy(out, text, length + 1);
        return;
    }
    snprintf(out, out_size, "%.*s...", (int)(out_size - 4), text);
}

/* Room for one more of count items of size bytes in *items (capacity
 * *capacity). 0, or FLARE_ERR_NO_MEMORY. */
static int grow(void **items, size_t *capacity, size_t count, size_t size)
{
    if (count < *capacity)
        return 0;
    size_t bigger = *capacity == 0 ? 64 : *capacity * 2;
    void *grown = realloc(*items, bigger * size);
    if (grown == NULL)
        return FLARE_ERR_NO_MEMORY;
    *items = grown;
    *capacity = bigger;
    return 0;
}

static int hold_row(const store_pc_line_row *row, void *user)
{
    report_pc_lines *lines = user;
    report_pc_lines_window *window =
        lines->window_count > 0 ? &lines->windows[lines->window_count - 1] : NULL;
    if (window == NULL || window->pid != row->pid || window->window_id != row->window_id ||
        window->device != row->device) {
        if (grow((void **)&lines->windows, &lines->window_capacity, lines->window_count,
                 sizeof(*lines->windows)) != 0)
            return FLARE_ERR_NO_MEMORY;
        window = &lines->windows[lines->window_count++];
        *window = (report_pc_lines_window){.pid = row->pid,
                                           .window_id = row->window_id,
                                           .device = row->device,
                                           .first = lines->row_count};
    }
    window->samples += row->samples;
    window->count++;
    if (window->shown == REPORT_PC_LINES_TOP) /* rows come most samples first */
        return 0;
    if (grow((void **)&lines->rows, &lines->row_capacity, lines->row_count, sizeof(*lines->rows)) !=
        0)
        return FLARE_ERR_NO_MEMORY;
    report_pc_source_line *held = &lines->rows[lines->row_count++];
    window->shown++;
    report_pc_path_tail(held->file, sizeof(held->file), row->file);
    held->line = row->line;
    snprintf(held->function, sizeof(held->function), "%s", row->function);
    held->samples = row->samples;
    snprintf(held->top_stall, sizeof(held->top_stall), "%s", row->top_stall);
    held->top_stall_samples = row->top_stall_samples;
    return 0;
}

int report_pc_lines_load(store *database, int schema_version, report_pc_lines *lines)
{
    memset(lines, 0, sizeof(*lines));
    if (schema_version < REPORT_PC_LINES_SINCE)
        return FLARE_OK;
    lines->recorded = 1;
    int status = store_read_pc_lines(database, hold_row, lines);
    if (status != FLARE_OK) {
        report_pc_lines_free(lines); /* nothing half-read is shown */
        lines->recorded = lines->unreadable = 1;
    }
    return status;
}

void report_pc_lines_free(report_pc_lines *lines)
{
    free(lines->windows);
    free(lines->rows);
    memset(lines, 0, sizeof(*lines));
}

const report_pc_lines_window *report_pc_lines_of_window(report_pc_lines *lines, int64_t pid,
                                                        uint64_t window_id, int32_t device)
{
    /* From where the last search ended, round once: windows are asked for
     * in the order they were read, so this is mostly the next one. */
    for (size_t step = 0; step < lines->window_count; step++) {
        size_t i = (lines->cursor + step) % lines->window_count;
        const report_pc_lines_window *window = &lines->windows[i];
        if (window->pid == pid && window->window_id == window_id && window->device == device) {
            lines->cursor = i;
            return window;
        }
    }
    return NULL;
}

void report_pc_lines_print(report_pc_lines *lines, int64_t pid, uint64_t window_id, int32_t device,
                           uint64_t total)
{
    if (!lines->recorded) {
        printf("    source lines: not recorded (a session of an older flare: flare stores them "
               "since schema version %d)\n",
               REPORT_PC_LINES_SINCE);
        return;
    }
    if (lines->unreadable) {
        printf("    source lines: not shown (they could not be read)\n");
        return;
    }
    const report_pc_lines_window *window = report_pc_lines_of_window(lines, pid, window_id, device);
    if (window == NULL) {
        printf("    source lines: none (the sampled code has no line information: build it "
               "with nvcc -lineinfo)\n");
        return;
    }
    printf("    hottest source lines:\n");
    printf("    %10s %7s  %-20s %7s  %s\n", "samples", "share", "top stall", "of line",
           "file:line in function");
    for (size_t i = 0; i < window->shown; i++) {
        const report_pc_source_line *line = &lines->rows[window->first + i];
        printf("    %10" PRIu64 " %6.1f%%  %-20s %6.1f%%  %s:%" PRIu32 " in %s\n", line->samples,
               report_pc_share(line->samples, total), line->top_stall,
               report_pc_share(line->top_stall_samples, line->samples), line->file, line->line,
               line->function);
    }
    if (window->count > window->shown)
        printf("    %zu more lines (flare report --format json: section pc_lines)\n",
               window->count - window->shown);
    if (total > window->samples)
        printf("    %.1f%% of the samples are in code without line information (nvcc -lineinfo "
               "adds it)\n",
               report_pc_share(total - window->samples, total));
}

static int emit_row(const store_pc_line_row *row, void *user)
{
    report_emit *emit = user;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_i64(emit, "device", row->device);
    report_emit_string(emit, "file", row->file);
    report_emit_u64(emit, "line", row->line);
    report_emit_string(emit, "function", row->function);
    report_emit_u64(emit, "samples", row->samples);
    report_emit_string(emit, "top_stall_reason", row->top_stall);
    report_emit_u64(emit, "top_stall_samples", row->top_stall_samples);
    report_emit_row_end(emit);
    return 0;
}

int report_pc_lines_emit(store *database, report_emit *emit)
{
    return store_read_pc_lines(database, emit_row, emit);
}
