/*
 * test_cuda_sass.c: the CUDA SASS metrics engine (backend/cuda/cuda_sass.c),
 * through its window ops (cuda_sass_deep_engine) and the engine the
 * collector takes from (cuda_sass_core), against a fake CUPTI and a fake
 * driver defined here: the program is linked with ENABLE_EXPORTS (-rdynamic)
 * and hands cuda_sass_install dlopen(NULL) as libcupti, so cuda_sass.c's
 * dlsym finds the cupti* functions below, and its dlsym(RTLD_DEFAULT) finds
 * cuCtxPushCurrent_v2 / cuCtxPopCurrent_v2. The fake logs every call (which
 * call, on which thread, with which context pushed there), keeps CUPTI's
 * state (configured once, enabled or not) and counts each call CUPTI would
 * refuse: a second SetConfig, a SetConfig without the context current (the
 * H200 answered CUPTI_ERROR_INVALID_CONTEXT), an Enable while enabled, a
 * flush after the disable.
 *
 * The fake's FlushData hands over function names malloc'd as CUPTI does
 * (the caller frees them): under ASan each must be freed memory after the
 * stop (__asan_address_is_poisoned; LSan catches the rest at exit), and the
 * names the engine hands out must be CUPTI's, demangled.
 *
 * Windows are armed and disarmed on a thread named "flare-test-win", as the
 * coordinator's are; the main thread is the application's: it "launches"
 * (cuda_app_thread_at_launch) while a disarm waits, or makes none, so that
 * the stop waits out CUDA_SASS_STOP_WAIT_NS (2 s) and stays posted for the
 * program's next launch. The engine is process-global and configures once, so
 * the cases run in order in one process: not installed while no window asks
 * for sass; installed, then configured at the first context; a window whose
 * stop runs at a launch; a window whose stop waits for a later launch; a failed
 * flush; last, the first context's end, after which a later context is not
 * taken (it used to be: context_created's compare-and-swap on the context
 * pointer succeeded again once the end had set it back to NULL). Built
 * again with FLARE_TEST_SASS_BAD_METRIC (test_cuda_sass_bad_metric): a
 * metric CUPTI does not know fails the configuration; and with
 * FLARE_TEST_SASS_EXIT (test_cuda_sass_exit): the program's exit with a
 * window open, after which no window starts (so in a process of its own);
 * and with FLARE_TEST_SASS_EXIT_CLOSING too (test_cuda_sass_exit_closing):
 * the exit while the window's close waits for the program's next launch.
 *
 * Must never: load the real libcupti or libcuda or reach a GPU, let a fixed
 * sleep be an assertion (conditions are polled with TEST_WAIT_UNTIL; the 2 s
 * a stop waits for a launch is what makes one case slow), demangle a name
 * for the first time on a thread that then exits (cuda_demangle's buffer is
 * per thread: LSan would call it a leak), or run under a name that begins
 * "flare-" on its main thread (that thread is the application's).
 */
#ifdef FLARE_TEST_SASS_EXIT
/* This variant runs a few of the cases (the exit stops every later window). */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_app_thread.h"
#include "backend/cuda/cuda_loader.h"
#include "backend/cuda/cuda_sass.h"
#include "backend/cuda/cuda_storm.h"
#include "backend/cuda/cuda_untimed.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pcsamp/pc_engine.h"
#include "store/store.h"
#include "test_util.h"

/* ASan's own: whether addr is poisoned (freed memory is, while in the
 * quarantine). Weak: NULL in the builds without ASan, which skip the check. */
extern int __asan_address_is_poisoned(void const volatile *addr) __attribute__((weak));

/* ---- the fake driver and CUPTI ---- */

/* The context the test "creates", and another one. */
static int context_storage[2];
#define TEST_CONTEXT  ((CUcontext)&context_storage[0])
#define OTHER_CONTEXT ((CUcontext)&context_storage[1])
/* Not 0: a window of device -1 must reach the configured device. */
#define FAKE_DEVICE 1u
#define FAKE_CHIP   "GH100"

/* The chip's SASS metrics: CUPTI's ids are not 0..N-1. The first four are
 * CUDA_SASS_METRICS_DEFAULT, in its order; the last is never configured. */
#define ID_INST    0x5a5a0001ull
#define ID_THREAD  0x5a5a0002ull
#define ID_SECTORS 0x5a5a0003ull
#define ID_IDEAL   0x5a5a0004ull
#define ID_SHARED  0x5a5a0005ull
static const struct {
    const char *name;
    uint64_t id;
} fake_metric[] = {
    {"smsp__sass_inst_executed", ID_INST},
    {"smsp__sass_thread_inst_executed", ID_THREAD},
    {"smsp__sass_sectors_mem_global", ID_SECTORS},
    {"smsp__sass_sectors_mem_global_ideal", ID_IDEAL},
    {"smsp__sass_inst_executed_op_shared", ID_SHARED},
};
#define FAKE_METRICS    (sizeof(fake_metric) / sizeof(fake_metric[0]))
#define DEFAULT_METRICS 4u

/* What one flush hands over (one instance each: GPU granularity). */
static const struct {
    const char *function; /* CUPTI's name (NULL: none given) */
    uint32_t offset;
    uint64_t metric_id;
    uint64_t value;
} fake_batch[] = {
    {"_Z3fooi", 0x10, ID_INST, 7},          /* foo(int) */
    {"_Z3fooi", 0x10, ID_THREAD, 224},      /* the same instruction, another metric */
    {"_Z3fooi", 0x20, ID_INST, 0},          /* a value of 0: left out */
    {"plain_kernel", 0x30, ID_SECTORS, 12}, /* not mangled: kept as it is */
    {"plain_kernel", 0x30, ID_SHARED, 9},   /* a metric not configured: left out */
    {"_Z3barPf", 0x40, ID_THREAD, 3},       /* bar(float*) */
    {NULL, 0x50, ID_IDEAL, 4},              /* no name: "(unknown function)" */
};
#define FAKE_RECORDS (sizeof(fake_batch) / sizeof(fake_batch[0]))

typedef enum fake_call {
    CALL_PUSH,
    CALL_POP,
    CALL_DEVICE_ID,
    CALL_INITIALIZE,
    CALL_CHIP_NAME,
    CALL_PROPERTIES,
    CALL_SET_CONFIG,
    CALL_ENABLE,
    CALL_DATA_PROPERTIES,
    CALL_FLUSH,
    CALL_DISABLE,
    CALL_ACTIVITY_OFF, /* cuptiActivityDisable of kernel activity */
    CALL_ACTIVITY_ON,  /* cuptiActivityEnable of it */
} fake_call;

/* One call, as the fake saw it. Written by the calling thread at an index
 * it took atomically; read by the test after that thread was joined, or on
 * the thread itself. */
typedef struct fake_event {
    fake_call call;
    pthread_t thread;
    CUcontext current; /* pushed on that thread at the call */
} fake_event;

#define FAKE_EVENTS_MAX 512
#define FAKE_NAMES_MAX  64

