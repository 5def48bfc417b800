/*
 * cupti_launch_cost.cu: what each CUPTI feature, on its own, costs per kernel
 * launch on the launching thread.
 *
 * Explains flare's launch-storm overhead: sets up one CUPTI feature (CONFIG)
 * before any CUDA call, then times a storm of empty <<<1,1>>> launches and
 * prints `launches_per_second N` on stdout (everything else on stderr).
 * Run by scripts/gpu-check.sh costs (bench/gpu_cupti_costs.py), once per
 * CONFIG per round.
 *
 * This is a bench of bare CUPTI: it must never include, link or call flare
 * code, and must keep its one-line stdout format.
 *
 * usage: cupti_launch_cost CONFIG [LAUNCHES=200000]
 *        cupti_launch_cost alternate [BLOCK=20000] [ROUNDS=15]
 *
 * alternate: one process, flare's set-up (every activity kind, driver
 * launch callbacks), then blocks of BLOCK launches in turn under each
 * launch-counting state (no launch callback, driver callbacks, runtime
 * callbacks, both, and full tracing), the order rotated every round. Paired
 * in time and in one process, it resolves per-launch costs of a few percent
 * that separate processes on a shared host cannot (their runs differ by
 * +-10%). Prints each state's median launches/s and its median ratio to the
 * no-callback state, on stdout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#define WARMUP   10000
#define BUF_SIZE (8u << 20)

#define CUPTI_CALL(call)                                                                           \
    do {                                                                                           \
        CUptiResult r_ = (call);                                                                   \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            const char *s_ = "?";                                                                  \
            cuptiGetResultString(r_, &s_);                                                         \
            fprintf(stderr, "%s failed: %s (%d)\n", #call, s_, (int)r_);                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CUDA_CALL(call)                                                                            \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum {
    F_SUBSCRIBE = 1 << 0,   /* cuptiSubscribe, no-op callback              */
    F_ACTIVITY = 1 << 1,    /* activity buffers + a kernel activity kind   */
    F_TSCB = 1 << 2,        /* timestamp callback                          */
    F_PINNED = 1 << 3,      /* host-pinned activity buffers                */
    F_KIND_KERNEL = 1 << 4, /* CUPTI_ACTIVITY_KIND_KERNEL (serialising)  */
    F_CB_DRIVER = 1 << 5,   /* driver-domain launch callbacks              */
    F_CB_RUNTIME = 1 << 6,  /* runtime-domain launch callbacks             */
    F_COPIES = 1 << 7,      /* MEMCPY and MEMSET activity kinds            */
    F_EXTERNAL = 1 << 8,    /* EXTERNAL_CORRELATION activity kind          */
    /* After the warm-up, before the timed launches: what flare's launch-storm
     * guard does (kernel activity off), or every activity kind off. */
    F_KERNEL_OFF = 1 << 9,
    F_ALL_OFF = 1 << 10,
    /* With F_ALL_OFF: the driver launch callbacks off too and runtime
     * launch callbacks on instead (a storm counted at the runtime API). */
    F_TO_RUNTIME = 1 << 11,
    /* With F_ALL_OFF: the driver launch callbacks off too, nothing instead
     * (what CUPTI costs once loaded, subscribed and switched off). */
    F_TO_NOTHING = 1 << 12
};
/* flare's default set-up: kernel, copy, memset and external-correlation
 * activity, driver launch callbacks. */
#define FLARE_SETUP (F_ACTIVITY | F_COPIES | F_EXTERNAL | F_SUBSCRIBE | F_CB_DRIVER)

static const struct {
    const char *name;
    int flags;
} configs[] = {
    {"none", 0},
    {"subscribe", F_SUBSCRIBE},
    {"activity", F_ACTIVITY},
    {"activity_tscb", F_ACTIVITY | F_TSCB},
    {"activity_pinned", F_ACTIVITY | F_PINNED},
    {"activity_kernel", F_ACTIVITY | F_KIND_KERNEL},
    {"callback", F_SUBSCRIBE | F_CB_DRIVER},
    {"callback_runtime", F_SUBSCRIBE | F_CB_RUNTIME},
    {"both", F_ACTIVITY | F_SUBSCRIBE | F_CB_DRIVER},
    {"copies", F_COPIES},
    {"external", F_EXTERNAL},
    {"kernel_then_off", F_ACTIVITY | F_KERNEL_OFF},
    {"flare_setup", FLARE_SETUP},
    {"flare_storm", FLARE_SETUP | F_KERNEL_OFF},
    {"flare_storm_all_off", FLARE_SETUP | F_ALL_OFF},
    {"flare_storm_runtime", FLARE_SETUP | F_ALL_OFF | F_TO_RUNTIME},
    {"flare_storm_no_callbacks", FLARE_SETUP | F_ALL_OFF | F_TO_NOTHING},
};
static CUpti_SubscriberHandle subscriber;
static const CUpti_CallbackId driver_launch_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};
/* main() calls cudaLaunchKernel itself; in CUDA 13 <<<>>> goes through
 * __cudaLaunchKernel instead, so both (the callback count printed at the
 * end shows which fired). */
