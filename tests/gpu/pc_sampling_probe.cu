// pc_sampling_probe.cu: a study of CUPTI's PC Sampling API (cupti_pcsampling.h)
// before flare gets a PC-sampling engine; scripts/gpu-check-pcprobe.sh runs it
// on the GPU machine. Not part of flare: it links CUPTI directly, as CUPTI's
// own samples do, and drives PC sampling in continuous collection mode with
// explicit start/stop control (ENABLE_START_STOP_CONTROL = 1).
//
//   pc_sampling_probe sample PERIOD_EXP LAUNCHES [late]
//     Enables PC sampling on the context, configures it, starts it, runs
//     LAUNCHES hot_chain launches then LAUNCHES cheap_math launches (each about
//     PCP_TARGET_MS, default 10 ms, calibrated first), stops, drains every
//     record with cuptiPCSamplingGetData, disables. Prints the samples, every
//     counter CUPTI gives, the stall reasons, the samples per function, the
//     share of hot_chain's samples on the source lines of its hot loop (SASS to
//     source through cuptiGetSassToSourceCorrelation on the cubin kept from the
//     module-loaded resource callback) and the time of each call. By default
//     sampling is enabled before the module loads; with late, the kernels run
//     (and the module loads) before the enable, as when sampling is switched
//     on in a running process.
//   pc_sampling_probe cost PERIOD_EXP LAUNCHES ROUNDS
//     What sampling costs the kernels: per round, LAUNCHES launches of each
//     kernel (cudaEvent per launch) in state a (sampling not enabled), b
//     (enabled and configured, not started) and c (started), the order
//     rotating each round; medians and paired ratios against a. State a is
//     also measured ROUNDS times before the first enable (a_pre_enable); if
//     PC sampling cannot be disabled and enabled again in the process, the
//     rotation holds b and c only and the ratios are against a_pre_enable
//     (the output says which).
//   pc_sampling_probe launches PERIOD_EXP LAUNCHES ROUNDS
//     What merely enabling sampling costs a launch-bound program, in one
//     process: a tiny kernel (one block of 32 threads counting its launches),
//     first launched after the first enable so that its module loads under PC
//     sampling as a program's do under flare (CUDA's lazy loading), timed on
//     the host in state a (not enabled) and b (enabled and configured, not
//     started), b first in even rounds and a first in odd ones. Each batch: 1,000
//     launches and a sync untimed, then LAUNCHES launches into the default
//     stream and cudaStreamSynchronize; ns per launch for the batch, and for
//     the launch calls alone. Before the first enable, ROUNDS batches of an
//     identical kernel loaded from PTX as a module of its own (a_pre_enable);
//     if disabling and enabling again fails, b is set against those (the
//     output says which). One line per state, a summary with the paired
//     median of b - a ns per launch and of b's launch rate over a's (1: no
//     cost). Never starts sampling, so never exits 3; 1 also when the kernels
//     did not count every launch.
//   pc_sampling_probe periods LAUNCHES
//     `sample P LAUNCHES` for P = 5, 8, 10, 12, 15, each in a process of its
//     own (bounded by PCP_CHILD_TIMEOUT_S, default 22 s), one short line each.
//
// PERIOD_EXP is CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, 5..31
// (the header: a sample every 2^PERIOD_EXP cycles); 0 leaves CUPTI's default.
// Each mode prints one JSON object per line on stdout and a one-line summary on
// stderr. "samples_total" sums the stall-reason samples of the PC records;
// "dropped_hw" holds CUPTI's own counters summed (and maxed) over the GetData
// calls, with "records_expected_from_totals" = totalSamples - droppedSamples -
// nonUsrKernelsTotalSamples beside it: whether those counters are per call or
// running totals is one of the things a run shows. Exit status: 0; 1 when a
// CUPTI or CUDA call the mode needs fails (the call and the error's name are
// printed); 2 usage; 3 when sampling ran but no sample came back; 124 when the
// deadline passed.
//
// What it must never do: wait without a bound (every drain loop has a call,
// empty-answer and time budget; child processes are killed past their time; a
// SIGALRM deadline, PCP_DEADLINE_S (default 110 s), ends the process with a
// message if anything else hangs, exit handlers included), hide an error (every
// CUPTI and CUDA error is printed with its name), or leave anything behind: it
// writes no files and changes no device setting.
//
// Other knobs: PCP_HW_BUFFER_MB, PCP_SCRATCH_MB and PCP_SLEEP_SPAN_MS set the
// hardware buffer, scratch buffer and worker-thread sleep attributes (unset:
// CUPTI's defaults, read back into "config_readback"); PCP_DRAIN_BUDGET_S
// (default 30; half the child's time in periods) bounds the drain after a
// stop, which ends after three empty answers 60 ms apart.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include <tuple>
#include <utility>
#include <vector>

// ---------------------------------------------------------------- errors

static volatile sig_atomic_t g_alarm_status = 124;

static void on_deadline(int)
{
    static const char msg[] = "pc_sampling_probe: deadline passed (PCP_DEADLINE_S or exit "
                              "handlers), exiting\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
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
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr)
        s = "CUPTI_ERROR_(unknown result)";
    return s;
}

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "pc_sampling_probe: %s: %s: %s\n", #call, cudaGetErrorName(e_),        \
                    cudaGetErrorString(e_));                                                       \
            die(1);                                                                                \
        }                                                                                          \
    } while (0)
#define CU_CHECK(call)                                                                             \
    do {                                                                                           \
        CUresult e_ = (call);                                                                      \
        if (e_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = "CUDA_ERROR_(unknown)";                                               \
            cuGetErrorName(e_, &n_);                                                               \
            fprintf(stderr, "pc_sampling_probe: %s: %s\n", #call, n_);                             \
            die(1);                                                                                \
        }                                                                                          \
    } while (0)
#define CUPTI_CHECK(call)                                                                          \
    do {                                                                                           \
        CUptiResult r_ = (call);                                                                   \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            fprintf(stderr, "pc_sampling_probe: %s: %s\n", #call, cupti_name(r_));                 \
            die(1);                                                                                \
        }                                                                                          \
    } while (0)

// A call whose failure is reported and survived: prints it, returns it.
static CUptiResult cupti_note(CUptiResult r, const char *what)
{
    if (r != CUPTI_SUCCESS)
        fprintf(stderr, "pc_sampling_probe: %s: %s\n", what, cupti_name(r));
    return r;
}

// ---------------------------------------------------------------- helpers

static double g_t0;

static double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static double env_num(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (v == nullptr || *v == 0)
        return dflt;
    char *end = nullptr;
    double x = strtod(v, &end);
    if (end == v || *end != 0 || x < 0) {
        fprintf(stderr, "pc_sampling_probe: %s=%s is not a number >= 0, using %g\n", name, v, dflt);
        return dflt;
    }
    return x;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = nullptr;
    long x = strtol(s, &end, 10);
    if (end == s || *end != 0 || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

static double median(std::vector<double> v)
{
    if (v.empty())
        return -1;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void jadd(std::string &o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jadd(std::string &o, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof buf) {
        o += buf;
        return;
    }
    std::vector<char> big((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big.data(), big.size(), fmt, ap);
    va_end(ap);
    o += big.data();
}

static void jstr(std::string &o, const char *s)
{
    o += '"';
    for (; s != nullptr && *s; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            o += '\\';
            o += (char)c;
        } else if (c < 0x20) {
            jadd(o, "\\u%04x", c);
        } else {
            o += (char)c;
        }
    }
    o += '"';
}

static void jnum_or_null(std::string &o, double x, bool valid)
{
    if (valid)
        jadd(o, "%.4f", x);
    else
        o += "null";
}

typedef std::vector<std::pair<std::string, uint64_t>> counts;

// {"name": count, ...}, largest first, at most limit entries (0: all).
static void jcounts(std::string &o, counts v, size_t limit)
{
    std::stable_sort(v.begin(), v.end(),
                     [](const std::pair<std::string, uint64_t> &a,
                        const std::pair<std::string, uint64_t> &b) { return a.second > b.second; });
    o += '{';
    size_t n = 0;
    for (auto &kv : v) {
        if (limit && n == limit)
            break;
        if (n++)
            o += ',';
        jstr(o, kv.first.c_str());
        jadd(o, ":%llu", (unsigned long long)kv.second);
    }
    o += '}';
}

// ---------------------------------------------------------------- workload

#define CHAIN_LEN (64u << 20) // 64 Mi ints (256 MiB): far past the 50 MB L2

// next[i] = (a*i + c) mod 2^26 with c odd and a = 1 mod 4: one cycle through
// every index (Hull-Dobell), successive indexes far apart.
__global__ void init_chain(unsigned *next, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        next[i] = (0x9E3779B1u * i + 0x3C6EF35Fu) & (n - 1);
}

// The known hot loop: each thread follows the chain, ITERS dependent loads
// that miss the caches. lines[] gets the loop's first and last source line
// (the `for` line and its closing brace) so the host knows them.
__global__ void hot_chain(const unsigned *next, unsigned mask, int iters, unsigned *out, int *lines)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned idx = (tid * 0x85EBCA6Bu + 0x27D4EB2Fu) & mask; // a little cheap arithmetic
    enum { kHotFirst = __LINE__ + 1 };
    for (int i = 0; i < iters; ++i) { // HOT LOOP: pointer chasing, one miss per step
        idx = next[idx];
    }
    enum { kHotLast = __LINE__ - 1 };
    out[tid] = idx * 3u + (tid ^ 0x5bd1e995u); // a little cheap arithmetic
    if (tid == 0) {
        lines[0] = kHotFirst;
        lines[1] = kHotLast;
    }
}

// Arithmetic only: dependent FMAs in registers, for contrast.
__global__ void cheap_math(int iters, float *out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float a = tid * 1e-7f, b = 1.0f - a, c = 0.25f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, 0.5f, b);
        b = fmaf(b, 0.5f, c);
        c = fmaf(c, 0.5f, 0.1f);
    }
    out[tid] = a + b + c;
}

struct workload {
    unsigned *next;
    unsigned *out_u;
    float *out_f;
    int *lines;
    int blocks, threads;
    int hot_iters, cheap_iters;
    int hot_first, hot_last;
    bool ready;
};

enum { K_HOT = 0, K_CHEAP = 1 };
static const char *kernel_names[2] = {"hot_chain", "cheap_math"};

static void launch(const workload &w, int kernel)
{
    if (kernel == K_HOT)
        hot_chain<<<w.blocks, w.threads>>>(w.next, CHAIN_LEN - 1, w.hot_iters, w.out_u, w.lines);
    else
        cheap_math<<<w.blocks, w.threads>>>(w.cheap_iters, w.out_f);
    CUDA_CHECK(cudaGetLastError());
}

// n launches back to back, an event between each; per-launch GPU times.
static void time_batch(const workload &w, int kernel, int n, std::vector<double> &per_launch_ms)
{
    std::vector<cudaEvent_t> ev((size_t)n + 1);
    for (auto &e : ev)
        CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(ev[0]));
    for (int i = 0; i < n; ++i) {
        launch(w, kernel);
        CUDA_CHECK(cudaEventRecord(ev[(size_t)i + 1]));
    }
    CUDA_CHECK(cudaEventSynchronize(ev[(size_t)n]));
    per_launch_ms.clear();
    for (int i = 0; i < n; ++i) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[(size_t)i], ev[(size_t)i + 1]));
        per_launch_ms.push_back(ms);
    }
    for (auto &e : ev)
        CUDA_CHECK(cudaEventDestroy(e));
}

