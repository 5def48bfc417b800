/*
 * cuda_rangeprof.c: the "cuda-range-profiler" metric collector
 * (cuda_rangeprof.h).
 *
 * One replayed launch: prepare() finds or builds the host set-up for
 * (context, metric list) (counter availability, config image, pass count:
 * 150-600 ms on the H200, so it is cached and paid once), initialises the
 * counter-data image and sets the config in user-replay mode with automatic
 * ranges; each pass is Start ... kernel ... Stop; finish() decodes and
 * evaluates range 0 (the one kernel of the pass). Automatic ranges, not
 * pushed user ranges: a user range also times the push/pop around the
 * kernel, which on the H200 doubled gpu__time_duration against ncu.
 *
 * Calls come from the launching thread inside the pass loop; replays on one
 * device are serialised by the engine's gate, so per-context state needs a
 * lock only to be found. Must never link libcupti or abort: every CUPTI
 * error becomes a reason.
 */
#include "backend/cuda/cuda_rangeprof.h"

#include <cupti_range_profiler.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_profiler_host.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "replay/replay.h"
#include "tracebuf/lease.h"
#include "replay/replay.h" /* replay_selection_metrics */

#define RANGEPROF_CONTEXTS_MAX 64
#define RANGEPROF_SETUPS_MAX   32
/* Passes whose Start/Stop times are kept for the log (more still run). */
#define RANGEPROF_TIMED_PASSES 64
/* How long a launch waits for a set-up another thread is running. */
#define RANGEPROF_LOCK_WAIT_S 10

/* The CUPTI functions this collector uses, resolved from libcupti. */
typedef struct rangeprof_api {
    CUptiResult (*ProfilerInitialize)(CUpti_Profiler_Initialize_Params *);
    CUptiResult (*DeviceGetChipName)(CUpti_Device_GetChipName_Params *);
    CUptiResult (*GetCounterAvailability)(CUpti_Profiler_GetCounterAvailability_Params *);
    CUptiResult (*HostInitialize)(CUpti_Profiler_Host_Initialize_Params *);
    CUptiResult (*HostDeinitialize)(CUpti_Profiler_Host_Deinitialize_Params *);
    CUptiResult (*HostConfigAddMetrics)(CUpti_Profiler_Host_ConfigAddMetrics_Params *);
    CUptiResult (*HostGetConfigImageSize)(CUpti_Profiler_Host_GetConfigImageSize_Params *);
    CUptiResult (*HostGetConfigImage)(CUpti_Profiler_Host_GetConfigImage_Params *);
    CUptiResult (*HostGetNumOfPasses)(CUpti_Profiler_Host_GetNumOfPasses_Params *);
    CUptiResult (*HostEvaluateToGpuValues)(CUpti_Profiler_Host_EvaluateToGpuValues_Params *);
    CUptiResult (*Enable)(CUpti_RangeProfiler_Enable_Params *);
    CUptiResult (*SetConfig)(CUpti_RangeProfiler_SetConfig_Params *);
    CUptiResult (*Start)(CUpti_RangeProfiler_Start_Params *);
    CUptiResult (*Stop)(CUpti_RangeProfiler_Stop_Params *);
    CUptiResult (*DecodeData)(CUpti_RangeProfiler_DecodeData_Params *);
    CUptiResult (*GetCounterDataSize)(CUpti_RangeProfiler_GetCounterDataSize_Params *);
    CUptiResult (*CounterDataImageInitialize)(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params *);
    CUptiResult (*GetCounterDataInfo)(CUpti_RangeProfiler_GetCounterDataInfo_Params *);
} rangeprof_api;

static rangeprof_api api;
static const cuda_cupti_api *cupti;
static const cuda_driver_api *driver;

/* Per context: the range-profiler object (enabled once, kept) and the
 * counter availability image the host set-ups need. */
typedef struct rangeprof_context {
    CUcontext context;
    int device;
    char chip[64];
    uint8_t *availability;
    CUpti_RangeProfiler_Object *object;
} rangeprof_context;

/* Per (context, metric list): the host object, config image and counter
 * data image. A failed set-up is kept too, so an unknown metric is
 * diagnosed once, not at every launch. The counter data image is sized for
 * the ranges of the collection at hand (1 for a kernel replay, the span's
 * kernel count for a span): initialising it costs about 2.4 ms per range
 * slot on the H200, so it is resized rather than kept at a maximum, while
 * the config image (35-50 ms to build) does not depend on the range count
 * and is built once. */
typedef struct rangeprof_setup {
    rangeprof_context *context;
    char *key;         /* the metric names: "a,b,c" */
    size_t max_ranges; /* the ranges counter_data is sized for (0: not yet) */
    const char **names;
    size_t count;
    int status; /* 0, or the flare status prepare returns */
    char reason[256];
    CUpti_Profiler_Host_Object *host;
    uint8_t *config;
    size_t config_size;
    size_t passes;
    uint8_t *counter_data;
    size_t counter_data_size;
} rangeprof_setup;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static rangeprof_context *contexts[RANGEPROF_CONTEXTS_MAX];
static size_t context_count;
static rangeprof_setup *setups[RANGEPROF_SETUPS_MAX];
static size_t setup_count;
static int profiler_initialized;
static int installed;

