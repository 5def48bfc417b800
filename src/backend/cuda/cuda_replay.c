/*
 * cuda_replay.c: the CUDA side of kernel replay (cuda_replay.h): attach,
 * the driver callback ids replay watches, flare's internal bracket, and the
 * dispatch of CUPTI's driver and resource callbacks.
 *
 * From CUPTI callbacks: the allocation inventory (every device allocation
 * path, frees, module-scope __device__ variables), the launch bracket
 * (replay_launch_begin at API_ENTER, replay_launch_end at API_EXIT, where
 * the whole pass loop runs and relaunches from the saved kernelParams), the
 * gate around copies, memsets and frees, and a stream registry for drains.
 * For the engine: drains polled with cuStreamQuery, shadow memory, and
 * copies on a private non-blocking stream, every wait bounded.
 *
 * One file per concept, sharing state through cuda_replay_internal.h:
 * cuda_replay_device.c (the context and stream registry, drains, shadow
 * memory and copies: the engine's device operations),
 * cuda_replay_modules.c (module-scope __device__ variables),
 * cuda_replay_inventory.c (what allocations add and frees remove) and
 * cuda_replay_launch.c (the gate, the launch bracket, and flare's own work
 * kept out of the program's records).
 *
 * Must never: block without a bound, hold the stream registry's lock while
 * waiting for the device, record flare's own driver calls (shadows,
 * copies, relaunches) as the program's, or crash the program on a driver
 * or CUPTI error (the "replay" capability is degraded instead).
 */
#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_replay_internal.h"
#include "backend/cuda/cuda_range_replay.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend/cuda/cuda_callback_ids.h"
#include "backend/cuda/cuda_rangeprof.h"
#include "core/capability.h"
#include "core/log.h"
#include "replay/replay.h"
#include "rules/rule.h"

cuda_driver_api cuda_replay_driver;
static const cuda_cupti_api *cupti;
static CUpti_SubscriberHandle replay_subscriber;
CUptiResult (*cuda_replay_get_device_id)(CUcontext context, uint32_t *device);
CUptiResult (*cuda_replay_get_stream_id)(CUcontext context, CUstream stream, uint8_t per_thread,
                                         uint32_t *id);
_Atomic int cuda_replay_gates_enabled;
int cuda_replay_attached;
_Atomic int cuda_replay_globals_early;

/* Depth of flare's own driver calls on this thread (see cuda_replay_internal). */
static _Thread_local int internal_depth;

bool cuda_replay_internal(void)
{
    return internal_depth > 0;
}

/* flare's internal bracket: the other cuda_replay_*.c files and cuda_range_replay.c
 * (handed them at attach) put their own driver calls inside it. */
void cuda_replay_internal_begin(void)
{
    internal_depth++;
}

void cuda_replay_internal_end(void)
{
    internal_depth--;
}

/* ---- Callback ids ---- */

static const CUpti_CallbackId allocation_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
};

static const CUpti_CallbackId free_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};

/* The program asking for a __device__ variable's address: from then on
 * code outside the variable's module may write it, so its module is
 * resolved whether or not one of its kernels has launched. */
static const CUpti_CallbackId global_query_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryGetGlobal,
};

static const CUpti_CallbackId launch_ids[] = {CUDA_LAUNCH_IDS(CUDA_CALLBACK_ID)};

/* Every driver entry point that copies or sets memory (cuda_callback_ids.h). */
static const CUpti_CallbackId copy_ids[] = {CUDA_COPY_IDS(CUDA_CALLBACK_ID)};

#define CUDA_CBID_TABLE 1024
/* What each driver callback id is to replay (filled once at attach). */
enum { KIND_NONE = 0, KIND_ALLOCATION, KIND_FREE, KIND_LAUNCH, KIND_COPY, KIND_GLOBAL_QUERY };
static unsigned char cbid_kind[CUDA_CBID_TABLE];

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

static void classify(const CUpti_CallbackId *ids, size_t count, unsigned char kind)
{
    for (size_t i = 0; i < count; i++)
        if (ids[i] < CUDA_CBID_TABLE)
            cbid_kind[ids[i]] = kind;
}

bool cuda_replay_is_launch(CUpti_CallbackId id)
{
    for (size_t i = 0; i < COUNT_OF(launch_ids); i++)
        if (launch_ids[i] == id)
            return true;
    return false;
}

static int enable_ids(const CUpti_CallbackId *ids, size_t count)
{
    int enabled = 0;
    for (size_t i = 0; i < count; i++)
        enabled += cupti->cuptiEnableCallback(1, replay_subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                              ids[i]) == CUPTI_SUCCESS;
    return enabled;
}

/* Copies and memsets are the programs' most frequent calls after launches:
 * their callbacks are switched on only once replay is configured, or a
 * launch storm needs them counted (cuda_replay_watch_copies). Once per
 * process, under a lock (never a hot path: callers test cuda_replay_gates_enabled
 * first); returns how many entry points are watched. */
static pthread_mutex_t gates_lock = PTHREAD_MUTEX_INITIALIZER;
static int gates_watched;