// Scales the kernel's iteration count until one launch takes about target_ms.
static void calibrate(workload &w, int kernel, double target_ms)
{
    int *iters = kernel == K_HOT ? &w.hot_iters : &w.cheap_iters;
    const long max_iters = kernel == K_HOT ? (1L << 20) : (1L << 26);
    *iters = kernel == K_HOT ? 256 : 4096;
    for (int pass = 0; pass < 4; ++pass) {
        std::vector<double> t;
        time_batch(w, kernel, 2, t);
        double ms = std::max(t[1], 1e-3);
        double scale = std::min(target_ms / ms, 64.0);
        if (scale > 0.9 && scale < 1.1)
            break;
        long next = (long)(*iters * scale);
        *iters = (int)std::max(16L, std::min(next, max_iters));
    }
}

static void workload_init(workload &w, double target_ms)
{
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    w.threads = 256;
    w.blocks = sms * 8; // 2048 threads per SM
    size_t nthreads = (size_t)w.blocks * w.threads;
    CUDA_CHECK(cudaMalloc(&w.next, (size_t)CHAIN_LEN * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&w.out_u, nthreads * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&w.out_f, nthreads * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&w.lines, 2 * sizeof(int)));
    init_chain<<<sms * 16, 256>>>(w.next, CHAIN_LEN);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    calibrate(w, K_HOT, target_ms);
    calibrate(w, K_CHEAP, target_ms);
    int lines[2] = {0, 0};
    CUDA_CHECK(cudaMemcpy(lines, w.lines, sizeof lines, cudaMemcpyDeviceToHost));
    w.hot_first = lines[0];
    w.hot_last = lines[1];
    w.ready = true;
}

// ---------------------------------------------------------------- CUPTI state

// Cubins kept from CUPTI_CBID_RESOURCE_MODULE_LOADED (the callback's copy is
// valid only during the callback).
struct module_copy {
    std::vector<char> cubin;
    double loaded_ms;
    uint64_t crc;
    bool crc_ok;
};
static std::mutex g_modules_mu;
static std::vector<module_copy> g_modules;

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *cbdata)
{
    if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED ||
        cbdata == nullptr)
        return;
    const CUpti_ResourceData *rd = (const CUpti_ResourceData *)cbdata;
    const CUpti_ModuleResourceData *md = (const CUpti_ModuleResourceData *)rd->resourceDescriptor;
    if (md == nullptr || md->pCubin == nullptr || md->cubinSize == 0)
        return;
    module_copy m;
    m.cubin.assign(md->pCubin, md->pCubin + md->cubinSize);
    m.loaded_ms = now_ms() - g_t0;
    m.crc = 0;
    m.crc_ok = false;
    std::lock_guard<std::mutex> lock(g_modules_mu);
    g_modules.push_back(std::move(m));
}

static size_t modules_loaded()
{
    std::lock_guard<std::mutex> lock(g_modules_mu);
    return g_modules.size();
}

struct stall_table {
    std::vector<uint32_t> index;
    std::vector<std::string> name;
};

static std::string stall_name(const stall_table &t, uint32_t idx)
{
    for (size_t i = 0; i < t.index.size(); ++i)
        if (t.index[i] == idx)
            return t.name[i];
    char buf[40];
    snprintf(buf, sizeof buf, "stall_index_%u", idx);
    return buf;
}

static void get_stall_table(CUcontext ctx, stall_table &t)
{
    size_t n = 0;
    CUpti_PCSamplingGetNumStallReasonsParams np;
    memset(&np, 0, sizeof np);
    np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    np.ctx = ctx;
    np.numStallReasons = &n;
    CUPTI_CHECK(cuptiPCSamplingGetNumStallReasons(&np));
    if (n == 0) {
        fprintf(stderr, "pc_sampling_probe: cuptiPCSamplingGetNumStallReasons: 0 stall reasons\n");
        die(1);
    }
    std::vector<std::vector<char>> bufs(n, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE, 0));
    std::vector<char *> ptrs(n);
    for (size_t i = 0; i < n; ++i)
        ptrs[i] = bufs[i].data();
    t.index.assign(n, 0);
    CUpti_PCSamplingGetStallReasonsParams sp;
    memset(&sp, 0, sizeof sp);
    sp.size = CUpti_PCSamplingGetStallReasonsParamsSize;
    sp.ctx = ctx;
    sp.numStallReasons = n;
    sp.stallReasonIndex = t.index.data();
    sp.stallReasons = ptrs.data();
    CUPTI_CHECK(cuptiPCSamplingGetStallReasons(&sp));
    t.name.clear();
    for (size_t i = 0; i < n; ++i)
        t.name.emplace_back(bufs[i].data(),
                            strnlen(bufs[i].data(), CUPTI_STALL_REASON_STRING_SIZE));
}

// A CUpti_PCSamplingData with room for n_pcs PCs of n_stalls stall reasons.
// Must not move once handed to CUPTI (they are allocated with new).
struct pc_buffer {
    CUpti_PCSamplingData data;
    std::vector<CUpti_PCSamplingPCData> pcs;
    std::vector<CUpti_PCSamplingStallReason> stalls;
    size_t per_pc;
};

static void pc_buffer_reset(pc_buffer &b)
{
    memset(&b.data, 0, sizeof b.data);
    // No *_STRUCT_SIZE macro exists for these two; CUPTI's samples use sizeof.
    b.data.size = sizeof(CUpti_PCSamplingData);
    b.data.collectNumPcs = b.pcs.size();
    b.data.pPcData = b.pcs.data();
    for (size_t i = 0; i < b.pcs.size(); ++i) {
        memset(&b.pcs[i], 0, sizeof b.pcs[i]);
        b.pcs[i].size = sizeof(CUpti_PCSamplingPCData);
        b.pcs[i].stallReason = &b.stalls[i * b.per_pc];
    }
}

static pc_buffer *pc_buffer_new(size_t n_pcs, size_t n_stalls)
{
    pc_buffer *b = new pc_buffer;
    b->pcs.resize(n_pcs);
    b->stalls.resize(n_pcs * n_stalls);
    b->per_pc = n_stalls;
    pc_buffer_reset(*b);
    return b;
}

struct pc_key {
    std::string func;
    uint64_t crc;
    uint64_t off;
    bool operator<(const pc_key &o) const
    {
        return std::tie(func, crc, off) < std::tie(o.func, o.crc, o.off);
    }
};
struct pc_agg {
    uint64_t samples = 0;
    std::map<uint32_t, uint64_t> stalls;
};

// What the GetData calls returned: every counter CUPTI gives, and the PCs.
struct collected {
    std::map<pc_key, pc_agg> pcs;
    // CUPTI's functionName strings. The header says the client frees each with
    // free() once done, the string being shared between records; this probe
    // leaves them to the process exit, so a wrong reading of that ownership
    // cannot crash it after its output.
    std::set<char *> names;
    uint64_t calls = 0, oom_returns = 0, pc_records = 0, late_pc_records = 0;
    uint64_t total_samples_sum = 0, total_samples_max = 0;
    uint64_t dropped_sum = 0, dropped_max = 0, non_user_sum = 0, hw_full_calls = 0;
    uint64_t remaining_max = 0, samples_in_records = 0;
    std::set<uint64_t> range_ids;
    double getdata_ms = 0, drain_wall_ms = 0;
    bool budget_hit = false;
    CUptiResult error = CUPTI_SUCCESS; // the first GetData error other than OUT_OF_MEMORY
    uint64_t after_disable_pcs = 0, after_disable_samples = 0;
};

// Adds one filled CUpti_PCSamplingData to c; returns its PC records.
static size_t absorb(const pc_buffer &b, collected &c)
{
    const CUpti_PCSamplingData &d = b.data;
    c.total_samples_sum += d.totalSamples;
    c.total_samples_max = std::max<uint64_t>(c.total_samples_max, d.totalSamples);
    c.dropped_sum += d.droppedSamples;
    c.dropped_max = std::max<uint64_t>(c.dropped_max, d.droppedSamples);
    c.non_user_sum += d.nonUsrKernelsTotalSamples;
    c.remaining_max = std::max<uint64_t>(c.remaining_max, d.remainingNumPcs);
    if (d.hardwareBufferFull)
        c.hw_full_calls++;
    size_t n = std::min(d.totalNumPcs, b.pcs.size());
    if (n > 0)
        c.range_ids.insert(d.rangeId);
    for (size_t i = 0; i < n; ++i) {
        const CUpti_PCSamplingPCData &pc = d.pPcData[i];
        if (pc.functionName != nullptr)
            c.names.insert(pc.functionName);
        pc_key key{pc.functionName ? pc.functionName : "(no function name)", pc.cubinCrc,
                   pc.pcOffset};
        pc_agg &agg = c.pcs[key];
        size_t ns = std::min(pc.stallReasonCount, b.per_pc);
        for (size_t j = 0; j < ns; ++j) {
            agg.stalls[pc.stallReason[j].pcSamplingStallReasonIndex] += pc.stallReason[j].samples;
            agg.samples += pc.stallReason[j].samples;
            c.samples_in_records += pc.stallReason[j].samples;
        }
    }
    c.pc_records += n;
    return n;
}

