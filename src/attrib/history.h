/*
 * history.h: the bounded history of closed scopes that attribution reads,
 * and the event-time watermark that trims it.
 *
 * Samples from the PM engine arrive in drains, later than the scopes they
 * belong to, so closed scopes must be kept until no sample can still need
 * them. Retention is keyed to an event-time watermark: the newest sample
 * time of a decode that proved the hardware buffer exhausted with no
 * overflow. Only such a decode proves that no older sample is still waiting;
 * the watermark is monotonic and never advances on a failed, truncated or
 * overflowed decode, so a lost batch cannot strand the scopes its leftovers
 * still need. Wall-clock time would be wrong: a stalled collector lets "now"
 * run on while undecoded samples wait.
 *
 * The watermark is the real bound, but only PM sampling publishes one, so a
 * hard cap (given at init) is applied on every close as well: when a close
 * finds the history full, the oldest-recorded scope is evicted, every
 * eviction is counted, and the first one is logged once.
 *
 * Not yet wired into the session's scope path: the lead wires it when PM
 * sampling lands. Not thread-safe: one owner (the collector) calls it all.
 * It must never grow past its cap, and never allocate after init except in
 * attrib_history_snapshot's pending-close lookup.
 */
#ifndef FLARE_ATTRIB_HISTORY_H
#define FLARE_ATTRIB_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "attrib/attrib.h"

typedef struct attrib_history {
    attrib_scope *ring; /* capacity slots, oldest at head */
    size_t capacity;
    size_t head;
    size_t count;
    uint64_t watermark_ns; /* 0 until a decode has proven one */
    uint64_t evictions;    /* scopes dropped by the cap (never by the watermark) */
    uint64_t trimmed;      /* scopes dropped by the watermark */
} attrib_history;

/* What a PM decode reports about the buffer it just read. */
typedef struct attrib_decode_result {
    int exhausted;             /* the hardware said no records remain (end of records) */
    int overflow;              /* the hardware buffer overflowed: samples were lost */
    int failed;                /* the decode itself failed */
    int truncated;             /* the decode stopped early (our buffer was too small, ...) */
    uint64_t newest_sample_ns; /* the latest sample time decoded */
} attrib_decode_result;

/* A close whose end time is known but not yet in the history. */
typedef struct attrib_pending_close {
    uint64_t instance_id;
    uint64_t end_ns;
} attrib_pending_close;

/* FLARE_OK; FLARE_ERR_INVALID_ARGUMENT for a capacity of 0;
 * FLARE_ERR_NO_MEMORY (history left empty and safe to destroy). */
int attrib_history_init(attrib_history *history, size_t capacity);
/* Frees the ring; safe on a zeroed or already-destroyed history. */
void attrib_history_destroy(attrib_history *history);

/*
 * Records a closed scope. When the history is full the oldest-recorded scope
 * is evicted first (counted in evictions; the first eviction of the process
 * is logged once). Cannot fail.
 */
void attrib_history_record_close(attrib_history *history, const attrib_scope *closed);

/* Removes every scope that ended strictly before watermark_ns (a scope
 * ending exactly at it is kept: intervals are closed). Keeps the order of
 * the rest. Returns how many were removed. */
size_t attrib_history_trim(attrib_history *history, uint64_t watermark_ns);

/*
 * Offers a decode's result. The watermark advances to newest_sample_ns only
 * when the decode exhausted the buffer with no overflow, no failure and no
 * truncation, and only forward; then the history is trimmed to it. Returns
 * 1 when the watermark advanced, 0 when it did not.
 */
int attrib_watermark_advance(attrib_history *history, const attrib_decode_result *decode);

/* Scopes a snapshot with open_count open scopes will hold. */
size_t attrib_history_snapshot_size(const attrib_history *history, size_t open_count);

/*
 * Writes the attribution candidates to out: every scope in the history, then
 * each of the open scopes. An open scope (end_ns == ATTRIB_OPEN) whose
 * instance id has a pending close gets that close's end, so a scope whose
 * close was timed but not yet published is not treated as still running.
 *
 * Returns FLARE_OK with *out_count set; FLARE_ERR_INVALID_ARGUMENT for NULL
 * arrays with nonzero counts; FLARE_ERR_FULL when out_capacity is smaller
 * than attrib_history_snapshot_size (nothing useful written);
 * FLARE_ERR_NO_MEMORY when the pending-close lookup cannot be built.
 */
int attrib_history_snapshot(const attrib_history *history, const attrib_scope *open_scopes,
                            size_t open_count, const attrib_pending_close *pending,
                            size_t pending_count, attrib_scope *out, size_t out_capacity,
                            size_t *out_count);

#endif /* FLARE_ATTRIB_HISTORY_H */
