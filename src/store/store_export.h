/*
 * store_export.h: row-by-row readers of a session database, for
 * `flare export`.
 *
 * Each reader walks one table in the order its rows were written and hands
 * every row to a callback, with names already resolved to text. They stream:
 * memory use does not grow with the number of rows, so a session of
 * millions of kernels exports in constant memory. They never write: the
 * session being exported must not change, and a READ handle could not
 * anyway. Like the other readers (store.h) they also work on a WRITE
 * handle, seeing its uncommitted batch.
 *
 * Strings in a row (names, paths) belong to SQLite and are valid only
 * during the callback; copy what must outlive it. Text is returned exactly
 * as stored: it may hold any byte except NUL, including bytes that are not
 * valid UTF-8, so a writer of JSON or CSV must escape it.
 *
 * Every reader returns 0, FLARE_ERR_INVALID_ARGUMENT for a NULL handle or
 * callback, or FLARE_ERR_STORE with a message in store_last_error() when
 * SQLite cannot read the table (a corrupt file). A callback returning
 * non-zero stops the walk early; that is not an error and the reader
 * returns 0.
 */
#ifndef FLARE_STORE_STORE_EXPORT_H
#define FLARE_STORE_STORE_EXPORT_H

#include <stdint.h>

#include "store/store.h"

/*
 * Opens one read transaction that lasts until store_export_end, so that
 * every reader called in between sees the same moment of a session that
 * other processes may still be writing. Optional: without it each reader
 * sees the database as of its own start. Inside a writer's open batch it
 * does nothing (the batch already is that transaction). Returns 0 or
 * FLARE_ERR_STORE.
 */
int store_export_begin(store *store);
/* Ends the transaction store_export_begin opened, if it opened one. */
void store_export_end(store *store);

typedef struct store_export_process_row {
    int64_t pid;
    int64_t parent_pid;
    uint64_t start_ns;
    uint64_t end_ns; /* 0 if the process never ended cleanly */
    const char *backend;
    const char *executable;
} store_export_process_row;

typedef struct store_export_device_row {
    int64_t pid;
    int device;
    const char *name;
    const char *backend;
} store_export_device_row;

typedef int (*store_export_process_callback)(const store_export_process_row *row, void *user);
typedef int (*store_export_device_callback)(const store_export_device_row *row, void *user);
/* Kernels, copies, scopes and metrics come back in the structs the writer
 * takes (store.h); name is never NULL ('' for a name that is missing). */
typedef int (*store_export_kernel_callback)(const store_kernel_row *row, void *user);
typedef int (*store_export_copy_callback)(const store_copy_row *row, void *user);
typedef int (*store_export_scope_callback)(const store_scope_row *row, void *user);
typedef int (*store_export_metric_callback)(const store_metric_row *row, void *user);

/* Processes by pid; devices by pid then device index. */
int store_export_processes(store *store, store_export_process_callback callback, void *user);
int store_export_devices(store *store, store_export_device_callback callback, void *user);

/* The high-rate tables, in the order their rows were written (no sort: a
 * sort of millions of rows would need memory or a temporary file). */
int store_export_kernels(store *store, store_export_kernel_callback callback, void *user);
int store_export_copies(store *store, store_export_copy_callback callback, void *user);
int store_export_scopes(store *store, store_export_scope_callback callback, void *user);
/* Every sample of every metric, external_correlation.* pairs included: the
 * caller decides what it wants. */
int store_export_metrics(store *store, store_export_metric_callback callback, void *user);

/* Version 8. Kernel launch, copy and memset calls on the host (table
 * api_calls), in the order written; and launch storms (table storms) by
 * start. A session of an older flare has neither table: no rows, no
 * error. */
typedef int (*store_export_api_call_callback)(const store_api_call_row *row, void *user);
typedef int (*store_export_storm_callback)(const store_storm_row *row, void *user);
int store_export_api_calls(store *store, store_export_api_call_callback callback, void *user);
int store_export_storms(store *store, store_export_storm_callback callback, void *user);

#endif /* FLARE_STORE_STORE_EXPORT_H */
