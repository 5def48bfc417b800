/*
 * storm_completions.h: the launch-storm guard for the work the session records
 * from the simulated device (the CUDA tracer steps its own guard and
 * switches CUPTI: src/backend/cuda/cuda_trace.c).
 *
 * Simulated kernels cost nothing to time, so here the guard runs only when
 * asked for (FLARE_STORM_RATE set, as `flare trace --storm-rate` does): it
 * lets the guard's whole path (storms, slices, holds for deep windows,
 * counting what is left untimed, the report) run and be tested without a
 * GPU. Owns the session's guard and its counts. storm_completions_record is on
 * the completion hot path: relaxed atomics only, no lock, no allocation.
 */
#ifndef FLARE_STORM_STORM_COMPLETIONS_H
#define FLARE_STORM_STORM_COMPLETIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* At session start: reads FLARE_STORM_RATE (unset: no guard; a bad value is
 * logged and the default rate used, as the CUDA tracer does). */
void storm_completions_begin(uint64_t now_ns);
/* One finished piece of simulated work (kernel, or copy/memset): counts it,
 * and returns whether it is to be recorded (false: counted untimed). */
bool storm_completions_record(bool kernel);
/* The collector's beat: steps the guard. */
void storm_completions_beat(uint64_t now_ns);
/* Whether the guard is in a storm now (for tests: any thread). */
bool storm_completions_in_storm(void);
/* At session end, after the collector stopped: the storm_guard drops and
 * capability row (only when a guard ran over some simulated work: in a CUDA
 * process those rows are the CUDA tracer's), then the guard is freed. */
void storm_completions_end(void);

/* Inside the session's last batch, after storm_completions_end: writes the
 * storm that was still running then (table storms, still_open), if one
 * was. Finished storms travel through the collector's ring as they end. */
void storm_completions_write_last(store *database, int64_t pid);

#endif /* FLARE_STORM_STORM_COMPLETIONS_H */