static CUptiResult get_data_once(CUcontext ctx, pc_buffer &b, collected &c, size_t *records)
{
    pc_buffer_reset(b);
    CUpti_PCSamplingGetDataParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_PCSamplingGetDataParamsSize;
    p.ctx = ctx;
    p.pcSamplingData = &b.data;
    double t = now_ms();
    CUptiResult r = cuptiPCSamplingGetData(&p);
    c.getdata_ms += now_ms() - t;
    c.calls++;
    *records = 0;
    if (r == CUPTI_ERROR_OUT_OF_MEMORY) { // the header: the hardware buffer is full
        c.oom_returns++;
    } else if (r != CUPTI_SUCCESS) {
        if (c.error == CUPTI_SUCCESS) {
            c.error = r;
            cupti_note(r, "cuptiPCSamplingGetData");
        }
        return r;
    }
    *records = absorb(b, c);
    return r;
}

// GetData until empties_needed answers in a row bring no PC (sleeping
// empty_sleep_ms after each, so late records decoded by CUPTI's worker threads
// still come), at most 100000 calls and budget_ms.
static CUptiResult drain(CUcontext ctx, pc_buffer &b, collected &c, int empties_needed,
                         int empty_sleep_ms, double budget_ms)
{
    double t0 = now_ms();
    int empties = 0;
    bool seen_empty = false;
    CUptiResult last = CUPTI_SUCCESS;
    for (int call = 0; call < 100000; ++call) {
        size_t n = 0;
        CUptiResult r = get_data_once(ctx, b, c, &n);
        if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_OUT_OF_MEMORY) {
            last = r;
            break;
        }
        if (n == 0) {
            seen_empty = true;
            if (++empties >= empties_needed)
                break;
            if (empty_sleep_ms > 0)
                usleep((useconds_t)empty_sleep_ms * 1000);
        } else {
            empties = 0;
            if (seen_empty)
                c.late_pc_records += n;
        }
        if (now_ms() - t0 > budget_ms) {
            c.budget_hit = true;
            break;
        }
    }
    c.drain_wall_ms += now_ms() - t0;
    return last;
}

struct probe_config {
    uint32_t period; // 0: CUPTI's default
    size_t hw_buffer_bytes, scratch_bytes;
    uint32_t sleep_span_ms;
};

static probe_config config_from_env(uint32_t period)
{
    probe_config pc;
    pc.period = period;
    pc.hw_buffer_bytes = (size_t)(env_num("PCP_HW_BUFFER_MB", 0) * 1048576.0);
    pc.scratch_bytes = (size_t)(env_num("PCP_SCRATCH_MB", 0) * 1048576.0);
    pc.sleep_span_ms = (uint32_t)env_num("PCP_SLEEP_SPAN_MS", 0);
    return pc;
}

static const char *attr_name(CUpti_PCSamplingConfigurationAttributeType a)
{
    switch (a) {
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD:
        return "SAMPLING_PERIOD";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON:
        return "STALL_REASON";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE:
        return "SCRATCH_BUFFER_SIZE";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE:
        return "HARDWARE_BUFFER_SIZE";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE:
        return "COLLECTION_MODE";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL:
        return "ENABLE_START_STOP_CONTROL";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT:
        return "OUTPUT_DATA_FORMAT";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER:
        return "SAMPLING_DATA_BUFFER";
    case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN:
        return "WORKER_THREAD_PERIODIC_SLEEP_SPAN";
    default:
        return "?";
    }
}

// One cuptiPCSamplingSetConfigurationAttribute call: continuous mode,
// start/stop control, every stall reason, the data buffer CUPTI fills at
// disable, the period and the optional buffer sizes. On failure each
// attribute's own status is printed.
static CUptiResult configure(CUcontext ctx, const probe_config &pc, pc_buffer &config_buf,
                             stall_table &st)
{
    std::vector<CUpti_PCSamplingConfigurationInfo> infos;
    CUpti_PCSamplingConfigurationInfo i;
    memset(&i, 0, sizeof i);
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    i.attributeData.collectionModeData.collectionMode =
        CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    infos.push_back(i);
    memset(&i, 0, sizeof i);
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    i.attributeData.enableStartStopControlData.enableStartStopControl = 1;
    infos.push_back(i);
    memset(&i, 0, sizeof i);
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    i.attributeData.stallReasonData.stallReasonCount = st.index.size();
    i.attributeData.stallReasonData.pStallReasonIndex = st.index.data();
    infos.push_back(i);
    pc_buffer_reset(config_buf);
    memset(&i, 0, sizeof i);
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    i.attributeData.samplingDataBufferData.samplingDataBuffer = &config_buf.data;
    infos.push_back(i);
    if (pc.period) {
        memset(&i, 0, sizeof i);
        i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
        i.attributeData.samplingPeriodData.samplingPeriod = pc.period;
        infos.push_back(i);
    }
    if (pc.hw_buffer_bytes) {
        memset(&i, 0, sizeof i);
        i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
        i.attributeData.hardwareBufferSizeData.hardwareBufferSize = pc.hw_buffer_bytes;
        infos.push_back(i);
    }
    if (pc.scratch_bytes) {
        memset(&i, 0, sizeof i);
        i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
        i.attributeData.scratchBufferSizeData.scratchBufferSize = pc.scratch_bytes;
        infos.push_back(i);
    }
    if (pc.sleep_span_ms) {
        memset(&i, 0, sizeof i);
        i.attributeType =
            CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN;
        i.attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan =
            pc.sleep_span_ms;
        infos.push_back(i);
    }
    CUpti_PCSamplingConfigurationInfoParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    p.ctx = ctx;
    p.numAttributes = infos.size();
    p.pPCSamplingConfigurationInfo = infos.data();
    CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&p);
    if (r != CUPTI_SUCCESS) {
        cupti_note(r, "cuptiPCSamplingSetConfigurationAttribute");
        for (auto &info : infos)
            fprintf(stderr, "pc_sampling_probe:   attribute %s: %s\n",
                    attr_name(info.attributeType), cupti_name(info.attributeStatus));
    }
    return r;
}

// {"sampling_period": 10, ...}: what CUPTI reports back, an error's name where
// it refuses one.
static void config_readback(CUcontext ctx, std::string &o)
{
    static const struct {
        CUpti_PCSamplingConfigurationAttributeType type;
        const char *key;
    } attrs[] = {
        {CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, "sampling_period"},
        {CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE, "scratch_buffer_bytes"},
        {CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE, "hardware_buffer_bytes"},
        {CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE, "collection_mode"},
        {CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL, "start_stop_control"},
        {CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN,
         "worker_sleep_span_ms"},
    };
    o += '{';
    for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; ++k) {
        CUpti_PCSamplingConfigurationInfo info;
        memset(&info, 0, sizeof info);
        info.attributeType = attrs[k].type;
        CUpti_PCSamplingConfigurationInfoParams p;
        memset(&p, 0, sizeof p);
        p.size = CUpti_PCSamplingConfigurationInfoParamsSize;
        p.ctx = ctx;
        p.numAttributes = 1;
        p.pPCSamplingConfigurationInfo = &info;
        CUptiResult r = cuptiPCSamplingGetConfigurationAttribute(&p);
        if (k)
            o += ',';
        jstr(o, attrs[k].key);
        o += ':';
        if (r == CUPTI_SUCCESS && info.attributeStatus != CUPTI_SUCCESS)
            r = info.attributeStatus;
        if (r != CUPTI_SUCCESS) {
            jstr(o, cupti_name(r));
            continue;
        }
        unsigned long long v = 0;
        switch (attrs[k].type) {
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD:
            v = info.attributeData.samplingPeriodData.samplingPeriod;
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE:
            v = info.attributeData.scratchBufferSizeData.scratchBufferSize;
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE:
            v = info.attributeData.hardwareBufferSizeData.hardwareBufferSize;
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE:
            v = (unsigned long long)info.attributeData.collectionModeData.collectionMode;
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL:
            v = info.attributeData.enableStartStopControlData.enableStartStopControl;
            break;
        default:
            v = info.attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan;
            break;
        }
        jadd(o, "%llu", v);
    }
    o += '}';
}

static CUptiResult pcs_enable(CUcontext ctx)
{
    CUpti_PCSamplingEnableParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_PCSamplingEnableParamsSize;
    p.ctx = ctx;
    return cupti_note(cuptiPCSamplingEnable(&p), "cuptiPCSamplingEnable");
}

static CUptiResult pcs_disable(CUcontext ctx)
{
    CUpti_PCSamplingDisableParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_PCSamplingDisableParamsSize;
    p.ctx = ctx;
    return cupti_note(cuptiPCSamplingDisable(&p), "cuptiPCSamplingDisable");
}

static CUptiResult pcs_start(CUcontext ctx)
{
    CUpti_PCSamplingStartParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_PCSamplingStartParamsSize;
    p.ctx = ctx;
    return cupti_note(cuptiPCSamplingStart(&p), "cuptiPCSamplingStart");
}

static CUptiResult pcs_stop(CUcontext ctx)
{
    CUpti_PCSamplingStopParams p;
    memset(&p, 0, sizeof p);
    p.size = CUpti_PCSamplingStopParamsSize;
    p.ctx = ctx;
    return cupti_note(cuptiPCSamplingStop(&p), "cuptiPCSamplingStop");
}

