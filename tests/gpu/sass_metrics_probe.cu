// sass_metrics_probe.cu: a study of CUPTI's SASS Metrics API (cupti_sass_metrics.h) before
// flare gets a SASS-metrics deep engine (issue 26), run on the GPU machine by
// scripts/gpu-check-sassprobe.sh. Not part of flare: it links CUPTI directly, as CUPTI's
// sass_metrics sample does. CUPTI patches a kernel's SASS so that each instruction counts
// itself; the probe checks those counts against what the launch geometry says they must be.
//
//   list                          every SASS metric of device 0's chip (name, id,
//                                 description); GetProperties for a few names
//   sample LAUNCHES [eager]       SetConfig (SMP_METRICS, default smsp__sass_inst_executed,
//                                 smsp__sass_thread_inst_executed,
//                                 smsp__sass_inst_executed_op_global_ld; granularity GPU),
//                                 Enable (lazy patching unless eager), LAUNCHES launches of
//                                 hot_chain (dependent global loads) and of cheap_math (FMAs),
//                                 GetDataProperties, FlushData, Disable (data can be read only
//                                 inside the enable/disable range, says the header; window 3
//                                 tries Disable first), UnsetConfig. Prints
//                                 each (function, pcOffset) with its values and source line
//                                 (cuptiGetSassToSourceCorrelation on the cubin kept from the
//                                 module-loaded callback, matched by cubinCrc), totals per
//                                 function, and per kernel a loop instruction's expected count
//                                 (launches x warps x iterations) against CUPTI's largest
//   cost LAUNCHES ROUNDS [eager]  time per launch (cudaEvent) with SASS metrics off (no
//                                 config), configured (after a disable, or after SetConfig) and
//                                 enabled (after a first launch per kernel, timed apart as it
//                                 patches), the order rotating per round: medians, ratios paired
//                                 by round against off, the time of each CUPTI call
//   window [eager]                four windows in one process (Enable, launches, FlushData,
//                                 Disable): is a kernel run before the enable patched, and one
//                                 first launched inside; does a second enable work; does data
//                                 leak from the window before, from launches between windows,
//                                 from a window disabled unflushed (its flush after Disable is
//                                 tried)? Then Enable, FlushData and Disable from a second
//                                 std::thread while the main one launches
//
// One JSON object per line on stdout, the first "env" (device, chip, driver, runtime and CUPTI
// versions); a one-line summary on stderr. Exit status: 0; 1 when a CUDA or CUPTI call the mode
// needs fails (the call and the error's name printed); 2 usage; 3 when an expectation fails
// (counts not exact, no record of a kernel, a leak, a refused re-enable); 4 when a call from
// the second thread fails or does not return within SMP_THREAD_WAIT_S (default 20 s); 124 when
// the SIGALRM deadline, SMP_DEADLINE_S (default 110 s), passes: the step under way is printed.
//
// What it must never do: wait without a bound (patched batches are cut to SMP_BATCH_BUDGET_S,
// default 4 s, at their first launch's pace), hide an error, or leave anything behind (no
// files, no device setting). CUPTI's function-name strings are left to the process exit
// (NVIDIA's sample frees each; name_pointers_distinct says whether records share them).
// SMP_TARGET_MS (default 2): an unpatched launch's length; SMP_NO_SUBSCRIBE=1: no
// module-loaded callback, so no source lines; SMP_DRIVER_CB=1: every driver-API callback
// on too; SMP_ACTIVITY=1 (or letters, see activity_start): CUPTI activity tracing of
// kernels, copies and memsets (flare's pieces, to find which of them keeps SASS counts at 0,
// session 18); SMP_TIMESTAMP_CB=1: CUPTI's timestamps from the probe's clock; SMP_NVTX_CB=1:
// the NVTX callback domain on; SMP_EARLY_CONFIG=1:
// `sample` configures before the kernels' modules load, as flare does.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#define PFX   "sass_metrics_probe: "
#define TF(b) ((b) ? "true" : "false")

// ---------------------------------------------------------------- errors and output

static volatile sig_atomic_t g_alarm_status = 124;
static std::atomic<const char *> g_step{"start"}; // a string literal: the step under way
static const char *g_mode = "";

static void on_deadline(int)
{
    static const char msg[] = PFX "deadline passed (SMP_DEADLINE_S or exit handlers) in step: ";
    const char *s = g_step.load();
    if (write(2, msg, sizeof msg - 1) < 0 || write(2, s, strlen(s)) < 0 || write(2, "\n", 1) < 0) {
    }
    _exit(g_alarm_status);
}

// Exits with status; CUPTI's exit handlers get 15 s.
static void die(int status)
{
    fflush(stdout);
    fflush(stderr);
    g_alarm_status = status;
    alarm(15);
    exit(status);
}

static const char *cupti_name(CUptiResult r)
{
    const char *s = nullptr;
    return cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s ? s : "CUPTI_ERROR_(unknown result)";
}

// Prints a failure unless quiet (a call made to see what CUPTI answers: the answer goes into
// the JSON); returns r.
static CUptiResult note(CUptiResult r, const char *what, bool quiet = false)
{
    if (r != CUPTI_SUCCESS && !quiet)
        fprintf(stderr, PFX "%s: %s\n", what, cupti_name(r));
    return r;
}

// A CUDA call the mode needs: a failure is printed and ends the process (status 1).
static void need_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, PFX "%s: %s: %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    die(1);
}
#define CUDA_CHECK(call)  need_cuda((call), #call)
#define CUPTI_CHECK(call) (note((call), #call) == CUPTI_SUCCESS ? (void)0 : die(1))

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(nullptr, 0, f, ap);
    va_end(ap);
    std::vector<char> buf((size_t)std::max(n, 0) + 1);
    va_start(ap, f);
    vsnprintf(buf.data(), buf.size(), f, ap);
    va_end(ap);
    return buf.data();
}

// Prints {"probe":"sass","mode":MODE, then fields (each starting with a comma), then }.
static void emit(const std::string &fields)
{
    printf("{\"probe\":\"sass\",\"mode\":\"%s\"%s}\n", g_mode, fields.c_str());
    fflush(stdout);
}

// s as a JSON string.
static std::string q(const std::string &s)
{
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\')
            o += '\\';
        o += c < 0x20 ? fmt("\\u%04x", c) : std::string(1, (char)c);
    }
    return o + "\"";
}

// null for success, else the result's name.
static std::string rs(CUptiResult r)
{
    return r == CUPTI_SUCCESS ? "null" : q(cupti_name(r));
}

static std::string num(double x, bool valid)
{
    return valid ? fmt("%.4f", x) : "null";
}

static double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

