/*
 * counters_api.c: flare_counter_* and flare_runtime_* (flare.h) as libflare
 * serves them, and the binding that gives the process one registry.
 *
 * On first use this copy of libflare looks for a flare runtime mapped
 * before it (counters_runtime_resolve_mapped). If it is itself the first, its own
 * registry is the process's and its table is what flare_runtime_get hands
 * out; if another copy came first (libflare.so loaded again from another
 * path), every counter call here forwards to that copy's table. Scopes are
 * not forwarded: a copy's scopes belong to the session that copy runs.
 *
 * Must never: take a lock or do more than one extra load and branch on the
 * add path; change its binding once made (handles from the chosen registry
 * are already out).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "flare/replay.h"
#include "counters/counters.h"
#include "counters/counters_session.h"
#include "counters/runtime_resolve.h"

enum { BINDING_UNRESOLVED = 0, BINDING_OWN = 1, BINDING_FORWARD = 2 };

static _Atomic int binding;
static const flare_runtime_abi *forward_table; /* set before binding is published */
static pthread_once_t binding_once = PTHREAD_ONCE_INIT;
static int binding_shared;
static char binding_description[PATH_MAX + 256];

/* flare_window_open with its options passed as plain C fields, so that the
 * ABI table carries no struct whose layout could drift. */
static int abi_window_open(uint32_t max_duration_ms, uint64_t max_launches, const char *label)
{
    flare_window_options options;
    flare_window_options_init(&options);
    options.max_duration_ms = max_duration_ms;
    options.max_launches = max_launches;
    options.label = label;
    return flare_window_open(&options);
}

/* libflare is linked -Bsymbolic, so these are this copy's own functions even
 * when another copy that defines the same names was loaded first. */
static const flare_runtime_abi own_table = {
    .abi_version = FLARE_RUNTIME_ABI_VERSION,
    .struct_size = sizeof(flare_runtime_abi),
    .counter_get = flare_counter_get,
    .counter_find = flare_counter_find,
    .counter_add = flare_counter_add,
    .counter_tick = flare_counter_tick,
    .counter_value = flare_counter_value,
    .counter_name = flare_counter_name,
    .counter_rejected = flare_counter_rejected,
    .counter_count = flare_counter_count,
    .counter_at = flare_counter_at,
    .counter_registry_rejections = flare_counter_registry_rejections,
    .scope_begin = flare_scope_begin,
    .scope_end = flare_scope_end,
    .scope_open = flare_scope_open,
    .scope_close = flare_scope_close,
    .is_active = flare_is_active,
    .version = flare_version,
    .window_open = abi_window_open,
    .window_close = flare_window_close,
    .replay_range_begin = flare_replay_range_begin,
    .replay_range_end = flare_replay_range_end,
};

void counters_log_rejection(const char *message)
{
    core_log(CORE_LOG_WARNING, "%s", message);
}

static void resolve_binding(void)
{
    int saved_errno = errno;
    int mode = BINDING_OWN;
    Dl_info self;
    const char *self_path = "this module";
    if (dladdr((const void *)&own_table, &self) != 0 && self.dli_fname != NULL &&
        self.dli_fname[0] != '\0')
        self_path = self.dli_fname;
    if (counters_runtime_sharing_disabled()) {
        binding_shared = 0;
        snprintf(binding_description, sizeof(binding_description),
                 "private registry in %s: sharing disabled by FLARE_RUNTIME_DISABLE_SHARING",
                 self_path);
    } else {
        /* Static: the resolution carries two path-sized buffers. */
        static counters_runtime_resolution found;
        int status = counters_runtime_resolve_mapped((const void *)&own_table, &found);
        if (status == FLARE_OK && found.is_self) {
            binding_shared = 1;
            snprintf(binding_description, sizeof(binding_description),
                     "own registry in %s, the first flare runtime mapped in the process",
                     found.path);
        } else if (status == FLARE_OK && found.table != NULL) {
            binding_shared = 1;
            forward_table = found.table;
            mode = BINDING_FORWARD;
            snprintf(binding_description, sizeof(binding_description),
                     "forwarding to the registry of %s, mapped before this copy (%s)", found.path,
                     self_path);
        } else {
            /* flare linked statically into an executable: nothing exports
             * flare_runtime_get, so no other module could bind to us. */
            binding_shared = 0;
            snprintf(binding_description, sizeof(binding_description),
                     "private registry in %s: it does not export %s, so other modules cannot "
                     "bind to it",
                     self_path, RUNTIME_SYMBOL);
        }
    }
    atomic_store_explicit(&binding, mode, memory_order_release);
    errno = saved_errno;
}

/* The table to forward to, or NULL when this copy's registry is the one. */
static const flare_runtime_abi *forward(void)
{
    int mode = atomic_load_explicit(&binding, memory_order_acquire);
    if (__builtin_expect(mode == BINDING_UNRESOLVED, 0)) {
        pthread_once(&binding_once, resolve_binding);
        mode = atomic_load_explicit(&binding, memory_order_acquire);
    }
    return mode == BINDING_FORWARD ? forward_table : NULL;
}

const flare_runtime_abi *counters_active_table(void)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table : &own_table;
}

/* ---- counters ---- */

FLARE_API int flare_counter_add(flare_counter *counter, int64_t n)
{
    if (__builtin_expect(atomic_load_explicit(&binding, memory_order_relaxed) == BINDING_OWN, 1))
        return counters_add(counter, n);
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_add(counter, n) : counters_add(counter, n);
}

FLARE_API int flare_counter_get(const char *name, flare_counter **counter)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_get(name, counter) : counters_get(name, counter);
}

FLARE_API int flare_counter_find(const char *name, flare_counter **counter)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_find(name, counter) : counters_find(name, counter);
}

FLARE_API int flare_counter_tick(const char *name, int64_t n)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_tick(name, n) : counters_tick(name, n);
}

FLARE_API int flare_counter_value(const flare_counter *counter, uint64_t *value)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_value(counter, value) : counters_value(counter, value);
}

FLARE_API int flare_counter_name(const flare_counter *counter, char *buffer, size_t size)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_name(counter, buffer, size)
                         : counters_name(counter, buffer, size);
}

FLARE_API int flare_counter_rejected(const flare_counter *counter, uint64_t *count)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_rejected(counter, count)
                         : counters_rejected(counter, count);
}

FLARE_API int flare_counter_count(uint32_t *count)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_count(count) : counters_count(count);
}

FLARE_API int flare_counter_at(uint32_t index, flare_counter **counter)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_at(index, counter) : counters_at(index, counter);
}

FLARE_API int flare_counter_registry_rejections(uint64_t *invalid_names, uint64_t *registry_full)
{
    const flare_runtime_abi *table = forward();
    return table != NULL ? table->counter_registry_rejections(invalid_names, registry_full)
                         : counters_registry_rejections(invalid_names, registry_full);
}

/* ---- the runtime ---- */

FLARE_API const flare_runtime_abi *flare_runtime_get(uint32_t abi_version)
{
    if (abi_version != FLARE_RUNTIME_ABI_VERSION)
        return NULL;
    return counters_active_table();
}

FLARE_API int flare_runtime_shared(void)
{
    pthread_once(&binding_once, resolve_binding);
    return binding_shared;
}

FLARE_API int flare_runtime_describe(char *buffer, size_t size)
{
    if (buffer == NULL || size == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_once(&binding_once, resolve_binding);
    size_t length = strlen(binding_description);
    if (length >= size)
        return FLARE_ERR_INVALID_ARGUMENT;
    memcpy(buffer, binding_description, length + 1);
    return FLARE_OK;
}
