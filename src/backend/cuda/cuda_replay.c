/*
 * cuda_replay.c: the CUDA side of kernel replay (cuda_replay.h).
 *
 * From CUPTI callbacks: the allocation inventory (every device allocation
 * path, frees, module-scope __device__ variables), the launch bracket
 * (replay_launch_begin at API_ENTER, replay_launch_end at API_EXIT, where
 * the whole pass loop runs and relaunches from the saved kernelParams), the
 * gate around copies, memsets and frees, and a stream registry for drains.
 * For the engine: drains polled with cuStreamQuery, shadow memory, and
 * copies on a private non-blocking stream, every wait bounded.
 *
 * Must never: block without a bound, hold the stream registry's lock while
 * waiting for the device, record flare's own driver calls (shadows,
 * copies, relaunches) as the program's, or crash the program on a driver
 * or CUPTI error (the "replay" capability is degraded instead).
 */
#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_span.h"

#include <cupti_activity.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_cubin.h"
#include "backend/cuda/cuda_rangeprof.h"
#include "backend/cuda/cuda_trace.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "replay/replay.h"

#define CUDA_REPLAY_STREAMS_MAX  4096
#define CUDA_REPLAY_CONTEXTS_MAX 128
#define CUDA_REPLAY_MODULES_MAX  1024
#define CUDA_LAUNCH_DEPTH_MAX    4
#define CUDA_PIN_WAIT_NS         1000000000ull /* a destroy waits this long for drains */
#define CUDA_DRAIN_BATCH         64

static cuda_driver_api driver;
static const cuda_cupti_api *cupti;
static CUpti_SubscriberHandle replay_subscriber;
static CUptiResult (*get_device_id)(CUcontext context, uint32_t *device);
static CUptiResult (*get_stream_id)(CUcontext context, CUstream stream, uint8_t per_thread,
                                    uint32_t *id);
static _Atomic int gates_enabled;
static int attached;

/* Depth of flare's own driver calls on this thread (see cuda_replay_internal). */
static _Thread_local int internal_depth;

bool cuda_replay_internal(void)
{
    return internal_depth > 0;
}

/* ---- flare's own work, kept out of the program's records ---- */

/* Correlation ids of flare's internal driver calls, by id modulo the table
 * size. Ids are sequential, so an entry is overwritten only after 65,536
 * later internal calls: far longer than an activity buffer waits. */
#define INTERNAL_WORK_SLOTS 65536u
static _Atomic uint32_t internal_work_ids[INTERNAL_WORK_SLOTS];
static _Atomic int internal_work_seen;
static _Atomic uint64_t internal_work_skipped;

/* Driver calls flare makes inside the callback of a program's launch carry
 * that launch's correlation id (seen on the H200: marking them internal
 * dropped the program's own kernel record, for every replayed launch and
 * for first launches from modules with __device__ variables). Such ids go
 * here instead: their kernel records are the launch's passes, of which the
 * first is kept as the program's; their copies are flare's restores. */
/* One 64-bit word per slot: the id shifted left by one, and the low bit
 * set once the program's record of that id was kept, so a slot reused by a
 * later id (16,384 ids on) can never mix the two. */
#define REPLAYED_LAUNCH_SLOTS 16384u
static _Atomic uint64_t replayed_launches[REPLAYED_LAUNCH_SLOTS];
/* The correlation id of the program's launch whose callback this thread
 * is in (0: none). */
static _Thread_local uint32_t program_launch_correlation;

static void count_skipped(void)
{
    uint64_t skipped =
        atomic_fetch_add_explicit(&internal_work_skipped, 1, memory_order_relaxed) + 1;
    /* Set, not added: the drops row always holds the running total. */
    if ((skipped & 1023u) == 1 || skipped < 1024)
        core_drops_set("replay",
                       "flare's own replay kernels and copies (not stored as the "
                       "program's)",
                       skipped);
}

void cuda_replay_note_internal_work(uint32_t correlation_id)
{
    if (correlation_id == 0)
        return;
    if (correlation_id == program_launch_correlation) {
        _Atomic uint64_t *slot = &replayed_launches[correlation_id % REPLAYED_LAUNCH_SLOTS];
        if (atomic_load_explicit(slot, memory_order_relaxed) >> 1 != correlation_id)
            atomic_store_explicit(slot, (uint64_t)correlation_id << 1, memory_order_release);
    } else {
        atomic_store_explicit(&internal_work_ids[correlation_id % INTERNAL_WORK_SLOTS],
                              correlation_id, memory_order_relaxed);
    }
    if (!atomic_load_explicit(&internal_work_seen, memory_order_relaxed))
        atomic_store_explicit(&internal_work_seen, 1, memory_order_release);
}

bool cuda_replay_is_internal_work(uint32_t correlation_id, const char *kernel_name)
{
    /* Tracing without replay pays one relaxed load here. */
    if (correlation_id == 0 || !atomic_load_explicit(&internal_work_seen, memory_order_acquire))
        return false;
    _Atomic uint64_t *slot = &replayed_launches[correlation_id % REPLAYED_LAUNCH_SLOTS];
    uint64_t entry = atomic_load_explicit(slot, memory_order_acquire);
    if (entry >> 1 == correlation_id) {
        /* The first kernel record is the program's launch; the rest, the
         * range profiler's own WaitNs kernels of each pass, and every copy
         * are flare's. */
        if (kernel_name != NULL && strstr(kernel_name, "WaitNs") == NULL && (entry & 1) == 0 &&
            atomic_compare_exchange_strong(slot, &entry, entry | 1))
            return false;
        count_skipped();
        return true;
    }
    if (atomic_load_explicit(&internal_work_ids[correlation_id % INTERNAL_WORK_SLOTS],
                             memory_order_relaxed) != correlation_id)
        return false;
    count_skipped();
    return true;
}

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

/* Waits until a stream has no pending work, or the deadline. */
/* Whether work submitted to the stream is being captured into a graph
 * (it does not run, and querying the stream would invalidate the capture). */
