/*
 * sim_kernels.c: the simulated device's kernel registry, mapping names to C
 * functions and stable ids.
 *
 * It must never move or rewrite a published entry: completion records carry
 * the name pointer and workers read entries without a lock.
 */
#include "backend/sim/sim_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct sim_kernel_entry {
    char name[FLARE_NAME_MAX];
    flare_sim_kernel_fn function;
} sim_kernel_entry;

static sim_kernel_entry kernel_entries[SIM_KERNEL_MAX];
/* Published with release order after an entry is fully written, so a reader
 * that sees the count also sees the entry. */
static atomic_int kernel_count;
/* Serialises writers only, so a name is never registered twice. */
static pthread_mutex_t kernel_register_lock = PTHREAD_MUTEX_INITIALIZER;

static const sim_kernel_entry *kernel_entry(int kernel_id)
{
    int count = atomic_load_explicit(&kernel_count, memory_order_acquire);
    /* Ids start at 1 so a zero-initialised launch request is caught. */
    if (kernel_id < 1 || kernel_id > count) {
        return NULL;
    }
    return &kernel_entries[kernel_id - 1];
}

int sim_kernel_register(const char *name, flare_sim_kernel_fn function, int *kernel_id)
{
    if (name == NULL || name[0] == '\0' || function == NULL || kernel_id == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    char truncated[FLARE_NAME_MAX];
    size_t length = strnlen(name, FLARE_NAME_MAX - 1);
    memcpy(truncated, name, length);
    truncated[length] = '\0';

    pthread_mutex_lock(&kernel_register_lock);
    int count = atomic_load_explicit(&kernel_count, memory_order_relaxed);
    /* An existing name wins even when the registry is full, and keeps its
     * first function: entries are immutable once readers may see them. */
    for (int index = 0; index < count; index++) {
        if (strcmp(kernel_entries[index].name, truncated) == 0) {
            pthread_mutex_unlock(&kernel_register_lock);
            *kernel_id = index + 1;
            return FLARE_OK;
        }
    }
    if (count == SIM_KERNEL_MAX) {
        pthread_mutex_unlock(&kernel_register_lock);
        return FLARE_ERR_FULL;
    }
    memcpy(kernel_entries[count].name, truncated, length + 1);
    kernel_entries[count].function = function;
    atomic_store_explicit(&kernel_count, count + 1, memory_order_release);
    pthread_mutex_unlock(&kernel_register_lock);
    *kernel_id = count + 1;
    return FLARE_OK;
}

const char *sim_kernel_name(int kernel_id)
{
    const sim_kernel_entry *entry = kernel_entry(kernel_id);
    return entry != NULL ? entry->name : NULL;
}

flare_sim_kernel_fn sim_kernel_function(int kernel_id)
{
    const sim_kernel_entry *entry = kernel_entry(kernel_id);
    return entry != NULL ? entry->function : NULL;
}
