/*
 * flare.h: the public C API of flare, a GPU profiler for CUDA applications.
 *
 * Everything an application may call lives here: session lifecycle, the clock,
 * scopes, and status codes. The header is plain C11 and also compiles as C++.
 * Functions never abort and never write to stderr unless FLARE_DEBUG is set;
 * they return 0 (FLARE_OK) or a negative flare_status.
 */
#ifndef FLARE_FLARE_H
#define FLARE_FLARE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FLARE_BUILDING_LIBRARY)
#define FLARE_API __attribute__((visibility("default")))
#else
#define FLARE_API
#endif

#define FLARE_VERSION_MAJOR  0
#define FLARE_VERSION_MINOR  1
#define FLARE_VERSION_PATCH  0
#define FLARE_VERSION_STRING "0.1.0"

/*
 * Status codes. Codes are only ever added at the end of this list, so a
 * number keeps its meaning across versions.
 */
#define FLARE_STATUS_MAP(X)                                                                        \
    X(OK, 0, "success")                                                                            \
    X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                                \
    X(ERR_NO_MEMORY, -2, "out of memory")                                                          \
    X(ERR_ALREADY_ACTIVE, -3, "a flare session is already active in this process")                 \
    X(ERR_NOT_ACTIVE, -4, "no flare session is active in this process")                            \
    X(ERR_IO, -5, "file or directory error")                                                       \
    X(ERR_STORE, -6, "session database error")                                                     \
    X(ERR_TIMEOUT, -7, "timed out")                                                                \
    X(ERR_BACKEND, -8, "device backend error")                                                     \
    X(ERR_FULL, -9, "bounded buffer full; the item was dropped and counted")                       \
    X(ERR_UNSUPPORTED, -10, "not supported")                                                       \
    X(ERR_NOT_FOUND, -11, "not found")                                                             \
    X(ERR_STATE, -12, "call not valid in the current state")

typedef enum flare_status {
#define FLARE_STATUS_ENUM_(name, value, text) FLARE_##name = value,
    FLARE_STATUS_MAP(FLARE_STATUS_ENUM_)
#undef FLARE_STATUS_ENUM_
} flare_status;

/* Human-readable text for a status ("timed out"); never NULL. */
FLARE_API const char *flare_strerror(int status);
/* The status's symbolic name without prefix ("ERR_TIMEOUT"); never NULL. */
FLARE_API const char *flare_status_name(int status);
/* The library's version string, e.g. "0.1.0". */
FLARE_API const char *flare_version(void);

/*
 * Session options. Initialise with flare_options_init(), then set what you
 * need. A zero or NULL field means "take it from the environment, else the
 * default" (see docs/api.md for the FLARE_* variables). The struct starts
 * with struct_size and only ever grows at the end.
 */
typedef struct flare_options {
    size_t struct_size;
    /* Session directory. NULL: $FLARE_SESSION_DIR, else
     * ./flare-out/<UTC time>-<pid>/ under $FLARE_OUTPUT_DIR or the cwd. */
    const char *session_dir;
    /* How often the collector writes to the database, 1..250 ms (default 100). */
    uint32_t flush_interval_ms;
    /* Events per thread ring, a power of two, 64..1048576 (default 16384). */
    uint32_t ring_capacity;
} flare_options;

FLARE_API void flare_options_init(flare_options *options);

/*
 * Starts a profiling session in this process. NULL options mean defaults
 * from the environment. Returns FLARE_OK, FLARE_ERR_ALREADY_ACTIVE (the
 * running session is left untouched), FLARE_ERR_INVALID_ARGUMENT for a bad
 * option or FLARE_* variable (nothing is started), FLARE_ERR_IO or
 * FLARE_ERR_STORE when the session directory or database cannot be made.
 */
FLARE_API int flare_init(const flare_options *options);

/*
 * Ends the session: stops the collector after it has written every event
 * still in the rings, records drop counts, closes the database. Safe to
 * call without a session (returns FLARE_ERR_NOT_ACTIVE) and twice.
 */
FLARE_API int flare_shutdown(void);

/* Non-zero while a session is active. */
FLARE_API int flare_is_active(void);

