/*
 * cuda_trace.c: tracing real CUDA programs through injection.
 *
 * The driver calls InitializeInjection (CUDA_INJECTION64_PATH) when the
 * program initialises CUDA; NVTX calls InitializeInjectionNvtx2
 * (NVTX_INJECTION64_PATH) on its first use. From there: CUPTI activity
 * records (kernels, copies, memsets, external correlations) stamped with
 * flare's clock (buffers: cuda_activity_buffers.c), driver callbacks on
 * every launch entry point (host launch counts), NVTX push/pop and
 * start/end ranges as scopes, and an NVML sampler thread, which also steps
 * the launch-storm guard (src/storm, driven from cuda_storm.c): during a
 * storm it switches CUPTI's kernel activity off between short sample
 * slices, and the launches left untimed are reported as a drop.
 * Every CUPTI or NVML failure degrades a capability with the vendor's
 * reason; none may stop or crash the program.
 */
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <generated_nvtx_meta.h>
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_callback_ids.h"
#include "backend/cuda/cuda_graphs.h"
#include "backend/cuda/cuda_host.h"
#include "backend/cuda/cuda_loader.h"
#include "backend/cuda/cuda_app_thread.h"
#include "backend/cuda/cuda_crash_trace.h"
#include "backend/cuda/cuda_pc.h"
#include "backend/cuda/cuda_sass.h"
#include "backend/cuda/cuda_pc_lines.h"
#include "backend/cuda/cuda_pm.h"
#include "backend/cuda/cuda_range_times.h"
#include "backend/cuda/cuda_rangeprof.h"
#include "backend/cuda/cuda_ranges.h"
#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_activity_buffers.h"
#include "backend/cuda/cuda_api_calls.h"
#include "backend/cuda/cuda_storm.h"
#include "backend/cuda/cuda_untimed.h"
#include "backend/cuda/cuda_trace_alternate.h"
#include "backend/cuda/cuda_trace.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/mode.h"
#include "core/runtime.h"
#include "flare/flare.h"
#include "pm/pm_session.h"
#include "rules/rule.h"

#define PATIENT_WAIT_NS  500000000ull
#define OPEN_RANGES_MAX  4096
#define NVML_DEVICES_MAX 64

static cuda_cupti_api cupti;
static cuda_nvml_api nvml;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int tracing_started;
/* The process that started tracing. A child made by fork() without exec
 * inherits the exit handler but none of the threads or CUPTI state: joining
 * the parent's sampler thread there would wait forever. */
static pid_t tracing_pid;
static int nvtx_forwarded;
/* FLARE_MODE (flare trace --mode): the defaults of the switches below. */
static core_mode mode = CORE_MODE_DEFAULT;
/* The launch callbacks count host launches: without them (the light mode)
 * there is no host_kernel_launches metric to write, rather than zeros. */
static int launches_counted_by_callbacks;
static CUpti_SubscriberHandle subscriber;
/* The activity buffers are registered: deliver may flush them. */
static _Atomic int activity_registered;
static _Atomic int kernel_records_on; /* what range replay by PM sampling times kernels by */
static _Atomic uint64_t ranges_dropped;

/* ---- Activity records ---- */

static cuda_driver_api driver;
static uint64_t devices_described; /* bit per CUDA ordinal; CUPTI buffer thread only */

/* Names a device for the devices table the first time its work is seen.
 * Never called inside InitializeInjection: the driver is still inside cuInit
 * there, and calling back into it breaks the program's CUDA initialisation
 * (seen on the H200: "initialization error"). By the time activity records
 * arrive, the driver is up. */
static void describe_device(uint32_t ordinal)
{
    if (ordinal >= 64 || (devices_described & (1ull << ordinal)))
        return;
    devices_described |= 1ull << ordinal;
    char reason[256];
    CUdevice device;
    char name[128];
    if (cuda_load_driver(&driver, reason, sizeof(reason)) == 0 &&
        driver.cuDeviceGet(&device, (int)ordinal) == CUDA_SUCCESS &&
        driver.cuDeviceGetName(name, sizeof(name), device) == CUDA_SUCCESS)
        core_device_describe((int)ordinal, name, "cuda");
    else
        core_device_describe((int)ordinal, "CUDA device", "cuda");
}

