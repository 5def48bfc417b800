/*
 * store_diff.h: the readers behind `flare diff`: a session's names and the
 * duration of every finished kernel or scope, by name id, in one pass over
 * the table each.
 *
 * The comparison itself (grouping by name across two sessions, sorting,
 * the statistics) belongs to the command (src/cli/diff_*.c); the store only
 * streams rows. These readers must never sort or collect a high-rate table
 * (a session holds millions of kernels: memory must not grow with its
 * rows), never write (a READ handle cannot, and a session that is compared
 * must not change), and never include anything above the store.
 *
 * Strings handed to a callback belong to SQLite and are valid only during
 * the call. Every reader returns 0 (also when the callback stopped the walk
 * by returning non-zero), FLARE_ERR_INVALID_ARGUMENT for a NULL handle or
 * callback or an unknown table, or FLARE_ERR_STORE with a message naming
 * the file in store_last_error() when SQLite cannot read the rows (a
 * corrupt or truncated database), or a negative status the callback
 * returned (it records its own message).
 */
#ifndef FLARE_STORE_STORE_DIFF_H
#define FLARE_STORE_STORE_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Which table's durations: kernels, or scopes (flare scopes and NVTX
 * ranges) that finished: a scope the session ended inside (still_open)
 * has no real end, so it is left out. */
typedef enum store_diff_table {
    STORE_DIFF_KERNELS = 0,
    STORE_DIFF_SCOPES = 1,
} store_diff_table;

/* One row of names: its id and its bytes exactly as stored (length bytes,
 * not NUL-terminated; a NULL name is 0 bytes). */
typedef int (*store_diff_name_callback)(int64_t id, const char *name, size_t length, void *user);

/* Every row of the names table, in no particular order. */
int store_diff_walk_names(store *store, store_diff_name_callback callback, void *user);

/* One finished kernel or scope: its name id (which may have no names row
 * in a damaged file) and its duration, end - start, 0 when the end does
 * not follow the start (as `flare report` counts it). */
typedef int (*store_diff_duration_callback)(int64_t name_id, uint64_t duration_ns, void *user);

/* Every row of table, in the order it was written (no sort). */
int store_diff_walk_durations(store *store, store_diff_table table,
                              store_diff_duration_callback callback, void *user);

#endif /* FLARE_STORE_STORE_DIFF_H */
