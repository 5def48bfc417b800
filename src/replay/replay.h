/*
 * replay.h: kernel replay, device-independent: the allocation inventory,
 * the per-device gate, the drains, snapshot and restore, the pass loop and
 * the tool registry (include/flare/replay.h).
 *
 * Owns: the process-wide replay state (created on first use, never freed,
 * like the thread slots, so a late callback never touches freed memory).
 * A backend reports allocations and brackets every launch, copy and memset
 * with the calls below; it supplies the device operations in
 * replay_device_ops. Nothing here ever calls a vendor library directly.
 * Ordinary launches must stay cheap: with no replay configured the gate
 * costs one relaxed atomic load.
 */
#ifndef FLARE_REPLAY_REPLAY_H
#define FLARE_REPLAY_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flare/replay.h"

#define REPLAY_DEVICE_MAX 64

struct pm_hardware_ops; /* pm/pm_engine.h */

/* One copy of a batch. */
typedef struct replay_copy {
    void *destination;
    const void *source;
    size_t bytes;
} replay_copy;

/* What the engine needs from a device. Every wait is bounded by timeout_ns
 * and answers FLARE_ERR_TIMEOUT when it expires. */
typedef struct replay_device_ops {
    const char *name;
    /* Waits until the stream's submitted work has finished. */
    int (*stream_drain)(void *stream, uint64_t timeout_ns);
    /* Waits until every stream of the device is idle. Must not hold a
     * stream-registry lock while waiting, and must survive streams being
     * destroyed meanwhile. */
    int (*device_drain)(int device, uint64_t timeout_ns);
    /* Shadow memory: on the device, or pinned host memory as the fallback. */
    int (*shadow_alloc)(int device, bool on_device, size_t bytes, void **out);
    void (*shadow_free)(int device, bool on_device, void *pointer);
    /* Copies bytes synchronously (device<->device or device<->host), bounded. */
    int (*copy)(int device, void *destination, const void *source, size_t bytes,
                uint64_t timeout_ns);
    /* Bytes of device memory free now (0 when unknown). */
    size_t (*device_memory_free)(int device);
    /* Optional: issues every copy, then waits once (bounded). On failure
     * *failed_index is the first copy known to have failed, or count when
     * the wait itself failed. NULL: the engine copies one by one. */
    int (*copy_batch)(int device, const replay_copy *copies, size_t count, uint64_t timeout_ns,
                      size_t *failed_index);
    /* The calling thread's current device (range replay starts its span
     * there), or -1. NULL: range replay is unavailable. */
    int (*current_device)(void);
    /* Optional: called when replay becomes configured (a tool registered, a
     * selection installed, a span begun in code), before that takes effect. */
    void (*on_configured)(void);
    /* Optional (range replay by PM sampling, pm/pm_replay.h): the start and
     * end, in flare's clock, of each kernel re-issued on device between
     * kernel_times_begin and kernel_times_end, in re-issue order (at most
     * kernel_count). begin: FLARE_OK, or a status with reason (then end is
     * not called). end: waits at most timeout_ns for the records, writes
     * what came (0 for a kernel whose record did not) and *found; FLARE_OK
     * when every kernel's came. NULL: PM sampling cannot time a span here. */
    int (*kernel_times_begin)(int device, size_t kernel_count, char *reason, size_t reason_size);
    int (*kernel_times_end)(int device, uint64_t *start_ns, uint64_t *end_ns, size_t kernel_count,
                            size_t *found, uint64_t timeout_ns);
    /* Optional: the PM sampling hardware a span's passes may configure
     * (pm/pm_engine.h's pm_hardware_ops over its *hardware, leased as
     * *context_id), never the deep windows' own. NULL, or NULL returned:
     * none. */
    const struct pm_hardware_ops *(*pm_hardware)(int device, void **hardware, uint64_t *context_id);
} replay_device_ops;

/* Installs the backend's operations (one backend per process). The
 * _default form installs only when none is installed yet (the session
 * offers the simulated device's; a GPU backend replaces it). */
