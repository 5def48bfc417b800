// replay_rmw.cu: the kernel-replay check program (scripts/gpu-check-replay.sh).
//
// A read-modify-write kernel `rmw` (x = x * a + b over FOOTPRINT MiB) is
// launched LAUNCHES times on one stream while a second host thread keeps a
// sibling stream busy with its own work (2000 rounds of a kernel adding to
// another buffer and a host-to-device copy): during a replay that thread
// must wait at flare's gate, and none of its writes may be lost or reverted. At the end it prints
// one JSON line with a checksum over every buffer: under `flare replay` (any launch replayed for
// any number of passes) the checksum must equal the unprofiled run's.
// It also times each rmw launch (launch + its stream's sync, host clock),
// and, with --dtod, the device-to-device copy bandwidth of the footprint
// (the ceiling a snapshot or restore is held against).
//
// usage: replay_rmw [--footprint-mib N] [--launches N] [--no-sibling] [--dtod]
// Built with -DREPLAY_RMW_DEVICE_VAR (as replay_rmw_var), rmw also counts
// its launches in a module-scope __device__ variable, which replay must find
// in the module and restore (else the count, and the exit status, is wrong).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "replay_rmw: %s: %s\n", #call, cudaGetErrorString(e_));                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#ifdef REPLAY_RMW_DEVICE_VAR
__device__ unsigned long long rmw_launch_count;
#define COUNT_LAUNCH() rmw_launch_count += 1
#else
#define COUNT_LAUNCH() (void)0
#endif

__global__ void init_values(float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = (float)(i % 1000) * 0.001f;
}

// The kernel under replay: reads and writes every byte of the footprint once.
__global__ void rmw(float4 *x, size_t n4, float a, float b)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        COUNT_LAUNCH();
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

// The sibling stream's work: must be neither lost nor reverted by a replay.
__global__ void sibling_work(unsigned int *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += 1u + (unsigned int)(i & 7);
}

// Order-sensitive sum of 32-bit words (integer adds: deterministic).
__global__ void checksum_words(const unsigned int *words, size_t n, unsigned long long *sum)
{
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        local += (unsigned long long)words[i] * (i % 1021 + 1);
    atomicAdd(sum, local);
}

static unsigned long long checksum(const void *device, size_t bytes, unsigned long long *scratch)
{
    CHECK(cudaMemset(scratch, 0, sizeof(*scratch)));
    checksum_words<<<1024, 256>>>((const unsigned int *)device, bytes / 4, scratch);
    unsigned long long value = 0;
    CHECK(cudaMemcpy(&value, scratch, sizeof(value), cudaMemcpyDeviceToHost));
    return value;
}

int main(int argc, char **argv)
{
    size_t footprint_mib = 64;
    int launches = 3, sibling = 1, dtod = 0;
#ifdef REPLAY_RMW_DEVICE_VAR
    const int device_var = 1;
#else
    const int device_var = 0;
#endif
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--footprint-mib") && i + 1 < argc)
            footprint_mib = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--launches") && i + 1 < argc)
            launches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-sibling"))
            sibling = 0;
        else if (!strcmp(argv[i], "--dtod"))
            dtod = 1;
        else {
            fprintf(stderr, "usage: replay_rmw [--footprint-mib N] [--launches N] [--no-sibling] "
                            "[--dtod]\n");
            return 2;
        }
    }
    const size_t bytes = footprint_mib << 20;
    const size_t sibling_words = 4u << 20; // 16 MiB
    float *x = nullptr;
    unsigned int *y = nullptr, *z = nullptr, *host = nullptr;
    unsigned long long *scratch = nullptr;
    CHECK(cudaMalloc(&x, bytes));
    CHECK(cudaMalloc(&y, sibling_words * 4));
    CHECK(cudaMalloc(&z, 1 << 20));
    CHECK(cudaMalloc(&scratch, sizeof(*scratch)));
    CHECK(cudaMallocHost(&host, 1 << 20));
    for (size_t i = 0; i < (1u << 18); i++)
        host[i] = (unsigned int)(i * 2654435761u);
    CHECK(cudaMemset(y, 0, sibling_words * 4));
    CHECK(cudaMemset(z, 0, 1 << 20));
#ifdef REPLAY_RMW_DEVICE_VAR
    unsigned long long zero = 0;
    CHECK(cudaMemcpyToSymbol(rmw_launch_count, &zero, sizeof(zero)));
