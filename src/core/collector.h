/*
 * collector.h: the one thread that moves events from the per-thread rings
 * into the session database.
 *
 * Owns: the collector thread and, while it runs, exclusive use of the
 * session's store handle. Every flush interval (or on request) it drains
 * every ring, writes the events and the changed drop counts in one
 * transaction, and frees the slots of exited threads. It never blocks a
 * producer: producers only ever see a full ring.
 */
#ifndef FLARE_CORE_COLLECTOR_H
#define FLARE_CORE_COLLECTOR_H

#include <stdint.h>

#include "store/store.h"

typedef struct core_collector core_collector;

typedef struct core_collector_stats {
    uint64_t events_written;
    uint64_t events_stale; /* pushed under an earlier session; skipped */
    uint64_t events_lost;  /* a write or commit failed; counted as drops */
    uint64_t flushes;
    uint64_t devices_recorded; /* bit per device id already in the devices table */
} core_collector_stats;

#define CORE_COLLECTOR_MAX_DEVICES 64

/* Starts the thread. The store stays owned by the caller but must not be used
 * by anyone else until core_collector_stop returns. */
int core_collector_start(store *database, int64_t pid, uint32_t generation,
                         uint32_t flush_interval_ms, core_collector **out);
/* Requests a flush and waits for it to commit, at most timeout_ns. */
int core_collector_flush(core_collector *collector, uint64_t timeout_ns);
/* Final drain of every ring, then stops and joins the thread and frees it. */
void core_collector_stop(core_collector *collector, core_collector_stats *stats);

/* One drain pass on the caller's thread (used by the collector thread and by
 * tests and benchmarks that drive the collector by hand): one transaction.
 * Returns FLARE_OK, CORE_COLLECTOR_MORE_PENDING when a ring had more than
 * its share of the pass (call again), or a negative status. */
#define CORE_COLLECTOR_MORE_PENDING 1
int core_collector_drain_once(store *database, int64_t pid, uint32_t generation,
                              core_collector_stats *stats);

#endif /* FLARE_CORE_COLLECTOR_H */
