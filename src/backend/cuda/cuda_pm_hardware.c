/*
 * cuda_pm_hardware.c: the pm_hardware_ops steps over CUPTI's PM sampling
 * and profiler host APIs (cuda_pm_hardware.h): read the device's counter
 * availability, build and check a one-pass configuration, enable and
 * configure, start, stop, decode, read and evaluate samples, disable.
 * Every step returns a flare status with CUPTI's own words in the reason.
 *
 * Must never: let a CUPTI error escape as anything but a status and a
 * reason, or keep a pointer into a configuration it released.
 */
#include "backend/cuda/cuda_pm_hardware.h"

#include <cupti_pmsampling.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_profiler_host.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"

const char *cuda_pm_result_text(const pm_functions *api, CUptiResult result)
{
    const char *text = NULL;
    if (api->cuptiGetResultString == NULL ||
        api->cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == NULL)
        return "unknown CUPTI error";
    return text;
}

/* Fills reason with "what: CUPTI's text" and returns the status. */
static int failed(const cuda_pm_hardware *hw, CUptiResult result, const char *what, char *reason,
                  size_t reason_size, int status)
{
    snprintf(reason, reason_size, "%s: %s", what, cuda_pm_result_text(&hw->api, result));
    return status;
}

/* One profiler host object for hw's chip (PM sampling), into *out. */
static CUptiResult host_new(const cuda_pm_hardware *hw, CUpti_Profiler_Host_Object **out)
{
    CUpti_Profiler_Host_Initialize_Params init = {
        .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    init.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    init.pChipName = hw->chip;
    init.pCounterAvailabilityImage = hw->availability;
    CUptiResult result = hw->api.cuptiProfilerHostInitialize(&init);
    *out = result == CUPTI_SUCCESS ? init.pHostObject : NULL;
    return result;
}

static void host_free(const cuda_pm_hardware *hw, CUpti_Profiler_Host_Object *host)
{
    CUpti_Profiler_Host_Deinitialize_Params params = {
        .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    params.pHostObject = host;
    hw->api.cuptiProfilerHostDeinitialize(&params);
}

/* Adds hw's chosen metrics to host's configuration. */
static CUptiResult host_add_metrics(cuda_pm_hardware *hw, CUpti_Profiler_Host_Object *host)
{
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host;
    add.ppMetricNames = hw->metric_names;
    add.numMetrics = hw->metric_count;
    return hw->api.cuptiProfilerHostConfigAddMetrics(&add);
}

static void release_host(cuda_pm_hardware *hw)
{
    if (hw->host != NULL)
        host_free(hw, hw->host);
    hw->host = NULL;
}

static void release_evaluators(cuda_pm_hardware *hw)
{
    for (size_t index = 0; index < hw->evaluator_count; index++) {
        host_free(hw, hw->evaluators[index]);
        hw->evaluators[index] = NULL;
    }
    hw->evaluator_count = 0;
}

/* Host objects for the extra evaluating threads, as hw->host is made
 * (initialised, the metrics added); as many as CUPTI gives, up to
 * evaluate_threads - 1 (fewer threads where it gives fewer). */
static void make_evaluators(cuda_pm_hardware *hw)
{
    size_t wanted = hw->evaluate_threads > 1 ? (size_t)hw->evaluate_threads - 1 : 0;
    if (wanted > CUDA_PM_EVALUATE_THREADS_MAX - 1)
        wanted = CUDA_PM_EVALUATE_THREADS_MAX - 1;
    while (hw->evaluator_count < wanted) {
        CUpti_Profiler_Host_Object *host = NULL;
        if (host_new(hw, &host) != CUPTI_SUCCESS)
            return;
        if (host_add_metrics(hw, host) != CUPTI_SUCCESS) {
            host_free(hw, host);
            return;
        }
        hw->evaluators[hw->evaluator_count++] = host;
    }
}

/* A fresh host object (a config accumulates metrics: each try starts anew). */
static int host_initialize(cuda_pm_hardware *hw, char *reason, size_t reason_size)
{
    release_host(hw);
    CUptiResult result = host_new(hw, &hw->host);
    if (result != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiProfilerHostInitialize", reason, reason_size,
                      FLARE_ERR_BACKEND);
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
    if ((result = host_add_metrics(hw, hw->host)) != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiProfilerHostConfigAddMetrics", reason, reason_size,
                      FLARE_ERR_UNSUPPORTED);
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = hw->host;
    if ((result = hw->api.cuptiProfilerHostGetConfigImageSize(&size)) != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiProfilerHostGetConfigImageSize", reason, reason_size,
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
        return failed(hw, result, "cuptiProfilerHostGetConfigImage", reason, reason_size,
                      FLARE_ERR_BACKEND);
    CUpti_Profiler_Host_GetNumOfPasses_Params count = {
        .structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    count.configImageSize = hw->config_size;
    count.pConfigImage = hw->config;
    if ((result = hw->api.cuptiProfilerHostGetNumOfPasses(&count)) != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiProfilerHostGetNumOfPasses", reason, reason_size,
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
    uint64_t began = core_now_ns();
    hw->api.cuptiPmSamplingDisable(&disable);
    hw->costs.disable_ns += core_now_ns() - began;
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
        return failed(hw, result, "cuptiProfilerInitialize", reason, reason_size,
                      FLARE_ERR_BACKEND);
    CUpti_Device_GetChipName_Params chip = {.structSize =
                                                CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = (size_t)device;
    if ((result = hw->api.cuptiDeviceGetChipName(&chip)) != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiDeviceGetChipName", reason, reason_size, FLARE_ERR_BACKEND);
    snprintf(hw->chip, sizeof(hw->chip), "%s", chip.pChipName);
    /* Read once per device: range replay prepares per pass. */
    if (hw->availability != NULL && hw->availability_device == device + 1)
        return FLARE_OK;
    hw->availability_device = 0; /* until read again */
    CUpti_PmSampling_GetCounterAvailability_Params availability = {
        .structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    availability.deviceIndex = (size_t)device;
    if ((result = hw->api.cuptiPmSamplingGetCounterAvailability(&availability)) != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiPmSamplingGetCounterAvailability", reason, reason_size,
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
        return failed(hw, result, "cuptiPmSamplingGetCounterAvailability", reason, reason_size,
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

/* The counter-data image, its pages mapped now: a decode into untouched
 * pages of range replay's 217 MB image paid their faults inside the span
 * (DecodeData 22-26 us a sample against 17 us for a touched image, H200). */
static uint8_t *image_alloc(size_t size)
{
    void *image =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return image != MAP_FAILED ? image : NULL;
}

static void image_free(cuda_pm_hardware *hw)
{
    if (hw->image != NULL)
        munmap(hw->image, hw->image_size);
    hw->image = NULL;
    hw->image_size = 0;
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
                     device, cuda_pm_result_text(&hw->api, result));
        else
            failed(hw, result, "cuptiPmSamplingEnable", reason, reason_size, 0);
        release_host(hw);
        release_evaluators(hw);
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
        failed(hw, result, "cuptiPmSamplingSetConfig/GetCounterDataSize", reason, reason_size, 0);
        disable_sampler(hw);
        release_host(hw);
        release_evaluators(hw);
        return FLARE_ERR_BACKEND;
    }
    image_free(hw);
    hw->image = image_alloc(data_size.counterDataSize);
    hw->image_size = hw->image != NULL ? data_size.counterDataSize : 0;
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
            failed(hw, result, "cuptiPmSamplingCounterDataImageInitialize", reason, reason_size, 0);
        disable_sampler(hw);
        release_host(hw);
        release_evaluators(hw);
        image_free(hw);
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
    hw->costs = (cuda_pm_costs){0};
    release_evaluators(hw);
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
    make_evaluators(hw);
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
        return failed(hw, result, "cuptiPmSamplingStart", reason, reason_size, FLARE_ERR_BACKEND);
    return FLARE_OK;
}

static int hw_stop(void *opaque, char *reason, size_t reason_size)
{
    cuda_pm_hardware *hw = opaque;
    CUpti_PmSampling_Stop_Params params = {.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
    params.pPmSamplingObject = hw->sampler;
    CUptiResult result = hw->api.cuptiPmSamplingStop(&params);
    if (result != CUPTI_SUCCESS)
        return failed(hw, result, "cuptiPmSamplingStop", reason, reason_size, FLARE_ERR_BACKEND);
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
    uint64_t began = core_now_ns();
    CUptiResult result = hw->api.cuptiPmSamplingDecodeData(&params);
    hw->costs.decode_ns += core_now_ns() - began;
    out->overflow = params.overflow != 0 || result == CUPTI_ERROR_OUT_OF_MEMORY;
    if (result != CUPTI_SUCCESS && result != CUPTI_ERROR_OUT_OF_MEMORY) {
        out->failed = 1;
        snprintf(out->reason, sizeof(out->reason), "cuptiPmSamplingDecodeData: %s",
                 cuda_pm_result_text(&hw->api, result));
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
    uint64_t began = core_now_ns();
    CUptiResult result = hw->api.cuptiPmSamplingCounterDataGetSampleInfo(&info);
    uint64_t informed = core_now_ns();
    hw->costs.info_ns += informed - began;
    if (result != CUPTI_SUCCESS)
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
    result = hw->api.cuptiProfilerHostEvaluateToGpuValues(&evaluate);
    hw->costs.evaluate_ns += core_now_ns() - informed;
    hw->costs.reads++;
    if (result != CUPTI_SUCCESS)
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
    release_evaluators(hw);
    if (hw->free_image_at_release) {
        const cuda_pm_costs *costs = &hw->costs;
        core_log(CORE_LOG_INFO,
                 "cuda-pm: released after %llu samples read: DecodeData %.1f ms, sample info "
                 "%.1f ms, evaluate %.1f ms (up to %llu threads); disable %.1f ms",
                 (unsigned long long)costs->reads, costs->decode_ns / 1e6, costs->info_ns / 1e6,
                 costs->evaluate_ns / 1e6, (unsigned long long)costs->threads,
                 costs->disable_ns / 1e6);
        image_free(hw);
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

/* Part of a batch evaluated on one thread with one host object. */
typedef struct evaluate_job {
    cuda_pm_hardware *hw;
    CUpti_Profiler_Host_Object *host;
    size_t first, count; /* sample indexes; out[0] is sample first */
    pm_raw_sample *out;
} evaluate_job;

static void *evaluate_range(void *argument)
{
    evaluate_job *job = argument;
    cuda_pm_hardware *hw = job->hw;
    for (size_t index = 0; index < job->count; index++) {
        pm_raw_sample *sample = &job->out[index];
        if (!sample->ok)
            continue;
        CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
            .structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        evaluate.pHostObject = job->host;
        evaluate.pCounterDataImage = hw->image;
        evaluate.counterDataImageSize = hw->image_size;
        evaluate.rangeIndex = job->first + index;
        evaluate.ppMetricNames = hw->metric_names;
        evaluate.numMetrics = hw->metric_count;
        evaluate.pMetricValues = sample->values;
        if (hw->api.cuptiProfilerHostEvaluateToGpuValues(&evaluate) != CUPTI_SUCCESS)
            for (size_t m = 0; m < hw->metric_count; m++)
                sample->values[m] = __builtin_nan("");
    }
    return NULL;
}

/* Times first, on this thread (they ask the sampler object), then values,
 * split over this thread and one per evaluator host object (each thread
 * its own host object; the image is only read). */
static void hw_read_batch(void *opaque, size_t first, size_t count, pm_raw_sample *out)
{
    cuda_pm_hardware *hw = opaque;
    uint64_t began = core_now_ns();
    for (size_t index = 0; index < count; index++) {
        CUpti_PmSampling_CounterData_GetSampleInfo_Params info = {
            .structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
        info.pPmSamplingObject = hw->sampler;
        info.pCounterDataImage = hw->image;
        info.counterDataImageSize = hw->image_size;
        info.sampleIndex = first + index;
        out[index].ok = hw->api.cuptiPmSamplingCounterDataGetSampleInfo(&info) == CUPTI_SUCCESS;
        out[index].start = info.startTimestamp;
        out[index].end = info.endTimestamp;
    }
    uint64_t informed = core_now_ns();
    size_t threads = 1 + hw->evaluator_count;
    if (threads > 1 + count / 64) /* a few samples are not worth a thread */
        threads = 1 + count / 64;
    evaluate_job jobs[CUDA_PM_EVALUATE_THREADS_MAX];
    pthread_t ids[CUDA_PM_EVALUATE_THREADS_MAX];
    int started[CUDA_PM_EVALUATE_THREADS_MAX] = {0};
    for (size_t t = 0; t < threads; t++)
        jobs[t] = (evaluate_job){.hw = hw,
                                 .host = t == 0 ? hw->host : hw->evaluators[t - 1],
                                 .first = first + count * t / threads,
                                 .count = count * (t + 1) / threads - count * t / threads,
                                 .out = out + count * t / threads};
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous); /* the program's signals stay its own */
    for (size_t t = 1; t < threads; t++)
        started[t] = pthread_create(&ids[t], NULL, evaluate_range, &jobs[t]) == 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    evaluate_range(&jobs[0]);
    for (size_t t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(ids[t], NULL);
        else
            evaluate_range(&jobs[t]); /* no thread: here, with its own host object */
    }
    hw->costs.info_ns += informed - began;
    hw->costs.evaluate_ns += core_now_ns() - informed;
    hw->costs.reads += count;
    if (threads > hw->costs.threads)
        hw->costs.threads = threads;
}

const pm_hardware_ops cuda_pm_hardware_ops = {
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
    .read_batch = hw_read_batch,
};