#endif
    init_values<<<1024, 256>>>(x, bytes / 4);
    CHECK(cudaDeviceSynchronize());

    cudaStream_t main_stream, side_stream;
    CHECK(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<double> launch_ms;
    const int sibling_rounds = 2000;
    auto run_start = std::chrono::steady_clock::now();
    std::thread sibling_thread;
    if (sibling)
        sibling_thread = std::thread([&] {
            for (int r = 0; r < sibling_rounds; r++) {
                sibling_work<<<sms * 4, 256, 0, side_stream>>>(y, sibling_words);
                CHECK(cudaMemcpyAsync(z, host, 1 << 20, cudaMemcpyHostToDevice, side_stream));
                CHECK(cudaStreamSynchronize(side_stream));
            }
        });
    for (int l = 0; l < launches; l++) {
        auto t0 = std::chrono::steady_clock::now();
        rmw<<<sms * 8, 256, 0, main_stream>>>((float4 *)x, bytes / 16, 1.0001f, 0.5f);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(main_stream));
        auto t1 = std::chrono::steady_clock::now();
        launch_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    if (sibling)
        sibling_thread.join();
    CHECK(cudaDeviceSynchronize());
    double run_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run_start)
            .count();
    unsigned long long count = (unsigned long long)launches;
#ifdef REPLAY_RMW_DEVICE_VAR
    CHECK(cudaMemcpyFromSymbol(&count, rmw_launch_count, sizeof(count)));
#endif
    unsigned long long sum_x = checksum(x, bytes, scratch);
    unsigned long long sum_y = checksum(y, sibling_words * 4, scratch);
    unsigned long long sum_z = checksum(z, 1 << 20, scratch);

    double dtod_event_gbps = 0, dtod_wall_gbps = 0;
    if (dtod) {
        // Device-to-device copy of the footprint, bytes read + written per second.
        float *copy = nullptr;
        CHECK(cudaMalloc(&copy, bytes));
        cudaEvent_t start, stop;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&stop));
        CHECK(cudaMemcpyAsync(copy, x, bytes, cudaMemcpyDeviceToDevice, main_stream)); // warm
        CHECK(cudaStreamSynchronize(main_stream));
        float best_event = 1e30f;
        double best_wall = 1e30;
        for (int r = 0; r < 5; r++) {
            auto w0 = std::chrono::steady_clock::now();
            CHECK(cudaEventRecord(start, main_stream));
            CHECK(cudaMemcpyAsync(copy, x, bytes, cudaMemcpyDeviceToDevice, main_stream));
            CHECK(cudaEventRecord(stop, main_stream));
            CHECK(cudaStreamSynchronize(main_stream));
            auto w1 = std::chrono::steady_clock::now();
            float ms = 0;
            CHECK(cudaEventElapsedTime(&ms, start, stop));
            best_event = ms < best_event ? ms : best_event;
            double wall = std::chrono::duration<double, std::milli>(w1 - w0).count();
            best_wall = wall < best_wall ? wall : best_wall;
        }
        dtod_event_gbps = 2.0 * bytes / (best_event * 1e-3) / 1e9;
        dtod_wall_gbps = 2.0 * bytes / (best_wall * 1e-3) / 1e9;
        CHECK(cudaFree(copy));
    }
    printf("{\"program\":\"replay_rmw\",\"footprint_mib\":%zu,\"launches\":%d,\"sibling\":%d,"
           "\"device_var\":%d,\"launch_count\":%llu,\"checksum\":\"%016llx-%016llx-%016llx\","
           "\"run_ms\":%.3f,\"dtod_event_gbps\":%.1f,\"dtod_wall_gbps\":%.1f,\"launch_ms\":[",
           footprint_mib, launches, sibling, device_var, count, sum_x, sum_y, sum_z, run_ms,
           dtod_event_gbps, dtod_wall_gbps);
    for (size_t i = 0; i < launch_ms.size(); i++)
        printf("%s%.3f", i ? "," : "", launch_ms[i]);
    printf("]}\n");
    if (device_var && count != (unsigned long long)launches) {
        fprintf(stderr, "replay_rmw: rmw counted %llu launches, expected %d\n", count, launches);
        return 1;
    }
    return 0;
}
