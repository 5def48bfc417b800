/*
 * replay_inventory.c: every device allocation the program made, by device,
 * so a replay can snapshot and restore all memory a kernel may touch.
 *
 * Backends report allocations and frees from their allocation hooks; the
 * pass loop copies a device's list once per replay. It must never be wrong
 * silently: memory it cannot see (a module's __device__ variables it could
 * not resolve) is recorded as an "untracked" reason that declines replays
 * on that device. One mutex; frees search linearly, which is fine for the
 * hundreds of live allocations real programs keep (caching allocators hold
 * few large segments).
 */
#include "replay/replay_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct device_inventory {
    replay_allocation *allocations;
    size_t count;
    size_t capacity;
    size_t bytes;
    char untracked_reason[256];
} device_inventory;

static pthread_mutex_t inventory_lock = PTHREAD_MUTEX_INITIALIZER;
static device_inventory inventories[REPLAY_DEVICE_MAX];
/* Allocations the inventory could not record (out of memory): each one
 * makes its device untracked, so it is never silently missing. */
static uint64_t inventory_lost;

static bool device_in_range(int device)
{
    return device >= 0 && device < REPLAY_DEVICE_MAX;
}

/* Removes address from whichever device holds it; lock held. */
static bool remove_locked(uintptr_t address)
{
    for (int device = 0; device < REPLAY_DEVICE_MAX; device++) {
        device_inventory *inventory = &inventories[device];
        for (size_t index = 0; index < inventory->count; index++) {
            if (inventory->allocations[index].address == address) {
                inventory->bytes -= inventory->allocations[index].bytes;
                inventory->allocations[index] = inventory->allocations[inventory->count - 1];
                inventory->count--;
                return true;
            }
        }
    }
    return false;
}

void replay_inventory_add(int device, uintptr_t address, size_t bytes, replay_allocation_kind kind)
{
    if (!device_in_range(device) || address == 0 || bytes == 0) {
        return;
    }
    pthread_mutex_lock(&inventory_lock);
    remove_locked(address);
    device_inventory *inventory = &inventories[device];
    if (inventory->count == inventory->capacity) {
        size_t capacity = inventory->capacity != 0 ? inventory->capacity * 2 : 64;
        replay_allocation *grown =
            realloc(inventory->allocations, capacity * sizeof *inventory->allocations);
        if (grown == NULL) {
            inventory_lost++;
            snprintf(inventory->untracked_reason, sizeof inventory->untracked_reason,
                     "an allocation of %zu bytes could not be recorded (out of memory)", bytes);
            pthread_mutex_unlock(&inventory_lock);
            return;
        }
        inventory->allocations = grown;
        inventory->capacity = capacity;
    }
    inventory->allocations[inventory->count++] =
        (replay_allocation){.address = address, .bytes = bytes, .kind = kind};
    inventory->bytes += bytes;
    pthread_mutex_unlock(&inventory_lock);
}

void replay_inventory_remove(uintptr_t address)
{
    if (address == 0) {
        return;
    }
    pthread_mutex_lock(&inventory_lock);
    remove_locked(address);
    pthread_mutex_unlock(&inventory_lock);
}

void replay_inventory_set_untracked(int device, const char *reason)
{
    if (!device_in_range(device)) {
        return;
    }
    pthread_mutex_lock(&inventory_lock);
    snprintf(inventories[device].untracked_reason, sizeof inventories[device].untracked_reason,
             "%s", reason != NULL ? reason : "");
    pthread_mutex_unlock(&inventory_lock);
}

int replay_inventory_device_of(uintptr_t address)
{
    int found = -1;
    pthread_mutex_lock(&inventory_lock);
    for (int device = 0; device < REPLAY_DEVICE_MAX && found < 0; device++) {
        for (size_t index = 0; index < inventories[device].count; index++) {
            if (inventories[device].allocations[index].address == address) {
                found = device;
                break;
            }
        }
    }
    pthread_mutex_unlock(&inventory_lock);
    return found;
}

size_t replay_inventory_bytes(int device, size_t *allocation_count)
{
    size_t bytes = 0;
    size_t count = 0;
    if (device_in_range(device)) {
        pthread_mutex_lock(&inventory_lock);
        bytes = inventories[device].bytes;
        count = inventories[device].count;
        pthread_mutex_unlock(&inventory_lock);
    }
    if (allocation_count != NULL) {
        *allocation_count = count;
    }
    return bytes;
}

long replay_inventory_copy(int device, replay_allocation **out, char *untracked_reason,
                           size_t untracked_reason_size)
{
    *out = NULL;
    if (untracked_reason_size > 0) {
        untracked_reason[0] = '\0';
    }
    if (!device_in_range(device)) {
        return 0;
    }
    pthread_mutex_lock(&inventory_lock);
    device_inventory *inventory = &inventories[device];
    if (untracked_reason_size > 0) {
        snprintf(untracked_reason, untracked_reason_size, "%s", inventory->untracked_reason);
    }
    long count = (long)inventory->count;
    if (count > 0) {
        *out = malloc((size_t)count * sizeof **out);
        if (*out == NULL) {
            pthread_mutex_unlock(&inventory_lock);
            return -1;
        }
        memcpy(*out, inventory->allocations, (size_t)count * sizeof **out);
    }
    pthread_mutex_unlock(&inventory_lock);
    return count;
}

void replay_inventory_reset_for_tests(void)
{
    pthread_mutex_lock(&inventory_lock);
    for (int device = 0; device < REPLAY_DEVICE_MAX; device++) {
        free(inventories[device].allocations);
        memset(&inventories[device], 0, sizeof inventories[device]);
    }
    inventory_lost = 0;
    pthread_mutex_unlock(&inventory_lock);
}
