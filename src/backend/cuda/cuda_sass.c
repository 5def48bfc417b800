/*
 * cuda_sass.c: CUPTI's SASS metrics as the hardware side of the SASS deep
 * engine (cuda_sass.h): configure once at the first context, enable per
 * window, flush then disable at its stop, and hand the flushed records to
 * the engine as pc_raw_samples (a record's value is the count, its metric
 * the "stall reason" code).
 *
 * Threads: the configuration on the program's thread in the first
 * context's callback; start, stop and read from the engine, one at a time
 * under its hardware lock (start on the coordinator's thread; stop's flush
 * and disable handed to the program's thread at its next launch, the
 * coordinator waiting for them; read on the coordinator's or the engine's
 * drain thread, finding nothing while enabled). Must never: flush or
 * disable from flare's thread while the program launches, keep CUPTI's
 * name strings (each is copied, then freed, as NVIDIA's sample does), or
 * hand over a value of 0.
 */
#include "backend/cuda/cuda_sass.h"

#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_app_thread.h"
#include "backend/cuda/cuda_engine_costs.h"
#include "backend/cuda/cuda_pc_lines.h"
#include "backend/cuda/cuda_pc_settings.h"
#include "backend/cuda/cuda_pm.h"
#include "backend/cuda/cuda_storm.h"
#include "backend/cuda/cuda_trace.h"
#include "backend/cuda/cuda_untimed.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pcsamp/pc_engine.h"
#include "pcsamp/pc_names.h"

#define SASS_FUNCTIONS(X)                                                                          \
    X(cuptiGetResultString, CUptiResult, (CUptiResult, const char **))                             \
    X(cuptiGetDeviceId, CUptiResult, (CUcontext, uint32_t *))                                      \
    X(cuptiProfilerInitialize, CUptiResult, (CUpti_Profiler_Initialize_Params *))                  \
    X(cuptiDeviceGetChipName, CUptiResult, (CUpti_Device_GetChipName_Params *))                    \
    X(cuptiSassMetricsGetProperties, CUptiResult, (CUpti_SassMetrics_GetProperties_Params *))      \
    X(cuptiSassMetricsSetConfig, CUptiResult, (CUpti_SassMetricsSetConfig_Params *))               \
    X(cuptiSassMetricsEnable, CUptiResult, (CUpti_SassMetricsEnable_Params *))                     \
    X(cuptiSassMetricsDisable, CUptiResult, (CUpti_SassMetricsDisable_Params *))                   \
    X(cuptiSassMetricsGetDataProperties, CUptiResult,                                              \
      (CUpti_SassMetricsGetDataProperties_Params *))                                               \
    X(cuptiSassMetricsFlushData, CUptiResult, (CUpti_SassMetricsFlushData_Params *))

#define SASS_FUNCTION_FIELD_(name, result, arguments) result(*name) arguments;
typedef struct sass_api {
    SASS_FUNCTIONS(SASS_FUNCTION_FIELD_)
} sass_api;
#undef SASS_FUNCTION_FIELD_

typedef struct sass_hardware {
    sass_api api;
    _Atomic(CUcontext) context; /* the first context, until destroyed */
    /* The configuration, made at the first start: 0 not yet, 1 made, -1
     * failed (config_reason says why, and every later start says it). */
    _Atomic int configured;
    char config_reason[256];
    uint32_t device;
    size_t metric_count;
    uint64_t metric_id[CUDA_SASS_METRICS_MAX];
    char metric_name[CUDA_SASS_METRICS_MAX][PC_STALL_NAME_MAX];
    int enabled;
    /* The last stop's records, handed over by read. */
    pc_raw_sample *records;
    size_t record_count, cursor;
    _Atomic uint64_t lost; /* not yet reported by a read (written at the exit too) */
    pc_names *names;       /* CUPTI's (mangled) name -> flare's, whole */
} sass_hardware;

static sass_hardware hardware;
/* A stop given up on and not yet run: the next start waits for it. */
static _Atomic int stop_pending;
static pc_engine *engine;
static const char unknown_function[] = "(unknown function)";
static const char names_full[] = "(function names table full)";

static const char *result_text(CUptiResult result);

/* The call's result, after its "end" line in FLARE_CUDA_PC_LOG's call log. */
static CUptiResult logged_end(const char *call, CUptiResult result)
{
    if (cuda_pc_log_on())
        cuda_pc_log_call(call, "end", result_text(result));
    return result;
}

/* Calls CUPTI's name(params) between two lines of the call log (the PC
 * engine's, cuda_pc_settings.h: where a window that never ends is stuck). */
