// known_work.cu: a CUDA program with exactly known work, for checking what
// flare trace records on a real GPU (scripts/gpu-check.sh checks the
// database row by row): 100 x scale_kernel, 50 x add_one_kernel, 3 host-to-
// device copies of 1 MiB, 2 device-to-host copies of 4096 bytes, 1 memset of
// 65536 bytes, NVTX push/pop "outer" > "inner" and a start/end range "phase".
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void scale_kernel(float *data, int count, float factor)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count)
        data[i] *= factor;
}

__global__ void add_one_kernel(float *data, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count)
        data[i] += 1.0f;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e = (call);                                                                    \
        if (e != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e));                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main()
{
    const int count = 1 << 18; // 1 MiB of floats
    float *device = nullptr;
    static float host[1 << 18];
    for (int i = 0; i < count; i++)
        host[i] = 1.0f;
    CHECK(cudaMalloc(&device, count * sizeof(float)));
    nvtxRangeId_t phase = nvtxRangeStartA("phase");
    nvtxRangePushA("outer");
    for (int i = 0; i < 3; i++)
        CHECK(cudaMemcpy(device, host, count * sizeof(float), cudaMemcpyHostToDevice));
    nvtxRangePushA("inner");
    for (int i = 0; i < 100; i++)
        scale_kernel<<<count / 256, 256>>>(device, count, 1.0f);
    for (int i = 0; i < 50; i++)
        add_one_kernel<<<count / 256, 256>>>(device, count);
    nvtxRangePop();
    CHECK(cudaMemset(device, 0, 65536));
    CHECK(cudaMemcpy(host, device, 4096, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(host, device + 16384, 4096, cudaMemcpyDeviceToHost));
    nvtxRangePop();
    nvtxRangeEnd(phase);
    CHECK(cudaDeviceSynchronize());
    // Elements past the memset were 1, scaled by 1 x100, plus 50.
    if (host[0] != 51.0f) {
        fprintf(stderr, "wrong result %f\n", host[0]);
        return 1;
    }
    CHECK(cudaFree(device));
    printf("known_work: ok\n");
    return 0;
}
