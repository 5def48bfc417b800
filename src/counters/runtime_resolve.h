/*
 * runtime_resolve.h: finds the process's flare runtime (the one counter
 * registry) through its versioned C ABI, flare_runtime_get().
 *
 * Compiled into every module that must share the registry without linking
 * libflare: the Python extension, the CUDA injection, test plugins; and into
 * libflare itself, so that a second copy of libflare mapped from another
 * path binds to the first. Order: a copy already mapped in the process (in
 * load order, whoever loaded it and however), then libflare.so beside the
 * calling module, then beside $CUDA_INJECTION64_PATH, then
 * $FLARE_RUNTIME_PATH (a file, or a directory holding libflare.so).
 *
 * Must never: call into a runtime except through flare_runtime_get and the
 * table it returns; let a copy it binds to be unloaded (it pins each one
 * with RTLD_NODELETE, since handles into it outlive any caller); run on a
 * hot path (it scans the loaded modules).
 */
#ifndef FLARE_COUNTERS_RUNTIME_RESOLVE_H
#define FLARE_COUNTERS_RUNTIME_RESOLVE_H

#include <limits.h>
#include <stddef.h>

#include "flare/flare.h"

#define RUNTIME_SYMBOL       "flare_runtime_get"
#define RUNTIME_LIBRARY_NAME "libflare.so"

/* X(name, value, text): how a runtime was found. Add at the end only. */
#define COUNTERS_RUNTIME_SOURCE_MAP(X)                                                             \
    X(NONE, 0, "none")                                                                             \
    X(MAPPED, 1, "mapped")                                                                         \
    X(BESIDE_MODULE, 2, "beside-module")                                                           \
    X(BESIDE_INJECTION, 3, "beside-injection")                                                     \
    X(ENVIRONMENT, 4, "environment")

typedef enum counters_runtime_source {
#define COUNTERS_RUNTIME_SOURCE_ENUM_(name, value, text) COUNTERS_RUNTIME_SOURCE_##name = value,
    COUNTERS_RUNTIME_SOURCE_MAP(COUNTERS_RUNTIME_SOURCE_ENUM_)
#undef COUNTERS_RUNTIME_SOURCE_ENUM_
} counters_runtime_source;

const char *counters_runtime_source_name(int source);

typedef struct counters_runtime_resolution {
    const flare_runtime_abi *table; /* NULL: nothing usable was found */
    counters_runtime_source source;
    /* The mapped copy that comes first is the caller's own module (only a
     * runtime probing for an earlier copy of itself sees this; table is
     * NULL then, since calling itself back would recurse). */
    int is_self;
    char path[PATH_MAX]; /* the module that answered */
    char reason[1024];   /* what was tried, and why each failed */
} counters_runtime_resolution;

/* Nonzero when $FLARE_RUNTIME_DISABLE_SHARING asks every module to keep a
 * private registry (for tests that must prove a split is detected). */
int counters_runtime_sharing_disabled(void);

/*
 * Looks only at copies already mapped, in load order, and stops at the
 * first that serves FLARE_RUNTIME_ABI_VERSION or is the module holding
 * self_address. Returns FLARE_OK when one was found (table set, or is_self),
 * FLARE_ERR_NOT_FOUND otherwise; out->reason says why.
 */
int counters_runtime_resolve_mapped(const void *self_address, counters_runtime_resolution *out);

/*
 * The whole order above, for modules that are not a runtime themselves.
 * self_address is any address inside the calling module (for "beside").
 * FLARE_OK with out->table set, FLARE_ERR_NOT_FOUND (reason lists every
 * place tried), or FLARE_ERR_UNSUPPORTED when sharing is disabled.
 */
int counters_runtime_resolve(const void *self_address, counters_runtime_resolution *out);

/* Checks a table's version, size and entries; FLARE_OK or FLARE_ERR_UNSUPPORTED. */
int counters_runtime_check_table(const flare_runtime_abi *table, char *reason, size_t reason_size);

#endif /* FLARE_COUNTERS_RUNTIME_RESOLVE_H */
