/*
 * cuda_loader.h: run-time loading of the NVIDIA libraries flare uses.
 *
 * libcuda, libcupti and libnvidia-ml are opened with dlopen and their
 * functions resolved into tables, so one flare build runs on machines with
 * and without them and can say exactly which is missing and why. Nothing
 * here is ever linked at build time. NVML has no header on the build
 * machine, so the few NVML types and functions used are declared here.
 * Loading never aborts; a failure fills a reason and returns non-zero.
 */
#ifndef FLARE_BACKEND_CUDA_LOADER_H
#define FLARE_BACKEND_CUDA_LOADER_H

#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <stddef.h>

/* ---- libcuda ---- */
typedef struct cuda_driver_api {
    void *library;
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
    CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attribute, CUdevice device);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice device);
    CUresult (*cuGetErrorString)(CUresult error, const char **text);
    /* Optional (NULL when this driver lacks them): kernel replay uses these
     * (cuda_replay*.c, cuda_rangeprof*.c); loading succeeds without them. */
    CUresult (*cuCtxGetCurrent)(CUcontext *context);
    CUresult (*cuCtxGetDevice)(CUdevice *device);
    CUresult (*cuCtxPushCurrent)(CUcontext context);
    CUresult (*cuCtxPopCurrent)(CUcontext *context);
    CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
    CUresult (*cuStreamDestroy)(CUstream stream);
    CUresult (*cuStreamQuery)(CUstream stream);
    CUresult (*cuMemAlloc)(CUdeviceptr *pointer, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr pointer);
    CUresult (*cuMemAllocHost)(void **pointer, size_t bytes);
    CUresult (*cuMemFreeHost)(void *pointer);
    CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*cuMemcpyAsync)(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                              CUstream stream);
    CUresult (*cuMemGetAllocationPropertiesFromHandle)(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle);
    CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                               unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                               unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                               void **parameters, void **extra);
    CUresult (*cuLaunchKernel_ptsz)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                    unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                    unsigned int block_z, unsigned int shared_bytes,
                                    CUstream stream, void **parameters, void **extra);
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction function,
                                 void **parameters, void **extra);
    CUresult (*cuLaunchKernelEx_ptsz)(const CUlaunchConfig *config, CUfunction function,
                                      void **parameters, void **extra);
    CUresult (*cuFuncGetModule)(CUmodule *module, CUfunction function);
    CUresult (*cuModuleGetGlobal)(CUdeviceptr *pointer, size_t *bytes, CUmodule module,
                                  const char *name);
    CUresult (*cuKernelGetLibrary)(CUlibrary *library, CUkernel kernel);
    /* CUDA 12.4+ (NULL before): a lazily loaded function's module is loaded
     * on demand, so replay can find its __device__ variables before the
     * launch that would load it. */
    CUresult (*cuFuncIsLoaded)(CUfunctionLoadingState *state, CUfunction function);
    CUresult (*cuFuncLoad)(CUfunction function);
    CUresult (*cuKernelGetFunction)(CUfunction *function, CUkernel kernel);
    CUresult (*cuLibraryGetGlobal)(CUdeviceptr *pointer, size_t *bytes, CUlibrary library,
                                   const char *name);
    /* Range replay (cuda_range_replay.c): deep copies of kernel arguments, and the
     * asynchronous forms recorded copies and memsets are re-issued with. */
    CUresult (*cuFuncGetParamInfo)(CUfunction function, size_t index, size_t *offset, size_t *size);
    CUresult (*cuStreamIsCapturing)(CUstream stream, CUstreamCaptureStatus *status);
    CUresult (*cuKernelGetParamInfo)(CUkernel kernel, size_t index, size_t *offset, size_t *size);
    CUresult (*cuPointerGetAttribute)(void *data, CUpointer_attribute attribute,
                                      CUdeviceptr pointer);
    CUresult (*cuMemsetD8Async)(CUdeviceptr destination, unsigned char value, size_t count,
                                CUstream stream);
    CUresult (*cuMemsetD16Async)(CUdeviceptr destination, unsigned short value, size_t count,
                                 CUstream stream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr destination, unsigned int value, size_t count,
                                 CUstream stream);
    /* Optional: the launch-storm guard weighs CUDA graphs with these
     * (cuda_graph_weights.h); without them a graph launch counts as one. */
    CUresult (*cuGraphGetNodes)(CUgraph graph, CUgraphNode *nodes, size_t *count);
    CUresult (*cuGraphNodeGetType)(CUgraphNode node, CUgraphNodeType *type);
    CUresult (*cuGraphChildGraphNodeGetGraph)(CUgraphNode node, CUgraph *graph);
} cuda_driver_api;