static void emit_kernel(const CUpti_ActivityKernel10 *kernel)
{
    describe_device(kernel->deviceId);
    core_thread *thread;
    core_event *event = core_emit_reserve_patient(&thread, PATIENT_WAIT_NS);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_KERNEL;
    event->start_ns = kernel->start;
    event->end_ns = kernel->end;
    event->id = kernel->correlationId;
    event->stream_id = kernel->streamId;
    event->device = (int32_t)kernel->deviceId;
    event->depth = 0;
    event->context_id = kernel->contextId;
    event->graph_id = kernel->graphId;
    event->graph_node_id = kernel->graphNodeId;
    event->detail.kernel.grid[0] = (uint32_t)kernel->gridX;
    event->detail.kernel.grid[1] = (uint32_t)kernel->gridY;
    event->detail.kernel.grid[2] = (uint32_t)kernel->gridZ;
    event->detail.kernel.block[0] = (uint32_t)kernel->blockX;
    event->detail.kernel.block[1] = (uint32_t)kernel->blockY;
    event->detail.kernel.block[2] = (uint32_t)kernel->blockZ;
    event->detail.kernel.shared_memory_bytes =
        (uint32_t)(kernel->staticSharedMemory + kernel->dynamicSharedMemory);
    event->detail.kernel.registers_per_thread = kernel->registersPerThread;
    const char *name = cuda_demangle(kernel->name);
    core_copy_name(event->name, name);
    if (name != NULL && strlen(name) >= FLARE_NAME_MAX)
        event->long_name = core_intern(name);
    core_emit_commit(thread);
}

static int copy_kind_of(uint8_t cupti_kind)
{
    switch (cupti_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
        return 1; /* BACKEND_COPY_HOST_TO_DEVICE */
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
        return 2;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
        return 3;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return 4;
    default:
        return 0;
    }
}

static void emit_copy(int is_memset, uint64_t start, uint64_t end, uint32_t correlation,
                      uint32_t stream, uint32_t device, uint64_t bytes, int copy_kind,
                      uint32_t graph_id, uint64_t graph_node_id)
{
    describe_device(device);
    core_thread *thread;
    core_event *event = core_emit_reserve_patient(&thread, PATIENT_WAIT_NS);
    if (event == NULL)
        return;
    event->kind = is_memset ? CORE_EVENT_MEMSET : CORE_EVENT_COPY;
    event->start_ns = start;
    event->end_ns = end;
    event->id = correlation;
    event->stream_id = stream;
    event->device = (int32_t)device;
    event->depth = 0;
    event->detail.copy.bytes = bytes;
    event->detail.copy.copy_kind = copy_kind;
    event->detail.copy.status = 0;
    event->graph_id = graph_id;
    event->graph_node_id = graph_node_id;
    event->name[0] = '\0';
    core_emit_commit(thread);
}

/* Emits the records of one completed buffer (cuda_activity_buffers.h). */
static void parse_records(uint8_t *buffer, size_t valid_size)
{
    CUpti_Activity *record = NULL;
    while (valid_size > 0 &&
           cupti.cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            cuda_range_times_offer(((const CUpti_ActivityKernel10 *)record)->correlationId,
                                   ((const CUpti_ActivityKernel10 *)record)->start,
                                   ((const CUpti_ActivityKernel10 *)record)->end);
            if (!cuda_replay_is_internal_work(
                    ((const CUpti_ActivityKernel10 *)record)->correlationId,
                    ((const CUpti_ActivityKernel10 *)record)->name != NULL
                        ? ((const CUpti_ActivityKernel10 *)record)->name
                        : ""))
                emit_kernel((const CUpti_ActivityKernel10 *)record);
            break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *copy = (const CUpti_ActivityMemcpy6 *)record;
            if (cuda_replay_is_internal_work(copy->correlationId, NULL))
                break;
            emit_copy(0, copy->start, copy->end, copy->correlationId, copy->streamId,
                      copy->deviceId, copy->bytes, copy_kind_of(copy->copyKind), copy->graphId,
                      copy->graphNodeId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *set = (const CUpti_ActivityMemset4 *)record;
            if (cuda_replay_is_internal_work(set->correlationId, NULL))
                break;
            emit_copy(1, set->start, set->end, set->correlationId, set->streamId, set->deviceId,
                      set->bytes, 0, set->graphId, set->graphNodeId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const CUpti_ActivityExternalCorrelation *external =
                (const CUpti_ActivityExternalCorrelation *)record;
            core_thread *thread;
            core_event *event = core_emit_reserve_patient(&thread, PATIENT_WAIT_NS);
            if (event != NULL) {
                event->kind = CORE_EVENT_EXTERNAL_CORRELATION;
                event->start_ns = event->end_ns = 0;
                event->id = external->correlationId;
                event->stream_id = 0;
                event->device = -1;
                event->depth = 0;
                event->detail.external.external_id = external->externalId;
                event->detail.external.external_kind = (uint32_t)external->externalKind;
                event->name[0] = '\0';
                core_emit_commit(thread);
            }
            break;
        }
        default:
            break;
        }
    }
}

/* ---- Callbacks: launches and NVTX ---- */

