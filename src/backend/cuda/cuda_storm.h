/*
 * cuda_storm.h: the CUDA tracer's launch-storm driver: steps the
 * launch-storm guard (src/storm/storm_guard.h) on the sampler thread and
 * switches CUPTI's activity kinds off and on for it, counting the launches
 * and copies a storm leaves untimed.
 *
 * cuda_trace.c owns the sampler thread and calls in here. Must never be
 * stepped from any thread but the sampler, or stop or crash the program: a
 * CUPTI failure stops the guard with a reason in its capability row, and
 * timing everything is the state it falls back to.
 */
#ifndef FLARE_BACKEND_CUDA_STORM_H
#define FLARE_BACKEND_CUDA_STORM_H

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/cuda/cuda_loader.h"

/* How many activity kinds a storm may switch (every kind tracing enables). */
#define CUDA_STORM_KINDS_MAX 4

/* At start, before cuda_storm_set_up: an activity kind tracing enabled
 * (through cupti, which must stay valid for the process), which a storm and
 * a SASS window switch off and on (kinds past CUDA_STORM_KINDS_MAX are not
 * switched). */
void cuda_storm_watch_kind(const cuda_cupti_api *cupti, CUpti_ActivityKind kind);
/* The kinds watched (every kind tracing enabled), up to max into out. */
size_t cuda_storm_kinds(CUpti_ActivityKind *out, size_t max);

/* At start, when kernels are timed: creates the guard from
 * FLARE_STORM_RATE (a bad value is logged and the default used; 0 switches
 * it off). launches_counted: whether the launch callbacks count launches,
 * which the guard judges a storm by. The outcome is the "storm_guard"
 * capability row; cupti must stay valid for the process. */
void cuda_storm_set_up(const cuda_cupti_api *cupti, int launches_counted);

/* The sampler thread did not start: nothing would step the guard, so it is
 * dropped and every kernel stays timed. */
void cuda_storm_abandon(void);

/* Sampler thread: one step of the guard at the current time and launch
 * count, switching CUPTI's activity when the guard says so. */
void cuda_storm_step(void);

/* Sampler thread: when to wake next, wake_ns or sooner when the guard
 * wants a step before it (now: the loop's clock reading). */
uint64_t cuda_storm_next_wake(uint64_t now, uint64_t wake_ns);

/* Launches counted but not timed so far (sampler thread, or after it
 * stopped). The guard counts each host launch once and each launch of a
 * weighed CUDA graph as its kernel nodes (cuda_graph_weights.h). */
uint64_t cuda_storm_untimed_launches(void);

/* A driver callback at API_ENTER on a program thread (neither flare's own
 * call nor a launch): a copy or memset made while a storm has their
 * activity off is counted. One relaxed load otherwise; never blocks. */
void cuda_storm_count_copy(CUpti_CallbackId id);

/* Whether a storm has kernel, copy and memset activity off right now (a
 * relaxed read, for program threads): their API calls are not recorded
 * then either, having no GPU record to point to. */
bool cuda_storm_untimed_now(void);

/* A graph launch on a program thread: its copy and memset nodes, counted
 * like copies when a storm has their activity off. Never blocks. */
void cuda_storm_count_graph_copies(uint32_t copies);

/*
 * The quiet of a SASS metrics window: with any of CUPTI's activity kinds
 * enabled while the patched kernels run, every count CUPTI's SASS metrics
 * flush is 0 (kernel activity: records of 0; copy and memset activity: no
 * records at all; the bare-CUPTI probe on the H200, session 19). So every
 * watched kind is off from before the window's enable until after its
 * disable; the launches, copies and memsets made meanwhile are counted (the
 * drops below), not timed, and a launch storm's guard does not step.
 *
 * begin: on flare's collector thread, before cuptiSassMetricsEnable. 0, or
 * a flare_status with reason (beside PC sampling CUPTI cannot switch kernel
 * activity back on; a failed switch leaves every kind as it was). Nothing to
 * switch (no activity traced) is 0.
 * end: after the disable (kinds back as the guard had them), on flare's
 * thread; from a program's thread it is end_later. end_later from any
 * thread (an atomic store: the sampler thread ends it at its next step).
 * A quiet still on at the exit stays on (CUPTI's exit handlers come next);
 * cuda_storm_finish counts it to the end. Beginning refuses when copies
 * made meanwhile could not be counted.
 */
#define CUDA_STORM_QUIET_DROP_LAUNCHES "kernel launches counted but not timed (SASS metrics window)"
#define CUDA_STORM_QUIET_DROP_COPIES                                                               \
    "copies and memsets counted but not timed (SASS metrics window)"
int cuda_storm_quiet_begin(char *reason, size_t reason_size);
void cuda_storm_quiet_end(void);
void cuda_storm_quiet_end_later(void);
/* Launches the SASS windows' quiet left untimed so far (an open one's
 * included). */
uint64_t cuda_storm_quiet_untimed(void);

/* After the sampler stopped: charges the last launches, publishes the
 * untimed launches and copies as drops (a launch storm's and a SASS
 * window's), and reports the guard. */
void cuda_storm_finish(void);

#endif /* FLARE_BACKEND_CUDA_STORM_H */