// After a disable CUPTI may put the last records in the configured buffer.
static void absorb_config_buffer(pc_buffer &cfg, collected &c)
{
    uint64_t before = c.samples_in_records;
    size_t n = absorb(cfg, c);
    c.after_disable_pcs += n;
    c.after_disable_samples += c.samples_in_records - before;
}

static CUcontext start_cuda(std::string &device)
{
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(0));
    CUcontext ctx = nullptr;
    CU_CHECK(cuCtxGetCurrent(&ctx));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    device = prop.name;
    return ctx;
}

// ---------------------------------------------------------------- source lines

struct line_info {
    bool ok;
    std::string file; // base name
    uint32_t line;
};

struct correlation {
    std::map<std::pair<std::string, uint64_t>, line_info> cache;
    size_t ok_pcs = 0, failed_pcs = 0;
    CUptiResult first_error = CUPTI_SUCCESS;
    bool crc_matched = false;
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
        CUptiResult r = cupti_note(cuptiGetCubinCrc(&cp), "cuptiGetCubinCrc");
        m.crc_ok = r == CUPTI_SUCCESS;
        m.crc = cp.cubinCrc;
    }
}

// The source line of one PC: the module whose CRC is the record's first, then
// every other kept module.
static const line_info &correlate(correlation &cor, const pc_key &k)
{
    auto key = std::make_pair(k.func, k.off);
    auto it = cor.cache.find(key);
    if (it != cor.cache.end())
        return it->second;
    line_info li{false, "", 0};
    std::vector<const module_copy *> order;
    {
        std::lock_guard<std::mutex> lock(g_modules_mu);
        for (auto &m : g_modules)
            if (m.crc_ok && m.crc == k.crc)
                order.push_back(&m);
        if (!order.empty())
            cor.crc_matched = true;
        for (auto &m : g_modules)
            if (!(m.crc_ok && m.crc == k.crc))
                order.push_back(&m);
    }
    for (const module_copy *m : order) {
        CUpti_GetSassToSourceCorrelationParams sp;
        memset(&sp, 0, sizeof sp);
        sp.size = CUpti_GetSassToSourceCorrelationParamsSize;
        sp.cubin = m->cubin.data();
        sp.cubinSize = m->cubin.size();
        sp.functionName = k.func.c_str();
        sp.pcOffset = k.off;
        CUptiResult r = cuptiGetSassToSourceCorrelation(&sp);
        if (r == CUPTI_SUCCESS) {
            const char *f = sp.fileName ? sp.fileName : "";
            const char *slash = strrchr(f, '/');
            li.ok = true;
            li.file = slash ? slash + 1 : f;
            li.line = sp.lineNumber;
        } else if (cor.first_error == CUPTI_SUCCESS) {
            cor.first_error = r;
            fprintf(stderr, "pc_sampling_probe: cuptiGetSassToSourceCorrelation(%s, 0x%llx): %s\n",
                    k.func.c_str(), (unsigned long long)k.off, cupti_name(r));
        }
        free(sp.fileName);
        free(sp.dirName);
        if (li.ok)
            break;
    }
    if (li.ok)
        cor.ok_pcs++;
    else
        cor.failed_pcs++;
    return cor.cache.emplace(key, li).first->second;
}

// ---------------------------------------------------------------- sample

// This file's base name, as the line table names it.
static const char *this_file()
{
    const char *slash = strrchr(__FILE__, '/');
    return slash ? slash + 1 : __FILE__;
}

static bool is_kernel(const std::string &func, int kernel)
{
    return func.find(kernel_names[kernel]) != std::string::npos;
}

static void jcollected_counters(std::string &o, const collected &c)
{
    jadd(o,
         "{\"getdata_calls\":%llu,\"oom_returns\":%llu,\"pc_records\":%llu,"
         "\"late_pc_records\":%llu,\"total_samples_sum\":%llu,\"total_samples_max\":%llu,"
         "\"dropped_samples_sum\":%llu,\"dropped_samples_max\":%llu,"
         "\"non_user_kernel_samples_sum\":%llu,\"hardware_buffer_full_calls\":%llu,"
         "\"remaining_pcs_max\":%llu,\"records_expected_from_totals\":%lld,"
         "\"drain_budget_hit\":%s,\"getdata_error\":",
         (unsigned long long)c.calls, (unsigned long long)c.oom_returns,
         (unsigned long long)c.pc_records, (unsigned long long)c.late_pc_records,
         (unsigned long long)c.total_samples_sum, (unsigned long long)c.total_samples_max,
         (unsigned long long)c.dropped_sum, (unsigned long long)c.dropped_max,
         (unsigned long long)c.non_user_sum, (unsigned long long)c.hw_full_calls,
         (unsigned long long)c.remaining_max,
         (long long)c.total_samples_sum - (long long)c.dropped_sum - (long long)c.non_user_sum,
         c.budget_hit ? "true" : "false");
    if (c.error == CUPTI_SUCCESS)
        o += "null";
    else
        jstr(o, cupti_name(c.error));
    o += ",\"range_ids\":[";
    size_t n = 0;
    for (uint64_t id : c.range_ids) {
        if (n++ == 16)
            break;
        jadd(o, "%s%llu", n > 1 ? "," : "", (unsigned long long)id);
    }
    jadd(o, "],\"after_disable_pcs\":%llu,\"after_disable_samples\":%llu}",
         (unsigned long long)c.after_disable_pcs, (unsigned long long)c.after_disable_samples);
}

// One sample run: what was measured, before any aggregation.
struct sample_run {
    uint32_t period;
    int launches;
    bool late;
    std::string device, readback;
    workload w;
    stall_table st;
    collected c;
    size_t modules_before_enable;
    double enable_ms, config_ms, start_ms, stop_ms, disable_ms;
    std::vector<double> hot_ms, cheap_ms;
};

// Enable, configure, start, the launches, stop, drain, disable. Returns 1
// when a drain or the disable failed (the data so far is kept); dies when a
// call without which nothing can be measured fails.
static int sample_collect(sample_run &s)
{
    double target_ms = env_num("PCP_TARGET_MS", 10);
    double budget_ms = env_num("PCP_DRAIN_BUDGET_S", 30) * 1000;
    CUcontext ctx = start_cuda(s.device);
    memset(&s.w, 0, sizeof s.w);
    if (s.late)
        workload_init(s.w, target_ms);
    s.modules_before_enable = modules_loaded();

    double t = now_ms();
    if (pcs_enable(ctx) != CUPTI_SUCCESS)
        die(1);
    s.enable_ms = now_ms() - t;
    get_stall_table(ctx, s.st);
    pc_buffer *cfg = pc_buffer_new(4096, s.st.index.size());
    pc_buffer *out = pc_buffer_new(4096, s.st.index.size());
    probe_config pc = config_from_env(s.period);
    t = now_ms();
    if (configure(ctx, pc, *cfg, s.st) != CUPTI_SUCCESS)
        die(1);
    s.config_ms = now_ms() - t;
    config_readback(ctx, s.readback);
    if (!s.late)
        workload_init(s.w, target_ms);

    int status = 0;
    t = now_ms();
    if (pcs_start(ctx) != CUPTI_SUCCESS)
        die(1);
    s.start_ms = now_ms() - t;
    time_batch(s.w, K_HOT, s.launches, s.hot_ms);
    time_batch(s.w, K_CHEAP, s.launches, s.cheap_ms);
    CUDA_CHECK(cudaDeviceSynchronize());
    t = now_ms();
    if (pcs_stop(ctx) != CUPTI_SUCCESS)
        die(1);
    s.stop_ms = now_ms() - t;
    if (drain(ctx, *out, s.c, 3, 60, budget_ms) != CUPTI_SUCCESS)
        status = 1;
    t = now_ms();
    CUptiResult dr = pcs_disable(ctx);
    s.disable_ms = now_ms() - t;
    if (dr != CUPTI_SUCCESS)
        status = 1;
    else
        absorb_config_buffer(*cfg, s.c);
    return status;
}

// The run's aggregates: stall reasons, functions, hot_chain's lines.
struct sample_summary {
    correlation cor;
    counts stalls, hot_stalls, funcs, lines, hot_offsets;
    uint64_t hot_samples = 0, hot_in_loop = 0, hot_uncorrelated = 0;
    bool share_valid = false;
    double share = 0;
    std::string top_stall;
};

static void sample_summarize(const sample_run &s, sample_summary &m)
{
    compute_module_crcs();
    std::map<uint32_t, uint64_t> stall_all, stall_hot;
    std::map<std::string, uint64_t> funcs, lines;
    std::map<uint64_t, uint64_t> hot_offsets;
    for (auto &kv : s.c.pcs) {
        funcs[kv.first.func] += kv.second.samples;
        for (auto &st : kv.second.stalls)
            stall_all[st.first] += st.second;
        if (!is_kernel(kv.first.func, K_HOT))
            continue;
        m.hot_samples += kv.second.samples;
        hot_offsets[kv.first.off] += kv.second.samples;
        for (auto &st : kv.second.stalls)
            stall_hot[st.first] += st.second;
        const line_info &li = correlate(m.cor, kv.first);
        if (!li.ok) {
            m.hot_uncorrelated += kv.second.samples;
            continue;
        }
        char where[300];
        snprintf(where, sizeof where, "%s:%u", li.file.c_str(), li.line);
        lines[where] += kv.second.samples;
        if (li.file == this_file() && (int)li.line >= s.w.hot_first && (int)li.line <= s.w.hot_last)
            m.hot_in_loop += kv.second.samples;
    }
    m.share_valid = m.hot_samples > 0 && m.cor.ok_pcs > 0;
    m.share = m.share_valid ? (double)m.hot_in_loop / (double)m.hot_samples : 0;
    for (auto &kv : stall_all)
        if (kv.second)
            m.stalls.emplace_back(stall_name(s.st, kv.first), kv.second);
    uint64_t top = 0;
    for (auto &kv : stall_hot) {
        if (!kv.second)
            continue;
        m.hot_stalls.emplace_back(stall_name(s.st, kv.first), kv.second);
        if (kv.second > top) {
            top = kv.second;
            m.top_stall = m.hot_stalls.back().first;
        }
    }
    m.funcs.assign(funcs.begin(), funcs.end());
    m.lines.assign(lines.begin(), lines.end());
    for (auto &kv : hot_offsets) {
        char off[32];
        snprintf(off, sizeof off, "0x%llx", (unsigned long long)kv.first);
        m.hot_offsets.emplace_back(off, kv.second);
    }
}