static double env_num(const char *name, double dflt)
{
    const char *v = getenv(name);
    char *end = nullptr;
    double x = v && *v ? strtod(v, &end) : dflt;
    if (v && *v && (end == v || *end != 0 || x < 0)) {
        fprintf(stderr, PFX "%s=%s is not a number >= 0, using %g\n", name, v, dflt);
        return dflt;
    }
    return x;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? -1 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static std::string med(const std::vector<double> &v)
{
    return num(median(v), !v.empty());
}

// ---------------------------------------------------------------- state

struct metric {
    std::string name;
    uint64_t id;
};

// The device and the configured metrics.
static struct {
    CUcontext ctx = nullptr;
    std::string device, chip;
    int sms = 0;
    bool lazy = true, subscribed = false;
    std::vector<metric> metrics;
    std::vector<CUpti_SassMetrics_Config> config;
    uint64_t id_inst = 0, id_thread = 0, id_ld = 0;
    bool have_thread = false, have_ld = false;
} g;

// {"metric name":value,...}
static std::string jvalues(const std::map<uint64_t, uint64_t> &m)
{
    std::string o;
    for (auto &kv : m) {
        std::string name = "id_" + std::to_string(kv.first);
        for (auto &mt : g.metrics)
            name = mt.id == kv.first ? mt.name : name;
        o += fmt("%s%s:%llu", o.empty() ? "" : ",", q(name).c_str(), (unsigned long long)kv.second);
    }
    return "{" + o + "}";
}

// ---------------------------------------------------------------- workload

#define CHAIN_LEN (64u << 20) // 64 Mi ints (256 MiB): far past the 50 MB L2

// next[i] = (a*i + c) mod 2^26: one cycle through every index, steps far apart.
__global__ void init_chain(unsigned *next, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        next[i] = (0x9E3779B1u * i + 0x3C6EF35Fu) & (n - 1);
}

// The known loop: ITERS dependent loads per thread, never unrolled, so each instruction of its
// body runs ITERS times per warp. lines[0..1] get the loop's first and last source line.
__global__ void hot_chain(const unsigned *next, unsigned mask, int iters, unsigned *out, int *lines)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned idx = (tid * 0x85EBCA6Bu + 0x27D4EB2Fu) & mask;
    enum { kHotFirst = __LINE__ + 2 };
#pragma unroll 1
    for (int i = 0; i < iters; ++i) { // HOT LOOP: pointer chasing, one miss per step
        idx = next[idx];
    }
    enum { kHotLast = __LINE__ - 1 };
    out[tid] = idx * 3u + (tid ^ 0x5bd1e995u);
    if (tid == 0) {
        lines[0] = kHotFirst;
        lines[1] = kHotLast;
    }
}

// FMAs only, for contrast; lines[2..3] get its loop's lines.
__global__ void cheap_math(int iters, float *out, int *lines)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float a = tid * 1e-7f, b = 1.0f - a, c = 0.25f;
    enum { kCheapFirst = __LINE__ + 2 };
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, 0.5f, b);
        b = fmaf(b, 0.5f, c);
        c = fmaf(c, 0.5f, 0.1f);
    }
    enum { kCheapLast = __LINE__ - 1 };
    out[tid] = a + b + c;
    if (tid == 0) {
        lines[2] = kCheapFirst;
        lines[3] = kCheapLast;
    }
}

// Launched only inside a window: each instruction runs once per warp.
__global__ void late_kernel(unsigned *out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    out[tid] = tid * 2654435761u + 12345u;
}

enum { K_HOT, K_CHEAP, K_LATE };
static const char *kernel_names[3] = {"hot_chain", "cheap_math", "late_kernel"};

struct workload {
    unsigned *next = nullptr, *out_u = nullptr;
    float *out_f = nullptr;
    int *lines = nullptr;
    int blocks = 0, threads = 256, iters[2] = {0, 0}, first[3] = {0, 0, 0}, last[3] = {0, 0, 0};
    uint64_t warps = 0;
    // What one launch of k adds to the warp-level count of one of its loop instructions.
    uint64_t per_launch(int k) const
    {
        return k == K_LATE ? warps : warps * (uint64_t)iters[k];
    }
};

static void launch(const workload &w, int k)
{
    if (k == K_HOT)
        hot_chain<<<w.blocks, w.threads>>>(w.next, CHAIN_LEN - 1, w.iters[K_HOT], w.out_u, w.lines);
    else if (k == K_CHEAP)
        cheap_math<<<w.blocks, w.threads>>>(w.iters[K_CHEAP], w.out_f, w.lines);
    else
        late_kernel<<<w.blocks, w.threads>>>(w.out_u);
    CUDA_CHECK(cudaGetLastError());
}

// n launches back to back, an event between each; per-launch GPU times.
static std::vector<double> time_batch(const workload &w, int k, int n)
{
    std::vector<double> ms;
    std::vector<cudaEvent_t> ev((size_t)std::max(n, 0) + 1);
    for (auto &e : ev)
        CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(ev[0]));
    for (int i = 0; i < n; ++i) {
        launch(w, k);
        CUDA_CHECK(cudaEventRecord(ev[(size_t)i + 1]));
    }
    CUDA_CHECK(cudaEventSynchronize(ev.back()));
    for (size_t i = 0; i + 1 < ev.size(); ++i) {
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
        ms.push_back(t);
    }
    for (auto &e : ev)
        CUDA_CHECK(cudaEventDestroy(e));
    return ms;
}

// Buffers, the chain, both loop kernels calibrated to about SMP_TARGET_MS a launch (so both
// run here, before any enable), their loop lines read back.
static void workload_init(workload &w)
{
    g_step = "workload init and calibration";
    w.blocks = g.sms * 8; // 2048 threads per SM, every warp full
    w.warps = (uint64_t)w.blocks * (uint64_t)(w.threads / 32);
    size_t nthreads = (size_t)w.blocks * w.threads;
    CUDA_CHECK(cudaMalloc(&w.next, (size_t)CHAIN_LEN * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&w.out_u, nthreads * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&w.out_f, nthreads * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&w.lines, 4 * sizeof(int)));
    init_chain<<<g.sms * 16, 256>>>(w.next, CHAIN_LEN);
    CUDA_CHECK(cudaGetLastError());
    for (int k = 0; k < 2; ++k) {
        w.iters[k] = k == K_HOT ? 64 : 1024;
        for (int pass = 0; pass < 4; ++pass) {
            double ms = std::max(time_batch(w, k, 2)[1], 1e-3);
            double scale = std::min(env_num("SMP_TARGET_MS", 2) / ms, 64.0);
            if (scale > 0.9 && scale < 1.1)
                break;
            long next = std::min((long)(w.iters[k] * scale), k == K_HOT ? 1L << 20 : 1L << 26);
            w.iters[k] = (int)std::max(16L, next);
        }
    }
    int lines[4] = {0, 0, 0, 0};
    CUDA_CHECK(cudaMemcpy(lines, w.lines, sizeof lines, cudaMemcpyDeviceToHost));
    for (int k = 0; k < 2; ++k)
        w.first[k] = lines[2 * k], w.last[k] = lines[2 * k + 1];
}

// ---------------------------------------------------------------- CUPTI set-up

// Cubins kept from CUPTI_CBID_RESOURCE_MODULE_LOADED (valid only in the callback).
struct module_copy {
    std::vector<char> cubin;
    uint64_t crc = 0;
    bool crc_ok = false;
};
static std::mutex g_modules_mu;
static std::vector<module_copy> g_modules;

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *cbdata)
{
    if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED || !cbdata)
        return;
    const CUpti_ResourceData *rd = (const CUpti_ResourceData *)cbdata;
    const CUpti_ModuleResourceData *md = (const CUpti_ModuleResourceData *)rd->resourceDescriptor;
    if (md == nullptr || md->pCubin == nullptr || md->cubinSize == 0)
        return;
    module_copy m;
    m.cubin.assign(md->pCubin, md->pCubin + md->cubinSize);
    std::lock_guard<std::mutex> lock(g_modules_mu);
    g_modules.push_back(std::move(m));
}

// SMP_ACTIVITY: CUPTI activity tracing as flare does it, in parts, to find which keeps
// SASS counts at 0 (session 18): letters k (kernel activity), c (copy and memset
// activity), p (CUPTI's periodic flush, 100 ms), f (`sample`: cuptiActivityFlushAll just
// before the SASS flush), o (`sample`: kernel activity off from before the SASS enable to
// after its disable), r (`sample`: kernel activity off after the launches, before the SASS
// flush); "1" is kcp. Made before any CUDA call; the records are counted, and the count
// printed at the exit (after a last flush).
static std::atomic<uint64_t> g_activity_records{0};
static std::string g_activity;

static bool activity_has(char letter)
{
    return g_activity.find(letter) != std::string::npos;
}

