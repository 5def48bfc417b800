/*
 * flare_demo.c: the bundled demo workload.
 *
 * A small "training loop" on the simulated device: each step uploads a batch,
 * runs a few kernels (saxpy, a stencil, a reduction) on two streams per
 * device, and downloads a result, inside nested scopes. It checks its own
 * results, so a profiler that disturbed the work would show. Under
 * `flare trace` the session is already running; run alone it starts its own.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "flare/sim.h"

#define ELEMENTS      65536
#define DEFAULT_STEPS 40

typedef struct vector_args {
    float *x;
    float *y;
    float *out;
    float alpha;
    int count;
} vector_args;

static size_t thread_count(const flare_sim_launch *launch)
{
    return (size_t)launch->grid[0] * launch->grid[1] * launch->grid[2] * launch->block[0] *
           launch->block[1] * launch->block[2];
}

static void saxpy(const flare_sim_launch *launch)
{
    const vector_args *a = launch->args;
    size_t n = thread_count(launch);
    for (size_t i = 0; i < n && i < (size_t)a->count; i++)
        a->y[i] = a->alpha * a->x[i] + a->y[i];
}

static void stencil(const flare_sim_launch *launch)
{
    const vector_args *a = launch->args;
    for (int i = 1; i < a->count - 1; i++)
        a->out[i] = 0.25f * a->x[i - 1] + 0.5f * a->x[i] + 0.25f * a->x[i + 1];
    a->out[0] = a->x[0];
    a->out[a->count - 1] = a->x[a->count - 1];
}

static void reduce_sum(const flare_sim_launch *launch)
{
    const vector_args *a = launch->args;
    double sum = 0;
    for (int i = 0; i < a->count; i++)
        sum += a->x[i];
    a->out[0] = (float)sum;
}

/* The driver library, if present, tells us whether a GPU exists. Loaded at
 * run time so the demo runs on machines without one. */