// The JSON line (short: the fields periods compares) and the stderr summary.
static void sample_print(const sample_run &s, const sample_summary &m, bool short_line)
{
    std::string o;
    jadd(o, "{\"probe\":\"pc\",\"mode\":\"%s\",\"period_exp\":%u,\"period_cycles\":",
         short_line ? "periods" : "sample", s.period);
    if (s.period)
        jadd(o, "%llu", 1ULL << s.period);
    else
        o += "null";
    jadd(o,
         ",\"launches\":%d,\"late_enable\":%s,\"samples_total\":%llu,\"dropped_hw\":", s.launches,
         s.late ? "true" : "false", (unsigned long long)s.c.samples_in_records);
    jcollected_counters(o, s.c);
    jadd(o, ",\"hot_samples\":%llu,\"hot_loop_share\":", (unsigned long long)m.hot_samples);
    jnum_or_null(o, m.share, m.share_valid);
    o += ",\"hot_top_stall\":";
    if (m.top_stall.empty())
        o += "null";
    else
        jstr(o, m.top_stall.c_str());
    if (!short_line) {
        o += ",\"device\":";
        jstr(o, s.device.c_str());
        const char *loading = getenv("CUDA_MODULE_LOADING");
        o += ",\"module_loading\":";
        jstr(o, loading ? loading : "");
        jadd(o,
             ",\"iters\":{\"hot_chain\":%d,\"cheap_math\":%d},\"hot_first_line\":%d,"
             "\"hot_last_line\":%d,\"modules_captured\":%zu,\"modules_loaded_before_enable\":%zu,"
             "\"num_stall_reasons\":%zu,\"config_readback\":",
             s.w.hot_iters, s.w.cheap_iters, s.w.hot_first, s.w.hot_last, modules_loaded(),
             s.modules_before_enable, s.st.index.size());
        o += s.readback;
        o += ",\"stall_reasons\":";
        jcounts(o, m.stalls, 0);
        o += ",\"functions\":";
        jcounts(o, m.funcs, 0);
        o += ",\"hot_stalls\":";
        jcounts(o, m.hot_stalls, 5);
        o += ",\"lines\":";
        jcounts(o, m.lines, 10);
        jadd(o,
             ",\"correlation\":{\"ok_pcs\":%zu,\"failed_pcs\":%zu,"
             "\"uncorrelated_hot_samples\":%llu,\"crc_matched\":%s,\"first_error\":",
             m.cor.ok_pcs, m.cor.failed_pcs, (unsigned long long)m.hot_uncorrelated,
             m.cor.crc_matched ? "true" : "false");
        if (m.cor.first_error == CUPTI_SUCCESS)
            o += "null";
        else
            jstr(o, cupti_name(m.cor.first_error));
        o += '}';
        if (!m.share_valid) {
            o += ",\"hot_pc_offsets\":";
            jcounts(o, m.hot_offsets, 20);
        }
        jadd(o, ",\"enable_ms\":%.3f,\"config_ms\":%.3f,\"start_ms\":%.3f,\"disable_ms\":%.3f",
             s.enable_ms, s.config_ms, s.start_ms, s.disable_ms);
        jadd(o, ",\"drain_wall_ms\":%.3f", s.c.drain_wall_ms);
    }
    jadd(o,
         ",\"stop_ms\":%.3f,\"getdata_ms_total\":%.3f,\"kernel_ms_median\":{\"hot_chain\":%.3f,"
         "\"cheap_math\":%.3f}}",
         s.stop_ms, s.c.getdata_ms, median(s.hot_ms), median(s.cheap_ms));
    printf("%s\n", o.c_str());
    fflush(stdout);
    fprintf(stderr,
            "pc_sampling_probe: %s period %u%s: %llu samples in %llu records, dropped %llu, "
            "hw buffer full %llu, hot_chain %llu (loop share %s%.3f), top stall %s\n",
            short_line ? "periods" : "sample", s.period, s.late ? " (late enable)" : "",
            (unsigned long long)s.c.samples_in_records, (unsigned long long)s.c.pc_records,
            (unsigned long long)s.c.dropped_sum, (unsigned long long)s.c.hw_full_calls,
            (unsigned long long)m.hot_samples, m.share_valid ? "" : "n/a ", m.share,
            m.top_stall.empty() ? "-" : m.top_stall.c_str());
}

static int run_sample(uint32_t period, int launches, bool late, bool short_line)
{
    sample_run s;
    s.period = period;
    s.launches = launches;
    s.late = late;
    int status = sample_collect(s);
    sample_summary m;
    sample_summarize(s, m);
    sample_print(s, m, short_line);
    if (status == 0 && s.c.samples_in_records == 0) {
        fprintf(stderr, "pc_sampling_probe: sampling ran but no sample came back\n");
        status = 3;
    }
    return status;
}

// ---------------------------------------------------------------- cost

enum { ST_A = 0, ST_B = 1, ST_C = 2, ST_A_PRE = 3 };
static const char *state_names[4] = {"a_not_enabled", "b_enabled_idle", "c_sampling",
                                     "a_pre_enable"};

struct cost_state {
    CUcontext ctx;
    stall_table st;
    bool have_stalls = false;
    pc_buffer *cfg = nullptr, *out = nullptr;
    probe_config pc;
    collected c; // everything drained in state c, and what disables left
    int state = ST_A;
    double budget_ms;
    CUptiResult stop_drain_error = CUPTI_SUCCESS; // the first drain after a stop that failed
    std::vector<double> t_enable, t_config, t_start, t_stop, t_drain, t_disable;
};

// Moves between a (disabled), b (enabled, configured) and c (started);
// returns the first failing call's result, the state left where it was.
static CUptiResult to_state(cost_state &k, int target)
{
    while (k.state != target) {
        double t = now_ms();
        CUptiResult r;
        if (k.state == ST_C) {
            r = pcs_stop(k.ctx);
            if (r != CUPTI_SUCCESS)
                return r;
            k.t_stop.push_back(now_ms() - t);
            k.state = ST_B;
            t = now_ms();
            CUptiResult dr = drain(k.ctx, *k.out, k.c, 3, 60, k.budget_ms);
            k.t_drain.push_back(now_ms() - t);
            if (dr != CUPTI_SUCCESS && k.stop_drain_error == CUPTI_SUCCESS)
                k.stop_drain_error = dr;
        } else if (k.state == ST_B && target == ST_C) {
            r = pcs_start(k.ctx);
            if (r != CUPTI_SUCCESS)
                return r;
            k.t_start.push_back(now_ms() - t);
            k.state = ST_C;
        } else if (k.state == ST_B) {
            r = pcs_disable(k.ctx);
            if (r != CUPTI_SUCCESS)
                return r;
            k.t_disable.push_back(now_ms() - t);
            absorb_config_buffer(*k.cfg, k.c);
            k.state = ST_A;
        } else {
            r = pcs_enable(k.ctx);
            if (r != CUPTI_SUCCESS)
                return r;
            k.t_enable.push_back(now_ms() - t);
            if (!k.have_stalls) {
                get_stall_table(k.ctx, k.st);
                k.have_stalls = true;
                k.cfg = pc_buffer_new(4096, k.st.index.size());
                k.out = pc_buffer_new(4096, k.st.index.size());
            }
            t = now_ms();
            r = configure(k.ctx, k.pc, *k.cfg, k.st);
            if (r != CUPTI_SUCCESS) {
                pcs_disable(k.ctx);
                return r;
            }
            k.t_config.push_back(now_ms() - t);
            k.state = ST_B;
        }
    }
    return CUPTI_SUCCESS;
}

// A cost run: the CUPTI state machine above plus what was measured.
struct cost_run {
    cost_state k;
    uint32_t period;
    int launches, rounds;
    std::string device;
    workload w;
    std::vector<double> med[4][2]; // [state][kernel][round]: the batch's median launch
    bool toggle_ok = true, paired = false;
    std::string toggle_error;
    CUptiResult in_range_error = CUPTI_SUCCESS;
    uint64_t in_range_calls = 0;
};

static void cost_batch(cost_run &cr, int s)
{
    std::vector<double> batch;
    for (int kern = 0; kern < 2; ++kern) {
        time_batch(cr.w, kern, cr.launches, batch);
        cr.med[s][kern].push_back(median(batch));
        if (s == ST_C) { // drain while started, so the buffers never fill
            uint64_t before = cr.k.c.calls;
            CUptiResult dr = drain(cr.k.ctx, *cr.k.out, cr.k.c, 1, 0, 2000);
            cr.in_range_calls += cr.k.c.calls - before;
            if (dr != CUPTI_SUCCESS && cr.in_range_error == CUPTI_SUCCESS)
                cr.in_range_error = dr;
        }
    }
}