int cuda_replay_enable_gates(void)
{
    pthread_mutex_lock(&gates_lock);
    if (!atomic_load(&cuda_replay_gates_enabled)) {
        gates_watched = enable_ids(copy_ids, COUNT_OF(copy_ids));
        core_log(gates_watched == (int)COUNT_OF(copy_ids) ? CORE_LOG_INFO : CORE_LOG_WARNING,
                 "%d of %zu copy and memset entry points watched (replay gate, launch-storm "
                 "copy count)",
                 gates_watched, COUNT_OF(copy_ids));
        atomic_store(&cuda_replay_gates_enabled, 1);
    }
    int watched = gates_watched;
    pthread_mutex_unlock(&gates_lock);
    return watched;
}

bool cuda_replay_is_copy(CUpti_CallbackId id)
{
    return id < CUDA_CBID_TABLE && cbid_kind[id] == KIND_COPY;
}

int cuda_replay_watch_copies(void)
{
    if (cupti == NULL || replay_subscriber == NULL)
        return FLARE_ERR_STATE;
    /* Every entry point or none: a copy through an unwatched one would go
     * neither timed nor counted. */
    return cuda_replay_enable_gates() == (int)COUNT_OF(copy_ids) ? FLARE_OK : FLARE_ERR_BACKEND;
}

/* ---- Range replay hooks (cuda_range_replay.c) ---- */

static CUstream span_replay_stream(int device)
{
    internal_depth++;
    CUstream stream = cuda_replay_copy_stream(device);
    internal_depth--;
    return stream;
}

/* ---- Dispatch ---- */

const char *cuda_replay_requested(void)
{
    static const char *const names[] = {"FLARE_REPLAY_KERNEL",   "FLARE_REPLAY_LAUNCH",
                                        "FLARE_REPLAY_EVERY",    "FLARE_REPLAY_RANGE",
                                        "FLARE_REPLAY_METRICS",  "FLARE_REPLAY_SET",
                                        "FLARE_REPLAY_RANGE_API"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *value = getenv(names[i]);
        if (value != NULL && value[0] != '\0')
            return names[i];
    }
    return NULL;
}

void cuda_replay_on_driver(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (!cuda_replay_attached || internal_depth > 0 || id >= CUDA_CBID_TABLE)
        return;
    switch (cbid_kind[id]) {
    case KIND_LAUNCH:
        cuda_replay_launch_call(id, call);
        break;
    case KIND_COPY:
        /* Recorded at ENTER, but it never ran: the span cannot re-issue it. */
        if (call->callbackSite == CUPTI_API_EXIT && replay_configured() &&
            cuda_replay_result_of(call) != CUDA_SUCCESS) {
            int device = cuda_replay_device_of(call->context);
            if (device >= 0 && replay_range_active_on(device))
                replay_range_decline(device, "a copy or memset inside the span failed");
        }
        cuda_replay_gate_call(call);
        /* With the reader gate held: a span recording on the device records
         * the copy or memset before it runs. */
        if (call->callbackSite == CUPTI_API_ENTER && replay_configured()) {
            int device = cuda_replay_device_of(call->context);
            if (device >= 0 && replay_range_claims(device))
                cuda_range_replay_record_copy(id, call, device);
        }
        break;
    case KIND_ALLOCATION:
        /* Under the reader gate (while replay is configured): an allocation
         * is either in the inventory before a span's snapshot, or made while
         * the span records, which declines it. */
        if (call->callbackSite == CUPTI_API_ENTER) {
            cuda_replay_gate_call(call);
            int device = replay_configured() ? cuda_replay_device_of(call->context) : -1;
            if (device >= 0 && replay_range_active_on(device))
                replay_range_decline(device, "memory allocated inside the span");
        } else {
            cuda_replay_allocation_returned(id, call);
            cuda_replay_gate_call(call);
        }
        break;
    case KIND_GLOBAL_QUERY:
        cuda_replay_global_queried(id, call);
        break;
    case KIND_FREE:
        if (call->callbackSite == CUPTI_API_ENTER && replay_configured()) {
            int device = cuda_replay_device_of(call->context);
            if (device >= 0 && replay_range_active_on(device))
                replay_range_decline(device, "memory freed inside the span");
        }
        /* A free waits at the gate: a replay must not restore into memory
         * freed (and perhaps handed out again) under it. */
        if (call->callbackSite == CUPTI_API_EXIT && cuda_replay_result_of(call) == CUDA_SUCCESS)
            replay_inventory_remove(cuda_replay_freed_address(id, call->functionParams));
        cuda_replay_gate_call(call);
        break;
    default:
        break;
    }
}

