/*
 * cuda_pm.c: the CUPTI side of the PM sampling engine (cuda_pm.h).
 *
 * A table of CUPTI functions resolved here with dlsym on the libcupti handle
 * cuda_loader opened (kept in this file so the loader's owners need not
 * change), the pm_hardware_ops steps over them, and the set-up thread.
 * Every step returns a flare status with CUPTI's own words in the reason.
 */
#include "backend/cuda/cuda_pm.h"
#include "backend/cuda/cuda_engine_costs.h"
#include "backend/cuda/cuda_pc.h"

#include <cupti_pmsampling.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_pm_functions.h"
#include "backend/cuda/cuda_pm_hardware.h"
#include "backend/cuda/cuda_profiler_host.h"
#include "backend/cuda/cuda_replay.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pm/pm_engine.h"
#include "pm/pm_replay.h"
#include "rules/rule.h"

static cuda_pm_hardware hardware;
/* Range replay's own (pm/pm_replay.h), enabled per pass. A pass is decoded
 * at its stop, so the buffer holds all of it: 32 MiB (SetConfig 89 ms, not
 * 321) overflowed at 10 us on the H200 (3,646 of 5,657 samples lost). */
#define REPLAY_BUFFER_BYTES ((size_t)512 << 20)
static cuda_pm_hardware replay_hardware = {.buffer_bytes = REPLAY_BUFFER_BYTES,
                                           .free_image_at_release = 1};
static int api_resolved;
static pm_engine *engine;
static const pm_preset *chosen_preset;
static uint64_t chosen_interval_ns;
static _Atomic int setup_started;
/* Set up at the first context only when a window rule with engine pm or
 * auto (FLARE_DEEP_WHEN) or a scheduled window (FLARE_DEEP_AFTER, unless its
 * FLARE_DEEP_ENGINE is pc) will want PM samples; otherwise at the
 * first window. A program that exited while the set-up thread was inside
 * CUPTI crashed at exit on the H200 (SIGSEGV, 8 of 8 short runs under plain
 * `flare trace`; none with FLARE_PM=0), so a plain trace does not start
 * one. */
static int eager_setup;
/* Set-up threads inside CUPTI, or about to be: the process must not exit
 * under them (cuda_pm_wait_for_setup). */
static _Atomic int setup_running;
/* Set by the exit wait: no set-up starts after it (a window armed during
 * teardown must not start a thread into CUPTI as the runtime goes). */
static _Atomic int exiting;
static _Atomic(CUcontext) first_context;
/* The context created last, to take first_context's place when that one is
 * destroyed before a lazy set-up used it (NULL once destroyed itself). */
static _Atomic(CUcontext) latest_context;

const pm_hardware_ops *cuda_pm_replay_hardware(int device, void **opaque, uint64_t *context_id)
{
    (void)device;
    /* Not beside PC sampling either (see cuda_pm_replay_context_created):
     * spans are declined, saying there is no PM sampling for replay. */
    if (!api_resolved || cuda_pc_enabled())
        return NULL;
    *opaque = &replay_hardware;
    *context_id = CUDA_PM_REPLAY_CONTEXT_ID;
    return &cuda_pm_hardware_ops;
}

/* ---- the backend table ---- */

static void start_setup(void);

static int engine_arm(int device, const backend_engine_config *config, uint64_t now_ns,
                      char *reason, size_t reason_size)
{
    /* Lazy set-up (no rule, no schedule): the first window starts it and
     * runs without samples ("preparing"); later windows have them. */
    if (!atomic_load(&setup_started))
        start_setup();
    return pm_engine_arm(engine, device, config, now_ns, reason, reason_size);
}

static int engine_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    return pm_engine_disarm(engine, device, now_ns, result);
}

static int engine_probe(int device, char *reason, size_t reason_size)
{
    return pm_engine_probe(engine, device, reason, reason_size);
}

static void engine_prepare(int device)
{
    /* One engine per process, set up on the first context's device. */
    (void)device;
    if (!atomic_load(&setup_started))
        start_setup();
}

/* Engine auto passes PM sampling over where it can never be set up. */
static const char *engine_unusable(void)
{
    return cuda_pc_enabled() ? "never set up beside PC sampling (enabled in this process)" : NULL;
}

