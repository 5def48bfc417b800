/*
 * cuda_storm.c: the CUDA tracer's switches of CUPTI's activity. The
 * sampler thread (cuda_trace.c) steps the launch-storm guard (src/storm)
 * here: during a storm CUPTI's activity (kernels, copies, memsets, external
 * correlations) is switched off between short sample slices, every launch
 * is still counted, and the launches and copies left untimed are reported
 * as drops and in the guard's capability row. A failed switch stops the
 * guard with every kind CUPTI lets it switch back on timed. A SASS metrics
 * window's quiet (cuda_storm.h) switches every kind off while it is open,
 * from flare's collector thread; its launches and copies are counted apart.
 *
 * The switching state is under switch_lock, taken by the sampler and
 * flare's collector only; the program's threads only touch the copy counts
 * (cuda_storm_count_copy) and the quiet's late end, with relaxed atomics.
 * Must never switch CUPTI from a program thread, block one, or leave a copy
 * or launch that went untimed uncounted (the count may run high by a
 * switch's worth, never low).
 */
#include "backend/cuda/cuda_storm.h"
#include "backend/cuda/cuda_host.h"
#include "backend/cuda/cuda_pc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_trace.h"
#include "core/capability.h"
#include "backend/cuda/cuda_app_thread.h"
#include "backend/cuda/cuda_graph_weights.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/mode.h"
#include "flare/flare.h"
#include "storm/storm_guard.h"
#include "storm/storm_record.h"

/* How often the sampler thread steps the launch-storm guard. */
#define STORM_STEP_NS 10000000ull

/* CUPTI as cuda_trace.c loaded it (set with the guard). */
static const cuda_cupti_api *cupti;
/* Copies and memsets while a launch storm has their activity off: counted
 * by the copy entry points' callbacks (relaxed: a count, read after the
 * sampler thread stopped). */
static _Atomic int copies_untimed_now;
static _Atomic uint64_t copies_untimed;
/* The same while a SASS metrics window has every kind off (its own count). */
static _Atomic int quiet_now;
static _Atomic uint64_t quiet_copies_untimed;

bool cuda_storm_untimed_now(void)
{
    return atomic_load_explicit(&copies_untimed_now, memory_order_relaxed) != 0;
}

void cuda_storm_count_copy(CUpti_CallbackId id)
{
    if (atomic_load_explicit(&copies_untimed_now, memory_order_relaxed) &&
        cuda_replay_is_copy(id)) {
        /* A launch storm or a SASS window has copy and memset activity off:
         * count them. */
        atomic_fetch_add_explicit(atomic_load_explicit(&quiet_now, memory_order_relaxed)
                                      ? &quiet_copies_untimed
                                      : &copies_untimed,
                                  1, memory_order_relaxed);
    }
}

void cuda_storm_count_graph_copies(uint32_t copies)
{
    if (copies != 0 && atomic_load_explicit(&copies_untimed_now, memory_order_relaxed))
        atomic_fetch_add_explicit(atomic_load_explicit(&quiet_now, memory_order_relaxed)
                                      ? &quiet_copies_untimed
                                      : &copies_untimed,
                                  copies, memory_order_relaxed);
}

/* The guard's launch count: host launches, and for each launch of a
 * weighed CUDA graph its kernel nodes beyond the one host launch. */
static uint64_t guard_launches(void)
{
    return cuda_session_host->launch_count() + cuda_graph_weights_extra_launches();
}

/* ---- Launch-storm guard (sampler thread only, once started) ---- */

static storm_guard *guard; /* NULL: off */
static storm_guard_config guard_config;
/* The activity kinds a storm switches off: every kind flare enabled, since
 * any enabled kind costs every launch (bare CUPTI on the H200: copy and
 * memset activity alone took 12% of the launch rate; with every kind off,
 * launch callbacks alone cost nothing measurable; docs/PERFORMANCE.md). */
