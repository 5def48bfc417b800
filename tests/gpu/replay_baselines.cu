// replay_baselines.cu: the yardsticks flare's kernel replay is measured
// against on the GPU machine (scripts/gpu-check-replay.sh). Not part of
// flare: it links CUPTI and libcheckpoint directly, as any CUPTI sample does.
//
//   replay_baselines kernel-replay METRICS FOOTPRINT_MIB REPEATS
//     CUPTI's own kernel-replay mode (range profiler, automatic range) on the
//     same rmw kernel and metric list flare uses: per-pass cost = time from
//     Start to Stop (the launch, CUPTI's save/restore and every pass) / passes.
//   replay_baselines checkpoint FOOTPRINT_MIB...
//     The CUPTI checkpoint API (cuptiCheckpointSave / Restore) on a context
//     holding FOOTPRINT MiB, against a device-to-device copy of the same
//     bytes; checks the restore really brought the memory back.
//   replay_baselines kernel-replay-devices METRICS FOOTPRINT_MIB REPEATS alone|together
//     The same on every GPU, one at a time (alone) or all at once from one
//     thread per GPU (together; a process each, since a context keeps its
//     range profiler): whether CUPTI profiles GPUs of a process in parallel.
//   replay_baselines range-floor METRICS KERNELS COLLECTIONS none|warm|warm-reenable
//     The floor range replay and kernel replay stand on: the range profiler in
//     user-replay mode with automatic ranges, as flare drives it, with nothing
//     else in the process (no restore, no gate, no flare). Each collection runs
//     every pass of METRICS over KERNELS short kernels and reports its Start,
//     Stop and pass times; the first collection in the process carries
//     CUPTI's one-time cost. warm: first a Start/Stop in user-range mode with
//     no range pushed (a warm-up that profiles nothing); warm-reenable: the
//     same, then the profiler disabled and enabled again. Says whether that
//     one-time cost can be paid before the first profiled launch.
//   replay_baselines copy-cost FOOTPRINT_MIB
//     What one snapshot-style restore costs on the host clock (issue, then
//     poll the stream until done, as flare does): one copy of the footprint,
//     the footprint plus three small allocations, and a copy kernel; each
//     with CUPTI off, with CUPTI memcpy + kernel activity on, and with a
//     subscriber's driver callbacks on the copy entry points as well (what
//     flare's trace has on). Locates the fixed cost of small restores.
// Each prints one JSON line per measurement.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_checkpoint.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace NV::Cupti::Checkpoint;

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "replay_baselines: %s: %s\n", #call, cudaGetErrorString(e_));          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CUPTI_CHECK(call)                                                                          \
    do {                                                                                           \
        CUptiResult r_ = (call);                                                                   \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            const char *s_ = "";                                                                   \
            cuptiGetResultString(r_, &s_);                                                         \
            fprintf(stderr, "replay_baselines: %s: %s\n", #call, s_);                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

__global__ void rmw(float4 *x, size_t n4, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = v.x * a + b;
        v.y = v.y * a + b;
        v.z = v.z * a + b;
        v.w = v.w * a + b;
        x[i] = v;
    }
}

static int sm_count()
{
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    return sms;
}

// Splits "a,b,c" into names that live as long as storage.
static std::vector<const char *> split_metrics(const char *metric_list,
                                               std::vector<std::string> &storage)
{
    for (const char *p = metric_list; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        storage.emplace_back(p, n);
        p += n + (comma ? 1 : 0);
    }
    std::vector<const char *> names;
    for (auto &s : storage)
        names.push_back(s.c_str());
    return names;
}

// The range profiler's host side for a metric list: the host object, the
// config image and how many passes it takes. With availability, CUPTI's
// counter availability image for ctx is fetched first (flare skips it).
struct host_config {
    CUpti_Profiler_Host_Object *host_object;
    std::string chip;
    std::vector<uint8_t> config;
    size_t passes;
};

static host_config make_host_config(CUcontext ctx, std::vector<const char *> &names,
                                    bool availability)
{
    host_config made;
    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUPTI_CHECK(cuptiProfilerInitialize(&init));
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    CUPTI_CHECK(cuptiDeviceGetChipName(&chip));
    made.chip = chip.pChipName;
    std::vector<uint8_t> avail_image;
    if (availability) {
        CUpti_Profiler_GetCounterAvailability_Params avail = {
            CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
        avail.ctx = ctx;
        CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail));
        avail_image.resize(avail.counterAvailabilityImageSize);
        avail.pCounterAvailabilityImage = avail_image.data();
        CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail));
    }
    CUpti_Profiler_Host_Initialize_Params host_init = {
        CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host_init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host_init.pChipName = chip.pChipName;
    host_init.pCounterAvailabilityImage = availability ? avail_image.data() : nullptr;
    CUPTI_CHECK(cuptiProfilerHostInitialize(&host_init));
    made.host_object = host_init.pHostObject;
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = made.host_object;
    add.ppMetricNames = names.data();
    add.numMetrics = names.size();
    CUPTI_CHECK(cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params config_size = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    config_size.pHostObject = made.host_object;
    CUPTI_CHECK(cuptiProfilerHostGetConfigImageSize(&config_size));
    made.config.resize(config_size.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params config_image = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    config_image.pHostObject = made.host_object;
    config_image.configImageSize = made.config.size();
    config_image.pConfigImage = made.config.data();
    CUPTI_CHECK(cuptiProfilerHostGetConfigImage(&config_image));
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = made.config.size();
    passes.pConfigImage = made.config.data();
    CUPTI_CHECK(cuptiProfilerHostGetNumOfPasses(&passes));
    made.passes = passes.numOfPasses;
    return made;
}

// Set by kernel-replay-devices: threads wait here after set-up, so their
// timed collections run at the same time; per-collection times come back.
struct replay_thread_options {
    int device;
    std::atomic<int> *barrier;
    int parties;
    std::vector<double> collection_ms;
};

static int kernel_replay(const char *metric_list, size_t footprint_mib, int repeats,
                         replay_thread_options *options = nullptr)
{
    if (options != nullptr)
        CUDA_CHECK(cudaSetDevice(options->device));
    std::vector<std::string> storage;
    std::vector<const char *> names = split_metrics(metric_list, storage);
    size_t bytes = footprint_mib << 20;
    float4 *x = nullptr;
    CUDA_CHECK(cudaMalloc(&x, bytes));
    CUDA_CHECK(cudaMemset(x, 0, bytes));
    int sms = sm_count();
    rmw<<<sms * 8, 256>>>(x, bytes / 16, 1.0001f, 0.5f);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUcontext ctx;
    cuCtxGetCurrent(&ctx);

    // Set-up one thread at a time (concurrent set-up was refused with
    // CUPTI_ERROR_INVALID_PARAMETER on the H200); only collections overlap.
    static std::mutex setup_lock;
    std::unique_lock<std::mutex> setup_guard(setup_lock);
    double setup_start = now_ms();
    host_config host = make_host_config(ctx, names, true);
    std::vector<uint8_t> &config = host.config;
    CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    enable.ctx = ctx;
    CUPTI_CHECK(cuptiRangeProfilerEnable(&enable));
    CUpti_RangeProfiler_GetCounterDataSize_Params data_size = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    data_size.pRangeProfilerObject = enable.pRangeProfilerObject;
    data_size.pMetricNames = names.data();
    data_size.numMetrics = names.size();
    data_size.maxNumOfRanges = 1;
    data_size.maxNumRangeTreeNodes = 1;
    CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&data_size));
    std::vector<uint8_t> counter_data(data_size.counterDataSize);
    double setup_ms = now_ms() - setup_start;
    setup_guard.unlock();

    std::vector<double> per_pass;
    std::vector<double> values(names.size());
    if (options != nullptr) {
        options->barrier->fetch_add(1);
        while (options->barrier->load() < options->parties) {
        }
    }
    for (int r = 0; r < repeats; r++) {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params image = {
            CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
        image.pRangeProfilerObject = enable.pRangeProfilerObject;
        image.counterDataSize = counter_data.size();
        image.pCounterData = counter_data.data();
        CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&image));
        CUpti_RangeProfiler_SetConfig_Params set = {
            CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
        set.pRangeProfilerObject = enable.pRangeProfilerObject;
        set.configSize = config.size();
        set.pConfig = config.data();
        set.counterDataImageSize = counter_data.size();
        set.pCounterDataImage = counter_data.data();
        set.range = CUPTI_AutoRange;
        set.replayMode = CUPTI_KernelReplay;
        set.maxRangesPerPass = 1;
        set.numNestingLevels = 1;
        set.minNestingLevel = 1;
        set.targetNestingLevel = 1;
        CUPTI_CHECK(cuptiRangeProfilerSetConfig(&set));
        double t0 = now_ms();
        CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
        start.pRangeProfilerObject = enable.pRangeProfilerObject;
        CUPTI_CHECK(cuptiRangeProfilerStart(&start));
        rmw<<<sms * 8, 256>>>(x, bytes / 16, 1.0001f, 0.5f);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        stop.pRangeProfilerObject = enable.pRangeProfilerObject;
        CUPTI_CHECK(cuptiRangeProfilerStop(&stop));
        CUpti_RangeProfiler_DecodeData_Params decode = {
            CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
        decode.pRangeProfilerObject = enable.pRangeProfilerObject;
        CUPTI_CHECK(cuptiRangeProfilerDecodeData(&decode));
        double t1 = now_ms();
        per_pass.push_back((t1 - t0) / (double)host.passes);
        if (options != nullptr)
            options->collection_ms.push_back(t1 - t0);
        CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
            CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        evaluate.pHostObject = host.host_object;
        evaluate.pCounterDataImage = counter_data.data();
        evaluate.counterDataImageSize = counter_data.size();
        evaluate.rangeIndex = 0;
        evaluate.ppMetricNames = names.data();
        evaluate.numMetrics = names.size();
        evaluate.pMetricValues = values.data();
        CUPTI_CHECK(cuptiProfilerHostEvaluateToGpuValues(&evaluate));
    }
    std::sort(per_pass.begin(), per_pass.end());
    if (options != nullptr)
        return 0; // the caller prints, one line for all threads
    printf("{\"baseline\":\"cupti_kernel_replay\",\"chip\":\"%s\",\"footprint_mib\":%zu,"
           "\"passes\":%zu,\"host_setup_ms\":%.1f,\"per_pass_ms_median\":%.3f,"
           "\"per_pass_ms_min\":%.3f,\"values\":{",
           host.chip.c_str(), footprint_mib, host.passes, setup_ms, per_pass[per_pass.size() / 2],
           per_pass[0]);
    for (size_t i = 0; i < names.size(); i++)
        printf("%s\"%s\":%.6g", i ? "," : "", names[i], values[i]);
    printf("}}\n");
    return 0;
}

static void CUPTIAPI ignore_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *)
{
}