static const char *attributes_message(const nvtxEventAttributes_t *attributes)
{
    if (attributes != NULL && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return attributes->message.ascii;
    return "(unnamed NVTX range)";
}

static cuda_range_table nvtx_ranges = CUDA_RANGE_TABLE_INITIALIZER;

static void range_started(uint64_t id, const char *name)
{
    if (cuda_range_start(&nvtx_ranges, id, name, core_now_ns(), core_new_instance_id()) != 0)
        atomic_fetch_add(&ranges_dropped, 1);
}

static void range_ended(uint64_t id)
{
    /* Timed under the table's lock and kept there until recorded, so PM
     * attribution's snapshot never misses a range on its way to the store. */
    cuda_open_range range;
    if (cuda_range_close(&nvtx_ranges, id, &range) == 0) {
        core_record_interval(range.name, range.start_ns, range.end_ns, 0, range.instance_id);
        cuda_range_forget(&nvtx_ranges, id);
    }
}

typedef struct nvtx_snapshot {
    pm_open_scope *out;
    size_t capacity, count;
} nvtx_snapshot;

static void nvtx_visit(const cuda_open_range *range, void *user)
{
    nvtx_snapshot *snapshot = user;
    if (snapshot->count >= snapshot->capacity)
        return;
    pm_open_scope *scope = &snapshot->out[snapshot->count++];
    scope->scope = (attrib_scope){.start_ns = range->start_ns,
                                  .end_ns = range->end_ns != 0 ? range->end_ns : ATTRIB_OPEN,
                                  .instance_id = range->instance_id,
                                  .depth = 0};
    core_copy_name(scope->name, range->name);
}

/* PM attribution's view of the NVTX start/end ranges still open. */
size_t cuda_trace_open_ranges(pm_open_scope *out, size_t capacity, void *user)
{
    (void)user;
    nvtx_snapshot snapshot = {.out = out, .capacity = capacity};
    cuda_range_visit(&nvtx_ranges, nvtx_visit, &snapshot);
    return snapshot.count;
}

static void handle_nvtx(CUpti_CallbackId id, const CUpti_NvtxData *data)
{
    switch (id) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
        flare_scope_begin(((const nvtxRangePushA_params *)data->functionParams)->message);
        break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
        flare_scope_begin(attributes_message(
            ((const nvtxRangePushEx_params *)data->functionParams)->eventAttrib));
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
        flare_scope_begin(attributes_message(
            ((const nvtxDomainRangePushEx_params *)data->functionParams)->core.eventAttrib));
        break;
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
        flare_scope_end();
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
        if (data->functionReturnValue != NULL)
            range_started(*(const nvtxRangeId_t *)data->functionReturnValue,
                          ((const nvtxRangeStartA_params *)data->functionParams)->message);
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
        if (data->functionReturnValue != NULL)
            range_started(
                *(const nvtxRangeId_t *)data->functionReturnValue,
                attributes_message(
                    ((const nvtxRangeStartEx_params *)data->functionParams)->eventAttrib));
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
        if (data->functionReturnValue != NULL)
            range_started(
                *(const nvtxRangeId_t *)data->functionReturnValue,
                attributes_message(((const nvtxDomainRangeStartEx_params *)data->functionParams)
                                       ->core.eventAttrib));
        break;
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
        range_ended(((const nvtxRangeEnd_params *)data->functionParams)->id);
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
        range_ended(((const nvtxDomainRangeEnd_params *)data->functionParams)->core.id);
        break;
    default:
        break;
    }
}

/* flare's set-up threads (PM sampling, the range profiler) must leave
 * CUPTI before the CUDA runtime tears the context down at exit. The runtime
 * registers its own exit handler after the driver loads flare, so a handler
 * registered then runs too late; one registered at the program's first
 * launch (the runtime is initialised by then) runs before it. */
static _Atomic int exit_wait_registered;

static void wait_for_setup_threads(void)
{
    if (getpid() != tracing_pid) /* a forked child: the threads are the parent's */
        return;
    cuda_pm_wait_for_setup(3000000000ull);
    cuda_rangeprof_wait_for_setup(3000000000ull);
}

