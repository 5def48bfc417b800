// other_subscriber.cu: a program that subscribes to CUPTI itself before it
// initialises CUDA, as an Nsight tool or a framework profiler would. Under
// flare trace, flare's own subscription then fails: tracing must degrade
// with that reason (capability "launch_callbacks" degraded) while the program
// runs to completion and its kernels are still recorded through the activity
// API. Exits 0 when its own work is correct.
#include <cstdio>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

static void CUPTIAPI ignore(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *)
{
}

__global__ void fill_kernel(int *data, int value)
{
    data[threadIdx.x] = value;
}

int main()
{
    typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    void *cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (cupti == nullptr) {
        fprintf(stderr, "no libcupti: %s\n", dlerror());
        return 2;
    }
    subscribe_fn subscribe = (subscribe_fn)dlsym(cupti, "cuptiSubscribe");
    CUpti_SubscriberHandle handle;
    CUptiResult result = subscribe(&handle, ignore, nullptr);
    printf("other_subscriber: own cuptiSubscribe -> %d\n", (int)result);
    int *data;
    cudaMalloc(&data, 32 * sizeof(int));
    for (int i = 0; i < 10; i++)
        fill_kernel<<<1, 32>>>(data, i);
    int host[32];
    cudaMemcpy(host, data, sizeof(host), cudaMemcpyDeviceToHost);
    if (host[31] != 9) {
        fprintf(stderr, "wrong result %d\n", host[31]);
        return 1;
    }
    printf("other_subscriber: ok\n");
    return 0;
}
