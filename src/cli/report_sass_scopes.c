/*
 * report_sass_scopes.c: SASS metrics by scope in `flare report`
 * (report_sass.h). The attribution itself is the store's
 * (store_read_sass_by_scope: a function's values of a metric in a window
 * split over the scopes its kernels ran in during the window, by kernel
 * time, the rule PC samples follow); this file holds the rows, picks one
 * metric per window for the text line (smsp__sass_inst_executed where the
 * window counted it), prints that line, and writes every row as it is for
 * JSON and CSV (sass_by_scope).
 *
 * Must never change a value, drop a scope silently (those past the shown
 * bound are counted and said), print a share over a total other than the
 * window's for that metric, or say a window has no scopes when they only
 * could not be read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_pc_scopes.h"
#include "cli/report_sass.h"
#include "flare/flare.h"
#include "store/store_sass.h"

static int hold_row(const store_sass_scope_row *row, void *user)
{
    report_sass_scopes *scopes = user;
    if (scopes->count == scopes->capacity) {
        size_t capacity = scopes->capacity == 0 ? 64 : scopes->capacity * 2;
        report_sass_scope *grown = realloc(scopes->rows, capacity * sizeof(*grown));
        if (grown == NULL)
            return FLARE_ERR_NO_MEMORY;
        scopes->rows = grown;
        scopes->capacity = capacity;
    }
    char *name = strdup(row->scope_name);
    if (name == NULL)
        return FLARE_ERR_NO_MEMORY;
    report_sass_scope *held = &scopes->rows[scopes->count++];
    *held = (report_sass_scope){.pid = row->pid,
                                .window_id = row->window_id,
                                .device = row->device,
                                .scope_name = name,
                                .value = row->value};
    snprintf(held->metric, sizeof(held->metric), "%s", row->metric);
    return 0;
}

int report_sass_scopes_load(store *database, report_sass_scopes *scopes)
{
    memset(scopes, 0, sizeof(*scopes));
    int status = store_read_sass_by_scope(database, report_pc_scopes_resolve, hold_row, scopes);
    if (status != FLARE_OK) {
        report_sass_scopes_free(scopes); /* nothing half-read is shown */
        scopes->unreadable = 1;
    }
    return status;
}

void report_sass_scopes_free(report_sass_scopes *scopes)
{
    for (size_t i = 0; i < scopes->count; i++)
        free(scopes->rows[i].scope_name);
    free(scopes->rows);
    memset(scopes, 0, sizeof(*scopes));
}

/* Whether a row comes before (pid, window, device) in the store's order. */
static int before(const report_sass_scope *row, int64_t pid, uint64_t window_id, int32_t device)
{
    if (row->pid != pid)
        return row->pid < pid;
    if (row->window_id != window_id)
        return row->window_id < window_id;
    return row->device < device;
}

static int same_window(const report_sass_scope *row, int64_t pid, uint64_t window_id,
                       int32_t device)
{
    return row->pid == pid && row->window_id == window_id && row->device == device;
}

void report_sass_scopes_of_window(const report_sass_scopes *scopes, int64_t pid, uint64_t window_id,
                                  int32_t device, report_sass_scope_split *split)
{
    memset(split, 0, sizeof(*split));
    size_t low = 0, high = scopes->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (before(&scopes->rows[middle], pid, window_id, device))
            low = middle + 1;
        else
            high = middle;
    }
    size_t end = low;
    while (end < scopes->count && same_window(&scopes->rows[end], pid, window_id, device))
        end++;
    if (end == low)
        return;
    /* A window's rows come by metric: smsp__sass_inst_executed's, or else
     * the first metric's. */
    size_t first = low;
    for (size_t i = low; i < end; i++)
        if (strcmp(scopes->rows[i].metric, REPORT_SASS_INST) == 0) {
            first = i;
            break;
        }
    split->metric = scopes->rows[first].metric;
    split->rows = &scopes->rows[first];
    for (size_t i = first; i < end && strcmp(scopes->rows[i].metric, split->metric) == 0; i++) {
        split->count++;
        split->total += scopes->rows[i].value;
    }
}

void report_sass_scopes_print(const report_sass_scopes *scopes, const report_sass_window *window)
{
    if (scopes->unreadable) {
        printf("    by scope: not shown (they could not be read)\n");
        return;
    }
    report_sass_scope_split split;
    report_sass_scopes_of_window(scopes, window->pid, window->window_id, window->device, &split);
    if (split.metric == NULL)
        return;
    printf("    by scope (%s split by kernels):", split.metric);
    size_t shown = split.count < REPORT_SASS_SCOPES_SHOWN ? split.count : REPORT_SASS_SCOPES_SHOWN;
    for (size_t i = 0; i < shown; i++)
        printf("%s %s %.1f%%", i == 0 ? "" : ",", split.rows[i].scope_name,
               split.total > 0 ? 100.0 * split.rows[i].value / split.total : 0.0);
    if (split.count > shown)
        printf(", %zu more (flare report --format json: section sass_by_scope)",
               split.count - shown);
    printf("\n");
}

static int emit_row(const store_sass_scope_row *row, void *user)
{
    report_emit *emit = user;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_i64(emit, "device", row->device);
    report_emit_string(emit, "metric", row->metric);
    report_emit_string(emit, "scope", row->scope_name);
    report_emit_double(emit, "value", row->value);
    report_emit_row_end(emit);
    return 0;
}

int report_sass_scopes_emit(store *database, report_emit *emit)
{
    return store_read_sass_by_scope(database, report_pc_scopes_resolve, emit_row, emit);
}