/* The collection in progress on this thread (one launch at a time). */
typedef struct rangeprof_session {
    rangeprof_setup *setup;
    size_t max_ranges;
    int started;    /* between Start and Stop */
    int configured; /* the profiler object holds this collection's config */
    int all_submitted;
    uint32_t passes_stopped;
    int failed;
    bool holds_turn; /* the devices' collection turn (replay_turn.c) */
    char reason[256];
    /* Where the collection's time went, logged at finish: CUPTI's own calls,
     * so the per-pass set-up can be told apart from flare's work. */
    uint64_t set_up_ns; /* waiting for, or doing, the host set-up */
    uint64_t counter_data_init_ns;
    uint64_t set_config_ns;
    uint64_t start_ns[RANGEPROF_TIMED_PASSES];
    uint64_t stop_ns[RANGEPROF_TIMED_PASSES];
} rangeprof_session;
/* On the heap behind one TLS pointer: libflare's static TLS must stay a few
 * hundred bytes in all, or dlopen of it fails (see cuda_replay.c). Replays
 * run on few threads, so a thread's session is kept for its lifetime. */
static _Thread_local rangeprof_session *session_slot;
static pthread_key_t session_key;
static pthread_once_t session_once = PTHREAD_ONCE_INIT;
static rangeprof_session session_fallback; /* out of memory: shared, but never NULL */

static void session_key_create(void)
{
    pthread_key_create(&session_key, free);
}

static rangeprof_session *current_session(void)
{
    if (session_slot == NULL) {
        pthread_once(&session_once, session_key_create);
        rangeprof_session *created = calloc(1, sizeof(*created));
        if (created == NULL || pthread_setspecific(session_key, created) != 0) {
            free(created);
            return &session_fallback;
        }
        session_slot = created;
    }
    return session_slot;
}

/* Every wait for one of this file's locks is bounded: a holder may be stuck
 * inside CUPTI, and the waiter may hold a device's gate. 0 once locked. */
static int lock_within_wait(pthread_mutex_t *lock)
{
    /* On the monotonic clock: a wall-clock step must not stretch or cut it. */
    struct timespec deadline =
        core_deadline_after_ns((uint64_t)RANGEPROF_LOCK_WAIT_S * 1000000000ull);
    return pthread_mutex_clocklock(lock, CLOCK_MONOTONIC, &deadline);
}

/* The devices' collection turn: taken at a collection's first pass and
 * around set-up that calls CUPTI, given back when the collection ends. */
static int take_collection_turn(rangeprof_session *session)
{
    return replay_collection_turn_take(&session->holds_turn) == FLARE_OK ? 0 : -1;
}

static void give_collection_turn(rangeprof_session *session)
{
    replay_collection_turn_give(&session->holds_turn);
}

/* Forgets the thread's collection, giving back its turn first. */
static void reset_session(rangeprof_session *session)
{
    give_collection_turn(session);
    memset(session, 0, sizeof(*session));
}

static const char *cupti_text(CUptiResult result)
{
    return cuda_cupti_error_text(cupti, result);
}

/* ---- Set-up (cache_lock held) ---- */

/* The context's counter availability image (malloc'd into *image). */
static CUptiResult fetch_availability(CUcontext context, uint8_t **image)
{
    CUpti_Profiler_GetCounterAvailability_Params availability = {
        .structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE, .ctx = context};
    *image = NULL;
    CUptiResult result = api.GetCounterAvailability(&availability);
    if (result != CUPTI_SUCCESS)
        return result;
    *image = malloc(availability.counterAvailabilityImageSize);
    if (*image == NULL)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    availability.pCounterAvailabilityImage = *image;
    result = api.GetCounterAvailability(&availability);
    if (result != CUPTI_SUCCESS) {
        free(*image);
        *image = NULL;
    }
    return result;
}

/* The context's entry, set up on first use; NULL with reason when CUPTI
 * refused. A failure is not kept: HARDWARE_BUSY (another profiler, e.g. PM
 * sampling, holds the device) can clear, so the next launch tries again. */
