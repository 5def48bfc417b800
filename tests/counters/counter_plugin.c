/*
 * counter_plugin.c: a plugin module for test_cross_module. It does not link
 * libflare: like the Python extension or the CUDA injection, it finds the
 * process's runtime at run time (counters_runtime_resolve) and ticks counters through
 * the ABI table, falling back to a private registry of its own when no
 * runtime can be found or sharing is disabled. Test-only.
 */
#include <stdio.h>

#include "counters/counters.h"
#include "counters/runtime_resolve.h"

#define PLUGIN_API __attribute__((visibility("default")))

/* The plugin's interface, found by the test program with dlsym. */
PLUGIN_API int plugin_bind(char *description, size_t size);
PLUGIN_API int plugin_tick(const char *name, int64_t n);
PLUGIN_API int plugin_value(const char *name, uint64_t *value);

static counters_runtime_resolution resolution;
static const flare_runtime_abi *table;
static int shared;

/* The private fallback's table: the registry compiled into this plugin. */
static const flare_runtime_abi private_table = {
    .abi_version = FLARE_RUNTIME_ABI_VERSION,
    .struct_size = sizeof(flare_runtime_abi),
    .counter_get = counters_get,
    .counter_find = counters_find,
    .counter_add = counters_add_slow,
    .counter_tick = counters_tick,
    .counter_value = counters_value,
};

void counters_log_rejection(const char *message)
{
    (void)message;
}

/* Binds to the runtime; 1 when the registry is shared, 0 when private. */
PLUGIN_API int plugin_bind(char *description, size_t size)
{
    if (counters_runtime_resolve((const void *)&plugin_bind, &resolution) == FLARE_OK) {
        table = resolution.table;
        shared = 1;
        snprintf(description, size, "shared: %s %s",
                 counters_runtime_source_name(resolution.source), resolution.path);
    } else {
        table = &private_table;
        shared = 0;
        snprintf(description, size, "private: %s", resolution.reason);
    }
    return shared;
}

PLUGIN_API int plugin_tick(const char *name, int64_t n)
{
    flare_counter *counter;
    int status = table->counter_get(name, &counter);
    if (status != FLARE_OK)
        return status;
    return table->counter_add(counter, n);
}

PLUGIN_API int plugin_value(const char *name, uint64_t *value)
{
    flare_counter *counter;
    int status = table->counter_find(name, &counter);
    if (status != FLARE_OK)
        return status;
    return table->counter_value(counter, value);
}
