/*
 * storm_guard.h: decides when per-kernel GPU timing stops during a launch
 * storm and when it comes back, and counts the launches left untimed.
 *
 * Why: CUPTI's kernel activity adds about 0.7 us to every launch on the
 * H200 (docs/PERFORMANCE.md), so a program launching 200,000 tiny kernels a
 * second runs 17-30% slower traced, with no tracer able to avoid it while it
 * times every kernel. Above a launch rate the guard stops timing each kernel
 * and times short sample slices instead; every launch is still counted (the
 * driver's launch callback), and the untimed ones reach the report as a
 * drop, never silently.
 *
 * Owns nothing but the guard's own state. Pure logic on a caller's clock
 * and launch count: the caller (the CUDA tracer's sampler thread) switches
 * CUPTI. One thread steps a guard; a step never allocates, locks, blocks or
 * reads a clock.
 */
#ifndef FLARE_STORM_STORM_GUARD_H
#define FLARE_STORM_STORM_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct storm_guard_config {
    uint64_t enter_rate; /* launches per second that start a storm; 0: the guard is off */
    uint64_t confirm_ns; /* the rate must hold this long before timing stops */
    uint64_t calm_ns;    /* a rate under half of enter_rate this long ends the storm */
    uint64_t
        sample_every_ns;    /* in a storm, a sample slice (every kernel timed) starts this often */
    uint64_t sample_for_ns; /* and lasts this long */
} storm_guard_config;

/* The defaults: 50,000 launches/s (CUPTI's 0.7 us per launch then costs
 * 3.5% of the launching thread), confirmed over 50 ms, calm after 500 ms,
 * a 20 ms sample slice every second. */
#define STORM_GUARD_DEFAULT_RATE 50000u
void storm_guard_default_config(storm_guard_config *config);

/* Parses a rate as FLARE_STORM_RATE gives it: "0", "0/s" or "off" (guard off), or
 * launches per second, 1000 to 100000000, optionally followed by "/s".
 * 0, or FLARE_ERR_INVALID_ARGUMENT with error naming the problem. */
int storm_guard_parse_rate(const char *text, uint64_t *rate, char *error, size_t error_size);

typedef struct storm_guard storm_guard;

/* 0 with *out set, FLARE_ERR_INVALID_ARGUMENT (a sample slice that is empty
 * or not shorter than its period, or a zero confirm/calm time) or
 * FLARE_ERR_NO_MEMORY. launches: the launch count at now_ns. */
int storm_guard_create(const storm_guard_config *config, uint64_t now_ns, uint64_t launches,
                       storm_guard **out);
void storm_guard_destroy(storm_guard *guard);

/* One step, at least every few ms while the program runs. launches: the
 * process's launch count now (monotonic). hold: something needs every kernel
 * timed now (a deep window is open); a storm keeps running underneath and
 * its launches count as timed. Returns whether every kernel should be timed
 * from now until the next step. Launches since the previous step (or the
 * last settle) count as untimed when that step returned false. */
bool storm_guard_step(storm_guard *guard, uint64_t now_ns, uint64_t launches, bool hold);

/* The caller finished switching CUPTI when the launch count was launches.
 * A launch made while CUPTI switched may or may not have been timed, either
 * way: it is charged untimed, so the untimed count may run high by a
 * switch's worth, never low (a launch neither timed nor counted would be
 * silent loss). Without it, a switch on charges its latency as timed. */
void storm_guard_settle(storm_guard *guard, uint64_t launches);

/* Another switch (a SASS window's quiet, cuda_storm.h) takes the launches
 * from here: charge brings the guard's count up to launches under its
 * current answer; skip moves it to launches without charging any (the
 * other switch counted them). */
void storm_guard_charge(storm_guard *guard, uint64_t launches);
void storm_guard_skip(storm_guard *guard, uint64_t launches);

/* Whether a storm is running (sample slices and holds included). */
bool storm_guard_in_storm(const storm_guard *guard);
/* Storms begun, and their time so far (a running storm counts up to the
 * last step). */
uint64_t storm_guard_storms(const storm_guard *guard);
uint64_t storm_guard_storm_ns(const storm_guard *guard);
/* Launches left untimed so far. */
uint64_t storm_guard_untimed_launches(const storm_guard *guard);
/* A storm as the session records it (table storms): from the step that
 * began it to the step that ended it, and the launches charged untimed
 * in between. */
typedef struct storm_guard_period {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t untimed_launches;
} storm_guard_period;

/* The storm the guard last ended, once: true with *out filled the first
 * time it is asked after the step that ended it, false otherwise. */
bool storm_guard_take_finished(storm_guard *guard, storm_guard_period *out);
/* The running storm up to the last step: true with *out filled, false
 * when there is none (a session ending during a storm records it so). */
bool storm_guard_running(const storm_guard *guard, storm_guard_period *out);

/* Sample slices begun. */
uint64_t storm_guard_sample_slices(const storm_guard *guard);

/* The drop details the guard's untimed work is stored under (source
 * "storm_guard"); `flare report` adds them up by these words. */
#define STORM_GUARD_DROP_LAUNCHES "kernel launches counted but not timed (launch storm)"
#define STORM_GUARD_DROP_COPIES   "copies and memsets counted but not timed (launch storm)"

/* The guard's summary for its capability row: rate, storms and their time,
 * what was left untimed (the caller's counts), sample slices. */
void storm_guard_describe(const storm_guard *guard, uint64_t untimed_launches,
                          uint64_t untimed_copies, char *buffer, size_t size);

#endif /* FLARE_STORM_STORM_GUARD_H */
