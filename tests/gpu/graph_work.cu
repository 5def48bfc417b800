// graph_work.cu: CUDA graphs of known work, for flare's graph checks
// (scripts/gpu-check-graphs.sh, tests/gpu/check_graphs.py).
//
// usage: graph_work N        capture a graph (memset, graph_add, graph_scale,
//                            device-to-device copy), launch it N times inside
//                            the NVTX range "graphs", then graph_add 7 times on
//                            its own inside "plain"; checks the result
//        graph_work storm R  a graph of 20 tiny kernels launched R times as
//                            fast as the host can; prints graph_launches_per_second
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t status_ = (call);                                                              \
        if (status_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                         \
                    cudaGetErrorString(status_));                                                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__global__ void graph_add(float *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] += 1.0f;
}

__global__ void graph_scale(float *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] *= 2.0f;
}

__global__ void graph_tiny(int *counter)
{
    if (threadIdx.x == 0)
        atomicAdd(counter, 1);
}

static int storm(long launches)
{
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    int *counter;
    CHECK(cudaMalloc(&counter, sizeof(int)));
    CHECK(cudaMemset(counter, 0, sizeof(int)));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < 20; k++)
        graph_tiny<<<1, 32, 0, stream>>>(counter);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < launches; i++)
        CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int total = 0;
    CHECK(cudaMemcpy(&total, counter, sizeof(int), cudaMemcpyDeviceToHost));
    if (total != 20 * (launches + 1)) {
        fprintf(stderr, "graph storm: counter %d, expected %ld\n", total, 20 * (launches + 1));
        return 1;
    }
    printf("graph_launches_per_second %.0f\n", launches / seconds);
    printf("kernels_per_second %.0f\n", 20.0 * launches / seconds);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "storm") == 0)
        return storm(atol(argv[2]));
    int launches = argc > 1 ? atoi(argv[1]) : 50;
    const int n = 1 << 20;
    float *data, *copy;
    CHECK(cudaMalloc(&data, n * sizeof(float)));
    CHECK(cudaMalloc(&copy, n * sizeof(float)));
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));

    // One launch of the graph: data = (0 + 1) * 2 = 2, copied to copy.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemsetAsync(data, 0, n * sizeof(float), stream));
    graph_add<<<n / 256, 256, 0, stream>>>(data, n);
    graph_scale<<<n / 256, 256, 0, stream>>>(data, n);
    CHECK(cudaMemcpyAsync(copy, data, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    nvtxRangePushA("graphs");
    for (int i = 0; i < launches; i++)
        CHECK(cudaGraphLaunch(exec, stream));
    nvtxRangePop();
    CHECK(cudaStreamSynchronize(stream));

    nvtxRangePushA("plain");
    for (int i = 0; i < 7; i++)
        graph_add<<<n / 256, 256, 0, stream>>>(data, n);
    nvtxRangePop();
    CHECK(cudaStreamSynchronize(stream));

    std::vector<float> host(n), host_copy(n);
    CHECK(cudaMemcpy(host.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(host_copy.data(), copy, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        if (host[i] != 9.0f || host_copy[i] != 2.0f) {
            fprintf(stderr, "graph_work: element %d is %g / %g, expected 9 / 2\n", i, host[i],
                    host_copy[i]);
            return 1;
        }
    }
    printf("graph_work ok: %d graph launches, 7 plain launches\n", launches);
    return 0;
}
