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

#include "attrib/attrib.h"
#include "cli/report_pc.h"
#include "flare/flare.h"
#include "store/store_pc.h"

int report_pc_scopes_resolve(const store_pc_scope_span *spans, size_t span_count,
                             const uint64_t *times, size_t count, int64_t *winners)
{
    attrib_scope *scopes = calloc(span_count > 0 ? span_count : 1, sizeof(*scopes));
    if (scopes == NULL)
        return FLARE_ERR_NO_MEMORY;
    for (size_t i = 0; i < span_count; i++)
        scopes[i] = (attrib_scope){.start_ns = spans[i].start_ns,
                                   .end_ns = spans[i].end_ns, /* UINT64_MAX: ATTRIB_OPEN */
                                   .instance_id = spans[i].instance_id,
                                   .depth = spans[i].depth};
    int status = attrib_resolve(scopes, span_count, times, count, winners, NULL);
    free(scopes);
    return status;
}

static int hold_row(const store_pc_scope_row *row, void *user)
{
    report_pc_scopes *scopes = user;
    if (scopes->count == scopes->capacity) {
        size_t capacity = scopes->capacity == 0 ? 256 : scopes->capacity * 2;
        report_pc_scope_row *grown = realloc(scopes->rows, capacity * sizeof(*grown));
        if (grown == NULL)
            return FLARE_ERR_NO_MEMORY;
        scopes->rows = grown;
        scopes->capacity = capacity;
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
    int status = store_read_pc_by_scope(database, report_pc_scopes_resolve, hold_row, scopes);
    if (status != FLARE_OK)
        report_pc_scopes_free(scopes); /* nothing half-read is shown */
    return status;
}

void report_pc_scopes_free(report_pc_scopes *scopes)
{
    free(scopes->rows);
    memset(scopes, 0, sizeof(*scopes));
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
    /* The window's rows are adjacent, a scope's rows too (its first the top
     * reason): one pass sums them all, then they are ranked. */
    size_t first = 0;
    while (first < scopes->count &&
           (scopes->rows[first].pid != pid || scopes->rows[first].window_id != window_id ||
            scopes->rows[first].device != device))
        first++;
    size_t end = first;
    while (end < scopes->count && scopes->rows[end].pid == pid &&
           scopes->rows[end].window_id == window_id && scopes->rows[end].device == device)
        end++;
    *more = 0;
    if (end == first)
        return 0;
    report_pc_scope_sum *all = malloc((end - first) * sizeof(*all));
    if (all == NULL) {
        *more = SIZE_MAX;
        return 0;
    }
    size_t count = 0;
    for (size_t i = first; i < end; i++) {
        const report_pc_scope_row *row = &scopes->rows[i];
        if (count > 0 && strcmp(all[count - 1].name, row->scope_name) == 0)
            all[count - 1].samples += row->samples;
        else
            all[count++] = (report_pc_scope_sum){row->scope_name, row->stall_reason, row->samples};
    }
    qsort(all, count, sizeof(*all), by_samples);
    size_t shown = count < max ? count : max;
    memcpy(sums, all, shown * sizeof(*sums));
    *more = count - shown;
    free(all);
    return shown;
}

void report_pc_scopes_print(const report_pc_scopes *scopes, int64_t pid, uint64_t window_id,
                            int32_t device, uint64_t total)
{
    report_pc_scope_sum sums[REPORT_PC_SCOPES_SHOWN];
    size_t more = 0;
    size_t count = report_pc_scopes_of_window(scopes, pid, window_id, device, sums,
                                              REPORT_PC_SCOPES_SHOWN, &more);
    if (count == 0 && more == SIZE_MAX) {
        printf("    by scope: not shown (out of memory)\n");
        return;
    }
    if (count == 0)
        return;
    printf("    by scope (samples split by kernel time):");
    for (size_t i = 0; i < count; i++)
        printf("%s %s %.1f%% (%s)", i == 0 ? "" : ",", sums[i].name,
               total != 0 ? 100.0 * sums[i].samples / (double)total : 0.0, sums[i].top_reason);
    if (more > 0)
        printf(", %zu more (flare report --format json: section pc_by_scope)", more);
    printf("\n");
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
    return store_read_pc_by_scope(database, report_pc_scopes_resolve, emit_row, emit);
}
