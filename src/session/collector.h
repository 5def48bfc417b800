/*
 * collector.h: the one thread that moves events from the per-thread rings
 * into the session database, and the beat of the session's participants.
 *
 * Owns: the collector thread and, while it runs, exclusive use of the
 * session's store handle. Every poll (5 ms) it drains every ring and runs
 * the participants' beat; every flush interval (or on request) it writes
 * the changed drop counts and commits, in one transaction, and frees the
 * slots of exited threads. It never blocks a producer: producers only ever
 * see a full ring.
 */
#ifndef FLARE_SESSION_COLLECTOR_H
#define FLARE_SESSION_COLLECTOR_H

#include <stdint.h>

#include "backend/backend.h"
#include "store/store.h"

typedef struct session_collector session_collector;

typedef struct session_collector_stats {
    uint64_t events_written;
    uint64_t events_stale; /* pushed under an earlier session; skipped */
    uint64_t events_lost;  /* a write or commit failed; counted as drops */
    uint64_t flushes;
    uint64_t devices_recorded; /* bit per device id already in the devices table */
} session_collector_stats;

#define SESSION_COLLECTOR_MAX_DEVICES 64

/* Starts the thread. The store stays owned by the caller but must not be used
 * by anyone else until session_collector_stop returns. backend names the
 * devices no backend has described (may be NULL). */
int session_collector_start(store *database, const backend_descriptor *backend, int64_t pid,
                            uint32_t generation, uint32_t flush_interval_ms,
                            session_collector **out);
/* Requests a flush and waits for it to commit, at most timeout_ns. */
int session_collector_flush(session_collector *collector, uint64_t timeout_ns);
/* The session adopted backend after it started: the thread records it as
 * the process's backend at its next commit (or at stop). Any thread. */
void session_collector_adopt_backend(session_collector *collector,
                                     const backend_descriptor *backend);
/* Final drain of every ring, then stops and joins the thread and frees it. */
void session_collector_stop(session_collector *collector, session_collector_stats *stats);

/* Sets every drop counter of process pid in the caller's open batch (the
 * threads' ring and scope-depth drops, thread slots, log lines, names, and
 * stats' events the store could not take): the session's last transaction
 * writes the final counts whatever an earlier commit lost. */
void session_collector_write_drops(store *database, int64_t pid,
                                   const session_collector_stats *stats);

/* One drain pass on the caller's thread (used by the collector thread and by
 * tests and benchmarks that drive the collector by hand): one transaction.
 * Returns FLARE_OK, SESSION_COLLECTOR_MORE_PENDING when a ring had more than
 * its share of the pass (call again), or a negative status. */
#define SESSION_COLLECTOR_MORE_PENDING 1
int session_collector_drain_once(store *database, const backend_descriptor *backend, int64_t pid,
                                 uint32_t generation, session_collector_stats *stats);

#endif /* FLARE_SESSION_COLLECTOR_H */