static void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *data)
{
    (void)user;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *call = data;
        /* Every launch passes here twice (entry and exit), storms included:
         * one thread-local read, one id test, one relaxed add at entry. */
        if (call->callbackSite == CUPTI_API_ENTER) {
            if (cuda_replay_internal()) {
                /* flare's own replay work (relaunches, shadow copies): its
                 * activity records are kept out of the program's records. */
                cuda_replay_note_internal_work(call->correlationId);
                if (cuda_replay_is_launch(id)) /* a span's re-issued kernel */
                    cuda_range_times_note_launch(call->correlationId);
            } else if (cuda_replay_is_launch(id)) {
                /* Host launches feed the launch rate and the deep windows'
                 * launch bound (one process-wide counter). A PC window's
                 * start or stop runs here, on the program's thread. */
                cuda_session_host->count_launch();
                cuda_app_thread_at_launch();
                if (id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
                    id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz)
                    cuda_graphs_launched(&cupti, id, call);
                if (!atomic_load_explicit(&exit_wait_registered, memory_order_relaxed) &&
                    !atomic_exchange(&exit_wait_registered, 1))
                    atexit(wait_for_setup_threads);
                cuda_api_call_enter(call);
                /* A SASS window counts (and its quiet leaves the kernel
                 * untimed): the launch is what its values are split by. */
                if (cuda_untimed_counting())
                    cuda_untimed_launch(call);
            } else {
                /* A copy or memset while a launch storm has their activity
                 * off: counted (cuda_storm.c). */
                cuda_storm_count_copy(id);
                if (cuda_replay_is_copy(id))
                    cuda_api_call_enter(call);
            }
        } else if (!cuda_replay_internal()) {
            /* The exit of the program's launch, copy or memset (and of the
             * allocations replay watches, which the correlation id test in
             * cuda_api_call_exit skips). */
            cuda_api_call_exit(call);
        }
        /* Replay: the launch bracket, the gate, the allocation inventory. */
        cuda_replay_on_driver(id, call);
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        /* PC sampling is enabled here, before the context's modules load;
         * PM sampling's set-up starts here, on a thread of its own. data is
         * read as CUpti_ResourceData in the callbacks named below only:
         * replay enables the whole domain, whose other callbacks (cuInit
         * finished...) carry other data or none. */
        if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
            cuda_pc_context_created(((const CUpti_ResourceData *)data)->context);
            cuda_sass_context_created(((const CUpti_ResourceData *)data)->context);
            cuda_pm_context_created(((const CUpti_ResourceData *)data)->context);
        } else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
            cuda_pc_context_destroying(((const CUpti_ResourceData *)data)->context);
            cuda_sass_context_destroying(((const CUpti_ResourceData *)data)->context);
            cuda_untimed_context_destroyed();
            cuda_pm_context_destroying(((const CUpti_ResourceData *)data)->context);
        } else if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED &&
                   (cuda_pc_enabled() || cuda_sass_installed())) {
            /* Its cubin, for PC samples' and SASS metrics' source lines
             * (cuda_pc_lines.h). */
            const CUpti_ModuleResourceData *module =
                ((const CUpti_ResourceData *)data)->resourceDescriptor;
            if (module != NULL)
                cuda_pc_lines_module_loaded(module->pCubin, module->cubinSize);
        }
        /* The launch-storm guard weighs each executable CUDA graph. */
        if (id == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED ||
            id == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING)
            cuda_graphs_resource(id, data);
        cuda_replay_on_resource(id, data);
    } else if (domain == CUPTI_CB_DOMAIN_NVTX) {
        handle_nvtx(id, data);
    }
}

/* Every kernel-launch entry point (cuda_callback_ids.h). */
static const CUpti_CallbackId launch_callbacks[] = {CUDA_LAUNCH_IDS(CUDA_CALLBACK_ID)};

/* ---- NVML sampler ---- */

static pthread_t sampler_thread;
static int sampler_running;
static pthread_mutex_t sampler_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sampler_wake;
static int sampler_stop;
static uint32_t sampler_interval_ms = 100;
static cuda_nvml_device nvml_devices[NVML_DEVICES_MAX];
static unsigned int nvml_device_count;

static void sample_nvml(void)
{
    for (unsigned int index = 0; index < nvml_device_count; index++) {
        cuda_nvml_device device = nvml_devices[index];
        cuda_nvml_utilization utilization;
        cuda_nvml_memory memory;
        unsigned int value;
        int d = (int)index;
        if (nvml.nvmlDeviceGetUtilizationRates(device, &utilization) == 0)
            cuda_trace_emit_metric(d, "gpu_utilization_pct", core_now_ns(), utilization.gpu);
        if (nvml.nvmlDeviceGetMemoryInfo(device, &memory) == 0)
            cuda_trace_emit_metric(d, "memory_used_bytes", core_now_ns(), (int64_t)memory.used);
        if (nvml.nvmlDeviceGetPowerUsage(device, &value) == 0)
            cuda_trace_emit_metric(d, "power_mw", core_now_ns(), value);
        if (nvml.nvmlDeviceGetClockInfo(device, CUDA_NVML_CLOCK_SM, &value) == 0)
            cuda_trace_emit_metric(d, "sm_clock_mhz", core_now_ns(), value);
        if (nvml.nvmlDeviceGetTemperature(device, CUDA_NVML_TEMPERATURE_GPU, &value) == 0)
            cuda_trace_emit_metric(d, "temperature_c", core_now_ns(), value);
    }
}

