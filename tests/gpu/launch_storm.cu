// launch_storm.cu: N tiny kernel launches, timed from the first launch to
// the final synchronize; prints "launches_per_second <value>". The
// throughput benchmark for tracing overhead (scripts/gpu-check.sh).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void tiny_kernel(int *counter)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        atomicAdd(counter, 1);
}

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 200000;
    int *counter;
    cudaMalloc(&counter, sizeof(int));
    cudaMemset(counter, 0, sizeof(int));
    for (int i = 0; i < 1000; i++) // warm-up
        tiny_kernel<<<1, 32>>>(counter);
    cudaDeviceSynchronize();
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < launches; i++)
        tiny_kernel<<<1, 32>>>(counter);
    cudaDeviceSynchronize();
    auto end = std::chrono::steady_clock::now();
    int value = 0;
    cudaMemcpy(&value, counter, sizeof(int), cudaMemcpyDeviceToHost);
    double seconds = std::chrono::duration<double>(end - start).count();
    if (value != launches + 1000) {
        fprintf(stderr, "wrong count %d\n", value);
        return 1;
    }
    printf("launches_per_second %.1f\n", launches / seconds);
    return 0;
}
