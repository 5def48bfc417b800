// pm_accuracy.cu: known kernels from about 5 us to 5 ms, memory-bound and
// compute-bound, for measuring how well PM samples integrated over a kernel's
// [start, end] match the range profiler's exact per-kernel values (issue 25,
// item 1; tests/gpu/pm_accuracy.py drives it, scripts/gpu-check-pmaccuracy.sh
// runs that on the H200).
//
//   pm_accuracy STEPS [--min-seconds S]
//
// Each step is one NVTX push/pop range "step" holding, serially on one
// stream and with no synchronisation inside it, for each target length
// (5us, 20us, 100us, 500us, 2ms, 5ms) a memory-bound kernel `mem_<len>`
// (y = a*x + y over float4 arrays, repeated passes over 1 GiB arrays for the
// long ones) followed by a compute-bound one `fma_<len>` (8 independent FMA
// chains per thread in registers, 4 blocks of 256 per SM); the short lengths
// are repeated (5us and 20us x4, 100us x2), always alternating mem and fma. The
// lengths are targets for an H200 (about 4 TB/s achieved, 1.98 GHz); the
// driver reads the real durations from the trace. Between steps, outside
// the range: cudaStreamSynchronize and a 2 ms host sleep, so steps and
// windows separate. At least STEPS steps run; with --min-seconds the
// program keeps stepping until S seconds after it started (a scheduled deep
// window must find it busy). The checksum of the arrays is printed at the
// end, as JSON, outside every range.
//
// Must never: allocate or free memory, or copy device to host, inside a
// step (range replay would decline the span); synchronise inside a step;
// let a kernel's work be optimised away (every result reaches the checksum);
// touch one element from two threads in one kernel (results stay exact and
// repeatable, with and without replay).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <thread>
#include <vector>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t error_ = (call);                                                               \
        if (error_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                           \
                    cudaGetErrorString(error_));                                                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

// y[offset + i] = a * x[offset + i] + y[offset + i] for i < n, `passes` times.
// With a grid-stride loop each element belongs to one thread in every pass,
// so the passes need no synchronisation and the result is exact.
__device__ __forceinline__ void axpy_body(float4 *y, const float4 *x, size_t offset, size_t n,
                                          int passes, float a)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (int p = 0; p < passes; p++)
        for (size_t i = first; i < n; i += stride) {
            const float4 xv = x[offset + i];
            float4 yv = y[offset + i];
            yv.x = a * xv.x + yv.x;
            yv.y = a * xv.y + yv.y;
            yv.z = a * xv.z + yv.z;
            yv.w = a * xv.w + yv.w;
            y[offset + i] = yv;
        }
}

// 8 independent FMA chains per thread; v -> v * b + c converges to
// c / (1 - b), so nothing overflows however long it runs. The runtime
// iteration count keeps the compiler from folding the loop.
__device__ __forceinline__ void fma_body(float *out, int iters, float b)
{
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const float c = 1e-3f;
    float v0 = (float)(t & 1023) * 1e-6f, v1 = v0 + 0.1f, v2 = v0 + 0.2f, v3 = v0 + 0.3f;
    float v4 = v0 + 0.4f, v5 = v0 + 0.5f, v6 = v0 + 0.6f, v7 = v0 + 0.7f;
#pragma unroll 4
    for (int i = 0; i < iters; i++) {
        v0 = fmaf(v0, b, c);
        v1 = fmaf(v1, b, c);
        v2 = fmaf(v2, b, c);
        v3 = fmaf(v3, b, c);
        v4 = fmaf(v4, b, c);
        v5 = fmaf(v5, b, c);
        v6 = fmaf(v6, b, c);
        v7 = fmaf(v7, b, c);
    }
    out[t] += ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7));
}

