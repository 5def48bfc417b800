/*
 * cuda_replay_device.c: what the replay engine asks of a CUDA device (its
 * replay_device_ops table): drains polled with cuStreamQuery over a
 * registry of the program's contexts and streams, shadow memory, and
 * copies on flare's private non-blocking stream per device. The registry is
 * fed by CUPTI's resource callbacks (cuda_replay.c dispatches them here).
 *
 * Must never: block without a bound, hold the registry's lock while
 * waiting for the device, query a stream or context the driver has already
 * destroyed, or let its own driver calls be seen as the program's (each
 * one runs inside flare's internal bracket).
 */
#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_pm.h"
#include "backend/cuda/cuda_range_times.h"
#include "backend/cuda/cuda_replay_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "backend/cuda/cuda_rangeprof.h"
#include "core/clock.h"
#include "core/log.h"
#include "replay/replay.h"

#define CUDA_REPLAY_STREAMS_MAX  4096
#define CUDA_REPLAY_CONTEXTS_MAX 128
#define CUDA_PIN_WAIT_NS         1000000000ull /* a destroy waits this long for drains */
#define CUDA_DRAIN_BATCH         64

/* ---- Small helpers ---- */

static void pause_briefly(uint32_t round)
{
    /* Spin first (a restore of 64 MiB takes ~30 us: sleeping would halve its
     * bandwidth), then sleep in growing steps so a long wait costs no CPU. */
    if (round < 2000) {
        sched_yield();
        return;
    }
    struct timespec pause = {0, round < 20000 ? 10000 : 200000};
    nanosleep(&pause, NULL);
}

/* Whether work submitted to the stream is being captured into a graph
 * (it does not run, and querying the stream would invalidate the capture). */
