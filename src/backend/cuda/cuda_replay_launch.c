/*
 * cuda_replay_launch.c: the CUDA side of the replay engine's gate and
 * launch bracket. Every launch entry point is bracketed: at API_ENTER the
 * launch is described (grid, block, stream, kernel name) and handed to
 * replay_launch_begin; at API_EXIT replay_launch_end runs the whole pass
 * loop, relaunching from the saved kernelParams. Copies, memsets and frees
 * pass the device's gate (replay_gate_enter/exit). The correlation ids of
 * flare's own driver calls are noted here too, so the activity handler
 * keeps flare's replay kernels and copies out of the program's records.
 *
 * Must never: issue a launch again from anything but the parameters saved
 * in that launch's own callback, keep a gate token past its call's
 * API_EXIT, or let flare's relaunches be seen as the program's launches
 * (they run inside flare's internal bracket).
 */
#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_replay_internal.h"
#include "backend/cuda/cuda_range_replay.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_callback_ids.h"
#include "backend/cuda/cuda_trace.h"
#include "core/capability.h"
#include "core/log.h"
#include "replay/replay.h"

#define CUDA_LAUNCH_DEPTH_MAX 4

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

/* ---- The gate around copies, memsets and frees ----
 * The token and device travel from ENTER to EXIT in CUPTI's per-call
 * correlationData slot: (token << 32) | (device + 1); 0 = nothing taken. */

void cuda_replay_gate_call(const CUpti_CallbackData *call)
{
    if (call->callbackSite == CUPTI_API_ENTER) {
        *call->correlationData = 0;
        if (!replay_configured())
            return;
        int device = cuda_replay_device_of(call->context);
        if (device < 0)
            return;
        int token = replay_gate_enter(device);
        *call->correlationData = ((uint64_t)(uint32_t)token << 32) | (uint32_t)(device + 1);
    } else if (*call->correlationData != 0) {
        uint64_t slot = *call->correlationData;
        replay_gate_exit((int)(slot & 0xffffffffu) - 1, (int)(uint32_t)(slot >> 32));
    }
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

_Static_assert(CUDA_LAUNCH_IDS_RELAUNCHABLE_COUNT == 4,
               "relaunch issues each of CUDA_LAUNCH_IDS_RELAUNCHABLE again: extend it with "
               "the list");

static int relaunch(void *context)
{
    const cuda_launch_frame *frame = context;
    CUresult result = CUDA_ERROR_NOT_SUPPORTED;
    cuda_replay_internal_begin();
    switch (frame->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
        const cuLaunchKernel_params *p = frame->params;
        result = cuda_replay_driver.cuLaunchKernel(
            p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
            p->sharedMemBytes, p->hStream, p->kernelParams, p->extra);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_ptsz_params *p = frame->params;
        if (cuda_replay_driver.cuLaunchKernel_ptsz != NULL)
            result = cuda_replay_driver.cuLaunchKernel_ptsz(
                p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                p->blockDimZ, p->sharedMemBytes, p->hStream, p->kernelParams, p->extra);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
        const cuLaunchKernelEx_params *p = frame->params;
        if (cuda_replay_driver.cuLaunchKernelEx != NULL)
            result =
                cuda_replay_driver.cuLaunchKernelEx(p->config, p->f, p->kernelParams, p->extra);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_ptsz_params *p = frame->params;
        if (cuda_replay_driver.cuLaunchKernelEx_ptsz != NULL)
            result = cuda_replay_driver.cuLaunchKernelEx_ptsz(p->config, p->f, p->kernelParams,
                                                              p->extra);
        break;
    }
    default:
        break;
    }
    cuda_replay_internal_end();
    if (result != CUDA_SUCCESS)
        CORE_LOG_ONCE("cuda.replay.relaunch", CORE_LOG_ERROR, "replay: relaunch of %s failed: %s",
                      frame->kernel_name, cuda_driver_error_text(&cuda_replay_driver, result));
    return result == CUDA_SUCCESS ? FLARE_OK : FLARE_ERR_BACKEND;
}

/* A span's deep copy of this launch (the frame's parameters are valid:
 * capture runs inside the launch's ENTER callback). */
static int capture_for_span(void *context, replay_range_work *work)
{
    const cuda_launch_frame *frame = context;
    return cuda_range_replay_capture_launch(frame->cbid, frame->params, frame->request.device,
                                            work);
}

static bool cooperative_attribute(const CUlaunchConfig *config)
{
    for (unsigned int i = 0; config != NULL && i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
            config->attrs[i].value.cooperative != 0)
            return true;
    return false;
}

_Static_assert(CUDA_LAUNCH_IDS_COUNT == 8,
               "describe_launch reads the parameters of each of CUDA_LAUNCH_IDS: extend it "
               "with the list");

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
    if (cuda_replay_get_stream_id != NULL &&
        cuda_replay_get_stream_id(call->context, stream == CU_STREAM_PER_THREAD ? NULL : stream,
                                  (uint8_t)(stream == CU_STREAM_PER_THREAD),
                                  &stream_id) == CUPTI_SUCCESS)
        request->stream_id = stream_id;
    request->device = device;
    request->stream = stream;
    /* Launched into a stream being captured: it becomes a graph node and
     * does not run now, so it is treated like a graph launch (declined). */
    if (!request->from_graph && cuda_replay_stream_capturing(stream))
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
        cuda_replay_resolve_globals(device, call->context, function);
}

/* Before replay is configured, in a process whose rules may range-replay:
 * the launched function's module's __device__ variables are resolved now
 * (once per function; later launches find it settled), so that a span a
 * rule begins later has them in its snapshot instead of declining. */
static void resolve_globals_early(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    CUfunction function = NULL;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        function = ((const cuLaunchKernel_params *)call->functionParams)->f;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        function = ((const cuLaunchKernelEx_params *)call->functionParams)->f;
        break;
    default: /* graph launches: never replayed */
        return;
    }
    int device = cuda_replay_device_of(call->context);
    if (device >= 0 && function != NULL)
        cuda_replay_resolve_globals(device, call->context, function);
}

void cuda_replay_launch_call(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (call->callbackSite == CUPTI_API_ENTER) {
        *call->correlationData = 0;
        if (!replay_configured()) {
            if (atomic_load_explicit(&cuda_replay_globals_early, memory_order_relaxed))
                resolve_globals_early(id, call);
            return;
        }
        /* The outermost program launch: flare's calls from here on share
         * its correlation id (see cuda_replay_note_internal_work). */
        if (program_launch_correlation == 0)
            program_launch_correlation = call->correlationId;
        if (!atomic_load_explicit(&cuda_replay_gates_enabled, memory_order_relaxed))
            cuda_replay_enable_gates();
        int device = cuda_replay_device_of(call->context);
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
    CUresult submitted = cuda_replay_result_of(call);
    replay_launch_end(&frame->request, &frame->state,
                      submitted == CUDA_SUCCESS ? FLARE_OK : FLARE_ERR_BACKEND);
    thread->depth = (int)marker - 1;
    /* Only now: the passes run inside replay_launch_end and carry this id. */
    if (program_launch_correlation == call->correlationId)
        program_launch_correlation = 0;
}