static int checkpoint(int argc, char **argv)
{
    int sms = sm_count();
    CUcontext ctx;
    CUDA_CHECK(cudaFree(0));
    cuCtxGetCurrent(&ctx);
    int subscribed = 0;
    for (int a = 0; a < argc; a++) {
        size_t bytes = strtoull(argv[a], nullptr, 10) << 20;
        float4 *x = nullptr, *copy = nullptr;
        CUDA_CHECK(cudaMalloc(&x, bytes));
        CUDA_CHECK(cudaMemset(x, 0, bytes));
        rmw<<<sms * 8, 256>>>(x, bytes / 16, 1.0001f, 0.5f);
        CUDA_CHECK(cudaDeviceSynchronize());
        // The copy ceiling for the same bytes (read + write counted).
        CUDA_CHECK(cudaMalloc(&copy, bytes));
        CUDA_CHECK(cudaMemcpy(copy, x, bytes, cudaMemcpyDeviceToDevice));
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
            double t0 = now_ms();
            CUDA_CHECK(cudaMemcpy(copy, x, bytes, cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());
            best = std::min(best, now_ms() - t0);
        }
        CUDA_CHECK(cudaFree(copy));
        float before[4], after[4];
        CUDA_CHECK(cudaMemcpy(before, x, sizeof(before), cudaMemcpyDeviceToHost));

        CUpti_Checkpoint handle;
        memset(&handle, 0, sizeof(handle));
        handle.structSize = CUpti_Checkpoint_STRUCT_SIZE;
        handle.ctx = ctx;
        handle.allowOverwrite = 1;
        double t0 = now_ms();
        CUptiResult result = cuptiCheckpointSave(&handle);
        if (result == CUPTI_ERROR_NOT_INITIALIZED && !subscribed) {
            // Seen on the H200 from inside a callback; a subscriber may be what it needs.
            CUpti_SubscriberHandle subscriber;
            cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)ignore_callback, nullptr);
            subscribed = 1;
            t0 = now_ms();
            result = cuptiCheckpointSave(&handle);
        }
        double save_ms = now_ms() - t0;
        if (result != CUPTI_SUCCESS) {
            const char *text = "";
            cuptiGetResultString(result, &text);
            printf("{\"baseline\":\"cupti_checkpoint\",\"footprint_mib\":%zu,\"error\":\"%s\","
                   "\"subscribed\":%d}\n",
                   bytes >> 20, text, subscribed);
            CUDA_CHECK(cudaFree(x));
            continue;
        }
        std::vector<double> restores;
        int correct = 1;
        for (int r = 0; r < 3; r++) {
            rmw<<<sms * 8, 256>>>(x, bytes / 16, 2.0f, 1.0f); // change everything
            CUDA_CHECK(cudaDeviceSynchronize());
            double r0 = now_ms();
            result = cuptiCheckpointRestore(&handle);
            CUDA_CHECK(cudaDeviceSynchronize());
            restores.push_back(now_ms() - r0);
            CUDA_CHECK(cudaMemcpy(after, x, sizeof(after), cudaMemcpyDeviceToHost));
            correct &= result == CUPTI_SUCCESS && memcmp(before, after, sizeof(before)) == 0;
        }
        std::sort(restores.begin(), restores.end());
        cuptiCheckpointFree(&handle);
        printf("{\"baseline\":\"cupti_checkpoint\",\"footprint_mib\":%zu,\"subscribed\":%d,"
               "\"save_ms\":%.3f,\"restore_ms_median\":%.3f,\"restore_correct\":%d,"
               "\"dtod_ms\":%.3f,\"dtod_gbps\":%.1f,\"restore_gbps\":%.1f}\n",
               bytes >> 20, subscribed, save_ms, restores[1], correct, best,
               2.0 * bytes / (best * 1e-3) / 1e9, 2.0 * bytes / (restores[1] * 1e-3) / 1e9);
        CUDA_CHECK(cudaFree(x));
    }
    return 0;
}

