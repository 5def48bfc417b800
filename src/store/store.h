/*
 * store.h: the session database.
 *
 * Owns: one SQLite database per session (session.db in the session
 * directory), its versioned schema (docs/schema.md), the batched writer used
 * by the collector and the readers used by `flare report`. WAL mode; several
 * processes of one session may write the same database (busy timeout). The
 * store never aborts: every function returns 0 or a negative flare_status and,
 * where it takes an error buffer, fills it with a message naming the file and
 * the SQLite error. A store handle is used by one thread at a time.
 */
#ifndef FLARE_STORE_STORE_H
#define FLARE_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 16
/* The oldest version READ opens (read-only, without version 7's views). */
#define STORE_SCHEMA_VERSION_OLDEST 6
#define STORE_DATABASE_NAME         "session.db"

typedef struct store store;

typedef enum store_open_mode {
    STORE_OPEN_READ = 0,  /* existing database only; validated */
    STORE_OPEN_WRITE = 1, /* creates the file and schema if missing */
} store_open_mode;

/*
 * Opens session.db in session_dir. READ refuses a missing file, a file that
 * is not a SQLite database, and a schema_version other than
 * STORE_SCHEMA_VERSION, with a message in error (which may be NULL).
 * Statuses: FLARE_ERR_NOT_FOUND (READ: no database), FLARE_ERR_IO (WRITE:
 * session_dir missing; it is never created here), FLARE_ERR_UNSUPPORTED
 * (another schema version), FLARE_ERR_STORE (anything else SQLite refuses,
 * or not flare's database). READ never creates session.db; SQLite may add
 * its -wal/-shm files beside an existing one.
 */
int store_open(const char *session_dir, store_open_mode mode, store **out, char *error,
               size_t error_size);
/* As store_open for WRITE, but a session of STORE_SCHEMA_VERSION_OLDEST
 * is brought up to STORE_SCHEMA_VERSION first (its name tables and views
 * are added; no row changes): `flare index`. */
int store_open_upgrading(const char *session_dir, store **out, char *error, size_t error_size);
/* Once nothing writes any more (the session's end): takes the database
 * out of WAL mode, so that a finished session is one file that readers
 * open without making -wal or -shm files beside it. 0, or FLARE_ERR_STATE
 * when another connection is still open (a process of the session still
 * runs; it stays in WAL mode, which is as good, and a later writer's open
 * switches WAL back on). Never waits for other connections. */
int store_settle(store *store);
/* Rolls back a batch left open. */
void store_close(store *store);

/*
 * Batches: every put between begin and commit lands in one transaction.
 * Inside a batch, kernel, copy and scope rows are buffered in the handle
 * and written in blocks, so a put may report the failure of earlier rows
 * of its batch; from then on the batch's writes and store_commit fail with
 * FLARE_ERR_STORE until store_rollback. A failed commit leaves the batch
 * open unless SQLite already rolled it back: call store_rollback either
 * way. Outside a batch each write is its own transaction.
 */
int store_begin(store *store);
int store_commit(store *store);
/* Rolls back the open transaction, if any. */
void store_rollback(store *store);

/* Session and process rows. */
typedef struct store_session_info {
    const char *command; /* the traced command line, or the program name */
    uint64_t start_ns;   /* flare clock */
    int64_t start_unix_ns;
    const char *host;
    const char *flare_version;
} store_session_info;
/* Writes the single session row if it does not exist yet. */
int store_session_begin(store *store, const store_session_info *info);
/* FLARE_ERR_STATE when there is no session row to end. */
int store_session_end(store *store, uint64_t end_ns, int has_exit_status, int exit_status);

/* A second begin for the same pid (a process that starts a new session)
 * keeps the first start time and clears end_ns. */
int store_process_begin(store *store, int64_t pid, int64_t parent_pid, uint64_t start_ns,
                        const char *backend_name, const char *executable);
/* FLARE_ERR_STATE when the process has no row. */
int store_process_end(store *store, int64_t pid, uint64_t end_ns);
/* Records the backend a running process adopted after its row was written. */
int store_process_set_backend(store *store, int64_t pid, const char *backend_name);

int store_put_device(store *store, int64_t pid, int device, const char *name,
                     const char *backend_name);

/* Rows written by the collector. Names are interned into the names table;
 * a NULL name is stored as the empty string. */
