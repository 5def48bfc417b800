/*
 * cuda_loader.c: dlopen of libcuda, libcupti and libnvidia-ml (cuda_loader.h).
 *
 * Search order for CUPTI, which is not on the default library path on most
 * machines: $FLARE_CUPTI_PATH (a file), then the plain sonames, then the
 * usual toolkit folders. The first library that opens and has every
 * required symbol wins; otherwise the reason names what was tried.
 */
#include "backend/cuda/cuda_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Resolves one symbol into a table field; on failure records which. */
#define RESOLVE(api, library, field, missing)                                                      \
    do {                                                                                           \
        *(void **)&(api)->field = dlsym((library), #field);                                        \
        if ((api)->field == NULL && (missing) == NULL)                                             \
            (missing) = #field;                                                                    \
    } while (0)

int cuda_load_driver(cuda_driver_api *api, char *reason, size_t reason_size)
{
    if (api->library != NULL)
        return 0;
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(reason, reason_size, "no NVIDIA driver: %s", dlerror());
        return -1;
    }
    const char *missing = NULL;
    RESOLVE(api, library, cuInit, missing);
    RESOLVE(api, library, cuDriverGetVersion, missing);
    RESOLVE(api, library, cuDeviceGetCount, missing);
    RESOLVE(api, library, cuDeviceGet, missing);
    RESOLVE(api, library, cuDeviceGetName, missing);
    RESOLVE(api, library, cuDeviceGetAttribute, missing);
    *(void **)&api->cuDeviceTotalMem = dlsym(library, "cuDeviceTotalMem_v2");
    if (api->cuDeviceTotalMem == NULL && missing == NULL)
        missing = "cuDeviceTotalMem_v2";
    RESOLVE(api, library, cuGetErrorString, missing);
    /* Optional: kernel replay checks for them itself (versioned names are
     * the ABI the driver exports for the _v2 functions). */
    *(void **)&api->cuCtxGetCurrent = dlsym(library, "cuCtxGetCurrent");
    *(void **)&api->cuCtxGetDevice = dlsym(library, "cuCtxGetDevice");
    *(void **)&api->cuCtxPushCurrent = dlsym(library, "cuCtxPushCurrent_v2");
    *(void **)&api->cuCtxPopCurrent = dlsym(library, "cuCtxPopCurrent_v2");
    *(void **)&api->cuStreamCreate = dlsym(library, "cuStreamCreate");
    *(void **)&api->cuStreamDestroy = dlsym(library, "cuStreamDestroy_v2");
    *(void **)&api->cuStreamQuery = dlsym(library, "cuStreamQuery");
    *(void **)&api->cuMemAlloc = dlsym(library, "cuMemAlloc_v2");
    *(void **)&api->cuMemFree = dlsym(library, "cuMemFree_v2");
    *(void **)&api->cuMemAllocHost = dlsym(library, "cuMemAllocHost_v2");
    *(void **)&api->cuMemFreeHost = dlsym(library, "cuMemFreeHost");
    *(void **)&api->cuMemGetInfo = dlsym(library, "cuMemGetInfo_v2");
    *(void **)&api->cuMemcpyAsync = dlsym(library, "cuMemcpyAsync");
    *(void **)&api->cuMemGetAllocationPropertiesFromHandle =
        dlsym(library, "cuMemGetAllocationPropertiesFromHandle");
    *(void **)&api->cuLaunchKernel = dlsym(library, "cuLaunchKernel");
    *(void **)&api->cuLaunchKernel_ptsz = dlsym(library, "cuLaunchKernel_ptsz");
    *(void **)&api->cuLaunchKernelEx = dlsym(library, "cuLaunchKernelEx");
    *(void **)&api->cuLaunchKernelEx_ptsz = dlsym(library, "cuLaunchKernelEx_ptsz");
    *(void **)&api->cuFuncGetModule = dlsym(library, "cuFuncGetModule");
    *(void **)&api->cuModuleGetGlobal = dlsym(library, "cuModuleGetGlobal_v2");
    *(void **)&api->cuKernelGetLibrary = dlsym(library, "cuKernelGetLibrary");
    *(void **)&api->cuFuncIsLoaded = dlsym(library, "cuFuncIsLoaded");
    *(void **)&api->cuFuncLoad = dlsym(library, "cuFuncLoad");
    *(void **)&api->cuKernelGetFunction = dlsym(library, "cuKernelGetFunction");
    *(void **)&api->cuLibraryGetGlobal = dlsym(library, "cuLibraryGetGlobal");
    *(void **)&api->cuFuncGetParamInfo = dlsym(library, "cuFuncGetParamInfo");
    *(void **)&api->cuKernelGetParamInfo = dlsym(library, "cuKernelGetParamInfo");
    *(void **)&api->cuStreamIsCapturing = dlsym(library, "cuStreamIsCapturing");
    *(void **)&api->cuPointerGetAttribute = dlsym(library, "cuPointerGetAttribute");
    *(void **)&api->cuMemsetD8Async = dlsym(library, "cuMemsetD8Async");
    *(void **)&api->cuMemsetD16Async = dlsym(library, "cuMemsetD16Async");
    *(void **)&api->cuMemsetD32Async = dlsym(library, "cuMemsetD32Async");
    *(void **)&api->cuGraphGetNodes = dlsym(library, "cuGraphGetNodes");
    *(void **)&api->cuGraphNodeGetType = dlsym(library, "cuGraphNodeGetType");
    *(void **)&api->cuGraphChildGraphNodeGetGraph = dlsym(library, "cuGraphChildGraphNodeGetGraph");
    if (missing != NULL) {
        snprintf(reason, reason_size, "libcuda.so.1 lacks %s (driver too old?)", missing);
        dlclose(library);
        memset(api, 0, sizeof(*api));
        return -1;
    }
    api->library = library;
    return 0;
}

