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
#include <stddef.h>
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

/* A change of the guard's answer: from at_ns (flare's clock) on, the
 * simulated device's work is recorded (timed) or only counted (untimed).
 * at_ns brackets the change: read before timing resumes and after it
 * stops, so a completion that ended in an untimed stretch [off, on) was
 * recorded only if it reached the guard after `on`. */
typedef struct storm_completions_switch {
    uint64_t at_ns;
    bool timed;
} storm_completions_switch;

/* Switches a session keeps: its first ones (a storm's sample slices
 * switch twice a second, a deep window's hold twice more). */
#define STORM_COMPLETIONS_SWITCHES_MAX 256

/* The session's switches so far, oldest first: copies up to max of them
 * into out and returns how many were kept (at most
 * STORM_COMPLETIONS_SWITCHES_MAX; later ones are not). Any thread, for
 * tests: when the guard really stopped and resumed recording, which a
 * loaded machine moves by any amount. They stay readable after the
 * session ends, until the next one begins. */
size_t storm_completions_switches(storm_completions_switch *out, size_t max);

/* At session end, after the collector stopped: the storm_guard drops and
 * capability row (only when a guard ran over some simulated work: in a CUDA
 * process those rows are the CUDA tracer's), then the guard is freed. */
void storm_completions_end(void);

/* Inside the session's last batch, after storm_completions_end: writes the
 * storm that was still running then (table storms, still_open), if one
 * was. Finished storms travel through the collector's ring as they end,
 * but for one that ended on the collector's last beats, when the ring no
 * longer took events: written here too. */
void storm_completions_write_last(store *database, int64_t pid);

#endif /* FLARE_STORM_STORM_COMPLETIONS_H */