void replay_set_device_ops(const replay_device_ops *ops);
void replay_set_device_ops_default(const replay_device_ops *ops);
/* The installed operations, or NULL (collectors that time re-issued work). */
const replay_device_ops *replay_device_operations(void);

/* ---- Configuration (from FLARE_REPLAY_* or `flare replay`) ---- */

typedef struct replay_settings {
    uint64_t drain_timeout_ns; /* drains before the snapshot (decline on expiry) */
    uint64_t pass_timeout_ns;  /* each pass's wait (abort on expiry) */
    uint64_t footprint_budget; /* bytes; a larger snapshot is declined */
    bool allow_device_shadow;  /* false: host shadows only (tests, low memory) */
    /* Ask the GPU which counters are available before building a metric
     * configuration (CUPTI's counter availability image). Off by default:
     * it costs 130-600 ms on the H200 and CUPTI documents it as needed only
     * for chips newer than the library; a configuration refused without it
     * is retried with it. */
    bool counter_availability;
    /* Collectors on different devices take turns (one collection in the
     * process at a time) instead of running at once. */
    bool serial_devices;
} replay_settings;

void replay_settings_default(replay_settings *settings);
void replay_settings_apply(const replay_settings *settings);
void replay_settings_get(replay_settings *settings);

/* ---- Allocation inventory ---- */

typedef enum replay_allocation_kind {
    REPLAY_ALLOCATION_DEVICE = 1,  /* cuMemAlloc, pitch, stream-ordered, pools */
    REPLAY_ALLOCATION_MAPPED = 2,  /* cuMemCreate + cuMemMap */
    REPLAY_ALLOCATION_MANAGED = 3, /* managed memory */
    REPLAY_ALLOCATION_GLOBAL = 4,  /* module-scope __device__ variables */
} replay_allocation_kind;

/* Records / forgets an allocation (hot-ish path: one mutex, no I/O).
 * Adding an address already present replaces it. */
void replay_inventory_add(int device, uintptr_t address, size_t bytes, replay_allocation_kind kind);
void replay_inventory_remove(uintptr_t address);
/* Memory the engine cannot see on a device (a module with __device__
 * variables it could not resolve...): replays on it are declined with
 * "untracked memory: <reason>" until cleared with NULL. */
void replay_inventory_set_untracked(int device, const char *reason);
/* The device whose inventory holds address (its base), or -1. */
int replay_inventory_device_of(uintptr_t address);
/* Tracked bytes and allocations on a device now. */
size_t replay_inventory_bytes(int device, size_t *allocation_count);

/* ---- The gate (per device) ---- */

/* Whether any replay is configured: a tool is registered or a selection is
 * set. When false, gate_enter/exit cost one relaxed load and do nothing. */
bool replay_configured(void);

/* Brackets the submission of an ordinary launch, copy or memset. Returns a
 * token to hand to replay_gate_exit (0: nothing was taken). A thread that is
 * itself running a replay loop passes straight through. */
int replay_gate_enter(int device);
void replay_gate_exit(int device, int token);

/* ---- Launches ---- */

/* A piece of a span's work as recorded at submission: a deep copy the
 * backend made (kernel arguments, host-to-device source bytes) that it can
 * submit again on the same stream. The engine calls release once at the
 * span's end. */
typedef enum replay_work_kind {
    REPLAY_WORK_KERNEL = 1,
    REPLAY_WORK_COPY = 2,
    REPLAY_WORK_MEMSET = 3,
} replay_work_kind;

typedef struct replay_range_work {
    replay_work_kind kind;
    void *stream;
    uint64_t stream_id;
    uint32_t grid[3];
    uint32_t block[3];
    int (*reissue)(void *data);
    void (*release)(void *data);
    void *data;
} replay_range_work;

/* A launch as the backend sees it at submission. */
typedef struct replay_launch_request {
    int device;
    void *stream; /* the backend's stream handle, for stream_drain */
    uint64_t stream_id;
    const char *kernel_name;
    uint32_t grid[3];
    uint32_t block[3];
    bool from_graph;       /* launched from a CUDA graph: never replayed */
    bool unsupported_kind; /* cooperative or otherwise unreplayable */
    /* Re-issues exactly this launch on its stream (passes 1..N-1). */
    int (*relaunch)(void *relaunch_context);
    void *relaunch_context;
    /* Makes a span's deep copy of this launch (NULL: launches of this
     * backend cannot be recorded, and a span that meets one is declined). */
    int (*capture)(void *relaunch_context, replay_range_work *work);
} replay_launch_request;

