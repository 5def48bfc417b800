/*
 * cuda_range_replay.c: deep copies of a span's work on CUDA, and their re-issue.
 *
 * A kernel's arguments are copied by layout (cuFuncGetParamInfo gives each
 * parameter's offset and size), so a later pass launches the kernel with
 * exactly the values the program passed, even after the program reused its
 * argument memory. Host-to-device sources are copied at record time for
 * the same reason. Re-issue runs inside flare's internal bracket, so the
 * re-issued work is neither gated, recorded again, nor stored as the
 * program's. It must never read past what the driver says a parameter is.
 */
#include "backend/cuda/cuda_range_replay.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_callback_ids.h"
#include "core/log.h"
#include "flare/flare.h"

/* Kernels with more parameters than this are declined (CUDA allows 32 KiB
 * of parameters; real kernels have a few dozen). */
#define SPAN_PARAMETERS_MAX 1024
/* Packed arguments (extra) larger than this are declined (CUDA's limit on
 * kernel parameters is 32 KiB). */
#define SPAN_PACKED_MAX ((size_t)32 << 10)

static const cuda_driver_api *driver;
static void (*internal_begin)(void);
static void (*internal_end)(void);
static CUstream (*replay_stream_of)(int device);

void cuda_range_replay_attach(const cuda_driver_api *api, void (*begin)(void), void (*end)(void),
                              CUstream (*replay_stream)(int device))
{
    driver = api;
    internal_begin = begin;
    internal_end = end;
    replay_stream_of = replay_stream;
}

/* ---- Kernels ---- */

typedef struct recorded_launch {
    CUfunction function;
    unsigned int grid[3];
    unsigned int block[3];
    unsigned int shared_bytes;
    CUstream stream; /* the private replay stream later passes use */
    int use_ex;      /* launched with cuLaunchKernelEx: config and attributes kept */
    CUlaunchConfig config;
    CUlaunchAttribute *attributes;
    size_t parameter_count;
    void **parameter_pointers; /* into parameter_bytes */
    unsigned char *parameter_bytes;
    /* Arguments passed packed (the launch's extra: a buffer and its size,
     * as cuBLAS's nvjet kernels are launched): a copy, re-issued the same
     * way; NULL when they came as kernelParams. */
    unsigned char *packed;
    size_t packed_size;
    void *extra[5];
} recorded_launch;

static void release_launch(void *data)
{
    recorded_launch *launch = data;
    if (launch != NULL) {
        free(launch->attributes);
        free(launch->parameter_pointers);
        free(launch->parameter_bytes);
        free(launch->packed);
        free(launch);
    }
}

static int reissue_launch(void *data)
{
    const recorded_launch *launch = data;
    CUresult result = CUDA_ERROR_NOT_SUPPORTED;
    internal_begin();
    if (launch->use_ex) {
        if (driver->cuLaunchKernelEx != NULL)
            result = driver->cuLaunchKernelEx(
                &launch->config, launch->function, launch->parameter_pointers,
                launch->packed != NULL ? (void **)launch->extra : NULL);
    } else if (driver->cuLaunchKernel != NULL) {
        result = driver->cuLaunchKernel(
            launch->function, launch->grid[0], launch->grid[1], launch->grid[2], launch->block[0],
            launch->block[1], launch->block[2], launch->shared_bytes, launch->stream,
            launch->parameter_pointers, launch->packed != NULL ? (void **)launch->extra : NULL);
    }
    internal_end();
    if (result != CUDA_SUCCESS) {
        CORE_LOG_ONCE("cuda.span.relaunch", CORE_LOG_ERROR,
                      "range replay: re-issuing a launch failed: %s",
                      cuda_driver_error_text(driver, result));
        return FLARE_ERR_BACKEND;
    }
    return FLARE_OK;
}

/* Reads a kernel's parameter layout through one of the two queries; returns
 * the count, and in *stopped what ended the walk. */
static size_t parameter_layout(CUfunction function, int as_kernel, size_t *offsets, size_t *sizes,
                               size_t *total, CUresult *stopped)
{
    size_t count = 0;
    *total = 0;
    *stopped = CUDA_SUCCESS;
    while (count < SPAN_PARAMETERS_MAX) {
        CUresult result =
            as_kernel ? driver->cuKernelGetParamInfo((CUkernel)function, count, &offsets[count],
                                                     &sizes[count])
                      : driver->cuFuncGetParamInfo(function, count, &offsets[count], &sizes[count]);
        if (result != CUDA_SUCCESS) {
            *stopped = result;
            break;
        }
        if (offsets[count] + sizes[count] > *total)
            *total = offsets[count] + sizes[count];
        count++;
    }
    return count;
}

