/*
 * cuda_info.c: gathers `flare info` from the driver, CUPTI and NVML
 * (cuda_info.h), each loaded at run time.
 */
#include "backend/cuda/cuda_info.h"

#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_loader.h"

static cuda_info_support supported(cuda_cupti_api *cupti, CUdevice device, CUpti_Profiler_API api)
{
    if (cupti->cuptiProfilerDeviceSupported == NULL)
        return CUDA_INFO_UNKNOWN;
    CUpti_Profiler_DeviceSupported_Params params;
    memset(&params, 0, sizeof(params));
    params.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
    params.cuDevice = device;
    params.api = api;
    if (cupti->cuptiProfilerDeviceSupported(&params) != CUPTI_SUCCESS)
        return CUDA_INFO_UNKNOWN;
    return params.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? CUDA_INFO_SUPPORTED
                                                                        : CUDA_INFO_UNSUPPORTED;
}

void cuda_info_collect(cuda_info *info)
{
    memset(info, 0, sizeof(*info));
    info->built_with_cuda = 1;
    static cuda_driver_api driver;
    static cuda_cupti_api cupti;
    static cuda_nvml_api nvml;
    if (cuda_load_driver(&driver, info->driver_reason, sizeof(info->driver_reason)) == 0) {
        CUresult result = driver.cuInit(0);
        if (result != CUDA_SUCCESS) {
            snprintf(info->driver_reason, sizeof(info->driver_reason), "cuInit: %s",
                     cuda_driver_error_text(&driver, result));
        } else {
            info->driver_loaded = 1;
            driver.cuDriverGetVersion(&info->driver_version);
            driver.cuDeviceGetCount(&info->device_count);
            if (info->device_count > CUDA_INFO_DEVICES_MAX)
                info->device_count = CUDA_INFO_DEVICES_MAX;
        }
    }
    char reason[512];
    if (cuda_load_nvml(&nvml, reason, sizeof(reason)) == 0 && nvml.nvmlInit_v2() == 0)
        nvml.nvmlSystemGetDriverVersion(info->nvml_driver_version,
                                        sizeof(info->nvml_driver_version));
    if (cuda_load_cupti(&cupti, info->cupti_reason, sizeof(info->cupti_reason)) == 0) {
        info->cupti_loaded = 1;
        snprintf(info->cupti_path, sizeof(info->cupti_path), "%s", cupti.path);
        cupti.cuptiGetVersion(&info->cupti_version);
        if (cupti.cuptiProfilerInitialize != NULL && info->driver_loaded) {
            CUpti_Profiler_Initialize_Params params;
            memset(&params, 0, sizeof(params));
            params.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
            CUptiResult result = cupti.cuptiProfilerInitialize(&params);
            info->profiler_available = result == CUPTI_SUCCESS;
            if (!info->profiler_available)
                snprintf(info->profiler_reason, sizeof(info->profiler_reason),
                         "cuptiProfilerInitialize: %s", cuda_cupti_error_text(&cupti, result));
        } else {
            snprintf(info->profiler_reason, sizeof(info->profiler_reason), "%s",
                     info->driver_loaded ? "this CUPTI has no profiler API" : "no driver");
        }
    }
    for (int ordinal = 0; ordinal < info->device_count; ordinal++) {
        cuda_info_device *out = &info->devices[ordinal];
        out->ordinal = ordinal;
        CUdevice device;
        if (driver.cuDeviceGet(&device, ordinal) != CUDA_SUCCESS)
            continue;
        driver.cuDeviceGetName(out->name, sizeof(out->name), device);
        driver.cuDeviceGetAttribute(&out->compute_major,
                                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
        driver.cuDeviceGetAttribute(&out->compute_minor,
                                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
        size_t bytes = 0;
        if (driver.cuDeviceTotalMem(&bytes, device) == CUDA_SUCCESS)
            out->memory_bytes = bytes;
        if (!info->profiler_available)
            continue;
        out->range_profiler = supported(&cupti, device, CUPTI_PROFILER_RANGE_PROFILING);
        out->pc_sampling = supported(&cupti, device, CUPTI_PROFILER_PC_SAMPLING);
        out->sass_metrics = supported(&cupti, device, CUPTI_PROFILER_SASS_METRICS);
        out->pm_sampling = supported(&cupti, device, CUPTI_PROFILER_PM_SAMPLING);
        if (cupti.cuptiDeviceGetChipName != NULL) {
            CUpti_Device_GetChipName_Params chip;
            memset(&chip, 0, sizeof(chip));
            chip.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
            chip.deviceIndex = (size_t)ordinal;
            if (cupti.cuptiDeviceGetChipName(&chip) == CUPTI_SUCCESS && chip.pChipName != NULL)
                snprintf(out->chip, sizeof(out->chip), "%s", chip.pChipName);
        }
    }
}

int cuda_info_driver_present(char *reason, unsigned long reason_size)
{
    static cuda_driver_api driver;
    return cuda_load_driver(&driver, reason, reason_size) == 0;
}