static const backend_engine_ops cuda_engine_ops = {
    .name = "cuda-pm",
    .unusable = engine_unusable,
    .arm = engine_arm,
    .disarm = engine_disarm,
    .probe = engine_probe,
    .prepare = engine_prepare,
    .cost_launch_ns = CUDA_PM_COST_LAUNCH_NS,
    .cost_gpu = CUDA_PM_COST_GPU,
    .cost_source = CUDA_ENGINE_COST_SOURCE,
};

const backend_engine_ops *cuda_pm_engine(void)
{
    return &cuda_engine_ops;
}

/* ---- install and set-up ---- */

/* Whether a rule of text (FLARE_DEEP_WHEN) opens PM windows: its action is
 * window. Rules that only replay must not have PM sampling set up early: a
 * prepared engine holds the device's counters, which the replay's range
 * profiler then cannot have (HARDWARE_BUSY). */
static void *setup_body(void);

static void *setup_main(void *argument)
{
    /* Named for top -H and ps, and the H200 soak check's CPU times. */
    pthread_setname_np(pthread_self(), "flare-pm-setup");
    (void)argument;
    setup_body();
    atomic_fetch_sub(&setup_running, 1);
    return NULL;
}

static void *setup_body(void)
{
    CUcontext context = atomic_load(&first_context);
    uint32_t device = 0;
    char reason[256] = "";
    if (context == NULL) {
        /* Destroyed between the start and now; the next window retries. */
        atomic_store(&setup_started, 0);
        return NULL;
    }
    CUptiResult result = hardware.api.cuptiGetDeviceId(context, &device);
    if (result != CUPTI_SUCCESS) {
        snprintf(reason, sizeof(reason), "cuptiGetDeviceId: %s",
                 cuda_pm_result_text(&hardware.api, result));
        pm_engine_mark_failed(engine, reason);
        core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return NULL;
    }
    int status = pm_engine_prepare(engine, (int)device, chosen_preset, chosen_interval_ns, reason,
                                   sizeof(reason));
    if (status != FLARE_OK) {
        core_log(CORE_LOG_WARNING, "PM sampling unavailable: %s", reason);
        core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return NULL;
    }
    pm_engine_stats stats;
    pm_engine_stats_get(engine, &stats);
    core_capability_set("pm_sampling", 1, CORE_CAPABILITY_ACTIVE,
                        "prepared on device %u (%s): preset %s, %zu metrics, 1 pass, every "
                        "%llu ns; set-up %.0f ms (host config %.0f, enable+config %.0f) paid "
                        "after the first context",
                        device, hardware.chip, chosen_preset->name, hardware.resolved.count,
                        (unsigned long long)chosen_interval_ns, stats.prepare_ns / 1e6,
                        hardware.host_setup_ns / 1e6, hardware.enable_ns / 1e6);
    return NULL;
}

/* Starts the set-up thread once, on the first context. */
static void start_setup(void)
{
    if (engine == NULL || atomic_load(&first_context) == NULL)
        return;
    /* Enabling PM sampling on a context with PC sampling enabled crashed
     * the program inside CUPTI on the H200 (SIGSEGV, 2 of 2 runs, session
     * 15): one or the other per process, and PC sampling is enabled first
     * (at context creation) when a window asks for it. */
    if (cuda_pc_enabled()) {
        if (!atomic_exchange(&setup_started, 1)) {
            const char *why = "off: PC sampling is enabled in this process (a window may ask "
                              "for engine pc or auto), and CUPTI crashed setting PM sampling "
                              "up beside it";
            pm_engine_mark_failed(engine, why);
            core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", why);
        }
        return;
    }
    /* Marked running before the exit flag is read: the exit wait either
     * sees this thread coming or this sees the exit, never neither. */
    atomic_fetch_add(&setup_running, 1);
    if (atomic_load(&exiting) || atomic_exchange(&setup_started, 1)) {
        atomic_fetch_sub(&setup_running, 1);
        return;
    }
    pm_engine_mark_preparing(engine);
    core_capability_set("pm_sampling", 1, CORE_CAPABILITY_DEGRADED,
                        "preparing (config image, enable) after the first context");
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int error = pthread_create(&thread, &attributes, setup_main, NULL);
    if (error != 0)
        atomic_fetch_sub(&setup_running, 1);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
    if (error != 0) {
        pm_engine_mark_failed(engine, "cannot start the PM sampling set-up thread");
        core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "cannot start the PM sampling set-up thread");
    }
}