__global__ void copy_words(float4 *destination, const float4 *source, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x)
        destination[i] = source[i];
}

static void CUPTIAPI copy_cost_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI copy_cost_buffer_completed(CUcontext, uint32_t, uint8_t *buffer, size_t,
                                                size_t)
{
    free(buffer);
}

struct copy_job {
    void *destination;
    const void *source;
    size_t bytes;
};

// Median host time (us) of issuing the jobs on stream and polling it empty.
// What runs before each timed restore: nothing (back to back), the GPU
// idle for a while (as while CUPTI's Stop and Start run between passes),
// or a kernel just finished (a restore issued as soon as the pass ends).
enum before_restore { BEFORE_NOTHING, BEFORE_IDLE_20MS, BEFORE_IDLE_1MS, BEFORE_KERNEL };

static double time_jobs(const std::vector<copy_job> &jobs, CUstream stream, bool kernel, int sms,
                        before_restore before = BEFORE_NOTHING, bool yield = false)
{
    std::vector<double> times;
    for (int r = 0; r < (before == BEFORE_NOTHING ? 41 : 15); r++) {
        if (before == BEFORE_IDLE_20MS)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        else if (before == BEFORE_IDLE_1MS)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (before == BEFORE_KERNEL) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            const copy_job &job = jobs[0];
            copy_words<<<sms * 4, 512, 0, (cudaStream_t)stream>>>(
                (float4 *)job.destination, (const float4 *)job.source, job.bytes / 16);
            while (cuStreamQuery(stream) == CUDA_ERROR_NOT_READY) {
            }
        }
        double t0 = now_ms();
        for (const copy_job &job : jobs) {
            if (kernel)
                copy_words<<<sms * 4, 512, 0, (cudaStream_t)stream>>>(
                    (float4 *)job.destination, (const float4 *)job.source, job.bytes / 16);
            else if (cuMemcpyAsync((CUdeviceptr)job.destination, (CUdeviceptr)job.source, job.bytes,
                                   stream) != CUDA_SUCCESS)
                exit(1);
        }
        while (cuStreamQuery(stream) == CUDA_ERROR_NOT_READY) {
            if (yield)
                sched_yield();
        }
        times.push_back((now_ms() - t0) * 1e3);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

static int copy_cost(size_t footprint_mib)
{
    int sms = sm_count();
    size_t bytes = footprint_mib << 20;
    const size_t small[3] = {4u << 20, 1u << 20, 4096};
    void *source = nullptr, *destination = nullptr, *small_source[3], *small_destination[3];
    CUDA_CHECK(cudaMalloc(&source, bytes));
    CUDA_CHECK(cudaMalloc(&destination, bytes));
    CUDA_CHECK(cudaMemset(source, 1, bytes));
    for (int i = 0; i < 3; i++) {
        CUDA_CHECK(cudaMalloc(&small_source[i], small[i]));
        CUDA_CHECK(cudaMalloc(&small_destination[i], small[i]));
    }
    CUstream stream;
    if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return 1;
    std::vector<copy_job> one = {{destination, source, bytes}};
    // Built element by element: copying `one` drew a false -Wstringop-overflow from g++ 13.
    std::vector<copy_job> four = {{destination, source, bytes}};
    for (int i = 0; i < 3; i++)
        four.push_back({small_destination[i], small_source[i], small[i]});
    const char *phases[4] = {"off", "activity", "activity+callbacks",
                             "activity+callbacks+range profiler enabled"};
    for (int phase = 0; phase < 4; phase++) {
        if (phase == 1) {
            CUPTI_CHECK(cuptiActivityRegisterCallbacks(copy_cost_buffer_requested,
                                                       copy_cost_buffer_completed));
            CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
            CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        } else if (phase == 2) {
            CUpti_SubscriberHandle subscriber;
            CUPTI_CHECK(cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)ignore_callback, nullptr));
            CUPTI_CHECK(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                            CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync));
            CUPTI_CHECK(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                            CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
            CUPTI_CHECK(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                            CUPTI_DRIVER_TRACE_CBID_cuStreamQuery));
        } else if (phase == 3) {
            // As during a replay: the range profiler enabled on the context
            // (between collections; flare restores outside Start/Stop).
            CUcontext context;
            cuCtxGetCurrent(&context);
            CUpti_Profiler_Initialize_Params initialize = {
                CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
            CUPTI_CHECK(cuptiProfilerInitialize(&initialize));
            CUpti_RangeProfiler_Enable_Params enable = {
                CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
            enable.ctx = context;
            CUPTI_CHECK(cuptiRangeProfilerEnable(&enable));
        }
        struct {
            const char *name;
            const std::vector<copy_job> *jobs;
            bool kernel;
            before_restore before;
            bool yield;
        } variants[8] = {{"one copy", &one, false, BEFORE_NOTHING, false},
                         {"four copies", &four, false, BEFORE_NOTHING, false},
                         {"copy kernel", &one, true, BEFORE_NOTHING, false},
                         {"one copy after 20 ms idle", &one, false, BEFORE_IDLE_20MS, false},
                         {"one copy after 1 ms idle", &one, false, BEFORE_IDLE_1MS, false},
                         {"one copy right after a kernel (20 ms idle before it)", &one, false,
                          BEFORE_KERNEL, false},
                         {"four copies right after a kernel (20 ms idle before it)", &four, false,
                          BEFORE_KERNEL, false},
                         {"one copy, polling with sched_yield", &one, false, BEFORE_NOTHING, true}};
        for (auto &variant : variants) {
            time_jobs(*variant.jobs, stream, variant.kernel, sms); // warm
            double us = time_jobs(*variant.jobs, stream, variant.kernel, sms, variant.before,
                                  variant.yield);
            size_t moved = 0;
            for (const copy_job &job : *variant.jobs)
                moved += job.bytes;
            printf("{\"baseline\":\"copy_cost\",\"footprint_mib\":%zu,\"cupti\":\"%s\","
                   "\"variant\":\"%s\",\"bytes\":%zu,\"median_us\":%.1f,\"gbps\":%.1f}\n",
                   footprint_mib, phases[phase], variant.name, moved, us,
                   2.0 * moved / (us * 1e-6) / 1e9);
        }
    }
    cuptiActivityFlushAll(1);
    return 0;
}