static void *sampler_main(void *argument)
{
    /* Named for top -H and ps, and the H200 soak check's CPU times. */
    pthread_setname_np(pthread_self(), "flare-sampler");
    (void)argument;
    uint64_t next_sample_ns = 0;
    pthread_mutex_lock(&sampler_lock);
    while (!sampler_stop) {
        pthread_mutex_unlock(&sampler_lock);
        uint64_t now = core_now_ns();
        if (now >= next_sample_ns) {
            if (nvml_device_count > 0)
                sample_nvml();
            if (launches_counted_by_callbacks)
                cuda_trace_emit_metric(-1, "host_kernel_launches", now,
                                       (int64_t)cuda_session_host->launch_count());
            uint64_t untimed = cuda_storm_untimed_launches();
            if (untimed != 0)
                cuda_trace_emit_metric(-1, "untimed_kernel_launches", now, (int64_t)untimed);
            next_sample_ns = now + (uint64_t)sampler_interval_ms * 1000000ull;
        }
        cuda_storm_step();
        uint64_t wake_ns = cuda_storm_next_wake(now, next_sample_ns);
        pthread_mutex_lock(&sampler_lock);
        struct timespec deadline = core_deadline_after_ns(wake_ns - now);
        while (!sampler_stop &&
               pthread_cond_timedwait(&sampler_wake, &sampler_lock, &deadline) == 0) {
        }
    }
    pthread_mutex_unlock(&sampler_lock);
    return NULL;
}

