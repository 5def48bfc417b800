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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_pm_functions.h"
#include "backend/cuda/cuda_profiler_host.h"
#include "backend/cuda/cuda_replay.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pm/pm_engine.h"
#include "rules/rule.h"

/* The raw buffer the GPU writes samples into (measured on the H200: 512 MiB
 * enabled and configured in 460-630 ms, no overflow at 10 us with a 20 ms
 * decode loop). */
#define HARDWARE_BUFFER_BYTES ((size_t)512 << 20)

typedef struct cuda_pm_hardware {
    pm_functions api;
    int device;
    uint64_t interval_ns;
    CUpti_Profiler_Host_Object *host;
    CUpti_PmSampling_Object *sampler;
    uint8_t *availability;
    uint8_t *config;
    size_t config_size;
    uint8_t *image; /* the counter-data image: sized once, reused by every decode */
    size_t image_size;
    size_t metric_count;
    const char *metric_names[PM_METRICS_MAX];
    pm_resolved_metrics resolved;
    int availability_device; /* the device availability was read for (+1; 0: none) */
    uint64_t host_setup_ns;  /* availability + config image */
    uint64_t enable_ns;      /* enable + set config + image */
    char chip[32];
    size_t buffer_bytes; /* the hardware buffer SetConfig allocates; 0: HARDWARE_BUFFER_BYTES */
} cuda_pm_hardware;

static cuda_pm_hardware hardware;
/* Range replay's own (pm/pm_replay.h), enabled per pass. A pass is decoded
 * at its stop, so the buffer holds all of it: 32 MiB (SetConfig 89 ms, not
 * 321) overflowed at 10 us on the H200 (3,646 of 5,657 samples lost). */
#define REPLAY_BUFFER_BYTES ((size_t)512 << 20)
static cuda_pm_hardware replay_hardware = {.buffer_bytes = REPLAY_BUFFER_BYTES};
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

static const char *result_text(CUptiResult result)
{
    const char *text = NULL;
    if (hardware.api.cuptiGetResultString == NULL ||
        hardware.api.cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == NULL)
        return "unknown CUPTI error";
    return text;
}

/* Fills reason with "what: CUPTI's text" and returns the status. */
static int failed(CUptiResult result, const char *what, char *reason, size_t reason_size,
                  int status)
{
    snprintf(reason, reason_size, "%s: %s", what, result_text(result));
    return status;
}