// a before any enable, the first enable, whether disable and enable again
// work, then the rotation. Returns 1 when a state could not be reached.
static int cost_measure(cost_run &cr)
{
    cost_state &k = cr.k;
    for (int r = 0; r < cr.rounds; ++r)
        cost_batch(cr, ST_A_PRE);
    int status = 0;
    if (to_state(k, ST_B) != CUPTI_SUCCESS) // the first enable: needed
        die(1);
    CUptiResult tr = to_state(k, ST_A);
    if (tr == CUPTI_SUCCESS)
        tr = to_state(k, ST_B);
    if (tr != CUPTI_SUCCESS) {
        cr.toggle_ok = false;
        cr.toggle_error = cupti_name(tr);
        if (k.state == ST_A) {
            fprintf(stderr, "pc_sampling_probe: cost: enable after disable failed; only "
                            "a_pre_enable measured\n");
            status = 1;
        }
    }
    std::vector<int> states;
    if (cr.toggle_ok)
        states = {ST_A, ST_B, ST_C};
    else if (k.state == ST_B)
        states = {ST_B, ST_C};
    for (int r = 0; r < cr.rounds && !states.empty() && status == 0; ++r) {
        for (size_t j = 0; j < states.size(); ++j) {
            int s = states[(j + (size_t)r) % states.size()];
            if (to_state(k, s) != CUPTI_SUCCESS) {
                fprintf(stderr, "pc_sampling_probe: cost: could not reach state %s in round %d\n",
                        state_names[s], r);
                status = 1;
                break;
            }
            cost_batch(cr, s);
        }
    }
    if (k.state != ST_A && to_state(k, ST_A) != CUPTI_SUCCESS)
        status = 1;
    if (k.stop_drain_error != CUPTI_SUCCESS)
        status = 1;
    cr.paired = cr.toggle_ok && !cr.med[ST_A][0].empty();
    return status;
}

// One line per state and kernel: medians and ratios against a (paired by
// round), or against a_pre_enable's median where a is not in the rotation.
static void cost_print_states(const cost_run &cr)
{
    const int order[4] = {ST_A_PRE, ST_A, ST_B, ST_C};
    for (int kern = 0; kern < 2; ++kern) {
        const std::vector<double> &a = cr.med[ST_A][kern];
        for (int s : order) {
            const std::vector<double> &v = cr.med[s][kern];
            if (v.empty())
                continue;
            std::vector<double> ratios;
            const char *basis;
            if (s == ST_A_PRE) {
                basis = "a_not_enabled_median";
                if (cr.paired)
                    ratios.push_back(median(v) / median(a));
            } else if (cr.paired) {
                basis = "paired_a_not_enabled";
                for (size_t r = 0; r < v.size() && r < a.size(); ++r)
                    ratios.push_back(v[r] / a[r]);
            } else {
                basis = "a_pre_enable_median";
                double a_pre = median(cr.med[ST_A_PRE][kern]);
                for (double x : v)
                    ratios.push_back(x / a_pre);
            }
            std::string o;
            jadd(o,
                 "{\"probe\":\"pc\",\"mode\":\"cost\",\"period_exp\":%u,\"state\":\"%s\","
                 "\"kernel\":\"%s\",\"rounds\":%zu,\"launches\":%d,\"median_ms\":%.4f,"
                 "\"ratio_vs_a_median\":",
                 cr.period, state_names[s], kernel_names[kern], v.size(), cr.launches, median(v));
            jnum_or_null(o, median(ratios), !ratios.empty());
            jadd(o, ",\"ratio_basis\":\"%s\",\"per_round_ms\":[", basis);
            for (size_t r = 0; r < v.size(); ++r)
                jadd(o, "%s%.4f", r ? "," : "", v[r]);
            o += "]}";
            printf("%s\n", o.c_str());
        }
    }
}

static void jmedian_ms(std::string &o, const char *key, const std::vector<double> &v)
{
    jadd(o, "\"%s\":", key);
    jnum_or_null(o, median(v), !v.empty());
}

static void jresult_or_null(std::string &o, CUptiResult r)
{
    if (r == CUPTI_SUCCESS)
        o += "null";
    else
        jstr(o, cupti_name(r));
}

// The summary line: toggling, transition times, what state c collected.
static void cost_print_summary(const cost_run &cr)
{
    const cost_state &k = cr.k;
    std::string o;
    jadd(o, "{\"probe\":\"pc\",\"mode\":\"cost\",\"period_exp\":%u,\"summary\":true,\"device\":",
         cr.period);
    jstr(o, cr.device.c_str());
    jadd(o,
         ",\"launches\":%d,\"rounds\":%d,\"iters\":{\"hot_chain\":%d,\"cheap_math\":%d},"
         "\"toggle_enable_ok\":%s,\"toggle_error\":",
         cr.launches, cr.rounds, cr.w.hot_iters, cr.w.cheap_iters, cr.toggle_ok ? "true" : "false");
    if (cr.toggle_error.empty())
        o += "null";
    else
        jstr(o, cr.toggle_error.c_str());
    jadd(o, ",\"a_measured\":\"%s\"", cr.paired ? "rotation_and_pre_enable" : "pre_enable_only");
    o += ",\"transitions_ms_median\":{";
    jmedian_ms(o, "enable", k.t_enable);
    o += ',';
    jmedian_ms(o, "configure", k.t_config);
    o += ',';
    jmedian_ms(o, "start", k.t_start);
    o += ',';
    jmedian_ms(o, "stop", k.t_stop);
    o += ',';
    jmedian_ms(o, "drain_after_stop", k.t_drain);
    o += ',';
    jmedian_ms(o, "disable", k.t_disable);
    jadd(o, "},\"transitions\":{\"enable\":%zu,\"start\":%zu,\"disable\":%zu}", k.t_enable.size(),
         k.t_start.size(), k.t_disable.size());
    o += ",\"stop_drain_error\":";
    jresult_or_null(o, k.stop_drain_error);
    jadd(o, ",\"c_samples_total\":%llu,\"c_getdata_calls_in_range\":%llu",
         (unsigned long long)k.c.samples_in_records, (unsigned long long)cr.in_range_calls);
    o += ",\"c_getdata_in_range_error\":";
    jresult_or_null(o, cr.in_range_error);
    o += ",\"c_functions\":";
    std::map<std::string, uint64_t> funcs;
    for (auto &kv : k.c.pcs)
        funcs[kv.first.func] += kv.second.samples;
    jcounts(o, counts(funcs.begin(), funcs.end()), 0);
    o += ",\"c_counters\":";
    jcollected_counters(o, k.c);
    o += '}';
    printf("%s\n", o.c_str());
    fflush(stdout);

    auto ratio = [&](int s, int kern) {
        const std::vector<double> &v = cr.med[s][kern];
        if (v.empty())
            return -1.0;
        return median(v) / median(cr.med[cr.paired ? ST_A : ST_A_PRE][kern]);
    };
    fprintf(stderr,
            "pc_sampling_probe: cost period %u: hot_chain b/a %.3f c/a %.3f, cheap_math b/a "
            "%.3f c/a %.3f (median over medians, a %s; -1: not measured), toggle %s, %llu "
            "samples in c\n",
            cr.period, ratio(ST_B, K_HOT), ratio(ST_C, K_HOT), ratio(ST_B, K_CHEAP),
            ratio(ST_C, K_CHEAP), cr.paired ? "in rotation" : "before enable",
            cr.toggle_ok ? "ok" : "failed", (unsigned long long)k.c.samples_in_records);
}

static int run_cost(uint32_t period, int launches, int rounds)
{
    cost_run cr;
    cr.period = period;
    cr.launches = launches;
    cr.rounds = rounds;
    cr.k.budget_ms = env_num("PCP_DRAIN_BUDGET_S", 30) * 1000;
    cr.k.pc = config_from_env(period);
    cr.k.ctx = start_cuda(cr.device);
    memset(&cr.w, 0, sizeof cr.w);
    workload_init(cr.w, env_num("PCP_TARGET_MS", 10));
    int status = cost_measure(cr);
    cost_print_states(cr);
    cost_print_summary(cr);
    if (status == 0 && cr.k.c.samples_in_records == 0) {
        fprintf(stderr, "pc_sampling_probe: cost: sampling ran but no sample came back\n");
        status = 3;
    }
    return status;
}

// ---------------------------------------------------------------- launches

// What CUPTI itself charges a launch-bound program while PC sampling is
// enabled and configured but not started (state b), against the same process
// with it disabled (state a): the floor under flare's pc-idle cost, measured
// in one process, so the 30-40% launch-rate spread between processes (which
// left docs/PERFORMANCE.md's pc-idle cost unsettled) does not enter.

// One block of 32 threads; thread 0 counts the launch, so nothing is
// optimised away and the host can check that every launch ran.
__global__ void tiny_count(unsigned long long *count)
{
    if (threadIdx.x == 0)
        atomicAdd(count, 1ull);
}

// The same kernel as PTX (what nvcc -ptx makes of tiny_count, renamed), for
// the rounds of a taken before the first enable (launched through
// cudaLaunchKernel with its cudaKernel_t, a slightly different path from
// <<<>>>: a fallback basis only). Loaded by cudaLibraryLoadData (JIT-compiled
// at its first launch) it is a module of its own: under lazy loading CUDA
// loads a module at the first launch of any of its kernels, so launching a
// kernel of this file's before the enable would load tiny_count's module
// early, and its launches would no longer be those of a module loaded under
// PC sampling, as a program's are under flare.
static const char twin_ptx[] = ".version 7.8\n"
                               ".target sm_90\n"
                               ".address_size 64\n"
                               ".visible .entry tiny_twin(.param .u64 tiny_twin_param_0)\n"
                               "{\n"
                               "  .reg .pred %p<2>;\n"
                               "  .reg .b32 %r<2>;\n"
                               "  .reg .b64 %rd<4>;\n"
                               "  ld.param.u64 %rd1, [tiny_twin_param_0];\n"
                               "  mov.u32 %r1, %tid.x;\n"
                               "  setp.ne.s32 %p1, %r1, 0;\n"
                               "  @%p1 bra DONE;\n"
                               "  cvta.to.global.u64 %rd2, %rd1;\n"
                               "  atom.global.add.u64 %rd3, [%rd2], 1;\n"
                               "DONE:\n"
                               "  ret;\n"
                               "}\n";

enum { LAUNCH_WARMUP = 1000 };

// A launches run: the CUPTI state machine of cost (states a and b only) and
// what was measured. ns[s] and call_ns[s] hold one value per round: the
// batch's wall time and its launch calls' time, each over LAUNCHES.
struct launches_run {
    cost_state k;
    uint32_t period;
    int launches, rounds;
    std::string device;
    unsigned long long *count_main = nullptr, *count_twin = nullptr; // device counters
    unsigned long long main_launched = 0, twin_launched = 0;
    cudaKernel_t twin = nullptr;
    std::string twin_error; // why a_pre_enable was not measured
    std::vector<double> ns[4], call_ns[4];
    bool toggle_ok = true;
    std::string toggle_error;
    size_t modules_before_enable = 0, modules_after_first_launch = 0;
    double first_launch_ms = -1;
    bool counts_ok = false;
};

