/*
 * report_pc_scopes.h: the PC samples of each window attributed to the
 * scopes (flare scopes, NVTX ranges) their kernels ran in
 * (store_read_pc_by_scope): a "by scope" line per window in the text
 * report, and the JSON/CSV section pc_by_scope. Must never change a value
 * or hide that rows were left out.
 */
#ifndef FLARE_CLI_REPORT_PC_SCOPES_H
#define FLARE_CLI_REPORT_PC_SCOPES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report_emit.h"
#include "store/store.h"
#include "store/store_pc.h"

#define REPORT_PC_SCOPES_SHOWN 6 /* scopes printed per window, most samples first */

typedef struct report_pc_scope_row {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    char scope_name[256];  /* cut to fit (names of 255 bytes and more share one) */
    char stall_reason[32]; /* the scope's first row of a window has its top reason */
    double samples;
} report_pc_scope_row;

typedef struct report_pc_scopes {
    report_pc_scope_row *rows; /* in the store's order: window, scope, samples */
    size_t count, capacity;
} report_pc_scopes;

/* The resolver the store's attributions take (store_read_pc_by_scope,
 * store_read_sass_by_scope): attrib.h's rule, the deepest scope holding
 * the time, scopes of every thread competing. FLARE_OK, or
 * FLARE_ERR_NO_MEMORY (or attrib_resolve's status). */
int report_pc_scopes_resolve(const store_pc_scope_span *spans, size_t span_count,
                             const uint64_t *times, size_t count, int64_t *winners);

/* Reads every window's rows (memory in proportion: the windows' scopes
 * times their stall reasons). FLARE_OK, FLARE_ERR_NO_MEMORY or the store's
 * status (then none are held); free with report_pc_scopes_free. */
int report_pc_scopes_load(store *database, report_pc_scopes *scopes);
void report_pc_scopes_free(report_pc_scopes *scopes);

/* One scope of a window: its samples (fractional) and its top stall reason;
 * the strings are the held rows'. */
typedef struct report_pc_scope_sum {
    const char *name;
    const char *top_reason;
    double samples;
} report_pc_scope_sum;

/* The window's scopes, all of them summed and ranked, most samples first:
 * the top max in sums, *more counting the others. Returns how many are in
 * sums (0 too when memory runs out: *more is then SIZE_MAX). */
size_t report_pc_scopes_of_window(const report_pc_scopes *scopes, int64_t pid, uint64_t window_id,
                                  int32_t device, report_pc_scope_sum *sums, size_t max,
                                  size_t *more);

/* The window's "by scope" line (nothing when it has no rows): its scopes by
 * share of total, each with its top stall reason. */
void report_pc_scopes_print(const report_pc_scopes *scopes, int64_t pid, uint64_t window_id,
                            int32_t device, uint64_t total);

/* Every row as a record of the open table. FLARE_OK or the store's status. */
int report_pc_scopes_emit(store *database, report_emit *emit);

#endif /* FLARE_CLI_REPORT_PC_SCOPES_H */