typedef struct store_kernel_row {
    int64_t pid;
    int device;
    uint64_t stream_id;
    uint64_t correlation_id;
    const char *name;
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_memory_bytes;
    uint32_t registers_per_thread;
    uint64_t context_id;    /* CUDA context id (CUPTI); 0 on the simulated device */
    uint32_t graph_id;      /* the CUDA graph that ran it; 0 when launched on its own */
    uint64_t graph_node_id; /* its node in that graph; 0 when launched on its own */
} store_kernel_row;

/* One sample of a numeric metric (GPU gauges from NVML, host launch counts).
 * device -1 means the process rather than a device. Values are integers in
 * the unit the metric's name says (..._pct, ..._mw, ..._mhz, ..._bytes, ..._c). */
typedef struct store_metric_row {
    int64_t pid;
    int device;
    const char *name;
    uint64_t time_ns;
    int64_t value;
} store_metric_row;

typedef struct store_copy_row {
    int64_t pid;
    int device;
    uint64_t stream_id;
    uint64_t correlation_id;
    int is_memset; /* 0 copy, 1 memset */
    int copy_kind; /* backend_copy_kind */
    uint64_t bytes;
    uint64_t start_ns;
    uint64_t end_ns;
    int status;
    uint32_t graph_id; /* as in store_kernel_row */
    uint64_t graph_node_id;
} store_copy_row;

typedef struct store_scope_row {
    int64_t pid;
    int64_t thread_id;
    uint64_t instance_id;
    const char *name;
    uint32_t depth;
    uint64_t start_ns;
    uint64_t end_ns;
    int still_open; /* 1: the session ended while the scope was open; end_ns is that time */
} store_scope_row;

int store_put_kernel(store *store, const store_kernel_row *row);

/* One launch of a CUDA graph (cuGraphLaunch): its kernels, copies and
 * memsets carry its correlation id and their graph and node ids. */
typedef struct store_graph_launch_row {
    int64_t pid;
    uint64_t correlation_id;
    int64_t thread_id; /* the launching thread */
    uint64_t time_ns;  /* when it was launched, flare clock */
    uint64_t stream_id;
    uint64_t graph_exec; /* the CUgraphExec handle */
    /* The innermost scope or NVTX push range open on the launching thread;
     * 0 and NULL (stored as NULLs) for none. */
    uint64_t scope_instance_id;
    const char *scope_name;
} store_graph_launch_row;
int store_put_graph_launch(store *store, const store_graph_launch_row *row);

/* A kernel launch the GPU did not time (a SASS metrics window's quiet):
 * what the split of a window's SASS values over scopes counts instead of
 * kernel time (store_sass.h). */
typedef struct store_untimed_launch_row {
    int64_t pid;
    uint64_t correlation_id;
    int64_t thread_id; /* the launching thread */
    uint64_t time_ns;  /* when it was launched, flare clock */
    int32_t device;
    const char *name; /* the kernel's, as kernels.name_id would name it */
    /* The innermost scope or NVTX push range open on the launching thread;
     * 0 (stored as NULL) for none. */
    uint64_t scope_instance_id;
} store_untimed_launch_row;
int store_put_untimed_launch(store *store, const store_untimed_launch_row *row);

/* A kernel launch, copy or memset call as the application's thread made
 * it (table api_calls): the host side of the GPU work sharing its
 * correlation id. store_put_api_call is generated from the block table
 * (store_internal.h). */
typedef struct store_api_call_row {
    int64_t pid;
    int64_t thread_id;
    uint64_t correlation_id;
    const char *name; /* the driver entry point, "cuLaunchKernel" */
    uint64_t start_ns;
    uint64_t end_ns;
} store_api_call_row;
int store_put_api_call(store *store, const store_api_call_row *row);

/* A launch storm (table storms): from when the guard stopped timing every
 * kernel to when it timed them again; still_open when the session ended
 * during it (end_ns is then the session's end). */
typedef struct store_storm_row {
    int64_t pid;
    int device; /* -1: the process (the CUDA guard watches all its devices) */
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t untimed_launches; /* launches in it counted but not timed */
    int still_open;
} store_storm_row;
int store_put_storm(store *store, const store_storm_row *row);

/* A CUDA graph as the report groups it: one row per (graph, kernel name),
 * graphs by GPU time; the graph's totals repeat on each of its rows. */
