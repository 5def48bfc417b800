/*
 * counters.h: the application counter registry, the code behind
 * flare_counter_* (flare.h) in whichever module holds the process's registry.
 *
 * Owns: a fixed table of FLARE_COUNTER_CAPACITY named counters, the name
 * index that finds them without a lock, and per-thread cells that make an
 * add cost a load and a store. A counter's value is the exact sum of its
 * cells. Slots and cells are never freed, so a handle, or a pointer into a
 * cell block, stays valid for the life of the process.
 *
 * Must never: take a lock, allocate or touch errno on the add path (the
 * first add of a thread to a group of 64 counters is the one exception: it
 * allocates the thread's cells once); read a name past its bound; depend on
 * the rest of libflare: the Python extension compiles this file alone as
 * its private fallback registry.
 */
#ifndef FLARE_COUNTERS_COUNTERS_H
#define FLARE_COUNTERS_COUNTERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "flare/flare.h"

/*
 * Per-thread cells. A thread's first add claims a block of cells (reused
 * from an exited thread when one is free), and its first add to each group
 * of COUNTERS_CHUNK_CELLS counters allocates that group's chunk. Only the
 * owning thread writes its cells, so an add is a relaxed load and store, no
 * read-modify-write; readers sum every block. A block survives its thread
 * with its values and is handed to the next new thread as it is, so the
 * sum stays exact without ever moving a value.
 */
#define COUNTERS_CHUNK_CELLS 64
#define COUNTERS_CHUNKS      (FLARE_COUNTER_CAPACITY / COUNTERS_CHUNK_CELLS)
/* Threads alive at once that get cells; threads beyond it add to the
 * counter's shared atomic instead (exact, only slower under contention). */
#define COUNTERS_MAX_CELL_BLOCKS 4096

typedef struct counters_chunk {
    _Alignas(64) _Atomic uint64_t cells[COUNTERS_CHUNK_CELLS];
} counters_chunk;

typedef struct counters_cell_block {
    /* Written by the owner only (release), read by anyone (acquire). */
    counters_chunk *_Atomic chunks[COUNTERS_CHUNKS];
    struct counters_cell_block *next_free; /* guarded by the registry lock */
} counters_cell_block;

/* One registered counter: the thing a flare_counter handle points at. */
struct flare_counter {
    uint32_t index;
    _Atomic uint64_t shared;   /* adds of threads that have no cell block */
    _Atomic uint64_t rejected; /* adds dropped by validation */
    _Atomic int rejection_logged;
    char name[FLARE_COUNTER_NAME_MAX + 1];
};

/*
 * In libflare the pointer uses the initial-exec TLS model: one load from the
 * thread pointer instead of a __tls_get_addr call per add, which measured
 * about half the cost of an add through libflare.so. It takes 8 bytes of
 * the static TLS space that glibc keeps for libraries loaded later with
 * dlopen (the Python module and the CUDA injection load libflare that way).
 * Other modules that compile the registry keep the default model.
 */
#if defined(FLARE_BUILDING_LIBRARY)
#define COUNTERS_TLS_MODEL __attribute__((tls_model("initial-exec")))
#else
#define COUNTERS_TLS_MODEL
#endif
extern _Thread_local counters_cell_block *counters_thread_cells COUNTERS_TLS_MODEL;

/* The slow half of counters_add: validation failures (counted, logged once
 * per counter) and a thread's first add to a chunk. */
int counters_add_slow(flare_counter *counter, int64_t n);

/*
 * The hot path. Validation comes first: a value outside 1..FLARE_COUNTER_ADD_MAX
 * is never added. FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT for a NULL handle
 * or a rejected value.
 */
static inline int counters_add(flare_counter *counter, int64_t n)
{
    if (__builtin_expect(counter != NULL && n > 0 && n <= FLARE_COUNTER_ADD_MAX, 1)) {
        counters_cell_block *block = counters_thread_cells;
        if (__builtin_expect(block != NULL, 1)) {
            uint32_t index = counter->index;
            counters_chunk *chunk = atomic_load_explicit(
                &block->chunks[index / COUNTERS_CHUNK_CELLS], memory_order_relaxed);
            if (__builtin_expect(chunk != NULL, 1)) {
                _Atomic uint64_t *cell = &chunk->cells[index % COUNTERS_CHUNK_CELLS];
                atomic_store_explicit(
                    cell, atomic_load_explicit(cell, memory_order_relaxed) + (uint64_t)n,
                    memory_order_relaxed);
                return FLARE_OK;
            }
        }
    }
    return counters_add_slow(counter, n);
}

/*
 * Checks a name against the rule: 1..FLARE_COUNTER_NAME_MAX characters of
 * A-Z a-z 0-9 . _ - (an explicit set, never the locale's isalnum). Reads at
 * most FLARE_COUNTER_NAME_MAX + 1 bytes. FLARE_OK, or
 * FLARE_ERR_INVALID_ARGUMENT with the reason in reason (may be NULL).
 */
int counters_name_check(const char *name, char *reason, size_t reason_size);

/* Registers name once (under a lock) and returns its handle; later calls
 * find it without the lock. FLARE_ERR_INVALID_ARGUMENT for a bad name,
 * FLARE_ERR_FULL when FLARE_COUNTER_CAPACITY counters exist (both counted
 * and logged once). */
int counters_get(const char *name, flare_counter **out);
/* Finds without creating: FLARE_ERR_NOT_FOUND when never registered. */
int counters_find(const char *name, flare_counter **out);
/* counters_get then counters_add. */
int counters_tick(const char *name, int64_t n);
/* The exact sum of the counter's cells: everything added since the process
 * started, modulo 2^64. */
int counters_value(const flare_counter *counter, uint64_t *value);
int counters_name(const flare_counter *counter, char *buffer, size_t size);
int counters_rejected(const flare_counter *counter, uint64_t *count);
/* Counters registered so far; indices 0..count-1 are valid for counters_at. */
int counters_count(uint32_t *count);
int counters_at(uint32_t index, flare_counter **out);
/* Registrations refused: bad names, and names that found the table full. */
int counters_registry_rejections(uint64_t *invalid_names, uint64_t *registry_full);

/*
 * Where the registry's "logged once" messages go. Each module that compiles
 * registry.c defines it: libflare writes flare's log, the Python extension
 * (whose errors become exceptions) stays silent. Called off the hot path,
 * with errno already saved by the caller.
 */
void counters_log_rejection(const char *message);

#endif /* FLARE_COUNTERS_COUNTERS_H */