static CUpti_ActivityKind storm_kinds[CUDA_STORM_KINDS_MAX];
static bool storm_kind_on[CUDA_STORM_KINDS_MAX];
static size_t storm_kind_count;
static int activity_on = 1; /* kernel activity is enabled now */
/* Switching CUPTI failed: the guard steps no more. If kernel activity was
 * left off, every launch from launches_when_broken on is untimed. */
static int guard_broken;
static uint64_t launches_when_broken;
/* What switching CUPTI costs the sampler thread (and, if CUPTI locks, the
 * launching threads): reported with the guard's summary. */
static uint64_t switches, switch_ns_total, switch_ns_longest;

/* The quiet of a SASS metrics window (cuda_storm_quiet_begin): every kind
 * off while it is open. The switching and the state above are under
 * switch_lock: the sampler thread and flare's threads switch (never a
 * program's thread: cuda_storm_quiet_end from one is left to the sampler),
 * and cuda_storm_quiet_untimed reads under it. */
static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;
static bool quiet;                   /* under switch_lock */
static uint64_t quiet_launches_from; /* under switch_lock: the launch count at its begin */
static _Atomic uint64_t quiet_untimed;
static _Atomic int quiet_end_asked;

void cuda_storm_watch_kind(const cuda_cupti_api *cupti_api, CUpti_ActivityKind kind)
{
    cupti = cupti_api; /* a SASS window's quiet switches them, guard or not */
    if (storm_kind_count >= CUDA_STORM_KINDS_MAX)
        return;
    storm_kinds[storm_kind_count] = kind;
    storm_kind_on[storm_kind_count++] = true;
}

size_t cuda_storm_kinds(CUpti_ActivityKind *out, size_t max)
{
    size_t count = storm_kind_count < max ? storm_kind_count : max;
    memcpy(out, storm_kinds, count * sizeof(*out));
    return count;
}

/* The launch-storm guard, when kernels are timed: FLARE_STORM_RATE (the
 * CLI refuses a bad value before the command runs; here it is logged). */
void cuda_storm_set_up(const cuda_cupti_api *cupti_api, int launches_counted)
{
    cupti = cupti_api;
    storm_guard_default_config(&guard_config);
    const char *text = getenv("FLARE_STORM_RATE");
    char error[160];
    core_mode mode;
    if (text == NULL && core_mode_from_environment(&mode, error, sizeof(error)) == FLARE_OK &&
        !core_mode_spec_of(mode)->storm_guard) {
        core_capability_set("storm_guard", 0, CORE_CAPABILITY_OFF,
                            "off in the %s mode: every kernel is timed (--storm-rate turns it on)",
                            core_mode_spec_of(mode)->name);
        return;
    }
    if (text != NULL &&
        storm_guard_parse_rate(text, &guard_config.enter_rate, error, sizeof(error)) != FLARE_OK) {
        core_log(CORE_LOG_WARNING, "FLARE_STORM_RATE: %s; using %u launches/s", error,
                 STORM_GUARD_DEFAULT_RATE);
        guard_config.enter_rate = STORM_GUARD_DEFAULT_RATE;
    }
    if (guard_config.enter_rate == 0) {
        core_capability_set("storm_guard", 0, CORE_CAPABILITY_OFF,
                            "switched off (FLARE_STORM_RATE=0): every kernel is timed");
        return;
    }
    /* The guard measures the rate with the launch callbacks' count. */
    if (!launches_counted) {
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "needs the launch callbacks (no launch count to judge a storm by)");
        return;
    }
    if (storm_guard_create(&guard_config, core_now_ns(), guard_launches(), &guard) != FLARE_OK) {
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE, "out of memory");
        guard = NULL;
        return;
    }
    core_capability_set("storm_guard", 1, CORE_CAPABILITY_ACTIVE, "over %llu launches/s",
                        (unsigned long long)guard_config.enter_rate);
}

void cuda_storm_abandon(void)
{
    if (guard != NULL) { /* nothing would step it */
        storm_guard_destroy(guard);
        guard = NULL;
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "the sampler thread did not start; every kernel is timed");
    }
}