static rangeprof_context *context_for(CUcontext context, int device, char *reason,
                                      size_t reason_size)
{
    for (size_t i = 0; i < context_count; i++)
        if (contexts[i]->context == context)
            return contexts[i];
    if (context_count >= RANGEPROF_CONTEXTS_MAX) {
        snprintf(reason, reason_size, "more than %d contexts", RANGEPROF_CONTEXTS_MAX);
        return NULL;
    }
    uint64_t started = core_now_ns();
    CUptiResult result = CUPTI_SUCCESS;
    const char *failed = NULL;
    if (!profiler_initialized) {
        CUpti_Profiler_Initialize_Params initialize = {
            .structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        result = api.ProfilerInitialize(&initialize);
        if (result != CUPTI_SUCCESS)
            failed = "cuptiProfilerInitialize";
        else
            profiler_initialized = 1;
    }
    CUpti_Device_GetChipName_Params chip = {
        .structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE, .deviceIndex = (size_t)device};
    if (failed == NULL && (result = api.DeviceGetChipName(&chip)) != CUPTI_SUCCESS)
        failed = "cuptiDeviceGetChipName";
    uint64_t initialized = core_now_ns();
    /* Availability before Enable, as CUPTI's own samples do; only when
     * asked for (see replay_settings.counter_availability). */
    replay_settings settings;
    replay_settings_get(&settings);
    uint8_t *image = NULL;
    if (failed == NULL && settings.counter_availability &&
        (result = fetch_availability(context, &image)) != CUPTI_SUCCESS)
        failed = "cuptiProfilerGetCounterAvailability";
    uint64_t available = core_now_ns();
    CUpti_RangeProfiler_Enable_Params enable = {
        .structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE, .ctx = context};
    if (failed == NULL && (result = api.Enable(&enable)) != CUPTI_SUCCESS)
        failed = "cuptiRangeProfilerEnable";
    rangeprof_context *entry = failed == NULL ? calloc(1, sizeof(*entry)) : NULL;
    if (entry == NULL) {
        snprintf(reason, reason_size, "%s: %s", failed != NULL ? failed : "calloc",
                 failed != NULL ? cupti_text(result) : "out of memory");
        free(image);
        return NULL;
    }
    entry->context = context;
    entry->device = device;
    snprintf(entry->chip, sizeof(entry->chip), "%s", chip.pChipName);
    entry->availability = image;
    entry->object = enable.pRangeProfilerObject;
    contexts[context_count++] = entry;
    core_log(CORE_LOG_INFO,
             "range profiler enabled on device %d (%s): profiler initialise %.1f ms, counter "
             "availability %.1f ms, enable %.1f ms",
             device, entry->chip, (double)(initialized - started) / 1e6,
             (double)(available - initialized) / 1e6, (double)(core_now_ns() - available) / 1e6);
    return entry;
}

static void setup_fail(rangeprof_setup *setup, int status, const char *format, const char *what,
                       CUptiResult result)
{
    setup->status = status;
    snprintf(setup->reason, sizeof(setup->reason), format, what, cupti_text(result));
}

/* After the list was refused: finds the first metric CUPTI refuses on its
 * own, in a host object of its own, so the reason names it. */
static void name_refused_metric(rangeprof_setup *setup)
{
    rangeprof_context *context = setup->context;
    for (size_t i = 0; i < setup->count; i++) {
        CUpti_Profiler_Host_Initialize_Params initialize = {
            .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE,
            .profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER,
            .pChipName = context->chip,
            .pCounterAvailabilityImage = context->availability};
        if (api.HostInitialize(&initialize) != CUPTI_SUCCESS)
            return;
        CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
            .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE,
            .pHostObject = initialize.pHostObject,
            .ppMetricNames = &setup->names[i],
            .numMetrics = 1};
        CUptiResult result = api.HostConfigAddMetrics(&add);
        CUpti_Profiler_Host_Deinitialize_Params deinitialize = {
            .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE,
            .pHostObject = initialize.pHostObject};
        api.HostDeinitialize(&deinitialize);
        if (result != CUPTI_SUCCESS) {
            snprintf(setup->reason, sizeof(setup->reason),
                     "unknown or unsupported metric '%.100s' on %s (%s)", setup->names[i],
                     context->chip, cupti_text(result));
            return;
        }
    }
}

/* Back to the state before build_setup (the names and key are kept). */
static void clear_setup(rangeprof_setup *setup)
{
    if (setup->host != NULL) {
        CUpti_Profiler_Host_Deinitialize_Params deinitialize = {
            .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE,
            .pHostObject = setup->host};
        api.HostDeinitialize(&deinitialize);
        setup->host = NULL;
    }
    free(setup->config);
    setup->config = NULL;
    setup->config_size = 0;
    setup->passes = 0;
    setup->status = 0;
    setup->reason[0] = '\0';
}

static void build_setup(rangeprof_setup *setup)
{
    rangeprof_context *context = setup->context;
    CUpti_Profiler_Host_Initialize_Params initialize = {
        .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE,
        .profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER,
        .pChipName = context->chip,
        .pCounterAvailabilityImage = context->availability};
    CUptiResult result = api.HostInitialize(&initialize);
    if (result != CUPTI_SUCCESS) {
        setup_fail(setup, FLARE_ERR_BACKEND, "%s: %s", "cuptiProfilerHostInitialize", result);
        return;
    }
    setup->host = initialize.pHostObject;
    /* All metrics in one call: CUPTI schedules counters across passes per
     * call (adding them one by one gave 28 passes for a 9-pass set). */
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE,
        .pHostObject = setup->host,
        .ppMetricNames = setup->names,
        .numMetrics = setup->count};
    result = api.HostConfigAddMetrics(&add);
    if (result != CUPTI_SUCCESS) {
        setup->status = FLARE_ERR_INVALID_ARGUMENT;
        snprintf(setup->reason, sizeof(setup->reason), "the metric list was refused on %s (%s)",
                 context->chip, cupti_text(result));
        name_refused_metric(setup);
        return;
    }
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE,
        .pHostObject = setup->host};
    result = api.HostGetConfigImageSize(&size);
    if (result == CUPTI_SUCCESS) {
        setup->config = malloc(size.configImageSize);
        setup->config_size = size.configImageSize;
        CUpti_Profiler_Host_GetConfigImage_Params image = {
            .structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE,
            .pHostObject = setup->host,
            .configImageSize = setup->config_size,
            .pConfigImage = setup->config};
        result = setup->config != NULL ? api.HostGetConfigImage(&image) : CUPTI_ERROR_OUT_OF_MEMORY;
    }
    if (result != CUPTI_SUCCESS) {
        setup_fail(setup, FLARE_ERR_BACKEND, "%s: %s", "cuptiProfilerHostGetConfigImage", result);
        return;
    }
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
        .structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE,
        .configImageSize = setup->config_size,
        .pConfigImage = setup->config};
    result = api.HostGetNumOfPasses(&passes);
    if (result != CUPTI_SUCCESS || passes.numOfPasses == 0) {
        setup_fail(setup, FLARE_ERR_BACKEND, "%s: %s", "cuptiProfilerHostGetNumOfPasses", result);
        return;
    }
    setup->passes = passes.numOfPasses;
}

/* Sizes the setup's counter data image for max_ranges ranges (a no-op when
 * it already is). Callers hold the device's replay writer gate, which is
 * what keeps two collections from sharing the image. */