bool cuda_replay_stream_capturing(CUstream stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return cuda_replay_driver.cuStreamIsCapturing != NULL &&
           cuda_replay_driver.cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Waits until a stream has no pending work, or the deadline. */
static int wait_stream(CUstream stream, uint64_t deadline_ns)
{
    if (cuda_replay_stream_capturing(stream))
        return FLARE_OK; /* nothing of it runs: nothing to wait for */
    for (uint32_t round = 0;; round++) {
        CUresult result = cuda_replay_driver.cuStreamQuery(stream);
        if (result == CUDA_SUCCESS)
            return FLARE_OK;
        if (result != CUDA_ERROR_NOT_READY) {
            CORE_LOG_ONCE("cuda.replay.stream_query", CORE_LOG_WARNING,
                          "replay: cuStreamQuery failed: %s",
                          cuda_driver_error_text(&cuda_replay_driver, result));
            return FLARE_ERR_BACKEND;
        }
        if (core_now_ns() >= deadline_ns)
            return FLARE_ERR_TIMEOUT;
        pause_briefly(round);
    }
}

static uint64_t deadline_after(uint64_t timeout_ns)
{
    uint64_t now = core_now_ns();
    return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

/* The device ordinal of a context (-1 when unknown). */
int cuda_replay_device_of(CUcontext context)
{
    uint32_t device = 0;
    if (context != NULL && cuda_replay_get_device_id != NULL &&
        cuda_replay_get_device_id(context, &device) == CUPTI_SUCCESS && device < REPLAY_DEVICE_MAX)
        return (int)device;
    CUdevice current;
    if (cuda_replay_driver.cuCtxGetDevice(&current) == CUDA_SUCCESS && current >= 0 &&
        current < REPLAY_DEVICE_MAX)
        return (int)current;
    return -1;
}

/* ---- Contexts and streams (for device drains) ----
 *
 * A drain copies (pins) a batch of entries under the lock, then polls them
 * without it. A destroy callback marks its entry dead under the lock and
 * then waits, bounded, until no drain has it pinned: so a drain never
 * queries a stream or context the driver has already destroyed. */

typedef struct cuda_stream_slot {
    CUstream stream;
    CUcontext context;
    int device;
    int live;
    _Atomic int pins;
} cuda_stream_slot;

typedef struct cuda_context_slot {
    CUcontext context;
    int device;
    int live;
    _Atomic int pins;
} cuda_context_slot;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_stream_slot stream_slots[CUDA_REPLAY_STREAMS_MAX];
static size_t stream_slots_used; /* high-water mark */
static cuda_context_slot context_slots[CUDA_REPLAY_CONTEXTS_MAX];
static size_t context_slots_used;
static _Atomic int registry_overflowed[REPLAY_DEVICE_MAX];

static void wait_unpinned(_Atomic int *pins, const char *what)
{
    uint64_t deadline = deadline_after(CUDA_PIN_WAIT_NS);
    for (uint32_t round = 0; atomic_load(pins) > 0; round++) {
        if (core_now_ns() >= deadline) {
            CORE_LOG_ONCE("cuda.replay.pin_wait", CORE_LOG_WARNING,
                          "replay: a %s was destroyed while a drain still polled it (waited 1 s)",
                          what);
            return;
        }
        pause_briefly(round);
    }
}

void cuda_replay_stream_created(CUcontext context, CUstream stream)
{
    int device = cuda_replay_device_of(context);
    if (device < 0)
        return;
    pthread_mutex_lock(&registry_lock);
    size_t free_slot = stream_slots_used;
    for (size_t i = 0; i < stream_slots_used; i++)
        if (!stream_slots[i].live && atomic_load(&stream_slots[i].pins) == 0) {
            free_slot = i;
            break;
        }
    if (free_slot < CUDA_REPLAY_STREAMS_MAX) {
        cuda_stream_slot *slot = &stream_slots[free_slot];
        slot->stream = stream;
        slot->context = context;
        slot->device = device;
        slot->live = 1;
        if (free_slot == stream_slots_used)
            stream_slots_used++;
    } else {
        atomic_store(&registry_overflowed[device], 1);
    }
    pthread_mutex_unlock(&registry_lock);
    if (free_slot >= CUDA_REPLAY_STREAMS_MAX)
        CORE_LOG_ONCE("cuda.replay.streams_full", CORE_LOG_WARNING,
                      "replay: more than %d live streams; replays on device %d are declined",
                      CUDA_REPLAY_STREAMS_MAX, device);
}

void cuda_replay_stream_destroying(CUstream stream)
{
    cuda_stream_slot *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < stream_slots_used; i++)
        if (stream_slots[i].live && stream_slots[i].stream == stream) {
            stream_slots[i].live = 0;
            found = &stream_slots[i];
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    if (found != NULL)
        wait_unpinned(&found->pins, "stream");
}

void cuda_replay_context_created(CUcontext context)
{
    int device = cuda_replay_device_of(context);
    if (device < 0)
        return;
    pthread_mutex_lock(&registry_lock);
    size_t free_slot = context_slots_used;
    for (size_t i = 0; i < context_slots_used; i++)
        if (!context_slots[i].live && atomic_load(&context_slots[i].pins) == 0) {
            free_slot = i;
            break;
        }
    if (free_slot < CUDA_REPLAY_CONTEXTS_MAX) {
        context_slots[free_slot].context = context;
        context_slots[free_slot].device = device;
        context_slots[free_slot].live = 1;
        if (free_slot == context_slots_used)
            context_slots_used++;
    } else {
        atomic_store(&registry_overflowed[device], 1);
    }
    pthread_mutex_unlock(&registry_lock);
    /* The measuring method's early set-up: PM sampling's or the range
     * profiler's (which returns under PM: it would hold the counters). */
    replay_method_settings method;
    replay_method_current(&method);
    if (method.method == REPLAY_METHOD_PM && replay_configured())
        cuda_pm_replay_context_created(device);
    cuda_rangeprof_context_created(context, device);
}

void cuda_replay_context_destroying(CUcontext context)
{
    cuda_replay_forget_cached_context(context);
    cuda_context_slot *found = NULL;
    cuda_stream_slot *streams[CUDA_DRAIN_BATCH];
    size_t stream_count = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < context_slots_used; i++)
        if (context_slots[i].live && context_slots[i].context == context) {
            context_slots[i].live = 0;
            found = &context_slots[i];
        }
    for (size_t i = 0; i < stream_slots_used; i++)
        if (stream_slots[i].live && stream_slots[i].context == context) {
            stream_slots[i].live = 0;
            if (stream_count < CUDA_DRAIN_BATCH)
                streams[stream_count++] = &stream_slots[i];
        }
    pthread_mutex_unlock(&registry_lock);
    if (found != NULL)
        wait_unpinned(&found->pins, "context");
    for (size_t i = 0; i < stream_count; i++)
        wait_unpinned(&streams[i]->pins, "stream");
}

/* ---- Device operations for the engine ---- */

static int op_stream_drain(void *stream, uint64_t timeout_ns)
{
    return wait_stream((CUstream)stream, deadline_after(timeout_ns));
}

static int drain_contexts(int device, uint64_t deadline)
{
    /* The legacy NULL stream of each context: not reported as a created
     * stream, queried with its context current. */
    for (size_t start = 0;; start += CUDA_DRAIN_BATCH) {
        cuda_context_slot *batch[CUDA_DRAIN_BATCH];
        size_t count = 0;
        pthread_mutex_lock(&registry_lock);
        size_t end = context_slots_used;
        for (size_t i = start; i < end && i < start + CUDA_DRAIN_BATCH; i++)
            if (context_slots[i].live && context_slots[i].device == device) {
                atomic_fetch_add(&context_slots[i].pins, 1);
                batch[count++] = &context_slots[i];
            }
        pthread_mutex_unlock(&registry_lock);
        int status = FLARE_OK;
        for (size_t i = 0; i < count; i++) {
            if (status == FLARE_OK &&
                cuda_replay_driver.cuCtxPushCurrent(batch[i]->context) == CUDA_SUCCESS) {
                status = wait_stream(CU_STREAM_LEGACY, deadline);
                CUcontext popped;
                cuda_replay_driver.cuCtxPopCurrent(&popped);
            }
            atomic_fetch_sub(&batch[i]->pins, 1);
        }
        if (status != FLARE_OK)
            return status;
        if (start + CUDA_DRAIN_BATCH >= end)
            return FLARE_OK;
    }
}

static int op_device_drain(int device, uint64_t timeout_ns)
{
    if (device < 0 || device >= REPLAY_DEVICE_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (atomic_load(&registry_overflowed[device]))
        return FLARE_ERR_FULL;
    uint64_t deadline = deadline_after(timeout_ns);
    cuda_replay_internal_begin();
    int status = FLARE_OK;
    for (size_t start = 0; status == FLARE_OK; start += CUDA_DRAIN_BATCH) {
        cuda_stream_slot *batch[CUDA_DRAIN_BATCH];
        size_t count = 0;
        pthread_mutex_lock(&registry_lock);
        size_t end = stream_slots_used;
        for (size_t i = start; i < end && i < start + CUDA_DRAIN_BATCH; i++)
            if (stream_slots[i].live && stream_slots[i].device == device) {
                atomic_fetch_add(&stream_slots[i].pins, 1);
                batch[count++] = &stream_slots[i];
            }
        pthread_mutex_unlock(&registry_lock);
        for (size_t i = 0; i < count; i++) {
            if (status == FLARE_OK) {
                status = wait_stream(batch[i]->stream, deadline);
                /* A stream whose context failed cannot progress: not stuck. */
                if (status == FLARE_ERR_BACKEND)
                    status = FLARE_OK;
            }
            atomic_fetch_sub(&batch[i]->pins, 1);
        }
        if (start + CUDA_DRAIN_BATCH >= end)
            break;
    }
    if (status == FLARE_OK)
        status = drain_contexts(device, deadline);
    cuda_replay_internal_end();
    return status;
}

static _Atomic(CUstream) copy_streams[REPLAY_DEVICE_MAX];

/* flare's own non-blocking stream on the device (in the current context):
 * shadow copies never wait behind, nor hold up, the program's streams.
 * Made with no lock held and published with a compare-and-swap: a lock
 * shared by every device, held across cuStreamCreate (which CUPTI sees),
 * could tie one device's first replay to another device's replay inside
 * CUPTI. */
CUstream cuda_replay_copy_stream(int device)
{
    CUstream stream = atomic_load_explicit(&copy_streams[device], memory_order_acquire);
    if (stream != NULL)
        return stream;
    CUstream created = NULL;
    CUresult result = cuda_replay_driver.cuStreamCreate(&created, CU_STREAM_NON_BLOCKING);
    if (result != CUDA_SUCCESS) {
        CORE_LOG_ONCE("cuda.replay.copy_stream", CORE_LOG_WARNING,
                      "replay: cuStreamCreate for copies failed: %s",
                      cuda_driver_error_text(&cuda_replay_driver, result));
        return NULL;
    }
    CUstream expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&copy_streams[device], &expected, created,
                                                memory_order_acq_rel, memory_order_acquire))
        return created;
    /* Another thread published one first (replays on one device are
     * serialised, so this is rare): use it, drop ours. */
    if (cuda_replay_driver.cuStreamDestroy != NULL)
        cuda_replay_driver.cuStreamDestroy(created);
    return expected;
}

