/*
 * registry.c: the counter registry (counters.h): names, slots, per-thread
 * cells, exact reads.
 *
 * Registration and a thread's first add take the registry lock; neither is
 * a hot path. Lookups read the name index without a lock: an index entry is
 * published (release) only after its slot is complete, and entries are
 * never removed. Must never free a slot or a cell block, and never touch
 * errno where the caller could see it.
 */
#include "counters/counters.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Twice the capacity, so a probe sequence stays short. A power of two. */
#define COUNTERS_INDEX_SIZE (2 * FLARE_COUNTER_CAPACITY)

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static flare_counter slots[FLARE_COUNTER_CAPACITY];
static _Atomic uint32_t slot_count;
/* Slot index + 1 per bucket; 0 is empty. */
static _Atomic uint32_t name_index[COUNTERS_INDEX_SIZE];
static _Atomic uint64_t invalid_names;
static _Atomic uint64_t registry_full;
static _Atomic int invalid_name_logged;
static _Atomic int registry_full_logged;

_Thread_local counters_cell_block *counters_thread_cells COUNTERS_TLS_MODEL;
/* Set when the thread's block has been handed back at exit: adds made
 * later in the thread's teardown go to the shared atomic instead of
 * claiming a block nobody would ever hand back. */
static _Thread_local int thread_cells_released;
static counters_cell_block *_Atomic cell_blocks[COUNTERS_MAX_CELL_BLOCKS];
static _Atomic uint32_t cell_block_count;
static counters_cell_block *free_cell_blocks; /* guarded by registry_lock */
static pthread_once_t cell_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t cell_key;
static int cell_key_ready;

/* ---- names ---- */