/*
 * Copies the active session's directory into buffer. Returns FLARE_OK,
 * FLARE_ERR_NOT_ACTIVE, or FLARE_ERR_INVALID_ARGUMENT if it does not fit.
 */
FLARE_API int flare_session_dir(char *buffer, size_t size);

/*
 * Asks the collector to write everything pushed so far and waits until it
 * has been committed (at most timeout_ms). Not for hot paths.
 */
FLARE_API int flare_flush(uint32_t timeout_ms);

/* flare's clock: CLOCK_MONOTONIC in nanoseconds, the time base of every record. */
FLARE_API uint64_t flare_now_ns(void);

/*
 * Scopes: named, nested intervals on the calling thread. begin pushes, end
 * pops and records (start, end, depth, thread, unique instance id). Names
 * longer than FLARE_NAME_MAX - 1 bytes are truncated. Hot path: no lock, no
 * allocation. Nesting deeper than FLARE_SCOPE_DEPTH_MAX is counted as a
 * drop. flare_scope_end returns FLARE_ERR_FULL when the thread's event
 * ring is full (the scope is closed, its record dropped and counted);
 * flare_scope_begin when no thread slot is free. Without an active session
 * both are no-ops returning FLARE_ERR_NOT_ACTIVE. flare_scope_end without
 * a matching begin returns FLARE_ERR_STATE.
 */
#define FLARE_NAME_MAX        64
#define FLARE_SCOPE_DEPTH_MAX 64
FLARE_API int flare_scope_begin(const char *name);
FLARE_API int flare_scope_end(void);

/* ---- Counters ---- */

/*
 * Application counters: numbers only the application knows (tokens produced,
 * requests served, steps), shared by every module of the process that loads
 * flare, recorded by the session and watched by rules. Register once with
 * flare_counter_get and keep the handle; flare_counter_add is the hot path
 * (no lock, no allocation, no look-up: a few nanoseconds, and it scales with
 * threads). A handle stays valid for the life of the process, across
 * flare_shutdown and flare_init: counters are never unregistered. Each
 * session records values relative to the moment it started.
 *
 * Names are 1..FLARE_COUNTER_NAME_MAX characters of A-Z a-z 0-9 . _ -
 * (exactly that set, whatever the locale). An add outside
 * 1..FLARE_COUNTER_ADD_MAX is dropped: it is counted per counter (a
 * "counter_value" drop in the session) and logged once per counter per
 * process, not on every call; a refused name likewise.
 * The bound is not overflow protection (values are 64-bit and wrap); it
 * catches arguments that are not counts, such as a negative length.
 */
typedef struct flare_counter flare_counter;

#define FLARE_COUNTER_NAME_MAX 96
#define FLARE_COUNTER_ADD_MAX  1099511627776ll /* 2^40 per call */
#define FLARE_COUNTER_CAPACITY 4096            /* counters per process */

/* Registers name (once; later calls return the same handle). Returns
 * FLARE_OK, FLARE_ERR_INVALID_ARGUMENT for a bad name or NULL counter,
 * FLARE_ERR_FULL when FLARE_COUNTER_CAPACITY counters exist. Takes a lock
 * the first time a name is seen: keep it out of hot loops. */
FLARE_API int flare_counter_get(const char *name, flare_counter **counter);
/* Looks a name up without registering it: FLARE_ERR_NOT_FOUND when it was
 * never registered (which is not the same as registered and still 0). */
FLARE_API int flare_counter_find(const char *name, flare_counter **counter);
/* Adds n (1..FLARE_COUNTER_ADD_MAX). FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT
 * for a NULL counter or a rejected n (counted, logged once). errno is
 * preserved. Works with or without an active session. */
FLARE_API int flare_counter_add(flare_counter *counter, int64_t n);
/* flare_counter_get then flare_counter_add: a name look-up per call, for
 * code outside hot loops. */
FLARE_API int flare_counter_tick(const char *name, int64_t n);
/* Everything added since the process started (modulo 2^64), exact. Reads
 * every thread's cells: cost grows with the number of threads that added. */
