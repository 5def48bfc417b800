/*
 * pm_session.h: PM samples from the engines' queues to the pm_samples table,
 * each attributed to the deepest scope that covered it. The one path every
 * engine's samples take (CUDA and simulated alike).
 *
 * Runs on the collector thread: it owns the scope history (attrib/history.h),
 * fed with every scope the collector drains while a window's samples may
 * still need it, and at each beat resolves a drain of samples against the
 * history plus a snapshot of the scopes still open (flare scope stacks of
 * every thread, and open NVTX start/end ranges through a registered source).
 *
 * Ordering that makes it correct: the open snapshot is taken at one beat and
 * the samples are resolved at a later beat, after a complete ring drain, so
 * a scope that closed in between is in the history by then; a close timed
 * but not yet published is seen in the snapshot with its end (the close
 * publishes its time with the close, see core/scope.c and cuda_ranges.c).
 *
 * Must never: run on an application thread, grow past its fixed arrays
 * (every loss is counted), or credit a sample to a scope that did not cover
 * its time.
 */
#ifndef FLARE_PM_PM_SESSION_H
#define FLARE_PM_PM_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "attrib/attrib.h"
#include "pm/pm_engine.h"
#include "store/store.h"

/* Scopes kept for attribution (the hard cap of the history). */
#define PM_SESSION_HISTORY_DEFAULT 65536u
/* Open scopes one snapshot can hold. */
#define PM_SESSION_OPEN_MAX 16384u
/* Queue entries one beat takes from an engine. */
#define PM_SESSION_BATCH_MAX   8192u
#define PM_SESSION_ENGINES_MAX 4

/* An open scope offered by a source other than the scope stacks. */
typedef struct pm_open_scope {
    attrib_scope scope; /* end_ns: ATTRIB_OPEN, or the end of a close in progress */
    char name[64];
} pm_open_scope;

/* Visits open scopes: writes up to capacity into out, returns how many. */
typedef size_t (*pm_open_scope_source)(pm_open_scope *out, size_t capacity, void *user);

/* Engines whose samples are collected (process-wide; at most
 * PM_SESSION_ENGINES_MAX). Registering twice is harmless. */
int pm_session_register_engine(pm_engine *engine);
void pm_session_unregister_engine(pm_engine *engine);
/* The NVTX range table registers itself here (NULL removes it). */
void pm_session_set_open_scope_source(pm_open_scope_source source, void *user);
/* Tests: the history cap for the next session (0: the default). */
void pm_session_set_history_capacity(size_t capacity);

/* Session life, called by flare_init / flare_shutdown. */
void pm_session_begin(void);
/* Undoes pm_session_begin when the session could not start. */
void pm_session_cancel(void);
/* Collector: every scope it drains. */
void pm_session_scope_closed(uint64_t start_ns, uint64_t end_ns, uint64_t instance_id,
                             uint32_t depth, int64_t thread_id, const char *name);
/* Collector's beat, after the window beat. rings_drained: the poll's drain
 * emptied every ring (so every close before the last snapshot is in). */
void pm_session_beat(store *database, int64_t pid, uint64_t now_ns, int rings_drained);
/* flare_shutdown, inside its last batch, after the windows closed. */
void pm_session_end(store *database, int64_t pid, uint64_t end_ns);

typedef struct pm_session_stats {
    uint64_t samples_stored;
    uint64_t samples_attributed;
    uint64_t samples_unattributed;
    uint64_t rows_failed;
    uint64_t history_evictions;
    uint64_t history_trimmed;
    uint64_t open_snapshot_full; /* snapshots that could not hold every open scope */
    uint64_t close_races;        /* a close seen in progress too long: treated as open */
    uint64_t watermark_ns;
    size_t history_count;
} pm_session_stats;
void pm_session_stats_get(pm_session_stats *stats);

#endif /* FLARE_PM_PM_SESSION_H */
