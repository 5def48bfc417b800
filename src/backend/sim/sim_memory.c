/*
 * sim_memory.c: host-backed "device" memory and the registry of live
 * allocations, which tells copies which side is device memory and rejects
 * frees of pointers the simulated device never handed out.
 *
 * It must never free memory it did not allocate, nor hold its lock while
 * calling out of this file.
 */
#include "backend/sim/sim_internal.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct sim_allocation {
    char *base;
    size_t bytes;
} sim_allocation;

static pthread_mutex_t allocations_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_allocation *allocations;
static size_t allocation_count;
static size_t allocation_capacity;

int sim_memory_alloc(int device, size_t bytes, void **out)
{
    if (out == NULL || bytes == 0 || !sim_device_valid(device)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    char *base = calloc(1, bytes);
    if (base == NULL) {
        return FLARE_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&allocations_lock);
    if (allocation_count == allocation_capacity) {
        size_t capacity = allocation_capacity == 0 ? 64 : allocation_capacity * 2;
        sim_allocation *grown = realloc(allocations, capacity * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&allocations_lock);
            free(base);
            return FLARE_ERR_NO_MEMORY;
        }
        allocations = grown;
        allocation_capacity = capacity;
    }
    allocations[allocation_count++] = (sim_allocation){.base = base, .bytes = bytes};
    pthread_mutex_unlock(&allocations_lock);
    *out = base;
    return FLARE_OK;
}

int sim_memory_free(void *pointer)
{
    /* Like free() and cudaFree(), releasing nothing is not an error. */
    if (pointer == NULL) {
        return FLARE_OK;
    }
    pthread_mutex_lock(&allocations_lock);
    for (size_t index = 0; index < allocation_count; index++) {
        if (allocations[index].base == pointer) {
            allocations[index] = allocations[allocation_count - 1];
            allocation_count--;
            pthread_mutex_unlock(&allocations_lock);
            free(pointer);
            return FLARE_OK;
        }
    }
    pthread_mutex_unlock(&allocations_lock);
    return FLARE_ERR_INVALID_ARGUMENT;
}

bool sim_memory_lookup(const void *pointer, size_t *bytes_after)
{
    if (pointer == NULL) {
        return false;
    }
    /* Compare as integers: relational operators between pointers into
     * different objects are undefined in C. */
    uintptr_t address = (uintptr_t)pointer;
    bool found = false;
    pthread_mutex_lock(&allocations_lock);
    for (size_t index = 0; index < allocation_count; index++) {
        uintptr_t base = (uintptr_t)allocations[index].base;
        if (address >= base && address - base < allocations[index].bytes) {
            if (bytes_after != NULL) {
                *bytes_after = allocations[index].bytes - (address - base);
            }
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&allocations_lock);
    return found;
}