static void CUPTIAPI activity_buffer(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 1u << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI activity_done(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t valid)
{
    CUpti_Activity *record = nullptr;
    while (buffer && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
        g_activity_records++;
    free(buffer);
}

static uint64_t CUPTIAPI probe_clock()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static bool activity_start()
{
    // SMP_TIMESTAMP_CB=1: CUPTI's timestamps from the probe's clock, as flare registers its own.
    if (env_num("SMP_TIMESTAMP_CB", 0) != 0)
        CUPTI_CHECK(cuptiActivityRegisterTimestampCallback(probe_clock));
    const char *env = getenv("SMP_ACTIVITY");
    g_activity = env == nullptr || strcmp(env, "0") == 0 ? "" : strcmp(env, "1") == 0 ? "kcp" : env;
    if (g_activity.empty())
        return false;
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(activity_buffer, activity_done));
    if (activity_has('k'))
        CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (activity_has('c')) {
        CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
        CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    }
    if (activity_has('p'))
        note(cuptiActivityFlushPeriod(100), "cuptiActivityFlushPeriod");
    return true;
}

// Kernel activity on or off around the SASS calls (letters o and r).
static void activity_kernels(bool on)
{
    note(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
         on ? "cuptiActivityEnable(kernel)" : "cuptiActivityDisable(kernel)");
}

// Context on device 0, cuptiProfilerInitialize (NVIDIA's sample calls it before any SASS
// metrics call), the chip name; prints the "env" line. Dies when a call it needs fails.
static void start()
{
    g_step = "cuda init";
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(0));
    if (cuCtxGetCurrent(&g.ctx) != CUDA_SUCCESS || g.ctx == nullptr) {
        fprintf(stderr, PFX "cuCtxGetCurrent: no context\n");
        die(1);
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    g.device = prop.name;
    g.sms = prop.multiProcessorCount;
    int drv = 0, rt = 0;
    uint32_t cupti_version = 0;
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    CUPTI_CHECK(cuptiGetVersion(&cupti_version));
    g_step = "cuptiProfilerInitialize";
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    double t = now_ms();
    CUPTI_CHECK(cuptiProfilerInitialize(&ip));
    t = now_ms() - t;
    CUpti_Profiler_DeviceSupported_Params sp = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    sp.cuDevice = 0;
    sp.api = CUPTI_PROFILER_SASS_METRICS;
    CUptiResult sr = note(cuptiProfilerDeviceSupported(&sp), "cuptiProfilerDeviceSupported");
    CUpti_Device_GetChipName_Params cp = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cp.deviceIndex = 0;
    CUPTI_CHECK(cuptiDeviceGetChipName(&cp));
    g.chip = cp.pChipName ? cp.pChipName : "";
    const char *loading = getenv("CUDA_MODULE_LOADING");
    // Support levels: 0 unknown, 1 unsupported, 2 disabled, 3 supported.
    emit(fmt(",\"env\":true,\"device\":%s,\"chip\":%s,\"cc\":\"%d.%d\",\"sms\":%d,"
             "\"driver_version\":%d,\"runtime_version\":%d,\"cupti_version\":%u,"
             "\"cupti_api_version_built\":%d,\"profiler_initialize_ms\":%.3f,\"subscriber\":%s,"
             "\"cuda_module_loading\":%s,\"device_supported\":%s,\"sass_metrics_supported\":%d,"
             "\"levels_arch_sli_vgpu_cc_cmp_wsl\":[%d,%d,%d,%d,%d,%d]",
             q(g.device).c_str(), q(g.chip).c_str(), prop.major, prop.minor, g.sms, drv, rt,
             cupti_version, (int)CUPTI_API_VERSION, t, TF(g.subscribed),
             q(loading ? loading : "").c_str(), rs(sr).c_str(), (int)sp.isSupported,
             (int)sp.architecture, (int)sp.sli, (int)sp.vGpu, (int)sp.confidentialCompute,
             (int)sp.cmp, (int)sp.wsl));
    if (sr == CUPTI_SUCCESS && sp.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
        fprintf(stderr, PFX "device 0: SASS metrics not reported supported (%d); going on\n",
                (int)sp.isSupported);
}

static CUptiResult metric_props(const std::string &name, uint64_t *id, std::string *desc)
{
    CUpti_SassMetrics_GetProperties_Params p = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
    p.pChipName = g.chip.c_str();
    p.pMetricName = name.c_str();
    CUptiResult r = cuptiSassMetricsGetProperties(&p);
    *id = r == CUPTI_SUCCESS ? p.metric.metricId : 0;
    *desc = r == CUPTI_SUCCESS && p.metric.pMetricDescription ? p.metric.pMetricDescription : "";
    return r;
}

// SMP_METRICS (or the default) into g.metrics and g.config at GPU granularity; a name CUPTI
// refuses is skipped, its error in the "config" line. Dies without smsp__sass_inst_executed.
static void resolve_metrics()
{
    const char *env = getenv("SMP_METRICS");
    std::string list = env && *env ? env
                                   : "smsp__sass_inst_executed,smsp__sass_thread_inst_executed,"
                                     "smsp__sass_inst_executed_op_global_ld";
    std::string out, desc;
    bool have_inst = false;
    for (size_t pos = 0, comma; pos < list.size(); pos = comma + 1) {
        comma = std::min(list.find(',', pos), list.size());
        std::string name = list.substr(pos, comma - pos);
        uint64_t id = 0;
        CUptiResult r = metric_props(name, &id, &desc);
        out += fmt("%s%s:%s", out.empty() ? "" : ",", q(name).c_str(),
                   r == CUPTI_SUCCESS ? std::to_string(id).c_str() : rs(r).c_str());
        if (r != CUPTI_SUCCESS)
            continue;
        g.metrics.push_back({name, id});
        g.config.push_back({id, (uint8_t)CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU});
        if (name == "smsp__sass_inst_executed")
            have_inst = true, g.id_inst = id;
        else if (name == "smsp__sass_thread_inst_executed")
            g.have_thread = true, g.id_thread = id;
        else if (name == "smsp__sass_inst_executed_op_global_ld")
            g.have_ld = true, g.id_ld = id;
    }
    emit(fmt(",\"config\":true,\"granularity\":\"gpu\",\"metrics\":{%s}", out.c_str()));
    if (!have_inst) {
        fprintf(stderr, PFX "smsp__sass_inst_executed is not configured: nothing to check\n");
        die(1);
    }
}

// ---------------------------------------------------------------- CUPTI calls

// Times one call (ms may be null); prints a failure unless quiet.
template <class F> static CUptiResult timed(double *ms, const char *what, bool quiet, F call)
{
    double t = now_ms();
    CUptiResult r = call();
    if (ms)
        *ms = now_ms() - t;
    return note(r, what, quiet);
}

static CUptiResult set_config(double *ms)
{
    CUpti_SassMetricsSetConfig_Params p = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
    p.numOfMetricConfig = g.config.size();
    p.pConfigs = g.config.data();
    p.deviceIndex = 0;
    return timed(ms, "cuptiSassMetricsSetConfig", false,
                 [&] { return cuptiSassMetricsSetConfig(&p); });
}

static CUptiResult unset_config(double *ms)
{
    CUpti_SassMetricsUnsetConfig_Params p = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
    p.deviceIndex = 0;
    return timed(ms, "cuptiSassMetricsUnsetConfig", false,
                 [&] { return cuptiSassMetricsUnsetConfig(&p); });
}

static CUptiResult enable(double *ms)
{
    CUpti_SassMetricsEnable_Params p = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
    p.ctx = g.ctx;
    p.enableLazyPatching = g.lazy ? 1 : 0;
    return timed(ms, "cuptiSassMetricsEnable", false, [&] { return cuptiSassMetricsEnable(&p); });
}

static CUptiResult disable(size_t *dropped, double *ms)
{
    CUpti_SassMetricsDisable_Params p = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
    p.ctx = g.ctx;
    CUptiResult r =
        timed(ms, "cuptiSassMetricsDisable", false, [&] { return cuptiSassMetricsDisable(&p); });
    *dropped = p.numOfDroppedRecords;
    return r;
}

static CUptiResult data_props(size_t *records, size_t *instances, double *ms, bool quiet)
{
    CUpti_SassMetricsGetDataProperties_Params p = {
        CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
    p.ctx = g.ctx;
    CUptiResult r = timed(ms, "cuptiSassMetricsGetDataProperties", quiet,
                          [&] { return cuptiSassMetricsGetDataProperties(&p); });
    *records = p.numOfPatchedInstructionRecords;
    *instances = p.numOfInstances;
    return r;
}

// What one GetDataProperties + FlushData gave: per (function, pcOffset) and metric id, the
// values summed over instances (and over records, should one PC come in two).
struct pc_agg {
    std::map<uint64_t, uint64_t> sum;
    uint32_t crc = 0, function_index = 0, records = 0;
};
struct flushed {
    CUptiResult props = CUPTI_SUCCESS, flush = CUPTI_SUCCESS;
    bool called = false;
    size_t records = 0, instances = 0;
    double props_ms = 0, flush_ms = 0;
    std::map<std::pair<std::string, uint32_t>, pc_agg> pcs;
    std::map<size_t, size_t> written; // values CUPTI wrote in a record -> records
    std::set<const void *> names;
};

// GetDataProperties, then FlushData into buffers with room to spare: each record gets
// instances x metrics + 4 values pre-filled with a sentinel, so the output shows how many
// values CUPTI writes per record (the header leaves the layout for several metrics open). A
// record's structSize is sizeof (the header says "CUpti_SassMetricsFlushData_Params_STRUCT_SIZE";
// NVIDIA's sample leaves it unset). Returns the first failure.
static CUptiResult flush(flushed &f, bool quiet)
{
    const uint64_t sentinel = 0xFEEDFACECAFEBEEFull;
    f.props = data_props(&f.records, &f.instances, &f.props_ms, quiet);
    if (f.props != CUPTI_SUCCESS || f.records == 0)
        return f.props;
    const size_t cap = f.instances * g.metrics.size() + 4;
    if (f.records > (1u << 22) || f.instances > (1u << 16) || f.records * cap > (64u << 20)) {
        fprintf(stderr, PFX "flush: %zu records x %zu instances: past the probe's cap\n", f.records,
                f.instances);
        return f.flush = CUPTI_ERROR_UNKNOWN;
    }
    std::vector<CUpti_SassMetrics_Data> data(f.records);
    std::vector<CUpti_SassMetrics_InstanceValue> vals(f.records * cap, {sentinel, sentinel});
    for (size_t i = 0; i < data.size(); ++i) {
        memset(&data[i], 0, sizeof data[i]);
        data[i].structSize = sizeof(CUpti_SassMetrics_Data);
        data[i].pInstanceValues = &vals[i * cap];
    }
    CUpti_SassMetricsFlushData_Params p = {CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
    p.ctx = g.ctx;
    p.numOfPatchedInstructionRecords = f.records;
    p.numOfInstances = f.instances;
    p.pMetricsData = data.data();
    f.called = true;
    f.flush = timed(&f.flush_ms, "cuptiSassMetricsFlushData", quiet,
                    [&] { return cuptiSassMetricsFlushData(&p); });
    for (size_t i = 0; i < data.size() && f.flush == CUPTI_SUCCESS; ++i) {
        const CUpti_SassMetrics_Data &d = data[i];
        pc_agg &a = f.pcs[{d.functionName ? d.functionName : "(null)", d.pcOffset}];
        a.crc = d.cubinCrc, a.function_index = d.functionIndex, a.records++;
        f.names.insert(d.functionName);
        size_t written = 0;
        for (size_t j = 0; j < cap; ++j) {
            const CUpti_SassMetrics_InstanceValue &v = vals[i * cap + j];
            if (v.metricId != sentinel || v.value != sentinel)
                written++, a.sum[v.metricId] += v.value == sentinel ? 0 : v.value;
        }
        f.written[written]++;
    }
    return f.flush;
}

static uint64_t get(const pc_agg &a, uint64_t id)
{
    auto it = a.sum.find(id);
    return it == a.sum.end() ? 0 : it->second;
}

// ,"flush":{...}: the calls' results and what the buffers showed.
static std::string jflushed(const flushed &f)
{
    uint32_t max_rec = 0;
    for (auto &kv : f.pcs)
        max_rec = std::max(max_rec, kv.second.records);
    std::string written;
    for (auto &kv : f.written)
        written += fmt("%s\"%zu\":%zu", written.empty() ? "" : ",", kv.first, kv.second);
    return fmt(",\"flush\":{\"get_data_properties\":%s,\"flush_data\":%s,\"records\":%zu,"
               "\"instances\":%zu,\"props_ms\":%.3f,\"flush_ms\":%.3f,\"pcs\":%zu,"
               "\"max_records_per_pc\":%u,\"name_pointers_distinct\":%zu,"
               "\"values_written_per_record\":{%s}}",
               rs(f.props).c_str(), f.called ? rs(f.flush).c_str() : "\"not called\"", f.records,
               f.instances, f.props_ms, f.flush_ms, f.pcs.size(), max_rec, f.names.size(),
               written.c_str());
}

// ---------------------------------------------------------------- source lines

struct line_info {
    bool ok = false;
    std::string where; // file base name:line
    uint32_t line = 0;
};
struct correlation {
    std::map<std::pair<std::string, uint32_t>, line_info> cache;
    size_t ok = 0, failed = 0;
    std::set<std::string> crc_match; // how records' CRCs met the modules': full, low32, none
};

static void compute_module_crcs()
{
    std::lock_guard<std::mutex> lock(g_modules_mu);
    for (auto &m : g_modules) {
        CUpti_GetCubinCrcParams cp;
        memset(&cp, 0, sizeof cp);
        cp.size = CUpti_GetCubinCrcParamsSize;
        cp.cubinSize = m.cubin.size();
        cp.cubin = m.cubin.data();
        m.crc_ok = note(cuptiGetCubinCrc(&cp), "cuptiGetCubinCrc") == CUPTI_SUCCESS;
        m.crc = cp.cubinCrc;
    }
}

// The source line of one PC: the modules whose cuptiGetCubinCrc (64 bits) equals the record's
// 32-bit cubinCrc, else its low 32 bits, are tried first, then every other kept module.
static const line_info &correlate(correlation &cor, const std::string &func, uint32_t off,
                                  uint32_t crc)
{
    auto it = cor.cache.find({func, off});
    if (it != cor.cache.end())
        return it->second;
    line_info li;
    std::vector<const module_copy *> order;
    {
        std::lock_guard<std::mutex> lock(g_modules_mu);
        const char *kind = "none";
        for (auto &m : g_modules)
            if (m.crc_ok && m.crc == (uint64_t)crc)
                order.push_back(&m), kind = "full";
        for (auto &m : g_modules)
            if (order.empty() && m.crc_ok && (uint32_t)m.crc == crc)
                order.push_back(&m), kind = "low32";
        cor.crc_match.insert(kind);
        for (auto &m : g_modules)
            if (std::find(order.begin(), order.end(), &m) == order.end())
                order.push_back(&m);
    }
    for (size_t i = 0; i < order.size() && !li.ok; ++i) {
        CUpti_GetSassToSourceCorrelationParams sp;
        memset(&sp, 0, sizeof sp);
        sp.size = CUpti_GetSassToSourceCorrelationParamsSize;
        sp.cubin = order[i]->cubin.data();
        sp.cubinSize = order[i]->cubin.size();
        sp.functionName = func.c_str();
        sp.pcOffset = off;
        CUptiResult r = cuptiGetSassToSourceCorrelation(&sp);
        if (r == CUPTI_SUCCESS) {
            const char *f = sp.fileName ? sp.fileName : "", *slash = strrchr(f, '/');
            li.ok = true;
            li.line = sp.lineNumber;
            li.where = fmt("%s:%u", slash ? slash + 1 : f, sp.lineNumber);
        } else if (cor.failed == 0) {
            fprintf(stderr, PFX "cuptiGetSassToSourceCorrelation(%s, 0x%x): %s\n", func.c_str(),
                    off, cupti_name(r));
        }
        free(sp.fileName);
        free(sp.dirName);
    }
    (li.ok ? cor.ok : cor.failed)++;
    return cor.cache.emplace(std::make_pair(func, off), li).first->second;
}

// ---------------------------------------------------------------- checks

// Kernel k's inst_executed against n launches x per_launch(k).
struct check {
    uint64_t expected = 0, max = 0, thread_at_max = 0, ld_max = 0;
    size_t pcs = 0, loop_pcs = 0;
    bool lines = false, max_on_loop = false, exact = false;
    std::string max_at = "?", loop_values; // "value":PCs, over the loop's lines
};

// With cor each PC's line is looked up, and the largest count must lie on the loop's lines
// (late_kernel has no loop: on any line).
static check check_kernel(const flushed &f, correlation *cor, const workload &w, int k, int n)
{
    check c;
    c.expected = (uint64_t)n * w.per_launch(k);
    std::map<uint64_t, size_t> loop_values;
    const char *slash = strrchr(__FILE__, '/');
    std::string loop_file = std::string(slash ? slash + 1 : __FILE__) + ":";
    for (auto &kv : f.pcs) {
        if (kv.first.first.find(kernel_names[k]) == std::string::npos)
            continue;
        uint64_t inst = get(kv.second, g.id_inst);
        line_info none;
        const line_info &li =
            cor ? correlate(*cor, kv.first.first, kv.first.second, kv.second.crc) : none;
        bool on_loop = li.ok && li.where.compare(0, loop_file.size(), loop_file) == 0 &&
                       (int)li.line >= w.first[k] && (int)li.line <= w.last[k];
        c.lines |= li.ok;
        if (on_loop)
            c.loop_pcs++, loop_values[inst]++;
        if (c.pcs++ == 0 || inst > c.max) {
            c.max = inst, c.max_on_loop = on_loop, c.max_at = li.ok ? li.where : "?";
            c.thread_at_max = get(kv.second, g.id_thread);
        }
        c.ld_max = std::max(c.ld_max, get(kv.second, g.id_ld));
    }
    for (auto &kv : loop_values)
        c.loop_values += fmt("%s\"%llu\":%zu", c.loop_values.empty() ? "" : ",",
                             (unsigned long long)kv.first, kv.second);
    c.exact = c.pcs > 0 && c.max == c.expected && (!c.lines || c.max_on_loop || k == K_LATE);
    return c;
}

static void print_check(const check &c, const workload &w, int k, int n)
{
    emit(fmt(
        ",\"check\":\"%s\",\"launches\":%d,\"warps_per_launch\":%llu,\"iters\":%d,"
        "\"expected_per_loop_instruction\":%llu,\"max_inst_executed\":%llu,\"max_at\":%s,"
        "\"loop_lines\":\"%d-%d\",\"max_on_loop_lines\":%s,\"exact\":%s,"
        "\"max_over_expected\":%s,\"launches_counted\":%s,\"pcs\":%zu,\"loop_pcs\":%zu,"
        "\"loop_line_values\":{%s},\"thread_over_warp_at_max\":%s,\"max_global_ld\":%s,"
        "\"expected_over_2_32\":%s,\"max_is_expected_mod_2_32\":%s",
        kernel_names[k], n, (unsigned long long)w.warps, w.iters[k], (unsigned long long)c.expected,
        (unsigned long long)c.max, q(c.max_at).c_str(), w.first[k], w.last[k], TF(c.max_on_loop),
        TF(c.exact),
        num((double)c.max / (double)std::max<uint64_t>(c.expected, 1), c.expected).c_str(),
        num((double)c.max / (double)std::max<uint64_t>(w.per_launch(k), 1), true).c_str(), c.pcs,
        c.loop_pcs, c.loop_values.c_str(),
        num((double)c.thread_at_max / (double)std::max<uint64_t>(c.max, 1), g.have_thread).c_str(),
        g.have_ld ? std::to_string(c.ld_max).c_str() : "null", TF(c.expected >> 32),
        TF(c.max && c.max != c.expected && c.max == (c.expected & 0xFFFFFFFFull))));
}

// A line per (function, pcOffset), at most SMP_MAX_PC_LINES (default 400), then a line of
// totals per function.
static void print_pcs(const flushed &f, correlation &cor)
{
    size_t limit = (size_t)env_num("SMP_MAX_PC_LINES", 400), n = 0;
    std::map<std::string, std::map<uint64_t, uint64_t>> totals;
    std::map<std::string, size_t> pcs;
    for (auto &kv : f.pcs) {
        const pc_agg &a = kv.second;
        pcs[kv.first.first]++;
        for (auto &m : a.sum)
            totals[kv.first.first][m.first] += m.second;
        if (n++ >= limit)
            continue;
        const line_info &li = correlate(cor, kv.first.first, kv.first.second, a.crc);
        emit(fmt(",\"function\":%s,\"pc_offset\":\"0x%x\",\"cubin_crc\":%u,\"function_index\":%u,"
                 "\"records\":%u,\"line\":%s,\"values\":%s",
                 q(kv.first.first).c_str(), kv.first.second, a.crc, a.function_index, a.records,
                 li.ok ? q(li.where).c_str() : "null", jvalues(a.sum).c_str()));
    }
    if (n > limit)
        fprintf(stderr, PFX "%zu PC lines left out (SMP_MAX_PC_LINES=%zu)\n", n - limit, limit);
    for (auto &fn : totals)
        emit(fmt(",\"function_totals\":%s,\"pcs\":%zu,\"totals\":%s", q(fn.first).c_str(),
                 pcs[fn.first], jvalues(fn.second).c_str()));
}

// ---------------------------------------------------------------- list

static int run_list()
{
    start();
    g_step = "list metrics";
    CUpti_SassMetrics_GetNumOfMetrics_Params np = {
        CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE};
    np.pChipName = g.chip.c_str();
    CUPTI_CHECK(cuptiSassMetricsGetNumOfMetrics(&np));
    std::vector<CUpti_SassMetrics_MetricDetails> list(np.numOfMetrics + 1);
    memset(list.data(), 0, list.size() * sizeof list[0]);
    CUpti_SassMetrics_GetMetrics_Params gp = {CUpti_SassMetrics_GetMetrics_Params_STRUCT_SIZE};
    gp.pChipName = g.chip.c_str();
    gp.numOfMetrics = np.numOfMetrics;
    gp.pMetricsList = list.data();
    if (np.numOfMetrics > 0)
        CUPTI_CHECK(cuptiSassMetricsGetMetrics(&gp));
    std::map<std::string, uint64_t> ids;
    for (size_t i = 0; i < np.numOfMetrics; ++i) {
        std::string name = list[i].pMetricName ? list[i].pMetricName : "(null)";
        const char *desc = list[i].pMetricDescription ? list[i].pMetricDescription : "";
        ids[name] = list[i].metricId;
        emit(fmt(",\"metric\":%s,\"id\":%llu,\"description\":%s", q(name).c_str(),
                 (unsigned long long)list[i].metricId, q(desc).c_str()));
    }
    std::vector<std::string> ask = {"smsp__sass_inst_executed", "smsp__sass_thread_inst_executed",
                                    "smsp__sass_inst_executed_op_global_ld",
                                    "smsp__sass_sectors_mem_global", "no_such_metric"};
    if (np.numOfMetrics > 0 && list[0].pMetricName &&
        std::find(ask.begin(), ask.end(), list[0].pMetricName) == ask.end())
        ask.push_back(list[0].pMetricName);
    for (const std::string &name : ask) {
        uint64_t id = 0;
        std::string desc;
        CUptiResult r = metric_props(name, &id, &desc);
        auto it = ids.find(name);
        emit(fmt(",\"properties_of\":%s,\"in_list\":%s,\"result\":%s,\"id\":%llu,"
                 "\"id_equals_list\":%s,\"description\":%s",
                 q(name).c_str(), TF(it != ids.end()), rs(r).c_str(), (unsigned long long)id,
                 it == ids.end() || r != CUPTI_SUCCESS ? "null" : TF(it->second == id),
                 q(desc).c_str()));
    }
    bool have = ids.count("smsp__sass_inst_executed") > 0;
    emit(fmt(",\"summary\":true,\"chip\":%s,\"metrics\":%zu,\"has_inst_executed\":%s",
             q(g.chip).c_str(), np.numOfMetrics, TF(have)));
    fprintf(stderr, PFX "list: %zu SASS metrics on %s (%s), smsp__sass_inst_executed %s\n",
            np.numOfMetrics, g.chip.c_str(), g.device.c_str(), have ? "present" : "ABSENT");
    return have ? 0 : 3;
}

// ---------------------------------------------------------------- sample

// k launched alone and timed on the host (under lazy patching that launch patches), then
// n - 1 more as a batch, cut to SMP_BATCH_BUDGET_S at the first one's pace. Returns the
// launches made.
static int patched_launches(const workload &w, int k, int n, double *first_ms,
                            std::vector<double> *batch)
{
    double budget_ms = env_num("SMP_BATCH_BUDGET_S", 4) * 1000, t = now_ms();
    launch(w, k);
    CUDA_CHECK(cudaDeviceSynchronize());
    *first_ms = now_ms() - t;
    int rest = std::min(n - 1, std::max(1, (int)(budget_ms / std::max(*first_ms, 1e-3))));
    if (rest < n - 1)
        fprintf(stderr, PFX "%s: a patched launch took %.1f ms; %d more, not %d\n", kernel_names[k],
                *first_ms, rest, n - 1);
    std::vector<double> times = time_batch(w, k, rest);
    if (batch)
        *batch = times;
    return 1 + rest;
}

static int run_sample(int launches)
{
    start();
    double set_ms = 0, en_ms = 0, dis_ms = 0, unset_ms = 0, first_ms[2] = {0, 0};
    // SMP_EARLY_CONFIG=1: SetConfig before the kernels' modules load (flare configures at
    // the first context's creation), not after the workload's first launches.
    bool early = env_num("SMP_EARLY_CONFIG", 0) != 0;
    if (early) {
        resolve_metrics();
        g_step = "sample: SetConfig before the modules load";
        if (set_config(&set_ms) != CUPTI_SUCCESS)
            die(1);
    }
    workload w;
    workload_init(w);
    if (!early)
        resolve_metrics();
    size_t r1 = 0, i1 = 0, r2 = 0, i2 = 0, dropped = 0;
    g_step = "sample: SetConfig, Enable";
    if (activity_has('o'))
        activity_kernels(false);
    if ((!early && set_config(&set_ms) != CUPTI_SUCCESS) || enable(&en_ms) != CUPTI_SUCCESS)
        die(1);
    CUptiResult props_enabled = data_props(&r1, &i1, nullptr, true); // before any launch
    int n[2];
    std::vector<double> batch[2];
    g_step = "sample: patched launches";
    for (int k = 0; k < 2; ++k)
        n[k] = patched_launches(w, k, launches, &first_ms[k], &batch[k]);
    CUDA_CHECK(cudaDeviceSynchronize());
    g_step = "sample: flush, Disable, UnsetConfig";
    if (activity_has('r'))
        activity_kernels(false);
    if (activity_has('f'))
        note(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
    flushed f;
    CUptiResult fr = flush(f, false), dr = disable(&dropped, &dis_ms);
    if (activity_has('o') || activity_has('r'))
        activity_kernels(true);
    CUptiResult props_after = data_props(&r2, &i2, nullptr, true); // the header: refused
    CUptiResult ur = unset_config(&unset_ms);

    g_step = "sample: summary";
    compute_module_crcs();
    correlation cor;
    print_pcs(f, cor);
    check c[2];
    for (int k = 0; k < 2; ++k) {
        c[k] = check_kernel(f, &cor, w, k, n[k]);
        print_check(c[k], w, k, n[k]);
    }
    std::string crc;
    for (auto &s : cor.crc_match)
        crc += (crc.empty() ? "" : ",") + q(s);
    std::unique_lock<std::mutex> lock(g_modules_mu);
    size_t modules = g_modules.size();
    lock.unlock();
    emit(fmt(",\"summary\":true,\"lazy_patching\":%s,\"launches\":[%d,%d],\"iters\":[%d,%d]%s,"
             "\"props_after_enable_before_launches\":{\"result\":%s,\"records\":%zu},"
             "\"props_after_disable\":%s,"
             "\"disable\":%s,\"dropped_records\":%zu,\"unset_config\":%s,\"ms\":{\"set_config\":"
             "%.3f,\"enable\":%.3f,\"disable\":%.3f,\"unset_config\":%.3f,\"first_launch_wall\":"
             "[%.3f,%.3f],\"patched_median\":[%s,%s]},\"modules_kept\":%zu,\"lines_ok\":%zu,"
             "\"lines_failed\":%zu,\"crc_match\":[%s],\"exact\":[%s,%s]",
             TF(g.lazy), n[0], n[1], w.iters[0], w.iters[1], jflushed(f).c_str(),
             rs(props_enabled).c_str(), r1, rs(props_after).c_str(), rs(dr).c_str(), dropped,
             rs(ur).c_str(), set_ms, en_ms, dis_ms, unset_ms, first_ms[0], first_ms[1],
             med(batch[0]).c_str(), med(batch[1]).c_str(), modules, cor.ok, cor.failed, crc.c_str(),
             TF(c[0].exact), TF(c[1].exact)));
    fprintf(stderr,
            PFX "sample %s: hot_chain %s (max %llu, expected %llu), cheap_math %s (max %llu, "
                "expected %llu); %zu records x %zu instances; flush %s; enable %.1f ms, flush "
                "%.1f ms, disable %.1f ms\n",
            g.lazy ? "lazy" : "eager", c[0].exact ? "exact" : "NOT exact",
            (unsigned long long)c[0].max, (unsigned long long)c[0].expected,
            c[1].exact ? "exact" : "NOT exact", (unsigned long long)c[1].max,
            (unsigned long long)c[1].expected, f.records, f.instances, cupti_name(fr), en_ms,
            f.flush_ms, dis_ms);
    if (fr != CUPTI_SUCCESS || dr != CUPTI_SUCCESS)
        return 1;
    return c[0].exact && c[1].exact ? 0 : 3;
}

// ---------------------------------------------------------------- cost

enum { S_OFF, S_CONF, S_ON, S_N };
static const char *state_names[S_N] = {"off", "configured", "enabled"};

static int run_cost(int launches, int rounds)
{
    start();
    workload w;
    workload_init(w);
    resolve_metrics();
    std::vector<double> med_ms[S_N][2], t_set, t_unset, t_enable, t_disable, t_flush, t_first[2];
    std::vector<int> after_disable; // per configured batch: whether enabled came just before
    int status = 0, checked = 0, exact = 0, prev = S_OFF;
    bool configured = false;
    double ms = 0;
    for (int r = 0; r < rounds && status == 0; ++r) {
        for (int j = 0; j < S_N && status == 0; prev = (j + r) % S_N, ++j) {
            int s = (j + r) % S_N, n[2] = {launches, launches};
            g_step = "cost: SetConfig or UnsetConfig";
            if (configured != (s != S_OFF)) {
                status = (s == S_OFF ? unset_config(&ms) : set_config(&ms)) != CUPTI_SUCCESS;
                (s == S_OFF ? t_unset : t_set).push_back(ms);
                configured = s != S_OFF;
            }
            g_step = "cost: Enable (when enabled) and the timed batches";
            if (s == S_ON && status == 0) {
                status = enable(&ms) != CUPTI_SUCCESS;
                t_enable.push_back(ms);
            }
            for (int k = 0; k < 2 && status == 0; ++k) {
                std::vector<double> batch;
                if (s == S_ON) { // a first launch timed apart, then the batch
                    t_first[k].push_back(0);
                    n[k] = patched_launches(w, k, launches + 1, &t_first[k].back(), &batch) - 1;
                } else {
                    batch = time_batch(w, k, launches);
                }
                med_ms[s][k].push_back(median(batch));
            }
            if (s == S_CONF)
                after_disable.push_back(prev == S_ON);
            if (s == S_ON && status == 0) { // FlushData, the counts checked, Disable
                g_step = "cost: flush, Disable";
                CUDA_CHECK(cudaDeviceSynchronize());
                flushed f;
                size_t dropped = 0;
                status = flush(f, false) != CUPTI_SUCCESS;
                t_flush.push_back(f.flush_ms);
                for (int k = 0; k < 2; ++k, ++checked)
                    exact += check_kernel(f, nullptr, w, k, n[k] + 1).exact;
                status |= disable(&dropped, &ms) != CUPTI_SUCCESS;
                t_disable.push_back(ms);
            }
        }
    }
    if (configured && unset_config(&ms) != CUPTI_SUCCESS)
        status = 1;
    for (int k = 0; k < 2; ++k) {
        for (int s = 0; s < S_N; ++s) {
            const std::vector<double> &v = med_ms[s][k], &off = med_ms[S_OFF][k];
            std::vector<double> ratios, after;
            std::string per_round;
            for (size_t r = 0; r < v.size(); ++r) {
                per_round += fmt("%s%.4f", r ? "," : "", v[r]);
                if (r < off.size())
                    ratios.push_back(v[r] / off[r]);
                if (s == S_CONF && r < after_disable.size() && after_disable[r])
                    after.push_back(v[r]);
            }
            emit(fmt(",\"lazy_patching\":%s,\"state\":\"%s\",\"kernel\":\"%s\",\"rounds\":%zu,"
                     "\"median_ms\":%s,\"ratio_vs_off_paired\":%s,\"median_ms_after_disable\":%s,"
                     "\"per_round_ms\":[%s]",
                     TF(g.lazy), state_names[s], kernel_names[k], v.size(), med(v).c_str(),
                     med(ratios).c_str(), med(after).c_str(), per_round.c_str()));
        }
    }
    emit(fmt(",\"summary\":true,\"lazy_patching\":%s,\"launches\":%d,\"rounds\":%d,"
             "\"iters\":[%d,%d],\"ms_median\":{\"set_config\":%s,\"unset_config\":%s,"
             "\"enable\":%s,\"disable\":%s,\"flush_data\":%s,\"first_launch_after_enable_wall\":"
             "[%s,%s]},\"enables\":%zu,\"counts_checked\":%d,\"counts_exact\":%d",
             TF(g.lazy), launches, rounds, w.iters[0], w.iters[1], med(t_set).c_str(),
             med(t_unset).c_str(), med(t_enable).c_str(), med(t_disable).c_str(),
             med(t_flush).c_str(), med(t_first[0]).c_str(), med(t_first[1]).c_str(),
             t_enable.size(), checked, exact));
    auto ratio = [&](int s, int k) {
        return med_ms[s][k].empty() ? -1.0 : median(med_ms[s][k]) / median(med_ms[S_OFF][k]);
    };
    fprintf(stderr,
            PFX "cost %s: enabled/off hot_chain %.3f cheap_math %.3f, configured/off %.3f %.3f "
                "(-1: not measured); enable %.1f ms, flush %.1f ms, disable %.1f ms; counts "
                "exact %d of %d%s\n",
            g.lazy ? "lazy" : "eager", ratio(S_ON, 0), ratio(S_ON, 1), ratio(S_CONF, 0),
            ratio(S_CONF, 1), median(t_enable), median(t_flush), median(t_disable), exact, checked,
            status ? "; a CUPTI call failed" : "");
    return status ? 1 : exact < checked ? 3 : 0;
}

// ---------------------------------------------------------------- window

// Launches of k the data counts: its largest count over one launch's; -1 without a record.
static double counted(const flushed &f, const workload &w, int k)
{
    check c = check_kernel(f, nullptr, w, k, 1);
    return c.pcs ? (double)c.max / (double)w.per_launch(k) : -1;
}

static std::string jcounted(const flushed &f, const workload &w)
{
    std::string o;
    for (int k = 0; k < 3; ++k)
        o += fmt("%s\"%s\":%s", k ? "," : "", kernel_names[k],
                 num(counted(f, w, k), counted(f, w, k) >= 0).c_str());
    return "{" + o + "}";
}

// Enable, the launches (kernel, count), FlushData then Disable (with flush_after: Disable,
// then a try at FlushData); prints the window's line and returns its data.
static flushed one_window(const workload &w, int index, const char *plan_text,
                          const std::vector<std::pair<int, int>> &plan, bool flush_after,
                          CUptiResult *en)
{
    flushed f;
    double en_ms = 0, dis_ms = 0;
    size_t dropped = 0;
    CUptiResult dis = CUPTI_SUCCESS;
    g_step = "window: Enable";
    if ((*en = enable(&en_ms)) == CUPTI_SUCCESS) {
        g_step = "window: launches";
        for (auto &p : plan)
            for (int i = 0; i < p.second; ++i)
                launch(w, p.first);
        CUDA_CHECK(cudaDeviceSynchronize());
        g_step = "window: flush and Disable";
        if (!flush_after)
            flush(f, false);
        dis = disable(&dropped, &dis_ms);
        if (flush_after)
            flush(f, true);
    }
    emit(fmt(",\"window\":%d,\"plan\":%s,\"enable\":%s,\"enable_ms\":%.3f%s,\"disable\":%s,"
             "\"disable_ms\":%.3f,\"dropped_records\":%zu,\"launches_counted\":%s",
             index, q(plan_text).c_str(), rs(*en).c_str(), en_ms, jflushed(f).c_str(),
             rs(dis).c_str(), dis_ms, dropped, jcounted(f, w).c_str()));
    return f;
}

// Enable, FlushData and Disable from a second thread while this one launches hot_chain.
// Returns 0, or 4 when a call failed; prints its line and exits 4 when the second thread's
// calls have not returned after SMP_THREAD_WAIT_S.
static int cross_thread(const workload &w)
{
    std::atomic<int> phase{0}, enabled_launches{0}; // phase: 1 enabled, 2 flushed, 3 disabled
    CUptiResult en = CUPTI_SUCCESS, dis = CUPTI_SUCCESS;
    double en_ms = 0, dis_ms = 0;
    size_t dropped = 0;
    bool needed_current = false;
    flushed f;
    std::thread helper([&] {
        g_step = "cross-thread: Enable from the second thread";
        en = enable(&en_ms);
        if (en == CUPTI_ERROR_INVALID_CONTEXT && cuCtxSetCurrent(g.ctx) == CUDA_SUCCESS)
            needed_current = true, en = enable(&en_ms);
        phase = 1;
        for (double t0 = now_ms(); enabled_launches < 3 && now_ms() - t0 < 10000;)
            usleep(1000);
        g_step = "cross-thread: FlushData from the second thread";
        if (en == CUPTI_SUCCESS)
            flush(f, false);
        phase = 2;
        g_step = "cross-thread: Disable from the second thread";
        if (en == CUPTI_SUCCESS)
            dis = disable(&dropped, &dis_ms);
        phase = 3;
    });
    int by_phase[4] = {0, 0, 0, 0}; // launches by the phase seen as each began
    double wait_ms = env_num("SMP_THREAD_WAIT_S", 20) * 1000, t0 = now_ms();
    for (int i = 0; i < 5000 && by_phase[3] < 3 && now_ms() - t0 < wait_ms; ++i) {
        int p = phase;
        launch(w, K_HOT);
        by_phase[p]++;
        enabled_launches += p >= 1;
        if (i % 4 == 3)
            CUDA_CHECK(cudaDeviceSynchronize());
    }
    while (phase != 3 && now_ms() - t0 < wait_ms)
        usleep(1000);
    if (phase != 3) {
        int reached = phase;
        const char *s = g_step.load();
        emit(fmt(",\"cross_thread\":true,\"hung\":true,\"phase_reached\":%d,\"step\":%s", reached,
                 q(s).c_str()));
        fprintf(stderr,
                PFX "cross-thread: the second thread's calls had not returned after %.0f s "
                    "(phase %d of 3: %s); exiting without joining it\n",
                wait_ms / 1000, reached, s);
        fflush(stderr);
        _exit(4);
    }
    helper.join();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUptiResult fr = f.props != CUPTI_SUCCESS ? f.props : f.flush;
    emit(fmt(",\"cross_thread\":true,\"hung\":false,\"lazy_patching\":%s,\"enable\":%s,"
             "\"enable_needed_current_context\":%s,\"enable_ms\":%.3f%s,\"disable\":%s,"
             "\"disable_ms\":%.3f,\"dropped_records\":%zu,\"launches_by_phase\":[%d,%d,%d,%d],"
             "\"launches_counted\":%s",
             TF(g.lazy), rs(en).c_str(), TF(needed_current), en_ms, jflushed(f).c_str(),
             rs(dis).c_str(), dis_ms, dropped, by_phase[0], by_phase[1], by_phase[2], by_phase[3],
             jcounted(f, w).c_str()));
    fprintf(stderr,
            PFX "cross-thread %s: Enable %s, flush %s, Disable %s from a second thread while the "
                "main one launched; %.2f hot_chain launches counted of %d begun while enabled\n",
            g.lazy ? "lazy" : "eager", cupti_name(en), cupti_name(fr), cupti_name(dis),
            counted(f, w, K_HOT), by_phase[1]);
    return en == CUPTI_SUCCESS && fr == CUPTI_SUCCESS && dis == CUPTI_SUCCESS ? 0 : 4;
}

static int run_window()
{
    start();
    workload w;
    workload_init(w); // hot_chain and cheap_math run here, before any enable
    resolve_metrics();
    double ms = 0;
    g_step = "window: SetConfig";
    if (set_config(&ms) != CUPTI_SUCCESS)
        die(1);
    CUptiResult en[4];
    flushed f1 = one_window(w, 1, "hot_chain x3 (run before the enable), late_kernel x1 (first)",
                            {{K_HOT, 3}, {K_LATE, 1}}, false, &en[0]);
    if (en[0] != CUPTI_SUCCESS)
        die(1);
    g_step = "window: launches between windows";
    for (int i = 0; i < 2; ++i)
        launch(w, K_HOT);
    CUDA_CHECK(cudaDeviceSynchronize());
    flushed f2 = one_window(w, 2, "hot_chain x2, cheap_math x1, after 2 hot_chain between",
                            {{K_HOT, 2}, {K_CHEAP, 1}}, false, &en[1]);
    flushed f3 = one_window(w, 3, "hot_chain x1, Disable unflushed, then a flush tried",
                            {{K_HOT, 1}}, true, &en[2]);
    flushed f4 = one_window(w, 4, "hot_chain x1 (does window 3's data come back?)", {{K_HOT, 1}},
                            false, &en[3]);
    struct {
        const char *name;
        bool ok;
    } e[] = {
        {"w1_hot_chain_run_before_is_patched", counted(f1, w, K_HOT) == 3},
        {"w1_late_kernel_first_launch_is_patched", !g.lazy || counted(f1, w, K_LATE) == 1},
        {"w2_second_enable_works", en[1] == CUPTI_SUCCESS},
        {"w2_no_leak_hot_chain_2", counted(f2, w, K_HOT) == 2},
        {"w2_cheap_math_1", counted(f2, w, K_CHEAP) == 1},
        {"w4_enable_after_unflushed_window_works", en[3] == CUPTI_SUCCESS},
        {"w4_no_leak_hot_chain_1", counted(f4, w, K_HOT) == 1},
    };
    int failed = 0, n_e = (int)(sizeof e / sizeof e[0]);
    std::string expectations;
    for (int i = 0; i < n_e; ++i) {
        expectations += fmt("%s\"%s\":%s", i ? "," : "", e[i].name, TF(e[i].ok));
        failed += !e[i].ok;
    }
    emit(fmt(",\"summary\":true,\"lazy_patching\":%s,\"expectations\":{%s}", TF(g.lazy),
             expectations.c_str()));
    fprintf(stderr,
            PFX "window %s: %d of %d expectations failed; hot_chain counted w1 %.2f w2 %.2f w4 "
                "%.2f, late_kernel w1 %.2f (-1: no record); w3's flush after Disable: %s\n",
            g.lazy ? "lazy" : "eager", failed, n_e, counted(f1, w, K_HOT), counted(f2, w, K_HOT),
            counted(f4, w, K_HOT), counted(f1, w, K_LATE),
            cupti_name(f3.props != CUPTI_SUCCESS ? f3.props : f3.flush));
    g_step = "cross-thread";
    int thread_status = cross_thread(w);
    g_step = "window: UnsetConfig";
    CUptiResult ur = unset_config(&ms);
    return failed ? 3 : thread_status ? 4 : ur != CUPTI_SUCCESS ? 1 : 0;
}

// ---------------------------------------------------------------- main

int main(int argc, char **argv)
{
    signal(SIGALRM, on_deadline);
    alarm((unsigned)std::max(1.0, env_num("SMP_DEADLINE_S", 110)));
    std::string mode = argc > 1 ? argv[1] : "";
    int nums = mode == "sample" ? 1 : mode == "cost" ? 2 : 0;
    long v[2] = {0, 0};
    bool ok = mode == "list" || mode == "sample" || mode == "cost" || mode == "window";
    for (int i = 0; i < nums && ok; ++i) {
        char *end = nullptr;
        v[i] = argc > 2 + i ? strtol(argv[2 + i], &end, 10) : 0;
        ok = end && end != argv[2 + i] && *end == 0 && v[i] >= 1 && v[i] <= 10000;
    }
    for (int i = 2 + nums; ok && i < argc; ++i)
        if ((ok = mode != "list" && strcmp(argv[i], "eager") == 0))
            g.lazy = false;
    if (!ok) {
        fprintf(stderr, "usage: sass_metrics_probe list | sample LAUNCHES [eager] | "
                        "cost LAUNCHES ROUNDS [eager] | window [eager]  (numbers 1..10000)\n");
        return 2;
    }
    g_mode = argv[1];

    // The subscriber keeps every module's cubin for source lines: before any CUDA call.
    setenv("CUDA_MODULE_LOADING", "LAZY", 0);
    CUpti_SubscriberHandle sub = nullptr;
    if (env_num("SMP_NO_SUBSCRIBE", 0) == 0) {
        CUPTI_CHECK(cuptiSubscribe(&sub, on_callback, nullptr));
        CUPTI_CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE));
        // SMP_DRIVER_CB=1: every driver-API callback on as well (on_callback ignores them).
        if (env_num("SMP_DRIVER_CB", 0) != 0)
            CUPTI_CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API));
        // SMP_NVTX_CB=1: the NVTX domain too (flare subscribes to it).
        if (env_num("SMP_NVTX_CB", 0) != 0)
            CUPTI_CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_NVTX));
        g.subscribed = true;
    }
    bool activity = activity_start();
    int status = mode == "list"     ? run_list()
                 : mode == "sample" ? run_sample((int)v[0])
                 : mode == "cost"   ? run_cost((int)v[0], (int)v[1])
                                    : run_window();
    g_step = "exit";
    if (activity) {
        note(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
        fprintf(stderr, PFX "activity tracing on: %llu activity records\n",
                (unsigned long long)g_activity_records.load());
    }
    fflush(stdout);
    fflush(stderr);
    if (g.subscribed)
        note(cuptiUnsubscribe(sub), "cuptiUnsubscribe");
    g_alarm_status = status ? status : 124;
    alarm(20); // exit handlers (CUPTI's among them) get 20 s
    return status;
}