// CUPTI's kernel replay on every GPU, one GPU at a time and then all at
// once (one thread per GPU): whether CUPTI itself lets profiling on
// different GPUs of one process proceed in parallel.
static int kernel_replay_devices(const char *metric_list, size_t footprint_mib, int repeats,
                                 int together)
{
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    std::atomic<int> barrier(0);
    std::vector<replay_thread_options> options(devices);
    std::vector<std::thread> threads;
    double t0 = now_ms();
    for (int device = 0; device < devices; device++) {
        options[device].device = device;
        options[device].barrier = &barrier;
        options[device].parties = together ? devices : 1;
        if (!together)
            barrier.store(0);
        threads.emplace_back(
            [&, device] { kernel_replay(metric_list, footprint_mib, repeats, &options[device]); });
        if (!together) {
            threads.back().join();
            threads.pop_back();
        }
    }
    for (std::thread &thread : threads)
        thread.join();
    double wall = now_ms() - t0;
    printf("{\"baseline\":\"cupti_kernel_replay_devices\",\"together\":%d,\"devices\":%d,"
           "\"wall_ms\":%.1f,\"collection_ms\":[",
           together, devices, wall);
    for (int device = 0; device < devices; device++) {
        printf("%s[", device ? "," : "");
        for (size_t i = 0; i < options[device].collection_ms.size(); i++)
            printf("%s%.1f", i ? "," : "", options[device].collection_ms[i]);
        printf("]");
    }
    printf("]}\n");
    fflush(stdout);
    return 0;
}

