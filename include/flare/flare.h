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
 * drop. Without an active session both are no-ops returning
 * FLARE_ERR_NOT_ACTIVE. flare_scope_end without a matching begin returns
 * FLARE_ERR_STATE.
 */
#define FLARE_NAME_MAX        64
#define FLARE_SCOPE_DEPTH_MAX 64
FLARE_API int flare_scope_begin(const char *name);
FLARE_API int flare_scope_end(void);

#ifdef __cplusplus
}
#endif

#endif /* FLARE_FLARE_H */
