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

/* ---- Readers for the complete trace (store_export_flare.c) ----
 *
 * What `flare export --format perfetto` reads beyond the tables above.
 * Same contract: streaming, read-only, 0 / FLARE_ERR_INVALID_ARGUMENT /
 * FLARE_ERR_STORE, a callback's non-zero stops the walk without error. */
#include "store/store_pm.h"
#include "store/store_replay.h"

/* The API call (api_calls row) that made a kernel or a copy: the one with
 * its pid and correlation id. has_call is 0 when there is none (a session
 * before version 8, a call the tracer did not record, a graph's work). */
typedef struct store_export_call_link {
    int has_call;
    int64_t thread_id; /* the calling thread */
    uint64_t start_ns; /* when the call began */
} store_export_call_link;
typedef int (*store_export_linked_kernel_callback)(const store_kernel_row *row,
                                                   const store_export_call_link *call, void *user);
typedef int (*store_export_linked_copy_callback)(const store_copy_row *row,
                                                 const store_export_call_link *call, void *user);
/* Kernels (copies and memsets) in the order written, as
 * store_export_kernels (store_export_copies), each with its call. Every
 * row comes once, even when api_calls holds its correlation id twice. The
 * join needs a temporary index over api_calls, which SQLite builds in its
 * temporary store (memory up to its cache, then a temporary file). */
int store_export_kernels_linked(store *store, store_export_linked_kernel_callback callback,
                                void *user);
int store_export_copies_linked(store *store, store_export_linked_copy_callback callback,
                               void *user);

/* One sample of an application counter (counter_samples), with the
 * counter's name ('' when its counters row is missing). */
typedef struct store_export_counter_sample_row {
    int64_t pid;
    uint32_t index;
    const char *name;
    uint64_t time_ns;
    uint64_t value;
} store_export_counter_sample_row;
typedef int (*store_export_counter_sample_callback)(const store_export_counter_sample_row *row,
                                                    void *user);
/* Every counter sample, in the order written. */
int store_export_counter_samples(store *store, store_export_counter_sample_callback callback,
                                 void *user);

/* Every PM sample row (one per sample and metric), in the order written,
 * which is each window's samples in order; value is NaN where it is NULL. */
typedef int (*store_export_pm_sample_callback)(const store_pm_row *row, void *user);
int store_export_pm_samples(store *store, store_export_pm_sample_callback callback, void *user);

/* A window that has PM samples but no windows row: it was still open when
 * its process ended without closing it (a crash, a kill), so its row was
 * never written. Its extent is that of its samples. */
typedef struct store_export_unrecorded_window_row {
    int64_t pid;
    uint64_t window_id;
    uint64_t first_ns; /* the first sample's start */
    uint64_t last_ns;  /* the last sample's end */
    uint64_t samples;
} store_export_unrecorded_window_row;
typedef int (*store_export_unrecorded_window_callback)(
    const store_export_unrecorded_window_row *row, void *user);
/* By pid and window id. */
int store_export_unrecorded_windows(store *store, store_export_unrecorded_window_callback callback,
                                    void *user);

/* The processes that had a launch storm (a storms row, or a storm_guard
 * drop that is not 0), by pid: their kernel rows lack the launches the
 * storm left untimed. */
typedef int (*store_export_storm_process_callback)(int64_t pid, void *user);
int store_export_storm_processes(store *store, store_export_storm_process_callback callback,
                                 void *user);

/* Where a replay re-ran work on a device: from the end of its pass 0 to
 * its end. The device's gate holds the program's own work meanwhile, so
 * every kernel, copy and memset of that process and device that began in
 * (first_ns, last_ns] is flare's: a restore, or a pass after the first,
 * recorded as work of its own. One row per replayed launch or span that
 * ran more than one pass, by pid, device and time. */
typedef struct store_export_replay_window_row {
    int64_t pid;
    int device;
    uint64_t first_ns;
    uint64_t last_ns;
} store_export_replay_window_row;
typedef int (*store_export_replay_window_callback)(const store_export_replay_window_row *row,
                                                   void *user);
int store_export_replay_windows(store *store, store_export_replay_window_callback callback,
                                void *user);

/* A replayed (or declined) launch matched to its kernel row: the
 * launch_index-th kernel (from 0) of its name in its process, counted in
 * correlation-id order, CUDA graphs' kernels and the re-runs of replays
 * (store_export_replay_windows) left out. A launch whose
 * kernel row does not exist has no row here. Only the counting is done
 * here; whether the count can be trusted (a launch storm leaves launches
 * without rows) is the caller's to decide. By pid and launch id. */
typedef struct store_export_replay_match_row {
    int64_t pid;
    uint64_t launch_id;
    uint64_t correlation_id;
} store_export_replay_match_row;
typedef int (*store_export_replay_match_callback)(const store_export_replay_match_row *row,
                                                  void *user);
int store_export_replay_matches(store *store, store_export_replay_match_callback callback,
                                void *user);

/* One replay_launches row (no row: no call), with passes_kept and
 * pass_mean_ns filled and no metrics (metric_count 0; read them with
 * store_export_replay_metrics). */
typedef int (*store_export_replay_launch_callback)(const store_replay_launch_row *row, void *user);
int store_export_replay_launch(store *store, int64_t pid, uint64_t launch_id,
                               store_export_replay_launch_callback callback, void *user);
/* The metric values of one launch, in the order asked for, with how each
 * was produced where the session notes it (replay_value_methods, schema
 * 16: a PM-sampled span's kernels). */
typedef struct store_export_replay_metric_row {
    const char *metric;
    int has_value; /* 0: the device could not provide it (NULL) */
    double value;
    const char *method; /* "pm-sampling", "kernel-activity"; "": no note (the collector's own) */
    const char *status; /* "measured", "flagged", "below-minimum", ...; "": no note */
    double error_bound; /* in the value's unit; NaN: none known */
} store_export_replay_metric_row;
typedef int (*store_export_replay_metric_callback)(const store_export_replay_metric_row *row,
                                                   void *user);
int store_export_replay_metrics(store *store, int64_t pid, uint64_t launch_id,
                                store_export_replay_metric_callback callback, void *user);
/* Whether any replayed value of the session has a note on how it was
 * produced: *noted 1 or 0 (0 too for a session older than schema 16).
 * Returns 0, or a status with the error recorded. */
int store_export_replay_noted(store *store, int *noted);

#endif /* FLARE_STORE_STORE_EXPORT_H */