static void print_list(const char *key, const std::vector<double> &values)
{
    printf(",\"%s\":[", key);
    for (size_t i = 0; i < values.size(); i++)
        printf("%s%.2f", i ? "," : "", values[i]);
    printf("]");
}

// Sets the profiler object to a fresh counter data image of `ranges` ranges
// and the given range mode (user replay, pass 0).
static void range_floor_configure(CUpti_RangeProfiler_Object *object,
                                  std::vector<const char *> &names, std::vector<uint8_t> &config,
                                  std::vector<uint8_t> &counter_data, size_t ranges,
                                  CUpti_ProfilerRange range)
{
    CUpti_RangeProfiler_GetCounterDataSize_Params data_size = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    data_size.pRangeProfilerObject = object;
    data_size.pMetricNames = names.data();
    data_size.numMetrics = names.size();
    data_size.maxNumOfRanges = ranges;
    data_size.maxNumRangeTreeNodes = ranges;
    CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&data_size));
    counter_data.assign(data_size.counterDataSize, 0);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params image = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    image.pRangeProfilerObject = object;
    image.counterDataSize = counter_data.size();
    image.pCounterData = counter_data.data();
    CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&image));
    CUpti_RangeProfiler_SetConfig_Params set = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    set.pRangeProfilerObject = object;
    set.configSize = config.size();
    set.pConfig = config.data();
    set.counterDataImageSize = counter_data.size();
    set.pCounterDataImage = counter_data.data();
    set.range = range;
    set.replayMode = CUPTI_UserReplay;
    set.maxRangesPerPass = ranges;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.targetNestingLevel = 1;
    set.passIndex = 0;
    CUPTI_CHECK(cuptiRangeProfilerSetConfig(&set));
}

