/*
 * cuda_rangeprof_setup.c: the range profiler's host set-up, per context and
 * per (context, metric list): the profiler initialised and enabled on the
 * context, the counter availability image, the config image built by the
 * profiler host API and its pass count, and the counter data image sized
 * for a collection's ranges. Building a config image costs 35-50 ms on the
 * H200 (the whole set-up 150-600 ms), so each is built once and cached,
 * failures included, so an unknown metric is diagnosed once.
 *
 * Every function here runs with the collector's cache_lock held
 * (cuda_rangeprof.c takes it, bounded). Must never take that lock itself,
 * link libcupti, or abort: every CUPTI error becomes a reason.
 */
#include "backend/cuda/cuda_rangeprof_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "replay/replay.h"

#define RANGEPROF_CONTEXTS_MAX 64

static rangeprof_context *contexts[RANGEPROF_CONTEXTS_MAX];
static size_t context_count;
static rangeprof_setup *setups[RANGEPROF_SETUPS_MAX];
static size_t setup_count;
static int profiler_initialized;

/* ---- Set-up (cache_lock held) ---- */

/* The context's counter availability image (malloc'd into *image). */
static CUptiResult fetch_availability(CUcontext context, uint8_t **image)
{
    CUpti_Profiler_GetCounterAvailability_Params availability = {
        .structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE, .ctx = context};
    *image = NULL;
    CUptiResult result = cuda_rangeprof_api.GetCounterAvailability(&availability);
    if (result != CUPTI_SUCCESS)
        return result;
    *image = malloc(availability.counterAvailabilityImageSize);
    if (*image == NULL)
        return CUPTI_ERROR_OUT_OF_MEMORY;
    availability.pCounterAvailabilityImage = *image;
    result = cuda_rangeprof_api.GetCounterAvailability(&availability);
    if (result != CUPTI_SUCCESS) {
        free(*image);
        *image = NULL;
    }
    return result;
}

/* The context's entry, set up on first use; NULL with reason when CUPTI
 * refused. A failure is not kept: HARDWARE_BUSY (another profiler, e.g. PM
 * sampling, holds the device) can clear, so the next launch tries again. */
rangeprof_context *cuda_rangeprof_context_for(CUcontext context, int device, char *reason,
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
        result = cuda_rangeprof_api.ProfilerInitialize(&initialize);
        if (result != CUPTI_SUCCESS)
            failed = "cuptiProfilerInitialize";
        else
            profiler_initialized = 1;
    }
    CUpti_Device_GetChipName_Params chip = {
        .structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE, .deviceIndex = (size_t)device};
    if (failed == NULL && (result = cuda_rangeprof_api.DeviceGetChipName(&chip)) != CUPTI_SUCCESS)
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
    if (failed == NULL && (result = cuda_rangeprof_api.Enable(&enable)) != CUPTI_SUCCESS)
        failed = "cuptiRangeProfilerEnable";
    rangeprof_context *entry = failed == NULL ? calloc(1, sizeof(*entry)) : NULL;
    if (entry == NULL) {
        snprintf(reason, reason_size, "%s: %s", failed != NULL ? failed : "calloc",
                 failed != NULL ? cuda_rangeprof_cupti_text(result) : "out of memory");
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
    snprintf(setup->reason, sizeof(setup->reason), format, what, cuda_rangeprof_cupti_text(result));
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
        if (cuda_rangeprof_api.HostInitialize(&initialize) != CUPTI_SUCCESS)
            return;
        CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
            .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE,
            .pHostObject = initialize.pHostObject,
            .ppMetricNames = &setup->names[i],
            .numMetrics = 1};
        CUptiResult result = cuda_rangeprof_api.HostConfigAddMetrics(&add);
        CUpti_Profiler_Host_Deinitialize_Params deinitialize = {
            .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE,
            .pHostObject = initialize.pHostObject};
        cuda_rangeprof_api.HostDeinitialize(&deinitialize);
        if (result != CUPTI_SUCCESS) {
            snprintf(setup->reason, sizeof(setup->reason),
                     "unknown or unsupported metric '%.100s' on %s (%s)", setup->names[i],
                     context->chip, cuda_rangeprof_cupti_text(result));
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
        cuda_rangeprof_api.HostDeinitialize(&deinitialize);
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
    CUptiResult result = cuda_rangeprof_api.HostInitialize(&initialize);
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
    result = cuda_rangeprof_api.HostConfigAddMetrics(&add);
    if (result != CUPTI_SUCCESS) {
        setup->status = FLARE_ERR_INVALID_ARGUMENT;
        snprintf(setup->reason, sizeof(setup->reason), "the metric list was refused on %s (%s)",
                 context->chip, cuda_rangeprof_cupti_text(result));
        name_refused_metric(setup);
        return;
    }
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE,
        .pHostObject = setup->host};
    result = cuda_rangeprof_api.HostGetConfigImageSize(&size);
    if (result == CUPTI_SUCCESS) {
        setup->config = malloc(size.configImageSize);
        setup->config_size = size.configImageSize;
        CUpti_Profiler_Host_GetConfigImage_Params image = {
            .structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE,
            .pHostObject = setup->host,
            .configImageSize = setup->config_size,
            .pConfigImage = setup->config};
        result = setup->config != NULL ? cuda_rangeprof_api.HostGetConfigImage(&image)
                                       : CUPTI_ERROR_OUT_OF_MEMORY;
    }
    if (result != CUPTI_SUCCESS) {
        setup_fail(setup, FLARE_ERR_BACKEND, "%s: %s", "cuptiProfilerHostGetConfigImage", result);
        return;
    }
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
        .structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE,
        .configImageSize = setup->config_size,
        .pConfigImage = setup->config};
    result = cuda_rangeprof_api.HostGetNumOfPasses(&passes);
    if (result != CUPTI_SUCCESS || passes.numOfPasses == 0) {
        setup_fail(setup, FLARE_ERR_BACKEND, "%s: %s", "cuptiProfilerHostGetNumOfPasses", result);
        return;
    }
    setup->passes = passes.numOfPasses;
}

/* Sizes the setup's counter data image for max_ranges ranges (a no-op when
 * it already is). Callers hold the device's replay writer gate, which is
 * what keeps two collections from sharing the image. */
CUptiResult cuda_rangeprof_size_counter_data(rangeprof_setup *setup, size_t max_ranges)
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
    CUptiResult result = cuda_rangeprof_api.GetCounterDataSize(&data);
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

rangeprof_setup *cuda_rangeprof_setup_for(rangeprof_context *context, const char *const *metrics,
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