/* The state of one launch between begin and end; lives on the caller's stack. */
typedef struct replay_launch_state {
    int mode; /* internal: 0 untouched, 1 gate reader, 2 replaying */
    int gate_token;
    uint64_t launch_id;
    uint32_t planned;
    void *loop; /* internal */
} replay_launch_state;

/*
 * Called before the launch is submitted. Decides (tools, selection); for a
 * replay takes the device's writer gate, drains the stream then the device,
 * snapshots, and runs pass 0's enter callbacks; otherwise takes the reader
 * side like replay_gate_enter. A declined replay records its reason and the
 * launch then runs once, normally.
 */
void replay_launch_begin(const replay_launch_request *request, replay_launch_state *state);
/* Called after the launch was submitted (submit_status is what the
 * submission returned): waits for pass 0, runs the remaining passes with a
 * restore before each, and releases the gate. */
void replay_launch_end(const replay_launch_request *request, replay_launch_state *state,
                       int submit_status);

/* ---- Spans (range replay) ----
 *
 * A span is a stretch of one thread's work on one device (a training step,
 * a request) replayed as a whole: on its first run (pass 0, the program's
 * own) the device's memory is snapshotted before its first piece of work
 * and every launch, copy and memset is recorded; at its end the device is
 * restored and the recorded work re-issued once per further pass, with the
 * metric collector's automatic ranges giving per-kernel values. The device's
 * writer gate is held from the first piece of work to the last pass. A span
 * that allocates, frees, launches a graph, uses cooperative launches, copies
 * device memory back to the host or exceeds the footprint budget is
 * declined: it runs once and the reason is recorded.
 */

/* Kernels one span may hold (the collector sizes its counter data for it);
 * a span that launches more is declined. */
#define REPLAY_RANGE_KERNELS_MAX 512

/* Starts a span on the calling thread (explicit, from
 * flare_replay_range_begin, or from a matched scope). FLARE_ERR_STATE when
 * the thread already records one or runs a replay loop. */
int replay_range_begin(const char *name, uint64_t occurrence);
/* Ends the thread's span: replays it and records the results.
 * FLARE_ERR_STATE without one. */
int replay_range_end(void);
/* Whether the calling thread has a span recording (a thread-local read). */
bool replay_range_recording(void);
/* Whether the device has a span recording now: any thread's work on it is
 * part of the span (one relaxed load when no span is open anywhere). */
bool replay_range_active_on(int device);
/* Backends, for a copy or memset about to be submitted on device, with the
 * device's reader gate already held: whether the device's span records it.
 * Work of a span's own thread on another device declines that span. */
bool replay_range_claims(int device);
/* Backends: records a copy or memset (takes ownership of work->data), with
 * the reader gate held from before this call until after its submission. */
void replay_range_record(int device, const replay_range_work *work);
/* Backends: work on device that a span cannot replay (an allocation, a
 * free, a device-to-host copy) declines the span recording there. */
void replay_range_decline(int device, const char *reason);
/* Scope hooks (flare scopes, NVTX ranges): with FLARE_REPLAY_RANGE=name and
 * FLARE_REPLAY_OCCURRENCE=n, the n-th scope of that name opened on any
 * thread becomes a span, ended by its own end. Cheap when no range is
 * selected (one relaxed load). */
void replay_range_scope_enter(const char *name);
void replay_range_scope_exit(const char *name);

/* ---- Built-in metric collection ---- */

/* How one value was produced, where the collector says (a PM-sampled
 * span's values: pm/pm_replay.h). Stored in replay_value_methods. */
