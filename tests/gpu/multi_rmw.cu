// multi_rmw.cu: one host thread per GPU, each launching a read-modify-write
// kernel, for concurrent replay on a multi-GPU machine
// (scripts/gpu-check-multi.sh, issue 9).
//
// Every thread sets its device, fills a buffer, launches `multi_rmw`
// (integer x = x * 3 + device + 1, so a missing restore or a lost launch
// changes the result) LAUNCHES times and checks the result on the host
// against the same arithmetic done on the CPU. With --serial the threads run
// one after another instead of at once (the serialised baseline the speed-up
// is measured against). Prints one JSON line: per device, ok and the wall
// time from its first launch to its last sync (the wait at the meeting
// point below included). Never uses NCCL or
// multicast.
//
// At once, the threads meet after their first launch: a device's first
// replay pays CUPTI's first Start on its context (0.25-0.5 s, differing by
// device), and without the meeting point one device's later replays would
// be over before the other's began, so nothing would be measured running at
// once. The wait is bounded (a thread that failed arrives without waiting).
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

__global__ void multi_rmw(unsigned int *x, size_t n, unsigned int add)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = x[i] * 3u + add;
}

struct device_result {
    bool ok = false;
    double seconds = 0;
    char error[160] = "";
};

// Where the threads meet after their first launch (see the top).
struct meeting_point {
    std::mutex lock;
    std::condition_variable all_here;
    int expected = 0;
    int arrived = 0;
    // Counts this thread in; waits (at most 120 s) for the others if asked.
    void arrive(bool wait)
    {
        std::unique_lock<std::mutex> hold(lock);
        if (++arrived >= expected)
            all_here.notify_all();
        if (wait)
            all_here.wait_for(hold, std::chrono::seconds(120), [&] { return arrived >= expected; });
    }
};

static void run_device(int device, size_t n, int launches, device_result *result,
                       meeting_point *meeting)
{
    bool met = meeting == nullptr;
    auto fail = [&](const char *what, cudaError_t error) {
        snprintf(result->error, sizeof result->error, "%s: %s", what, cudaGetErrorString(error));
        if (!met)
            meeting->arrive(false);
    };
    cudaError_t error;
    if ((error = cudaSetDevice(device)) != cudaSuccess)
        return fail("cudaSetDevice", error);
    std::vector<unsigned int> host(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned int)(i * 2654435761u);
    unsigned int *x = nullptr;
    if ((error = cudaMalloc(&x, n * sizeof(unsigned int))) != cudaSuccess)
        return fail("cudaMalloc", error);
    cudaMemcpy(x, host.data(), n * sizeof(unsigned int), cudaMemcpyHostToDevice);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    auto start = std::chrono::steady_clock::now();
    for (int launch = 0; launch < launches; launch++) {
        multi_rmw<<<1024, 256, 0, stream>>>(x, n, (unsigned int)device + 1u);
        if ((error = cudaStreamSynchronize(stream)) != cudaSuccess)
            return fail("launch", error);
        if (!met) {
            met = true;
            meeting->arrive(true);
        }
    }
    if (!met)
        meeting->arrive(false);
    result->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<unsigned int> back(n);
    cudaMemcpy(back.data(), x, n * sizeof(unsigned int), cudaMemcpyDeviceToHost);
    // After L launches x = 3^L x + add (3^(L-1) + ... + 1), all mod 2^32:
    // computed once, so long runs (the PM window run) check quickly.
    unsigned int power = 1u, series = 0u, add = (unsigned int)device + 1u;
    for (int launch = 0; launch < launches; launch++) {
        series = series * 3u + 1u;
        power *= 3u;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = back[i] == host[i] * power + add * series;
    result->ok = ok;
    cudaFree(x);
    cudaStreamDestroy(stream);
}

int main(int argc, char **argv)
{
    size_t mib = 256;
    int launches = 3;
    bool serial = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--footprint-mib") && i + 1 < argc)
            mib = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--launches") && i + 1 < argc)
            launches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--serial"))
            serial = true;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        fprintf(stderr, "multi_rmw: no CUDA device\n");
        return 1;
    }
    size_t n = mib * (1u << 20) / sizeof(unsigned int);
    std::vector<device_result> results(devices);
    auto start = std::chrono::steady_clock::now();
    if (serial) {
        for (int device = 0; device < devices; device++)
            run_device(device, n, launches, &results[device], nullptr);
    } else {
        meeting_point meeting;
        meeting.expected = devices;
        std::vector<std::thread> threads;
        for (int device = 0; device < devices; device++)
            threads.emplace_back(run_device, device, n, launches, &results[device], &meeting);
        for (auto &thread : threads)
            thread.join();
    }
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool all_ok = true;
    printf("{\"devices\": %d, \"serial\": %s, \"total_s\": %.6f, \"per_device\": [", devices,
           serial ? "true" : "false", total);
    for (int device = 0; device < devices; device++) {
        all_ok = all_ok && results[device].ok;
        printf("%s{\"device\": %d, \"ok\": %s, \"seconds\": %.6f, \"error\": \"%s\"}",
               device ? ", " : "", device, results[device].ok ? "true" : "false",
               results[device].seconds, results[device].error);
    }
    printf("], \"ok\": %s}\n", all_ok ? "true" : "false");
    return all_ok ? 0 : 1;
}
