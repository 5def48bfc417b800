/*
 * pc_session.h: PC samples and SASS metrics from the engines' aggregate
 * tables to the pc_samples and sass_metrics tables (store/store_pc.h,
 * store/store_sass.h), on the collector thread: at each
 * batch, the aggregates of windows already disarmed, each written once; at
 * the session's end, whatever is left. The engines' losses (hardware buffer
 * full, aggregate table full) and aggregates a failed commit lost are
 * written as drops (source pc_sampling, or sass_metrics).
 *
 * Must never: run on an application thread, write an aggregate twice, or
 * lose one without counting it.
 */
#ifndef FLARE_PCSAMP_PC_SESSION_H
#define FLARE_PCSAMP_PC_SESSION_H

#include <stdint.h>

#include "pcsamp/pc_engine.h"
#include "store/store.h"

/* Engines whose aggregates are collected (process-wide, at most 4);
 * registering twice is harmless. FLARE_OK or FLARE_ERR_NO_MEMORY (full). */
int pc_session_register_engine(pc_engine *engine);

/* Session life (the collector's participant, session/features.c). */
void pc_session_begin(void);
/* Inside the open batch: writes the aggregates of disarmed windows. */
void pc_session_batch(store *database, int64_t pid);
/* Whether that batch committed (if not, its aggregates are counted lost). */
void pc_session_committed(int committed);
/* Inside the last batch: everything left, and the drops. */
void pc_session_end(store *database, int64_t pid);

typedef struct pc_session_stats {
    uint64_t entries_written;
    uint64_t samples_written;
    uint64_t samples_uncommitted;  /* written into a batch that did not commit */
    uint64_t write_failures;       /* aggregates the store refused (their samples counted) */
    uint64_t sass_entries_written; /* of entries_written, SASS metrics' (sass_metrics rows) */
    uint64_t sass_write_failures;  /* SASS aggregates the store refused */
} pc_session_stats;
void pc_session_stats_get(pc_session_stats *stats);

#endif /* FLARE_PCSAMP_PC_SESSION_H */