#define REPLAY_NOTE_TEXT_MAX 24
typedef struct replay_value_note {
    char method[REPLAY_NOTE_TEXT_MAX]; /* "pm-sampling", "kernel-activity" ("": no note) */
    char
        status[REPLAY_NOTE_TEXT_MAX]; /* "measured", "flagged", "uncovered", "below-minimum", ... */
    double error_bound;               /* in the value's unit; NaN: none known */
    uint32_t samples;                 /* PM samples that overlapped the kernel */
} replay_value_note;

/* A profiling context that collects metrics per pass (the CUDA range
 * profiler, the simulated one). Calls come from the launching thread inside
 * the pass loop. */
typedef struct replay_metric_collector {
    const char *name;
    /* Prepares collection for the launch; returns the passes it needs (>= 1)
     * or a negative status with reason. */
    int (*prepare)(const flare_replay_launch *launch, const char *const *metrics,
                   size_t metric_count, char *reason, size_t reason_size);
    int (*pass_begin)(const flare_replay_launch *launch, uint32_t pass);
    int (*pass_end)(const flare_replay_launch *launch, uint32_t pass);
    /* After the last pass: values[i] for metrics[i] (NaN when unavailable). */
    int (*finish)(const flare_replay_launch *launch, double *values, size_t metric_count,
                  char *reason, size_t reason_size);
    /* Spans (range replay): like prepare, for a span of at most max_ranges
     * kernels (NULL: prepare is used). */
    int (*prepare_span)(const flare_replay_launch *span, const char *const *metrics,
                        size_t metric_count, size_t max_ranges, char *reason, size_t reason_size);
    /* Spans (range replay): after the last pass, the values of range r (the
     * span's r-th kernel, described by ranges[r]) into
     * values[r * metric_count + m]. NULL: the collector cannot do spans. */
    int (*finish_ranges)(const flare_replay_launch *span, const flare_replay_launch *ranges,
                         size_t range_count, double *values, size_t metric_count, char *reason,
                         size_t reason_size);
    /* Called once after every prepare that returned passes, whatever became
     * of the collection (finished, failed, aborted, declined), after finish
     * when finish runs: the collector lets go of what it holds. NULL: none. */
    void (*end)(const flare_replay_launch *launch);
    /* Optional, spans: right after a successful finish_ranges, how each
     * value was produced, notes[r * metric_count + m] (zeroed before the
     * call). NULL: every value is the collector's own measurement. */
    void (*finish_notes)(const flare_replay_launch *span, size_t range_count,
                         replay_value_note *notes, size_t metric_count);
} replay_metric_collector;

/* The devices' collection turn (replay_turn.c), for collectors: with
 * replay_settings.serial_devices one collection in the process holds it at
 * a time, waiters served in arrival order. take waits at most one pass
 * timeout (then FLARE_ERR_TIMEOUT) and does nothing when *held or without
 * the setting; give does nothing unless *held. */
int replay_collection_turn_take(bool *held);
void replay_collection_turn_give(bool *held);

void replay_set_metric_collector(const replay_metric_collector *collector);
void replay_set_metric_collector_default(const replay_metric_collector *collector);

/* Called by flare_init: reads FLARE_REPLAY_* (a bad value is logged and
 * recorded in the "replay" capability row; nothing is installed) and
 * records the capability. */
void replay_session_begin(void);

/* The selection `flare replay` and FLARE_REPLAY_* set: which launches get
 * the built-in metric collection. */
typedef struct replay_selection {
    char kernel_regex[256];    /* empty: every kernel */
    uint64_t launch;           /* replay only the Nth matching launch (1-based; 0: unset) */
    uint64_t every;            /* replay every Nth matching launch (0: unset) */
    char metrics[2048];        /* comma-separated metric names */
    char set_name[64];         /* or a named set */
    char range_name[128];      /* spans: the scope / NVTX range name ("" none) */
    uint64_t occurrence;       /* spans: which occurrence (1-based; 0: the first) */
    int api_spans_only;        /* only spans marked with flare_replay_range_begin/end */
    int triggers_only;         /* no launch but the triggered ones (replay_trigger_arm_kernel) */
    int method;                /* replay_method: how spans are measured */
    uint64_t pm_interval_ns;   /* REPLAY_METHOD_PM: the sampling interval (0: default) */
    uint64_t pm_min_kernel_ns; /* REPLAY_METHOD_PM: shorter kernels get no value (0: default) */
} replay_selection;