static int op_shadow_alloc(int device, bool on_device, size_t bytes, void **out)
{
    cuda_replay_internal_begin();
    /* The copy stream is made here, before the engine times the snapshot. */
    if (device >= 0 && device < REPLAY_DEVICE_MAX)
        cuda_replay_copy_stream(device);
    CUresult result;
    if (on_device) {
        CUdeviceptr pointer = 0;
        result = cuda_replay_driver.cuMemAlloc(&pointer, bytes);
        *out = (void *)(uintptr_t)pointer;
    } else {
        result = cuda_replay_driver.cuMemAllocHost(out, bytes);
    }
    cuda_replay_internal_end();
    if (result == CUDA_SUCCESS)
        return FLARE_OK;
    *out = NULL;
    return result == CUDA_ERROR_OUT_OF_MEMORY ? FLARE_ERR_NO_MEMORY : FLARE_ERR_BACKEND;
}

static void op_shadow_free(int device, bool on_device, void *pointer)
{
    (void)device;
    if (pointer == NULL)
        return;
    cuda_replay_internal_begin();
    if (on_device)
        cuda_replay_driver.cuMemFree((CUdeviceptr)(uintptr_t)pointer);
    else
        cuda_replay_driver.cuMemFreeHost(pointer);
    cuda_replay_internal_end();
}

