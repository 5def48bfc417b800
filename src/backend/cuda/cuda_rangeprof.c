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
 * lock only to be found. The host set-up itself (availability, config
 * images, counter data images: the cache) is cuda_rangeprof_setup.c; this
 * file is the collector: sessions, pass control, decode, early set-up.
 * Must never link libcupti or abort: every CUPTI error becomes a reason.
 */
#include "backend/cuda/cuda_rangeprof.h"
#include "backend/cuda/cuda_rangeprof_internal.h"

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

/* Passes whose Start/Stop times are kept for the log (more still run). */
#define RANGEPROF_TIMED_PASSES 64
/* How long a launch waits for a set-up another thread is running. */
#define RANGEPROF_LOCK_WAIT_S 10

rangeprof_api cuda_rangeprof_api;
static const cuda_cupti_api *cupti;
static const cuda_driver_api *driver;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
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
 * hundred bytes in all, or dlopen of it fails (see cuda_replay_launch.c). Replays
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

const char *cuda_rangeprof_cupti_text(CUptiResult result)
{
    return cuda_cupti_error_text(cupti, result);
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
    cuda_rangeprof_api.Stop(&stop);
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
    rangeprof_context *entry =
        cuda_rangeprof_context_for(context, launch->device, why, sizeof(why));
    rangeprof_setup *setup = NULL;
    int status = FLARE_OK;
    if (entry == NULL) {
        snprintf(reason, reason_size, "range profiler: %s", why);
        status = FLARE_ERR_BACKEND;
    } else if ((setup = cuda_rangeprof_setup_for(entry, metrics, metric_count)) == NULL) {
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
    CUptiResult result = cuda_rangeprof_size_counter_data(setup, session->max_ranges);
    pthread_mutex_unlock(&cache_lock);
    *failed = "cuptiRangeProfilerGetCounterDataSize";
    if (result == CUPTI_SUCCESS) {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params initialize = {
            .structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE,
            .pRangeProfilerObject = setup->context->object,
            .counterDataSize = setup->counter_data_size,
            .pCounterData = setup->counter_data};
        result = cuda_rangeprof_api.CounterDataImageInitialize(&initialize);
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
        result = cuda_rangeprof_api.SetConfig(&config);
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
                 cuda_rangeprof_cupti_text(result));
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
    CUptiResult result = cuda_rangeprof_api.Start(&start);
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
    CUptiResult result = cuda_rangeprof_api.Stop(&stop);
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
    CUptiResult result = cuda_rangeprof_api.DecodeData(&decode);
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        .structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE,
        .pCounterDataImage = setup->counter_data,
        .counterDataImageSize = setup->counter_data_size};
    if (result == CUPTI_SUCCESS)
        result = cuda_rangeprof_api.GetCounterDataInfo(&info);
    if (result != CUPTI_SUCCESS) {
        snprintf(reason, reason_size, "range profiler: decode: %s",
                 cuda_rangeprof_cupti_text(result));
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
        result = cuda_rangeprof_api.HostEvaluateToGpuValues(&evaluate);
        if (result != CUPTI_SUCCESS) {
            snprintf(reason, reason_size, "range profiler: evaluate range %zu: %s", range,
                     cuda_rangeprof_cupti_text(result));
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
    /* Named for top -H and ps, and the H200 soak check's CPU times. */
    pthread_setname_np(pthread_self(), "flare-rp-setup");
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
    rangeprof_context *entry =
        cuda_rangeprof_context_for(request.context, request.device, why, sizeof(why));
    if (entry != NULL) {
        /* Kernel replay's one-range image too; a span resizes it. Never
         * under a collection already running. No warm-up pass: the first
         * Start in a process costs 200-700 ms on the H200, but a warm-up
         * collection left the profiler object bound to its configuration
         * (later SetConfig calls were ignored: measured), and one with the
         * real configuration would hold the counters while the program
         * starts. */
        rangeprof_setup *setup = cuda_rangeprof_setup_for(entry, names, count);
        if (setup != NULL && setup->status == 0 && setup->counter_data == NULL)
            cuda_rangeprof_size_counter_data(setup, 1);
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
    /* Spans measured by PM sampling never use the range profiler, whose
     * early set-up would hold the counters PM sampling then needs. */
    replay_method_settings method;
    replay_method_current(&method);
    if (method.method == REPLAY_METHOD_PM)
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
        *(void **)&cuda_rangeprof_api.field = dlsym(cupti->library, symbol);                       \
        if (cuda_rangeprof_api.field == NULL && missing == NULL)                                   \
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