static int range_floor(const char *metric_list, int kernels, int collections, const char *warm)
{
    std::vector<std::string> storage;
    std::vector<const char *> names = split_metrics(metric_list, storage);
    double process_start = now_ms();
    const size_t bytes = 1u << 20;
    float4 *x = nullptr;
    CUDA_CHECK(cudaMalloc(&x, bytes));
    CUDA_CHECK(cudaMemset(x, 0, bytes));
    int sms = sm_count();
    rmw<<<sms, 256>>>(x, bytes / 16, 1.0001f, 0.5f);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUcontext ctx;
    cuCtxGetCurrent(&ctx);
    double context_ms = now_ms() - process_start;

    // Host set-up as flare does it: no counter availability image.
    double setup_start = now_ms();
    host_config host = make_host_config(ctx, names, false);
    std::vector<uint8_t> &config = host.config;
    CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    enable.ctx = ctx;
    CUPTI_CHECK(cuptiRangeProfilerEnable(&enable));
    double setup_ms = now_ms() - setup_start;

    std::vector<uint8_t> counter_data;
    double warm_ms = 0;
    if (strcmp(warm, "none") != 0) {
        double t0 = now_ms();
        range_floor_configure(enable.pRangeProfilerObject, names, config, counter_data, 1,
                              CUPTI_UserRange);
        CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
        start.pRangeProfilerObject = enable.pRangeProfilerObject;
        CUPTI_CHECK(cuptiRangeProfilerStart(&start));
        CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        stop.pRangeProfilerObject = enable.pRangeProfilerObject;
        CUPTI_CHECK(cuptiRangeProfilerStop(&stop));
        if (!strcmp(warm, "warm-reenable")) {
            CUpti_RangeProfiler_Disable_Params disable = {
                CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
            disable.pRangeProfilerObject = enable.pRangeProfilerObject;
            CUPTI_CHECK(cuptiRangeProfilerDisable(&disable));
            enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
            enable.ctx = ctx;
            CUPTI_CHECK(cuptiRangeProfilerEnable(&enable));
        }
        warm_ms = now_ms() - t0;
    }

    printf("{\"baseline\":\"range_floor\",\"warm\":\"%s\",\"kernels\":%d,\"passes\":%zu,"
           "\"context_ms\":%.1f,\"host_setup_ms\":%.1f,\"warm_ms\":%.1f,\"collections\":[",
           warm, kernels, host.passes, context_ms, setup_ms, warm_ms);
    std::vector<double> values(names.size());
    for (int c = 0; c < collections; c++) {
        double collection_start = now_ms();
        range_floor_configure(enable.pRangeProfilerObject, names, config, counter_data,
                              (size_t)kernels, CUPTI_AutoRange);
        std::vector<double> start_ms, stop_ms, pass_ms;
        for (int pass = 0; pass < 64; pass++) {
            double t0 = now_ms();
            CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
            start.pRangeProfilerObject = enable.pRangeProfilerObject;
            CUPTI_CHECK(cuptiRangeProfilerStart(&start));
            double t1 = now_ms();
            for (int k = 0; k < kernels; k++)
                rmw<<<sms, 256>>>(x, bytes / 16, 1.0001f, 0.5f);
            CUDA_CHECK(cudaDeviceSynchronize());
            double t2 = now_ms();
            CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
            stop.pRangeProfilerObject = enable.pRangeProfilerObject;
            CUPTI_CHECK(cuptiRangeProfilerStop(&stop));
            double t3 = now_ms();
            start_ms.push_back(t1 - t0);
            pass_ms.push_back(t2 - t1);
            stop_ms.push_back(t3 - t2);
            if (stop.isAllPassSubmitted)
                break;
        }
        CUpti_RangeProfiler_DecodeData_Params decode = {
            CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
        decode.pRangeProfilerObject = enable.pRangeProfilerObject;
        CUPTI_CHECK(cuptiRangeProfilerDecodeData(&decode));
        double collection_ms = now_ms() - collection_start;
        CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
            CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
        info.pCounterDataImage = counter_data.data();
        info.counterDataImageSize = counter_data.size();
        CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&info));
        // The last kernel's values: every range must have been collected.
        CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
            CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        evaluate.pHostObject = host.host_object;
        evaluate.pCounterDataImage = counter_data.data();
        evaluate.counterDataImageSize = counter_data.size();
        evaluate.rangeIndex = info.numTotalRanges ? info.numTotalRanges - 1 : 0;
        evaluate.ppMetricNames = names.data();
        evaluate.numMetrics = names.size();
        evaluate.pMetricValues = values.data();
        CUptiResult evaluated = cuptiProfilerHostEvaluateToGpuValues(&evaluate);
        printf("%s{\"collection_ms\":%.1f,\"ranges\":%zu,\"evaluated\":%d,\"first_value\":%.6g",
               c ? "," : "", collection_ms, info.numTotalRanges, evaluated == CUPTI_SUCCESS,
               values[0]);
        print_list("start_ms", start_ms);
        print_list("kernels_ms", pass_ms);
        print_list("stop_ms", stop_ms);
        printf("}");
    }
    printf("]}\n");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "kernel-replay"))
        return kernel_replay(argv[2], strtoull(argv[3], nullptr, 10), atoi(argv[4]));
    if (argc >= 3 && !strcmp(argv[1], "checkpoint"))
        return checkpoint(argc - 2, argv + 2);
    if (argc == 6 && !strcmp(argv[1], "kernel-replay-devices"))
        return kernel_replay_devices(argv[2], strtoull(argv[3], nullptr, 10), atoi(argv[4]),
                                     !strcmp(argv[5], "together"));
    if (argc == 6 && !strcmp(argv[1], "range-floor"))
        return range_floor(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
    if (argc == 3 && !strcmp(argv[1], "copy-cost"))
        return copy_cost(strtoull(argv[2], nullptr, 10));
    fprintf(stderr, "usage: replay_baselines kernel-replay METRICS FOOTPRINT_MIB REPEATS\n"
                    "       replay_baselines checkpoint FOOTPRINT_MIB...\n"
                    "       replay_baselines copy-cost FOOTPRINT_MIB\n"
                    "       replay_baselines range-floor METRICS KERNELS COLLECTIONS "
                    "none|warm|warm-reenable\n"
                    "       replay_baselines kernel-replay-devices METRICS FOOTPRINT_MIB REPEATS "
                    "alone|together\n");
    return 2;
}