static CUptiResult size_counter_data(rangeprof_setup *setup, size_t max_ranges)
{
    if (setup->counter_data != NULL && setup->max_ranges == max_ranges)
        return CUPTI_SUCCESS;
    CUpti_RangeProfiler_GetCounterDataSize_Params data = {
        .structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE,
        .pRangeProfilerObject = setup->context->object,
        .pMetricNames = setup->names,
        .numMetrics = setup->count,
        .maxNumOfRanges = max_ranges,
        .maxNumRangeTreeNodes = max_ranges};
    CUptiResult result = api.GetCounterDataSize(&data);
    if (result != CUPTI_SUCCESS)
        return result;
    uint8_t *image = malloc(data.counterDataSize);
    if (image == NULL)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    free(setup->counter_data);
    setup->counter_data = image;
    setup->counter_data_size = data.counterDataSize;
    setup->max_ranges = max_ranges;
    return CUPTI_SUCCESS;
}

static rangeprof_setup *setup_for(rangeprof_context *context, const char *const *metrics,
                                  size_t count)
{
    size_t key_bytes = 32;
    for (size_t i = 0; i < count; i++)
        key_bytes += strlen(metrics[i]) + 1;
    char *key = malloc(key_bytes);
    if (key == NULL)
        return NULL;
    size_t used = 0;
    for (size_t i = 0; i < count; i++)
        used += (size_t)snprintf(key + used, key_bytes - used, "%s%s", i ? "," : "", metrics[i]);
    for (size_t i = 0; i < setup_count; i++)
        if (setups[i]->context == context && strcmp(setups[i]->key, key) == 0) {
            free(key);
            return setups[i];
        }
    if (setup_count >= RANGEPROF_SETUPS_MAX) {
        free(key);
        return NULL;
    }
    rangeprof_setup *setup = calloc(1, sizeof(*setup));
    const char **names = calloc(count, sizeof(*names));
    if (setup == NULL || names == NULL) {
        free(setup);
        free(names);
        free(key);
        return NULL;
    }
    /* The names point into a copy of the key's name part, split in place of
     * the commas. */
    char *copy = strdup(key);
    if (copy == NULL) {
        free(setup);
        free(names);
        free(key);
        return NULL;
    }
    char *cursor = copy;
    for (size_t i = 0; i < count; i++) {
        names[i] = cursor;
        cursor += strlen(metrics[i]);
        *cursor++ = '\0';
    }
    setup->context = context;
    setup->key = key;
    setup->names = names;
    setup->count = count;
    uint64_t start = core_now_ns();
    build_setup(setup);
    if (setup->status != 0 && context->availability == NULL) {
        /* Refused without the availability image: undo, fetch it, retry. */
        uint8_t *image = NULL;
        if (fetch_availability(context->context, &image) == CUPTI_SUCCESS) {
            core_log(CORE_LOG_INFO,
                     "range profiler: set-up without the counter availability image failed "
                     "(%s); retrying with it",
                     setup->reason);
            context->availability = image;
            clear_setup(setup);
            build_setup(setup);
        }
    }
    core_log(CORE_LOG_INFO,
             "range profiler set-up for %zu metric(s) on %s: %.1f ms, %zu pass(es)%s%s", count,
             context->chip, (double)(core_now_ns() - start) / 1e6, setup->passes,
             setup->status != 0 ? ": " : "", setup->status != 0 ? setup->reason : "");
    setups[setup_count++] = setup;
    return setup;
}

/* ---- The collector ---- */

static void stop_if_started(void)
{
    rangeprof_session *session = current_session();
    if (!session->started || session->setup == NULL)
        return;
    CUpti_RangeProfiler_Stop_Params stop = {
        .structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE,
        .pRangeProfilerObject = session->setup->context->object};
    api.Stop(&stop);
    session->started = 0;
}

/* The range profiler's owner id in the per-device counter lease it shares
 * with PM sampling (src/tracebuf/lease.h): both program the same hardware
 * counters, and CUPTI's own answer when they collide is a bare
 * HARDWARE_BUSY. */
#define RANGEPROF_LEASE_OWNER 0x52414e474550ull /* "RANGEP" */

/* Claims the device's counters (kept across launches: re-claiming is a
 * no-op); 0, or FLARE_ERR_STATE with a reason naming the holder. */
static int claim_counters(int device, char *reason, size_t reason_size)
{
    if (tracebuf_lease_holder(device) == RANGEPROF_LEASE_OWNER)
        return FLARE_OK;
    char holder[TRACEBUF_HOLDER_MAX] = "";
    if (tracebuf_lease_acquire(device, RANGEPROF_LEASE_OWNER, holder) == FLARE_OK)
        return FLARE_OK;
    snprintf(reason, reason_size,
             "range profiler: device %d's performance counters are held by PM sampling (%s); "
             "run with FLARE_PM=0 to replay",
             device, holder);
    return FLARE_ERR_STATE;
}