static _Atomic int replay_setup_started;

static void *replay_setup_main(void *argument)
{
    /* Named for top -H and ps. */
    pthread_setname_np(pthread_self(), "flare-pm-replay");
    pm_replay_prepare_early((int)(intptr_t)argument);
    atomic_fetch_sub(&setup_running, 1);
    return NULL;
}

void cuda_pm_replay_context_created(int device)
{
    /* Never beside PC sampling: enabling PM sampling on a context with PC
     * sampling on crashed the program inside CUPTI on the H200 (start_setup). */
    if (!api_resolved || cuda_pc_enabled())
        return;
    /* Counted before the exit flag is read, as start_setup does: the exit
     * wait sees this thread coming or it sees the exit. */
    atomic_fetch_add(&setup_running, 1);
    if (atomic_load(&exiting) || atomic_exchange(&replay_setup_started, 1)) {
        atomic_fetch_sub(&setup_running, 1);
        return;
    }
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous); /* the program's signals stay its own */
    if (pthread_create(&thread, &attributes, replay_setup_main, (void *)(intptr_t)device) != 0)
        atomic_fetch_sub(&setup_running, 1); /* the first span sets up instead */
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
}

void cuda_pm_context_destroying(CUcontext context)
{
    /* A lazy set-up must not start later on a context that is gone: a
     * later context takes its place, or the next one created does. */
    CUcontext expected = context;
    atomic_compare_exchange_strong(&latest_context, &expected, NULL);
    expected = context;
    if (!atomic_load(&setup_started))
        atomic_compare_exchange_strong(&first_context, &expected, atomic_load(&latest_context));
}

void cuda_pm_context_created(CUcontext context)
{
    if (engine == NULL)
        return;
    atomic_store(&latest_context, context);
    CUcontext none = NULL;
    atomic_compare_exchange_strong(&first_context, &none, context);
    if (eager_setup)
        start_setup();
}

void cuda_pm_wait_for_setup(uint64_t timeout_ns)
{
    atomic_store(&exiting, 1);
    uint64_t deadline = core_now_ns() + timeout_ns;
    while (atomic_load(&setup_running) && core_now_ns() < deadline) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    if (atomic_load(&setup_running))
        core_log(CORE_LOG_WARNING,
                 "PM sampling set-up still running at exit after %.1f s; exiting anyway",
                 (double)timeout_ns / 1e9);
}

/* The windows' engine (NULL until installed). */
pm_engine *cuda_pm_core(void)
{
    return engine;
}

const backend_engine_ops *cuda_pm_deep_engine(void)
{
    /* None until installed, and none when PM sampling is off or missing:
     * windows then open without an engine, saying so. */
    return engine != NULL ? cuda_pm_engine() : NULL;
}

/* The whole number in variable name, minimum to maximum, or fallback
 * (unset, or not such a number: said). */
static long env_whole(const char *name, long minimum, long maximum, long fallback)
{
    const char *text = getenv(name);
    if (text == NULL)
        return fallback;
    char *end = NULL;
    long wanted = strtol(text, &end, 10);
    if (end != text && *end == '\0' && wanted >= minimum && wanted <= maximum)
        return wanted;
    core_log(CORE_LOG_WARNING, "%s='%.16s' is not a whole number from %ld to %ld; using %ld", name,
             text, minimum, maximum, fallback);
    return fallback;
}

/* Range replay's evaluating threads: FLARE_PM_EVALUATE_THREADS, else half
 * the CPUs online, 1 to 8. */
static int evaluate_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long half = cpus >= 16 ? 8 : cpus >= 4 ? cpus / 2 : 1;
    return (int)env_whole("FLARE_PM_EVALUATE_THREADS", 1, CUDA_PM_EVALUATE_THREADS_MAX, half);
}