static void guard_step(void);
static void quiet_end_locked(void);
static void break_guard(CUptiResult result, uint64_t launches);

/* Switches every storm kind on or off. On a failure every kind is switched
 * back on where CUPTI lets it (timing everything is the safe state);
 * storm_kind_on then says what stands. */
static CUptiResult switch_activity(bool on)
{
    CUptiResult failure = CUPTI_SUCCESS;
    for (size_t i = 0; i < storm_kind_count && failure == CUPTI_SUCCESS; i++) {
        if (storm_kind_on[i] == on)
            continue;
        failure = on ? cupti->cuptiActivityEnable(storm_kinds[i])
                     : cupti->cuptiActivityDisable(storm_kinds[i]);
        if (failure == CUPTI_SUCCESS)
            storm_kind_on[i] = on;
    }
    for (size_t i = 0; failure != CUPTI_SUCCESS && i < storm_kind_count; i++)
        if (!storm_kind_on[i] && cupti->cuptiActivityEnable(storm_kinds[i]) == CUPTI_SUCCESS)
            storm_kind_on[i] = true;
    return failure;
}

/* Whether kind is one the guard switches and it is off now (a kind CUPTI
 * refused at start was never on, and is no business of the guard's). */
static bool storm_kind_is_off(CUpti_ActivityKind kind)
{
    for (size_t i = 0; i < storm_kind_count; i++)
        if (storm_kinds[i] == kind)
            return !storm_kind_on[i];
    return false;
}

/* A switch failed (result): the guard stops, with what CUPTI was left doing. */
static void break_guard(CUptiResult result, uint64_t launches)
{
    guard_broken = 1;
    activity_on = !storm_kind_is_off(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    atomic_store_explicit(&copies_untimed_now,
                          storm_kind_is_off(CUPTI_ACTIVITY_KIND_MEMCPY) ||
                              storm_kind_is_off(CUPTI_ACTIVITY_KIND_MEMSET),
                          memory_order_relaxed);
    if (activity_on) {
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "switching CUPTI's activity failed (%s); every kernel is timed from "
                            "then on",
                            cuda_cupti_error_text(cupti, result));
        return;
    }
    launches_when_broken = launches;
    core_capability_set("kernels", 1, CORE_CAPABILITY_DEGRADED,
                        "kernel activity could not be switched back on after a launch storm "
                        "(%s); later kernels are counted (drops: storm_guard), not timed",
                        cuda_cupti_error_text(cupti, result));
    core_log(CORE_LOG_WARNING,
             "kernel timing could not be switched back on after a launch storm: %s",
             cuda_cupti_error_text(cupti, result));
}

void cuda_storm_step(void)
{
    pthread_mutex_lock(&switch_lock);
    /* Under the lock: a window's begin clears a late end that it follows. */
    if (atomic_exchange(&quiet_end_asked, 0))
        quiet_end_locked();
    if (guard != NULL && !guard_broken && !quiet)
        guard_step();
    pthread_mutex_unlock(&switch_lock);
}

/* One step of the guard, under switch_lock; nothing while a SASS window
 * has every kind off (its launches are counted as the quiet's). */