static void start_sampler(void)
{
    const char *interval = getenv("FLARE_NVML_INTERVAL_MS");
    uint32_t mode_interval_ms = core_mode_spec_of(mode)->nvml_interval_ms;
    sampler_interval_ms = mode_interval_ms;
    if (interval != NULL && core_parse_u32(interval, 10, 60000, &sampler_interval_ms) != 0) {
        core_log(CORE_LOG_WARNING, "FLARE_NVML_INTERVAL_MS='%.32s' is not 10..60000; using %u",
                 interval, mode_interval_ms);
        sampler_interval_ms = mode_interval_ms;
    }
    char reason[512];
    if (cuda_load_nvml(&nvml, reason, sizeof(reason)) != 0) {
        core_capability_set("nvml", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
    } else {
        int result = nvml.nvmlInit_v2();
        unsigned int count = 0;
        if (result == 0)
            result = nvml.nvmlDeviceGetCount_v2(&count);
        if (result != 0) {
            core_capability_set("nvml", 1, CORE_CAPABILITY_UNAVAILABLE, "NVML: %s",
                                nvml.nvmlErrorString(result));
        } else {
            for (unsigned int i = 0; i < count && i < NVML_DEVICES_MAX; i++)
                if (nvml.nvmlDeviceGetHandleByIndex_v2(i, &nvml_devices[nvml_device_count]) == 0)
                    nvml_device_count++;
            core_capability_set("nvml", 1, CORE_CAPABILITY_ACTIVE,
                                "%u device(s) sampled every %u ms", nvml_device_count,
                                sampler_interval_ms);
        }
    }
    core_cond_init_monotonic(&sampler_wake);
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    sampler_running = pthread_create(&sampler_thread, NULL, sampler_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (!sampler_running)
        cuda_storm_abandon();
}

static void stop_sampler(void)
{
    if (!sampler_running)
        return;
    pthread_mutex_lock(&sampler_lock);
    sampler_stop = 1;
    pthread_cond_signal(&sampler_wake);
    pthread_mutex_unlock(&sampler_lock);
    pthread_join(sampler_thread, NULL);
    sampler_running = 0;
}

/* ---- Start and stop ---- */

static CUptiResult enable_activity(CUpti_ActivityKind kind, const char *feature)
{
    CUptiResult result = cupti.cuptiActivityEnable(kind);
    if (result == CUPTI_SUCCESS)
        core_capability_set(feature, 1, CORE_CAPABILITY_ACTIVE, "CUPTI activity");
    else
        core_capability_set(feature, 1, CORE_CAPABILITY_UNAVAILABLE, "cuptiActivityEnable: %s",
                            cuda_cupti_error_text(&cupti, result));
    return result;
}

static void finish_tracing(void)
{
    /* First, without the lock: a forked child's copy of it may be held by a
     * parent thread that does not exist there (and 0: never started). */
    if (getpid() != tracing_pid)
        return;
    pthread_mutex_lock(&start_lock);
    int started = tracing_started;
    pthread_mutex_unlock(&start_lock);
    if (!started)
        return;
    wait_for_setup_threads(); /* a program that never launched */
    /* Before CUPTI's exit handlers: a SASS window still open stops now. */
    cuda_sass_exit();
    /* The sampler first: it may still switch activity on (a storm guard's
     * slice), and what it lets CUPTI record must be in the last flush. */
    stop_sampler();
    if (cupti.library != NULL)
        cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (launches_counted_by_callbacks)
        cuda_trace_emit_metric(-1, "host_kernel_launches", core_now_ns(),
                               (int64_t)cuda_session_host->launch_count());
    cuda_storm_finish();
    cuda_activity_counts counts;
    cuda_activity_buffers_counts(&counts);
    uint64_t dropped = counts.cupti_dropped;
    uint64_t lost_buffers = counts.buffers_lost;
    uint64_t lost_ranges = atomic_load(&ranges_dropped);
    if (dropped != 0)
        core_log(CORE_LOG_WARNING, "CUPTI dropped %llu activity records in total",
                 (unsigned long long)dropped);
    cuda_trace_record_drops(dropped, lost_buffers, lost_ranges);
    flare_flush(2000);
}

/* An on/off switch from the environment: "1" is on, "0" is off, unset is
 * fallback (the mode's choice); anything else is logged and treated as
 * unset. */
static int switch_or(const char *variable, int fallback)
{
    const char *value = getenv(variable);
    if (value == NULL)
        return fallback;
    if (strcmp(value, "1") == 0 || strcmp(value, "0") == 0)
        return value[0] == '1';
    core_log(CORE_LOG_WARNING, "%s='%.16s' is not 0 or 1; using the %s mode's choice", variable,
             value, core_mode_spec_of(mode)->name);
    return fallback;
}

static int switch_on(const char *variable)
{
    return switch_or(variable, 1);
}

/* Why a part the mode leaves off is off: the variable, or the mode. */
static const char *off_reason(const char *variable, char *text, size_t size)
{
    if (getenv(variable) != NULL)
        snprintf(text, size, "switched off (%s=0)", variable);
    else
        snprintf(text, size, "off in the %s mode (flare trace --mode)",
                 core_mode_spec_of(mode)->name);
    return text;
}

/* Registers the activity buffers and enables each kind flare records,
 * handing every kind enabled to the launch-storm driver (cuda_storm.c).
 * Returns whether kernel activity is on; the capability rows say why not. */
static int start_activity(void)
{
    CUptiResult result = cuda_activity_buffers_register(&cupti, parse_records);
    if (result != CUPTI_SUCCESS) {
        core_capability_set("kernels", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "cuptiActivityRegisterCallbacks: %s",
                            cuda_cupti_error_text(&cupti, result));
        return 0;
    }
    atomic_store(&activity_registered, 1);
    int kernels_timed = 0;
    static const struct {
        CUpti_ActivityKind kind;
        const char *feature;
    } kinds[CUDA_STORM_KINDS_MAX] = {
        {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels"},
        {CUPTI_ACTIVITY_KIND_MEMCPY, "copies"},
        {CUPTI_ACTIVITY_KIND_MEMSET, "memsets"},
        {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "external_correlation"},
    };
    for (size_t i = 0; i < CUDA_STORM_KINDS_MAX; i++)
        if (enable_activity(kinds[i].kind, kinds[i].feature) == CUPTI_SUCCESS) {
            cuda_storm_watch_kind(&cupti, kinds[i].kind);
            kernels_timed |= kinds[i].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        }
    if (cupti.cuptiActivityFlushPeriod != NULL)
        cupti.cuptiActivityFlushPeriod(100);
    return kernels_timed;
}

static int kernel_records(void)
{
    return atomic_load(&kernel_records_on);
}

/* Records the program's launch, copy and memset calls (cuda_api_calls.h)
 * unless FLARE_CUDA_API_CALLS=0: launches ride on the launch callbacks,
 * copies and memsets need their own, switched on here (replay's copy
 * gates, which cost a copy nothing while no replay is configured). */
static void start_api_calls(void)
{
    if (!switch_or("FLARE_CUDA_API_CALLS", core_mode_spec_of(mode)->api_calls)) {
        char why[96];
        core_capability_set("api_calls", 0, CORE_CAPABILITY_OFF, "%s",
                            off_reason("FLARE_CUDA_API_CALLS", why, sizeof(why)));
        return;
    }
    int copies = cuda_replay_watch_copies() == FLARE_OK;
    cuda_api_calls_enable(true);
    core_capability_set("api_calls", 1, copies ? CORE_CAPABILITY_ACTIVE : CORE_CAPABILITY_DEGRADED,
                        copies ? "kernel launches, copies and memsets (not during a launch storm)"
                               : "kernel launches only: not every copy and memset entry point "
                                 "could be watched");
}

/* Subscribes to CUPTI's callbacks: launches (when wanted; kernel replay
 * rides on them), context creation for PM sampling, and NVTX. Returns
 * whether launches are counted; the capability rows say why not. */
static int subscribe_callbacks(int want_launch_callbacks)
{
    int launches_counted = 0;
    CUptiResult result = cupti.cuptiSubscribe(&subscriber, on_callback, NULL);
    if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        const char *why = "another CUPTI subscriber is active in this process (an Nsight tool or "
                          "a framework profiler); launch counts and NVTX ranges are off";
        core_capability_set("launch_callbacks", 1, CORE_CAPABILITY_DEGRADED, "%s", why);
        core_capability_set("nvtx", 1, CORE_CAPABILITY_DEGRADED, "%s", why);
        core_log(CORE_LOG_WARNING, "%s", why);
    } else if (result != CUPTI_SUCCESS) {
        core_capability_set("launch_callbacks", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "cuptiSubscribe: %s", cuda_cupti_error_text(&cupti, result));
        core_capability_set("nvtx", 1, CORE_CAPABILITY_UNAVAILABLE, "cuptiSubscribe: %s",
                            cuda_cupti_error_text(&cupti, result));
    } else {
        int enabled = 0;
        for (size_t i = 0;
             want_launch_callbacks && i < sizeof(launch_callbacks) / sizeof(launch_callbacks[0]);
             i++)
            enabled += cupti.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                                 launch_callbacks[i]) == CUPTI_SUCCESS;
        launches_counted = enabled > 0;
        char why[96];
        if (!want_launch_callbacks)
            core_capability_set("launch_callbacks", 0, CORE_CAPABILITY_OFF, "%s",
                                off_reason("FLARE_CUDA_LAUNCH_CALLBACKS", why, sizeof(why)));
        else
            core_capability_set("launch_callbacks", 1,
                                enabled > 0 ? CORE_CAPABILITY_ACTIVE : CORE_CAPABILITY_UNAVAILABLE,
                                "%d of %zu launch entry points hooked", enabled,
                                sizeof(launch_callbacks) / sizeof(launch_callbacks[0]));
        /* The launch-storm guard counts a graph launch as its kernels: each
         * executable graph is weighed when it is made (cuda_graph_weights.h);
         * without these a graph launch counts as one. */
        if (want_launch_callbacks &&
            (cupti.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) != CUPTI_SUCCESS ||
             cupti.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) !=
                 CUPTI_SUCCESS))
            core_log(CORE_LOG_WARNING, "cannot watch CUDA graph instantiation: each graph "
                                       "launch counts as one launch for the launch-storm guard");
        /* Kernel replay needs the launch bracket, so it rides on the launch
         * callbacks (its own allocation, resource and copy callbacks). */
        if (want_launch_callbacks) {
            cuda_replay_attach(&cupti, subscriber);
            start_api_calls();
        } else {
            core_capability_set("replay", 0, CORE_CAPABILITY_OFF, "no launch callbacks: %s",
                                off_reason("FLARE_CUDA_LAUNCH_CALLBACKS", why, sizeof(why)));
            core_capability_set("api_calls", 0, CORE_CAPABILITY_OFF, "no launch callbacks: %s",
                                off_reason("FLARE_CUDA_LAUNCH_CALLBACKS", why, sizeof(why)));
        }
        cuda_pm_install(&cupti);
        cuda_pc_install(&cupti, launches_counted);
        cuda_sass_install(&cupti, launches_counted);
        if ((cuda_pc_core() != NULL || cuda_sass_core() != NULL) &&
            cupti.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_MODULE_LOADED) != CUPTI_SUCCESS)
            cuda_pc_lines_off("cannot watch module loads (cuptiEnableCallback): PC samples and "
                              "SASS metrics name their function and offset only");
        if (cupti.cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_CONTEXT_CREATED) != CUPTI_SUCCESS)
            core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE,
                                "cannot watch context creation (cuptiEnableCallback)");
        result = cupti.cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_NVTX);
        if (result != CUPTI_SUCCESS)
            core_capability_set("nvtx", 1, CORE_CAPABILITY_UNAVAILABLE, "cuptiEnableDomain: %s",
                                cuda_cupti_error_text(&cupti, result));
        else if (getenv("NVTX_INJECTION64_PATH") == NULL && !nvtx_forwarded)
            core_capability_set("nvtx", 1, CORE_CAPABILITY_DEGRADED,
                                "NVTX_INJECTION64_PATH is not set: NVTX ranges are not seen "
                                "(flare trace sets it)");
        else
            core_capability_set("nvtx", 1, CORE_CAPABILITY_ACTIVE, "CUPTI NVTX callbacks");
    }
    return launches_counted;
}