static const CUpti_CallbackId runtime_launch_ids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};

static void switch_launch_callbacks(int domain_driver, int on)
{
    const CUpti_CallbackId *ids = domain_driver ? driver_launch_ids : runtime_launch_ids;
    size_t count = domain_driver ? sizeof driver_launch_ids / sizeof driver_launch_ids[0]
                                 : sizeof runtime_launch_ids / sizeof runtime_launch_ids[0];
    for (size_t i = 0; i < count; i++)
        CUPTI_CALL(cuptiEnableCallback(
            on, subscriber,
            domain_driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, ids[i]));
}

static uint64_t n_records;   /* kernel activity records seen */
static uint64_t n_dropped;   /* dropped records, summed      */
static uint64_t n_callbacks; /* API-enter callbacks seen     */

__global__ void empty_kernel(void)
{
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t CUPTIAPI timestamp_cb(void)
{
    return now_ns();
}

static void CUPTIAPI noop_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                             const void *data)
{
    (void)ud, (void)dom, (void)cbid, (void)data;
}

static void CUPTIAPI launch_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                               const void *data)
{
    (void)ud, (void)dom, (void)cbid;
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    if (cb->callbackSite == CUPTI_API_ENTER)
        __atomic_fetch_add(&n_callbacks, 1, __ATOMIC_RELAXED);
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = (uint8_t *)aligned_alloc(8, BUF_SIZE);
    if (!*buf) {
        fprintf(stderr, "out of memory for an activity buffer\n");
        exit(1);
    }
    *size = BUF_SIZE;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    uint64_t n = 0;
    for (;;) {
        CUptiResult r = cuptiActivityGetNextRecord(buf, valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
            break;
        CUPTI_CALL(r);
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            n++;
    }
    __atomic_fetch_add(&n_records, n, __ATOMIC_RELAXED);
    size_t dropped = 0;
    CUPTI_CALL(cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped));
    __atomic_fetch_add(&n_dropped, (uint64_t)dropped, __ATOMIC_RELAXED);
    free(buf);
}

static void setup_cupti(int flags)
{
    uint32_t version = 0;
    CUPTI_CALL(cuptiGetVersion(&version));
    fprintf(stderr, "cupti version %u\n", version);

    if (flags & (F_ACTIVITY | F_COPIES | F_EXTERNAL)) {
        if (flags & F_PINNED) {
            uint8_t on = 1;
            size_t sz = sizeof(on);
            CUPTI_CALL(cuptiActivitySetAttribute(
                CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &sz, &on));
        }
        CUPTI_CALL(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
        if (flags & F_TSCB)
            CUPTI_CALL(cuptiActivityRegisterTimestampCallback(timestamp_cb));
        if (flags & F_ACTIVITY)
            CUPTI_CALL(cuptiActivityEnable((flags & F_KIND_KERNEL)
                                               ? CUPTI_ACTIVITY_KIND_KERNEL
                                               : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        if (flags & F_COPIES) {
            CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
            CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
        }
        if (flags & F_EXTERNAL)
            CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
    }
    if (flags & F_SUBSCRIBE) {
        int cb = flags & (F_CB_DRIVER | F_CB_RUNTIME);
        CUPTI_CALL(cuptiSubscribe(&subscriber, cb ? launch_cb : noop_cb, NULL));
        if (flags & F_CB_DRIVER)
            switch_launch_callbacks(1, 1);
        if (flags & F_CB_RUNTIME)
            switch_launch_callbacks(0, 1);
    }
}

static void launch(long n)
{
    void *args[1] = {NULL};
    for (long i = 0; i < n; i++)
        CUDA_CALL(cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), args, 0, 0));
}

/* The launch-counting states `alternate` steps through. */
enum { STATE_NONE, STATE_DRIVER, STATE_RUNTIME, STATE_BOTH, STATE_TRACED, STATE_COUNT };
static const char *const state_names[STATE_COUNT] = {
    "no_launch_callback", "driver_callbacks", "runtime_callbacks", "driver_and_runtime", "traced"};

static void set_activity(int on)
{
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                        CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        CUPTI_CALL(on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]));
}

static void enter_state(int state)
{
    switch_launch_callbacks(1,
                            state == STATE_DRIVER || state == STATE_BOTH || state == STATE_TRACED);
    switch_launch_callbacks(0, state == STATE_RUNTIME || state == STATE_BOTH);
    set_activity(state == STATE_TRACED);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof values[0], compare_doubles);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

