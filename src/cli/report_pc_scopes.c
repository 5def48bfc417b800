/*
 * report_pc_scopes.c: PC samples by scope in `flare report`
 * (report_pc_scopes.h). The attribution itself is the store's
 * (store_read_pc_by_scope: a function's samples split over the scopes its
 * kernels ran in during the window, by kernel time); this file holds the
 * rows, sums them per scope for the text line, and writes them as they are
 * for JSON and CSV.
 *
 * Must never change a value, drop a row silently (rows past the held bound
 * are counted and said), or print a share over a total other than the
 * window's.
 */
#include "cli/report_pc_scopes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_pc.h"
#include "flare/flare.h"
#include "store/store_pc.h"

static int hold_row(const store_pc_scope_row *row, void *user)
{
    report_pc_scopes *scopes = user;
    if (scopes->count == REPORT_PC_SCOPE_ROWS) {
        scopes->left_out++;
        return 0;
    }
    report_pc_scope_row *held = &scopes->rows[scopes->count++];
    held->pid = row->pid;
    held->window_id = row->window_id;
    held->device = row->device;
    snprintf(held->scope_name, sizeof(held->scope_name), "%s", row->scope_name);
    snprintf(held->stall_reason, sizeof(held->stall_reason), "%s", row->stall_reason);
    held->samples = row->samples;
    return 0;
}

int report_pc_scopes_load(store *database, report_pc_scopes *scopes)
{
    memset(scopes, 0, sizeof(*scopes));
    scopes->rows = calloc(REPORT_PC_SCOPE_ROWS, sizeof(*scopes->rows));
    if (scopes->rows == NULL)
        return FLARE_ERR_NO_MEMORY;
    int status = store_read_pc_by_scope(database, hold_row, scopes);
    if (status != FLARE_OK)
        scopes->count = scopes->left_out = 0; /* nothing half-read is shown */
    return status;
}

void report_pc_scopes_free(report_pc_scopes *scopes)
{
    free(scopes->rows);
    memset(scopes, 0, sizeof(*scopes));
}

/* The window's scopes, summed (rows of a scope are adjacent, its first the
 * top reason), in the store's order. */
static size_t sum_scopes(const report_pc_scopes *scopes, int64_t pid, uint64_t window_id,
                         int32_t device, report_pc_scope_sum *sums, size_t max, size_t *more)
{
    size_t count = 0;
    *more = 0;
    for (size_t i = 0; i < scopes->count; i++) {
        const report_pc_scope_row *row = &scopes->rows[i];
        if (row->pid != pid || row->window_id != window_id || row->device != device)
            continue;
        if (count > 0 && strcmp(sums[count - 1].name, row->scope_name) == 0) {
            sums[count - 1].samples += row->samples;
            continue;
        }
        if (count == max) {
            if (i == 0 || strcmp(scopes->rows[i - 1].scope_name, row->scope_name) != 0)
                (*more)++;
            continue;
        }
        sums[count++] = (report_pc_scope_sum){row->scope_name, row->stall_reason, row->samples};
    }
    return count;
}

static int by_samples(const void *a, const void *b)
{
    const report_pc_scope_sum *x = a, *y = b;
    return x->samples < y->samples ? 1 : x->samples > y->samples ? -1 : strcmp(x->name, y->name);
}

size_t report_pc_scopes_of_window(const report_pc_scopes *scopes, int64_t pid, uint64_t window_id,
                                  int32_t device, report_pc_scope_sum *sums, size_t max,
                                  size_t *more)
{
    size_t count = sum_scopes(scopes, pid, window_id, device, sums, max, more);
    qsort(sums, count, sizeof(sums[0]), by_samples);
    return count;
}

void report_pc_scopes_print(const report_pc_scopes *scopes, int64_t pid, uint64_t window_id,
                            int32_t device, uint64_t total)
{
    report_pc_scope_sum sums[64];
    size_t more = 0;
    size_t count = report_pc_scopes_of_window(scopes, pid, window_id, device, sums, 64, &more);
    if (count == 0)
        return;
    printf("    by scope (samples split by kernel time):");
    for (size_t i = 0; i < count && i < REPORT_PC_SCOPES_SHOWN; i++)
        printf("%s %s %.1f%% (%s)", i == 0 ? "" : ",", sums[i].name,
               total != 0 ? 100.0 * sums[i].samples / (double)total : 0.0, sums[i].top_reason);
    size_t hidden = (count > REPORT_PC_SCOPES_SHOWN ? count - REPORT_PC_SCOPES_SHOWN : 0) + more;
    if (hidden > 0)
        printf(", %zu more", hidden);
    printf("\n");
    if (scopes->left_out > 0)
        printf("    (%zu scope rows past the first %d not read: flare report --format json has "
               "them all)\n",
               scopes->left_out, REPORT_PC_SCOPE_ROWS);
}

static int emit_row(const store_pc_scope_row *row, void *user)
{
    report_emit *emit = user;
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_i64(emit, "device", row->device);
    report_emit_string(emit, "scope", row->scope_name);
    report_emit_string(emit, "stall_reason", row->stall_reason);
    report_emit_double(emit, "samples", row->samples);
    report_emit_row_end(emit);
    return 0;
}

int report_pc_scopes_emit(store *database, report_emit *emit)
{
    return store_read_pc_by_scope(database, emit_row, emit);
}