static int prepare_ranges(const flare_replay_launch *launch, const char *const *metrics,
                          size_t metric_count, size_t max_ranges, char *reason, size_t reason_size)
{
    rangeprof_session *session = current_session();
    if (session == &session_fallback) {
        /* Shared by every thread that got no session of its own: it cannot
         * hold a collection (nor the devices' turn) for one of them. */
        snprintf(reason, reason_size, "range profiler: out of host memory for a collection");
        return FLARE_ERR_NO_MEMORY;
    }
    stop_if_started(); /* a loop that ended early must not leave a pass open */
    reset_session(session);
    if (metric_count == 0) {
        snprintf(reason, reason_size, "no metrics to collect");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    CUcontext context = NULL;
    if (driver->cuCtxGetCurrent(&context) != CUDA_SUCCESS || context == NULL) {
        snprintf(reason, reason_size, "range profiler: no current CUDA context");
        return FLARE_ERR_BACKEND;
    }
    if (claim_counters(launch->device, reason, reason_size) != FLARE_OK) {
        core_capability_set("range_profiler", 1, CORE_CAPABILITY_DEGRADED, "%s", reason);
        return FLARE_ERR_STATE;
    }
    /* Bounded: the early set-up thread may hold the lock for its 100s of ms. */
    uint64_t lock_started = core_now_ns();
    if (take_collection_turn(session) != 0) {
        snprintf(reason, reason_size,
                 "range profiler: another device's collection still running after a pass "
                 "timeout (FLARE_REPLAY_SERIAL_DEVICES=1)");
        return FLARE_ERR_TIMEOUT;
    }
    if (lock_within_wait(&cache_lock) != 0) {
        give_collection_turn(session);
        snprintf(reason, reason_size, "range profiler: set-up still busy after %d s",
                 RANGEPROF_LOCK_WAIT_S);
        return FLARE_ERR_TIMEOUT;
    }
    char why[256] = "";
    rangeprof_context *entry = context_for(context, launch->device, why, sizeof(why));
    rangeprof_setup *setup = NULL;
    int status = FLARE_OK;
    if (entry == NULL) {
        snprintf(reason, reason_size, "range profiler: %s", why);
        status = FLARE_ERR_BACKEND;
    } else if ((setup = setup_for(entry, metrics, metric_count)) == NULL) {
        snprintf(reason, reason_size, "range profiler: more than %d metric lists",
                 RANGEPROF_SETUPS_MAX);
        status = FLARE_ERR_FULL;
    } else if (setup->status != 0) {
        snprintf(reason, reason_size, "%s", setup->reason);
        status = setup->status;
    }
    pthread_mutex_unlock(&cache_lock);
    /* The turn is taken again at the first pass: between prepare and the
     * first pass a kernel replay takes its device's gate and drains it,
     * which must not wait on another device's collection. */
    give_collection_turn(session);
    if (status != FLARE_OK) {
        if (status != FLARE_ERR_INVALID_ARGUMENT)
            core_capability_set("range_profiler", 1, CORE_CAPABILITY_DEGRADED, "%s", reason);
        return status;
    }
    /* The profiler object is configured at the first pass, not here: a
     * kernel replay prepares before it takes the device's writer gate, and
     * two threads configuring one object (or resizing the counter image
     * CUPTI is writing) under each other's collection would spoil both. */
    session->setup = setup;
    session->max_ranges = max_ranges;
    session->set_up_ns = core_now_ns() - lock_started;
    return (int)setup->passes;
}

/* First pass only, under the device's writer gate: sizes and initialises
 * the counter data image and sets the configuration. */
static CUptiResult configure_collection(rangeprof_session *session, const char **failed)
{
    rangeprof_setup *setup = session->setup;
    /* Bounded, as in prepare: another context's early set-up may hold the
     * lock for 100s of ms, and this thread holds the device's gate. */
    *failed = "waiting for the range profiler's set-up lock";
    if (lock_within_wait(&cache_lock) != 0)
        return CUPTI_ERROR_UNKNOWN;
    uint64_t initialize_started = core_now_ns();
    CUptiResult result = size_counter_data(setup, session->max_ranges);
    pthread_mutex_unlock(&cache_lock);
    *failed = "cuptiRangeProfilerGetCounterDataSize";
    if (result == CUPTI_SUCCESS) {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params initialize = {
            .structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE,
            .pRangeProfilerObject = setup->context->object,
            .counterDataSize = setup->counter_data_size,
            .pCounterData = setup->counter_data};
        result = api.CounterDataImageInitialize(&initialize);
        *failed = "cuptiRangeProfilerCounterDataImageInitialize";
    }
    uint64_t config_started = core_now_ns();
    session->counter_data_init_ns = config_started - initialize_started;
    if (result == CUPTI_SUCCESS) {
        /* One config for the whole collection: Start/Stop step through its
         * passes (Stop reports the pass index and when all are submitted). */
        CUpti_RangeProfiler_SetConfig_Params config = {
            .structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE,
            .pRangeProfilerObject = setup->context->object,
            .configSize = setup->config_size,
            .pConfig = setup->config,
            .counterDataImageSize = setup->counter_data_size,
            .pCounterDataImage = setup->counter_data,
            .range = CUPTI_AutoRange,
            .replayMode = CUPTI_UserReplay,
            .maxRangesPerPass = session->max_ranges,
            .numNestingLevels = 1,
            .minNestingLevel = 1,
            .passIndex = 0,
            .targetNestingLevel = 1};
        result = api.SetConfig(&config);
        *failed = "cuptiRangeProfilerSetConfig";
        session->set_config_ns = core_now_ns() - config_started;
    }
    if (result == CUPTI_SUCCESS)
        session->configured = 1;
    return result;
}

static int collector_prepare(const flare_replay_launch *launch, const char *const *metrics,
                             size_t metric_count, char *reason, size_t reason_size)
{
    return prepare_ranges(launch, metrics, metric_count, 1, reason, reason_size);
}

static int collector_prepare_span(const flare_replay_launch *span, const char *const *metrics,
                                  size_t metric_count, size_t max_ranges, char *reason,
                                  size_t reason_size)
{
    return prepare_ranges(span, metrics, metric_count, max_ranges, reason, reason_size);
}

static void session_fail(const char *what, CUptiResult result)
{
    rangeprof_session *session = current_session();
    if (!session->failed)
        snprintf(session->reason, sizeof(session->reason), "range profiler: %s: %s", what,
                 cupti_text(result));
    session->failed = 1;
}

static int collector_pass_begin(const flare_replay_launch *launch, uint32_t pass)
{
    rangeprof_session *session = current_session();
    (void)launch;
    if (session->setup == NULL || session->failed)
        return FLARE_ERR_STATE;
    if (take_collection_turn(session) != 0) {
        if (!session->failed)
            snprintf(session->reason, sizeof(session->reason),
                     "range profiler: another device's collection still running after a pass "
                     "timeout (FLARE_REPLAY_SERIAL_DEVICES=1)");
        session->failed = 1;
        return FLARE_ERR_TIMEOUT;
    }
    if (!session->configured) {
        const char *failed = "";
        CUptiResult result = configure_collection(session, &failed);
        if (result != CUPTI_SUCCESS) {
            session_fail(failed, result);
            core_capability_set("range_profiler", 1, CORE_CAPABILITY_DEGRADED, "%s",
                                session->reason);
            return FLARE_ERR_BACKEND;
        }
    }
    CUpti_RangeProfiler_Start_Params start = {
        .structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE,
        .pRangeProfilerObject = session->setup->context->object};
    uint64_t started = core_now_ns();
    CUptiResult result = api.Start(&start);
    if (pass < RANGEPROF_TIMED_PASSES)
        session->start_ns[pass] = core_now_ns() - started;
    if (result != CUPTI_SUCCESS) {
        session_fail("cuptiRangeProfilerStart", result);
        return FLARE_ERR_BACKEND;
    }
    session->started = 1;
    return FLARE_OK;
}

static int collector_pass_end(const flare_replay_launch *launch, uint32_t pass)
{
    rangeprof_session *session = current_session();
    (void)launch;
    if (session->setup == NULL || !session->started)
        return FLARE_ERR_STATE;
    CUpti_RangeProfiler_Stop_Params stop = {
        .structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE,
        .pRangeProfilerObject = session->setup->context->object};
    uint64_t started = core_now_ns();
    CUptiResult result = api.Stop(&stop);
    if (pass < RANGEPROF_TIMED_PASSES)
        session->stop_ns[pass] = core_now_ns() - started;
    session->started = 0;
    if (result != CUPTI_SUCCESS) {
        session_fail("cuptiRangeProfilerStop", result);
        return FLARE_ERR_BACKEND;
    }
    session->passes_stopped = pass + 1;
    session->all_submitted = stop.isAllPassSubmitted != 0;
    return FLARE_OK;
}

/* Appends "a,b,c" (milliseconds, one decimal) of the first count values. */
static void format_pass_times(char *text, size_t size, const uint64_t *times, size_t count)
{
    size_t used = 0;
    text[0] = '\0';
    for (size_t pass = 0; pass < count && used + 1 < size; pass++) {
        int written = snprintf(text + used, size - used, "%s%.1f", pass ? "," : "",
                               (double)times[pass] / 1e6);
        if (written < 0)
            break;
        used += (size_t)written;
    }
}

/* One line per collection saying where its time went; scripts/gpu-check
 * compares these CUPTI calls with the whole collection. */
static void log_collection_time(const rangeprof_session *session, size_t range_count,
                                uint64_t decode_ns, uint64_t evaluate_ns)
{
    size_t timed = session->passes_stopped < RANGEPROF_TIMED_PASSES ? session->passes_stopped
                                                                    : RANGEPROF_TIMED_PASSES;
    uint64_t start_total = 0, stop_total = 0;
    for (size_t pass = 0; pass < timed; pass++) {
        start_total += session->start_ns[pass];
        stop_total += session->stop_ns[pass];
    }
    char starts[RANGEPROF_TIMED_PASSES * 8], stops[RANGEPROF_TIMED_PASSES * 8];
    format_pass_times(starts, sizeof(starts), session->start_ns, timed);
    format_pass_times(stops, sizeof(stops), session->stop_ns, timed);
    core_log(CORE_LOG_INFO,
             "range profiler collection: %zu range(s), %u pass(es); host set-up %.1f ms, "
             "counter data init %.2f ms, "
             "set config %.2f ms, start total %.1f ms [%s], stop total %.1f ms [%s], decode "
             "%.2f ms, evaluate %.2f ms",
             range_count, session->passes_stopped, (double)session->set_up_ns / 1e6,
             (double)session->counter_data_init_ns / 1e6, (double)session->set_config_ns / 1e6,
             (double)start_total / 1e6, starts, (double)stop_total / 1e6, stops,
             (double)decode_ns / 1e6, (double)evaluate_ns / 1e6);
}

/* Spans: decodes once and evaluates every range (one per kernel, in
 * execution order: automatic range names are just that order). */
static int collector_finish_ranges(const flare_replay_launch *span,
                                   const flare_replay_launch *ranges, size_t range_count,
                                   double *values, size_t metric_count, char *reason,
                                   size_t reason_size)
{
    (void)span;
    (void)ranges;
    rangeprof_session *session = current_session();
    for (size_t i = 0; i < range_count * metric_count; i++)
        values[i] = NAN;
    rangeprof_setup *setup = session->setup;
    stop_if_started();
    int status = FLARE_OK;
    if (setup == NULL) {
        snprintf(reason, reason_size, "range profiler: finish without prepare");
        status = FLARE_ERR_STATE;
    } else if (session->failed) {
        snprintf(reason, reason_size, "%s", session->reason);
        status = FLARE_ERR_BACKEND;
    } else if (!session->all_submitted) {
        snprintf(reason, reason_size,
                 "range profiler: %u of %zu passes ran; CUPTI has not seen every pass",
                 session->passes_stopped, setup->passes);
        status = FLARE_ERR_STATE;
    } else if (metric_count != setup->count) {
        snprintf(reason, reason_size, "range profiler: %zu values asked for %zu metrics",
                 metric_count, setup->count);
        status = FLARE_ERR_INVALID_ARGUMENT;
    }
    if (status != FLARE_OK) {
        reset_session(session);
        return status;
    }
    CUpti_RangeProfiler_DecodeData_Params decode = {
        .structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE,
        .pRangeProfilerObject = setup->context->object};
    uint64_t decode_started = core_now_ns();
    CUptiResult result = api.DecodeData(&decode);
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        .structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE,
        .pCounterDataImage = setup->counter_data,
        .counterDataImageSize = setup->counter_data_size};
    if (result == CUPTI_SUCCESS)
        result = api.GetCounterDataInfo(&info);
    if (result != CUPTI_SUCCESS) {
        snprintf(reason, reason_size, "range profiler: decode: %s", cupti_text(result));
        reset_session(session);
        return FLARE_ERR_BACKEND;
    }
    if (info.numTotalRanges == 0) {
        snprintf(reason, reason_size,
                 "range profiler: no range recorded (%zu dropped): the kernels were not seen",
                 decode.numOfRangeDropped);
        reset_session(session);
        return FLARE_ERR_NOT_FOUND;
    }
    uint64_t evaluate_started = core_now_ns();
    size_t evaluated = info.numTotalRanges < range_count ? info.numTotalRanges : range_count;
    for (size_t range = 0; range < evaluated && status == FLARE_OK; range++) {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
            .structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE,
            .pHostObject = setup->host,
            .pCounterDataImage = setup->counter_data,
            .counterDataImageSize = setup->counter_data_size,
            .rangeIndex = range,
            .ppMetricNames = setup->names,
            .numMetrics = setup->count,
            .pMetricValues = values + range * metric_count};
        result = api.HostEvaluateToGpuValues(&evaluate);
        if (result != CUPTI_SUCCESS) {
            snprintf(reason, reason_size, "range profiler: evaluate range %zu: %s", range,
                     cupti_text(result));
            status = FLARE_ERR_BACKEND;
        }
    }
    if (status == FLARE_OK && (info.numTotalRanges != range_count || decode.numOfRangeDropped))
        snprintf(reason, reason_size,
                 "range profiler: %zu ranges (%zu dropped) for %zu recorded kernels; values "
                 "mapped in execution order",
                 info.numTotalRanges, decode.numOfRangeDropped, range_count);
    log_collection_time(session, range_count, evaluate_started - decode_started,
                        core_now_ns() - evaluate_started);
    reset_session(session);
    return status;
}

