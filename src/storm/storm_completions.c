/*
 * storm_completions.c: the launch-storm guard over the simulated device's work
 * (storm_completions.h).
 *
 * The simulated device reports its work on completion, and the decision to
 * record a completion is taken right there, so what is counted untimed is
 * counted exactly (the guard's own estimate, which the CUDA tracer needs
 * because CUPTI switches late, is not used). Only the collector's beat
 * steps the guard; the completion path reads one flag and adds to counts.
 * Must never block or allocate on the completion path.
 */
#include "storm/storm_completions.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/runtime.h"
#include "flare/flare.h"
#include "storm/storm_guard.h"
#include "storm/storm_record.h"
#include "deepwin/deepwin_session.h"

/* Collector thread only between begin and end (begin and end run while no
 * beat can: before the collector starts, after it stopped). */
static storm_guard *guard;
static bool storm_announced;
/* Capability and drop rows live as long as the process: rows this module
 * wrote for an earlier session are stale until this one says otherwise. */
static bool stale_rows;

/* Replaces stale rows of an earlier session with this one's plain answer. */
static void clear_stale_rows(const char *why)
{
    if (!stale_rows)
        return;
    core_drops_set("storm_guard", STORM_GUARD_DROP_LAUNCHES, 0);
    core_drops_set("storm_guard", STORM_GUARD_DROP_COPIES, 0);
    core_capability_set("storm_guard", 0, CORE_CAPABILITY_OFF, "%s", why);
    stale_rows = false;
}

static _Atomic bool active; /* a guard runs: completions are counted */
static _Atomic bool timing = true;
static _Atomic bool in_storm; /* the guard's state, for other threads */
/* A storm still running when the guard ended, for the last batch. */
static bool running_at_end;
static storm_guard_period period_at_end;
/* A storm that ended on the collector's last beats, after recording had
 * stopped (its ring refuses events then), for the last batch too. */
static bool finished_at_end;
static storm_guard_period finished_period_at_end;
static _Atomic uint64_t kernels_seen;
static _Atomic uint64_t untimed_kernels;
static _Atomic uint64_t untimed_copies;
/* The guard's switches (storm_completions_switches): written by the
 * collector thread only, each entry before the count that publishes it. */
static storm_completions_switch switches[STORM_COMPLETIONS_SWITCHES_MAX];
static _Atomic size_t switch_count;

void storm_completions_begin(uint64_t now_ns)
{
    storm_completions_end(); /* a session that never ended cleanly */
    running_at_end = false;
    finished_at_end = false;
    atomic_store(&timing, true);
    atomic_store(&kernels_seen, 0);
    atomic_store(&untimed_kernels, 0);
    atomic_store(&untimed_copies, 0);
    atomic_store(&switch_count, 0);
    storm_announced = false;
    const char *text = getenv("FLARE_STORM_RATE");
    if (text == NULL) {
        clear_stale_rows("not asked for in this session (FLARE_STORM_RATE unset)");
        return;
    }
    storm_guard_config config;
    storm_guard_default_config(&config);
    char error[160];
    if (storm_guard_parse_rate(text, &config.enter_rate, error, sizeof(error)) != FLARE_OK) {
        core_log(CORE_LOG_WARNING, "FLARE_STORM_RATE: %s; using %u launches/s", error,
                 STORM_GUARD_DEFAULT_RATE);
        config.enter_rate = STORM_GUARD_DEFAULT_RATE;
    }
    if (config.enter_rate == 0) {
        clear_stale_rows("switched off in this session (FLARE_STORM_RATE=0)");
        return;
    }
    if (storm_guard_create(&config, now_ns, 0, &guard) != FLARE_OK) {
        guard = NULL;
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE, "out of memory");
        return;
    }
    atomic_store(&active, true);
}

bool storm_completions_record(bool kernel)
{
    if (!atomic_load_explicit(&active, memory_order_relaxed))
        return true; /* no guard: nothing to count */
    if (kernel)
        atomic_fetch_add_explicit(&kernels_seen, 1, memory_order_relaxed);
    if (atomic_load_explicit(&timing, memory_order_relaxed))
        return true;
    atomic_fetch_add_explicit(kernel ? &untimed_kernels : &untimed_copies, 1, memory_order_relaxed);
    return false;
}