// n launches of one block of 32 threads into the default stream, no sync.
// tiny_count's launch errors are read once after the loop (the runtime keeps
// the last one for cudaGetLastError), so the loop holds nothing but launches.
static void launch_n(launches_run &lr, bool twin, int n)
{
    if (twin) {
        void *args[1] = {&lr.count_twin};
        for (int i = 0; i < n; ++i)
            CUDA_CHECK(cudaLaunchKernel((const void *)lr.twin, dim3(1), dim3(32), args, 0, 0));
        lr.twin_launched += (unsigned long long)n;
    } else {
        for (int i = 0; i < n; ++i)
            tiny_count<<<1, 32>>>(lr.count_main);
        CUDA_CHECK(cudaGetLastError());
        lr.main_launched += (unsigned long long)n;
    }
}

// One batch in state s (ST_A_PRE: the twin): LAUNCH_WARMUP launches and a
// sync, untimed, then LAUNCHES launches timed on the host's steady clock,
// the launch calls alone and with the sync that follows them.
static void launch_batch(launches_run &lr, int s)
{
    bool twin = s == ST_A_PRE;
    launch_n(lr, twin, LAUNCH_WARMUP);
    CUDA_CHECK(cudaStreamSynchronize(0));
    auto t0 = std::chrono::steady_clock::now();
    launch_n(lr, twin, lr.launches);
    auto t1 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaStreamSynchronize(0));
    auto t2 = std::chrono::steady_clock::now();
    double n = (double)lr.launches;
    lr.ns[s].push_back(std::chrono::duration<double, std::nano>(t2 - t0).count() / n);
    lr.call_ns[s].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
}

// Loads the twin and launches it once (a JIT or load failure shows here, not
// in a timed batch). On failure the error is named and kept in twin_error,
// and the run goes on without a_pre_enable.
static void twin_load(launches_run &lr)
{
    cudaLibrary_t lib = nullptr;
    const char *what = "cudaLibraryLoadData(tiny_twin PTX)";
    cudaError_t e = cudaLibraryLoadData(&lib, twin_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e == cudaSuccess) {
        what = "cudaLibraryGetKernel(tiny_twin)";
        e = cudaLibraryGetKernel(&lr.twin, lib, "tiny_twin");
    }
    if (e == cudaSuccess) {
        what = "cudaLaunchKernel(tiny_twin), first launch";
        void *args[1] = {&lr.count_twin};
        e = cudaLaunchKernel((const void *)lr.twin, dim3(1), dim3(32), args, 0, 0);
        if (e == cudaSuccess) {
            lr.twin_launched++;
            what = "cudaStreamSynchronize after tiny_twin's first launch";
            e = cudaStreamSynchronize(0);
        }
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "pc_sampling_probe: launches: %s: %s: %s; a_pre_enable not measured\n",
                what, cudaGetErrorName(e), cudaGetErrorString(e));
        lr.twin_error = std::string(what) + ": " + cudaGetErrorName(e);
        lr.twin = nullptr;
        cudaGetLastError(); // a load or launch failure is not sticky; clear it
    }
}

// a_pre_enable with the twin, the first enable, whether disable and enable
// again work (before tiny_count's first launch), tiny_count's first launch
// in state b (its module loads there), then the rounds, b first in even
// rounds and a first in odd ones. Returns 1 when a state could not be
// reached or nothing can be compared; dies when the first enable fails.
static int launches_measure(launches_run &lr)
{
    cost_state &k = lr.k;
    twin_load(lr);
    for (int r = 0; r < lr.rounds && lr.twin != nullptr; ++r)
        launch_batch(lr, ST_A_PRE);
    lr.modules_before_enable = modules_loaded();
    if (to_state(k, ST_B) != CUPTI_SUCCESS) // the first enable: needed
        die(1);
    CUptiResult tr = to_state(k, ST_A);
    if (tr == CUPTI_SUCCESS)
        tr = to_state(k, ST_B);
    if (tr != CUPTI_SUCCESS) {
        lr.toggle_ok = false;
        lr.toggle_error = cupti_name(tr);
        fprintf(stderr, "pc_sampling_probe: launches: disable and enable again failed (%s); %s\n",
                lr.toggle_error.c_str(),
                k.state == ST_B ? "b is measured against a_pre_enable"
                                : "b cannot be reached; nothing to compare");
        if (k.state != ST_B)
            return 1;
    }
    double t = now_ms();
    tiny_count<<<1, 32>>>(lr.count_main);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(0));
    lr.first_launch_ms = now_ms() - t;
    lr.main_launched++;
    lr.modules_after_first_launch = modules_loaded();

    int status = 0;
    std::vector<int> states;
    if (lr.toggle_ok)
        states = {ST_B, ST_A};
    else
        states = {ST_B};
    for (int r = 0; r < lr.rounds && status == 0; ++r) {
        for (size_t j = 0; j < states.size(); ++j) {
            int s = states[(j + (size_t)r) % states.size()];
            if (to_state(k, s) != CUPTI_SUCCESS) {
                fprintf(stderr,
                        "pc_sampling_probe: launches: could not reach state %s in round %d\n",
                        state_names[s], r);
                status = 1;
                break;
            }
            launch_batch(lr, s);
        }
    }
    // A disable that failed in the toggle test would fail again here; the
    // process's exit tears sampling down.
    if (lr.toggle_ok && k.state != ST_A && to_state(k, ST_A) != CUPTI_SUCCESS)
        status = 1;
    if (!lr.toggle_ok && lr.twin == nullptr) {
        fprintf(stderr, "pc_sampling_probe: launches: no a to compare b against (toggle failed, "
                        "no a_pre_enable)\n");
        status = 1;
    }
    return status;
}

// Reads the device counters back: every launch must have run once.
static int launches_check_counts(launches_run &lr)
{
    unsigned long long got_main = 0, got_twin = 0;
    CUDA_CHECK(cudaMemcpy(&got_main, lr.count_main, sizeof got_main, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&got_twin, lr.count_twin, sizeof got_twin, cudaMemcpyDeviceToHost));
    lr.counts_ok = got_main == lr.main_launched && got_twin == lr.twin_launched;
    if (!lr.counts_ok) {
        fprintf(stderr,
                "pc_sampling_probe: launches: the kernels counted %llu and %llu launches, the "
                "host made %llu and %llu\n",
                got_main, got_twin, lr.main_launched, lr.twin_launched);
        return 1;
    }
    return 0;
}

static void jstats(std::string &o, const char *key, const std::vector<double> &v)
{
    bool any = !v.empty();
    jadd(o, "\"%s_median\":", key);
    jnum_or_null(o, median(v), any);
    jadd(o, ",\"%s_min\":", key);
    jnum_or_null(o, any ? *std::min_element(v.begin(), v.end()) : 0, any);
    jadd(o, ",\"%s_max\":", key);
    jnum_or_null(o, any ? *std::max_element(v.begin(), v.end()) : 0, any);
}

// One line per state measured: ns per launch and per launch call, over rounds.
static void launches_print_states(const launches_run &lr)
{
    const int order[3] = {ST_A_PRE, ST_A, ST_B};
    for (int s : order) {
        const std::vector<double> &v = lr.ns[s];
        if (v.empty())
            continue;
        std::string o;
        jadd(o,
             "{\"probe\":\"pc\",\"mode\":\"launches\",\"period_exp\":%u,\"state\":\"%s\","
             "\"kernel\":\"%s\",\"rounds\":%zu,\"launches\":%d,\"warmup\":%d,",
             lr.period, state_names[s], s == ST_A_PRE ? "tiny_twin" : "tiny_count", v.size(),
             lr.launches, (int)LAUNCH_WARMUP);
        jstats(o, "ns_per_launch", v);
        o += ',';
        jstats(o, "call_ns_per_launch", lr.call_ns[s]);
        o += ",\"per_round_ns\":[";
        for (size_t r = 0; r < v.size(); ++r)
            jadd(o, "%s%.1f", r ? "," : "", v[r]);
        o += "]}";
        printf("%s\n", o.c_str());
    }
}

// b against a: paired by round when toggling works, else each round of b
// against a_pre_enable's median. diff gets b - a (ns), rate gets a / b (b's
// launch rate as a share of a's: 1 is no cost).
static const char *launches_pairs(const launches_run &lr, const std::vector<double> *ns,
                                  std::vector<double> &diff, std::vector<double> &rate)
{
    const std::vector<double> &b = ns[ST_B];
    diff.clear();
    rate.clear();
    if (lr.toggle_ok) {
        const std::vector<double> &a = ns[ST_A];
        for (size_t r = 0; r < b.size() && r < a.size(); ++r) {
            diff.push_back(b[r] - a[r]);
            rate.push_back(a[r] / b[r]);
        }
        return "paired_a_not_enabled";
    }
    if (ns[ST_A_PRE].empty())
        return "none";
    double a = median(ns[ST_A_PRE]);
    for (double x : b) {
        diff.push_back(x - a);
        rate.push_back(a / x);
    }
    return "a_pre_enable_median";
}

