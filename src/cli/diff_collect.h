/*
 * diff_collect.h: the comparison table of `flare diff`: every kernel (or
 * scope) name found in either session, with both sides' launch counts,
 * totals, means and medians, the rank test between their durations and the
 * verdict (diff_stats.h), plus a row for the total over every name.
 *
 * Names are matched by their bytes, whatever their ids in each file. It
 * reads each session's table in passes (store_diff.h): one to count the
 * launches of each name, then one per chunk of names whose durations fit
 * the memory bound, so that memory stays near that bound whatever the
 * sessions' size (only a single name with more launches than the bound is
 * held whole). It must never write to a session, and never hold rows:
 * only the durations, eight bytes each.
 */
#ifndef FLARE_CLI_DIFF_COLLECT_H
#define FLARE_CLI_DIFF_COLLECT_H

#include <stddef.h>
#include <stdint.h>

#include "cli/diff_stats.h"
#include "store/store.h"
#include "store/store_diff.h"

/* Durations held at once by default: 16 Mi launches, 128 MiB (and a
 * scratch array of the largest name's launches to sort them). */
#define DIFF_CHUNK_DURATIONS ((uint64_t)16 << 20)

typedef struct diff_row {
    char *name; /* owned; a NUL-terminated copy (a NUL byte inside a name ends it here) */
    diff_side base;
    diff_side new_side;
    diff_test test;    /* meaningful when both sides have launches */
    double change_pct; /* of the mean (of the total for the total row); NAN when a side is empty */
    diff_verdict verdict;
} diff_row;

typedef struct diff_table {
    diff_row *rows; /* by the absolute change of their total time, largest first; ties by name */
    size_t count;
    /* Every name together: counts and totals, mean of all launches, and
     * diff_total_verdict's test (median 0: not computed). name is NULL. */
    diff_row total;
    size_t verdicts[DIFF_VERDICT_COUNT]; /* rows of each verdict */
} diff_table;

/* The two sessions, open for reading, and their directories for messages. */
typedef struct diff_sessions {
    store *base;
    store *new_store;
    const char *base_label;
    const char *new_label;
} diff_sessions;

/*
 * Fills out with the comparison of table between the sessions (both open
 * for reading; a read snapshot keeps the passes consistent, and a
 * session that changed between them is an error), holding at most
 * chunk_durations durations at once (0: DIFF_CHUNK_DURATIONS). Returns 0,
 * or -1 with a message in error (the store's, naming the file, or "out of
 * memory") and out empty.
 */
int diff_collect(const diff_sessions *sessions, store_diff_table table, const diff_rule *rule,
                 uint64_t chunk_durations, diff_table *out, char *error, size_t error_size);

/* Frees what diff_collect filled; out is left empty. */
void diff_table_free(diff_table *table);

#endif /* FLARE_CLI_DIFF_COLLECT_H */