/* ---- How spans are measured (replay_method.c) ----
 *
 * REPLAY_METHOD_PROFILER: the device's range profiler, a range per kernel
 * per pass (exact counts; about 1 ms a kernel a pass on the H200).
 * REPLAY_METHOD_PM: PM sampling (pm/pm_replay.h), one pass per sampling
 * configuration, each sample's values spread over the kernels it overlaps
 * by their times in that pass: no per-kernel cost, values within a few
 * percent for kernels of at least the minimum length (docs/replay.md). Only
 * spans (--range, --range-api) can be measured so.
 */
typedef enum replay_method {
    REPLAY_METHOD_PROFILER = 0,
    REPLAY_METHOD_PM = 1,
} replay_method;
/* Defaults from the accuracy measured on the H200 (docs/PERFORMANCE.md,
 * issue 25 item 1): at a 10 us interval every kernel of 100 us or more was
 * within 5% of the range profiler. */
#define REPLAY_PM_INTERVAL_DEFAULT_NS   10000ull
#define REPLAY_PM_MIN_KERNEL_DEFAULT_NS 100000ull
/* The names the CLI and FLARE_REPLAY_METHOD take ("profiler", "pm"); -1 for
 * another. */
int replay_method_parse(const char *text);
const char *replay_method_name(int method);
/* The installed selection's method and its PM settings (defaults filled). */
typedef struct replay_method_settings {
    replay_method method;
    uint64_t pm_interval_ns;
    uint64_t pm_min_kernel_ns;
} replay_method_settings;
void replay_method_current(replay_method_settings *settings);
/* The collector that measures spans by PM sampling (the session installs
 * pm_replay's); replay_metric_collector_current answers it while the
 * installed selection's method is REPLAY_METHOD_PM. */
void replay_set_pm_collector(const replay_metric_collector *collector);

/* Validates and installs (FLARE_ERR_INVALID_ARGUMENT with error filled:
 * nothing is installed). */
int replay_selection_apply(const replay_selection *selection, char *error, size_t error_size);

/* ---- Triggered replays (replay_trigger.c) ----
 *
 * A replay asked for while the program runs: the next launch of a kernel
 * named exactly (a deep-profiling rule's `action replay`). One at a time;
 * the first arm installs a selection that replays nothing else (unless a
 * selection of `flare replay` is installed already, whose metrics it then
 * uses), so replay stays configured for the rest of the process.
 */
#define REPLAY_TRIGGER_NAME_MAX 256
typedef enum replay_trigger_state {
    REPLAY_TRIGGER_NONE = 0,
    REPLAY_TRIGGER_ARMED,     /* waiting for the kernel's next launch */
    REPLAY_TRIGGER_TAKEN,     /* that launch is being replayed */
    REPLAY_TRIGGER_DONE,      /* its record is queued (declined or not) */
    REPLAY_TRIGGER_CANCELLED, /* cancelled while armed: nothing ran */
} replay_trigger_state;
typedef struct replay_trigger_result {
    uint64_t id;
    replay_trigger_state state;
    char kernel_name[REPLAY_TRIGGER_NAME_MAX];
    uint64_t armed_ns, taken_ns, done_ns; /* flare clock; 0 until then */
    uint64_t launch_id;                   /* DONE: the record's launch */
    uint64_t launch_index;                /* DONE: launches of that name before it */
    int declined;                         /* DONE: 1 when the launch ran once; reason says why */
    char reason[256];
} replay_trigger_result;
/* Arms a replay of kernel_name's next launch: FLARE_OK with *id;
 * FLARE_ERR_STATE while another is armed or running; INVALID_ARGUMENT for no
 * name or one too long; what replay_selection_apply answers when the first
 * arm cannot install its selection. error says why. Never blocks on a launch. */
int replay_trigger_arm_kernel(const char *kernel_name, uint64_t *id, char *error,
                              size_t error_size);
/* The same for the next occurrence of the scope or NVTX range range_name,
 * replayed as `flare replay --range` replays one; FLARE_ERR_UNSUPPORTED while
 * flare replay's own selection is installed (it would be replaced). */