// The summary line and the one-line human summary.
static void launches_print_summary(const launches_run &lr)
{
    const cost_state &k = lr.k;
    std::vector<double> diff, rate, call_diff, call_rate;
    const char *basis = launches_pairs(lr, lr.ns, diff, rate);
    launches_pairs(lr, lr.call_ns, call_diff, call_rate);
    std::string o;
    jadd(o,
         "{\"probe\":\"pc\",\"mode\":\"launches\",\"period_exp\":%u,\"summary\":true,\"device\":",
         lr.period);
    jstr(o, lr.device.c_str());
    const char *loading = getenv("CUDA_MODULE_LOADING");
    o += ",\"module_loading\":";
    jstr(o, loading ? loading : "");
    jadd(o, ",\"launches\":%d,\"rounds\":%d,\"warmup\":%d,\"toggle_enable_ok\":%s,\"toggle_error\":",
         lr.launches, lr.rounds, (int)LAUNCH_WARMUP, lr.toggle_ok ? "true" : "false");
    if (lr.toggle_error.empty())
        o += "null";
    else
        jstr(o, lr.toggle_error.c_str());
    o += ",\"a_pre_enable_error\":";
    if (lr.twin_error.empty())
        o += "null";
    else
        jstr(o, lr.twin_error.c_str());
    jadd(o, ",\"basis\":\"%s\",\"pairs\":%zu,", basis, diff.size());
    jstats(o, "b_minus_a_ns_per_launch", diff);
    o += ',';
    jstats(o, "b_rate_vs_a", rate);
    o += ",\"b_minus_a_call_ns_per_launch_median\":";
    jnum_or_null(o, median(call_diff), !call_diff.empty());
    o += ",\"b_call_rate_vs_a_median\":";
    jnum_or_null(o, median(call_rate), !call_rate.empty());
    jadd(o,
         ",\"modules_loaded_before_enable\":%zu,\"modules_loaded_after_first_launch\":%zu,"
         "\"first_launch_ms\":%.3f,\"launches_counted_ok\":%s,\"transitions_ms_median\":{",
         lr.modules_before_enable, lr.modules_after_first_launch, lr.first_launch_ms,
         lr.counts_ok ? "true" : "false");
    jmedian_ms(o, "enable", k.t_enable);
    o += ',';
    jmedian_ms(o, "configure", k.t_config);
    o += ',';
    jmedian_ms(o, "disable", k.t_disable);
    jadd(o, "},\"transitions\":{\"enable\":%zu,\"disable\":%zu}}", k.t_enable.size(),
         k.t_disable.size());
    printf("%s\n", o.c_str());
    fflush(stdout);

    if (diff.empty()) {
        fprintf(stderr, "pc_sampling_probe: launches period %u: no b - a pair measured, toggle %s\n",
                lr.period, lr.toggle_ok ? "ok" : "failed");
        return;
    }
    fprintf(stderr,
            "pc_sampling_probe: launches period %u: b - a %+.1f ns a launch (median of %zu, "
            "%+.1f..%+.1f; a %.1f ns), b's launch rate %.4f of a's, launch calls alone %+.1f ns; "
            "a %s, toggle %s\n",
            lr.period, median(diff), diff.size(), *std::min_element(diff.begin(), diff.end()),
            *std::max_element(diff.begin(), diff.end()),
            median(lr.toggle_ok ? lr.ns[ST_A] : lr.ns[ST_A_PRE]), median(rate), median(call_diff),
            lr.toggle_ok ? "paired by round" : "before the first enable",
            lr.toggle_ok ? "ok" : "failed");
}

static int run_launches(uint32_t period, int launches, int rounds)
{
    launches_run lr;
    lr.period = period;
    lr.launches = launches;
    lr.rounds = rounds;
    lr.k.budget_ms = env_num("PCP_DRAIN_BUDGET_S", 30) * 1000;
    lr.k.pc = config_from_env(period);
    lr.k.ctx = start_cuda(lr.device);
    CUDA_CHECK(cudaMalloc(&lr.count_main, sizeof(unsigned long long)));
    CUDA_CHECK(cudaMalloc(&lr.count_twin, sizeof(unsigned long long)));
    CUDA_CHECK(cudaMemset(lr.count_main, 0, sizeof(unsigned long long)));
    CUDA_CHECK(cudaMemset(lr.count_twin, 0, sizeof(unsigned long long)));
    CUDA_CHECK(cudaDeviceSynchronize());
    int status = launches_measure(lr);
    if (launches_check_counts(lr) != 0)
        status = 1;
    launches_print_states(lr);
    launches_print_summary(lr);
    return status;
}

// ---------------------------------------------------------------- periods

static int run_periods(int launches, const char *argv0)
{
    static const int exps[] = {5, 8, 10, 12, 15};
    double child_timeout_s = env_num("PCP_CHILD_TIMEOUT_S", 22);
    int failures = 0;
    for (int e : exps) {
        char e_arg[16], l_arg[16], deadline[32], drain_budget[32];
        snprintf(e_arg, sizeof e_arg, "%d", e);
        snprintf(l_arg, sizeof l_arg, "%d", launches);
        snprintf(deadline, sizeof deadline, "%d", std::max(1, (int)child_timeout_s - 2));
        snprintf(drain_budget, sizeof drain_budget, "%d", std::max(1, (int)child_timeout_s / 2));
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("pc_sampling_probe: fork");
            return 1;
        }
        if (pid == 0) {
            setenv("PCP_DEADLINE_S", deadline, 1);
            setenv("PCP_DRAIN_BUDGET_S", drain_budget, 0);
            execl("/proc/self/exe", argv0, "sample", e_arg, l_arg, "--short", (char *)nullptr);
            perror("pc_sampling_probe: execl /proc/self/exe");
            _exit(127);
        }
        int wstatus = 0;
        bool timed_out = false, reaped = false;
        double t0 = now_ms();
        for (;;) {
            pid_t got = waitpid(pid, &wstatus, WNOHANG);
            if (got == pid) {
                reaped = true;
                break;
            }
            if (got < 0) {
                perror("pc_sampling_probe: waitpid");
                break;
            }
            if (!timed_out && now_ms() - t0 > child_timeout_s * 1000) {
                timed_out = true;
                kill(pid, SIGKILL);
                t0 = now_ms() - child_timeout_s * 1000; // 10 s more to reap it
            } else if (timed_out && now_ms() - t0 > child_timeout_s * 1000 + 10000) {
                fprintf(stderr, "pc_sampling_probe: child %d not reaped 10 s after SIGKILL\n",
                        (int)pid);
                break;
            }
            usleep(20000);
        }
        char why[64] = "";
        if (timed_out)
            snprintf(why, sizeof why, "timeout after %.0f s", child_timeout_s);
        else if (!reaped)
            snprintf(why, sizeof why, "not reaped");
        else if (WIFSIGNALED(wstatus))
            snprintf(why, sizeof why, "signal %d", WTERMSIG(wstatus));
        else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0)
            snprintf(why, sizeof why, "exit %d", WEXITSTATUS(wstatus));
        if (why[0]) {
            failures++;
            printf("{\"probe\":\"pc\",\"mode\":\"periods\",\"period_exp\":%d,\"error\":\"%s\"}\n",
                   e, why);
            fflush(stdout);
        }
    }
    fprintf(stderr, "pc_sampling_probe: periods: %d of %zu period runs failed\n", failures,
            sizeof exps / sizeof exps[0]);
    return failures ? 1 : 0;
}

// ---------------------------------------------------------------- main

static int usage()
{
    fprintf(stderr, "usage: pc_sampling_probe sample PERIOD_EXP LAUNCHES [late]\n"
                    "       pc_sampling_probe cost PERIOD_EXP LAUNCHES ROUNDS\n"
                    "       pc_sampling_probe launches PERIOD_EXP LAUNCHES ROUNDS\n"
                    "       pc_sampling_probe periods LAUNCHES\n"
                    "PERIOD_EXP: 5..31 (0: CUPTI's default); LAUNCHES 1..10000 (launches: "
                    "1..1000000); ROUNDS 1..1000\n");
    return 2;
}

int main(int argc, char **argv)
{
    g_t0 = now_ms();
    signal(SIGALRM, on_deadline);
    alarm((unsigned)std::max(1.0, env_num("PCP_DEADLINE_S", 110)));
    if (argc < 2)
        return usage();
    std::string mode = argv[1];
    long period = 0, launches = 0, rounds = 0;
    if (mode == "periods") {
        if (argc != 3 || !parse_int(argv[2], 1, 10000, &launches))
            return usage();
        return run_periods((int)launches, argv[0]);
    }
    bool late = false, short_line = false;
    if (mode == "sample") {
        if (argc < 4 || !parse_int(argv[2], 0, 31, &period) || (period && period < 5) ||
            !parse_int(argv[3], 1, 10000, &launches))
            return usage();
        for (int i = 4; i < argc; ++i) {
            if (strcmp(argv[i], "late") == 0)
                late = true;
            else if (strcmp(argv[i], "--short") == 0)
                short_line = true;
            else
                return usage();
        }
    } else if (mode == "cost") {
        if (argc != 5 || !parse_int(argv[2], 0, 31, &period) || (period && period < 5) ||
            !parse_int(argv[3], 1, 10000, &launches) || !parse_int(argv[4], 1, 1000, &rounds))
            return usage();
    } else if (mode == "launches") {
        if (argc != 5 || !parse_int(argv[2], 0, 31, &period) || (period && period < 5) ||
            !parse_int(argv[3], 1, 1000000, &launches) || !parse_int(argv[4], 1, 1000, &rounds))
            return usage();
    } else {
        return usage();
    }

    // Modules load at their first launch, after the enable (unless late);
    // the subscriber sees every module load, so it comes before any CUDA call.
    setenv("CUDA_MODULE_LOADING", "LAZY", 0);
    // launches JIT-compiles its twin's PTX; CUDA would keep the result in
    // ~/.nv/ComputeCache, and this probe writes no files.
    if (mode == "launches")
        setenv("CUDA_CACHE_DISABLE", "1", 1);
    CUpti_SubscriberHandle sub;
    CUPTI_CHECK(cuptiSubscribe(&sub, on_callback, nullptr));
    CUPTI_CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE));

    int status;
    if (mode == "sample")
        status = run_sample((uint32_t)period, (int)launches, late, short_line);
    else if (mode == "cost")
        status = run_cost((uint32_t)period, (int)launches, (int)rounds);
    else
        status = run_launches((uint32_t)period, (int)launches, (int)rounds);
    fflush(stdout);
    fflush(stderr);
    cupti_note(cuptiUnsubscribe(sub), "cuptiUnsubscribe");
    g_alarm_status = status ? status : 124;
    alarm(20); // exit handlers (CUPTI's among them) get 20 s
    return status;
}