static int is_name_character(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int counters_name_check(const char *name, char *reason, size_t reason_size)
{
    char unused[8];
    if (reason == NULL || reason_size == 0) {
        reason = unused;
        reason_size = sizeof(unused);
    }
    if (name == NULL) {
        snprintf(reason, reason_size, "the name is NULL");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    size_t length = strnlen(name, FLARE_COUNTER_NAME_MAX + 1);
    if (length == 0) {
        snprintf(reason, reason_size, "the name is empty");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (length > FLARE_COUNTER_NAME_MAX) {
        snprintf(reason, reason_size, "the name is longer than %d characters",
                 FLARE_COUNTER_NAME_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < length; i++) {
        if (!is_name_character((unsigned char)name[i])) {
            snprintf(reason, reason_size,
                     "byte 0x%02x at offset %zu is not one of A-Z a-z 0-9 . _ -",
                     (unsigned)(unsigned char)name[i], i);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
    }
    reason[0] = '\0';
    return FLARE_OK;
}

/* A printable, bounded copy of a name that may be anything, for a log line. */
static void quote_name(char *buffer, size_t size, const char *name)
{
    if (name == NULL) {
        snprintf(buffer, size, "(NULL)");
        return;
    }
    enum { SHOWN = 40 };
    size_t out = 0;
    size_t i = 0;
    for (; i < SHOWN && name[i] != '\0' && out + 2 < size; i++)
        buffer[out++] = (name[i] >= 0x20 && name[i] < 0x7f) ? name[i] : '?';
    buffer[out] = '\0';
    if (name[i] != '\0' && out + 4 < size)
        snprintf(buffer + out, size - out, "...");
}

static uint32_t name_hash(const char *name)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (; *name != '\0'; name++)
        hash = (hash ^ (unsigned char)*name) * 16777619u;
    return hash;
}

/* Lock-free: an index entry appears only after its slot is complete. */
static flare_counter *lookup(const char *name, uint32_t hash)
{
    for (uint32_t probe = 0; probe < COUNTERS_INDEX_SIZE; probe++) {
        uint32_t bucket = (hash + probe) & (COUNTERS_INDEX_SIZE - 1);
        uint32_t entry = atomic_load_explicit(&name_index[bucket], memory_order_acquire);
        if (entry == 0)
            return NULL;
        flare_counter *counter = &slots[entry - 1];
        if (strcmp(counter->name, name) == 0)
            return counter;
    }
    return NULL;
}

static void log_once(_Atomic int *flag, const char *message)
{
    if (atomic_exchange_explicit(flag, 1, memory_order_relaxed) == 0)
        counters_log_rejection(message);
}

int counters_find(const char *name, flare_counter **out)
{
    if (out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (counters_name_check(name, NULL, 0) != FLARE_OK)
        return FLARE_ERR_INVALID_ARGUMENT;
    flare_counter *counter = lookup(name, name_hash(name));
    if (counter == NULL)
        return FLARE_ERR_NOT_FOUND;
    *out = counter;
    return FLARE_OK;
}

int counters_get(const char *name, flare_counter **out)
{
    if (out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    int saved_errno = errno;
    char reason[96];
    if (counters_name_check(name, reason, sizeof(reason)) != FLARE_OK) {
        atomic_fetch_add_explicit(&invalid_names, 1, memory_order_relaxed);
        if (atomic_load_explicit(&invalid_name_logged, memory_order_relaxed) == 0) {
            char shown[64], message[384];
            quote_name(shown, sizeof(shown), name);
            snprintf(message, sizeof(message),
                     "counter name '%s' rejected: %s (names are 1-%d characters of A-Z a-z 0-9 "
                     ". _ -); later rejected names are counted, not logged",
                     shown, reason, FLARE_COUNTER_NAME_MAX);
            log_once(&invalid_name_logged, message);
        }
        errno = saved_errno;
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    uint32_t hash = name_hash(name);
    flare_counter *counter = lookup(name, hash);
    if (counter != NULL) {
        *out = counter;
        return FLARE_OK;
    }

    int status = FLARE_OK;
    pthread_mutex_lock(&registry_lock);
    counter = lookup(name, hash); /* another thread may have won the race */
    if (counter == NULL) {
        uint32_t index = atomic_load_explicit(&slot_count, memory_order_relaxed);
        if (index >= FLARE_COUNTER_CAPACITY) {
            status = FLARE_ERR_FULL;
        } else {
            counter = &slots[index];
            counter->index = index;
            memcpy(counter->name, name, strlen(name) + 1);
            uint32_t bucket = hash & (COUNTERS_INDEX_SIZE - 1);
            while (atomic_load_explicit(&name_index[bucket], memory_order_relaxed) != 0)
                bucket = (bucket + 1) & (COUNTERS_INDEX_SIZE - 1);
            atomic_store_explicit(&name_index[bucket], index + 1, memory_order_release);
            atomic_store_explicit(&slot_count, index + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (status == FLARE_ERR_FULL) {
        atomic_fetch_add_explicit(&registry_full, 1, memory_order_relaxed);
        if (atomic_load_explicit(&registry_full_logged, memory_order_relaxed) == 0) {
            char message[320];
            snprintf(message, sizeof(message),
                     "counter '%.*s' not registered: the registry is full (%d counters); later "
                     "refusals are counted, not logged",
                     FLARE_COUNTER_NAME_MAX, name, FLARE_COUNTER_CAPACITY);
            log_once(&registry_full_logged, message);
        }
        errno = saved_errno;
        return status;
    }
    *out = counter;
    errno = saved_errno;
    return FLARE_OK;
}

/* ---- per-thread cells ---- */

static void release_thread_cells(void *value)
{
    counters_cell_block *block = value;
    counters_thread_cells = NULL;
    thread_cells_released = 1;
    pthread_mutex_lock(&registry_lock);
    block->next_free = free_cell_blocks;
    free_cell_blocks = block;
    pthread_mutex_unlock(&registry_lock);
}

static void create_cell_key(void)
{
    cell_key_ready = pthread_key_create(&cell_key, release_thread_cells) == 0;
}

/* The calling thread's block: a free one from an exited thread, else a new
 * one. NULL when memory is short, COUNTERS_MAX_CELL_BLOCKS are taken, or
 * the thread is exiting. */
static counters_cell_block *claim_thread_cells(void)
{
    if (thread_cells_released)
        return NULL;
    pthread_once(&cell_key_once, create_cell_key);
    if (!cell_key_ready)
        return NULL;
    counters_cell_block *block = NULL;
    pthread_mutex_lock(&registry_lock);
    if (free_cell_blocks != NULL) {
        block = free_cell_blocks;
        free_cell_blocks = block->next_free;
        block->next_free = NULL;
    } else {
        uint32_t count = atomic_load_explicit(&cell_block_count, memory_order_relaxed);
        if (count < COUNTERS_MAX_CELL_BLOCKS) {
            block = calloc(1, sizeof(*block));
            if (block != NULL) {
                atomic_store_explicit(&cell_blocks[count], block, memory_order_release);
                atomic_store_explicit(&cell_block_count, count + 1, memory_order_release);
            }
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (block == NULL)
        return NULL;
    if (pthread_setspecific(cell_key, block) != 0) {
        release_thread_cells(block);
        return NULL;
    }
    counters_thread_cells = block;
    return block;
}

/* The chunk of the calling thread's cells that holds index, made on first
 * use. NULL when it cannot be had (the caller adds to the shared atomic). */
static counters_chunk *thread_chunk(uint32_t index)
{
    counters_cell_block *block = counters_thread_cells;
    if (block == NULL) {
        block = claim_thread_cells();
        if (block == NULL)
            return NULL;
    }
    counters_chunk *_Atomic *place = &block->chunks[index / COUNTERS_CHUNK_CELLS];
    counters_chunk *chunk = atomic_load_explicit(place, memory_order_relaxed);
    if (chunk == NULL) {
        chunk = aligned_alloc(_Alignof(counters_chunk), sizeof(counters_chunk));
        if (chunk == NULL)
            return NULL;
        for (int i = 0; i < COUNTERS_CHUNK_CELLS; i++)
            atomic_init(&chunk->cells[i], 0);
        atomic_store_explicit(place, chunk, memory_order_release);
    }
    return chunk;
}

int counters_add_slow(flare_counter *counter, int64_t n)
{
    if (counter == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int saved_errno = errno;
    if (n <= 0 || n > FLARE_COUNTER_ADD_MAX) {
        atomic_fetch_add_explicit(&counter->rejected, 1, memory_order_relaxed);
        if (atomic_load_explicit(&counter->rejection_logged, memory_order_relaxed) == 0) {
            char message[256];
            snprintf(message, sizeof(message),
                     "counter '%s': add of %lld rejected (must be 1..%lld); later rejections of "
                     "this counter are counted, not logged",
                     counter->name, (long long)n, (long long)FLARE_COUNTER_ADD_MAX);
            log_once(&counter->rejection_logged, message);
        }
        errno = saved_errno;
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    counters_chunk *chunk = thread_chunk(counter->index);
    if (chunk != NULL) {
        _Atomic uint64_t *cell = &chunk->cells[counter->index % COUNTERS_CHUNK_CELLS];
        atomic_store_explicit(cell, atomic_load_explicit(cell, memory_order_relaxed) + (uint64_t)n,
                              memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&counter->shared, (uint64_t)n, memory_order_relaxed);
    }
    errno = saved_errno;
    return FLARE_OK;
}

/* ---- reads ---- */

int counters_tick(const char *name, int64_t n)
{
    flare_counter *counter;
    int status = counters_get(name, &counter);
    if (status != FLARE_OK)
        return status;
    return counters_add(counter, n);
}

int counters_value(const flare_counter *counter, uint64_t *value)
{
    if (counter == NULL || value == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    uint32_t chunk_index = counter->index / COUNTERS_CHUNK_CELLS;
    uint32_t cell_index = counter->index % COUNTERS_CHUNK_CELLS;
    uint64_t sum = atomic_load_explicit(&counter->shared, memory_order_relaxed);
    uint32_t blocks = atomic_load_explicit(&cell_block_count, memory_order_acquire);
    for (uint32_t i = 0; i < blocks; i++) {
        counters_cell_block *block = atomic_load_explicit(&cell_blocks[i], memory_order_acquire);
        counters_chunk *chunk =
            atomic_load_explicit(&block->chunks[chunk_index], memory_order_acquire);
        if (chunk != NULL)
            sum += atomic_load_explicit(&chunk->cells[cell_index], memory_order_relaxed);
    }
    *value = sum;
    return FLARE_OK;
}

int counters_name(const flare_counter *counter, char *buffer, size_t size)
{
    if (counter == NULL || buffer == NULL || size == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    size_t length = strlen(counter->name);
    if (length >= size)
        return FLARE_ERR_INVALID_ARGUMENT;
    memcpy(buffer, counter->name, length + 1);
    return FLARE_OK;
}

int counters_rejected(const flare_counter *counter, uint64_t *count)
{
    if (counter == NULL || count == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *count = atomic_load_explicit(&counter->rejected, memory_order_relaxed);
    return FLARE_OK;
}

int counters_count(uint32_t *count)
{
    if (count == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *count = atomic_load_explicit(&slot_count, memory_order_acquire);
    return FLARE_OK;
}

int counters_at(uint32_t index, flare_counter **out)
{
    if (out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (index >= atomic_load_explicit(&slot_count, memory_order_acquire))
        return FLARE_ERR_NOT_FOUND;
    *out = &slots[index];
    return FLARE_OK;
}

int counters_registry_rejections(uint64_t *invalid, uint64_t *full)
{
    if (invalid != NULL)
        *invalid = atomic_load_explicit(&invalid_names, memory_order_relaxed);
    if (full != NULL)
        *full = atomic_load_explicit(&registry_full, memory_order_relaxed);
    return FLARE_OK;
}