static bool stream_capturing(CUstream stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return driver.cuStreamIsCapturing != NULL &&
           driver.cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int wait_stream(CUstream stream, uint64_t deadline_ns)
{
    if (stream_capturing(stream))
        return FLARE_OK; /* nothing of it runs: nothing to wait for */
    for (uint32_t round = 0;; round++) {
        CUresult result = driver.cuStreamQuery(stream);
        if (result == CUDA_SUCCESS)
            return FLARE_OK;
        if (result != CUDA_ERROR_NOT_READY) {
            CORE_LOG_ONCE("cuda.replay.stream_query", CORE_LOG_WARNING,
                          "replay: cuStreamQuery failed: %s",
                          cuda_driver_error_text(&driver, result));
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
static int device_of(CUcontext context)
{
    uint32_t device = 0;
    if (context != NULL && get_device_id != NULL &&
        get_device_id(context, &device) == CUPTI_SUCCESS && device < REPLAY_DEVICE_MAX)
        return (int)device;
    CUdevice current;
    if (driver.cuCtxGetDevice(&current) == CUDA_SUCCESS && current >= 0 &&
        current < REPLAY_DEVICE_MAX)
        return (int)current;
    return -1;
}

static CUresult result_of(const CUpti_CallbackData *call)
{
    return call->functionReturnValue != NULL ? *(const CUresult *)call->functionReturnValue
                                             : CUDA_SUCCESS;
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

static void stream_created(CUcontext context, CUstream stream)
{
    int device = device_of(context);
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

static void stream_destroying(CUstream stream)
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

static void context_created(CUcontext context)
{
    int device = device_of(context);
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
    cuda_rangeprof_context_created(context, device);
}

static void forget_cached_context(CUcontext context);

static void context_destroying(CUcontext context)
{
    forget_cached_context(context);
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
            if (status == FLARE_OK && driver.cuCtxPushCurrent(batch[i]->context) == CUDA_SUCCESS) {
                status = wait_stream(CU_STREAM_LEGACY, deadline);
                CUcontext popped;
                driver.cuCtxPopCurrent(&popped);
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
    internal_depth++;
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
    internal_depth--;
    return status;
}

static _Atomic(CUstream) copy_streams[REPLAY_DEVICE_MAX];

/* flare's own non-blocking stream on the device (in the current context):
 * shadow copies never wait behind, nor hold up, the program's streams.
 * Made with no lock held and published with a compare-and-swap: a lock
 * shared by every device, held across cuStreamCreate (which CUPTI sees),
 * could tie one device's first replay to another device's replay inside
 * CUPTI. */
static CUstream copy_stream(int device)
{
    CUstream stream = atomic_load_explicit(&copy_streams[device], memory_order_acquire);
    if (stream != NULL)
        return stream;
    CUstream created = NULL;
    CUresult result = driver.cuStreamCreate(&created, CU_STREAM_NON_BLOCKING);
    if (result != CUDA_SUCCESS) {
        CORE_LOG_ONCE("cuda.replay.copy_stream", CORE_LOG_WARNING,
                      "replay: cuStreamCreate for copies failed: %s",
                      cuda_driver_error_text(&driver, result));
        return NULL;
    }
    CUstream expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&copy_streams[device], &expected, created,
                                                memory_order_acq_rel, memory_order_acquire))
        return created;
    /* Another thread published one first (replays on one device are
     * serialised, so this is rare): use it, drop ours. */
    if (driver.cuStreamDestroy != NULL)
        driver.cuStreamDestroy(created);
    return expected;
}

static int op_shadow_alloc(int device, bool on_device, size_t bytes, void **out)
{
    internal_depth++;
    /* The copy stream is made here, before the engine times the snapshot. */
    if (device >= 0 && device < REPLAY_DEVICE_MAX)
        copy_stream(device);
    CUresult result;
    if (on_device) {
        CUdeviceptr pointer = 0;
        result = driver.cuMemAlloc(&pointer, bytes);
        *out = (void *)(uintptr_t)pointer;
    } else {
        result = driver.cuMemAllocHost(out, bytes);
    }
    internal_depth--;
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
    internal_depth++;
    if (on_device)
        driver.cuMemFree((CUdeviceptr)(uintptr_t)pointer);
    else
        driver.cuMemFreeHost(pointer);
    internal_depth--;
}

static int op_copy(int device, void *destination, const void *source, size_t bytes,
                   uint64_t timeout_ns)
{
    if (device < 0 || device >= REPLAY_DEVICE_MAX)
        return FLARE_ERR_INVALID_ARGUMENT;
    uint64_t deadline = deadline_after(timeout_ns);
    internal_depth++;
    int status = FLARE_ERR_BACKEND;
    CUstream stream = copy_stream(device);
    if (stream != NULL) {
        /* Unified addressing: one call for device, managed and pinned host. */
        CUresult result = driver.cuMemcpyAsync((CUdeviceptr)(uintptr_t)destination,
                                               (CUdeviceptr)(uintptr_t)source, bytes, stream);
        if (result == CUDA_SUCCESS)
            status = wait_stream(stream, deadline);
        else
            CORE_LOG_ONCE("cuda.replay.copy", CORE_LOG_WARNING,
                          "replay: cuMemcpyAsync of %zu bytes failed: %s", bytes,
                          cuda_driver_error_text(&driver, result));
    }
    internal_depth--;
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
    internal_depth++;
    int status = FLARE_ERR_BACKEND;
    CUstream stream = copy_stream(device);
    if (stream != NULL) {
        status = FLARE_OK;
        for (size_t index = 0; index < count; index++) {
            CUresult result = driver.cuMemcpyAsync(
                (CUdeviceptr)(uintptr_t)copies[index].destination,
                (CUdeviceptr)(uintptr_t)copies[index].source, copies[index].bytes, stream);
            if (result != CUDA_SUCCESS) {
                CORE_LOG_ONCE("cuda.replay.copy_batch", CORE_LOG_WARNING,
                              "replay: cuMemcpyAsync of %zu bytes failed: %s", copies[index].bytes,
                              cuda_driver_error_text(&driver, result));
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
    internal_depth--;
    return status;
}

static int enable_gates(void);

/* Replay became configured (a tool, a selection, a span marked in code):
 * copies and memsets must be gated and recorded from now on, not from the
 * next launch. */
static void op_on_configured(void)
{
    if (attached)
        enable_gates();
}

static int op_current_device(void)
{
    CUdevice device = -1;
    if (driver.cuCtxGetDevice == NULL)
        return -1;
    internal_depth++;
    CUresult result = driver.cuCtxGetDevice(&device);
    internal_depth--;
    return result == CUDA_SUCCESS && device >= 0 && device < REPLAY_DEVICE_MAX ? (int)device : -1;
}

static size_t op_device_memory_free(int device)
{
    (void)device;
    size_t free_bytes = 0, total_bytes = 0;
    if (driver.cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS)
        return 0;
    return free_bytes;
}

/* Set when attach got far enough to offer the operations (as it installed
 * them before the descriptor existed): cuda_replay_device_ops. */
static int ops_offered;

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
};

const replay_device_ops *cuda_replay_device_ops(void)
{
    return ops_offered ? &cuda_ops : NULL;
}

/* ---- Module-scope __device__ variables ----
 *
 * A loaded module's cubin (an ELF image) lists its variables as symbols in
 * the .nv.global (zero-initialised) and .nv.global.init sections. The
 * resource callback gives the cubin but no module handle, so the names are
 * kept as pending until a launch from that module gives a handle
 * (cuFuncGetModule, or cuKernelGetLibrary for library kernels) under which
 * the names resolve with the ELF's sizes. A function not loaded yet (lazy
 * loading) is loaded first, so its module is known before its first launch.
 *
 * Only kernels of a module, or code handed one of its variables' addresses
 * (which goes through cuModuleGetGlobal / cuLibraryGetGlobal, watched too),
 * can write its variables. So a pending module none of whose kernels has
 * launched does not stop a replay (PyTorch loads modules whose kernels it
 * never runs, e.g. curand's tables behind torch.randn); a module whose
 * kernel launched but whose variables did not all resolve does, with a
 * reason naming the variable. A module loaded while a span records
 * declines the span: its memory is not in the span's snapshot. */

typedef struct cuda_module_globals {
    uint32_t module_id;
    int device;
    CUcontext context; /* the context it was loaded into */
    int resolved;
    /* A launch (or an address query) came from this module, but not every
     * variable resolved: replay on the device must decline. */
    int matched;
    char failure[160];
    size_t tracked_count; /* inventory entries added (addresses[0..tracked_count)) */
    void *handle;         /* CUmodule or CUlibrary once resolved */
    size_t count;
    char *names;   /* count NUL-terminated names back to back */
    size_t *sizes; /* from the symbol table */
    uintptr_t *addresses;
} cuda_module_globals;

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_module_globals *modules[CUDA_REPLAY_MODULES_MAX];
static size_t module_count;
static _Atomic int pending_modules[REPLAY_DEVICE_MAX];

/* Re-derives the device's untracked reason from the pending modules
 * (modules_lock held). */
/* Reasons that never clear (a cubin that could not be read, the module
 * table full): modules_lock held to read or write. */
static char sticky_untracked[REPLAY_DEVICE_MAX][160];

static void update_untracked(int device)
{
    if (sticky_untracked[device][0] != '\0') {
        replay_inventory_set_untracked(device, sticky_untracked[device]);
        return;
    }
    const cuda_module_globals *first = NULL;
    size_t pending = 0, blocking = 0;
    for (size_t i = 0; i < module_count; i++)
        if (modules[i]->device == device && !modules[i]->resolved) {
            pending++;
            if (modules[i]->matched && blocking++ == 0)
                first = modules[i];
        }
    atomic_store(&pending_modules[device], (int)pending);
    if (first == NULL) {
        replay_inventory_set_untracked(device, NULL);
        return;
    }
    char reason[256];
    snprintf(reason, sizeof(reason),
             "%zu module(s) with __device__ variables flare could not resolve (%s)", blocking,
             first->failure);
    replay_inventory_set_untracked(device, reason);
}

static void free_module(cuda_module_globals *module)
{
    free(module->names);
    free(module->sizes);
    free(module->addresses);
    free(module);
}

/* Module (or library) handles already settled on a device: resolved,
 * matched with a failure, or matching none of the pending modules (their
 * module has no __device__ variables); and functions already loaded and
 * settled. They are not tried again: PyTorch launches thousands of kernels,
 * and each try costs driver calls and a lock, where a settled function
 * costs one relaxed load per launch. Only for the device's first context:
 * a library handle and a CUkernel are shared by every context, and each
 * context loads the module on its own, so other contexts always take the
 * full path. Direct-mapped (a collision only costs a retry); cleared when
 * a module unloads or a context goes (a handle may then be reused), and a
 * store that raced with such a clear is not made (settle_generation). */
#define SETTLED_SLOTS 256
static void *_Atomic settled_handles[REPLAY_DEVICE_MAX][SETTLED_SLOTS];
static void *_Atomic settled_functions[REPLAY_DEVICE_MAX][SETTLED_SLOTS];
static _Atomic(CUcontext) cached_contexts[REPLAY_DEVICE_MAX];
static _Atomic uint64_t settle_generation;

/* Whether context is the one the device's caches serve (the first seen). */
static bool cache_serves(int device, CUcontext context)
{
    if (context == NULL)
        return false;
    CUcontext served = atomic_load_explicit(&cached_contexts[device], memory_order_acquire);
    if (served == NULL) {
        atomic_compare_exchange_strong(&cached_contexts[device], &served, context);
        served = atomic_load(&cached_contexts[device]);
    }
    return served == context;
}

static size_t handle_slot(const void *handle);

/* Stores key unless a clear came after generation was read; a clear that
 * lands between the check and the store takes the entry back out. */
static void settle(void *_Atomic *table, const void *key, uint64_t generation)
{
    if (atomic_load(&settle_generation) != generation)
        return;
    void *_Atomic *slot = &table[handle_slot(key)];
    atomic_store(slot, (void *)key);
    void *expected = (void *)key;
    if (atomic_load(&settle_generation) != generation)
        atomic_compare_exchange_strong(slot, &expected, NULL);
}

/* modules_lock held, or at context teardown. */
static void clear_settled(void)
{
    atomic_fetch_add(&settle_generation, 1);
    for (size_t device = 0; device < REPLAY_DEVICE_MAX; device++)
        for (size_t slot = 0; slot < SETTLED_SLOTS; slot++) {
            atomic_store_explicit(&settled_handles[device][slot], NULL, memory_order_relaxed);
            atomic_store_explicit(&settled_functions[device][slot], NULL, memory_order_relaxed);
        }
}

/* A context goes: its handles may come back for another context. */
static void forget_cached_context(CUcontext context)
{
    bool served = false;
    for (size_t device = 0; device < REPLAY_DEVICE_MAX; device++)
        served |= atomic_load(&cached_contexts[device]) == context;
    if (!served)
        return;
    /* Cleared before the context is let go, so no other context can become
     * the cached one and read what this one settled. */
    pthread_mutex_lock(&modules_lock);
    clear_settled();
    for (size_t device = 0; device < REPLAY_DEVICE_MAX; device++) {
        CUcontext expected = context;
        atomic_compare_exchange_strong(&cached_contexts[device], &expected, NULL);
    }
    pthread_mutex_unlock(&modules_lock);
}

/* While flare loads a function itself (cuFuncLoad), the module the driver
 * loads for it on this thread is that function's module: its identity,
 * with no guessing from variable names (static variables of a header, such
 * as curand's tables, carry the same names in many modules). */
static _Thread_local int watching_module_loads;
static _Thread_local int64_t module_loaded_while_watching; /* -1: none */

static size_t handle_slot(const void *handle)
{
    uintptr_t bits = (uintptr_t)handle;
    bits ^= bits >> 17;
    bits *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(bits >> 7) % SETTLED_SLOTS;
}

static void module_loaded(CUcontext context, const CUpti_ModuleResourceData *data)
{
    int device = device_of(context);
    if (device < 0 || data == NULL)
        return;
    cuda_module_globals *module = calloc(1, sizeof(*module));
    if (module == NULL)
        return;
    module->module_id = data->moduleId;
    module->device = device;
    module->context = context;
    cuda_cubin_globals found;
    long count = cuda_cubin_scan_globals(data->pCubin, data->cubinSize, &found);
    if (count == 0) {
        free_module(module);
        return;
    }
    if (count > 0) {
        module->count = found.count;
        module->names = found.names;
        module->sizes = found.sizes;
        module->addresses = calloc(found.count, sizeof(uintptr_t));
        if (module->addresses == NULL)
            count = -1;
    }
    pthread_mutex_lock(&modules_lock);
    if (count < 0 || module_count >= CUDA_REPLAY_MODULES_MAX) {
        char reason[160];
        snprintf(reason, sizeof(reason),
                 count < 0 ? "module %u: its cubin could not be read for __device__ variables"
                           : "module %u: more than 1024 modules with __device__ variables",
                 data->moduleId);
        snprintf(sticky_untracked[device], sizeof(sticky_untracked[device]), "%s", reason);
        replay_inventory_set_untracked(device, reason);
        atomic_store(&pending_modules[device], INT32_MAX / 2); /* never cleared */
        pthread_mutex_unlock(&modules_lock);
        free_module(module);
        return;
    }
    modules[module_count++] = module;
    update_untracked(device);
    pthread_mutex_unlock(&modules_lock);
    if (watching_module_loads)
        module_loaded_while_watching = data->moduleId;
    if (replay_configured() && replay_span_active_on(device))
        replay_span_decline(device, "a module with __device__ variables was loaded inside the span "
                                    "(its memory is not in the span's snapshot)");
}

static void module_unloading(const CUpti_ModuleResourceData *data)
{
    if (data == NULL)
        return;
    pthread_mutex_lock(&modules_lock);
    for (size_t i = 0; i < module_count; i++) {
        cuda_module_globals *module = modules[i];
        if (module->module_id != data->moduleId)
            continue;
        if (module->resolved)
            for (size_t k = 0; k < module->tracked_count; k++)
                replay_inventory_remove(module->addresses[k]);
        modules[i] = modules[--module_count];
        int device = module->device;
        free_module(module);
        update_untracked(device);
        break;
    }
    clear_settled(); /* a handle may be reused by a module loaded later */
    pthread_mutex_unlock(&modules_lock);
}

/* Tries the module (or library) a launched function belongs to against the
 * pending modules of its device. Cheap when nothing is pending. */
/* One unresolved module's variables, copied out from under modules_lock. */
typedef struct globals_attempt {
    uint32_t module_id;
    size_t count;
    char *names;
    size_t *sizes;
    uintptr_t *addresses;
} globals_attempt;

static void attempts_free(globals_attempt *attempts, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(attempts[i].names);
        free(attempts[i].sizes);
        free(attempts[i].addresses);
    }
    free(attempts);
}

/* Tries a module (or library) handle against the pending modules of its
 * context (only module_id's when has_only: the module the driver loaded
 * for the function flare just loaded). The driver is never called with
 * modules_lock held: module_loaded takes that lock from inside the driver
 * (which holds its own locks then), so calling cuModuleGetGlobal under it
 * deadlocked PyTorch at its first launches on the H200. Candidates are
 * copied out, tried without the lock, and the result is published under
 * it again, by module id.
 *
 * Without a known identity, a candidate whose every variable resolves
 * under the handle is taken (the first, if several do: modules declaring
 * the same names); failing that, one whose lookup found any of its names
 * (even with the wrong size) is this handle's module with a failure, and
 * blocks replay. Returns whether the handle is settled. */
static bool resolve_handle(int device, CUcontext context, CUmodule module, CUlibrary library,
                           bool loaded, bool has_only, uint32_t only_id)
{
    void *handle = module != NULL ? (void *)module : (void *)library;
    if (handle == NULL)
        return false;
    bool cached = cache_serves(device, context);
    if (cached && atomic_load_explicit(&settled_handles[device][handle_slot(handle)],
                                       memory_order_relaxed) == handle)
        return true;
    uint64_t generation = atomic_load(&settle_generation);
    pthread_mutex_lock(&modules_lock);
    int known = 0;
    size_t candidates = 0;
    for (size_t i = 0; i < module_count && !known; i++) {
        const cuda_module_globals *m = modules[i];
        known = m->handle == handle && m->context == context && (m->resolved || m->matched);
        candidates += !m->resolved && !m->matched && m->context == context &&
                      (!has_only || m->module_id == only_id);
    }
    globals_attempt *attempts =
        known || candidates == 0 ? NULL : calloc(candidates, sizeof(*attempts));
    size_t attempt_count = 0;
    for (size_t i = 0; attempts != NULL && i < module_count && attempt_count < candidates; i++) {
        const cuda_module_globals *candidate = modules[i];
        if (candidate->resolved || candidate->matched || candidate->context != context ||
            (has_only && candidate->module_id != only_id))
            continue;
        size_t names_bytes = 0;
        const char *name = candidate->names;
        for (size_t k = 0; k < candidate->count; k++, name += strlen(name) + 1)
            names_bytes += strlen(name) + 1;
        globals_attempt *attempt = &attempts[attempt_count++];
        attempt->module_id = candidate->module_id;
        attempt->count = candidate->count;
        attempt->names = malloc(names_bytes > 0 ? names_bytes : 1);
        attempt->sizes = malloc((candidate->count + 1) * sizeof(size_t));
        attempt->addresses = calloc(candidate->count + 1, sizeof(uintptr_t));
        if (attempt->names == NULL || attempt->sizes == NULL || attempt->addresses == NULL) {
            attempt->count = 0; /* skipped: it stays pending */
            continue;
        }
        memcpy(attempt->names, candidate->names, names_bytes);
        memcpy(attempt->sizes, candidate->sizes, candidate->count * sizeof(size_t));
    }
    pthread_mutex_unlock(&modules_lock);
    if (known || candidates == 0 || attempts == NULL) {
        free(attempts);
        if ((known || candidates == 0) && cached)
            settle(settled_handles[device], handle, generation);
        return known || candidates == 0;
    }

    /* Look every candidate up: which resolve completely, which at all. */
    int skipped_any = 0;
    size_t *resolved_counts = calloc(attempt_count, sizeof(size_t));
    char(*failures)[160] = calloc(attempt_count, sizeof(*failures));
    size_t *identified = calloc(attempt_count, sizeof(size_t));
    if (resolved_counts == NULL || failures == NULL || identified == NULL) {
        free(resolved_counts);
        free(failures);
        free(identified);
        attempts_free(attempts, attempt_count);
        return false;
    }
    internal_depth++; /* flare's own queries are not the program's */
    for (size_t a = 0; a < attempt_count; a++) {
        globals_attempt *attempt = &attempts[a];
        skipped_any |= attempt->count == 0; /* out of memory: not tried */
        const char *name = attempt->names;
        for (size_t k = 0; k < attempt->count; k++, name += strlen(name) + 1) {
            CUdeviceptr pointer = 0;
            size_t bytes = 0;
            CUresult result = module != NULL
                                  ? driver.cuModuleGetGlobal(&pointer, &bytes, module, name)
                                  : driver.cuLibraryGetGlobal(&pointer, &bytes, library, name);
            identified[a] += result == CUDA_SUCCESS;
            if (result == CUDA_SUCCESS && bytes == attempt->sizes[k]) {
                attempt->addresses[k] = (uintptr_t)pointer;
                resolved_counts[a]++;
            } else if (failures[a][0] == '\0') {
                if (result == CUDA_SUCCESS)
                    snprintf(failures[a], sizeof(failures[a]),
                             "module %u: '%.64s' is %zu bytes, its cubin says %zu",
                             attempt->module_id, name, bytes, attempt->sizes[k]);
                else
                    snprintf(failures[a], sizeof(failures[a]), "module %u: '%.64s': %.48s",
                             attempt->module_id, name, cuda_driver_error_text(&driver, result));
            }
        }
    }
    internal_depth--;
    /* The handle's own module is the one the most of whose names were
     * found under it: every name of its own is found (with the wrong size
     * at worst), while a module holding only a shared header's statics
     * (curand's tables) finds only those, a subset. Equal counts prefer a
     * complete resolution; two complete ones with equal counts are
     * identical name sets, which names cannot tell apart. None found: not
     * this handle's module (a module flare saw load for the function, but
     * none of whose names resolve, is not taken on that alone; the next
     * launch tries again without that hint). */
    long chosen = -1;
    size_t ties = 0;
    for (size_t a = 0; a < attempt_count; a++) {
        if (attempts[a].count == 0 || identified[a] == 0)
            continue;
        bool whole = resolved_counts[a] == attempts[a].count;
        bool chosen_whole = chosen >= 0 && resolved_counts[chosen] == attempts[chosen].count;
        if (chosen < 0 || identified[a] > identified[chosen] ||
            (identified[a] == identified[chosen] && whole && !chosen_whole)) {
            chosen = (long)a;
            ties = 1;
        } else if (identified[a] == identified[chosen] && whole == chosen_whole) {
            ties++;
        }
    }
    if (ties > 1)
        CORE_LOG_ONCE("cuda.replay.ambiguous_module", CORE_LOG_INFO,
                      "replay: %zu loaded modules declare the same __device__ variables; the "
                      "first is taken for a launch whose module flare did not load itself",
                      ties);
    bool published = false;
    if (chosen >= 0) {
        globals_attempt *attempt = &attempts[chosen];
        bool whole = resolved_counts[chosen] == attempt->count;
        if (!whole) {
            if (failures[chosen][0] == '\0')
                snprintf(failures[chosen], sizeof(failures[chosen]),
                         "module %u: none of its %zu variables found", attempt->module_id,
                         attempt->count);
            core_log(CORE_LOG_WARNING,
                     "replay: %zu of %zu __device__ variables of %s resolved; replays on "
                     "device %d are declined while the module is loaded",
                     resolved_counts[chosen], attempt->count, failures[chosen], device);
        }
        /* Publish, if the module is still loaded. */
        pthread_mutex_lock(&modules_lock);
        for (size_t i = 0; i < module_count; i++) {
            cuda_module_globals *candidate = modules[i];
            if (candidate->module_id != attempt->module_id || candidate->resolved)
                continue;
            candidate->handle = handle;
            published = true;
            if (!whole) {
                candidate->matched = 1;
                snprintf(candidate->failure, sizeof(candidate->failure), "%s", failures[chosen]);
                break;
            }
            /* One inventory entry (and one copy per restore, about 9 us on
             * the H200) per variable: PyTorch's steps carried 776. */
            for (size_t k = 0; k < candidate->count; k++) {
                candidate->addresses[k] = attempt->addresses[k];
                replay_inventory_add(device, candidate->addresses[k], candidate->sizes[k],
                                     REPLAY_ALLOCATION_GLOBAL);
            }
            candidate->tracked_count = candidate->count;
            candidate->resolved = 1;
            break;
        }
        update_untracked(device);
        pthread_mutex_unlock(&modules_lock);
    }
    free(resolved_counts);
    free(failures);
    free(identified);
    attempts_free(attempts, attempt_count);
    /* A module settled while a span records: its variables joined the
     * inventory after the span's snapshot, or cannot be restored at all. */
    if (published && replay_configured() && replay_span_active_on(device))
        replay_span_decline(device, "a module's __device__ variables were first used inside the "
                                    "span (they are not in the span's snapshot)");
    /* No match only settles a handle whose module is known to be loaded
     * (else its module may not have registered its names yet) and whose
     * candidates were all tried. */
    bool settled = chosen >= 0 || (loaded && !skipped_any && !has_only);
    if (settled && cached)
        settle(settled_handles[device], handle, generation);
    return settled;
}

/* Resolves the launched function's module's __device__ variables, loading
 * the function first when it is not (lazy loading would otherwise load its
 * module inside the launch, after the snapshot). */
static void resolve_globals(int device, CUcontext context, CUfunction function)
{
    bool cached = cache_serves(device, context);
    if (function == NULL ||
        (cached && atomic_load_explicit(&settled_functions[device][handle_slot(function)],
                                        memory_order_relaxed) == (void *)function))
        return;
    uint64_t generation = atomic_load(&settle_generation);
    CUmodule module = NULL;
    CUlibrary library = NULL;
    if (driver.cuFuncGetModule == NULL || driver.cuFuncGetModule(&module, function) != CUDA_SUCCESS)
        module = NULL;
    if (module == NULL && (driver.cuKernelGetLibrary == NULL ||
                           driver.cuKernelGetLibrary(&library, (CUkernel)function) != CUDA_SUCCESS))
        return;
    /* Loading happens once per function; the module-loaded callback it
     * triggers registers the module's names, and on this thread names the
     * module, before its variables are looked up. */
    watching_module_loads = 1;
    module_loaded_while_watching = -1;
    CUfunction loadable = function;
    if (module == NULL && driver.cuKernelGetFunction != NULL &&
        driver.cuKernelGetFunction(&loadable, (CUkernel)function) != CUDA_SUCCESS)
        loadable = NULL;
    CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
    bool loaded = false;
    if (loadable != NULL && driver.cuFuncIsLoaded != NULL && driver.cuFuncLoad != NULL &&
        driver.cuFuncIsLoaded(&state, loadable) == CUDA_SUCCESS)
        loaded = state == CU_FUNCTION_LOADING_STATE_LOADED ||
                 driver.cuFuncLoad(loadable) == CUDA_SUCCESS;
    watching_module_loads = 0;
    bool has_only = module_loaded_while_watching >= 0;
    uint32_t only_id = has_only ? (uint32_t)module_loaded_while_watching : 0;
    bool settled = atomic_load_explicit(&pending_modules[device], memory_order_relaxed) == 0 ||
                   resolve_handle(device, context, module, library, loaded, has_only, only_id);
    /* Loaded, and its module settled or without variables: nothing more
     * to do for this function until a module unloads. Unknown loading
     * state (a driver before 12.4): tried at every launch, as before. */
    if (loaded && settled && cached)
        settle(settled_functions[device], function, generation);
}

/* ---- Allocations ---- */

static void allocation_returned(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (result_of(call) != CUDA_SUCCESS)
        return;
    const void *params = call->functionParams;
    int device = device_of(call->context);
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
        if (driver.cuMemGetAllocationPropertiesFromHandle != NULL &&
            driver.cuMemGetAllocationPropertiesFromHandle(&prop, p->handle) == CUDA_SUCCESS &&
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

static uintptr_t freed_address(CUpti_CallbackId id, const void *params)
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

static const CUpti_CallbackId launch_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

/* Every driver entry point that copies or sets memory (synchronous ones
 * too: they write memory a replay would otherwise revert). */
/* clang-format off */
static const CUpti_CallbackId copy_ids[] = {
#define X(name) CUPTI_DRIVER_TRACE_CBID_##name,
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2) X(cuMemcpyDtoA_v2)
    X(cuMemcpyAtoD_v2) X(cuMemcpyHtoA_v2) X(cuMemcpyAtoH_v2) X(cuMemcpyAtoA_v2) X(cuMemcpy2D_v2)
    X(cuMemcpy2DUnaligned_v2) X(cuMemcpy3D_v2) X(cuMemcpy) X(cuMemcpyPeer) X(cuMemcpy3DPeer)
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyHtoAAsync_v2)
    X(cuMemcpyAtoHAsync_v2) X(cuMemcpy2DAsync_v2) X(cuMemcpy3DAsync_v2) X(cuMemcpyAsync)
    X(cuMemcpyPeerAsync) X(cuMemcpy3DPeerAsync) X(cuMemsetD8_v2) X(cuMemsetD16_v2)
    X(cuMemsetD32_v2) X(cuMemsetD2D8_v2) X(cuMemsetD2D16_v2) X(cuMemsetD2D32_v2) X(cuMemsetD8Async)
    X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async) X(cuMemsetD2D16Async)
    X(cuMemsetD2D32Async) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2_ptds) X(cuMemcpyDtoD_v2_ptds)
    X(cuMemcpyDtoA_v2_ptds) X(cuMemcpyAtoD_v2_ptds) X(cuMemcpyHtoA_v2_ptds) X(cuMemcpyAtoH_v2_ptds)
    X(cuMemcpyAtoA_v2_ptds) X(cuMemcpy2D_v2_ptds) X(cuMemcpy2DUnaligned_v2_ptds)
    X(cuMemcpy3D_v2_ptds) X(cuMemcpy_ptds) X(cuMemcpyPeer_ptds) X(cuMemcpy3DPeer_ptds)
    X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2_ptds) X(cuMemsetD32_v2_ptds) X(cuMemsetD2D8_v2_ptds)
    X(cuMemsetD2D16_v2_ptds) X(cuMemsetD2D32_v2_ptds) X(cuMemcpyAsync_ptsz)
    X(cuMemcpyHtoAAsync_v2_ptsz) X(cuMemcpyAtoHAsync_v2_ptsz) X(cuMemcpyHtoDAsync_v2_ptsz)
    X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2_ptsz) X(cuMemcpy2DAsync_v2_ptsz)
    X(cuMemcpy3DAsync_v2_ptsz) X(cuMemcpyPeerAsync_ptsz) X(cuMemcpy3DPeerAsync_ptsz)
    X(cuMemsetD8Async_ptsz) X(cuMemsetD16Async_ptsz) X(cuMemsetD32Async_ptsz)
    X(cuMemsetD2D8Async_ptsz) X(cuMemsetD2D16Async_ptsz) X(cuMemsetD2D32Async_ptsz)
    X(cuMemcpyBatchAsync) X(cuMemcpyBatchAsync_ptsz) X(cuMemcpy3DBatchAsync)
    X(cuMemcpy3DBatchAsync_ptsz) X(cuMemcpyBatchAsync_v2) X(cuMemcpyBatchAsync_v2_ptsz)
    X(cuMemcpy3DBatchAsync_v2) X(cuMemcpy3DBatchAsync_v2_ptsz)
#undef X
};
/* clang-format on */

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
 * process, under a lock (never a hot path: callers test gates_enabled
 * first); returns how many entry points are watched. */
static pthread_mutex_t gates_lock = PTHREAD_MUTEX_INITIALIZER;
static int gates_watched;

static int enable_gates(void)
{
    pthread_mutex_lock(&gates_lock);
    if (!atomic_load(&gates_enabled)) {
        gates_watched = enable_ids(copy_ids, COUNT_OF(copy_ids));
        core_log(gates_watched == (int)COUNT_OF(copy_ids) ? CORE_LOG_INFO : CORE_LOG_WARNING,
                 "%d of %zu copy and memset entry points watched (replay gate, launch-storm "
                 "copy count)",
                 gates_watched, COUNT_OF(copy_ids));
        atomic_store(&gates_enabled, 1);
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
    return enable_gates() == (int)COUNT_OF(copy_ids) ? FLARE_OK : FLARE_ERR_BACKEND;
}

/* ---- The gate around copies, memsets and frees ----
 * The token and device travel from ENTER to EXIT in CUPTI's per-call
 * correlationData slot: (token << 32) | (device + 1); 0 = nothing taken. */

static void gate_call(const CUpti_CallbackData *call)
{
    if (call->callbackSite == CUPTI_API_ENTER) {
        *call->correlationData = 0;
        if (!replay_configured())
            return;
        int device = device_of(call->context);
        if (device < 0)
            return;
        int token = replay_gate_enter(device);
        *call->correlationData = ((uint64_t)(uint32_t)token << 32) | (uint32_t)(device + 1);
    } else if (*call->correlationData != 0) {
        uint64_t slot = *call->correlationData;
        replay_gate_exit((int)(slot & 0xffffffffu) - 1, (int)(uint32_t)(slot >> 32));
    }
}

/* ---- Range replay hooks (cuda_span.c) ---- */

static void internal_begin(void)
{
    internal_depth++;
}

static void internal_end(void)
{
    internal_depth--;
}

static CUstream span_replay_stream(int device)
{
    internal_depth++;
    CUstream stream = copy_stream(device);
    internal_depth--;
    return stream;
}

/* ---- Launches ---- */

typedef struct cuda_launch_frame {
    replay_launch_request request;
    replay_launch_state state;
    CUpti_CallbackId cbid;
    const void *params; /* functionParams of the callback: valid until its EXIT returns */
    char kernel_name[256];
} cuda_launch_frame;

/* One frame per nesting level of launches on this thread (a tool callback
 * inside a pass may launch; flare's own relaunches are not framed). */
/* Per-thread launch state lives on the heap behind one TLS pointer:
 * libflare uses initial-exec TLS (counters), so every thread-local byte it
 * declares comes out of the static TLS surplus that a dlopen'ed library
 * (CUDA injection, Python ctypes) must fit in, a few hundred bytes. */
typedef struct cuda_launch_thread {
    cuda_launch_frame frames[CUDA_LAUNCH_DEPTH_MAX];
    int depth;
    char last_symbol[512]; /* demangling cache: the last mangled name... */
    char last_name[256];   /* ...and its demangled form */
} cuda_launch_thread;

static _Thread_local cuda_launch_thread *launch_thread;
static pthread_key_t launch_thread_key;
static pthread_once_t launch_thread_once = PTHREAD_ONCE_INIT;

/* Runs at thread exit on the exiting thread: the TLS pointer must not be
 * left pointing at freed memory for a later destructor's launch. */
static void launch_thread_release(void *thread)
{
    launch_thread = NULL;
    free(thread);
}

static void launch_thread_key_create(void)
{
    pthread_key_create(&launch_thread_key, launch_thread_release);
}

/* NULL when out of memory: the launch then passes through unguarded. */
static cuda_launch_thread *current_launch_thread(void)
{
    if (launch_thread == NULL) {
        pthread_once(&launch_thread_once, launch_thread_key_create);
        cuda_launch_thread *created = calloc(1, sizeof *created);
        if (created == NULL || pthread_setspecific(launch_thread_key, created) != 0) {
            free(created);
            return NULL;
        }
        launch_thread = created;
    }
    return launch_thread;
}

static int relaunch(void *context)
{
    const cuda_launch_frame *frame = context;
    CUresult result = CUDA_ERROR_NOT_SUPPORTED;
    internal_depth++;
    switch (frame->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
        const cuLaunchKernel_params *p = frame->params;
        result = driver.cuLaunchKernel(p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX,
                                       p->blockDimY, p->blockDimZ, p->sharedMemBytes, p->hStream,
                                       p->kernelParams, p->extra);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_ptsz_params *p = frame->params;
        if (driver.cuLaunchKernel_ptsz != NULL)
            result = driver.cuLaunchKernel_ptsz(
                p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                p->blockDimZ, p->sharedMemBytes, p->hStream, p->kernelParams, p->extra);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
        const cuLaunchKernelEx_params *p = frame->params;
        if (driver.cuLaunchKernelEx != NULL)
            result = driver.cuLaunchKernelEx(p->config, p->f, p->kernelParams, p->extra);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_ptsz_params *p = frame->params;
        if (driver.cuLaunchKernelEx_ptsz != NULL)
            result = driver.cuLaunchKernelEx_ptsz(p->config, p->f, p->kernelParams, p->extra);
        break;
    }
    default:
        break;
    }
    internal_depth--;
    if (result != CUDA_SUCCESS)
        CORE_LOG_ONCE("cuda.replay.relaunch", CORE_LOG_ERROR, "replay: relaunch of %s failed: %s",
                      frame->kernel_name, cuda_driver_error_text(&driver, result));
    return result == CUDA_SUCCESS ? FLARE_OK : FLARE_ERR_BACKEND;
}

/* A span's deep copy of this launch (the frame's parameters are valid:
 * capture runs inside the launch's ENTER callback). */
static int capture_for_span(void *context, replay_span_work *work)
{
    const cuda_launch_frame *frame = context;
    return cuda_span_capture_launch(frame->cbid, frame->params, frame->request.device, work);
}

static bool cooperative_attribute(const CUlaunchConfig *config)
{
    for (unsigned int i = 0; config != NULL && i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
            config->attrs[i].value.cooperative != 0)
            return true;
    return false;
}

/* Fills the frame's request from the callback's parameters. */
static void describe_launch(cuda_launch_frame *frame, CUpti_CallbackId id,
                            const CUpti_CallbackData *call, int device)
{
    replay_launch_request *request = &frame->request;
    memset(request, 0, sizeof(*request));
    frame->cbid = id;
    frame->params = call->functionParams;
    CUfunction function = NULL;
    CUstream stream = NULL;
    int per_thread = 0;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        per_thread = 1; /* same parameter layout as the plain call */
        __attribute__((fallthrough));
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: {
        const cuLaunchKernel_params *p = call->functionParams;
        function = p->f;
        stream = p->hStream;
        request->grid[0] = p->gridDimX, request->grid[1] = p->gridDimY;
        request->grid[2] = p->gridDimZ;
        request->block[0] = p->blockDimX, request->block[1] = p->blockDimY;
        request->block[2] = p->blockDimZ;
        request->unsupported_kind = id == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
                                    id == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        per_thread = 1;
        __attribute__((fallthrough));
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
        const cuLaunchKernelEx_params *p = call->functionParams;
        function = p->f;
        if (p->config != NULL) {
            stream = p->config->hStream;
            request->grid[0] = p->config->gridDimX, request->grid[1] = p->config->gridDimY;
            request->grid[2] = p->config->gridDimZ;
            request->block[0] = p->config->blockDimX, request->block[1] = p->config->blockDimY;
            request->block[2] = p->config->blockDimZ;
        }
        request->unsupported_kind = cooperative_attribute(p->config);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
        per_thread = 1;
        __attribute__((fallthrough));
    default: { /* cuGraphLaunch */
        const cuGraphLaunch_params *p = call->functionParams;
        stream = p->hStream;
        request->from_graph = true; /* the engine warns once and records it */
        break;
    }
    }
    if (per_thread && stream == NULL)
        stream = CU_STREAM_PER_THREAD;
    uint32_t stream_id = 0;
    if (get_stream_id != NULL &&
        get_stream_id(call->context, stream == CU_STREAM_PER_THREAD ? NULL : stream,
                      (uint8_t)(stream == CU_STREAM_PER_THREAD), &stream_id) == CUPTI_SUCCESS)
        request->stream_id = stream_id;
    request->device = device;
    request->stream = stream;
    /* Launched into a stream being captured: it becomes a graph node and
     * does not run now, so it is treated like a graph launch (declined). */
    if (!request->from_graph && stream_capturing(stream))
        request->from_graph = true;
    if (request->from_graph) {
        snprintf(frame->kernel_name, sizeof(frame->kernel_name), "(CUDA graph)");
    } else {
        /* Demangling allocates: remember the last name per thread (a
         * replayed program launches the same few kernels over and over). */
        cuda_launch_thread *thread = current_launch_thread();
        char *last_symbol = thread->last_symbol;
        char *last_name = thread->last_name;
        _Static_assert(sizeof(thread->last_name) == sizeof(frame->kernel_name),
                       "the cached name fills the frame's name");
        const char *symbol = call->symbolName != NULL ? call->symbolName : "";
        if (symbol[0] == '\0') {
            snprintf(last_name, sizeof(thread->last_name), "(unknown kernel)");
            last_symbol[0] = '\0';
        } else if (strncmp(symbol, last_symbol, sizeof(thread->last_symbol)) != 0 ||
                   strlen(symbol) >= sizeof(thread->last_symbol)) {
            snprintf(last_name, sizeof(thread->last_name), "%s", cuda_demangle(symbol));
            snprintf(last_symbol, sizeof(thread->last_symbol), "%s", symbol);
        }
        memcpy(frame->kernel_name, last_name, sizeof(thread->last_name));
    }
    request->kernel_name = frame->kernel_name;
    request->relaunch = relaunch;
    request->relaunch_context = frame;
    request->capture = capture_for_span;
    if (!request->from_graph)
        resolve_globals(device, call->context, function);
}

static void launch_call(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (call->callbackSite == CUPTI_API_ENTER) {
        *call->correlationData = 0;
        if (!replay_configured())
            return;
        /* The outermost program launch: flare's calls from here on share
         * its correlation id (see cuda_replay_note_internal_work). */
        if (program_launch_correlation == 0)
            program_launch_correlation = call->correlationId;
        if (!atomic_load_explicit(&gates_enabled, memory_order_relaxed))
            enable_gates();
        int device = device_of(call->context);
        if (device < 0)
            return;
        cuda_launch_thread *thread = current_launch_thread();
        if (thread == NULL)
            return;
        if (thread->depth >= CUDA_LAUNCH_DEPTH_MAX) {
            CORE_LOG_ONCE("cuda.replay.depth", CORE_LOG_WARNING,
                          "replay: launches nested more than %d deep pass through unguarded",
                          CUDA_LAUNCH_DEPTH_MAX);
            return;
        }
        /* Claim the frame before begin: a tool's pass callback may launch
         * (and so re-enter here) from inside replay_launch_begin. */
        cuda_launch_frame *frame = &thread->frames[thread->depth++];
        describe_launch(frame, id, call, device);
        memset(&frame->state, 0, sizeof(frame->state));
        *call->correlationData = (uint64_t)thread->depth;
        replay_launch_begin(&frame->request, &frame->state);
        return;
    }
    uint64_t marker = *call->correlationData;
    cuda_launch_thread *thread = launch_thread;
    if (marker == 0 || marker > CUDA_LAUNCH_DEPTH_MAX || thread == NULL) {
        if (program_launch_correlation == call->correlationId)
            program_launch_correlation = 0;
        return;
    }
    cuda_launch_frame *frame = &thread->frames[marker - 1];
    frame->params = call->functionParams;
    CUresult submitted = result_of(call);
    replay_launch_end(&frame->request, &frame->state,
                      submitted == CUDA_SUCCESS ? FLARE_OK : FLARE_ERR_BACKEND);
    thread->depth = (int)marker - 1;
    /* Only now: the passes run inside replay_launch_end and carry this id. */
    if (program_launch_correlation == call->correlationId)
        program_launch_correlation = 0;
}

/* ---- Dispatch ---- */

void cuda_replay_on_driver(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (!attached || internal_depth > 0 || id >= CUDA_CBID_TABLE)
        return;
    switch (cbid_kind[id]) {
    case KIND_LAUNCH:
        launch_call(id, call);
        break;
    case KIND_COPY:
        /* Recorded at ENTER, but it never ran: the span cannot re-issue it. */
        if (call->callbackSite == CUPTI_API_EXIT && replay_configured() &&
            result_of(call) != CUDA_SUCCESS) {
            int device = device_of(call->context);
            if (device >= 0 && replay_span_active_on(device))
                replay_span_decline(device, "a copy or memset inside the span failed");
        }
        gate_call(call);
        /* With the reader gate held: a span recording on the device records
         * the copy or memset before it runs. */
        if (call->callbackSite == CUPTI_API_ENTER && replay_configured()) {
            int device = device_of(call->context);
            if (device >= 0 && replay_span_claims(device))
                cuda_span_record_copy(id, call, device);
        }
        break;
    case KIND_ALLOCATION:
        /* Under the reader gate (while replay is configured): an allocation
         * is either in the inventory before a span's snapshot, or made while
         * the span records, which declines it. */
        if (call->callbackSite == CUPTI_API_ENTER) {
            gate_call(call);
            int device = replay_configured() ? device_of(call->context) : -1;
            if (device >= 0 && replay_span_active_on(device))
                replay_span_decline(device, "memory allocated inside the span");
        } else {
            allocation_returned(id, call);
            gate_call(call);
        }
        break;
    case KIND_GLOBAL_QUERY:
        if (call->callbackSite == CUPTI_API_EXIT && result_of(call) == CUDA_SUCCESS) {
            int device = device_of(call->context);
            if (device >= 0 && atomic_load_explicit(&pending_modules[device], memory_order_relaxed))
                resolve_handle(
                    device, call->context,
                    id == CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2
                        ? ((const cuModuleGetGlobal_v2_params *)call->functionParams)->hmod
                        : NULL,
                    id == CUPTI_DRIVER_TRACE_CBID_cuLibraryGetGlobal
                        ? ((const cuLibraryGetGlobal_params *)call->functionParams)->library
                        : NULL,
                    true, false, 0);
        }
        break;
    case KIND_FREE:
        if (call->callbackSite == CUPTI_API_ENTER && replay_configured()) {
            int device = device_of(call->context);
            if (device >= 0 && replay_span_active_on(device))
                replay_span_decline(device, "memory freed inside the span");
        }
        /* A free waits at the gate: a replay must not restore into memory
         * freed (and perhaps handed out again) under it. */
        if (call->callbackSite == CUPTI_API_EXIT && result_of(call) == CUDA_SUCCESS)
            replay_inventory_remove(freed_address(id, call->functionParams));
        gate_call(call);
        break;
    default:
        break;
    }
}

void cuda_replay_on_resource(CUpti_CallbackId id, const void *data)
{
    if (!attached)
        return;
    const CUpti_ResourceData *resource = data;
    /* A module loaded by flare's own call (a variable looked up, a function
     * loaded ahead of its launch) is still the program's module. */
    if (internal_depth > 0 && id != CUPTI_CBID_RESOURCE_MODULE_LOADED &&
        id != CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
        return;
    switch (id) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        context_created(resource->context);
        break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        context_destroying(resource->context);
        break;
    case CUPTI_CBID_RESOURCE_STREAM_CREATED:
        stream_created(resource->context, resource->resourceHandle.stream);
        break;
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING:
        stream_destroying(resource->resourceHandle.stream);
        break;
    case CUPTI_CBID_RESOURCE_MODULE_LOADED:
        module_loaded(resource->context, resource->resourceDescriptor);
        break;
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
        module_unloading(resource->resourceDescriptor);
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
    if (cuda_load_driver(&driver, reason, sizeof(reason)) != 0) {
        core_capability_set("replay", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return 0;
    }
    const char *missing = NULL;
#define NEED(field)                                                                                \
    do {                                                                                           \
        if (driver.field == NULL && missing == NULL)                                               \
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
    *(void **)&get_device_id = dlsym(cupti->library, "cuptiGetDeviceId");
    *(void **)&get_stream_id = dlsym(cupti->library, "cuptiGetStreamIdEx");
    classify(allocation_ids, COUNT_OF(allocation_ids), KIND_ALLOCATION);
    classify(free_ids, COUNT_OF(free_ids), KIND_FREE);
    classify(launch_ids, COUNT_OF(launch_ids), KIND_LAUNCH);
    classify(copy_ids, COUNT_OF(copy_ids), KIND_COPY);
    classify(global_query_ids, COUNT_OF(global_query_ids), KIND_GLOBAL_QUERY);
    ops_offered = 1;
    cuda_span_attach(&driver, internal_begin, internal_end, span_replay_stream);
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
    attached = 1;
    if (replay_configured() || any_replay_variable())
        enable_gates();
    cuda_rangeprof_install(cupti, &driver);
    core_capability_set("replay", replay_configured() || any_replay_variable(),
                        CORE_CAPABILITY_ACTIVE,
                        "CUDA: %d allocation entry points tracked, launches bracketed, copies "
                        "and memsets gated while replay is configured",
                        enabled);
    return enabled;
}
