/*
 * cuda_stub.c: stands in for the CUDA backend in builds made without the
 * CUDA headers, so `flare info` can say so instead of failing to link.
 */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_descriptor.h"
#include "backend/cuda/cuda_info.h"

void cuda_info_collect(cuda_info *info)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->driver_reason, sizeof(info->driver_reason),
             "this flare was built without the CUDA headers (no CUDA backend)");
    snprintf(info->cupti_reason, sizeof(info->cupti_reason), "%s", info->driver_reason);
}

int cuda_info_driver_present(char *reason, unsigned long reason_size)
{
    snprintf(reason, reason_size, "this flare was built without the CUDA backend");
    return 0;
}

const backend_descriptor *cuda_descriptor(void)
{
    return NULL; /* built without the CUDA headers: no CUDA backend */
}