static int alternate(long block, int rounds)
{
    setup_cupti(FLARE_SETUP);
    launch(WARMUP);
    CUDA_CALL(cudaDeviceSynchronize());
    double *rates = (double *)calloc((size_t)rounds * STATE_COUNT, sizeof(double));
    double *ratios = (double *)calloc((size_t)rounds, sizeof(double));
    double *sorted = (double *)calloc((size_t)rounds, sizeof(double));
    if (!rates || !ratios || !sorted)
        return 1;
    uint64_t callbacks_before = __atomic_load_n(&n_callbacks, __ATOMIC_RELAXED);
    uint64_t callbacks_expected = 0;
    for (int round = 0; round < rounds; round++)
        for (int turn = 0; turn < STATE_COUNT; turn++) {
            int state = (turn + round) % STATE_COUNT;
            enter_state(state);
            CUDA_CALL(cudaDeviceSynchronize());
            uint64_t t0 = now_ns();
            launch(block);
            CUDA_CALL(cudaDeviceSynchronize());
            rates[state * rounds + round] = (double)block * 1e9 / (double)(now_ns() - t0);
            if (state != STATE_NONE)
                callbacks_expected += (uint64_t)block * (state == STATE_BOTH ? 2 : 1);
        }
    enter_state(STATE_NONE);
    CUPTI_CALL(cuptiActivityFlushAll(1));
    printf("bare CUPTI in one process, flare's set-up, blocks of %ld launches, %d rounds "
           "(states in rotating order)\n",
           block, rounds);
    for (int state = 0; state < STATE_COUNT; state++) {
        for (int round = 0; round < rounds; round++)
            ratios[round] = rates[state * rounds + round] / rates[STATE_NONE * rounds + round];
        double ratio = median(ratios, rounds); /* sorts ratios, never rates: pairs stay */
        double low = ratios[0], high = ratios[rounds - 1];
        memcpy(sorted, rates + state * rounds, (size_t)rounds * sizeof(double));
        printf("  %-20s median %9.0f launches/s  ratio %.4f (min %.4f max %.4f)\n",
               state_names[state], median(sorted, rounds), ratio, low, high);
    }
    printf("  launch callbacks seen %llu, expected %llu\n",
           (unsigned long long)(__atomic_load_n(&n_callbacks, __ATOMIC_RELAXED) - callbacks_before),
           (unsigned long long)callbacks_expected);
    free(rates);
    free(ratios);
    free(sorted);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "alternate"))
        return alternate(argc >= 3 ? strtol(argv[2], NULL, 10) : 20000,
                         argc >= 4 ? atoi(argv[3]) : 15);

    int flags = -1;
    if (argc >= 2)
        for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
            if (!strcmp(argv[1], configs[i].name))
                flags = configs[i].flags;
    long launches = argc >= 3 ? strtol(argv[2], NULL, 10) : 200000;
    if (flags < 0 || argc > 3 || launches <= 0) {
        fprintf(stderr, "usage: %s CONFIG [LAUNCHES=200000]\nCONFIG:", argv[0]);
        for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
            fprintf(stderr, " %s", configs[i].name);
        fprintf(stderr, "\n");
        return 2;
    }

    if (flags)
        setup_cupti(flags); /* before any CUDA call: before the context */

    launch(WARMUP);
    CUDA_CALL(cudaDeviceSynchronize());
    if (flags & (F_KERNEL_OFF | F_ALL_OFF)) {
        uint64_t off_started = now_ns();
        CUPTI_CALL(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        if (flags & F_ALL_OFF) {
            CUPTI_CALL(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
            CUPTI_CALL(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
            CUPTI_CALL(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
        }
        if (flags & (F_TO_RUNTIME | F_TO_NOTHING))
            switch_launch_callbacks(1, 0);
        if (flags & F_TO_RUNTIME)
            switch_launch_callbacks(0, 1);
        fprintf(stderr, "activity switched off in %.3f ms (records until then kept)\n",
                (double)(now_ns() - off_started) / 1e6);
    }

    uint64_t t0 = now_ns();
    launch(launches);
    CUDA_CALL(cudaDeviceSynchronize());
    uint64_t t1 = now_ns();
    CUDA_CALL(cudaGetLastError());

    double secs = (double)(t1 - t0) / 1e9;
    printf("launches_per_second %.0f\n", (double)launches / secs);
    fflush(stdout);
    fprintf(stderr, "config %s: %ld launches in %.3f s (%.1f ns/launch)\n", argv[1], launches, secs,
            secs * 1e9 / (double)launches);

    long expected = WARMUP + launches;
    if (flags & (F_CB_DRIVER | F_CB_RUNTIME))
        fprintf(stderr, "launch callbacks: %llu (launches incl. warm-up %ld)\n",
                (unsigned long long)__atomic_load_n(&n_callbacks, __ATOMIC_RELAXED), expected);
    if (flags & (F_ACTIVITY | F_COPIES | F_EXTERNAL)) {
        CUPTI_CALL(cuptiActivityFlushAll(1));
        size_t dropped = 0;
        CUPTI_CALL(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
        n_dropped += dropped;
        fprintf(stderr, "kernel records: %llu (expected %ld), dropped: %llu\n",
                (unsigned long long)__atomic_load_n(&n_records, __ATOMIC_RELAXED), expected,
                (unsigned long long)n_dropped);
    }
    return 0;
}