typedef struct store_graph_row {
    int64_t pid;
    uint32_t graph_id;
    uint64_t launches;         /* distinct launches that ran its work */
    uint64_t kernels;          /* kernel executions, all launches */
    uint64_t kernel_nodes;     /* distinct kernel nodes */
    uint64_t copies;           /* copy and memset executions, all launches */
    uint64_t gpu_ns;           /* its kernels' GPU time */
    const char *launched_from; /* "range x N, ..." from graph_launches; "" when unknown */
    const char *kernel_name;
    uint64_t name_count;
    uint64_t name_gpu_ns;
} store_graph_row;
typedef int (*store_graph_callback)(const store_graph_row *row, void *user);
int store_read_graphs(store *store, store_graph_callback callback, void *user);
int store_put_copy(store *store, const store_copy_row *row);
int store_put_scope(store *store, const store_scope_row *row);
int store_put_metric(store *store, const store_metric_row *row);
/* Links a kernel/copy correlation id to a framework's own id (e.g. a PyTorch
 * op), as CUPTI reports it. */
int store_put_external_correlation(store *store, int64_t pid, uint64_t correlation_id,
                                   uint32_t external_kind, uint64_t external_id);

/* One row of the capability matrix: a feature (kernels, copies, nvtx, nvml,
 * pm_sampling, range_profiler, replay...), whether it was asked for, its
 * status ("active", "unavailable", "degraded", "off") and why. Set, not added. */
int store_set_capability(store *store, int64_t pid, const char *feature, int requested,
                         const char *status, const char *reason);

typedef struct store_capability_row {
    int64_t pid;
    const char *feature;
    int requested;
    const char *status;
    const char *reason;
} store_capability_row;
typedef int (*store_capability_callback)(const store_capability_row *row, void *user);
int store_read_capabilities(store *store, store_capability_callback callback, void *user);

typedef struct store_metric_stats {
    int device;
    const char *name;
    int64_t count;
    int64_t minimum;
    int64_t maximum;
    double mean;
} store_metric_stats;
typedef int (*store_metric_callback)(const store_metric_stats *stats, void *user);
/* Metrics grouped by (device, name). */
int store_read_metric_stats(store *store, store_metric_callback callback, void *user);

/* Sets (not adds) the drop count of one source in one process, e.g.
 * source "ring", detail "thread 1234". A NULL detail is stored as "". */
int store_set_drops(store *store, int64_t pid, const char *source, const char *detail,
                    uint64_t count);

/* A line of the tool's own log, stored as well as written to flare.log. */
int store_put_log(store *store, int64_t pid, uint64_t time_ns, const char *level,
                  const char *message);

/* ---- Readers, for `flare report`. Each returns rows through a callback;
 * a callback returning non-zero stops the walk early (not an error). ---- */

typedef struct store_session_summary {
    char command[1024];
    uint64_t start_ns;
    uint64_t end_ns; /* 0 if the session never ended (killed) */
    int64_t start_unix_ns;
    int has_exit_status;
    int exit_status;
    char host[256];
    char flare_version[32];
    int schema_version;
    int64_t process_count;
    int64_t kernel_count;
    int64_t copy_count;
    int64_t scope_count;
} store_session_summary;

int store_read_session(store *store, store_session_summary *out);

typedef struct store_duration_stats {
    const char *name;
    int64_t count;
    uint64_t total_ns;
    uint64_t mean_ns;
    uint64_t p50_ns; /* nearest-rank percentiles */
    uint64_t p99_ns;
    uint64_t max_ns;
} store_duration_stats;

typedef int (*store_duration_callback)(const store_duration_stats *stats, void *user);

/* Kernels grouped by name, by total time descending, at most limit (0: all). */
int store_read_kernel_stats(store *store, int limit, store_duration_callback callback, void *user);
/* Scopes grouped by name, by total time descending, at most limit (0: all). */
int store_read_scope_stats(store *store, int limit, store_duration_callback callback, void *user);

typedef struct store_copy_stats {
    int is_memset;
    int copy_kind;
    int64_t count;
    uint64_t bytes;
    uint64_t total_ns;
    int64_t failed;
} store_copy_stats;
typedef int (*store_copy_callback)(const store_copy_stats *stats, void *user);
int store_read_copy_stats(store *store, store_copy_callback callback, void *user);