void cuda_replay_on_resource(CUpti_CallbackId id, const void *data)
{
    if (!cuda_replay_attached)
        return;
    const CUpti_ResourceData *resource = data;
    /* A module loaded by flare's own call (a variable looked up, a function
     * loaded ahead of its launch) is still the program's module. */
    if (internal_depth > 0 && id != CUPTI_CBID_RESOURCE_MODULE_LOADED &&
        id != CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
        return;
    switch (id) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        cuda_replay_context_created(resource->context);
        break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        cuda_replay_context_destroying(resource->context);
        break;
    case CUPTI_CBID_RESOURCE_STREAM_CREATED:
        cuda_replay_stream_created(resource->context, resource->resourceHandle.stream);
        break;
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING:
        cuda_replay_stream_destroying(resource->resourceHandle.stream);
        break;
    case CUPTI_CBID_RESOURCE_MODULE_LOADED:
        cuda_replay_module_loaded(resource->context, resource->resourceDescriptor);
        break;
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
        cuda_replay_module_unloading(resource->resourceDescriptor);
        break;
    default:
        break;
    }
}

/* ---- Attach ---- */

static int any_replay_variable(void)
{
    static const char *const names[] = {"FLARE_REPLAY_KERNEL",   "FLARE_REPLAY_LAUNCH",
                                        "FLARE_REPLAY_EVERY",    "FLARE_REPLAY_METRICS",
                                        "FLARE_REPLAY_SET",      "FLARE_REPLAY_RANGE",
                                        "FLARE_REPLAY_RANGE_API"};
    for (size_t i = 0; i < COUNT_OF(names); i++)
        if (getenv(names[i]) != NULL)
            return 1;
    return 0;
}

int cuda_replay_attach(const cuda_cupti_api *cupti_api, CUpti_SubscriberHandle subscriber)
{
    char reason[512];
    if (cuda_load_driver(&cuda_replay_driver, reason, sizeof(reason)) != 0) {
        core_capability_set("replay", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return 0;
    }
    const char *missing = NULL;
#define NEED(field)                                                                                \
    do {                                                                                           \
        if (cuda_replay_driver.field == NULL && missing == NULL)                                   \
            missing = #field;                                                                      \
    } while (0)
    NEED(cuCtxGetCurrent);
    NEED(cuCtxGetDevice);
    NEED(cuCtxPushCurrent);
    NEED(cuCtxPopCurrent);
    NEED(cuStreamCreate);
    NEED(cuStreamQuery);
    NEED(cuMemAlloc);
    NEED(cuMemFree);
    NEED(cuMemAllocHost);
    NEED(cuMemFreeHost);
    NEED(cuMemGetInfo);
    NEED(cuMemcpyAsync);
    NEED(cuLaunchKernel);
    NEED(cuModuleGetGlobal);
#undef NEED
    if (missing != NULL) {
        core_capability_set("replay", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "libcuda.so.1 lacks %s (driver too old?)", missing);
        return 0;
    }
    cupti = cupti_api;
    replay_subscriber = subscriber;
    *(void **)&cuda_replay_get_device_id = dlsym(cupti->library, "cuptiGetDeviceId");
    *(void **)&cuda_replay_get_stream_id = dlsym(cupti->library, "cuptiGetStreamIdEx");
    classify(allocation_ids, COUNT_OF(allocation_ids), KIND_ALLOCATION);
    classify(free_ids, COUNT_OF(free_ids), KIND_FREE);
    classify(launch_ids, COUNT_OF(launch_ids), KIND_LAUNCH);
    classify(copy_ids, COUNT_OF(copy_ids), KIND_COPY);
    classify(global_query_ids, COUNT_OF(global_query_ids), KIND_GLOBAL_QUERY);
    cuda_replay_offer_device_ops();
    cuda_range_replay_attach(&cuda_replay_driver, cuda_replay_internal_begin,
                             cuda_replay_internal_end, span_replay_stream);
    /* Allocations and resources are tracked from the start whether or not
     * replay is configured yet: a tool registered later must not replay
     * over an inventory that missed the program's first allocations. They
     * are rare calls, never on a launch path. */
    int enabled = enable_ids(allocation_ids, COUNT_OF(allocation_ids)) +
                  enable_ids(free_ids, COUNT_OF(free_ids));
    enable_ids(global_query_ids, COUNT_OF(global_query_ids));
    CUptiResult result = cupti->cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE);
    if (result != CUPTI_SUCCESS || enabled == 0) {
        core_capability_set("replay", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "CUPTI resource or allocation callbacks unavailable: %s",
                            cuda_cupti_error_text(cupti, result));
        return 0;
    }
    cuda_replay_globals_early =
        (rules_list_actions(getenv("FLARE_DEEP_WHEN")) & RULES_ACTIONS_RANGE) != 0;
    if (cuda_replay_globals_early)
        cuda_ready_alternate_start();
    cuda_replay_attached = 1;
    if (replay_configured() || any_replay_variable())
        cuda_replay_enable_gates();
    cuda_rangeprof_install(cupti, &cuda_replay_driver);
    core_capability_set("replay", replay_configured() || any_replay_variable(),
                        CORE_CAPABILITY_ACTIVE,
                        "CUDA: %d allocation entry points tracked, launches bracketed, copies "
                        "and memsets gated while replay is configured",
                        enabled);
    return enabled;
}