static struct {
    fake_event events[FAKE_EVENTS_MAX];
    _Atomic int event_count;
    _Atomic int misuse; /* calls CUPTI would refuse; the first one named below */
    _Atomic int misuse_named;
    char misuse_first[160];
    _Atomic int configured;     /* SetConfig made */
    _Atomic(CUcontext) enabled; /* Enable's context, until Disable */
    _Atomic int enable_lazy;    /* the last Enable's enableLazyPatching */
    _Atomic CUptiResult flush_result;
    _Atomic int batch_ready; /* fake_batch counted, not yet flushed nor dropped */
    _Atomic int zero_counts; /* FlushData hands every value over as 0 (the H200 in flare) */
    /* Kernel activity (watched as flare's tracing enables it): on the H200
     * every SASS count read 0 when it was on while SASS metrics were
     * enabled (session 19), so switching it on then is a misuse. */
    _Atomic int activity_on;
    _Atomic CUptiResult activity_off_result; /* what cuptiActivityDisable answers */
    /* The metric names GetProperties was asked, in order. */
    char asked[16][PC_STALL_NAME_MAX];
    _Atomic int asked_count;
    /* SetConfig's arguments. */
    size_t config_count;
    uint64_t config_id[CUDA_SASS_METRICS_MAX];
    uint8_t config_granularity[CUDA_SASS_METRICS_MAX];
    uint32_t config_device;
    /* The names the flushes handed over (the caller frees them). */
    const void *names[FAKE_NAMES_MAX];
    _Atomic int name_count;
} fake;

/* The driver's context stack, per thread. */
static _Thread_local CUcontext pushed[8];
static _Thread_local int pushed_depth;

static CUcontext current_context(void)
{
    return pushed_depth > 0 ? pushed[pushed_depth - 1] : NULL;
}

static void misused(const char *what)
{
    if (atomic_fetch_add(&fake.misuse, 1) == 0) {
        snprintf(fake.misuse_first, sizeof(fake.misuse_first), "%s", what);
        atomic_store(&fake.misuse_named, 1);
    }
}

static void record(fake_call call)
{
    int at = atomic_fetch_add(&fake.event_count, 1);
    if (at >= FAKE_EVENTS_MAX) {
        misused("more calls than the fake's event log holds");
        return;
    }
    fake.events[at] =
        (fake_event){.call = call, .thread = pthread_self(), .current = current_context()};
}

