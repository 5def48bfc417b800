// pc_hot_loop.cu: a CUDA C program with one known hot loop, for checking
// flare's CUDA PC-sampling deep window on the H200 (issue 26: "a CUDA C kernel
// with a known hot loop opens a window with `pc`: the top stall reason is the
// memory-dependency one, and >= 80% of the samples land on the hot loop";
// scripts/gpu-check-pcwindow.sh runs it under `flare trace --deep-engine pc`,
// tests/gpu/pc_window_check.py judges the session).
//
//   pc_hot_loop SECONDS
//
// Two kernels, declared extern "C" so that their names reach flare unmangled:
//   hot_chain   each thread follows a pseudo-random permutation of 64 Mi
//               indexes (256 MiB, far past the H200's 50 MB L2) for ITERS
//               dependent loads: one cache miss per step, the load's result is
//               the next address. The loop is kept to a handful of
//               instructions (`#pragma unroll 1`): the check expects >= 80% of
//               hot_chain's samples inside 256 bytes of code.
//   cheap_math  dependent FMAs in registers; no memory traffic inside its loop.
// Both are calibrated at start so that one launch takes about 5 ms, or
// PC_HOT_LOOP_MS ms (0.05 to 100; the SASS check shortens them, as patched
// kernels run up to 465x slower), the iteration counts scaled until a timed
// launch lands within 10% of it,
// then a step (one NVTX push/pop range "step", as tests/gpu/pm_accuracy.cu
// has) launches hot_chain and then cheap_math and synchronises; steps repeat
// until SECONDS have passed since the first step. At the end it checks two of
// hot_chain's results against the chain computed on the host (so a profiler
// that corrupts memory is caught) and prints one line:
//   pc_hot_loop steps N hot_iters H cheap_iters C hot_ms X cheap_ms Y warps W checksum 0x...
// (W: warps per launch of either kernel).
// Exit 0; 1 on a CUDA error or a wrong result; 2 on bad usage (a message).
//
// Must never: put anything but the dependent load into hot_chain's loop, or
// unroll it, or add memory traffic to cheap_math's loop (the check's
// expectations rest on them); let the kernels' work be optimised away (every result reaches the
// checksum); run without synchronising for more than one step.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t status_ = (call);                                                              \
        if (status_ != cudaSuccess) {                                                              \
            fprintf(stderr, "pc_hot_loop: %s failed: %s (%s:%d)\n", #call,                         \
                    cudaGetErrorString(status_), __FILE__, __LINE__);                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHAIN_LEN   (64u << 20) // 64 Mi unsigned: 256 MiB
#define CHAIN_A     0x9E3779B1u // = 1 mod 4: with CHAIN_C odd, one cycle through every index
#define CHAIN_C     0x3C6EF35Fu // (Hull-Dobell), successive indexes far apart
#define START_A     0x85EBCA6Bu // each thread's first index
#define START_C     0x27D4EB2Fu
#define TARGET_MS   5.0 // one launch of either kernel, unless PC_HOT_LOOP_MS says
#define MAX_SECONDS 3600

// next[i] = (CHAIN_A * i + CHAIN_C) mod CHAIN_LEN: a permutation of the
// indexes; following it is an LCG the host can replay without the buffer.
extern "C" __global__ void init_chain(unsigned *next, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        next[i] = (CHAIN_A * i + CHAIN_C) & (n - 1);
}

// The known hot loop: ITERS dependent global loads per thread.
extern "C" __global__ void hot_chain(const unsigned *next, unsigned mask, int iters, unsigned *out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned idx = (tid * START_A + START_C) & mask;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) // HOT LOOP: one dependent load, one miss, per step
        idx = next[idx];
    out[tid] = idx;
}

// Arithmetic only: three dependent FMA chains in registers.
extern "C" __global__ void cheap_math(int iters, float *out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float a = tid * 1e-7f, b = 1.0f - a, c = 0.25f;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, 0.5f, b);
        b = fmaf(b, 0.5f, c);
        c = fmaf(c, 0.5f, 0.1f);
    }
    out[tid] = a + b + c;
}

typedef struct workload {
    unsigned *next;
    unsigned *out_u;
    float *out_f;
    int blocks, threads;
    int hot_iters, cheap_iters;
    double hot_ms, cheap_ms; // the last calibration launch of each
} workload;

enum { K_HOT = 0, K_CHEAP = 1 };

static void launch(const workload *w, int kernel)
{
    if (kernel == K_HOT)
        hot_chain<<<w->blocks, w->threads>>>(w->next, CHAIN_LEN - 1, w->hot_iters, w->out_u);
    else
        cheap_math<<<w->blocks, w->threads>>>(w->cheap_iters, w->out_f);
    CUDA_CHECK(cudaGetLastError());
}

// One launch of kernel, timed on the GPU; returns milliseconds.
static double time_launch(const workload *w, int kernel)
{
    cudaEvent_t start, end;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&end));
    CUDA_CHECK(cudaEventRecord(start));
    launch(w, kernel);
    CUDA_CHECK(cudaEventRecord(end));
    CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(end));
    return ms;
}