/* Collector thread: notes a switch of the guard's answer, the time read now. */
static void note_switch(bool timed)
{
    size_t count = atomic_load_explicit(&switch_count, memory_order_relaxed);
    if (count >= STORM_COMPLETIONS_SWITCHES_MAX)
        return;
    switches[count] = (storm_completions_switch){.at_ns = core_now_ns(), .timed = timed};
    atomic_store_explicit(&switch_count, count + 1, memory_order_release);
}

/* Collector thread: hands the guard's answer to the completion path, and
 * notes it when it changed, its time read on the side of the change that
 * keeps an untimed stretch exact (storm_completions_switch). */
static void apply_answer(bool timed)
{
    if (timed == atomic_load_explicit(&timing, memory_order_relaxed))
        return;
    if (timed)
        note_switch(true);
    atomic_store_explicit(&timing, timed, memory_order_relaxed);
    if (!timed)
        note_switch(false);
}

/* Collector thread: the storm the step ended, if it ended one, through
 * the ring; kept for the last batch when the session is already ending. */
static void record_finished(void)
{
    storm_guard_period period;
    if (!storm_guard_take_finished(guard, &period) || storm_record_period(-1, &period, false))
        return;
    if (core_active_generation() == 0) {
        finished_at_end = true;
        finished_period_at_end = period;
    }
}

void storm_completions_beat(uint64_t now_ns)
{
    if (guard == NULL)
        return;
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    bool hold = coordinator != NULL && deepwin_blackout_active(coordinator);
    bool was_storm = storm_guard_in_storm(guard);
    bool timed = storm_guard_step(guard, now_ns,
                                  atomic_load_explicit(&kernels_seen, memory_order_relaxed), hold);
    apply_answer(timed);
    atomic_store_explicit(&in_storm, storm_guard_in_storm(guard), memory_order_relaxed);
    record_finished();
    if (!was_storm && storm_guard_in_storm(guard) && !storm_announced) {
        storm_announced = true; /* once: a test may storm and calm many times */
        core_log(CORE_LOG_INFO,
                 "launch storm on the simulated device: its work is recorded only in sample "
                 "slices and deep windows; the rest is counted (FLARE_STORM_RATE)");
    }
}

void storm_completions_end(void)
{
    if (guard == NULL)
        return;
    atomic_store(&active, false);
    uint64_t kernels = atomic_load(&untimed_kernels), copies = atomic_load(&untimed_copies);
    /* No simulated work: this process's device is another's (the CUDA
     * tracer's guard owns the storm_guard rows there; never overwrite). */
    if (atomic_load(&kernels_seen) == 0 && copies == 0) {
        storm_guard_destroy(guard);
        guard = NULL;
        clear_stale_rows("no simulated work in this session");
        return;
    }
    /* The collector has stopped: the running storm waits for the session's
     * last batch (storm_completions_write_last) instead of a ring. */
    running_at_end = storm_guard_running(guard, &period_at_end);
    core_drops_set("storm_guard", STORM_GUARD_DROP_LAUNCHES, kernels);
    core_drops_set("storm_guard", STORM_GUARD_DROP_COPIES, copies);
    char summary[320];
    storm_guard_describe(guard, kernels, copies, summary, sizeof(summary));
    core_capability_set("storm_guard", 1, CORE_CAPABILITY_ACTIVE, "%s (simulated device)", summary);
    stale_rows = true;
    storm_guard_destroy(guard);
    guard = NULL;
    atomic_store(&timing, true);
    atomic_store(&in_storm, false);
}

static void write_period(store *database, int64_t pid, const storm_guard_period *period,
                         bool still_open)
{
    store_storm_row row = {.pid = pid,
                           .device = -1,
                           .start_ns = period->start_ns,
                           .end_ns = period->end_ns,
                           .untimed_launches = period->untimed_launches,
                           .still_open = still_open};
    if (store_put_storm(database, &row) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "the last launch storm was not recorded: %s",
                 store_last_error(database));
}

void storm_completions_write_last(store *database, int64_t pid)
{
    if (finished_at_end)
        write_period(database, pid, &finished_period_at_end, false);
    if (running_at_end)
        write_period(database, pid, &period_at_end, true);
    finished_at_end = false;
    running_at_end = false;
}

bool storm_completions_in_storm(void)
{
    return atomic_load_explicit(&in_storm, memory_order_relaxed);
}

size_t storm_completions_switches(storm_completions_switch *out, size_t max)
{
    size_t count = atomic_load_explicit(&switch_count, memory_order_acquire);
    for (size_t i = 0; i < count && i < max; i++)
        out[i] = switches[i];
    return count;
}
