/*
 * report_sass_lines.c: the hottest source lines of SASS metrics windows in
 * `flare report` (report_sass.h). The sums are the store's
 * (store_read_sass_lines: per window, device, metric, file and line, the
 * largest first); this file keeps each window's first REPORT_SASS_TOP lines
 * by smsp__sass_inst_executed with the other metrics' sums on the same
 * lines, counts the rest, prints the text list with what had no line, and
 * writes every row as it is for JSON and CSV (sass_lines).
 *
 * Must never change a value, drop a line silently (lines past the kept
 * bound are counted and said), print a share over a total other than the
 * window's executed instructions, or say that code has no line information
 * when the lines only could not be read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_pc.h"
#include "cli/report_pc_lines.h"
#include "cli/report_sass.h"
#include "flare/flare.h"
#include "store/store_sass.h"

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

/* The held line of the window at (file, line), or NULL. */
static report_sass_line *held_line(report_sass_lines *lines, const report_sass_lines_window *window,
                                   const char *file, uint32_t line)
{
    uint64_t hash = report_sass_hash(file);
    for (size_t i = 0; i < window->shown; i++) {
        report_sass_line *held = &lines->rows[window->first + i];
        if (held->file_hash == hash && held->line == line)
            return held;
    }
    return NULL;
}

/* A line of smsp__sass_inst_executed: counted, and held while the window
 * has room. */
static int hold_line(report_sass_lines *lines, report_sass_lines_window *window,
                     const store_sass_line_row *row)
{
    window->count++;
    if (window->shown == REPORT_SASS_TOP || row->value == 0) /* rows come largest first */
        return 0;
    if (grow((void **)&lines->rows, &lines->row_capacity, lines->row_count, sizeof(*lines->rows)) !=
        0)
        return FLARE_ERR_NO_MEMORY;
    report_sass_line *held = &lines->rows[lines->row_count++];
    memset(held, 0, sizeof(*held));
    window->shown++;
    report_pc_path_tail(held->file, sizeof(held->file), row->file);
    held->file_hash = report_sass_hash(row->file);
    held->line = row->line;
    snprintf(held->function, sizeof(held->function), "%s", row->function);
    held->instructions = row->instructions;
    held->counts.executed = row->value;
    return 0;
}

static int read_line(const store_sass_line_row *row, void *user)
{
    report_sass_lines *lines = user;
    report_sass_lines_window *window =
        lines->window_count > 0 ? &lines->windows[lines->window_count - 1] : NULL;
    if (window == NULL || window->pid != row->pid || window->window_id != row->window_id ||
        window->device != row->device) {
        if (grow((void **)&lines->windows, &lines->window_capacity, lines->window_count,
                 sizeof(*lines->windows)) != 0)
            return FLARE_ERR_NO_MEMORY;
        window = &lines->windows[lines->window_count++];
        *window = (report_sass_lines_window){.pid = row->pid,
                                             .window_id = row->window_id,
                                             .device = row->device,
                                             .first = lines->row_count};
    }
    if (strcmp(row->metric, REPORT_SASS_INST) == 0)
        return hold_line(lines, window, row);
    /* As in the walk of instructions: smsp__sass_inst_executed sorts
     * before the parts, so its lines are held when these come. */
    report_sass_part part = report_sass_part_of(row->metric);
    report_sass_line *held =
        part != REPORT_SASS_PARTS ? held_line(lines, window, row->file, row->line) : NULL;
    if (held != NULL) {
        held->counts.value[part] += row->value;
        held->counts.has |= 1u << part;
    }
    return 0;
}

int report_sass_lines_load(store *database, report_sass_lines *lines)
{
    memset(lines, 0, sizeof(*lines));
    int status = store_read_sass_lines(database, read_line, lines);
    if (status != FLARE_OK) {
        report_sass_lines_free(lines); /* nothing half-read is shown */
        lines->unreadable = 1;
    }
    return status;
}

void report_sass_lines_free(report_sass_lines *lines)
{
    free(lines->windows);
    free(lines->rows);
    memset(lines, 0, sizeof(*lines));
}

const report_sass_lines_window *report_sass_lines_of_window(report_sass_lines *lines, int64_t pid,
                                                            uint64_t window_id, int32_t device)
{
    /* From where the last search ended, round once: windows are asked for
     * in the order they were read. */
    for (size_t step = 0; step < lines->window_count; step++) {
        size_t i = (lines->cursor + step) % lines->window_count;
        const report_sass_lines_window *window = &lines->windows[i];
        if (window->pid == pid && window->window_id == window_id && window->device == device) {
            lines->cursor = i;
            return window;
        }
    }
    return NULL;
}

/* "N of M instructions (P% of those executed) have no line information". */
static void print_no_line(const report_sass_window *window)
{
    if (window->no_line_instructions == 0)
        return;
    printf("    %zu of %zu instructions (%.1f%% of the executed) have no line information (nvcc "
           "-lineinfo adds it)\n",
           window->no_line_instructions, window->instructions,
           report_pc_share(window->no_line_executed, window->counts.executed));
}

void report_sass_lines_print(report_sass_lines *lines, const report_sass_window *window)
{
    if (lines->unreadable) {
        printf("    source lines: not shown (they could not be read)\n");
        return;
    }
    const report_sass_lines_window *own =
        report_sass_lines_of_window(lines, window->pid, window->window_id, window->device);
    if (own == NULL || own->shown == 0) {
        printf("    source lines: none (no instruction executed has line information: build "
               "with nvcc -lineinfo)\n");
        print_no_line(window);
        return;
    }
    printf("    hottest source lines by " REPORT_SASS_INST ":\n");
    printf("    %10s %7s", "executed", "share");
    report_sass_print_derived_heading(window);
    printf(" %12s  %s\n", "instructions", "file:line in function");
    for (size_t i = 0; i < own->shown; i++) {
        const report_sass_line *line = &lines->rows[own->first + i];
        printf("    %10" PRIu64 " %6.1f%%", line->counts.executed,
               report_pc_share(line->counts.executed, window->counts.executed));
        report_sass_print_derived(window, &line->counts);
        printf(" %12" PRIu32 "  %s:%" PRIu32 " in %s\n", line->instructions, line->file, line->line,
               line->function);
    }
    if (own->count > own->shown)
        printf("    %zu more lines (flare report --format json: section sass_lines)\n",
               own->count - own->shown);
    print_no_line(window);
}

static int emit_row(const store_sass_line_row *row, void *user)
{
    report_emit *emit = user;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_i64(emit, "device", row->device);
    report_emit_string(emit, "metric", row->metric);
    report_emit_string(emit, "file", row->file);
    report_emit_u64(emit, "line", row->line);
    report_emit_string(emit, "function", row->function);
    report_emit_u64(emit, "value", row->value);
    report_emit_u64(emit, "instructions", row->instructions);
    report_emit_row_end(emit);
    return 0;
}

int report_sass_lines_emit(store *database, report_emit *emit)
{
    return store_read_sass_lines(database, emit_row, emit);
}