static int try_cupti(cuda_cupti_api *api, const char *path, char *reason, size_t reason_size)
{
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(reason, reason_size, "%s", dlerror());
        return -1;
    }
    const char *missing = NULL;
    RESOLVE(api, library, cuptiGetVersion, missing);
    RESOLVE(api, library, cuptiGetResultString, missing);
    RESOLVE(api, library, cuptiActivityRegisterCallbacks, missing);
    RESOLVE(api, library, cuptiActivityEnable, missing);
    RESOLVE(api, library, cuptiActivityDisable, missing);
    RESOLVE(api, library, cuptiActivityFlushAll, missing);
    RESOLVE(api, library, cuptiActivityGetNextRecord, missing);
    RESOLVE(api, library, cuptiActivityGetNumDroppedRecords, missing);
    RESOLVE(api, library, cuptiSubscribe, missing);
    RESOLVE(api, library, cuptiUnsubscribe, missing);
    RESOLVE(api, library, cuptiEnableCallback, missing);
    RESOLVE(api, library, cuptiEnableDomain, missing);
    if (missing != NULL) {
        snprintf(reason, reason_size, "%s lacks %s", path, missing);
        dlclose(library);
        return -1;
    }
    /* Optional: newer or profiling-only entry points. */
    const char *optional = NULL;
    RESOLVE(api, library, cuptiActivityRegisterTimestampCallback, optional);
    RESOLVE(api, library, cuptiActivityFlushPeriod, optional);
    RESOLVE(api, library, cuptiGetStreamIdEx, optional);
    RESOLVE(api, library, cuptiGetCallbackState, optional);
    RESOLVE(api, library, cuptiProfilerInitialize, optional);
    RESOLVE(api, library, cuptiProfilerDeviceSupported, optional);
    RESOLVE(api, library, cuptiDeviceGetChipName, optional);
    RESOLVE(api, library, InitializeInjectionNvtx2, optional);
    api->library = library;
    snprintf(api->path, sizeof(api->path), "%s", path);
    return 0;
}

int cuda_load_cupti(cuda_cupti_api *api, char *reason, size_t reason_size)
{
    if (api->library != NULL)
        return 0;
    const char *candidates[] = {
        getenv("FLARE_CUPTI_PATH"),
        "libcupti.so.13",
        "libcupti.so",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
        "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so",
        "/usr/local/cuda/lib64/libcupti.so",
    };
    char last[512] = "";
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (candidates[i] == NULL || candidates[i][0] == '\0')
            continue;
        if (try_cupti(api, candidates[i], last, sizeof(last)) == 0)
            return 0;
        if (i == 0) {
            /* An explicit path that fails is the user's mistake: say so. */
            snprintf(reason, reason_size, "FLARE_CUPTI_PATH=%s: %s", candidates[0], last);
            return -1;
        }
    }
    snprintf(reason, reason_size,
             "CUPTI not found (tried libcupti.so.13 and the CUDA toolkit folders; set "
             "FLARE_CUPTI_PATH): %s",
             last);
    return -1;
}

int cuda_load_nvml(cuda_nvml_api *api, char *reason, size_t reason_size)
{
    if (api->library != NULL)
        return 0;
    void *library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(reason, reason_size, "NVML not found: %s", dlerror());
        return -1;
    }
    const char *missing = NULL;
    RESOLVE(api, library, nvmlInit_v2, missing);
    RESOLVE(api, library, nvmlShutdown, missing);
    RESOLVE(api, library, nvmlErrorString, missing);
    RESOLVE(api, library, nvmlSystemGetDriverVersion, missing);
    RESOLVE(api, library, nvmlDeviceGetCount_v2, missing);
    RESOLVE(api, library, nvmlDeviceGetHandleByIndex_v2, missing);
    RESOLVE(api, library, nvmlDeviceGetName, missing);
    RESOLVE(api, library, nvmlDeviceGetUtilizationRates, missing);
    RESOLVE(api, library, nvmlDeviceGetMemoryInfo, missing);
    RESOLVE(api, library, nvmlDeviceGetPowerUsage, missing);
    RESOLVE(api, library, nvmlDeviceGetClockInfo, missing);
    RESOLVE(api, library, nvmlDeviceGetTemperature, missing);
    if (missing != NULL) {
        snprintf(reason, reason_size, "libnvidia-ml.so.1 lacks %s", missing);
        dlclose(library);
        memset(api, 0, sizeof(*api));
        return -1;
    }
    api->library = library;
    return 0;
}

const char *cuda_driver_error_text(const cuda_driver_api *api, CUresult result)
{
    const char *text = NULL;
    if (api != NULL && api->cuGetErrorString != NULL)
        api->cuGetErrorString(result, &text);
    return text != NULL ? text : "unknown CUDA error";
}

const char *cuda_cupti_error_text(const cuda_cupti_api *api, CUptiResult result)
{
    const char *text = NULL;
    if (api != NULL && api->cuptiGetResultString != NULL)
        api->cuptiGetResultString(result, &text);
    return text != NULL ? text : "unknown CUPTI error";
}