static void release_host(cuda_pm_hardware *hw)
{
    if (hw->host != NULL) {
        CUpti_Profiler_Host_Deinitialize_Params params = {
            .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        params.pHostObject = hw->host;
        hw->api.cuptiProfilerHostDeinitialize(&params);
        hw->host = NULL;
    }
}

/* A fresh host object (a config accumulates metrics: each try starts anew). */
static int host_initialize(cuda_pm_hardware *hw, char *reason, size_t reason_size)
{
    release_host(hw);
    CUpti_Profiler_Host_Initialize_Params init = {
        .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    init.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    init.pChipName = hw->chip;
    init.pCounterAvailabilityImage = hw->availability;
    CUptiResult result = hw->api.cuptiProfilerHostInitialize(&init);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerHostInitialize", reason, reason_size,
                      FLARE_ERR_BACKEND);
    hw->host = init.pHostObject;
    return FLARE_OK;
}

/* Host object + config image for the names chosen so far; number of passes. */
static int build_config(cuda_pm_hardware *hw, size_t *passes, char *reason, size_t reason_size)
{
    free(hw->config);
    hw->config = NULL;
    int status = host_initialize(hw, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    CUptiResult result;
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = hw->host;
    add.ppMetricNames = hw->metric_names;
    add.numMetrics = hw->metric_count;
    if ((result = hw->api.cuptiProfilerHostConfigAddMetrics(&add)) != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerHostConfigAddMetrics", reason, reason_size,
                      FLARE_ERR_UNSUPPORTED);
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = hw->host;
    if ((result = hw->api.cuptiProfilerHostGetConfigImageSize(&size)) != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerHostGetConfigImageSize", reason, reason_size,
                      FLARE_ERR_BACKEND);
    hw->config = malloc(size.configImageSize);
    if (hw->config == NULL) {
        snprintf(reason, reason_size, "no memory for a %zu-byte config image",
                 size.configImageSize);
        return FLARE_ERR_NO_MEMORY;
    }
    hw->config_size = size.configImageSize;
    CUpti_Profiler_Host_GetConfigImage_Params image = {
        .structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    image.pHostObject = hw->host;
    image.configImageSize = hw->config_size;
    image.pConfigImage = hw->config;
    if ((result = hw->api.cuptiProfilerHostGetConfigImage(&image)) != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerHostGetConfigImage", reason, reason_size,
                      FLARE_ERR_BACKEND);
    CUpti_Profiler_Host_GetNumOfPasses_Params count = {
        .structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    count.configImageSize = hw->config_size;
    count.pConfigImage = hw->config;
    if ((result = hw->api.cuptiProfilerHostGetNumOfPasses(&count)) != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerHostGetNumOfPasses", reason, reason_size,
                      FLARE_ERR_BACKEND);
    *passes = count.numOfPasses;
    return FLARE_OK;
}

static int metric_known(cuda_pm_hardware *hw, const char *name)
{
    CUpti_Profiler_Host_GetMetricProperties_Params properties = {
        .structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    properties.pHostObject = hw->host;
    properties.pMetricName = name;
    return hw->api.cuptiProfilerHostGetMetricProperties(&properties) == CUPTI_SUCCESS;
}

/* Disables PM sampling on hw's device and forgets the sampler object. */
static void disable_sampler(cuda_pm_hardware *hw)
{
    CUpti_PmSampling_Disable_Params disable = {.structSize =
                                                   CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
    disable.pPmSamplingObject = hw->sampler;
    hw->api.cuptiPmSamplingDisable(&disable);
    hw->sampler = NULL;
}

/* Initialises the profiler, then reads the device's chip name and counter
 * availability image into hw. 0, or a status with CUPTI's reason
 * (FLARE_ERR_UNSUPPORTED without the privilege to read counters). */
static int read_device(cuda_pm_hardware *hw, int device, char *reason, size_t reason_size)
{
    CUpti_Profiler_Initialize_Params initialize = {
        .structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUptiResult result = hw->api.cuptiProfilerInitialize(&initialize);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiProfilerInitialize", reason, reason_size, FLARE_ERR_BACKEND);
    CUpti_Device_GetChipName_Params chip = {.structSize =
                                                CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = (size_t)device;
    if ((result = hw->api.cuptiDeviceGetChipName(&chip)) != CUPTI_SUCCESS)
        return failed(result, "cuptiDeviceGetChipName", reason, reason_size, FLARE_ERR_BACKEND);
    snprintf(hw->chip, sizeof(hw->chip), "%s", chip.pChipName);
    /* Read once per device: range replay prepares per pass. */
    if (hw->availability != NULL && hw->availability_device == device + 1)
        return FLARE_OK;
    hw->availability_device = 0; /* until read again */
    CUpti_PmSampling_GetCounterAvailability_Params availability = {
        .structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    availability.deviceIndex = (size_t)device;
    if ((result = hw->api.cuptiPmSamplingGetCounterAvailability(&availability)) != CUPTI_SUCCESS)
        return failed(result, "cuptiPmSamplingGetCounterAvailability", reason, reason_size,
                      result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? FLARE_ERR_UNSUPPORTED
                                                                    : FLARE_ERR_BACKEND);
    free(hw->availability);
    hw->availability = malloc(availability.counterAvailabilityImageSize);
    if (hw->availability == NULL) {
        snprintf(reason, reason_size, "no memory for the counter availability image");
        return FLARE_ERR_NO_MEMORY;
    }
    availability.pCounterAvailabilityImage = hw->availability;
    if ((result = hw->api.cuptiPmSamplingGetCounterAvailability(&availability)) != CUPTI_SUCCESS)
        return failed(result, "cuptiPmSamplingGetCounterAvailability", reason, reason_size,
                      FLARE_ERR_BACKEND);
    hw->availability_device = device + 1;
    return FLARE_OK;
}

/* Resolve each slot to the first name this chip knows (the host object
 * initialised); skipped names the last optional slot the chip lacks. A
 * required slot with no counter releases the host object and fails with
 * FLARE_ERR_UNSUPPORTED. */
static int resolve_metrics(cuda_pm_hardware *hw, const pm_preset *preset,
                           pm_resolved_metrics *resolved, char *skipped, size_t skipped_size,
                           char *reason, size_t reason_size)
{
    hw->metric_count = 0;
    resolved->count = 0;
    for (size_t slot = 0; slot < preset->metric_count; slot++) {
        const pm_metric_slot *metric = &preset->metrics[slot];
        const char *chosen = NULL;
        for (size_t c = 0; c < PM_CANDIDATES_MAX && metric->candidates[c] != NULL; c++)
            if (metric_known(hw, metric->candidates[c])) {
                chosen = metric->candidates[c];
                break;
            }
        if (chosen == NULL && !metric->optional) {
            snprintf(reason, reason_size, "preset '%s': %s has no counter on %s", preset->name,
                     metric->label, hw->chip);
            release_host(hw);
            return FLARE_ERR_UNSUPPORTED;
        }
        if (chosen == NULL) {
            snprintf(skipped, skipped_size, "%s not on %s", metric->label, hw->chip);
            continue;
        }
        hw->metric_names[hw->metric_count] = chosen;
        snprintf(resolved->labels[hw->metric_count], PM_METRIC_NAME_MAX, "%s", metric->label);
        snprintf(resolved->hardware[hw->metric_count], PM_METRIC_NAME_MAX, "%s", chosen);
        hw->metric_count++;
    }
    resolved->count = hw->metric_count;
    return FLARE_OK;
}

/* Enables PM sampling on the device, sets the configuration, and sizes and
 * initialises the counter-data image for image_samples samples. On a
 * failure sampling is disabled again and the host object released. */
static int enable_sampling(cuda_pm_hardware *hw, int device, uint64_t interval_ns,
                           uint32_t image_samples, char *reason, size_t reason_size)
{
    CUptiResult result;
    CUpti_PmSampling_Enable_Params enable = {.structSize =
                                                 CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    enable.deviceIndex = (size_t)device;
    if ((result = hw->api.cuptiPmSamplingEnable(&enable)) != CUPTI_SUCCESS) {
        if (result == CUPTI_ERROR_INVALID_OPERATION)
            snprintf(reason, reason_size,
                     "PM sampling busy, held by another process or tool on device %d "
                     "(cuptiPmSamplingEnable: %s)",
                     device, result_text(result));
        else
            failed(result, "cuptiPmSamplingEnable", reason, reason_size, 0);
        release_host(hw);
        return FLARE_ERR_UNSUPPORTED;
    }
    hw->sampler = enable.pPmSamplingObject;
    CUpti_PmSampling_SetConfig_Params config = {.structSize =
                                                    CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    config.pPmSamplingObject = hw->sampler;
    config.configSize = hw->config_size;
    config.pConfig = hw->config;
    config.hardwareBufferSize = hw->buffer_bytes != 0 ? hw->buffer_bytes : HARDWARE_BUFFER_BYTES;
    config.samplingInterval = interval_ns;
    config.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    config.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    CUpti_PmSampling_GetCounterDataSize_Params data_size = {
        .structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    data_size.pPmSamplingObject = hw->sampler;
    data_size.pMetricNames = hw->metric_names;
    data_size.numMetrics = hw->metric_count;
    data_size.maxSamples = image_samples;
    if ((result = hw->api.cuptiPmSamplingSetConfig(&config)) != CUPTI_SUCCESS ||
        (result = hw->api.cuptiPmSamplingGetCounterDataSize(&data_size)) != CUPTI_SUCCESS) {
        failed(result, "cuptiPmSamplingSetConfig/GetCounterDataSize", reason, reason_size, 0);
        disable_sampler(hw);
        release_host(hw);
        return FLARE_ERR_BACKEND;
    }
    free(hw->image);
    hw->image = malloc(data_size.counterDataSize);
    hw->image_size = data_size.counterDataSize;
    CUpti_PmSampling_CounterDataImage_Initialize_Params image = {
        .structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    image.pPmSamplingObject = hw->sampler;
    image.counterDataSize = hw->image_size;
    image.pCounterData = hw->image;
    if (hw->image == NULL ||
        (result = hw->api.cuptiPmSamplingCounterDataImageInitialize(&image)) != CUPTI_SUCCESS) {
        if (hw->image == NULL)
            snprintf(reason, reason_size, "no memory for a %zu-byte counter-data image",
                     data_size.counterDataSize);
        else
            failed(result, "cuptiPmSamplingCounterDataImageInitialize", reason, reason_size, 0);
        disable_sampler(hw);
        release_host(hw);
        return FLARE_ERR_BACKEND;
    }
    return FLARE_OK;
}

static int hw_prepare(void *opaque, int device, const pm_preset *preset, uint64_t interval_ns,
                      uint32_t image_samples, pm_resolved_metrics *resolved, char *reason,
                      size_t reason_size)
{
    cuda_pm_hardware *hw = opaque;
    uint64_t began = core_now_ns();
    hw->device = device;
    hw->interval_ns = interval_ns;
    int status = read_device(hw, device, reason, reason_size);
    if (status != FLARE_OK)
        return status;

    size_t passes = 0;
    status = host_initialize(hw, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    char skipped[160] = "";
    status = resolve_metrics(hw, preset, resolved, skipped, sizeof(skipped), reason, reason_size);
    if (status != FLARE_OK)
        return status;
    status = build_config(hw, &passes, reason, reason_size);
    if (status != FLARE_OK) {
        release_host(hw);
        return status;
    }
    if (passes != 1) {
        snprintf(reason, reason_size,
                 "preset '%s' needs %zu passes on %s; PM sampling takes single-pass presets only",
                 preset->name, passes, hw->chip);
        release_host(hw);
        return FLARE_ERR_UNSUPPORTED;
    }
    uint64_t host_done = core_now_ns();
    hw->host_setup_ns = host_done - began;

    status = enable_sampling(hw, device, interval_ns, image_samples, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    hw->enable_ns = core_now_ns() - host_done;
    hw->resolved = *resolved;
    char names[PM_METRICS_MAX * (PM_METRIC_NAME_MAX + 1)] = "";
    for (size_t m = 0, used = 0; m < hw->metric_count && used < sizeof(names); m++)
        used += (size_t)snprintf(names + used, sizeof(names) - used, " %s", hw->metric_names[m]);
    core_log(CORE_LOG_INFO,
             "PM sampling prepared on device %d (%s): preset %s, %zu metrics in 1 pass, every "
             "%llu ns; host config %.0f ms, enable+config %.0f ms; image %zu bytes for %u "
             "samples%s%s; metrics%s",
             device, hw->chip, preset->name, hw->metric_count, (unsigned long long)interval_ns,
             hw->host_setup_ns / 1e6, hw->enable_ns / 1e6, hw->image_size, image_samples,
             skipped[0] ? "; skipped: " : "", skipped, names);
    return FLARE_OK;
}

static int hw_start(void *opaque, char *reason, size_t reason_size)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_Start_Params params = {.structSize =
                                                CUpti_PmSampling_Start_Params_STRUCT_SIZE};
    params.pPmSamplingObject = hw->sampler;
    CUptiResult result = hw->api.cuptiPmSamplingStart(&params);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiPmSamplingStart", reason, reason_size, FLARE_ERR_BACKEND);
    return FLARE_OK;
}

static int hw_stop(void *opaque, char *reason, size_t reason_size)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_Stop_Params params = {.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
    params.pPmSamplingObject = hw->sampler;
    CUptiResult result = hw->api.cuptiPmSamplingStop(&params);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiPmSamplingStop", reason, reason_size, FLARE_ERR_BACKEND);
    return FLARE_OK;
}

static void hw_decode(void *opaque, pm_hardware_decode *out)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_DecodeData_Params params = {
        .structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
    params.pPmSamplingObject = hw->sampler;
    params.pCounterDataImage = hw->image;
    params.counterDataImageSize = hw->image_size;
    CUptiResult result = hw->api.cuptiPmSamplingDecodeData(&params);
    out->overflow = params.overflow != 0 || result == CUPTI_ERROR_OUT_OF_MEMORY;
    if (result != CUPTI_SUCCESS && result != CUPTI_ERROR_OUT_OF_MEMORY) {
        out->failed = 1;
        snprintf(out->reason, sizeof(out->reason), "cuptiPmSamplingDecodeData: %s",
                 result_text(result));
        return;
    }
    if (result == CUPTI_SUCCESS) {
        out->counter_data_full =
            params.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
        out->end_of_records =
            params.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
    }
}

static size_t hw_sample_count(void *opaque)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_GetCounterDataInfo_Params info = {
        .structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = hw->image;
    info.counterDataImageSize = hw->image_size;
    if (hw->api.cuptiPmSamplingGetCounterDataInfo(&info) != CUPTI_SUCCESS)
        return 0;
    return info.numCompletedSamples;
}

static int hw_sample_read(void *opaque, size_t index, uint64_t *start, uint64_t *end,
                          double *values)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_CounterData_GetSampleInfo_Params info = {
        .structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
    info.pPmSamplingObject = hw->sampler;
    info.pCounterDataImage = hw->image;
    info.counterDataImageSize = hw->image_size;
    info.sampleIndex = index;
    if (hw->api.cuptiPmSamplingCounterDataGetSampleInfo(&info) != CUPTI_SUCCESS)
        return FLARE_ERR_BACKEND;
    *start = info.startTimestamp;
    *end = info.endTimestamp;
    CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
        .structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    evaluate.pHostObject = hw->host;
    evaluate.pCounterDataImage = hw->image;
    evaluate.counterDataImageSize = hw->image_size;
    evaluate.rangeIndex = index;
    evaluate.ppMetricNames = hw->metric_names;
    evaluate.numMetrics = hw->metric_count;
    evaluate.pMetricValues = values;
    if (hw->api.cuptiProfilerHostEvaluateToGpuValues(&evaluate) != CUPTI_SUCCESS)
        for (size_t m = 0; m < hw->metric_count; m++)
            values[m] = __builtin_nan("");
    return FLARE_OK;
}

static int hw_image_reset(void *opaque)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_CounterDataImage_Initialize_Params image = {
        .structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    image.pPmSamplingObject = hw->sampler;
    image.counterDataSize = hw->image_size;
    image.pCounterData = hw->image;
    return hw->api.cuptiPmSamplingCounterDataImageInitialize(&image) == CUPTI_SUCCESS
               ? FLARE_OK
               : FLARE_ERR_BACKEND;
}

static void hw_release(void *opaque)
{
    cuda_pm_hardware *hw = opaque;
    if (hw->sampler != NULL)
        disable_sampler(hw);
    release_host(hw);
    if (hw == &replay_hardware) { /* its image is 217 MB: not kept past a pass */
        free(hw->image);
        hw->image = NULL;
    }
}

/* CUPTI's own timestamp against flare's clock, read back to back. */
static int hw_clock_offset(void *opaque, int64_t *offset_ns)
{
    cuda_pm_hardware *hw = opaque;
    uint64_t best_span = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t before = core_now_ns(), cupti_now = 0;
        if (hw->api.cuptiGetTimestamp(&cupti_now) != CUPTI_SUCCESS)
            return FLARE_ERR_BACKEND;
        uint64_t after = core_now_ns();
        if (after - before < best_span) {
            best_span = after - before;
            *offset_ns = (int64_t)(before + (after - before) / 2) - (int64_t)cupti_now;
        }
    }
    return FLARE_OK;
}

/* Whether names sample together in one pass (pm_hardware_ops.plan): the
 * host object and a configuration image, nothing enabled. */
static int hw_plan(void *opaque, int device, const char *const *names, size_t count, size_t *passes,
                   size_t *unknown, char *reason, size_t reason_size)
{
    cuda_pm_hardware *hw = opaque;
    int status = FLARE_OK;
    if (hw->chip[0] == '\0' || hw->device != device) {
        hw->device = device;
        status = read_device(hw, device, reason, reason_size);
    }
    *passes = 2; /* more than a configuration holds, or refused together */
    if (status != FLARE_OK || count > PM_METRICS_MAX)
        return status;
    status = host_initialize(hw, reason, reason_size);
    for (size_t index = 0; status == FLARE_OK && index < count; index++) {
        if (!metric_known(hw, names[index])) {
            *unknown = index;
            snprintf(reason, reason_size, "PM sampling has no %s on %s", names[index], hw->chip);
            status = FLARE_ERR_NOT_FOUND;
        }
        hw->metric_names[index] = names[index];
    }
    if (status == FLARE_OK) {
        hw->metric_count = count;
        status = build_config(hw, passes, reason, reason_size);
        if (status == FLARE_ERR_UNSUPPORTED) /* refused together: not one pass */
            status = FLARE_OK;
    }
    release_host(hw);
    return status;
}

static const pm_hardware_ops cuda_pm_ops = {
    .name = "cuda-pm",
    .prepare = hw_prepare,
    .start = hw_start,
    .stop = hw_stop,
    .decode = hw_decode,
    .sample_count = hw_sample_count,
    .sample_read = hw_sample_read,
    .image_reset = hw_image_reset,
    .release = hw_release,
    .clock_offset = hw_clock_offset,
    .plan = hw_plan,
};

const pm_hardware_ops *cuda_pm_replay_hardware(int device, void **opaque, uint64_t *context_id)
{
    (void)device;
    if (!api_resolved)
        return NULL;
    *opaque = &replay_hardware;
    *context_id = CUDA_PM_REPLAY_CONTEXT_ID;
    return &cuda_pm_ops;
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
        snprintf(reason, sizeof(reason), "cuptiGetDeviceId: %s", result_text(result));
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
        pm_engine_create(&cuda_pm_ops, &hardware, CUDA_PM_CONTEXT_ID, &engine) != FLARE_OK)
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
