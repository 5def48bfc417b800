// span_steps.cu: a multi-kernel program whose steps are NVTX ranges, for
// range replay on a real GPU (scripts/gpu-check-span.sh).
//
// Each step uploads a small host buffer (then overwrites it, as programs
// reuse their staging memory), runs three order-sensitive integer kernels
// over a configurable footprint and a memset, all on one stream; the final
// checksum is printed after the last step, outside every range. Integer
// arithmetic keeps the checksum exact, so "identical with and without range
// replay" means identical. Only the step chosen with --mark names its range
// "step" (others are "warm"), so ncu's NVTX filter and flare's --range pick
// the same step.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void scale_add(unsigned int *y, const unsigned int *x, size_t n, unsigned int a)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = y[i] * a + x[i % 1024];
}

__global__ void rotate_mix(unsigned int *y, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = (y[i] << 3 | y[i] >> 29) ^ 0x9e3779b9u;
}

__global__ void fold(unsigned int *out, const unsigned int *y, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    unsigned int sum = 0;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x)
        sum += y[i];
    atomicAdd(out, sum); // integer addition: order does not matter
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t error_ = (call);                                                               \
        if (error_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                           \
                    cudaGetErrorString(error_));                                                   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    size_t mib = 256;
    int steps = 5, mark = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--footprint-mib"))
            mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mark"))
            mark = atoi(argv[i + 1]);
    }
    size_t n = mib * (1u << 20) / sizeof(unsigned int);
    unsigned int *y = NULL, *x = NULL, *out = NULL;
    CHECK(cudaMalloc(&y, n * sizeof(unsigned int)));
    CHECK(cudaMalloc(&x, 1024 * sizeof(unsigned int)));
    CHECK(cudaMalloc(&out, sizeof(unsigned int)));
    CHECK(cudaMemset(y, 1, n * sizeof(unsigned int)));
    CHECK(cudaMemset(out, 0, sizeof(unsigned int)));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<unsigned int> host(1024);
    CHECK(cudaDeviceSynchronize());
    for (int step = 1; step <= steps; step++) {
        for (int i = 0; i < 1024; i++)
            host[i] = (unsigned int)(step * 7919 + i);
        nvtxRangePushA(step == mark ? "step" : "warm");
        CHECK(cudaMemcpyAsync(x, host.data(), 1024 * sizeof(unsigned int),
                              cudaMemcpyHostToDevice, stream));
        // The host buffer is reused right away: a replay must upload what
        // the first run uploaded. (Pageable memory: the copy above is
        // staged before it returns, so this cannot race the first run.)
        for (int i = 0; i < 1024; i++)
            host[i] = 0xdeadbeefu;
        scale_add<<<1024, 256, 0, stream>>>(y, x, n, 3u + (unsigned int)step);
        rotate_mix<<<1024, 256, 0, stream>>>(y, n);
        CHECK(cudaMemsetAsync(x, 0, 16, stream));
        fold<<<512, 256, 0, stream>>>(out, y, n);
        nvtxRangePop();
    }
    CHECK(cudaStreamSynchronize(stream));
    unsigned int checksum = 0;
    CHECK(cudaMemcpy(&checksum, out, sizeof checksum, cudaMemcpyDeviceToHost));
    std::vector<unsigned int> sample(4096);
    CHECK(cudaMemcpy(sample.data(), y, sample.size() * sizeof(unsigned int),
                     cudaMemcpyDeviceToHost));
    unsigned long long mix = checksum;
    for (unsigned int value : sample)
        mix = mix * 1099511628211ull ^ value;
    printf("{\"steps\": %d, \"mark\": %d, \"footprint_mib\": %zu, \"checksum\": %llu}\n", steps,
           mark, mib, mix);
    return 0;
}