/* A kernel replay: its pass held one range, the kernel's. */
static int collector_finish(const flare_replay_launch *launch, double *values, size_t metric_count,
                            char *reason, size_t reason_size)
{
    return collector_finish_ranges(launch, launch, 1, values, metric_count, reason, reason_size);
}

/* Whatever became of the collection: no pass left open, the turn given back. */
static void collector_end(const flare_replay_launch *launch)
{
    (void)launch;
    stop_if_started();
    give_collection_turn(current_session());
}

/* ---- Early set-up ---- */

typedef struct rangeprof_warm_request {
    CUcontext context;
    int device;
} rangeprof_warm_request;

/* Early set-up threads inside CUPTI: the process must not exit under them
 * (cuda_rangeprof_wait_for_setup). */
static _Atomic int warm_threads_running;

static void *warm_body(void *argument);

static void *warm_main(void *argument)
{
    warm_body(argument);
    atomic_fetch_sub(&warm_threads_running, 1);
    return NULL;
}

/* Set by the exit wait: no early set-up starts after it. */
static _Atomic int rangeprof_exiting;

void cuda_rangeprof_wait_for_setup(uint64_t timeout_ns)
{
    atomic_store(&rangeprof_exiting, 1);
    uint64_t deadline = core_now_ns() + timeout_ns;
    while (atomic_load(&warm_threads_running) > 0 && core_now_ns() < deadline) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

static void *warm_body(void *argument)
{
    rangeprof_warm_request request = *(rangeprof_warm_request *)argument;
    free(argument);
    const char *const *names = NULL;
    size_t count = replay_selection_metrics(&names);
    if (count == 0)
        return NULL;
    uint64_t started = core_now_ns();
    char why[256] = "";
    /* Devices taking turns: the early set-up's CUPTI calls take one too
     * (held in a local: this thread has no collection session). */
    bool turn = false;
    if (replay_collection_turn_take(&turn) != FLARE_OK) {
        core_log(CORE_LOG_INFO,
                 "range profiler: early set-up on device %d skipped (another device's "
                 "collection still running); the first replayed launch does it",
                 request.device);
        return NULL;
    }
    /* Bounded like every other wait for it: a holder stuck inside CUPTI
     * must not keep this thread (which the exit handler waits for) forever. */
    if (lock_within_wait(&cache_lock) != 0) {
        replay_collection_turn_give(&turn);
        core_log(CORE_LOG_INFO,
                 "range profiler: early set-up on device %d skipped (set-up lock busy for %d s); "
                 "the first replayed launch does it",
                 request.device, RANGEPROF_LOCK_WAIT_S);
        return NULL;
    }
    /* The exit handler waits for this thread only so long: past it, the
     * process is tearing CUDA down and CUPTI must not be entered. */
    if (atomic_load(&rangeprof_exiting)) {
        pthread_mutex_unlock(&cache_lock);
        replay_collection_turn_give(&turn);
        return NULL;
    }
    rangeprof_context *entry = context_for(request.context, request.device, why, sizeof(why));
    if (entry != NULL) {
        /* Kernel replay's one-range image too; a span resizes it. Never
         * under a collection already running. No warm-up pass: the first
         * Start in a process costs 200-700 ms on the H200, but a warm-up
         * collection left the profiler object bound to its configuration
         * (later SetConfig calls were ignored: measured), and one with the
         * real configuration would hold the counters while the program
         * starts. */
        rangeprof_setup *setup = setup_for(entry, names, count);
        if (setup != NULL && setup->status == 0 && setup->counter_data == NULL)
            size_counter_data(setup, 1);
    }
    pthread_mutex_unlock(&cache_lock);
    replay_collection_turn_give(&turn);
    if (entry == NULL)
        core_log(CORE_LOG_INFO,
                 "range profiler: early set-up on device %d failed (%s); the first replayed "
                 "launch tries again",
                 request.device, why);
    else
        core_log(CORE_LOG_INFO, "range profiler: early set-up on device %d took %.1f ms",
                 request.device, (double)(core_now_ns() - started) / 1e6);
    return NULL;
}

void cuda_rangeprof_context_created(CUcontext context, int device)
{
    if (!installed || !replay_configured())
        return;
    /* Counted before the exit flag is read (see cuda_rangeprof_wait_for_setup). */
    atomic_fetch_add(&warm_threads_running, 1);
    if (atomic_load(&rangeprof_exiting)) {
        atomic_fetch_sub(&warm_threads_running, 1);
        return;
    }
    rangeprof_warm_request *request = malloc(sizeof(*request));
    if (request == NULL) {
        atomic_fetch_sub(&warm_threads_running, 1);
        return;
    }
    request->context = context;
    request->device = device;
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous); /* the program's signals stay its own */
    if (pthread_create(&thread, &attributes, warm_main, request) != 0) {
        atomic_fetch_sub(&warm_threads_running, 1);
        free(request); /* the first replayed launch sets up instead */
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
}

static const replay_metric_collector collector = {
    .prepare_span = collector_prepare_span,
    .finish_ranges = collector_finish_ranges,
    .name = "cuda-range-profiler",
    .prepare = collector_prepare,
    .pass_begin = collector_pass_begin,
    .pass_end = collector_pass_end,
    .finish = collector_finish,
    .end = collector_end,
};

const replay_metric_collector *cuda_rangeprof_collector(void)
{
    return installed ? &collector : NULL;
}

void cuda_rangeprof_install(const cuda_cupti_api *cupti_api, const cuda_driver_api *driver_api)
{
    cupti = cupti_api;
    driver = driver_api;
    const char *missing = NULL;
#define RESOLVE(field, symbol)                                                                     \
    do {                                                                                           \
        *(void **)&api.field = dlsym(cupti->library, symbol);                                      \
        if (api.field == NULL && missing == NULL)                                                  \
            missing = symbol;                                                                      \
    } while (0)
    RESOLVE(ProfilerInitialize, "cuptiProfilerInitialize");
    RESOLVE(DeviceGetChipName, "cuptiDeviceGetChipName");
    RESOLVE(GetCounterAvailability, "cuptiProfilerGetCounterAvailability");
    RESOLVE(HostInitialize, "cuptiProfilerHostInitialize");
    RESOLVE(HostDeinitialize, "cuptiProfilerHostDeinitialize");
    RESOLVE(HostConfigAddMetrics, "cuptiProfilerHostConfigAddMetrics");
    RESOLVE(HostGetConfigImageSize, "cuptiProfilerHostGetConfigImageSize");
    RESOLVE(HostGetConfigImage, "cuptiProfilerHostGetConfigImage");
    RESOLVE(HostGetNumOfPasses, "cuptiProfilerHostGetNumOfPasses");
    RESOLVE(HostEvaluateToGpuValues, "cuptiProfilerHostEvaluateToGpuValues");
    RESOLVE(Enable, "cuptiRangeProfilerEnable");
    RESOLVE(SetConfig, "cuptiRangeProfilerSetConfig");
    RESOLVE(Start, "cuptiRangeProfilerStart");
    RESOLVE(Stop, "cuptiRangeProfilerStop");
    RESOLVE(DecodeData, "cuptiRangeProfilerDecodeData");
    RESOLVE(GetCounterDataSize, "cuptiRangeProfilerGetCounterDataSize");
    RESOLVE(CounterDataImageInitialize, "cuptiRangeProfilerCounterDataImageInitialize");
    RESOLVE(GetCounterDataInfo, "cuptiRangeProfilerGetCounterDataInfo");
#undef RESOLVE
    if (missing != NULL || driver->cuCtxGetCurrent == NULL) {
        core_capability_set("range_profiler", 0, CORE_CAPABILITY_UNAVAILABLE,
                            "%s lacks %s (CUPTI older than CUDA 13?)", cupti->path,
                            missing != NULL ? missing : "cuCtxGetCurrent");
        return;
    }
    installed = 1;
    core_capability_set("range_profiler", 0, CORE_CAPABILITY_ACTIVE,
                        "CUPTI range profiler, user replay, automatic ranges (set up at the "
                        "first replayed launch)");
}
