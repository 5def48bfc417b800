/*
 * ring.h: a bounded single-producer, single-consumer ring of core_events.
 *
 * One ring per producing thread; the collector is the only consumer. The
 * producer side is wait-free and allocation-free: reserve a slot, fill it,
 * commit. A full ring never blocks the producer: the event is dropped and
 * counted. The ring owns its storage, allocated once at creation.
 */
#ifndef FLARE_CORE_RING_H
#define FLARE_CORE_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/event.h"

#define CORE_RING_MIN_CAPACITY     64u
#define CORE_RING_MAX_CAPACITY     1048576u
#define CORE_RING_DEFAULT_CAPACITY 16384u

typedef struct core_ring {
    /* Producer-owned line: head and the drop counter. */
    _Alignas(64) _Atomic uint64_t head;
    _Atomic uint64_t dropped;
    uint64_t cached_tail; /* producer's last view of tail, saves a shared load */
    /* Consumer-owned line. */
    _Alignas(64) _Atomic uint64_t tail;
    uint32_t capacity; /* power of two */
    uint32_t mask;
    core_event *events;
} core_ring;

/* Allocates storage for capacity events (a power of two within the bounds).
 * Returns FLARE_OK, FLARE_ERR_INVALID_ARGUMENT or FLARE_ERR_NO_MEMORY. */
int core_ring_init(core_ring *ring, uint32_t capacity);
void core_ring_destroy(core_ring *ring);

/* Producer: a slot to fill, or NULL when full, without counting a drop. */
static inline core_event *core_ring_try_reserve(core_ring *ring)
{
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    if (head - ring->cached_tail >= ring->capacity) {
        ring->cached_tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
        if (head - ring->cached_tail >= ring->capacity)
            return NULL;
    }
    return &ring->events[head & ring->mask];
}

/* Producer: counts one event that could not be written. */
static inline void core_ring_count_drop(core_ring *ring)
{
    atomic_store_explicit(&ring->dropped,
                          atomic_load_explicit(&ring->dropped, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Producer: a slot to fill, or NULL when full (the drop is already counted). */
static inline core_event *core_ring_reserve(core_ring *ring)
{
    core_event *event = core_ring_try_reserve(ring);
    if (event == NULL)
        core_ring_count_drop(ring);
    return event;
}

/* Producer: publishes the slot returned by the last reserve. */
static inline void core_ring_commit(core_ring *ring)
{
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
    atomic_store_explicit(&ring->head, head + 1, memory_order_release);
}

/* Consumer: calls visit for up to max_events committed events in order and
 * releases their slots. Returns how many were visited. */
typedef void (*core_ring_visit)(const core_event *event, void *user);
size_t core_ring_drain(core_ring *ring, size_t max_events, core_ring_visit visit, void *user);

/* Consumer: committed events not yet drained. */
uint64_t core_ring_pending(core_ring *ring);

static inline uint64_t core_ring_dropped(core_ring *ring)
{
    return atomic_load_explicit(&ring->dropped, memory_order_relaxed);
}

#endif /* FLARE_CORE_RING_H */