/* Copies the arguments by the function's parameter layout. The runtime may
 * hand the driver a context-independent CUkernel where a CUfunction is
 * expected, so both queries are tried; a walk that stops on anything but
 * "index out of range" is not trusted. */
static int copy_parameters(recorded_launch *launch, void **parameters)
{
    static size_t offsets[SPAN_PARAMETERS_MAX];
    static size_t sizes[SPAN_PARAMETERS_MAX];
    static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
    if (driver->cuFuncGetParamInfo == NULL && driver->cuKernelGetParamInfo == NULL)
        return FLARE_ERR_UNSUPPORTED;
    pthread_mutex_lock(&layout_lock);
    size_t total = 0;
    CUresult stopped = CUDA_ERROR_NOT_SUPPORTED;
    size_t count = 0;
    if (driver->cuFuncGetParamInfo != NULL)
        count = parameter_layout(launch->function, 0, offsets, sizes, &total, &stopped);
    if (count == 0 && stopped != CUDA_ERROR_INVALID_VALUE && driver->cuKernelGetParamInfo != NULL)
        count = parameter_layout(launch->function, 1, offsets, sizes, &total, &stopped);
    int status = FLARE_OK;
    if (count == SPAN_PARAMETERS_MAX || stopped != CUDA_ERROR_INVALID_VALUE) {
        CORE_LOG_ONCE("cuda.span.layout", CORE_LOG_WARNING,
                      "range replay: a kernel's parameter layout could not be read (%s)",
                      cuda_driver_error_text(driver, stopped));
        status = FLARE_ERR_UNSUPPORTED;
    } else if (count > 0 && parameters == NULL) {
        status = FLARE_ERR_INVALID_ARGUMENT;
    } else {
        launch->parameter_count = count;
        launch->parameter_bytes = calloc(total > 0 ? total : 1, 1);
        launch->parameter_pointers = calloc(count > 0 ? count : 1, sizeof(void *));
        if (launch->parameter_bytes == NULL || launch->parameter_pointers == NULL) {
            status = FLARE_ERR_NO_MEMORY;
        } else {
            for (size_t index = 0; index < count; index++) {
                memcpy(launch->parameter_bytes + offsets[index], parameters[index], sizes[index]);
                launch->parameter_pointers[index] = launch->parameter_bytes + offsets[index];
            }
        }
    }
    pthread_mutex_unlock(&layout_lock);
    return status;
}

_Static_assert(
    CUDA_LAUNCH_IDS_RELAUNCHABLE_COUNT == 4,
    "cuda_range_replay_capture_launch copies each of CUDA_LAUNCH_IDS_RELAUNCHABLE: extend it "
    "with the list");

/* Copies the arguments of an extra array that holds exactly a buffer and
 * its size (CU_LAUNCH_PARAM_BUFFER_POINTER, _SIZE, _END), and points the
 * launch's own extra at the copy. */
