/*
 * intern.c: process-lifetime string interning (runtime.h: core_intern).
 *
 * CUDA kernel names are often hundreds of bytes (C++ templates), longer than
 * the inline name of an event, and arrive on CUPTI's buffer thread. They are
 * interned once here and events carry the pointer. Bounded in entries and
 * bytes; strings are never freed, so a pointer stays valid for the process's
 * life. Takes a mutex: never call it from an application hot path.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/runtime.h"

#define INTERN_CAPACITY  65536u      /* entries; a power of two */
#define INTERN_BYTES_MAX (32u << 20) /* total string bytes */

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static const char **intern_table;
static size_t intern_count;
static size_t intern_bytes;
static _Atomic uint64_t intern_failures;

static uint64_t hash_text(const char *text)
{
    uint64_t hash = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        hash = (hash ^ *p) * 1099511628211ull;
    return hash;
}

const char *core_intern(const char *text)
{
    if (text == NULL)
        return NULL;
    size_t length = strlen(text);
    uint64_t hash = hash_text(text);
    const char *result = NULL;
    pthread_mutex_lock(&intern_lock);
    if (intern_table == NULL)
        intern_table = calloc(INTERN_CAPACITY, sizeof(*intern_table));
    if (intern_table != NULL) {
        size_t index = hash & (INTERN_CAPACITY - 1);
        for (size_t probe = 0; probe < INTERN_CAPACITY; probe++) {
            const char *entry = intern_table[index];
            if (entry == NULL) {
                /* Keep the table at most three quarters full so probes stay short. */
                if (intern_count < INTERN_CAPACITY / 4 * 3 &&
                    intern_bytes + length + 1 <= INTERN_BYTES_MAX) {
                    char *copy = malloc(length + 1);
                    if (copy != NULL) {
                        memcpy(copy, text, length + 1);
                        intern_table[index] = copy;
                        intern_count++;
                        intern_bytes += length + 1;
                        result = copy;
                    }
                }
                break;
            }
            if (strcmp(entry, text) == 0) {
                result = entry;
                break;
            }
            index = (index + 1) & (INTERN_CAPACITY - 1);
        }
    }
    pthread_mutex_unlock(&intern_lock);
    if (result == NULL)
        atomic_fetch_add_explicit(&intern_failures, 1, memory_order_relaxed);
    return result;
}

uint64_t core_intern_failures(void)
{
    return atomic_load_explicit(&intern_failures, memory_order_relaxed);
}
