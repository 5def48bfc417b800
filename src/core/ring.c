/*
 * ring.c: storage and the consumer side of the event ring (ring.h).
 * The producer side is inline in the header because it is the hot path.
 */
#include "core/ring.h"

#include <stdlib.h>
#include <string.h>

int core_ring_init(core_ring *ring, uint32_t capacity)
{
    if (capacity < CORE_RING_MIN_CAPACITY || capacity > CORE_RING_MAX_CAPACITY ||
        (capacity & (capacity - 1)) != 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    memset(ring, 0, sizeof(*ring));
    ring->events = calloc(capacity, sizeof(core_event));
    if (ring->events == NULL)
        return FLARE_ERR_NO_MEMORY;
    ring->capacity = capacity;
    ring->mask = capacity - 1;
    atomic_init(&ring->head, 0);
    atomic_init(&ring->tail, 0);
    atomic_init(&ring->dropped, 0);
    return FLARE_OK;
}

void core_ring_destroy(core_ring *ring)
{
    free(ring->events);
    ring->events = NULL;
    ring->capacity = 0;
}

size_t core_ring_drain(core_ring *ring, size_t max_events, core_ring_visit visit, void *user)
{
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    size_t count = 0;
    while (tail != head && count < max_events) {
        visit(&ring->events[tail & ring->mask], user);
        tail++;
        count++;
        /* Release slots in small groups so a busy producer sees room early
         * without paying a shared store per event. */
        if ((count & 255u) == 0)
            atomic_store_explicit(&ring->tail, tail, memory_order_release);
    }
    atomic_store_explicit(&ring->tail, tail, memory_order_release);
    return count;
}

uint64_t core_ring_pending(core_ring *ring)
{
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    return head - tail;
}