static int copy_packed(recorded_launch *launch, void **extra)
{
    const void *buffer = NULL;
    const size_t *size = NULL;
    size_t index = 0;
    for (; index < 8 && extra[index] != CU_LAUNCH_PARAM_END; index += 2) {
        if (extra[index] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buffer = extra[index + 1];
        else if (extra[index] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = extra[index + 1];
        else
            return FLARE_ERR_UNSUPPORTED; /* an entry flare does not know */
    }
    if (index >= 8 || buffer == NULL || size == NULL || *size > SPAN_PACKED_MAX)
        return FLARE_ERR_UNSUPPORTED;
    launch->packed_size = *size;
    launch->packed = malloc(*size > 0 ? *size : 1);
    if (launch->packed == NULL)
        return FLARE_ERR_NO_MEMORY;
    memcpy(launch->packed, buffer, *size);
    launch->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    launch->extra[1] = launch->packed;
    launch->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    launch->extra[3] = &launch->packed_size;
    launch->extra[4] = CU_LAUNCH_PARAM_END;
    return FLARE_OK;
}

int cuda_range_replay_capture_launch(CUpti_CallbackId id, const void *params, int device,
                                     replay_range_work *work)
{
    CUstream stream = driver != NULL && replay_stream_of != NULL ? replay_stream_of(device) : NULL;
    if (stream == NULL)
        return FLARE_ERR_UNSUPPORTED;
    recorded_launch *launch = calloc(1, sizeof *launch);
    if (launch == NULL)
        return FLARE_ERR_NO_MEMORY;
    void **parameters = NULL;
    void **extra = NULL;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        /* Same layout for both (the _ptsz form only names its stream
         * differently, and the recorded stream handle is re-used as is). */
        const cuLaunchKernel_params *p = params;
        launch->function = p->f;
        launch->grid[0] = p->gridDimX, launch->grid[1] = p->gridDimY, launch->grid[2] = p->gridDimZ;
        launch->block[0] = p->blockDimX, launch->block[1] = p->blockDimY;
        launch->block[2] = p->blockDimZ;
        launch->shared_bytes = p->sharedMemBytes;
        parameters = p->kernelParams;
        extra = p->extra;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *p = params;
        if (p->config == NULL)
            break;
        launch->use_ex = 1;
        launch->function = p->f;
        launch->config = *p->config;
        if (p->config->numAttrs > 0) {
            launch->attributes = malloc(p->config->numAttrs * sizeof(CUlaunchAttribute));
            if (launch->attributes == NULL) {
                release_launch(launch);
                return FLARE_ERR_NO_MEMORY;
            }
            memcpy(launch->attributes, p->config->attrs,
                   p->config->numAttrs * sizeof(CUlaunchAttribute));
        }
        launch->config.attrs = launch->attributes;
        launch->config.hStream = stream;
        launch->grid[0] = p->config->gridDimX, launch->grid[1] = p->config->gridDimY;
        launch->grid[2] = p->config->gridDimZ;
        launch->block[0] = p->config->blockDimX, launch->block[1] = p->config->blockDimY;
        launch->block[2] = p->config->blockDimZ;
        parameters = p->kernelParams;
        extra = p->extra;
        break;
    }
    default:
        break;
    }
    launch->stream = stream;
    /* Packed arguments (extra) are copied as the buffer they are; anything
     * else in extra, or parameters with no layout, declines. */
    int copied = extra != NULL ? copy_packed(launch, extra) : copy_parameters(launch, parameters);
    if (launch->function == NULL || copied != FLARE_OK) {
        release_launch(launch);
        return FLARE_ERR_UNSUPPORTED;
    }
    *work = (replay_range_work){.kind = REPLAY_WORK_KERNEL,
                                .stream = launch->stream,
                                .reissue = reissue_launch,
                                .release = release_launch,
                                .data = launch};
    memcpy(work->grid, launch->grid, sizeof work->grid);
    memcpy(work->block, launch->block, sizeof work->block);
    return FLARE_OK;
}

/* ---- Copies and memsets ---- */

typedef struct recorded_copy {
    int is_memset;
    CUdeviceptr destination;
    CUdeviceptr source;        /* device source, or (CUdeviceptr)payload */
    size_t bytes;              /* copies: bytes; memsets: element count */
    unsigned int element_size; /* memsets: 1, 2 or 4 */
    unsigned int value;
    CUstream stream;         /* the private replay stream */
    unsigned char payload[]; /* host source bytes */
} recorded_copy;

static int reissue_copy(void *data)
{
    const recorded_copy *copy = data;
    CUresult result = CUDA_ERROR_NOT_SUPPORTED;
    internal_begin();
    if (!copy->is_memset) {
        if (driver->cuMemcpyAsync != NULL)
            result =
                driver->cuMemcpyAsync(copy->destination, copy->source, copy->bytes, copy->stream);
    } else if (copy->element_size == 1 && driver->cuMemsetD8Async != NULL) {
        result = driver->cuMemsetD8Async(copy->destination, (unsigned char)copy->value, copy->bytes,
                                         copy->stream);
    } else if (copy->element_size == 2 && driver->cuMemsetD16Async != NULL) {
        result = driver->cuMemsetD16Async(copy->destination, (unsigned short)copy->value,
                                          copy->bytes, copy->stream);
    } else if (copy->element_size == 4 && driver->cuMemsetD32Async != NULL) {
        result =
            driver->cuMemsetD32Async(copy->destination, copy->value, copy->bytes, copy->stream);
    }
    internal_end();
    if (result != CUDA_SUCCESS) {
        CORE_LOG_ONCE("cuda.span.copy", CORE_LOG_ERROR,
                      "range replay: re-issuing a copy or memset failed: %s",
                      cuda_driver_error_text(driver, result));
        return FLARE_ERR_BACKEND;
    }
    return FLARE_OK;
}

/* Whether a unified address is host memory (pageable host pointers are
 * unknown to the driver and answer an error: host too). */
static int is_host_pointer(CUdeviceptr pointer)
{
    if (driver->cuPointerGetAttribute == NULL)
        return 1;
    unsigned int type = 0;
    if (driver->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer) !=
        CUDA_SUCCESS)
        return 1;
    return type == CU_MEMORYTYPE_HOST;
}

