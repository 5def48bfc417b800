/*
 * cuda_info.h: what this machine offers flare's CUDA backend, for
 * `flare info`: driver and CUPTI versions, devices, chip names, and which
 * CUPTI profiling APIs each device supports. Read-only; never aborts.
 */
#ifndef FLARE_BACKEND_CUDA_INFO_H
#define FLARE_BACKEND_CUDA_INFO_H

#define CUDA_INFO_DEVICES_MAX 64

typedef enum cuda_info_support {
    CUDA_INFO_UNKNOWN = 0,
    CUDA_INFO_SUPPORTED = 1,
    CUDA_INFO_UNSUPPORTED = 2,
} cuda_info_support;

typedef struct cuda_info_device {
    int ordinal;
    char name[128];
    char chip[64]; /* CUPTI's chip name, e.g. "GH100"; "" if unknown */
    int compute_major;
    int compute_minor;
    unsigned long long memory_bytes;
    /* cuptiProfilerDeviceSupported, per API */
    cuda_info_support range_profiler;
    cuda_info_support pc_sampling;
    cuda_info_support sass_metrics;
    cuda_info_support pm_sampling;
} cuda_info_device;

typedef struct cuda_info {
    int built_with_cuda;
    int driver_loaded;
    char driver_reason[512]; /* why not, when not */
    int driver_version;      /* e.g. 13000 */
    char nvml_driver_version[64];
    int cupti_loaded;
    char cupti_reason[512];
    char cupti_path[512];
    unsigned int cupti_version;
    int profiler_available;
    char profiler_reason[256];
    int device_count;
    cuda_info_device devices[CUDA_INFO_DEVICES_MAX];
} cuda_info;

/* Fills info; always succeeds (what could not be learned has a reason). */
void cuda_info_collect(cuda_info *info);

/* Cheap check, no cuInit: 1 if the NVIDIA driver library loads, else 0 with
 * the reason. Used by `flare trace` so that a session on a machine without
 * a GPU says why nothing GPU-side was recorded. */
int cuda_info_driver_present(char *reason, unsigned long reason_size);

#endif /* FLARE_BACKEND_CUDA_INFO_H */