int replay_trigger_arm_range(const char *range_name, uint64_t *id, char *error, size_t error_size);
/* Cancels trigger id while it is still armed (FLARE_OK); FLARE_ERR_STATE
 * once taken or finished. */
int replay_trigger_cancel(uint64_t id);
/* The trigger's state and outcome; FLARE_ERR_NOT_FOUND for an id that is
 * not the latest. */
int replay_trigger_status(uint64_t id, replay_trigger_result *result);
/* Time the process has spent in triggered replays (their records' begin to
 * end), every trigger's together: what a replay budget is charged. */
uint64_t replay_trigger_spent_ns(void);
void replay_trigger_reset_for_tests(void);

/* The most nodes a kernel regular expression may compile to. */
#define REPLAY_REGEX_COST_MAX 1024
/*
 * Refuses a kernel regular expression (POSIX extended, as the selection
 * compiles it) whose compiled form would be too large to build. glibc's
 * regcomp copies what a repetition applies to once per repetition it allows
 * ('+' twice, "{m,n}" n times), so stacked or nested repetitions multiply:
 * "a" and 30 '+', or "(((a+)+)+)" 30 deep, takes gigabytes and minutes;
 * and where the copies can match nothing ("a**" ...), the epsilon closures
 * it then computes grow with the square of the nodes ("a", 60 '*' and 8 '+':
 * 2 GB, 30 s). Counts an upper bound of the nodes without compiling: at
 * REPLAY_REGEX_COST_MAX the worst shapes found compile in a tenth of a
 * second and 16 MB. Refuses as well any repetition ('?', '*', '+', "{m,n}",
 * "{,n}") of what can match nothing ("a?+", "(a?)+", "a**", "(a?){3}"): the
 * closures of nested ones take time exponential in their nesting, far below
 * the bound ("((a)?)+" nested 9 deep: 67 s; "^((a?){1,3}){150}$": 6.7 s); and any repetition of an
 * anchor or word edge
 * ("(^a)+", "(_|\\<){2}"), around which regcomp duplicates nodes per
 * context (0.8 s with no such loop). Returns 0 when the bound is at most
 * REPLAY_REGEX_COST_MAX and neither is there, else FLARE_ERR_INVALID_ARGUMENT
 * with a message in error. Never allocates; a malformed expression is left
 * for regcomp to refuse. replay_selection_apply and `flare replay` call it before regcomp.
 */
int replay_regex_check(const char *pattern, char *error, size_t error_size);

/* Reads FLARE_REPLAY_KERNEL/LAUNCH/EVERY/METRICS/SET; 0 when none is set or
 * all are valid (and installed). */
int replay_selection_from_environment(char *error, size_t error_size);

/* The installed selection's metric names (valid until the next apply):
 * collectors prepare their configuration from it early. */
size_t replay_selection_metrics(const char *const **names);

/* The size parser shared with the CLI: "512MiB", "16GiB". 0, or -1 with
 * error naming variable and what was expected. Durations ("250ms", "10s",
 * "2min") are read with core_duration_parse (core/duration.h), from 1 ns up. */
int replay_parse_bytes(const char *variable, const char *text, uint64_t *out_bytes, char *error,
                       size_t error_size);

/* Named metric sets: NULL-terminated list of names; the metric list of a set. */
typedef struct replay_metric_set {
    const char *name;
    const char *description;
    const char *metrics; /* comma-separated */
} replay_metric_set;
const replay_metric_set *replay_metric_sets(size_t *count);
const replay_metric_set *replay_metric_set_find(const char *name);

/* ---- Results ---- */

#define REPLAY_RECORD_PASS_MAX                                                                     \
    64 /* pass timestamps kept per launch (later passes counted only)                              \
        */
#define REPLAY_RECORD_METRIC_MAX 64
#define REPLAY_METRIC_NAME_MAX   128
#define REPLAY_RECORD_QUEUE_MAX                                                                    \
    1024 /* finished records waiting for the collector; beyond: dropped, counted */