static void record(int device, recorded_copy *copy)
{
    copy->stream = replay_stream_of != NULL ? replay_stream_of(device) : NULL;
    if (copy->stream == NULL) {
        free(copy);
        replay_range_decline(device, "no replay stream on this device");
        return;
    }
    replay_range_work work = {.kind = copy->is_memset ? REPLAY_WORK_MEMSET : REPLAY_WORK_COPY,
                              .stream = copy->stream,
                              .reissue = reissue_copy,
                              .release = free,
                              .data = copy};
    replay_range_record(device, &work);
}

/* Records a copy whose source is host memory (bytes copied now) or device
 * memory; a device-to-host copy declines the span. */
static void record_copy(int device, CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                        CUstream stream, int source_on_host, int destination_on_host)
{
    if (destination_on_host) {
        replay_range_decline(device,
                             "device-to-host copy inside the span (the host may act on it)");
        return;
    }
    recorded_copy *copy = calloc(1, sizeof *copy + (source_on_host ? bytes : 0));
    if (copy == NULL) {
        replay_range_decline(device, "out of host memory recording the span");
        return;
    }
    (void)stream; /* re-issued on the replay stream, in submission order */
    copy->destination = destination;
    copy->bytes = bytes;
    if (source_on_host) {
        memcpy(copy->payload, (const void *)(uintptr_t)source, bytes);
        copy->source = (CUdeviceptr)(uintptr_t)copy->payload;
    } else {
        copy->source = source;
    }
    record(device, copy);
}

static void record_memset(int device, CUdeviceptr destination, unsigned int value,
                          unsigned int element_size, size_t count, CUstream stream)
{
    recorded_copy *copy = calloc(1, sizeof *copy);
    if (copy == NULL) {
        replay_range_decline(device, "out of host memory recording the span");
        return;
    }
    copy->is_memset = 1;
    copy->destination = destination;
    copy->value = value;
    copy->element_size = element_size;
    copy->bytes = count;
    (void)stream; /* re-issued on the replay stream, in submission order */
    record(device, copy);
}

void cuda_range_replay_record_copy(CUpti_CallbackId id, const CUpti_CallbackData *call, int device)
{
    const void *params = call->functionParams;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds: {
        const cuMemcpyHtoD_v2_params *p = params;
        record_copy(device, p->dstDevice, (CUdeviceptr)(uintptr_t)p->srcHost, p->ByteCount, NULL, 1,
                    0);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
        const cuMemcpyHtoDAsync_v2_params *p = params;
        record_copy(device, p->dstDevice, (CUdeviceptr)(uintptr_t)p->srcHost, p->ByteCount,
                    p->hStream, 1, 0);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds: {
        const cuMemcpyDtoD_v2_params *p = params;
        record_copy(device, p->dstDevice, p->srcDevice, p->ByteCount, NULL, 0, 0);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz: {
        const cuMemcpyDtoDAsync_v2_params *p = params;
        record_copy(device, p->dstDevice, p->srcDevice, p->ByteCount, p->hStream, 0, 0);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds: {
        const cuMemcpy_params *p = params;
        record_copy(device, p->dst, p->src, p->ByteCount, NULL, is_host_pointer(p->src),
                    is_host_pointer(p->dst));
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
        const cuMemcpyAsync_params *p = params;
        record_copy(device, p->dst, p->src, p->ByteCount, p->hStream, is_host_pointer(p->src),
                    is_host_pointer(p->dst));
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
        replay_range_decline(device,
                             "device-to-host copy inside the span (the host may act on it)");
        return;
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds: {
        const cuMemsetD8_v2_params *p = params;
        record_memset(device, p->dstDevice, p->uc, 1, p->N, NULL);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz: {
        const cuMemsetD8Async_params *p = params;
        record_memset(device, p->dstDevice, p->uc, 1, p->N, p->hStream);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds: {
        const cuMemsetD16_v2_params *p = params;
        record_memset(device, p->dstDevice, p->us, 2, p->N, NULL);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz: {
        const cuMemsetD16Async_params *p = params;
        record_memset(device, p->dstDevice, p->us, 2, p->N, p->hStream);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds: {
        const cuMemsetD32_v2_params *p = params;
        record_memset(device, p->dstDevice, p->ui, 4, p->N, NULL);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz: {
        const cuMemsetD32Async_params *p = params;
        record_memset(device, p->dstDevice, p->ui, 4, p->N, p->hStream);
        return;
    }
    default: {
        char reason[160];
        snprintf(reason, sizeof reason,
                 "a copy or memset range replay does not record (driver callback %u: 2D, 3D, "
                 "array, peer or batched)",
                 (unsigned int)id);
        replay_range_decline(device, reason);
        return;
    }
    }
}