CUresult cuCtxPushCurrent_v2(CUcontext context)
{
    record(CALL_PUSH);
    if (context == NULL || pushed_depth == (int)(sizeof(pushed) / sizeof(pushed[0]))) {
        misused("cuCtxPushCurrent_v2");
        return CUDA_ERROR_INVALID_VALUE;
    }
    pushed[pushed_depth++] = context;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *context)
{
    record(CALL_POP);
    if (pushed_depth == 0) {
        misused("cuCtxPopCurrent_v2 with nothing pushed on this thread");
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pushed_depth--;
    if (context != NULL)
        *context = pushed[pushed_depth];
    return CUDA_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **text)
{
    switch (result) {
    case CUPTI_SUCCESS:
        *text = "fake: success";
        break;
    case CUPTI_ERROR_INVALID_METRIC_NAME:
        *text = "fake: no such metric";
        break;
    case CUPTI_ERROR_INVALID_OPERATION:
        *text = "fake: invalid operation";
        break;
    case CUPTI_ERROR_INVALID_CONTEXT:
        *text = "fake: invalid context";
        break;
    default:
        *text = "fake: some error";
        break;
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *device)
{
    record(CALL_DEVICE_ID);
    if (context != TEST_CONTEXT)
        return CUPTI_ERROR_INVALID_CONTEXT;
    *device = FAKE_DEVICE;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *params)
{
    record(CALL_INITIALIZE);
    if (params->structSize != CUpti_Profiler_Initialize_Params_STRUCT_SIZE) {
        misused("cuptiProfilerInitialize: structSize");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *params)
{
    record(CALL_CHIP_NAME);
    if (params->structSize != CUpti_Device_GetChipName_Params_STRUCT_SIZE ||
        params->deviceIndex != FAKE_DEVICE) {
        misused("cuptiDeviceGetChipName: structSize or deviceIndex");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    params->pChipName = FAKE_CHIP;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSassMetricsGetProperties(CUpti_SassMetrics_GetProperties_Params *params)
{
    record(CALL_PROPERTIES);
    if (params->structSize != CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE ||
        params->pChipName == NULL || strcmp(params->pChipName, FAKE_CHIP) != 0 ||
        params->pMetricName == NULL) {
        misused("cuptiSassMetricsGetProperties: structSize, chip or name");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    int asked = atomic_fetch_add(&fake.asked_count, 1);
    if (asked < 16)
        snprintf(fake.asked[asked], sizeof(fake.asked[asked]), "%s", params->pMetricName);
    for (size_t i = 0; i < FAKE_METRICS; i++)
        if (strcmp(params->pMetricName, fake_metric[i].name) == 0) {
            params->metric.metricId = fake_metric[i].id;
            params->metric.pMetricName = fake_metric[i].name;
            params->metric.pMetricDescription = "a fake SASS metric";
            return CUPTI_SUCCESS;
        }
    return CUPTI_ERROR_INVALID_METRIC_NAME;
}

CUptiResult cuptiSassMetricsSetConfig(CUpti_SassMetricsSetConfig_Params *params)
{
    record(CALL_SET_CONFIG);
    if (params->structSize != CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE ||
        params->pConfigs == NULL || params->numOfMetricConfig == 0 ||
        params->numOfMetricConfig > CUDA_SASS_METRICS_MAX || params->deviceIndex != FAKE_DEVICE) {
        misused("cuptiSassMetricsSetConfig: arguments");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (current_context() != TEST_CONTEXT) {
        misused("cuptiSassMetricsSetConfig without the context current on its thread");
        return CUPTI_ERROR_INVALID_CONTEXT;
    }
    if (atomic_exchange(&fake.configured, 1)) {
        misused("a second cuptiSassMetricsSetConfig");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    fake.config_count = params->numOfMetricConfig;
    fake.config_device = params->deviceIndex;
    for (size_t i = 0; i < params->numOfMetricConfig; i++) {
        fake.config_id[i] = params->pConfigs[i].metricId;
        fake.config_granularity[i] = params->pConfigs[i].outputGranularity;
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSassMetricsEnable(CUpti_SassMetricsEnable_Params *params)
{
    record(CALL_ENABLE);
    if (params->structSize != CUpti_SassMetricsEnable_Params_STRUCT_SIZE || params->ctx == NULL) {
        misused("cuptiSassMetricsEnable: structSize or ctx");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (!atomic_load(&fake.configured) || atomic_load(&fake.enabled) != NULL) {
        misused("cuptiSassMetricsEnable before SetConfig, or while enabled");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    if (atomic_load(&fake.activity_on))
        misused("cuptiSassMetricsEnable with kernel activity on (its counts would all be 0)");
    atomic_store(&fake.enable_lazy, params->enableLazyPatching);
    atomic_store(&fake.enabled, params->ctx);
    return CUPTI_SUCCESS;
}

/* A call on the enabled context (a flush after the disable is refused). */
static int on_enabled_context(size_t size, size_t expected, CUcontext context, const char *call)
{
    if (size == expected && context != NULL && context == atomic_load(&fake.enabled))
        return 1;
    misused(call);
    return 0;
}

CUptiResult cuptiSassMetricsGetDataProperties(CUpti_SassMetricsGetDataProperties_Params *params)
{
    record(CALL_DATA_PROPERTIES);
    if (!on_enabled_context(params->structSize,
                            CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE, params->ctx,
                            "cuptiSassMetricsGetDataProperties off the enabled context"))
        return CUPTI_ERROR_INVALID_OPERATION;
    params->numOfPatchedInstructionRecords = atomic_load(&fake.batch_ready) ? FAKE_RECORDS : 0;
    params->numOfInstances = 1; /* GPU granularity */
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSassMetricsFlushData(CUpti_SassMetricsFlushData_Params *params)
{
    record(CALL_FLUSH);
    if (!on_enabled_context(params->structSize, CUpti_SassMetricsFlushData_Params_STRUCT_SIZE,
                            params->ctx, "cuptiSassMetricsFlushData off the enabled context"))
        return CUPTI_ERROR_INVALID_OPERATION;
    if (!atomic_load(&fake.batch_ready) || params->numOfPatchedInstructionRecords != FAKE_RECORDS ||
        params->numOfInstances != 1 || params->pMetricsData == NULL) {
        misused("cuptiSassMetricsFlushData: counts or pMetricsData");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    for (size_t i = 0; i < FAKE_RECORDS; i++)
        if (params->pMetricsData[i].structSize != sizeof(CUpti_SassMetrics_Data) ||
            params->pMetricsData[i].pInstanceValues == NULL) {
            misused("cuptiSassMetricsFlushData: the caller's CUpti_SassMetrics_Data");
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
    CUptiResult result = atomic_load(&fake.flush_result);
    if (result != CUPTI_SUCCESS)
        return result; /* nothing handed over: the disable drops the batch */
    for (size_t i = 0; i < FAKE_RECORDS; i++) {
        CUpti_SassMetrics_Data *data = &params->pMetricsData[i];
        data->cubinCrc = 0xc0ffee;
        data->functionIndex = (uint32_t)i;
        data->pcOffset = fake_batch[i].offset;
        data->pInstanceValues[0].metricId = fake_batch[i].metric_id;
        data->pInstanceValues[0].value = atomic_load(&fake.zero_counts) ? 0 : fake_batch[i].value;
        data->functionName = NULL;
        if (fake_batch[i].function != NULL) {
            char *name = strdup(fake_batch[i].function); /* CUPTI's malloc; the caller frees */
            if (name == NULL)
                return CUPTI_ERROR_OUT_OF_MEMORY;
            int at = atomic_fetch_add(&fake.name_count, 1);
            if (at < FAKE_NAMES_MAX)
                fake.names[at] = name;
            data->functionName = name;
        }
    }
    atomic_store(&fake.batch_ready, 0);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSassMetricsDisable(CUpti_SassMetricsDisable_Params *params)
{
    record(CALL_DISABLE);
    if (!on_enabled_context(params->structSize, CUpti_SassMetricsDisable_Params_STRUCT_SIZE,
                            params->ctx, "cuptiSassMetricsDisable while not enabled"))
        return CUPTI_ERROR_INVALID_OPERATION;
    /* What was counted and not flushed is dropped, and counted. */
    params->numOfDroppedRecords = atomic_exchange(&fake.batch_ready, 0) ? FAKE_RECORDS : 0;
    atomic_store(&fake.enabled, NULL);
    return CUPTI_SUCCESS;
}

/* Kernel activity, switched through cuda_cupti_api (set up in setup()). */
static CUptiResult fake_activity_enable(CUpti_ActivityKind kind)
{
    record(CALL_ACTIVITY_ON);
    if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || atomic_exchange(&fake.activity_on, 1))
        misused("cuptiActivityEnable: another kind, or kernel activity on already");
    if (atomic_load(&fake.enabled) != NULL)
        misused("kernel activity on while SASS metrics are enabled (their counts would be 0)");
    return CUPTI_SUCCESS;
}

static CUptiResult fake_activity_disable(CUpti_ActivityKind kind)
{
    record(CALL_ACTIVITY_OFF);
    CUptiResult refused = atomic_load(&fake.activity_off_result);
    if (refused != CUPTI_SUCCESS)
        return refused; /* kernel activity stays on */
    if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !atomic_exchange(&fake.activity_on, 0))
        misused("cuptiActivityDisable: another kind, or kernel activity off already");
    return CUPTI_SUCCESS;
}

/* ---- the fake's log ---- */

static int event_mark(void)
{
    return atomic_load(&fake.event_count);
}

/* How many calls of kind call since mark. */
static int calls_since(int mark, fake_call call)
{
    int count = 0, end = atomic_load(&fake.event_count);
    for (int i = mark; i < end && i < FAKE_EVENTS_MAX; i++)
        count += fake.events[i].call == call;
    return count;
}

/* Every call since mark was made on thread. */
static void assert_all_on(int mark, pthread_t thread)
{
    int end = atomic_load(&fake.event_count);
    for (int i = mark; i < end && i < FAKE_EVENTS_MAX; i++)
        if (!pthread_equal(fake.events[i].thread, thread))
            fail_msg("call %d (kind %d) ran on another thread", i, (int)fake.events[i].call);
}

#ifndef FLARE_TEST_SASS_BAD_METRIC
static int is_activity(fake_call call)
{
    return call == CALL_ACTIVITY_OFF || call == CALL_ACTIVITY_ON;
}

/* Every driver and SASS call since mark was made on thread (kernel activity
 * is switched from flare's thread). */
static void assert_sass_calls_on(int mark, pthread_t thread)
{
    int end = atomic_load(&fake.event_count);
    for (int i = mark; i < end && i < FAKE_EVENTS_MAX; i++)
        if (!is_activity(fake.events[i].call) && !pthread_equal(fake.events[i].thread, thread))
            fail_msg("call %d (kind %d) ran on another thread", i, (int)fake.events[i].call);
}

/* Driver and SASS calls since mark. */
static int sass_calls_since(int mark)
{
    int count = 0, end = atomic_load(&fake.event_count);
    for (int i = mark; i < end && i < FAKE_EVENTS_MAX; i++)
        count += !is_activity(fake.events[i].call);
    return count;
}
#endif

/* What every case ends with: nothing CUPTI would refuse was asked of it,
 * and nothing is left posted for a launch. */
static void assert_fake_clean(void)
{
    if (atomic_load(&fake.misuse) != 0)
        fail_msg("the fake CUPTI was misused %d times; first: %s", atomic_load(&fake.misuse),
                 atomic_load(&fake.misuse_named) ? fake.misuse_first : "?");
    assert_int_equal(cuda_app_thread_pending(), 0);
    assert_int_equal(pushed_depth, 0); /* this thread's pushes all popped */
}

/* ---- helpers ---- */

static pthread_t app_thread; /* the main thread: the application's */
static cuda_cupti_api cupti;
static uint64_t next_window_id = 100;
static store *database;
static char database_dir[256];

static void launch(void)
{
    cuda_app_thread_at_launch();
}

static const backend_engine_ops *ops(void)
{
    const backend_engine_ops *engine = cuda_sass_deep_engine();
    assert_non_null(engine);
    return engine;
}

/* Takes flare's queued log lines; 1 when one of them contains text. */
static int log_says(const char *text)
{
    static core_log_line lines[32];
    int found = 0, count;
    while ((count = core_log_take(lines, 32)) > 0)
        for (int i = 0; i < count; i++)
            if (strstr(lines[i].text, text) != NULL)
                found = 1;
    return found;
}

/* The sass_metrics capability row as it stands (core/capability.h has no
 * reader: it is written to a store and read back). */
typedef struct capability_row {
    char status[16];
    char reason[512];
} capability_row;

static int take_row(const store_capability_row *row, void *user)
{
    capability_row *out = user;
    if (strcmp(row->feature, "sass_metrics") == 0) {
        snprintf(out->status, sizeof(out->status), "%s", row->status);
        snprintf(out->reason, sizeof(out->reason), "%s", row->reason);
    }
    return 0;
}

static capability_row sass_capability(void)
{
    capability_row row = {0};
    core_capabilities_write(database, 1, 1);
    assert_int_equal(store_read_capabilities(database, take_row, &row), FLARE_OK);
    return row;
}

static void assert_capability(const char *status, const char *words)
{
    capability_row row = sass_capability();
    if (strcmp(row.status, status) != 0 || strstr(row.reason, words) == NULL)
        fail_msg("sass_metrics: %s \"%s\" (want %s \"...%s...\")", row.status, row.reason, status,
                 words);
}

/* One arm or disarm of the engine, made on a flare thread. */
typedef struct window_call {
    int disarm;
    uint64_t window_id;
    int status;
    char reason[256];
    backend_engine_result result;
    pthread_t thread;    /* the flare thread that made it */
    uint64_t elapsed_ns; /* how long the op took */
    _Atomic int done;
} window_call;

static void *window_call_main(void *argument)
{
    window_call *call = argument;
    pthread_setname_np(pthread_self(), "flare-test-win");
    call->thread = pthread_self();
    /* Not ops(): no cmocka assertion off the test's thread (install checked). */
    const backend_engine_ops *engine = cuda_sass_deep_engine();
    uint64_t began = core_now_ns();
    if (call->disarm) {
        call->status = engine->disarm(-1, core_now_ns(), &call->result);
    } else {
        backend_engine_config config = {.label = "test", .window_id = call->window_id};
        call->status = engine->arm(-1, &config, core_now_ns(), call->reason, sizeof(call->reason));
    }
    call->elapsed_ns = core_now_ns() - began;
    atomic_store(&call->done, 1);
    return NULL;
}

static int done_after_launch(window_call *call, int launches)
{
    if (launches)
        launch();
    return atomic_load(&call->done);
}

/* Runs the call on a flare thread while this application thread launches
 * (launches 1) or makes no launch (0: a stop waits out its bound). */
static void run_window_call(window_call *call, int launches)
{
    pthread_t thread;
    atomic_store(&call->done, 0);
    assert_int_equal(pthread_create(&thread, NULL, window_call_main, call), 0);
    TEST_WAIT_UNTIL(done_after_launch(call, launches));
    pthread_join(thread, NULL);
}

static window_call arm_window(void)
{
    window_call call = {.window_id = ++next_window_id};
    run_window_call(&call, 0); /* the enable is made at once, on the flare thread */
    return call;
}

static pc_engine_stats engine_stats(void)
{
    pc_engine_stats stats;
    pc_engine_stats_get(cuda_sass_core(), &stats);
    return stats;
}

/* Each case starts with nothing posted, nothing armed and the fake's error
 * counts at zero. */
static int fresh(void **state)
{
    (void)state;
    for (int i = 0; i < 1000 && cuda_app_thread_pending(); i++)
        launch();
    if (cuda_app_thread_pending())
        return -1;
    if (cuda_sass_deep_engine() != NULL && cuda_sass_core() != NULL) {
        window_call call = {.disarm = 1};
        run_window_call(&call, 1); /* FLARE_ERR_STATE unless a failed case left it armed */
    }
    atomic_store(&fake.flush_result, CUPTI_SUCCESS);
    atomic_store(&fake.batch_ready, 0);
    atomic_store(&fake.name_count, 0);
    atomic_store(&fake.misuse, 0);
    atomic_store(&fake.misuse_named, 0);
    log_says("");
    return 0;
}

static int setup(void **state)
{
    (void)state;
    pthread_setname_np(pthread_self(), "app-main");
    app_thread = pthread_self();
    static const char *const unset[] = {"FLARE_DEBUG",       "FLARE_CUDA_PC_LOG",
                                        "FLARE_DEEP_ENGINE", "FLARE_DEEP_WHEN",
                                        "FLARE_CUDA_SASS",   "FLARE_SASS_METRICS"};
    for (size_t i = 0; i < sizeof(unset) / sizeof(unset[0]); i++)
        unsetenv(unset[i]);
    core_log_configure_from_environment();
    cupti.library = dlopen(NULL, RTLD_NOW);
    snprintf(cupti.path, sizeof(cupti.path), "(the test program's fake CUPTI)");
    if (cupti.library == NULL)
        return -1;
    /* Kernel activity traced, as flare's tracing enables it: a SASS window
     * switches it off while open (cuda_storm.h's quiet). */
    cupti.cuptiActivityEnable = fake_activity_enable;
    cupti.cuptiActivityDisable = fake_activity_disable;
    atomic_store(&fake.activity_on, 1);
    cuda_storm_watch_kind(&cupti, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    test_make_temp_dir(database_dir, sizeof(database_dir), "sass");
    char error[256];
    return store_open(database_dir, STORE_OPEN_WRITE, &database, error, sizeof(error));
}

static int teardown(void **state)
{
    (void)state;
    store_close(database);
    test_remove_dir(database_dir);
    return 0;
}

/* The CUPTI resource callback, on an application thread of its own. */
static void *create_context(void *context)
{
    pthread_setname_np(pthread_self(), "app-context");
    cuda_sass_context_created(context);
    return NULL;
}

/* Creates TEST_CONTEXT on an application thread; returns that thread. */
static pthread_t create_test_context(void)
{
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, create_context, TEST_CONTEXT), 0);
    pthread_join(thread, NULL);
    return thread;
}

/* Installs with the environment setting name=value (the ways a process's
 * windows ask for sass); fails unless installed. */
static void install_for(const char *name, const char *value)
{
    setenv(name, value, 1);
    cuda_sass_install(&cupti, 1);
    /* NULL here: a SASS_FUNCTIONS symbol not exported (ENABLE_EXPORTS off?). */
    if (cuda_sass_deep_engine() == NULL || cuda_sass_core() == NULL) {
        capability_row row = sass_capability();
        fail_msg("not installed for %s=%s: %s \"%s\"", name, value, row.status, row.reason);
    }
    assert_int_equal(cuda_sass_installed(), 1);
    assert_int_equal(pc_engine_kind_of(cuda_sass_core()), PC_ENGINE_SASS);
    assert_string_equal(ops()->name, "cuda-sass-metrics");
    assert_capability(CORE_CAPABILITY_DEGRADED, "installed");
}

/* ---- cases (both programs) ---- */

/* Case 6. Not installed while no window can ask for sass: nothing set, a
 * PC engine asked for (by variable and by rule), or FLARE_DEEP_ENGINE=sass
 * switched off by FLARE_CUDA_SASS=0. A context meanwhile is not looked at.
 * Runs first: the engine installs once per process. */
static void test_not_installed_unless_a_window_asks(void **state)
{
    (void)state;
    int mark = event_mark();
    cuda_sass_install(&cupti, 1);
    assert_null(cuda_sass_deep_engine());
    assert_null(cuda_sass_core());
    assert_int_equal(cuda_sass_installed(), 0);
    assert_capability(CORE_CAPABILITY_OFF, "no window asks for engine sass");

    setenv("FLARE_DEEP_ENGINE", "pc", 1);
    setenv("FLARE_DEEP_WHEN", "kernel_duration_p99 > 5ms engine pc", 1);
    cuda_sass_install(&cupti, 1);
    assert_null(cuda_sass_deep_engine());
    assert_capability(CORE_CAPABILITY_OFF, "no window asks for engine sass");

    setenv("FLARE_DEEP_ENGINE", "sass", 1);
    setenv("FLARE_CUDA_SASS", "0", 1);
    cuda_sass_install(&cupti, 1);
    assert_null(cuda_sass_deep_engine());
    assert_null(cuda_sass_core());
    assert_capability(CORE_CAPABILITY_OFF, "switched off (FLARE_CUDA_SASS=0)");

    cuda_sass_context_created(TEST_CONTEXT);
    assert_int_equal(event_mark(), mark); /* neither the driver nor CUPTI called */
    unsetenv("FLARE_DEEP_ENGINE");
    unsetenv("FLARE_DEEP_WHEN");
    unsetenv("FLARE_CUDA_SASS");
    assert_fake_clean();
}

#ifndef FLARE_TEST_SASS_BAD_METRIC

/* ---- the window cases' helpers ---- */

/* What the engine must hand out for one flush of fake_batch. */
static const struct {
    const char *function;
    uint64_t offset;
    const char *metric;
    uint64_t value;
} expected_entry[] = {
    {"foo(int)", 0x10, "smsp__sass_inst_executed", 7},
    {"foo(int)", 0x10, "smsp__sass_thread_inst_executed", 224},
    {"plain_kernel", 0x30, "smsp__sass_sectors_mem_global", 12},
    {"bar(float*)", 0x40, "smsp__sass_thread_inst_executed", 3},
    {"(unknown function)", 0x50, "smsp__sass_sectors_mem_global_ideal", 4},
};
#define EXPECTED_ENTRIES (sizeof(expected_entry) / sizeof(expected_entry[0]))

/* The index of the first call of kind call since mark; fails without one. */
static int first_call(int mark, fake_call call)
{
    int end = atomic_load(&fake.event_count);
    for (int i = mark; i < end && i < FAKE_EVENTS_MAX; i++)
        if (fake.events[i].call == call)
            return i;
    fail_msg("no call %d since event %d", (int)call, mark);
    return -1;
}

static window_call disarm_window(int launches)
{
    window_call call = {.disarm = 1};
    run_window_call(&call, launches);
    return call;
}

/* Takes every entry the engine holds and checks window_id's against
 * expected_entry: each once, none else, within the window's times. Returns
 * how many the window had. */
static size_t take_window(uint64_t window_id, const backend_engine_result *result)
{
    pc_entry taken[32];
    size_t count, entries = 0;
    unsigned seen = 0;
    while ((count = pc_engine_take(cuda_sass_core(), taken, 32)) > 0) {
        for (size_t i = 0; i < count; i++) {
            const pc_entry *e = &taken[i];
            if (e->window_id != window_id)
                continue;
            entries++;
            size_t match = EXPECTED_ENTRIES;
            for (size_t x = 0; x < EXPECTED_ENTRIES; x++)
                if (strcmp(e->function, expected_entry[x].function) == 0 &&
                    e->pc_offset == expected_entry[x].offset &&
                    strcmp(e->stall_reason, expected_entry[x].metric) == 0 &&
                    e->samples == expected_entry[x].value)
                    match = x;
            if (match == EXPECTED_ENTRIES || (seen & (1u << match)) != 0)
                fail_msg("entry not expected (or twice): %s+0x%llx %s = %llu", e->function,
                         (unsigned long long)e->pc_offset, e->stall_reason,
                         (unsigned long long)e->samples);
            seen |= 1u << match;
            assert_int_equal(e->device, FAKE_DEVICE);
            assert_null(e->file); /* no source lines: the fake has no cuptiGetCubinCrc */
            assert_int_equal(e->line, 0);
            assert_true(e->first_ns >= result->armed_ns && e->last_ns <= result->disarmed_ns);
        }
    }
    for (size_t x = 0; x < EXPECTED_ENTRIES; x++)
        if ((seen & (1u << x)) == 0)
            fail_msg("expected entry missing: %s+0x%llx %s = %llu", expected_entry[x].function,
                     (unsigned long long)expected_entry[x].offset, expected_entry[x].metric,
                     (unsigned long long)expected_entry[x].value);
    return entries;
}

/* Every name the flushes handed over was freed (checked under ASan). */
static void assert_names_freed(int names)
{
    assert_int_equal(atomic_load(&fake.name_count), names);
    if (__asan_address_is_poisoned == NULL)
        return; /* LSan's check at exit and this one need ASan */
    for (int i = 0; i < names && i < FAKE_NAMES_MAX; i++)
        if (!__asan_address_is_poisoned(fake.names[i]))
            fail_msg("CUPTI's function name %d (\"%s\") was not freed", i,
                     (const char *)fake.names[i]);
}

/* The names one flush of fake_batch hands over (NULL ones are none). */
static int batch_names(void)
{
    int names = 0;
    for (size_t i = 0; i < FAKE_RECORDS; i++)
        names += fake_batch[i].function != NULL;
    return names;
}

/* ---- cases (the first program) ---- */

/* Case 1. Installed for a rule with engine sass; before any context a
 * window is refused and nothing is called. The first context configures, on
 * the thread that created it (the application's): the context pushed
 * first, the default metrics resolved by name in their order, SetConfig
 * with the context current (CUPTI refuses it otherwise) and GPU
 * granularity for each, then popped. A second context configures nothing;
 * the capability says configured. */
static void test_configure_at_the_first_context(void **state)
{
    (void)state;
    install_for("FLARE_DEEP_WHEN", "kernel_duration_p99 > 5ms engine sass");
    assert_capability(CORE_CAPABILITY_DEGRADED, "a rule with engine sass");

    int mark = event_mark();
    char reason[256] = "";
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_ERR_BACKEND);
    assert_non_null(strstr(reason, "no live CUDA context yet"));
    window_call early = arm_window();
    assert_int_equal(early.status, FLARE_ERR_BACKEND);
    assert_non_null(strstr(early.reason, "no live CUDA context yet"));
    assert_int_equal(event_mark(), mark);

    pthread_t creator = create_test_context();
    /* Every call on the creating thread, pushed first and popped last. */
    assert_all_on(mark, creator);
    int end = event_mark();
    assert_true(end > mark);
    assert_int_equal(fake.events[mark].call, CALL_PUSH);
    assert_int_equal(fake.events[end - 1].call, CALL_POP);
    assert_int_equal(calls_since(mark, CALL_PUSH), 1);
    assert_int_equal(calls_since(mark, CALL_POP), 1);
    assert_int_equal(calls_since(mark, CALL_DEVICE_ID), 1);
    assert_int_equal(calls_since(mark, CALL_INITIALIZE), 1);
    assert_int_equal(calls_since(mark, CALL_CHIP_NAME), 1);
    assert_int_equal(calls_since(mark, CALL_PROPERTIES), DEFAULT_METRICS);
    assert_int_equal(calls_since(mark, CALL_SET_CONFIG), 1);
    assert_int_equal(calls_since(mark, CALL_ENABLE), 0); /* idle until a window */
    int set = first_call(mark, CALL_SET_CONFIG);
    assert_ptr_equal(fake.events[set].current, TEST_CONTEXT);
    for (int i = mark + 1; i < end - 1; i++)
        assert_ptr_equal(fake.events[i].current, TEST_CONTEXT);

    /* The default metrics, by name, in order; their ids at GPU granularity. */
    assert_int_equal(atomic_load(&fake.asked_count), DEFAULT_METRICS);
    assert_int_equal(fake.config_count, DEFAULT_METRICS);
    assert_int_equal(fake.config_device, FAKE_DEVICE);
    for (size_t i = 0; i < DEFAULT_METRICS; i++) {
        assert_string_equal(fake.asked[i], fake_metric[i].name);
        assert_int_equal(fake.config_id[i], fake_metric[i].id);
        assert_int_equal(fake.config_granularity[i], CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU);
    }
    assert_non_null(strstr(CUDA_SASS_METRICS_DEFAULT, fake.asked[DEFAULT_METRICS - 1]));

    /* A second context: nothing more. */
    mark = event_mark();
    cuda_sass_context_created(OTHER_CONTEXT);
    assert_int_equal(event_mark(), mark);
    assert_int_equal(atomic_load(&fake.configured), 1);

    assert_capability(CORE_CAPABILITY_ACTIVE, "configured on device 1 at its first context");
    assert_capability(CORE_CAPABILITY_ACTIVE, "4 metrics, first smsp__sass_inst_executed");
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_OK);
    assert_fake_clean();
}

/* A stop's calls from mark: GetDataProperties, FlushData, then Disable (a
 * flush after the disable is refused), each on the program's thread; the
 * context is no longer enabled. */
static void assert_stop_at(int mark)
{
    assert_int_equal(fake.events[mark].call, CALL_DATA_PROPERTIES);
    assert_int_equal(fake.events[mark + 1].call, CALL_FLUSH);
    assert_int_equal(fake.events[mark + 2].call, CALL_DISABLE);
    for (int i = mark; i < mark + 3; i++)
        assert_true(pthread_equal(fake.events[i].thread, app_thread));
    assert_null(atomic_load(&fake.enabled));
}

/* A window armed (failing the case otherwise) whose kernels then ran: the
 * fake's next flush has a batch to hand over. */
static window_call arm_window_whose_kernels_ran(void)
{
    window_call arm = arm_window();
    if (arm.status != FLARE_OK)
        fail_msg("arm: %d %s", arm.status, arm.reason);
    atomic_store(&fake.batch_ready, 1);
    return arm;
}

/* Case 2. A window: the arm enables on the flare thread that arms (lazy
 * patching, the first context), with no configuration again; the disarm
 * posts its stop, made at the application's next launch on its thread:
 * GetDataProperties, FlushData, then Disable (a flush after the disable is
 * refused). The engine hands out exactly the non-zero values of configured
 * metrics, named as CUPTI's names demangle, with their offsets and metric
 * names; the window's samples are its keys; CUPTI's name strings are freed. */
static void test_window_stops_at_the_application_launch(void **state)
{
    (void)state;
    int mark = event_mark();
    window_call arm = arm_window();
    if (arm.status != FLARE_OK)
        fail_msg("arm: %d %s", arm.status, arm.reason);
    assert_all_on(mark, arm.thread);
    assert_int_equal(calls_since(mark, CALL_ENABLE), 1);
    /* Kernel activity off first; no push, no configuration again. */
    assert_int_equal(event_mark() - mark, 2);
    assert_int_equal(fake.events[mark].call, CALL_ACTIVITY_OFF);
    assert_int_equal(fake.events[mark + 1].call, CALL_ENABLE);
    assert_ptr_equal(atomic_load(&fake.enabled), TEST_CONTEXT);
    assert_int_equal(atomic_load(&fake.enable_lazy), 1);
    /* Counting: the program's launches are recorded as untimed from here. */
    assert_true(cuda_untimed_counting());

    atomic_store(&fake.batch_ready, 1); /* the window's kernels ran */
    mark = event_mark();
    window_call disarm = disarm_window(1);
    assert_false(cuda_untimed_counting()); /* from the disable on */
    if (disarm.status != FLARE_OK)
        fail_msg("disarm: %d %s", disarm.status, disarm.result.reason);
    assert_false(pthread_equal(disarm.thread, app_thread));
    assert_int_equal(event_mark() - mark, 4);
    assert_stop_at(mark);
    /* Kernel activity back on after the disable, from flare's thread. */
    assert_int_equal(fake.events[mark + 3].call, CALL_ACTIVITY_ON);
    assert_true(pthread_equal(fake.events[mark + 3].thread, disarm.thread));
    assert_int_equal(atomic_load(&fake.activity_on), 1);
    assert_true(log_says("stopped on the program's thread"));

    assert_names_freed(batch_names());
    assert_int_equal(disarm.result.samples, EXPECTED_ENTRIES);
    assert_string_equal(disarm.result.reason, "");
    pc_engine_stats stats = engine_stats();
    assert_int_equal(stats.window_entries, EXPECTED_ENTRIES);
    assert_int_equal(stats.window_lost, 0);
    assert_int_equal(take_window(arm.window_id, &disarm.result), EXPECTED_ENTRIES);
    assert_int_equal(engine_stats().entries_held, 0);
    assert_fake_clean();
}

#ifdef FLARE_TEST_SASS_EXIT
/* After the exit no window starts (CUPTI's exit handlers come next), and
 * the refusal calls nothing of CUPTI. */
static void expect_no_window_after_the_exit(void)
{
    int mark = event_mark();
    window_call late = arm_window();
    assert_int_equal(late.status, FLARE_ERR_BACKEND);
    if (strstr(late.reason, "the program is exiting") == NULL)
        fail_msg("arm's reason: \"%s\"", late.reason);
    assert_int_equal(event_mark(), mark);
    assert_fake_clean();
}

/* Case 2b. The program exits with a window open: cuda_sass_exit (cuda_trace's
 * exit handler, before CUPTI's own) flushes, disables and looks the names
 * up on the exiting thread, the program's; the window's close at the
 * session's end, from flare's thread, hands those results over and calls
 * nothing of CUPTI (kernel activity stays off). Made at the session's end
 * instead, after CUPTI's exit handlers, the flush lost counts and the
 * program crashed on the H200 (session 19). A second exit call finds
 * nothing to stop. */
static void test_exit_stops_an_open_window(void **state)
{
    (void)state;
    window_call arm = arm_window_whose_kernels_ran();
    int mark = event_mark();
    cuda_sass_exit(); /* on the main thread: the program's */
    assert_int_equal(event_mark() - mark, 3);
    assert_all_on(mark, app_thread);
    assert_stop_at(mark);
    assert_int_equal(atomic_load(&fake.activity_on), 0); /* until the close */
    cuda_sass_exit();
    assert_int_equal(event_mark() - mark, 3);

    mark = event_mark();
    window_call disarm = disarm_window(0);
    if (disarm.status != FLARE_OK)
        fail_msg("disarm: %d %s", disarm.status, disarm.result.reason);
    /* Nothing of CUPTI at the close: its exit handlers have run by then
     * (kernel activity stays off; the next window's close here turns it on). */
    assert_int_equal(event_mark(), mark);
    assert_int_equal(atomic_load(&fake.activity_on), 0);
    assert_true(log_says("stopped on the program's thread, at its exit"));
    assert_names_freed(batch_names());
    assert_int_equal(disarm.result.samples, EXPECTED_ENTRIES);
    assert_int_equal(take_window(arm.window_id, &disarm.result), EXPECTED_ENTRIES);

    expect_no_window_after_the_exit();
}

/* Case 2c (test_cuda_sass_exit_closing). The window's close and the exit
 * at once: the close (flare's thread) has posted its stop for the program's
 * next launch when the program exits instead. cuda_sass_exit serves it on
 * the exiting thread: the stop is made once, there, the close gets the
 * window's values without waiting out its bound (a close that did would
 * say "no launch within 2 s"), and the exit then has nothing of its own to
 * stop. */
static void test_exit_serves_a_close_in_flight(void **state)
{
    (void)state;
    window_call arm = arm_window_whose_kernels_ran();
    int mark = event_mark();
    window_call disarm = {.disarm = 1};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, window_call_main, &disarm), 0);
    TEST_WAIT_UNTIL(cuda_app_thread_pending() == 1); /* the close's stop, posted */
    assert_true(cuda_untimed_counting());            /* closed, but counting until the stop */
    cuda_sass_exit(); /* the program's thread, exiting instead of launching */
    assert_false(cuda_untimed_counting());
    TEST_WAIT_UNTIL(atomic_load(&disarm.done));
    pthread_join(thread, NULL);
    if (disarm.status != FLARE_OK)
        fail_msg("disarm: %d %s", disarm.status, disarm.result.reason);
    assert_stop_at(mark); /* on this thread */
    for (int i = mark + 3; i < event_mark(); i++)
        assert_true(is_activity(fake.events[i].call)); /* the quiet's end, nothing of SASS */
    assert_int_equal(cuda_app_thread_pending(), 0);
    assert_names_freed(batch_names());
    assert_int_equal(disarm.result.samples, EXPECTED_ENTRIES);
    assert_int_equal(take_window(arm.window_id, &disarm.result), EXPECTED_ENTRIES);
    mark = event_mark();
    cuda_sass_exit();
    assert_int_equal(event_mark(), mark);
    expect_no_window_after_the_exit();
}
#endif

/* Case 3. A disarm while the program launches nothing: after
 * CUDA_SASS_STOP_WAIT_NS the stop stays posted (never made from flare's
 * thread, where CUPTI hung while the program was inside CUDA): the disarm
 * says so and keeps nothing, the next arm is refused while it waits, the
 * program's next launch makes it (on its own thread), and what it flushed
 * is counted lost at the next window's read. */
static void test_stop_without_a_launch_waits_for_the_next_launch(void **state)
{
    (void)state;
    arm_window_whose_kernels_ran();
    int mark = event_mark();
    uint64_t lost_before = engine_stats().samples_lost;
    window_call disarm = disarm_window(0);
    assert_int_equal(disarm.status, FLARE_ERR_BACKEND);
    if (strstr(disarm.result.reason, "no launch within 2 s to stop at") == NULL)
        fail_msg("disarm's reason: \"%s\"", disarm.result.reason);
    assert_true(disarm.elapsed_ns >= CUDA_SASS_STOP_WAIT_NS - 1000000ull);
    assert_int_equal(event_mark() - mark, 0); /* nothing made from flare's thread */
    assert_int_equal(cuda_app_thread_pending(), 1);
    assert_int_equal(disarm.result.samples, 0);
    window_call refused = arm_window();
    assert_int_not_equal(refused.status, FLARE_OK);
    if (strstr(refused.reason, "still waits for the program's next launch") == NULL)
        fail_msg("arm's reason: \"%s\"", refused.reason);

    launch(); /* the program launches again: the stop is made here */
    assert_int_equal(cuda_app_thread_pending(), 0);
    assert_int_equal(event_mark() - mark, 3);
    assert_all_on(mark, app_thread);
    assert_stop_at(mark);
    assert_names_freed(batch_names());
    /* Kernel activity stays off: never switched from the program's thread;
     * the sampler's next step would switch it back on. */
    assert_int_equal(atomic_load(&fake.activity_on), 0);

    /* The next window arms before that step: its quiet is the late one's, and
     * the step after it leaves kernel activity off (on, its counts would
     * read 0: the fake calls that a misuse). Its read reports the late stop's
     * records; its disarm switches kernel activity back on. */
    mark = event_mark();
    window_call next = arm_window();
    assert_int_equal(next.status, FLARE_OK);
    assert_int_equal(event_mark() - mark, 1);
    assert_int_equal(fake.events[mark].call, CALL_ENABLE);
    cuda_storm_step();
    assert_int_equal(atomic_load(&fake.activity_on), 0);
    window_call close_next = disarm_window(1);
    assert_int_equal(close_next.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.activity_on), 1);
    cuda_storm_step();
    assert_int_equal(atomic_load(&fake.activity_on), 1);
    assert_int_equal(engine_stats().samples_lost - lost_before, FAKE_RECORDS);
    pc_entry taken[8];
    while (pc_engine_take(cuda_sass_core(), taken, 8) > 0) {
    }
    assert_fake_clean();
}

/* Case 3b. CUPTI refuses to switch kernel activity off: the window is
 * refused with CUPTI's words before any SASS call (enabled beside activity,
 * its counts would all read 0), kernel activity stays on, and the next
 * window, once CUPTI switches again, works. */
static void test_activity_that_stays_on_refuses_the_window(void **state)
{
    (void)state;
    atomic_store(&fake.activity_off_result, CUPTI_ERROR_UNKNOWN);
    int mark = event_mark();
    window_call arm = arm_window();
    atomic_store(&fake.activity_off_result, CUPTI_SUCCESS); /* before a failure ends the case */
    assert_int_equal(arm.status, FLARE_ERR_BACKEND);
    if (strstr(arm.reason, "activity off while the window is open, and switching it off "
                           "failed") == NULL)
        fail_msg("arm's reason: \"%s\"", arm.reason);
    assert_int_equal(sass_calls_since(mark), 0);
    assert_int_equal(atomic_load(&fake.activity_on), 1);
    assert_null(atomic_load(&fake.enabled));

    window_call next = arm_window();
    assert_int_equal(next.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.activity_on), 0);
    window_call close_next = disarm_window(1);
    assert_int_equal(close_next.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.activity_on), 1);
    pc_entry taken[8];
    while (pc_engine_take(cuda_sass_core(), taken, 8) > 0) {
    }
    assert_fake_clean();
}

/* Case 4. FlushData fails: the disarm says FLARE_ERR_BACKEND with CUPTI's
 * text, Disable is still made (after the flush), the records it dropped are
 * the window's losses, and the window has no entries. The next window
 * works. */
static void test_failed_flush_still_disables(void **state)
{
    (void)state;
    arm_window_whose_kernels_ran();
    atomic_store(&fake.flush_result, CUPTI_ERROR_INVALID_OPERATION);
    int mark = event_mark();
    window_call disarm = disarm_window(1);
    assert_int_equal(disarm.status, FLARE_ERR_BACKEND);
    if (strstr(disarm.result.reason, "cuptiSassMetricsFlushData: fake: invalid operation") == NULL)
        fail_msg("disarm's reason: \"%s\"", disarm.result.reason);
    assert_sass_calls_on(mark, app_thread);
    assert_int_equal(calls_since(mark, CALL_ACTIVITY_ON), 1); /* after a failed stop too */
    assert_int_equal(atomic_load(&fake.activity_on), 1);
    assert_int_equal(calls_since(mark, CALL_FLUSH), 1);
    assert_int_equal(calls_since(mark, CALL_DISABLE), 1);
    assert_true(first_call(mark, CALL_FLUSH) < first_call(mark, CALL_DISABLE));
    assert_null(atomic_load(&fake.enabled));
    assert_int_equal(disarm.result.samples, 0);
    pc_engine_stats stats = engine_stats();
    assert_int_equal(stats.window_lost, FAKE_RECORDS); /* Disable's numOfDroppedRecords */
    assert_int_equal(stats.window_entries, 0);
    assert_int_equal(atomic_load(&fake.name_count), 0);
    pc_entry taken[8];
    assert_int_equal(pc_engine_take(cuda_sass_core(), taken, 8), 0);

    atomic_store(&fake.flush_result, CUPTI_SUCCESS);
    window_call next = arm_window();
    assert_int_equal(next.status, FLARE_OK);
    atomic_store(&fake.batch_ready, 1);
    window_call close_next = disarm_window(1);
    assert_int_equal(close_next.status, FLARE_OK);
    assert_int_equal(engine_stats().window_lost, 0);
    assert_names_freed(batch_names());
    assert_int_equal(take_window(next.window_id, &close_next.result), EXPECTED_ENTRIES);
    assert_fake_clean();
}

/* Case 4b. Every count flushed is 0 (what the H200 gave in flare's
 * windows, session 18): the disarm fails and says so, nothing is stored
 * as a window of zeros. */
static void test_every_count_zero_is_said(void **state)
{
    (void)state;
    arm_window_whose_kernels_ran();
    atomic_store(&fake.zero_counts, 1);
    window_call disarm = disarm_window(1);
    atomic_store(&fake.zero_counts, 0);
    assert_int_equal(disarm.status, FLARE_ERR_BACKEND);
    if (strstr(disarm.result.reason, "CUPTI flushed 7 records, every count 0") == NULL)
        fail_msg("disarm's reason: \"%s\"", disarm.result.reason);
    assert_int_equal(disarm.result.samples, 0);
    pc_entry taken[8];
    assert_int_equal(pc_engine_take(cuda_sass_core(), taken, 8), 0);
    assert_names_freed(batch_names());
    assert_fake_clean();
}

/* Case 7, last (the first context stays destroyed). The first context
 * ends inside a window: the disarm says so and calls nothing; another
 * context's end changes nothing; a context created after the first one's
 * end is not taken (the capability says "no later context is counted"):
 * no call at its creation, windows stay refused, and nothing is enabled,
 * flushed or disabled on it. */
static void test_no_later_context_after_the_first_ends(void **state)
{
    (void)state;
    window_call arm = arm_window();
    if (arm.status != FLARE_OK)
        fail_msg("arm: %d %s", arm.status, arm.reason);
    cuda_sass_context_destroying(OTHER_CONTEXT);
    assert_capability(CORE_CAPABILITY_ACTIVE, "configured on device 1");
    cuda_sass_context_destroying(TEST_CONTEXT);
    assert_capability(CORE_CAPABILITY_DEGRADED, "no later context is counted");
    atomic_store(&fake.enabled, NULL); /* CUPTI forgets a destroyed context's state */

    int mark = event_mark();
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, create_context, OTHER_CONTEXT), 0);
    pthread_join(thread, NULL);
    if (event_mark() != mark)
        fail_msg("a context created after the first one's end was taken: %d calls (the first: "
                 "kind %d)",
                 event_mark() - mark, (int)fake.events[mark].call);

    window_call disarm = disarm_window(1);
    assert_int_equal(disarm.status, FLARE_ERR_BACKEND);
    if (strstr(disarm.result.reason, "destroyed in the window") == NULL)
        fail_msg("disarm's reason: \"%s\"", disarm.result.reason);
    char reason[256] = "";
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_ERR_BACKEND);
    assert_int_equal(atomic_load(&fake.activity_on), 1); /* back on, the window over */
    window_call again = arm_window();
    assert_int_equal(again.status, FLARE_ERR_BACKEND);
    assert_int_equal(sass_calls_since(mark), 0); /* nothing on the later context */
    assert_capability(CORE_CAPABILITY_DEGRADED, "no later context is counted");
    assert_fake_clean();
}

#else /* FLARE_TEST_SASS_BAD_METRIC */

/* Case 5. FLARE_SASS_METRICS names one metric CUPTI does not know: the
 * configuration at the first context stops at it (no SetConfig), the
 * capability and the probe say why, and every window is refused with that
 * reason, without asking CUPTI again or enabling. */
static void test_refused_metric_fails_the_configuration(void **state)
{
    (void)state;
    setenv("FLARE_SASS_METRICS", "smsp__sass_inst_executed,no_such", 1);
    install_for("FLARE_DEEP_ENGINE", "sass");
    assert_capability(CORE_CAPABILITY_DEGRADED, "FLARE_DEEP_ENGINE=sass");

    int mark = event_mark();
    pthread_t creator = create_test_context();
    assert_all_on(mark, creator);
    assert_int_equal(calls_since(mark, CALL_PROPERTIES), 2);
    assert_string_equal(fake.asked[0], "smsp__sass_inst_executed");
    assert_string_equal(fake.asked[1], "no_such");
    assert_int_equal(calls_since(mark, CALL_SET_CONFIG), 0);
    assert_int_equal(calls_since(mark, CALL_PUSH), 1);
    assert_int_equal(calls_since(mark, CALL_POP), 1); /* popped on the failure too */
    assert_int_equal(fake.events[event_mark() - 1].call, CALL_POP);
    assert_int_equal(atomic_load(&fake.configured), 0);

    static const char want[] = "SASS metric 'no_such' is not known on " FAKE_CHIP;
    assert_capability(CORE_CAPABILITY_UNAVAILABLE, want);
    assert_capability(CORE_CAPABILITY_UNAVAILABLE, "fake: no such metric");
    char reason[256] = "";
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_ERR_BACKEND);
    if (strstr(reason, want) == NULL)
        fail_msg("probe: \"%s\"", reason);

    mark = event_mark();
    for (int i = 0; i < 2; i++) {
        window_call arm = arm_window();
        assert_int_equal(arm.status, FLARE_ERR_BACKEND);
        if (strstr(arm.reason, want) == NULL)
            fail_msg("arm %d: \"%s\" (want \"%s...\")", i, arm.reason, want);
    }
    assert_int_equal(calls_since(mark, CALL_PROPERTIES), 0); /* the failure is kept */
    assert_int_equal(calls_since(mark, CALL_SET_CONFIG), 0);
    assert_int_equal(calls_since(mark, CALL_ENABLE), 0);
    assert_null(atomic_load(&fake.enabled));
    assert_int_equal(engine_stats().start_failures, 2);
    assert_int_equal(engine_stats().arms, 0);
    unsetenv("FLARE_SASS_METRICS");
    assert_fake_clean();
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_not_installed_unless_a_window_asks, fresh),
#if !defined(FLARE_TEST_SASS_BAD_METRIC) && !defined(FLARE_TEST_SASS_EXIT)
        cmocka_unit_test_setup(test_configure_at_the_first_context, fresh),
        cmocka_unit_test_setup(test_window_stops_at_the_application_launch, fresh),
        cmocka_unit_test_setup(test_stop_without_a_launch_waits_for_the_next_launch, fresh),
        cmocka_unit_test_setup(test_activity_that_stays_on_refuses_the_window, fresh),
        cmocka_unit_test_setup(test_failed_flush_still_disables, fresh),
        cmocka_unit_test_setup(test_every_count_zero_is_said, fresh),
        cmocka_unit_test_setup(test_no_later_context_after_the_first_ends, fresh),
#elif defined(FLARE_TEST_SASS_EXIT)
        cmocka_unit_test_setup(test_configure_at_the_first_context, fresh),
        cmocka_unit_test_setup(test_window_stops_at_the_application_launch, fresh),
#ifdef FLARE_TEST_SASS_EXIT_CLOSING
        cmocka_unit_test_setup(test_exit_serves_a_close_in_flight, fresh),
#else
        cmocka_unit_test_setup(test_exit_stops_an_open_window, fresh),
#endif
#else
        cmocka_unit_test_setup(test_refused_metric_fails_the_configuration, fresh),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