// Scales kernel's iteration count until one launch takes about TARGET_MS
// (at most 8 timed launches, each scale step at most 64x). Leaves the
// count and the last launch's time in w.
static void calibrate(workload *w, int kernel, double target_ms)
{
    int *iters = kernel == K_HOT ? &w->hot_iters : &w->cheap_iters;
    double *ms = kernel == K_HOT ? &w->hot_ms : &w->cheap_ms;
    const long max_iters = kernel == K_HOT ? (1L << 20) : (1L << 26);
    *iters = kernel == K_HOT ? 64 : 4096;
    launch(w, kernel); // warm-up: module load, first touch
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int pass = 0; pass < 8; ++pass) {
        *ms = time_launch(w, kernel);
        double scale = target_ms / (*ms > 1e-3 ? *ms : 1e-3);
        if ((scale > 0.9 && scale < 1.1) || pass == 7)
            break; // *ms stays the time of *iters
        if (scale > 64.0)
            scale = 64.0;
        long next = (long)(*iters * scale);
        *iters = (int)(next < 16 ? 16 : next > max_iters ? max_iters : next);
    }
}

static double seconds_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The index thread tid of hot_chain ends on, computed on the host.
static unsigned expected_index(unsigned tid, int iters)
{
    unsigned mask = CHAIN_LEN - 1;
    unsigned idx = (tid * START_A + START_C) & mask;
    for (int i = 0; i < iters; ++i)
        idx = (CHAIN_A * idx + CHAIN_C) & mask;
    return idx;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    double seconds = argc == 2 ? strtod(argv[1], &end) : 0;
    if (argc != 2 || end == argv[1] || *end != '\0' || !(seconds > 0) || seconds > MAX_SECONDS) {
        fprintf(stderr, "usage: pc_hot_loop SECONDS   (how long to run: more than 0, at most %d)\n",
                MAX_SECONDS);
        return 2;
    }
    workload w;
    memset(&w, 0, sizeof(w));
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    w.threads = 256;
    w.blocks = sms * 8; // 2048 threads per SM
    size_t nthreads = (size_t)w.blocks * w.threads;
    CUDA_CHECK(cudaMalloc(&w.next, (size_t)CHAIN_LEN * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&w.out_u, nthreads * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&w.out_f, nthreads * sizeof(float)));
    init_chain<<<sms * 16, 256>>>(w.next, CHAIN_LEN);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    const char *target_text = getenv("PC_HOT_LOOP_MS");
    double target_ms = target_text != NULL ? strtod(target_text, &end) : TARGET_MS;
    if (target_text != NULL && (end == target_text || *end != '\0' || !(target_ms >= 0.05) ||
                                target_ms > 100)) {
        fprintf(stderr, "pc_hot_loop: PC_HOT_LOOP_MS=%s: a launch's ms, 0.05 to 100\n",
                target_text);
        return 2;
    }
    calibrate(&w, K_HOT, target_ms);
    calibrate(&w, K_CHEAP, target_ms);

    long steps = 0;
    auto start = std::chrono::steady_clock::now();
    while (seconds_since(start) < seconds) {
        nvtxRangePushA("step");
        launch(&w, K_HOT);
        launch(&w, K_CHEAP);
        CUDA_CHECK(cudaDeviceSynchronize());
        nvtxRangePop();
        steps++;
    }

    unsigned *out_u = (unsigned *)malloc(nthreads * sizeof(unsigned));
    uint32_t *out_f = (uint32_t *)malloc(nthreads * sizeof(float)); // the floats' bits
    if (out_u == NULL || out_f == NULL) {
        fprintf(stderr, "pc_hot_loop: out of host memory\n");
        return 1;
    }
    CUDA_CHECK(cudaMemcpy(out_u, w.out_u, nthreads * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out_f, w.out_f, nthreads * sizeof(float), cudaMemcpyDeviceToHost));
    unsigned last = (unsigned)nthreads - 1;
    if (out_u[0] != expected_index(0, w.hot_iters) ||
        out_u[last] != expected_index(last, w.hot_iters)) {
        fprintf(stderr,
                "pc_hot_loop: wrong result: hot_chain threads 0 and %u ended on %u and %u, "
                "expected %u and %u\n",
                last, out_u[0], out_u[last], expected_index(0, w.hot_iters),
                expected_index(last, w.hot_iters));
        return 1;
    }
    uint64_t checksum = 1469598103934665603ull; // FNV-1a over both outputs
    for (size_t i = 0; i < nthreads; ++i) {
        checksum = (checksum ^ out_u[i]) * 1099511628211ull;
        checksum = (checksum ^ out_f[i]) * 1099511628211ull;
    }
    free(out_u);
    free(out_f);
    CUDA_CHECK(cudaFree(w.next));
    CUDA_CHECK(cudaFree(w.out_u));
    CUDA_CHECK(cudaFree(w.out_f));
    printf("pc_hot_loop steps %ld hot_iters %d cheap_iters %d hot_ms %.2f cheap_ms %.2f warps %zu "
           "checksum 0x%016llx\n",
           steps, w.hot_iters, w.cheap_iters, w.hot_ms, w.cheap_ms, nthreads / 32,
           (unsigned long long)checksum);
    return 0;
}