/* ---- libcupti ---- */
typedef struct cuda_cupti_api {
    void *library;
    char path[512];
    CUptiResult (*cuptiGetVersion)(uint32_t *version);
    CUptiResult (*cuptiGetResultString)(CUptiResult result, const char **text);
    CUptiResult (*cuptiActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc request,
                                                  CUpti_BuffersCallbackCompleteFunc complete);
    CUptiResult (*cuptiActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc function);
    CUptiResult (*cuptiActivityEnable)(CUpti_ActivityKind kind);
    CUptiResult (*cuptiActivityDisable)(CUpti_ActivityKind kind);
    CUptiResult (*cuptiActivityFlushAll)(uint32_t flag);
    CUptiResult (*cuptiActivityFlushPeriod)(uint32_t milliseconds);
    CUptiResult (*cuptiGetStreamIdEx)(CUcontext context, CUstream stream, uint8_t per_thread,
                                      uint32_t *stream_id); /* optional */
    CUptiResult (*cuptiActivityGetNextRecord)(uint8_t *buffer, size_t valid_size,
                                              CUpti_Activity **record);
    CUptiResult (*cuptiActivityGetNumDroppedRecords)(CUcontext context, uint32_t stream_id,
                                                     size_t *dropped);
    CUptiResult (*cuptiSubscribe)(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                  void *user);
    CUptiResult (*cuptiUnsubscribe)(CUpti_SubscriberHandle subscriber);
    CUptiResult (*cuptiEnableCallback)(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId id);
    CUptiResult (*cuptiEnableDomain)(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                     CUpti_CallbackDomain domain);
    CUptiResult (*cuptiGetCallbackState)(uint32_t *enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain,
                                         CUpti_CallbackId id); /* optional */
    CUptiResult (*cuptiProfilerInitialize)(CUpti_Profiler_Initialize_Params *params);
    CUptiResult (*cuptiProfilerDeviceSupported)(CUpti_Profiler_DeviceSupported_Params *params);
    CUptiResult (*cuptiDeviceGetChipName)(CUpti_Device_GetChipName_Params *params);
    /* NVTX injection entry point of libcupti: flare forwards NVTX's own
     * initialisation to it so CUPTI's NVTX callbacks work. */
    int (*InitializeInjectionNvtx2)(void *get_export_table);
} cuda_cupti_api;

/* ---- libnvidia-ml (declared here: no header is installed) ---- */
typedef int cuda_nvml_return; /* nvmlReturn_t: 0 is success */
typedef struct cuda_nvml_device_opaque *cuda_nvml_device;
typedef struct cuda_nvml_utilization {
    unsigned int gpu;    /* percent of time a kernel ran */
    unsigned int memory; /* percent of time memory was read or written */
} cuda_nvml_utilization;
typedef struct cuda_nvml_memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} cuda_nvml_memory;
#define CUDA_NVML_CLOCK_SM        1
#define CUDA_NVML_TEMPERATURE_GPU 0

typedef struct cuda_nvml_api {
    void *library;
    cuda_nvml_return (*nvmlInit_v2)(void);
    cuda_nvml_return (*nvmlShutdown)(void);
    const char *(*nvmlErrorString)(cuda_nvml_return result);
    cuda_nvml_return (*nvmlSystemGetDriverVersion)(char *version, unsigned int length);
    cuda_nvml_return (*nvmlDeviceGetCount_v2)(unsigned int *count);
    cuda_nvml_return (*nvmlDeviceGetHandleByIndex_v2)(unsigned int index, cuda_nvml_device *device);
    cuda_nvml_return (*nvmlDeviceGetName)(cuda_nvml_device device, char *name, unsigned int length);
    cuda_nvml_return (*nvmlDeviceGetUtilizationRates)(cuda_nvml_device device,
                                                      cuda_nvml_utilization *utilization);
    cuda_nvml_return (*nvmlDeviceGetMemoryInfo)(cuda_nvml_device device, cuda_nvml_memory *memory);
    cuda_nvml_return (*nvmlDeviceGetPowerUsage)(cuda_nvml_device device, unsigned int *milliwatts);
    cuda_nvml_return (*nvmlDeviceGetClockInfo)(cuda_nvml_device device, int clock_type,
                                               unsigned int *megahertz);
    cuda_nvml_return (*nvmlDeviceGetTemperature)(cuda_nvml_device device, int sensor,
                                                 unsigned int *celsius);
} cuda_nvml_api;

/* Each returns 0, or -1 with a reason ("libcupti.so.13: cannot open shared
 * object file...", "symbol cuptiX missing in ..."). Safe to call again after
 * a success (returns 0 at once). Not thread-safe: call from one thread. */
int cuda_load_driver(cuda_driver_api *api, char *reason, size_t reason_size);
int cuda_load_cupti(cuda_cupti_api *api, char *reason, size_t reason_size);
int cuda_load_nvml(cuda_nvml_api *api, char *reason, size_t reason_size);

/* Text of a CUDA / CUPTI result, never NULL. */
const char *cuda_driver_error_text(const cuda_driver_api *api, CUresult result);
const char *cuda_cupti_error_text(const cuda_cupti_api *api, CUptiResult result);

#endif /* FLARE_BACKEND_CUDA_LOADER_H */