static int count_cuda_devices(void)
{
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL)
        return 0;
    int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(library, "cuInit");
    int (*cu_device_count)(int *) = (int (*)(int *))dlsym(library, "cuDeviceGetCount");
    int count = 0;
    if (cu_init == NULL || cu_device_count == NULL || cu_init(0) != 0 ||
        cu_device_count(&count) != 0)
        count = 0;
    dlclose(library);
    return count;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != FLARE_OK) {                                                                 \
            fprintf(stderr, "flare-demo: %s failed: %s\n", #call, flare_strerror(status_));        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int steps = DEFAULT_STEPS;
    if (argc > 1) {
        char *end;
        long value = strtol(argv[1], &end, 10);
        if (*end != '\0' || value < 1 || value > 100000) {
            fprintf(stderr, "usage: flare-demo [STEPS]   (STEPS 1..100000, default %d)\n",
                    DEFAULT_STEPS);
            return 2;
        }
        steps = (int)value;
    }
    int gpus = count_cuda_devices();
    if (gpus > 0)
        printf("flare-demo: %d NVIDIA GPU(s) found, but this build's demo drives the simulated "
               "device; running on the simulated device\n",
               gpus);
    else
        printf("flare-demo: no GPU found: running on the simulated device\n");

    int devices = 2;
    if (flare_sim_configure(devices) != FLARE_OK)
        devices = flare_sim_device_count();
    int own_session = 0;
    if (!flare_is_active()) {
        int status = flare_init(NULL);
        if (status != FLARE_OK)
            fprintf(stderr, "flare-demo: profiling is off (%s); the workload runs anyway\n",
                    flare_strerror(status));
        else
            own_session = 1;
    }

    int saxpy_id, stencil_id, reduce_id;
    CHECK(flare_sim_kernel_register("saxpy", saxpy, &saxpy_id));
    CHECK(flare_sim_kernel_register("stencil_3pt", stencil, &stencil_id));
    CHECK(flare_sim_kernel_register("reduce_sum", reduce_sum, &reduce_id));

    flare_sim_stream *compute[8], *transfer[8];
    float *x[8], *y[8], *smooth[8], *sum[8];
    float *host_batch = malloc(sizeof(float) * ELEMENTS);
    float *host_result = malloc(sizeof(float) * 8);
    if (host_batch == NULL || host_result == NULL)
        return 1;
    for (int d = 0; d < devices && d < 8; d++) {
        CHECK(flare_sim_stream_create(d, &compute[d]));
        CHECK(flare_sim_stream_create(d, &transfer[d]));
        CHECK(flare_sim_malloc(d, sizeof(float) * ELEMENTS, (void **)&x[d]));
        CHECK(flare_sim_malloc(d, sizeof(float) * ELEMENTS, (void **)&y[d]));
        CHECK(flare_sim_malloc(d, sizeof(float) * ELEMENTS, (void **)&smooth[d]));
        CHECK(flare_sim_malloc(d, sizeof(float) * 8, (void **)&sum[d]));
    }
    if (devices > 8)
        devices = 8;

    /* Application counters: what the program knows and the GPU does not. */
    flare_counter *steps_done = NULL, *bytes_uploaded = NULL;
    flare_counter_get("demo.steps", &steps_done);
    flare_counter_get("demo.bytes_uploaded", &bytes_uploaded);

    const uint32_t grid[3] = {ELEMENTS / 256, 1, 1};
    const uint32_t block[3] = {256, 1, 1};
    double expected_total = 0;
    double measured_total = 0;
    flare_scope_begin("training");
    for (int step = 0; step < steps; step++) {
        flare_scope_begin("step");
        for (int i = 0; i < ELEMENTS; i++)
            host_batch[i] = (float)((i + step) % 17) * 0.125f;
        flare_scope_begin("upload");
        for (int d = 0; d < devices; d++) {
            CHECK(flare_sim_memcpy_async(transfer[d], x[d], host_batch, sizeof(float) * ELEMENTS));
            flare_counter_add(bytes_uploaded, (int64_t)(sizeof(float) * ELEMENTS));
            CHECK(flare_sim_memset_async(transfer[d], y[d], 0, sizeof(float) * ELEMENTS));
            CHECK(flare_sim_stream_synchronize(transfer[d], 10000));
        }
        flare_scope_end();
        flare_scope_begin("forward");
        for (int d = 0; d < devices; d++) {
            vector_args args = {
                .x = x[d], .y = y[d], .out = smooth[d], .alpha = 2.0f, .count = ELEMENTS};
            CHECK(flare_sim_launch_kernel(compute[d], saxpy_id, grid, block, &args, sizeof(args)));
            args.x = y[d];
            CHECK(
                flare_sim_launch_kernel(compute[d], stencil_id, grid, block, &args, sizeof(args)));
            args.x = smooth[d];
            args.out = sum[d];
            CHECK(flare_sim_launch_kernel(compute[d], reduce_id, (const uint32_t[3]){1, 1, 1},
                                          block, &args, sizeof(args)));
        }
        flare_scope_end();
        flare_scope_begin("download");
        for (int d = 0; d < devices; d++) {
            CHECK(flare_sim_stream_synchronize(compute[d], 10000));
            CHECK(flare_sim_memcpy_async(compute[d], &host_result[d], sum[d], sizeof(float)));
            CHECK(flare_sim_stream_synchronize(compute[d], 10000));
            measured_total += host_result[d];
        }
        flare_scope_end();
        /* The stencil preserves the sum up to the two end points; compute the
         * exact expectation on the host. */
        double step_sum = 0;
        for (int i = 0; i < ELEMENTS; i++) {
            double yi = 2.0 * host_batch[i];
            double left = i > 0 ? 2.0 * host_batch[i - 1] : yi;
            double right = i < ELEMENTS - 1 ? 2.0 * host_batch[i + 1] : yi;
            step_sum += (i == 0 || i == ELEMENTS - 1) ? yi : 0.25 * left + 0.5 * yi + 0.25 * right;
        }
        expected_total += step_sum * devices;
        flare_counter_add(steps_done, 1);
        flare_scope_end();
    }
    flare_scope_end();

    for (int d = 0; d < devices; d++) {
        flare_sim_stream_destroy(compute[d]);
        flare_sim_stream_destroy(transfer[d]);
        flare_sim_free(x[d]);
        flare_sim_free(y[d]);
        flare_sim_free(smooth[d]);
        flare_sim_free(sum[d]);
    }
    free(host_batch);
    free(host_result);

    double error =
        fabs(measured_total - expected_total) / (expected_total > 0 ? expected_total : 1);
    int ok = error < 1e-4;
    printf("flare-demo: %d steps on %d simulated device(s): result %.1f, expected %.1f: %s\n",
           steps, devices, measured_total, expected_total, ok ? "correct" : "WRONG");
    if (own_session) {
        char dir[4096];
        if (flare_session_dir(dir, sizeof(dir)) == FLARE_OK)
            printf("flare-demo: profile saved in %s (see: flare report %s)\n", dir, dir);
        flare_shutdown();
    }
    return ok ? 0 : 1;
}