static void guard_step(void)
{
    /* A deep window wants every kernel: the storm goes on underneath. */
    bool hold = cuda_session_host->deep_window_active() != 0;
    bool was_storm = storm_guard_in_storm(guard);
    /* Read together: a rate from a clock and a count taken apart is wrong. */
    uint64_t now_ns = core_now_ns();
    uint64_t launches = guard_launches();
    bool timed = storm_guard_step(guard, now_ns, launches, hold);
    storm_record_finished(guard, -1);
    if (!was_storm && storm_guard_in_storm(guard))
        core_log(CORE_LOG_INFO,
                 "launch storm (over %llu launches/s for %llu ms): kernels, copies and memsets "
                 "are timed only in %llu ms slices every %llu ms; every one is still counted "
                 "(FLARE_STORM_RATE=0 times every kernel)",
                 (unsigned long long)guard_config.enter_rate,
                 (unsigned long long)(guard_config.confirm_ns / 1000000),
                 (unsigned long long)(guard_config.sample_for_ns / 1000000),
                 (unsigned long long)(guard_config.sample_every_ns / 1000000));
    else if (was_storm && !storm_guard_in_storm(guard))
        core_log(CORE_LOG_INFO, "launch storm over; %llu launches so far counted but not timed",
                 (unsigned long long)storm_guard_untimed_launches(guard));
    if (timed == (activity_on != 0))
        return;
    if (!timed && cuda_pc_enabled()) {
        /* Beside PC sampling CUPTI refuses to switch kernel activity back
         * on (CUPTI_ERROR_NOT_COMPATIBLE on the H200, session 16: every
         * later kernel went untimed): the guard stands down instead. */
        guard_broken = 1;
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "PC sampling is enabled in this process, and CUPTI cannot switch "
                            "kernel activity back on beside it; every kernel stays timed");
        core_log(CORE_LOG_INFO, "launch storm: the guard stands down beside PC sampling; every "
                                "kernel stays timed");
        return;
    }
    if (!timed) {
        /* Copies are counted from before their activity stops until after
         * it is back: the count may run a switch's worth high, never low. */
        if (cuda_replay_watch_copies() != FLARE_OK) {
            guard_broken = 1;
            core_capability_set("storm_guard", 1, CORE_CAPABILITY_UNAVAILABLE,
                                "not every copy and memset entry point could be watched (an "
                                "untimed copy might go uncounted); every kernel stays timed");
            return;
        }
        atomic_store_explicit(&copies_untimed_now, 1, memory_order_relaxed);
    }
    uint64_t switch_started = core_now_ns();
    CUptiResult result = switch_activity(timed);
    uint64_t switch_ns = core_now_ns() - switch_started;
    switches++;
    switch_ns_total += switch_ns;
    if (switch_ns > switch_ns_longest)
        switch_ns_longest = switch_ns;
    /* A launch made while CUPTI switched may or may not have been timed:
     * counted untimed, so the count runs high by a switch's worth, never low
     * (charged as timed, a launch switched off early went neither timed nor
     * counted: 3 of 201,000 in an H200 run). */
    uint64_t settled = guard_launches();
    storm_guard_settle(guard, settled);
    if (result != CUPTI_SUCCESS) {
        break_guard(result, settled);
        return;
    }
    activity_on = timed;
    if (timed)
        atomic_store_explicit(&copies_untimed_now, 0, memory_order_relaxed);
}

/* ---- The quiet of a SASS metrics window ---- */

/* Whether the quiet counts its launches: only when it switched kernel
 * activity off itself (with none traced, or a storm's slice having it off,
 * nothing it did left a kernel untimed that would have been timed). */
static bool quiet_counts;
/* The copy callbacks could not be switched on for a quiet (said once). */
static _Atomic int quiet_copies_unwatched;