// One __global__ function per kind and target length, so that the trace and
// the range profiler name them apart ("mem_20us(...)", "fma_2ms(...)").
#define MEM_KERNEL(name)                                                                           \
    __global__ void name(float4 *y, const float4 *x, size_t offset, size_t n, int passes, float a) \
    {                                                                                              \
        axpy_body(y, x, offset, n, passes, a);                                                     \
    }
#define FMA_KERNEL(name)                                                                           \
    __global__ void name(float *out, int iters, float b) { fma_body(out, iters, b); }

MEM_KERNEL(mem_5us)
MEM_KERNEL(mem_20us)
MEM_KERNEL(mem_100us)
MEM_KERNEL(mem_500us)
MEM_KERNEL(mem_2ms)
MEM_KERNEL(mem_5ms)
FMA_KERNEL(fma_5us)
FMA_KERNEL(fma_20us)
FMA_KERNEL(fma_100us)
FMA_KERNEL(fma_500us)
FMA_KERNEL(fma_2ms)
FMA_KERNEL(fma_5ms)

__global__ void init_arrays(float4 *y, float4 *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float base = (float)(i % 1000) * 1e-6f;
        x[i] = make_float4(base, base + 1e-6f, base + 2e-6f, base + 3e-6f);
        y[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

typedef void (*mem_fn)(float4 *, const float4 *, size_t, size_t, int, float);
typedef void (*fma_fn)(float *, int, float);

struct length_spec {
    const char *label;
    double target_us;
    int repeats; // launches of each kind per step
    mem_fn mem;
    fma_fn fma;
};

static const length_spec lengths[] = {
    {"5us", 5, 4, mem_5us, fma_5us},        {"20us", 20, 4, mem_20us, fma_20us},
    {"100us", 100, 2, mem_100us, fma_100us}, {"500us", 500, 1, mem_500us, fma_500us},
    {"2ms", 2000, 1, mem_2ms, fma_2ms},      {"5ms", 5000, 1, mem_5ms, fma_5ms},
};
static const int length_count = (int)(sizeof(lengths) / sizeof(lengths[0]));

// Sizing for an H200: about 4.0 TB/s achieved by a streaming kernel (48
// bytes per float4 element: x and y read, y written), and 128 FP32 lanes per
// SM at about 1.98 GHz: with 1024 threads per SM, one iteration of 8 FMAs
// per thread takes 64 cycles, about 31 iterations per microsecond.
static const double bytes_per_second = 4.0e12;
static const double bytes_per_element = 48.0;
static const double iterations_per_us = 31.0;
static const size_t array_elements = (size_t)1 << 26; // float4s: 1 GiB per array
static const int threads = 256;

struct mem_plan {
    size_t n;   // elements per pass
    int passes; // n * passes elements in all
    int blocks;
};

static mem_plan plan_mem(double target_us, int sms)
{
    const double total = target_us * 1e-6 * bytes_per_second / bytes_per_element;
    mem_plan plan;
    plan.passes = (int)ceil(total / (double)array_elements);
    if (plan.passes < 1)
        plan.passes = 1;
    plan.n = (size_t)(total / plan.passes);
    plan.n = (plan.n + 1023) / 1024 * 1024;
    if (plan.n > array_elements)
        plan.n = array_elements;
    size_t blocks = (plan.n + threads - 1) / threads;
    const size_t most = (size_t)sms * 8;
    plan.blocks = (int)(blocks < most ? blocks : most);
    return plan;
}

static double seconds_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int main(int argc, char **argv)
{
    const auto started = std::chrono::steady_clock::now();
    if (argc < 2 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: pm_accuracy STEPS [--min-seconds S]\n");
        return 2;
    }
    const int min_steps = atoi(argv[1]);
    double min_seconds = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--min-seconds") && i + 1 < argc) {
            min_seconds = atof(argv[++i]);
        } else {
            fprintf(stderr, "pm_accuracy: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }

    int device = 0, sms = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int fma_blocks = sms * 4;
    const size_t fma_threads_total = (size_t)fma_blocks * threads;

    float4 *x = NULL, *y = NULL;
    float *out = NULL;
    CHECK(cudaMalloc(&x, array_elements * sizeof(float4)));
    CHECK(cudaMalloc(&y, array_elements * sizeof(float4)));
    CHECK(cudaMalloc(&out, fma_threads_total * sizeof(float)));
    CHECK(cudaMemset(out, 0, fma_threads_total * sizeof(float)));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    init_arrays<<<sms * 8, threads, 0, stream>>>(y, x, array_elements);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(stream));

    mem_plan plans[sizeof(lengths) / sizeof(lengths[0])];
    int iters[sizeof(lengths) / sizeof(lengths[0])];
    for (int l = 0; l < length_count; l++) {
        plans[l] = plan_mem(lengths[l].target_us, sms);
        iters[l] = (int)(lengths[l].target_us * iterations_per_us + 0.5);
    }

    // Short memory kernels walk through the arrays, so that each reads
    // memory no recent kernel left in L2 (50 MiB on the H200).
    size_t cursor = 0;
    int steps = 0;
    while (steps < min_steps || (min_seconds > 0 && seconds_since(started) < min_seconds)) {
        nvtxRangePushA("step");
        for (int l = 0; l < length_count; l++) {
            const length_spec &spec = lengths[l];
            const mem_plan &plan = plans[l];
            for (int r = 0; r < spec.repeats; r++) {
                size_t offset = 0;
                if (plan.passes == 1 && plan.n < array_elements) {
                    if (cursor + plan.n > array_elements)
                        cursor = 0;
                    offset = cursor;
                    cursor += plan.n;
                }
                spec.mem<<<plan.blocks, threads, 0, stream>>>(y, x, offset, plan.n, plan.passes, 0.5f);
                CHECK(cudaGetLastError());
                spec.fma<<<fma_blocks, threads, 0, stream>>>(out, iters[l], 0.999f);
                CHECK(cudaGetLastError());
            }
        }
        nvtxRangePop();
        CHECK(cudaStreamSynchronize(stream));
        steps++;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    CHECK(cudaStreamSynchronize(stream));
    const double elapsed = seconds_since(started);

    // Checksum: every fma result, and a strided sample of y (elements spread
    // over the whole array, so every memory kernel's work shows).
    std::vector<float> host_out(fma_threads_total);
    CHECK(cudaMemcpy(host_out.data(), out, fma_threads_total * sizeof(float),
                     cudaMemcpyDeviceToHost));
    const size_t sample_count = 1 << 16;
    const size_t sample_stride = array_elements / sample_count;
    std::vector<float4> host_y(sample_count);
    CHECK(cudaMemcpy2D(host_y.data(), sizeof(float4), y, sample_stride * sizeof(float4),
                       sizeof(float4), sample_count, cudaMemcpyDeviceToHost));
    double checksum = 0;
    for (float value : host_out)
        checksum += value;
    for (const float4 &v : host_y)
        checksum += (double)v.x + v.y + v.z + v.w;
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(out));
    CHECK(cudaFree(y));
    CHECK(cudaFree(x));
    if (!std::isfinite(checksum) || checksum <= 0) {
        fprintf(stderr, "pm_accuracy: bad checksum %g\n", checksum);
        return 1;
    }
    printf("{\"steps\": %d, \"seconds\": %.3f, \"sms\": %d, \"checksum\": %.9g, \"kernels\": [", steps,
           elapsed, sms, checksum);
    for (int l = 0; l < length_count; l++)
        printf("%s{\"length\": \"%s\", \"repeats\": %d, \"mem_elements\": %zu, \"mem_passes\": %d, "
               "\"mem_blocks\": %d, \"fma_iterations\": %d, \"fma_blocks\": %d}",
               l ? ", " : "", lengths[l].label, lengths[l].repeats, plans[l].n, plans[l].passes,
               plans[l].blocks, iters[l], fma_blocks);
    printf("]}\n");
    return 0;
}
