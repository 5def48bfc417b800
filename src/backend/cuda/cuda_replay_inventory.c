/*
 * cuda_replay_inventory.c: the allocation inventory's CUDA side: what each
 * device allocation entry point adds to the engine's inventory when it
 * returns (device, pitched, stream-ordered, pool, managed and mapped
 * memory), and the address each free or unmap takes out. Module-scope
 * __device__ variables join the inventory from cuda_replay_modules.c.
 *
 * Must never add an allocation whose call failed (a replay would restore
 * memory the program does not have), or block: these are the program's
 * allocation calls.
 */
#include "backend/cuda/cuda_replay_internal.h"

#include <string.h>

#include "replay/replay.h"

/* ---- Allocations ---- */

void cuda_replay_allocation_returned(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (cuda_replay_result_of(call) != CUDA_SUCCESS)
        return;
    const void *params = call->functionParams;
    int device = cuda_replay_device_of(call->context);
    if (device < 0)
        return;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        const cuMemAlloc_v2_params *p = params;
        replay_inventory_add(device, (uintptr_t)*p->dptr, p->bytesize, REPLAY_ALLOCATION_DEVICE);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *p = params;
        replay_inventory_add(device, (uintptr_t)*p->dptr, *p->pPitch * p->Height,
                             REPLAY_ALLOCATION_DEVICE);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
        const cuMemAllocAsync_params *p = params;
        replay_inventory_add(device, (uintptr_t)*p->dptr, p->bytesize, REPLAY_ALLOCATION_DEVICE);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
        const cuMemAllocFromPoolAsync_params *p = params;
        replay_inventory_add(device, (uintptr_t)*p->dptr, p->bytesize, REPLAY_ALLOCATION_DEVICE);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        const cuMemAllocManaged_params *p = params;
        replay_inventory_add(device, (uintptr_t)*p->dptr, p->bytesize, REPLAY_ALLOCATION_MANAGED);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        /* The mapped virtual range is what kernels address; its owner is the
         * physical allocation's location. */
        const cuMemMap_params *p = params;
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof(prop));
        if (cuda_replay_driver.cuMemGetAllocationPropertiesFromHandle != NULL &&
            cuda_replay_driver.cuMemGetAllocationPropertiesFromHandle(&prop, p->handle) ==
                CUDA_SUCCESS &&
            prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop.location.id >= 0 &&
            prop.location.id < REPLAY_DEVICE_MAX)
            device = prop.location.id;
        replay_inventory_add(device, (uintptr_t)p->ptr, p->size, REPLAY_ALLOCATION_MAPPED);
        break;
    }
    default:
        break;
    }
}

uintptr_t cuda_replay_freed_address(CUpti_CallbackId id, const void *params)
{
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        return (uintptr_t)((const cuMemFree_v2_params *)params)->dptr;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
        return (uintptr_t)((const cuMemFreeAsync_params *)params)->dptr;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
        return (uintptr_t)((const cuMemUnmap_params *)params)->ptr;
    default:
        return 0;
    }
}