typedef struct store_drop_row {
    int64_t pid;
    const char *source;
    const char *detail;
    uint64_t count;
} store_drop_row;
typedef int (*store_drop_callback)(const store_drop_row *row, void *user);
/* Only rows whose count is not zero. */
int store_read_drops(store *store, store_drop_callback callback, void *user);

/* What a reader should be told about how the session was read, or NULL:
 * a session in a directory this user cannot write is read as immutable,
 * without what its write-ahead log still holds (the notice says how much). */
const char *store_read_notice(const store *store);

/* Last SQLite error message of this handle (never NULL). */
const char *store_last_error(const store *store);

/* ---- Application counters (src/counters). ---- */

/* The counters row of one counter of a process: index is its place in the
 * process's registry (stable for the process's life). Set, not added. */
int store_put_counter(store *store, int64_t pid, uint32_t index, const char *name);
/* One sample: the counter's value at time_ns, relative to the start of the
 * session (uint64, stored through a cast to int64). */
int store_put_counter_sample(store *store, int64_t pid, uint32_t index, uint64_t time_ns,
                             uint64_t value);

typedef struct store_counter_row {
    int64_t pid;
    uint32_t index;
    const char *name;
    uint64_t value;   /* the last sample's value; 0 when there is none */
    int64_t samples;  /* samples stored */
    uint64_t last_ns; /* the last sample's time; 0 when there is none */
} store_counter_row;
typedef int (*store_counter_callback)(const store_counter_row *row, void *user);
/* Every counter with its final value, by name then pid. */
int store_read_counters(store *store, store_counter_callback callback, void *user);

/* ---- Deep-profiling windows (src/deepwin; store_windows.c). ---- */

/* One deep-profiling window, requested, opened (or refused) and closed.
 * Strings may be NULL (stored as NULL for the cause, "" otherwise). Fields
 * of the cause are meaningful only when has_cause is set (a rule's window);
 * opened_ns and closed_ns are 0 for a request that never opened. */
typedef struct store_window_row {
    int64_t pid;
    uint64_t id;            /* per process, from 1 */
    const char *token_kind; /* "rule", "manual", "scheduled" */
    const char *label;      /* manual label, or what scheduled it */
    int has_cause;
    uint32_t rule_id;
    const char *rule_text;
    const char *comparison;
    double threshold;
    uint64_t rate_window_ns;
    uint64_t sustained_ns;
    uint64_t first_true_ns;
    double observed_value;
    int observed_partial; /* the observed value came from a truncated window */
    uint64_t max_duration_ns;
    uint64_t max_launches; /* 0: no launch bound */
    uint64_t requested_ns;
    uint64_t opened_ns;
    uint64_t closed_ns;
    const char *close_reason; /* "duration", "launches", "manual", "session end", "refused", ... */
    uint64_t launches;        /* launches counted while open */
    const char *engine;
    const char *engine_status; /* "disarmed", "refused", "none", ... (docs/windows.md) */
    const char *engine_reason;
    uint64_t engine_samples;
} store_window_row;

int store_put_window(store *store, const store_window_row *row);
typedef int (*store_window_callback)(const store_window_row *row, void *user);
/* Every window, by requested time then pid and id. */
int store_read_windows(store *store, store_window_callback callback, void *user);

/* ---- Deep-profiling rules (src/rules; store_rules.c). ---- */

/* One rule's summary. Written when the rule reaches a terminal state and
 * again at shutdown; each write carries a larger sequence, and the row with
 * the largest sequence is the one that stands (the write replaces an older
 * one and is ignored when older). Strings may be NULL (stored as ""). */
typedef struct store_rule_row {
    int64_t pid;
    uint32_t rule_id;      /* 1-based position in FLARE_DEEP_WHEN */
    const char *text;      /* as written */
    const char *canonical; /* "" when refused */
    const char *status;    /* "refused", "exhausted", "fired", "never true", ... */
    const char *reason;
    uint64_t times_true;
    uint64_t windows_fired;
    uint64_t busy_refusals;
    uint64_t stale_readings;
    uint64_t missing_readings;
    int has_last_value;
    double last_value;
    uint64_t sequence;
} store_rule_row;

int store_put_rule(store *store, const store_rule_row *row);
typedef int (*store_rule_callback)(const store_rule_row *row, void *user);
/* Every rule's standing summary, by pid then rule id. */
int store_read_rules(store *store, store_rule_callback callback, void *user);

#endif /* FLARE_STORE_STORE_H */
