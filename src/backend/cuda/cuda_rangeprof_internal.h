/*
 * cuda_rangeprof_internal.h: what the range-profiler collector
 * (cuda_rangeprof.c) and its host set-up (cuda_rangeprof_setup.c) share:
 * the table of CUPTI functions, the per-context and per-metric-list set-up
 * records, and the set-up functions the collector calls. Nothing outside
 * those two files includes it.
 *
 * Must never hold state of its own: the records live in
 * cuda_rangeprof_setup.c, the sessions in cuda_rangeprof.c.
 */
#ifndef FLARE_BACKEND_CUDA_RANGEPROF_INTERNAL_H
#define FLARE_BACKEND_CUDA_RANGEPROF_INTERNAL_H

#include <cupti_range_profiler.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_profiler_host.h"
#include "backend/cuda/cuda_rangeprof.h"

#define RANGEPROF_SETUPS_MAX 32

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

/* Resolved by cuda_rangeprof_install. */
extern rangeprof_api cuda_rangeprof_api;

/* CUPTI's words for a result. */
const char *cuda_rangeprof_cupti_text(CUptiResult result);

/* ---- cuda_rangeprof_setup.c (the collector's cache_lock held) ---- */

/* The context's entry, set up (profiler initialised, availability when
 * asked for, range profiler enabled) on first use; NULL with reason when
 * CUPTI refused, or more than 64 contexts. A failure is not kept. */
rangeprof_context *cuda_rangeprof_context_for(CUcontext context, int device, char *reason,
                                              size_t reason_size);
/* The set-up for (context, metrics), built on first use; a failed build is
 * kept with its status and reason. NULL when out of memory or more than
 * RANGEPROF_SETUPS_MAX lists. */
rangeprof_setup *cuda_rangeprof_setup_for(rangeprof_context *context, const char *const *metrics,
                                          size_t count);
/* Sizes the setup's counter data image for max_ranges ranges (a no-op when
 * it already is). Callers hold the device's replay writer gate too. */
CUptiResult cuda_rangeprof_size_counter_data(rangeprof_setup *setup, size_t max_ranges);

#endif /* FLARE_BACKEND_CUDA_RANGEPROF_INTERNAL_H */