FLARE_API int flare_counter_value(const flare_counter *counter, uint64_t *value);
/* The counter's name; FLARE_ERR_INVALID_ARGUMENT when it does not fit. */
FLARE_API int flare_counter_name(const flare_counter *counter, char *buffer, size_t size);
/* Adds dropped by validation since the process started. */
FLARE_API int flare_counter_rejected(const flare_counter *counter, uint64_t *count);
/* Enumeration: counters registered so far, and the one at index (0-based,
 * in registration order; FLARE_ERR_NOT_FOUND past the end). */
FLARE_API int flare_counter_count(uint32_t *count);
FLARE_API int flare_counter_at(uint32_t index, flare_counter **counter);
/* Registrations refused since the process started: bad names, and names
 * that found the registry full. Either pointer may be NULL. */
FLARE_API int flare_counter_registry_rejections(uint64_t *invalid_names, uint64_t *registry_full);

/* ---- Scopes across threads ---- */

/*
 * A scope that may begin on one thread and end on another (a request handed
 * between threads, an async task). flare_scope_open records the start and
 * returns a handle; flare_scope_close, from any thread, records the scope
 * (as a scope of the closing thread, depth 0). Up to
 * FLARE_SCOPE_OPEN_MAX may be open at once; past that open returns
 * FLARE_ERR_FULL and counts a "scope_handles" drop. Closing a handle twice,
 * or a handle never opened, returns FLARE_ERR_STATE. Scopes still open when
 * the session ends are stored with still_open = 1. No allocation; the open
 * claims a table slot with one compare-and-swap.
 */
typedef uint64_t flare_scope_handle;
#define FLARE_SCOPE_OPEN_MAX 4096

/* FLARE_OK with *handle set (never 0); FLARE_ERR_NOT_ACTIVE without a
 * session, FLARE_ERR_FULL, FLARE_ERR_INVALID_ARGUMENT for a NULL handle;
 * on failure *handle is 0, which flare_scope_close refuses harmlessly. */
FLARE_API int flare_scope_open(const char *name, flare_scope_handle *handle);
/* FLARE_OK; FLARE_ERR_NOT_ACTIVE when the scope's session has ended
 * (nothing more is recorded; the session stored it as still open);
 * FLARE_ERR_STATE for 0, a handle closed already, or one never opened. */
FLARE_API int flare_scope_close(flare_scope_handle handle);

/* ---- The runtime ABI ---- */

/*
 * The application, the Python extension and the injected profiler must all
 * reach one registry, whichever loaded flare. They do so through this table,
 * which libflare.so exports through flare_runtime_get(): only C types cross
 * it, it starts with its version and size, and it only ever grows at the
 * end. Modules that do not link libflare resolve it at run time (a copy
 * already mapped first, then libflare.so beside the module, then beside
 * $CUDA_INJECTION64_PATH, then $FLARE_RUNTIME_PATH; see docs/api.md). A
 * second copy of libflare.so mapped from another path forwards its counter
 * calls to the first.
 */
#define FLARE_RUNTIME_ABI_VERSION 1

typedef struct flare_runtime_abi {
    uint32_t abi_version; /* FLARE_RUNTIME_ABI_VERSION */
    uint32_t struct_size; /* sizeof the table as the runtime built it */
    int (*counter_get)(const char *name, flare_counter **counter);
    int (*counter_find)(const char *name, flare_counter **counter);
    int (*counter_add)(flare_counter *counter, int64_t n);
    int (*counter_tick)(const char *name, int64_t n);
    int (*counter_value)(const flare_counter *counter, uint64_t *value);
    int (*counter_name)(const flare_counter *counter, char *buffer, size_t size);
    int (*counter_rejected)(const flare_counter *counter, uint64_t *count);
    int (*counter_count)(uint32_t *count);
    int (*counter_at)(uint32_t index, flare_counter **counter);
    int (*counter_registry_rejections)(uint64_t *invalid_names, uint64_t *registry_full);
    int (*scope_begin)(const char *name);
    int (*scope_end)(void);
    int (*scope_open)(const char *name, flare_scope_handle *handle);
    int (*scope_close)(flare_scope_handle handle);
    int (*is_active)(void);
    const char *(*version)(void);
    /* Deep-profiling windows (flare_window_open's options as plain fields). */
    int (*window_open)(uint32_t max_duration_ms, uint64_t max_launches, const char *label);
    int (*window_close)(void);
    /* Range replay: flare_replay_range_begin/end (flare/replay.h). */
    int (*replay_range_begin)(const char *name);
    int (*replay_range_end)(void);
} flare_runtime_abi;

