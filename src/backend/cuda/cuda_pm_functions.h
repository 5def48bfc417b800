/*
 * cuda_pm_functions.h: the CUPTI functions PM sampling uses (cuda_pm.c),
 * as one X-macro list and the table of pointers it declares: cuda_pm.c
 * resolves each with dlsym on the libcupti handle cuda_loader opened, and
 * its windows' engine and range replay's instance share the table.
 *
 * Declarations only: must never hold state or call CUPTI.
 */
#ifndef FLARE_BACKEND_CUDA_CUDA_PM_FUNCTIONS_H
#define FLARE_BACKEND_CUDA_CUDA_PM_FUNCTIONS_H

#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include "backend/cuda/cuda_profiler_host.h"

#define PM_FUNCTIONS(X)                                                                            \
    X(cuptiGetResultString, CUptiResult, (CUptiResult, const char **))                             \
    X(cuptiGetDeviceId, CUptiResult, (CUcontext, uint32_t *))                                      \
    X(cuptiGetTimestamp, CUptiResult, (uint64_t *))                                                \
    X(cuptiProfilerInitialize, CUptiResult, (CUpti_Profiler_Initialize_Params *))                  \
    X(cuptiDeviceGetChipName, CUptiResult, (CUpti_Device_GetChipName_Params *))                    \
    X(cuptiPmSamplingGetCounterAvailability, CUptiResult,                                          \
      (CUpti_PmSampling_GetCounterAvailability_Params *))                                          \
    X(cuptiProfilerHostInitialize, CUptiResult, (CUpti_Profiler_Host_Initialize_Params *))         \
    X(cuptiProfilerHostDeinitialize, CUptiResult, (CUpti_Profiler_Host_Deinitialize_Params *))     \
    X(cuptiProfilerHostGetMetricProperties, CUptiResult,                                           \
      (CUpti_Profiler_Host_GetMetricProperties_Params *))                                          \
    X(cuptiProfilerHostConfigAddMetrics, CUptiResult,                                              \
      (CUpti_Profiler_Host_ConfigAddMetrics_Params *))                                             \
    X(cuptiProfilerHostGetConfigImageSize, CUptiResult,                                            \
      (CUpti_Profiler_Host_GetConfigImageSize_Params *))                                           \
    X(cuptiProfilerHostGetConfigImage, CUptiResult, (CUpti_Profiler_Host_GetConfigImage_Params *)) \
    X(cuptiProfilerHostGetNumOfPasses, CUptiResult, (CUpti_Profiler_Host_GetNumOfPasses_Params *)) \
    X(cuptiProfilerHostEvaluateToGpuValues, CUptiResult,                                           \
      (CUpti_Profiler_Host_EvaluateToGpuValues_Params *))                                          \
    X(cuptiPmSamplingEnable, CUptiResult, (CUpti_PmSampling_Enable_Params *))                      \
    X(cuptiPmSamplingDisable, CUptiResult, (CUpti_PmSampling_Disable_Params *))                    \
    X(cuptiPmSamplingSetConfig, CUptiResult, (CUpti_PmSampling_SetConfig_Params *))                \
    X(cuptiPmSamplingStart, CUptiResult, (CUpti_PmSampling_Start_Params *))                        \
    X(cuptiPmSamplingStop, CUptiResult, (CUpti_PmSampling_Stop_Params *))                          \
    X(cuptiPmSamplingDecodeData, CUptiResult, (CUpti_PmSampling_DecodeData_Params *))              \
    X(cuptiPmSamplingGetCounterDataSize, CUptiResult,                                              \
      (CUpti_PmSampling_GetCounterDataSize_Params *))                                              \
    X(cuptiPmSamplingCounterDataImageInitialize, CUptiResult,                                      \
      (CUpti_PmSampling_CounterDataImage_Initialize_Params *))                                     \
    X(cuptiPmSamplingGetCounterDataInfo, CUptiResult,                                              \
      (CUpti_PmSampling_GetCounterDataInfo_Params *))                                              \
    X(cuptiPmSamplingCounterDataGetSampleInfo, CUptiResult,                                        \
      (CUpti_PmSampling_CounterData_GetSampleInfo_Params *))

typedef struct pm_functions {
#define PM_FUNCTION_FIELD_(name, result, arguments) result(*name) arguments;
    PM_FUNCTIONS(PM_FUNCTION_FIELD_)
#undef PM_FUNCTION_FIELD_
} pm_functions;

#endif /* FLARE_BACKEND_CUDA_CUDA_PM_FUNCTIONS_H */