void cuda_pm_install(const cuda_cupti_api *cupti)
{
    if (engine != NULL)
        return;
    const char *wanted = getenv("FLARE_PM");
    if (wanted != NULL && strcmp(wanted, "0") != 0 && strcmp(wanted, "1") != 0) {
        core_log(CORE_LOG_WARNING, "FLARE_PM='%.16s' is not 0 or 1; using the default", wanted);
        wanted = NULL;
    }
    if (wanted != NULL && strcmp(wanted, "0") == 0) {
        core_capability_set("pm_sampling", 0, CORE_CAPABILITY_OFF, "switched off (FLARE_PM=0)");
        return;
    }
    char reason[384] = "";
    if (cupti == NULL || cupti->library == NULL) {
        snprintf(reason, sizeof(reason), "libcupti is not loaded");
    } else {
#define PM_FUNCTION_RESOLVE_(name, result, arguments)                                              \
    if (reason[0] == '\0') {                                                                       \
        *(void **)(&hardware.api.name) = dlsym(cupti->library, #name);                             \
        if (hardware.api.name == NULL)                                                             \
            snprintf(reason, sizeof(reason),                                                       \
                     "symbol %s missing in %.120s (CUPTI too old for PM "                          \
                     "sampling)",                                                                  \
                     #name, cupti->path);                                                          \
    }
        PM_FUNCTIONS(PM_FUNCTION_RESOLVE_)
#undef PM_FUNCTION_RESOLVE_
    }
    /* Range replay by PM sampling uses the same functions on an instance
     * of its own, whatever becomes of the windows' engine below. */
    if (reason[0] == '\0') {
        replay_hardware.api = hardware.api;
        api_resolved = 1;
        /* A study's knob (docs/replay.md): the hardware buffer in MiB. */
        replay_hardware.buffer_bytes = (size_t)env_whole("FLARE_REPLAY_PM_BUFFER_MIB", 16, 4096,
                                                         (long)(REPLAY_BUFFER_BYTES >> 20))
                                       << 20;
        replay_hardware.evaluate_threads = evaluate_threads();
    }
    const char *replay = cuda_replay_requested();
    if (wanted == NULL && replay != NULL) {
        core_capability_set("pm_sampling", 0, CORE_CAPABILITY_OFF,
                            "off: %s asks for kernel replay, whose range profiler needs the "
                            "device's counters (FLARE_PM=1 forces PM sampling on)",
                            replay);
        return;
    }
    if (reason[0] == '\0' && pm_settings_from_environment(&chosen_preset, &chosen_interval_ns,
                                                          reason, sizeof(reason)) != FLARE_OK)
        core_log(CORE_LOG_ERROR, "PM sampling off: %s", reason);
    if (reason[0] == '\0' &&
        pm_engine_create(&cuda_pm_hardware_ops, &hardware, CUDA_PM_CONTEXT_ID, &engine) != FLARE_OK)
        snprintf(reason, sizeof(reason), "no memory for the PM sampling engine");
    if (reason[0] != '\0') {
        core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return;
    }
    /* Not disabled at exit: cuptiPmSamplingDisable from an atexit handler
     * crashed the program on the H200 (SIGSEGV at exit, CUDA already torn
     * down); the driver releases the counters with the process. */
    const char *schedule_engine = getenv("FLARE_DEEP_ENGINE");
    /* An auto window (engine auto, FLARE_DEEP_ENGINE=auto) may get PM
     * sampling: it wants it ready too. */
    eager_setup = (rules_list_engines(getenv("FLARE_DEEP_WHEN")) &
                   (RULES_ENGINES_PM | RULES_ENGINES_AUTO)) != 0 ||
                  (getenv("FLARE_DEEP_AFTER") != NULL &&
                   (schedule_engine == NULL ||
                    (strcmp(schedule_engine, "pc") != 0 && strcmp(schedule_engine, "sass") != 0)));
    /* Requested only when a rule or schedule asks for windows: a plain
     * trace must not end with a warning about a feature nobody used. */
    core_capability_set("pm_sampling", eager_setup ? 1 : 0, CORE_CAPABILITY_DEGRADED,
                        "installed: set-up starts %s (preset %s, every %llu ns)",
                        eager_setup ? "after the first context"
                                    : "at the first deep window (no rule or schedule asks "
                                      "earlier; that window runs without samples)",
                        chosen_preset->name, (unsigned long long)chosen_interval_ns);
}