/* The table for abi_version, or NULL when this runtime cannot serve it.
 * In a copy that forwards, the table of the copy it forwards to. */
FLARE_API const flare_runtime_abi *flare_runtime_get(uint32_t abi_version);
/* Non-zero when this module's counters are the process's one registry, the
 * one every other module binds to; 0 when they are private (sharing
 * disabled, or a registry other modules cannot find). */
FLARE_API int flare_runtime_shared(void);
/* How this module's registry was chosen, as one line of text (which copy,
 * found how, or why it is private). FLARE_ERR_INVALID_ARGUMENT if it does
 * not fit; PATH_MAX + 256 bytes always suffice. */
FLARE_API int flare_runtime_describe(char *buffer, size_t size);

/* ---- Deep-profiling windows ---- */

/*
 * A deep-profiling window arms the expensive collection (PM sampling on a
 * GPU; the simulated engine on the simulated device) for a short, bounded
 * time. At most one window exists per process at a time, whoever opened it:
 * the application, a --deep-after schedule or a rule. A window always has a
 * duration bound and may have a launch bound; it closes on the first bound
 * reached, on flare_window_close, or at session end, and the session's
 * windows table records why (docs/windows.md). Not for hot paths: both
 * calls take a lock and wait for the collector's next beat (every 5 ms).
 */
typedef struct flare_window_options {
    size_t struct_size;
    /* Longest the window stays open, 1..600000 ms (0: 2000). */
    uint32_t max_duration_ms;
    /* Close after this many kernel launches (0: no launch bound). */
    uint64_t max_launches;
    /* Recorded with the window (NULL: none); truncated to 63 bytes. */
    const char *label;
    /* The deep engine: "pm" (PM sampling, the default; NULL means it),
     * "pc" (PC sampling: where in its kernels warps stalled), "sass" (SASS
     * metrics: how often each instruction ran, exactly; kernels run 6-500x
     * slower while the window is open), or "auto" (the deepest whose
     * estimated cost at the process's launch rate is within the deep
     * budget, FLARE_DEEP_BUDGET, default 5%; when none is, the window is
     * refused: FLARE_ERR_UNSUPPORTED). A device without the one asked for
     * runs the window with PM sampling, and the window's engine_reason says
     * why (docs/windows.md). Anything else is FLARE_ERR_INVALID_ARGUMENT. */
    const char *engine;
} flare_window_options;

FLARE_API void flare_window_options_init(flare_window_options *options);

/*
 * Opens a window (NULL options: defaults). Returns FLARE_OK once it is open;
 * FLARE_ERR_STATE when a window is already queued or open (the log names
 * which window and who opened it; nothing changes); FLARE_ERR_NOT_ACTIVE
 * without a session; FLARE_ERR_UNSUPPORTED when the deep engine cannot be
 * armed (the reason is in the log and in the window's record, and no window
 * opens); FLARE_ERR_INVALID_ARGUMENT for a bad option; FLARE_ERR_TIMEOUT
 * when the collector did not get to the request within 2 s (it stays queued
 * and opens at the next beat).
 */
FLARE_API int flare_window_open(const flare_window_options *options);

/*
 * Closes the window that is open or queued, whoever opened it, with reason
 * "manual", and waits (at most 2 s) until it is closed. FLARE_OK,
 * FLARE_ERR_STATE when there is no window, FLARE_ERR_NOT_ACTIVE without a
 * session, FLARE_ERR_TIMEOUT when the close is still pending.
 */
FLARE_API int flare_window_close(void);

#ifdef __cplusplus
}
#endif

#endif /* FLARE_FLARE_H */