int cuda_trace_start(const backend_host *host)
{
    cuda_host_set(host);
    pthread_mutex_lock(&start_lock);
    if (tracing_started) {
        pthread_mutex_unlock(&start_lock);
        return 0;
    }
    tracing_started = 1;
    tracing_pid = getpid();
    cuda_crash_trace_install();
    char mode_why[128];
    if (core_mode_from_environment(&mode, mode_why, sizeof(mode_why)) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "%s; using the %s mode", mode_why,
                 core_mode_spec_of(mode)->name);
    int want_activity = switch_on("FLARE_CUDA_ACTIVITY");
    /* A process asked for a replay needs the launch bracket in any mode;
     * so does one whose rules may trigger replays (action replay). */
    int replay_needs_launches =
        cuda_replay_requested() != NULL || rules_list_wants_replay(getenv("FLARE_DEEP_WHEN"));
    int want_launch_callbacks =
        switch_or("FLARE_CUDA_LAUNCH_CALLBACKS",
                  core_mode_spec_of(mode)->launch_callbacks || replay_needs_launches);
    /* The mode row says when replay put the launch callbacks back on: the
     * mode then costs what the standard mode does (docs/cli.md, --mode). */
    core_capability_set("mode", 1, CORE_CAPABILITY_ACTIVE, "%s: %s%s",
                        core_mode_spec_of(mode)->name, core_mode_spec_of(mode)->records,
                        want_launch_callbacks && replay_needs_launches &&
                                !core_mode_spec_of(mode)->launch_callbacks
                            ? "; launch callbacks on for replay"
                            : "");
    char reason[512];
    if (cuda_load_cupti(&cupti, reason, sizeof(reason)) != 0) {
        core_capability_set("kernels", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        core_capability_set("copies", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        core_capability_set("nvtx", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        core_capability_set("launch_callbacks", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        core_log(CORE_LOG_ERROR, "CUDA tracing unavailable: %s", reason);
        pthread_mutex_unlock(&start_lock);
        start_sampler();
        atexit(finish_tracing);
        return -1;
    }
    if (cupti.cuptiActivityRegisterTimestampCallback != NULL)
        cupti.cuptiActivityRegisterTimestampCallback(core_now_ns); /* flare's clock */
    else
        core_log(CORE_LOG_WARNING, "this CUPTI cannot take flare's clock; GPU times use CUPTI's");
    int kernels_timed = 0;
    if (!want_activity) {
        const char *why = "switched off (FLARE_CUDA_ACTIVITY=0)";
        core_capability_set("kernels", 0, CORE_CAPABILITY_OFF, "%s", why);
        core_capability_set("copies", 0, CORE_CAPABILITY_OFF, "%s", why);
        core_capability_set("memsets", 0, CORE_CAPABILITY_OFF, "%s", why);
    } else {
        kernels_timed = start_activity();
    }
    atomic_store(&kernel_records_on, kernels_timed);
    cuda_range_times_attach(cuda_trace_deliver, kernel_records);
    int launches_counted = subscribe_callbacks(want_launch_callbacks);
    launches_counted_by_callbacks = launches_counted;
    uint32_t version = 0;
    cupti.cuptiGetVersion(&version);
    core_capability_set("cuda_injection", 1, CORE_CAPABILITY_ACTIVE, "CUPTI API %u from %s",
                        version, cupti.path);
    core_log(CORE_LOG_INFO, "CUDA tracing started (CUPTI API %u, %s)", version, cupti.path);
    char why[96];
    if (kernels_timed && want_launch_callbacks)
        cuda_storm_set_up(&cupti, launches_counted);
    else if (kernels_timed)
        core_capability_set("storm_guard", 0, CORE_CAPABILITY_OFF, "no launch callbacks: %s",
                            off_reason("FLARE_CUDA_LAUNCH_CALLBACKS", why, sizeof(why)));
    cuda_trace_alternate_start(&cupti, subscriber);
    pthread_mutex_unlock(&start_lock);
    start_sampler();
    atexit(finish_tracing);
    return 0;
}

void cuda_trace_deliver(void)
{
    /* A default flush returns every buffer whose records are all complete,
     * full or not; CUPTI's periodic flush returns full ones only (at a low
     * launch rate, seconds or never: 8 MiB hold about 30,000 kernel
     * records). Not in a forked child: the buffers are the parent's. */
    if (getpid() != tracing_pid || !atomic_load(&activity_registered))
        return;
    cupti.cuptiActivityFlushAll(0);
}

int cuda_trace_forward_nvtx(void *get_export_table)
{
    char reason[512];
    if (cuda_load_cupti(&cupti, reason, sizeof(reason)) != 0 ||
        cupti.InitializeInjectionNvtx2 == NULL) {
        core_capability_set("nvtx", 1, CORE_CAPABILITY_UNAVAILABLE, "%s",
                            cupti.library == NULL ? reason
                                                  : "CUPTI has no InitializeInjectionNvtx2");
        return 0;
    }
    nvtx_forwarded = 1;
    return cupti.InitializeInjectionNvtx2(get_export_table);
}