#define SASS_LOGGED(name, params)                                                                  \
    (cuda_pc_log_call(#name, "begin", NULL), logged_end(#name, hardware.api.name(params)))

static const char *result_text(CUptiResult result)
{
    const char *text = NULL;
    if (hardware.api.cuptiGetResultString == NULL ||
        hardware.api.cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == NULL)
        return "unknown CUPTI error";
    return text;
}

static int failed(CUptiResult result, const char *what, char *reason, size_t reason_size)
{
    snprintf(reason, reason_size, "%s: %s", what, result_text(result));
    return FLARE_ERR_BACKEND;
}

/* ---- configuration (the first start) ---- */

/* FLARE_SASS_METRICS (or the default) resolved on chip into the metric
 * table. FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT naming the one refused. */
static int resolve_metrics(const char *chip, char *reason, size_t reason_size)
{
    const char *setting = getenv("FLARE_SASS_METRICS");
    const char *list = setting != NULL && setting[0] != '\0' ? setting : CUDA_SASS_METRICS_DEFAULT;
    hardware.metric_count = 0;
    for (const char *cursor = list; *cursor != '\0';) {
        size_t length = strcspn(cursor, ",");
        char name[PC_STALL_NAME_MAX];
        if (length == 0 || length >= sizeof(name) ||
            hardware.metric_count == CUDA_SASS_METRICS_MAX) {
            snprintf(reason, reason_size,
                     "FLARE_SASS_METRICS=%.80s: 1 to %u names of 1 to %d bytes, comma-separated",
                     list, CUDA_SASS_METRICS_MAX, PC_STALL_NAME_MAX - 1);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        memcpy(name, cursor, length);
        name[length] = '\0';
        CUpti_SassMetrics_GetProperties_Params params = {
            .structSize = CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
        params.pChipName = chip;
        params.pMetricName = name;
        CUptiResult result = SASS_LOGGED(cuptiSassMetricsGetProperties, &params);
        if (result != CUPTI_SUCCESS) {
            snprintf(reason, reason_size, "SASS metric '%s' is not known on %s: %s", name, chip,
                     result_text(result));
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        hardware.metric_id[hardware.metric_count] = params.metric.metricId;
        memcpy(hardware.metric_name[hardware.metric_count], name, length + 1);
        hardware.metric_count++;
        cursor += length + (cursor[length] == ',');
    }
    return FLARE_OK;
}

static int configure(CUcontext context, char *reason, size_t reason_size)
{
    CUptiResult result = hardware.api.cuptiGetDeviceId(context, &hardware.device);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiGetDeviceId", reason, reason_size);
    /* Counted by CUPTI: the range profiler and PM sampling may have made it. */
    CUpti_Profiler_Initialize_Params initialize = {
        .structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    result = SASS_LOGGED(cuptiProfilerInitialize, &initialize);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerInitialize", reason, reason_size);
    CUpti_Device_GetChipName_Params chip = {.structSize =
                                                CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = hardware.device;
    result = SASS_LOGGED(cuptiDeviceGetChipName, &chip);
    if (result != CUPTI_SUCCESS || chip.pChipName == NULL)
        return failed(result, "cuptiDeviceGetChipName", reason, reason_size);
    int status = resolve_metrics(chip.pChipName, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    CUpti_SassMetrics_Config configs[CUDA_SASS_METRICS_MAX];
    for (size_t i = 0; i < hardware.metric_count; i++)
        configs[i] = (CUpti_SassMetrics_Config){.metricId = hardware.metric_id[i],
                                                .outputGranularity =
                                                    CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU};
    CUpti_SassMetricsSetConfig_Params set = {.structSize =
                                                 CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
    set.numOfMetricConfig = hardware.metric_count;
    set.pConfigs = configs;
    set.deviceIndex = hardware.device;
    result = SASS_LOGGED(cuptiSassMetricsSetConfig, &set);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiSassMetricsSetConfig", reason, reason_size);
    return FLARE_OK;
}

/* The configuration, made once (its failure kept and repeated): by the
 * first context's callback, or else by the first start. */
#define CONFIG_RUNNING 2
static int ensure_configured(CUcontext context, const char *when, char *reason, size_t reason_size)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&hardware.configured, &expected, CONFIG_RUNNING)) {
        uint64_t began = core_now_ns();
        int status = configure(context, hardware.config_reason, sizeof(hardware.config_reason));
        atomic_store(&hardware.configured, status == FLARE_OK ? 1 : -1);
        if (status == FLARE_OK)
            core_capability_set("sass_metrics", 1, CORE_CAPABILITY_ACTIVE,
                                "configured on device %u %s (%.0f ms): %zu metrics, first %s",
                                hardware.device, when, (double)(core_now_ns() - began) / 1e6,
                                hardware.metric_count, hardware.metric_name[0]);
        else
            core_capability_set("sass_metrics", 1, CORE_CAPABILITY_UNAVAILABLE, "%s",
                                hardware.config_reason);
    }
    int state = atomic_load(&hardware.configured);
    if (state == 1)
        return FLARE_OK;
    snprintf(reason, reason_size, "%s",
             state == CONFIG_RUNNING ? "SASS metrics: still being configured at the first context"
                                     : hardware.config_reason);
    return FLARE_ERR_BACKEND;
}

/* ---- the context, current on flare's thread for the calls ---- */

/* CUPTI's SetConfig wants the context current on the calling thread (from
 * the coordinator's thread it answered CUPTI_ERROR_INVALID_CONTEXT on the
 * H200), so the configuration pushes it and pops it after. */
typedef CUresult (*ctx_push_fn)(CUcontext);
typedef CUresult (*ctx_pop_fn)(CUcontext *);
static _Atomic(ctx_push_fn) ctx_push;
static _Atomic(ctx_pop_fn) ctx_pop;

/* The driver's cuCtxPushCurrent and cuCtxPopCurrent: from the process
 * (RTLD_DEFAULT: the driver as the program loaded it, or a test's fake),
 * else from libcuda.so.1. 0, or -1 when either is missing. */
static int resolve_driver(void)
{
    if (atomic_load(&ctx_push) != NULL && atomic_load(&ctx_pop) != NULL)
        return 0;
    void *push = dlsym(RTLD_DEFAULT, "cuCtxPushCurrent_v2");
    void *pop = dlsym(RTLD_DEFAULT, "cuCtxPopCurrent_v2");
    if (push == NULL || pop == NULL) {
        void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        push = library != NULL ? dlsym(library, "cuCtxPushCurrent_v2") : NULL;
        pop = library != NULL ? dlsym(library, "cuCtxPopCurrent_v2") : NULL;
    }
    if (push == NULL || pop == NULL)
        return -1;
    atomic_store(&ctx_push, (ctx_push_fn)push);
    atomic_store(&ctx_pop, (ctx_pop_fn)pop);
    return 0;
}

static int push_context(CUcontext context, char *reason, size_t reason_size)
{
    if (resolve_driver() != 0) {
        snprintf(reason, reason_size,
                 "SASS metrics: cuCtxPushCurrent_v2 or cuCtxPopCurrent_v2 missing in the driver");
        return FLARE_ERR_BACKEND;
    }
    cuda_pc_log_call("cuCtxPushCurrent", "begin", NULL);
    CUresult result = atomic_load(&ctx_push)(context);
    cuda_pc_log_call("cuCtxPushCurrent", "end", result == CUDA_SUCCESS ? "CUDA_SUCCESS" : "failed");
    if (result != CUDA_SUCCESS) {
        snprintf(reason, reason_size, "SASS metrics: cuCtxPushCurrent: CUDA error %d", (int)result);
        return FLARE_ERR_BACKEND;
    }
    return FLARE_OK;
}

static void pop_context(void)
{
    CUcontext popped = NULL;
    atomic_load (&ctx_pop)(&popped);
}

/* ---- the hardware ops ---- */

/* cuda_storm_quiet_untimed() at the window's enable (flare's thread). */
static uint64_t quiet_launches_from;
/* A window's counting, for the program's exit (cuda_sass_exit): OPEN from
 * its enable until its stop (STOPPING until it is made or posted) or the
 * exit's takes it (a compare-and-swap settles which); the exit's stop runs
 * EXIT_RUNNING, then EXIT_DONE. After the exit no window starts (exited). */
enum {
    WINDOW_IDLE = 0,
    WINDOW_OPEN = 1,
    WINDOW_STOPPING = 2,
    WINDOW_EXIT_RUNNING = 3,
    WINDOW_EXIT_DONE = 4
};
static _Atomic int window_state;
static _Atomic int exited;

static void drop_records(void)
{
    free(hardware.records);
    hardware.records = NULL;
    hardware.record_count = hardware.cursor = 0;
}

static int hw_start(void *unused, int device, uint64_t period_ns, char *reason, size_t reason_size)
{
    (void)unused;
    (void)period_ns;
    CUcontext context = atomic_load(&hardware.context);
    if (context == NULL) {
        snprintf(reason, reason_size, "SASS metrics: no live CUDA context yet");
        return FLARE_ERR_BACKEND;
    }
    if (atomic_load(&stop_pending)) {
        snprintf(reason, reason_size,
                 "SASS metrics: the last window's stop still waits for the program's next launch");
        return FLARE_ERR_BACKEND;
    }
    if (atomic_load(&exited)) {
        snprintf(reason, reason_size, "SASS metrics: the program is exiting");
        return FLARE_ERR_BACKEND;
    }
    /* Configured at the first context, unless that could not push it: then
     * here (SetConfig wants it current; Enable, Flush and Disable did not). */
    int push = atomic_load(&hardware.configured) == 0;
    int status = push ? push_context(context, reason, reason_size) : FLARE_OK;
    if (status != FLARE_OK)
        return status;
    status = ensure_configured(context, "at the first sass window", reason, reason_size);
    if (push)
        pop_context();
    if (status == FLARE_OK && (uint32_t)device != hardware.device) {
        snprintf(reason, reason_size, "SASS metrics are configured on device %u, not %d",
                 hardware.device, device);
        status = FLARE_ERR_INVALID_ARGUMENT;
    }
    /* CUPTI's activity off first: beside it every count reads 0 (the
     * quiet, cuda_storm.h). */
    if (status == FLARE_OK)
        status = cuda_storm_quiet_begin(reason, reason_size);
    if (status == FLARE_OK) {
        drop_records();
        quiet_launches_from = cuda_storm_quiet_untimed();
        CUpti_SassMetricsEnable_Params enable = {.structSize =
                                                     CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
        enable.ctx = context;
        enable.enableLazyPatching = 1;
        CUptiResult result = SASS_LOGGED(cuptiSassMetricsEnable, &enable);
        if (result != CUPTI_SUCCESS) {
            status = failed(result, "cuptiSassMetricsEnable", reason, reason_size);
            cuda_storm_quiet_end();
        } else {
            cuda_untimed_set_counting(1); /* launches recorded (cuda_untimed.h) */
        }
    }
    hardware.enabled = status == FLARE_OK;
    int idle = WINDOW_IDLE;
    if (status == FLARE_OK && !atomic_compare_exchange_strong(&window_state, &idle, WINDOW_OPEN)) {
        /* The exit came first (cuda_sass_exit): left enabled for the process's
         * last moments; nothing of CUPTI is made after the exit. */
        hardware.enabled = 0;
        snprintf(reason, reason_size, "SASS metrics: the program is exiting");
        status = FLARE_ERR_BACKEND;
    }
    return status;
}

/* The metric code of CUPTI's id, or -1. */
static int metric_code(uint64_t id)
{
    for (size_t i = 0; i < hardware.metric_count; i++)
        if (hardware.metric_id[i] == id)
            return (int)i;
    return -1;
}

static const char *function_name(const char *cupti_name)
{
    if (cupti_name == NULL)
        return unknown_function;
    const char *name = pc_names_find(hardware.names, cupti_name);
    if (name == NULL) {
        const char *demangled = cuda_demangle(cupti_name);
        name = pc_names_add(hardware.names, cupti_name, demangled != NULL ? demangled : cupti_name);
    }
    return name != NULL ? name : names_full;
}

/* The last flush's values left out: of a metric not configured, and 0. */
static size_t flushed_unknown, flushed_zero;

/* One flushed record into the next of hardware.records (its instances
 * summed); its name string freed. Values of 0 and unknown metrics are left
 * out. On flare's thread (the names and the lines take locks). */
static void keep_record(CUpti_SassMetrics_Data *data, size_t instances, uint64_t now_ns)
{
    const char *function = function_name(data->functionName);
    for (size_t i = 0; i < instances; i++) {
        const CUpti_SassMetrics_InstanceValue *value = &data->pInstanceValues[i];
        int code = metric_code(value->metricId);
        flushed_unknown += code < 0;
        flushed_zero += code >= 0 && value->value == 0;
        if (code < 0 || value->value == 0)
            continue;
        pc_raw_sample *out = &hardware.records[hardware.record_count];
        if (out > hardware.records && out[-1].stall_reason == (uint32_t)code &&
            out[-1].pc_offset == data->pcOffset && out[-1].function == function) {
            out[-1].count += value->value; /* another instance of the same */
            continue;
        }
        *out = (pc_raw_sample){.count = value->value,
                               .time_ns = now_ns,
                               .device = (int32_t)hardware.device,
                               .stall_reason = (uint32_t)code,
                               .pc_offset = data->pcOffset,
                               .function = function};
        if (function != unknown_function && function != names_full)
            cuda_pc_lines_find(data->cubinCrc, data->functionName, function, data->pcOffset,
                               &out->file, &out->line, &out->code);
        hardware.record_count++;
    }
    free((void *)data->functionName);
    data->functionName = NULL;
}

/*
 * A stop: its flush and disable, made on the application's thread at its
 * next launch (cuda_app_thread.h), and what they brought back, raw: the
 * names, lines and table are made on flare's thread after (they allocate
 * and lock). state settles who owns the results when the stop waits past
 * its bound: POSTED, then DONE (stop_here ran; hw_stop takes them) or
 * ABANDONED (hw_stop gave up; stop_here, when it runs at a later launch,
 * discards them and counts them lost).
 */
enum { STOP_POSTED = 0, STOP_DONE = 1, STOP_ABANDONED = 2 };
typedef struct stop_request {
    CUcontext context;
    _Atomic int state;
    int status;
    char reason[192];
    CUpti_SassMetrics_Data *data; /* count records, each instances values */
    CUpti_SassMetrics_InstanceValue *values;
    size_t count, instances;
    size_t dropped; /* Disable's numOfDroppedRecords */
} stop_request;

static stop_request pending_stop;
/* Records such a stop discarded, for the next read. */
static _Atomic uint64_t late_lost;

static void free_flushed(stop_request *request)
{
    for (size_t i = 0; request->data != NULL && i < request->count; i++)
        free((void *)request->data[i].functionName);
    free(request->data);
    free(request->values);
    request->data = NULL;
    request->values = NULL;
}

/* GetDataProperties, then FlushData into fresh arrays (CUPTI fills the
 * names). 0, or a flare_status with request->reason. */
static int flush_raw(stop_request *request)
{
    CUpti_SassMetricsGetDataProperties_Params properties = {
        .structSize = CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
    properties.ctx = request->context;
    CUptiResult result = SASS_LOGGED(cuptiSassMetricsGetDataProperties, &properties);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiSassMetricsGetDataProperties", request->reason,
                      sizeof(request->reason));
    size_t count = properties.numOfPatchedInstructionRecords;
    size_t instances = properties.numOfInstances > 0 ? properties.numOfInstances : 1;
    if (count == 0)
        return FLARE_OK;
    if (count > CUDA_SASS_RECORDS_MAX || instances > 4096) {
        /* Left unflushed: the disable drops them, and counts them. */
        snprintf(request->reason, sizeof(request->reason),
                 "SASS metrics: %zu records of %zu instances, past the bound of %u: none kept",
                 count, instances, CUDA_SASS_RECORDS_MAX);
        return FLARE_ERR_BACKEND;
    }
    request->data = calloc(count, sizeof(*request->data));
    request->values = calloc(count * instances, sizeof(*request->values));
    if (request->data == NULL || request->values == NULL) {
        free_flushed(request);
        snprintf(request->reason, sizeof(request->reason), "no memory for %zu SASS records", count);
        return FLARE_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < count; i++) {
        request->data[i].structSize = sizeof(request->data[i]);
        request->data[i].pInstanceValues = &request->values[i * instances];
    }
    request->count = count;
    request->instances = instances;
    CUpti_SassMetricsFlushData_Params params = {.structSize =
                                                    CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
    params.ctx = request->context;
    params.numOfPatchedInstructionRecords = count;
    params.numOfInstances = instances;
    params.pMetricsData = request->data;
    result = SASS_LOGGED(cuptiSassMetricsFlushData, &params);
    if (result != CUPTI_SUCCESS) {
        free_flushed(request); /* the disable drops them, and counts them */
        request->count = 0;
        return failed(result, "cuptiSassMetricsFlushData", request->reason,
                      sizeof(request->reason));
    }
    return FLARE_OK;
}

/* Flush, then disable (CUPTI refuses a flush after the disable); nothing
 * when the context is no longer the one enabled (destroyed meanwhile). */
static int stop_here(void *argument)
{
    stop_request *request = argument;
    if (atomic_load(&hardware.context) != request->context) {
        snprintf(request->reason, sizeof(request->reason),
                 "SASS metrics: the context was destroyed in the window");
        request->status = FLARE_ERR_BACKEND;
    } else {
        request->status = flush_raw(request);
        CUpti_SassMetricsDisable_Params disable = {.structSize =
                                                       CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
        disable.ctx = request->context;
        CUptiResult result = SASS_LOGGED(cuptiSassMetricsDisable, &disable);
        cuda_untimed_set_counting(0);
        request->dropped = disable.numOfDroppedRecords;
        if (request->status == FLARE_OK && result != CUPTI_SUCCESS)
            request->status =
                failed(result, "cuptiSassMetricsDisable", request->reason, sizeof(request->reason));
    }
    if (atomic_exchange(&request->state, STOP_DONE) == STOP_ABANDONED) {
        /* Its window closed without it: what it brought back is lost. The
         * activity comes back at the sampler's next step (never switched
         * from a program's thread), unless a next window began first. */
        atomic_fetch_add(&late_lost, request->count + request->dropped);
        free_flushed(request);
        cuda_storm_quiet_end_later();
        atomic_store(&stop_pending, 0);
    }
    return request->status;
}

/* A stop's results into hardware.records, on flare's thread. */
static void take_results(stop_request *request)
{
    flushed_zero = flushed_unknown = 0;
    atomic_fetch_add(&hardware.lost, request->dropped);
    if (request->count > 0)
        hardware.records = calloc(request->count * request->instances, sizeof(*hardware.records));
    if (request->count > 0 && hardware.records == NULL) {
        atomic_fetch_add(&hardware.lost, request->count);
        free_flushed(request);
        return;
    }
    uint64_t now_ns = core_now_ns();
    for (size_t i = 0; i < request->count; i++)
        keep_record(&request->data[i], request->instances, now_ns);
    free_flushed(request);
    core_log(CORE_LOG_INFO,
             "SASS metrics: %zu records flushed, %zu kept, %zu values of 0 and %zu of another "
             "metric left out, %zu dropped at the disable",
             request->count, hardware.record_count, flushed_zero, flushed_unknown,
             request->dropped);
}

/* A window's stop, done: its results into the engine (names and lines
 * looked up, which calls CUPTI), said in the log; status becomes its
 * outcome, with pending_stop.reason. On flare's thread, or at the exit on
 * the program's (cuda_sass_exit: CUPTI is still there then). */
static int finish_stop(int status, const char *where)
{
    core_log(CORE_LOG_INFO,
             "SASS metrics: stopped on %s; %llu kernel launches counted, not timed, while it "
             "was open",
             where, (unsigned long long)(cuda_storm_quiet_untimed() - quiet_launches_from));
    size_t flushed = pending_stop.count;
    take_results(&pending_stop);
    cuda_pc_lines_report();
    if (status == FLARE_OK && flushed > 0 && hardware.record_count == 0 && flushed_zero > 0) {
        /* Every flare window on the H200 in session 18, while CUPTI's
         * activity stayed on (now switched off while a window is open):
         * said, never stored as a window of zeros. */
        snprintf(pending_stop.reason, sizeof(pending_stop.reason),
                 "SASS metrics: CUPTI flushed %zu records, every count 0 (docs/windows.md)",
                 flushed);
        status = FLARE_ERR_BACKEND;
    }
    return status;
}

/* The stop made at the program's exit (cuda_sass_exit), or being made
 * there: its outcome, once it is done (bounded). Nothing of CUPTI here:
 * at the session's end its exit handlers have run (calls then crashed the
 * program on the H200, session 19). */
static int took_exit_stop(char *reason, size_t reason_size)
{
    uint64_t deadline = core_now_ns() + CUDA_SASS_STOP_WAIT_NS;
    const struct timespec pause = {0, 1000000};
    while (atomic_load(&window_state) != WINDOW_EXIT_DONE && core_now_ns() < deadline)
        nanosleep(&pause, NULL);
    if (atomic_load(&window_state) != WINDOW_EXIT_DONE) {
        /* Still enabled for hw_read: it touches nothing the exit writes. */
        snprintf(reason, reason_size,
                 "SASS metrics: the stop made at the program's exit did not end within %.0f s",
                 (double)CUDA_SASS_STOP_WAIT_NS / 1e9);
        return FLARE_ERR_BACKEND;
    }
    hardware.enabled = 0; /* its results are readable */
    atomic_store(&window_state, WINDOW_IDLE);
    if (pending_stop.status != FLARE_OK)
        snprintf(reason, reason_size, "%s", pending_stop.reason);
    return pending_stop.status;
}

void cuda_sass_exit(void)
{
    if (engine == NULL)
        return;
    atomic_store(&exited, 1); /* no window starts from here on */
    /* A stop posted for the program's next launch (the window closed just
     * now) is made here, on the program's thread; one being posted (its
     * close runs on flare's thread now) is waited for, bounded. */
    uint64_t deadline = core_now_ns() + CUDA_SASS_STOP_WAIT_NS;
    const struct timespec pause = {0, 1000000};
    int state;
    for (;;) {
        cuda_app_thread_serve();
        state = WINDOW_OPEN;
        if (atomic_compare_exchange_strong(&window_state, &state, WINDOW_EXIT_RUNNING))
            break;
        if (state != WINDOW_STOPPING || core_now_ns() >= deadline)
            return;
        nanosleep(&pause, NULL);
    }
    pending_stop = (stop_request){.context = atomic_load(&hardware.context)};
    if (pending_stop.context != NULL) {
        stop_here(&pending_stop);
        /* CUPTI's activity stays off: the process ends, and switched after
         * CUPTI's exit handlers it would crash (cuda_storm_finish counts
         * the quiet's launches to the end). */
        pending_stop.status = finish_stop(pending_stop.status, "the program's thread, at its exit");
    } else {
        snprintf(pending_stop.reason, sizeof(pending_stop.reason),
                 "SASS metrics: the context was destroyed in the window");
        pending_stop.status = FLARE_ERR_BACKEND;
    }
    atomic_store(&window_state, WINDOW_EXIT_DONE);
}

/*
 * The flush and the disable are made on the application's thread, at the
 * entry of its next launch: made from flare's collector while the program
 * launched, FlushData or Disable never returned and held the program with
 * them (3 runs of 3 on the H200, session 18), as cuptiPCSamplingStop did
 * (session 15). A stop that sees no launch within CUDA_SASS_STOP_WAIT_NS
 * stays posted for a later one (the program may wait on a patched kernel
 * for that long: never made from here while it is inside CUDA); the window
 * then keeps nothing, and the next start waits for that stop.
 */
static int stop_on_program_thread(char *reason, size_t reason_size);

static int hw_stop(void *unused, char *reason, size_t reason_size)
{
    (void)unused;
    if (!hardware.enabled)
        return FLARE_OK;
    int expected = WINDOW_OPEN;
    if (!atomic_compare_exchange_strong(&window_state, &expected, WINDOW_STOPPING))
        return took_exit_stop(reason, reason_size);
    hardware.enabled = 0;
    int status = stop_on_program_thread(reason, reason_size);
    atomic_store(&window_state, WINDOW_IDLE);
    return status;
}

/* hw_stop's stop: made on the program's thread (or flare's, when another
 * request held it), posted for a later launch when none comes in time. */
static int stop_on_program_thread(char *reason, size_t reason_size)
{
    CUcontext context = atomic_load(&hardware.context);
    if (context == NULL) {
        cuda_storm_quiet_end();
        snprintf(reason, reason_size, "SASS metrics: the context was destroyed in the window");
        return FLARE_ERR_BACKEND;
    }
    pending_stop = (stop_request){.context = context};
    int status = FLARE_OK;
    cuda_app_thread_outcome outcome =
        cuda_app_thread_call(stop_here, &pending_stop, CUDA_SASS_STOP_WAIT_NS, 1, &status);
    if (outcome == CUDA_APP_THREAD_WITHDRAWN) {
        /* Another engine's request held the program's thread: not posted. */
        status = stop_here(&pending_stop);
    } else if (outcome == CUDA_APP_THREAD_DETACHED) {
        atomic_store(&stop_pending, 1);
        if (atomic_exchange(&pending_stop.state, STOP_ABANDONED) != STOP_DONE) {
            snprintf(reason, reason_size,
                     "SASS metrics: no launch within %.0f s to stop at; the counts stop at the "
                     "program's next launch and are lost",
                     (double)CUDA_SASS_STOP_WAIT_NS / 1e9);
            return FLARE_ERR_BACKEND;
        }
        atomic_store(&stop_pending, 0); /* it ran just now: its results are ours */
        status = pending_stop.status;
    }
    /* Disabled: CUPTI's activity back on. */
    cuda_storm_quiet_end();
    status = finish_stop(status, outcome == CUDA_APP_THREAD_WITHDRAWN
                                     ? "flare's thread (another request held the program's thread)"
                                     : "the program's thread");
    if (status != FLARE_OK)
        snprintf(reason, reason_size, "%s", pending_stop.reason);
    return status;
}

static size_t hw_read(void *unused, pc_raw_sample *out, size_t max, uint64_t *lost)
{
    (void)unused;
    *lost += atomic_exchange(&hardware.lost, 0) + atomic_exchange(&late_lost, 0);
    size_t moved = 0;
    while (!hardware.enabled && moved < max && hardware.cursor < hardware.record_count)
        out[moved++] = hardware.records[hardware.cursor++];
    if (!hardware.enabled && hardware.records != NULL && hardware.cursor == hardware.record_count)
        drop_records();
    return moved;
}

static const char *hw_metric_name(void *unused, uint32_t code)
{
    (void)unused;
    return code < hardware.metric_count ? hardware.metric_name[code] : "unknown";
}

static const pc_hardware_ops cuda_sass_ops = {
    .name = "cuda-sass-metrics",
    .kind = PC_ENGINE_SASS,
    .start = hw_start,
    .stop = hw_stop,
    .read = hw_read,
    .stall_reason_name = hw_metric_name,
    .release = NULL, /* the process's: never destroyed */
};

/* ---- contexts ---- */

/* Set by the first context: a context created after its end is not taken
 * (hardware.context, back to NULL then, cannot say so). */
static _Atomic int context_claimed;

void cuda_sass_context_created(CUcontext context)
{
    if (engine == NULL || atomic_exchange(&context_claimed, 1))
        return;
    atomic_store(&hardware.context, context);
    /* Configured here, on the program's thread, before the context's
     * modules load, as the probe did: configured at the first window, after
     * the modules had loaded, the H200 counted nothing (session 18). */
    char reason[256] = "";
    if (push_context(context, reason, sizeof(reason)) != FLARE_OK) {
        core_capability_set("sass_metrics", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return;
    }
    ensure_configured(context, "at its first context", reason, sizeof(reason));
    pop_context();
}

void cuda_sass_context_destroying(CUcontext context)
{
    CUcontext expected = context;
    if (engine != NULL && atomic_compare_exchange_strong(&hardware.context, &expected, NULL))
        core_capability_set("sass_metrics", 1, CORE_CAPABILITY_DEGRADED,
                            "the context SASS metrics counted on was destroyed; no later "
                            "context is counted");
}

/* ---- install ---- */

/* Why this process's windows may ask for sass, or NULL (and *off why not). */
static int resolve(const cuda_cupti_api *cupti, char *reason, size_t reason_size)
{
    if (cupti == NULL || cupti->library == NULL) {
        snprintf(reason, reason_size, "libcupti is not loaded");
        return FLARE_ERR_BACKEND;
    }
#define SASS_FUNCTION_RESOLVE_(name, result, arguments)                                            \
    *(void **)(&hardware.api.name) = dlsym(cupti->library, #name);                                 \
    if (hardware.api.name == NULL) {                                                               \
        snprintf(reason, reason_size,                                                              \
                 "symbol %s missing in %.120s (CUPTI too old for SASS metrics)", #name,            \
                 cupti->path);                                                                     \
        return FLARE_ERR_BACKEND;                                                                  \
    }
    SASS_FUNCTIONS(SASS_FUNCTION_RESOLVE_)
#undef SASS_FUNCTION_RESOLVE_
    return FLARE_OK;
}

void cuda_sass_install(const cuda_cupti_api *cupti, int launch_callbacks)
{
    if (engine != NULL)
        return;
    const char *off = NULL;
    const char *why = cuda_sass_wanted_by(&off);
    if (why == NULL) {
        core_capability_set("sass_metrics", 0, CORE_CAPABILITY_OFF, "%s", off);
        return;
    }
    if (!launch_callbacks) {
        core_capability_set("sass_metrics", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "needs the launch callbacks (a window's stop is made at the "
                            "program's launch, and the launches its quiet leaves untimed are "
                            "counted there), which this mode has off: sass windows use PM "
                            "sampling");
        return;
    }
    cuda_pc_log_open();
    char reason[384] = "";
    if (resolve(cupti, reason, sizeof(reason)) == FLARE_OK &&
        (pc_names_create(PC_NAMES_MAX_DEFAULT, PC_NAMES_MAX_BYTES_DEFAULT, &hardware.names) !=
             FLARE_OK ||
         pc_engine_create(&cuda_sass_ops, NULL, CUDA_PM_CONTEXT_ID, &engine) != FLARE_OK))
        snprintf(reason, sizeof(reason), "no memory for the SASS metrics engine");
    if (reason[0] != '\0') {
        engine = NULL;
        core_capability_set("sass_metrics", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return;
    }
    core_capability_set("sass_metrics", 1, CORE_CAPABILITY_DEGRADED,
                        "installed (%s): configured at the first context", why);
    if (cuda_pc_lines_install(cupti, reason, sizeof(reason)) != FLARE_OK)
        core_capability_set("pc_source_lines", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
}

int cuda_sass_installed(void)
{
    return engine != NULL;
}

/* ---- the window coordinator's engine ---- */

static int device_of(int device)
{
    /* Every device (-1): the configured one, else the first context's,
     * which the first start configures. */
    if (device >= 0)
        return device;
    if (atomic_load(&hardware.configured) == 1)
        return (int)hardware.device;
    CUcontext context = atomic_load(&hardware.context);
    uint32_t id = 0;
    if (context != NULL && hardware.api.cuptiGetDeviceId(context, &id) == CUPTI_SUCCESS)
        return (int)id;
    return 0;
}

static int engine_arm(int device, const backend_engine_config *config, uint64_t now_ns,
                      char *reason, size_t reason_size)
{
    return pc_engine_arm(engine, device_of(device), config, now_ns, reason, reason_size);
}

static int engine_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    return pc_engine_disarm(engine, device_of(device), now_ns, result);
}

static int engine_probe(int device, char *reason, size_t reason_size)
{
    (void)device;
    if (atomic_load(&hardware.context) == NULL) {
        snprintf(reason, reason_size, "SASS metrics: no live CUDA context yet");
        return FLARE_ERR_BACKEND;
    }
    if (atomic_load(&hardware.configured) < 0) {
        snprintf(reason, reason_size, "%s", hardware.config_reason);
        return FLARE_ERR_BACKEND;
    }
    return pc_engine_probe(engine, reason, reason_size);
}

static const backend_engine_ops cuda_sass_engine_ops = {
    .name = "cuda-sass-metrics",
    .arm = engine_arm,
    .disarm = engine_disarm,
    .probe = engine_probe,
    .prepare = NULL,
    /* The stop waits for the program's launch: a waiting thread runs it. */
    .serve = cuda_app_thread_serve,
    .cost_launch_ns = CUDA_SASS_COST_LAUNCH_NS,
    .cost_gpu = CUDA_SASS_COST_GPU,
    .cost_source = CUDA_SASS_COST_SOURCE,
    .unusable = NULL,
};

const backend_engine_ops *cuda_sass_deep_engine(void)
{
    return engine != NULL ? &cuda_sass_engine_ops : NULL;
}

struct pc_engine *cuda_sass_core(void)
{
    return engine;
}