/* One selected launch, replayed or declined. Produced by the pass loop,
 * queued (bounded), taken by the collector and stored (store_replay.c). */
typedef struct replay_record {
    uint64_t launch_id;
    int device;
    uint64_t stream_id;
    char kernel_name[256];
    uint64_t launch_index;   /* launches of this name before it */
    uint32_t passes_planned; /* 0: until a continue callback stopped it */
    uint32_t passes_run;     /* pass 0 included; 1 when declined */
    int declined;            /* 1: ran once; reason says why */
    char reason[256];
    uint64_t begin_ns;        /* replay_launch_begin entered (flare clock) */
    uint64_t end_ns;          /* gate released */
    uint64_t drain_ns;        /* time in the drains before the snapshot */
    uint64_t snapshot_bytes;  /* bytes copied once into the shadows */
    int shadow_on_device;     /* 1: device shadows, 0: pinned host */
    uint64_t snapshot_ns;     /* time of the snapshot copy */
    uint64_t restore_ns;      /* total time of every restore */
    uint64_t bytes_restored;  /* total bytes written back */
    uint32_t pass_count_kept; /* min(passes_run, REPLAY_RECORD_PASS_MAX) */
    uint64_t pass_start_ns[REPLAY_RECORD_PASS_MAX];
    uint64_t pass_end_ns[REPLAY_RECORD_PASS_MAX];
    uint32_t metric_count;
    char metric_names[REPLAY_RECORD_METRIC_MAX][REPLAY_METRIC_NAME_MAX];
    double metric_values[REPLAY_RECORD_METRIC_MAX]; /* NaN: not available */
    char collector[32]; /* which metric collector ("cuda-range-profiler", "sim-metrics"), or "" */
    /* Where the collector noted how its values were produced (a PM-sampled
     * span's kernels): one note per metric. */
    bool has_notes;
    replay_value_note metric_notes[REPLAY_RECORD_METRIC_MAX];
    /* Range replay: a kernel of a span carries its span's id (0: a launch
     * replayed on its own). The span itself is one record with is_span set:
     * kernel_name is then the span's name, launch_index its occurrence
     * (1-based; 0 for a span marked with flare_replay_range_begin), and
     * span_kernels / span_copies what it recorded. */
    uint64_t span_id;
    int is_span;
    uint32_t span_kernels;
    uint32_t span_copies;
    uint64_t trigger_id; /* the triggered replay this launch is (replay_trigger.c); 0: none */
} replay_record;

/* Takes up to max finished records (oldest first) into out; returns how
 * many. The caller frees each with free(). *dropped receives records lost to
 * a full queue since the last call. */
size_t replay_records_take(replay_record **out, size_t max, uint64_t *dropped);

/* Stores every queued record (the collector calls it inside its batch) and
 * the count of records lost to a full queue. */
struct store;
void replay_write_records(struct store *database, int64_t pid);

/* Writes count records of process pid through store_write_replay_records,
 * converted to the store's rows (their strings bounded by the records'
 * arrays, their kept passes and metrics by REPLAY_RECORD_PASS_MAX and
 * REPLAY_RECORD_METRIC_MAX): all land or none do. NULL entries are skipped;
 * the records stay the caller's. Returns what the store returned, or
 * FLARE_ERR_NO_MEMORY when the rows could not be allocated (nothing
 * written, no store message). */
int replay_records_store(struct store *database, int64_t pid, replay_record *const *records,
                         size_t count);

/* Abort path for tests: replaces abort() after the message (NULL restores). */
void replay_set_abort_handler(void (*handler)(const char *message));

/* Counters for tests and the report. */
typedef struct replay_stats {
    uint64_t replays;        /* loops that ran */
    uint64_t passes;         /* passes run in all, pass 0 included */
    uint64_t declines;       /* launches selected but declined */
    uint64_t gate_waits;     /* ordinary submissions that took the reader side */
    uint64_t bytes_restored; /* in all */
} replay_stats;
void replay_stats_get(replay_stats *stats);
/* Forgets tools, selection, collector, stats and the inventory (tests). */
void replay_reset_for_tests(void);

#endif /* FLARE_REPLAY_REPLAY_H */