int cuda_storm_quiet_begin(char *reason, size_t reason_size)
{
    int status = FLARE_OK;
    pthread_mutex_lock(&switch_lock);
    /* A late end asked for by the last window's stop: that window's quiet
     * goes on as this one's. */
    atomic_store(&quiet_end_asked, 0);
    if (!quiet && storm_kind_count > 0 && cuda_pc_enabled()) {
        snprintf(reason, reason_size,
                 "SASS metrics need CUPTI's activity off while the window is open, and CUPTI "
                 "cannot switch kernel activity back on beside PC sampling");
        status = FLARE_ERR_BACKEND;
    } else if (!quiet) {
        /* The copy callbacks count what the quiet leaves untimed (on
         * already where API calls are recorded). */
        if (storm_kind_count > 0 && cuda_replay_watch_copies() != FLARE_OK &&
            !atomic_exchange(&quiet_copies_unwatched, 1))
            core_log(CORE_LOG_WARNING,
                     "not every copy and memset entry point could be watched: copies made "
                     "while a SASS metrics window is open may go uncounted");
        uint64_t launches = guard_launches();
        /* The guard's launches so far under its answer; the quiet's are its own. */
        if (guard != NULL && !guard_broken)
            storm_guard_charge(guard, launches);
        quiet_counts =
            storm_kind_count > 0 && !storm_kind_is_off(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        quiet_launches_from = launches;
        atomic_store_explicit(&quiet_now, 1, memory_order_relaxed);
        atomic_store_explicit(&copies_untimed_now, 1, memory_order_relaxed);
        CUptiResult result = storm_kind_count > 0 ? switch_activity(false) : CUPTI_SUCCESS;
        if (result != CUPTI_SUCCESS) {
            snprintf(reason, reason_size,
                     "SASS metrics need CUPTI's activity off while the window is open, and "
                     "switching it off failed: %s",
                     cuda_cupti_error_text(cupti, result));
            status = FLARE_ERR_BACKEND;
            /* switch_activity switched every kind back on where it could: the
             * guard stops, with what CUPTI was left doing. */
            if (guard != NULL && !guard_broken)
                break_guard(result, guard_launches());
        }
        quiet = result == CUPTI_SUCCESS;
        atomic_store_explicit(&quiet_now, quiet, memory_order_relaxed);
        atomic_store_explicit(&copies_untimed_now,
                              storm_kind_is_off(CUPTI_ACTIVITY_KIND_MEMCPY) ||
                                  storm_kind_is_off(CUPTI_ACTIVITY_KIND_MEMSET),
                              memory_order_relaxed);
    }
    pthread_mutex_unlock(&switch_lock);
    return status;
}

void cuda_storm_quiet_end(void)
{
    if (!cuda_app_thread_is_flare()) {
        /* A program's thread (flare_shutdown closing a window): never
         * switched there; the sampler's next step ends it. */
        cuda_storm_quiet_end_later();
        return;
    }
    pthread_mutex_lock(&switch_lock);
    quiet_end_locked();
    pthread_mutex_unlock(&switch_lock);
}

static void quiet_end_locked(void)
{
    if (!quiet)
        return;
    quiet = false;
    /* Back to what the guard had: on, unless a storm had them off. */
    bool on = guard == NULL || guard_broken || activity_on;
    CUptiResult result = storm_kind_count > 0 ? switch_activity(on) : CUPTI_SUCCESS;
    /* Counted after the switch: a launch made while CUPTI switched is
     * counted untimed (high by a switch's worth, never low). */
    uint64_t launches = guard_launches();
    if (quiet_counts)
        atomic_fetch_add(&quiet_untimed, launches - quiet_launches_from);
    if (guard != NULL && !guard_broken)
        storm_guard_skip(guard, launches); /* the quiet's, not the guard's */
    atomic_store_explicit(&quiet_now, 0, memory_order_relaxed);
    if (result != CUPTI_SUCCESS) {
        core_log(CORE_LOG_WARNING,
                 "kernel timing could not be switched back on after a SASS metrics window: %s",
                 cuda_cupti_error_text(cupti, result));
        if (guard != NULL && !guard_broken) {
            break_guard(result, launches); /* counts what stays untimed from here */
        } else {
            core_capability_set("kernels", 1, CORE_CAPABILITY_DEGRADED,
                                "kernel activity could not be switched back on after a SASS "
                                "metrics window (%s); later kernels are neither timed nor "
                                "counted",
                                cuda_cupti_error_text(cupti, result));
        }
    }
    atomic_store_explicit(&copies_untimed_now,
                          storm_kind_is_off(CUPTI_ACTIVITY_KIND_MEMCPY) ||
                              storm_kind_is_off(CUPTI_ACTIVITY_KIND_MEMSET),
                          memory_order_relaxed);
}

void cuda_storm_quiet_end_later(void)
{
    atomic_store(&quiet_end_asked, 1);
}

uint64_t cuda_storm_quiet_untimed(void)
{
    pthread_mutex_lock(&switch_lock);
    uint64_t untimed = atomic_load(&quiet_untimed);
    if (quiet && quiet_counts)
        untimed += guard_launches() - quiet_launches_from; /* the open quiet's so far */
    pthread_mutex_unlock(&switch_lock);
    return untimed;
}

uint64_t cuda_storm_next_wake(uint64_t now, uint64_t wake_ns)
{
    if (guard != NULL && !guard_broken && now + STORM_STEP_NS < wake_ns)
        wake_ns = now + STORM_STEP_NS;
    return wake_ns;
}

/* Launches counted but not timed so far (sampler thread, or after it stopped). */
uint64_t cuda_storm_untimed_launches(void)
{
    if (guard == NULL)
        return 0;
    uint64_t untimed = storm_guard_untimed_launches(guard);
    if (guard_broken && activity_on == 0 && launches_when_broken != 0)
        untimed += guard_launches() - launches_when_broken;
    return untimed;
}

/* After the sampler stopped: charges the last launches, reports the guard. */
void cuda_storm_finish(void)
{
    /* A SASS window still open keeps its quiet: it is flushed after this,
     * at the session's end, and any kind on would read its counts as 0. */
    core_drops_set("sass_metrics", CUDA_STORM_QUIET_DROP_LAUNCHES, cuda_storm_quiet_untimed());
    core_drops_set("sass_metrics", CUDA_STORM_QUIET_DROP_COPIES,
                   atomic_load(&quiet_copies_untimed));
    if (guard == NULL)
        return;
    if (!guard_broken) {
        storm_guard_step(guard, core_now_ns(), guard_launches(), false);
        storm_record_finished(guard, -1);
        storm_record_running(guard, -1);
    }
    uint64_t untimed = cuda_storm_untimed_launches();
    uint64_t copies = atomic_load(&copies_untimed);
    core_drops_set("storm_guard", STORM_GUARD_DROP_LAUNCHES, untimed);
    core_drops_set("storm_guard", STORM_GUARD_DROP_COPIES, copies);
    if (untimed != 0)
        cuda_trace_emit_metric(-1, "untimed_kernel_launches", core_now_ns(), (int64_t)untimed);
    uint64_t graph_kernels = cuda_graph_weights_kernels_launched();
    uint64_t unweighed = cuda_graph_weights_unweighed();
    if (graph_kernels != 0)
        cuda_trace_emit_metric(-1, "graph_kernels_launched", core_now_ns(), (int64_t)graph_kernels);
    if (!guard_broken || activity_on == 0) {
        char summary[320];
        char graphs[160] = "";
        storm_guard_describe(guard, untimed, copies, summary, sizeof(summary));
        if (unweighed != 0)
            snprintf(graphs, sizeof(graphs),
                     "; CUDA graph launches counted as their %llu kernel nodes (%llu graph(s) "
                     "not weighed: one launch each)",
                     (unsigned long long)graph_kernels, (unsigned long long)unweighed);
        else if (graph_kernels != 0)
            snprintf(graphs, sizeof(graphs),
                     "; CUDA graph launches counted as their %llu kernel nodes",
                     (unsigned long long)graph_kernels);
        core_capability_set("storm_guard", 1, CORE_CAPABILITY_ACTIVE,
                            "%s; %llu switch(es) of CUPTI, %.2f ms in all, longest %.2f ms%s",
                            summary, (unsigned long long)switches, (double)switch_ns_total / 1e6,
                            (double)switch_ns_longest / 1e6, graphs);
    }
    if (untimed != 0)
        core_log(CORE_LOG_INFO,
                 "launch storm guard: %llu storm(s), %.2f s; %llu launches counted but not timed",
                 (unsigned long long)storm_guard_storms(guard),
                 (double)storm_guard_storm_ns(guard) / 1e9, (unsigned long long)untimed);
}