static int op_copy(int device, void *destination, const void *source, size_t bytes,
                   uint64_t timeout_ns)
{
    if (device < 0 || device >= REPLAY_DEVICE_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    uint64_t deadline = deadline_after(timeout_ns);
    cuda_replay_internal_begin();
    int status = FLARE_ERR_BACKEND;
    CUstream stream = cuda_replay_copy_stream(device);
    if (stream != NULL) {
        /* Unified addressing: one call for device, managed and pinned host. */
        CUresult result = cuda_replay_driver.cuMemcpyAsync(
            (CUdeviceptr)(uintptr_t)destination, (CUdeviceptr)(uintptr_t)source, bytes, stream);
        if (result == CUDA_SUCCESS)
            status = wait_stream(stream, deadline);
        else
            CORE_LOG_ONCE("cuda.replay.copy", CORE_LOG_WARNING,
                          "replay: cuMemcpyAsync of %zu bytes failed: %s", bytes,
                          cuda_driver_error_text(&cuda_replay_driver, result));
    }
    cuda_replay_internal_end();
    return status;
}

/* Issues every copy on the device's private stream, then waits once: one
 * completion wait per restore instead of one per allocation, which is what
 * kept restores of many allocations far under copy bandwidth. */
static int op_copy_batch(int device, const replay_copy *copies, size_t count, uint64_t timeout_ns,
                         size_t *failed_index)
{
    *failed_index = count;
    if (device < 0 || device >= REPLAY_DEVICE_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    uint64_t deadline = deadline_after(timeout_ns);
    cuda_replay_internal_begin();
    int status = FLARE_ERR_BACKEND;
    CUstream stream = cuda_replay_copy_stream(device);
    if (stream != NULL) {
        status = FLARE_OK;
        for (size_t index = 0; index < count; index++) {
            CUresult result = cuda_replay_driver.cuMemcpyAsync(
                (CUdeviceptr)(uintptr_t)copies[index].destination,
                (CUdeviceptr)(uintptr_t)copies[index].source, copies[index].bytes, stream);
            if (result != CUDA_SUCCESS) {
                CORE_LOG_ONCE("cuda.replay.copy_batch", CORE_LOG_WARNING,
                              "replay: cuMemcpyAsync of %zu bytes failed: %s", copies[index].bytes,
                              cuda_driver_error_text(&cuda_replay_driver, result));
                *failed_index = index;
                status = FLARE_ERR_BACKEND;
                break;
            }
        }
        /* Even after a failed issue, the copies already issued must finish
         * before anyone reads the memory they write. */
        int waited = wait_stream(stream, deadline);
        if (status == FLARE_OK)
            status = waited;
    }
    cuda_replay_internal_end();
    return status;
}

/* Replay became configured (a tool, a selection, a span marked in code):
 * copies and memsets must be gated and recorded from now on, not from the
 * next launch. */
static void op_on_configured(void)
{
    if (cuda_replay_attached)
        cuda_replay_enable_gates();
}

static int op_current_device(void)
{
    CUdevice device = -1;
    if (cuda_replay_driver.cuCtxGetDevice == NULL)
        return -1;
    cuda_replay_internal_begin();
    CUresult result = cuda_replay_driver.cuCtxGetDevice(&device);
    cuda_replay_internal_end();
    return result == CUDA_SUCCESS && device >= 0 && device < REPLAY_DEVICE_MAX ? (int)device : -1;
}

static size_t op_device_memory_free(int device)
{
    (void)device;
    size_t free_bytes = 0, total_bytes = 0;
    if (cuda_replay_driver.cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS)
        return 0;
    return free_bytes;
}

static const replay_device_ops cuda_ops = {
    .name = "cuda",
    .stream_drain = op_stream_drain,
    .device_drain = op_device_drain,
    .shadow_alloc = op_shadow_alloc,
    .shadow_free = op_shadow_free,
    .copy = op_copy,
    .device_memory_free = op_device_memory_free,
    .copy_batch = op_copy_batch,
    .current_device = op_current_device,
    .on_configured = op_on_configured,
    .kernel_times_begin = cuda_range_times_begin,
    .kernel_times_end = cuda_range_times_end,
    .pm_hardware = cuda_pm_replay_hardware,
};

/* Set when attach got far enough to offer the operations (the point where
 * it installed them before the backend descriptor existed). */
static int ops_offered;

void cuda_replay_offer_device_ops(void)
{
    ops_offered = 1;
}

const replay_device_ops *cuda_replay_device_ops(void)
{
    return ops_offered ? &cuda_ops : NULL;
}
