/*
 * fleet_rank.c: one rank of a simulated data-parallel training job, for the
 * fleet analysis (python/flare/fleet.py) and its test (test_fleet.py) and
 * benchmark (bench/bench_fleet.py). Run one per rank under `flare trace`,
 * on the simulated device:
 *
 *     RANK=3 SLOW_RANK=3 SLOW_STEPS=2,5 SLOW_MS=60 flare trace -o 'runs/r%r' -- fleet_rank
 *
 * Each of STEPS steps is a flare scope "train_step" holding KERNELS compute
 * kernels of KERNEL_US each ("forward_gemm", "backward_gemm", "optimizer_step"
 * in turn) and one simulated collective, "ncclAllReduceRingLLKernel_sum_f32",
 * of NCCL_US, all on one stream, and the host waits for them before the
 * step ends. Steps are numbered from 1, as the analysis numbers them.
 *
 * The straggler: on rank SLOW_RANK, in each step listed in SLOW_STEPS, the
 * host stalls SLOW_MS between the compute kernels and the collective (a slow
 * data loader, a preempted core). The other ranks wait for it in their
 * collective, which in those steps lasts WAIT_PCT percent of SLOW_MS longer
 * (default 50): a rank that waits for a straggler sees it as a longer NCCL
 * kernel, and the straggler's own step stays the longest. WAIT_PCT=100 models
 * a fully synchronous job, where every rank's step lasts as long as the
 * straggler's and only the time outside NCCL tells it apart.
 *
 * CRASH_STEP=N makes the rank kill itself (SIGKILL) in the middle of step N:
 * a rank that crashed mid-run, whose process never ended its session.
 *
 * Environment, all optional: RANK (default 0), STEPS (8), KERNELS (3),
 * KERNEL_US (10000; 0: kernels that return at once), NCCL_US (5000),
 * SLOW_RANK (-1: none), SLOW_STEPS (""), SLOW_MS (50), WAIT_PCT (50),
 * CRASH_STEP (0: none). Exit status 0, or 2 for a bad value or a failed
 * flare call (the message on stderr). It must never depend on being
 * profiled: without a session its scopes record nothing and it runs the same.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flare/flare.h"
#include "flare/sim.h"

#define MAX_STEP_LIST 64

typedef struct kernel_args {
    long long duration_us;
} kernel_args;

/* Sleeps for its duration: the simulated device times the call, and a
 * sleeping kernel costs no CPU, so many ranks share a few cores without
 * disturbing each other's times. */
static void timed_kernel(const flare_sim_launch *launch)
{
    const kernel_args *args = launch->args;
    if (args->duration_us <= 0)
        return;
    struct timespec rest = {args->duration_us / 1000000, (args->duration_us % 1000000) * 1000};
    while (nanosleep(&rest, &rest) != 0 && errno == EINTR)
        ;
}

static void sleep_ms(long long ms)
{
    struct timespec rest = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&rest, &rest) != 0 && errno == EINTR)
        ;
}

/* The integer in variable name, or fallback when unset or empty; 0 and a
 * message when it is not an integer in [low, high]. */
static int env_integer(const char *name, long long fallback, long long low, long long high,
                       long long *out)
{
    const char *text = getenv(name);
    if (text == NULL || text[0] == '\0') {
        *out = fallback;
        return 1;
    }
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < low || value > high) {
        fprintf(stderr, "fleet_rank: %s=%s: want an integer from %lld to %lld\n", name, text, low,
                high);
        return 0;
    }
    *out = value;
    return 1;
}

/* SLOW_STEPS, a comma-separated list of step numbers (1..), into steps;
 * 0 and a message when it is malformed or longer than MAX_STEP_LIST. */
static int parse_step_list(const char *text, long long *steps, int *count)
{
    *count = 0;
    if (text == NULL || text[0] == '\0')
        return 1;
    const char *at = text;
    for (;;) {
        char *end = NULL;
        errno = 0;
        long long value = strtoll(at, &end, 10);
        if (errno != 0 || end == at || value < 1 || *count == MAX_STEP_LIST ||
            (*end != ',' && *end != '\0')) {
            fprintf(stderr,
                    "fleet_rank: SLOW_STEPS=%s: want step numbers (1..) separated by "
                    "commas, at most %d\n",
                    text, MAX_STEP_LIST);
            return 0;
        }
        steps[(*count)++] = value;
        if (*end == '\0')
            return 1;
        at = end + 1;
    }
}

static int listed(const long long *steps, int count, long long step)
{
    for (int i = 0; i < count; i++)
        if (steps[i] == step)
            return 1;
    return 0;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != FLARE_OK) {                                                                 \
            fprintf(stderr, "fleet_rank: %s failed: %s\n", #call, flare_strerror(status_));        \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    long long rank, steps, kernels, kernel_us, nccl_us, slow_rank, slow_ms, wait_pct, crash_step;
    long long slow_steps[MAX_STEP_LIST];
    int slow_count;
    if (!env_integer("RANK", 0, 0, 1 << 24, &rank) ||
        !env_integer("STEPS", 8, 1, 10000000, &steps) ||
        !env_integer("KERNELS", 3, 0, 100000, &kernels) ||
        !env_integer("KERNEL_US", 10000, 0, 10000000, &kernel_us) ||
        !env_integer("NCCL_US", 5000, 0, 10000000, &nccl_us) ||
        !env_integer("SLOW_RANK", -1, -1, 1 << 24, &slow_rank) ||
        !env_integer("SLOW_MS", 50, 0, 600000, &slow_ms) ||
        !env_integer("WAIT_PCT", 50, 0, 100, &wait_pct) ||
        !env_integer("CRASH_STEP", 0, 0, 10000000, &crash_step) ||
        !parse_step_list(getenv("SLOW_STEPS"), slow_steps, &slow_count))
        return 2;

    CHECK(flare_sim_configure(1));
    int own_session = 0;
    if (!flare_is_active() && flare_init(NULL) == FLARE_OK)
        own_session = 1;
    static const char *const compute_names[] = {"forward_gemm", "backward_gemm", "optimizer_step"};
    int compute_ids[3], nccl_id;
    for (int i = 0; i < 3; i++)
        CHECK(flare_sim_kernel_register(compute_names[i], timed_kernel, &compute_ids[i]));
    CHECK(flare_sim_kernel_register("ncclAllReduceRingLLKernel_sum_f32", timed_kernel, &nccl_id));
    flare_sim_stream *stream;
    CHECK(flare_sim_stream_create(0, &stream));
    /* Warm up before the first step, as a training job does: the stream's
     * first work starts its worker, which would otherwise stretch step 1. */
    void *scratch;
    CHECK(flare_sim_malloc(0, 4096, &scratch));
    CHECK(flare_sim_memset_async(stream, scratch, 0, 4096));
    CHECK(flare_sim_stream_synchronize(stream, 600000));

    const uint32_t grid[3] = {108, 1, 1}, block[3] = {256, 1, 1};
    const kernel_args compute = {kernel_us};
    for (long long step = 1; step <= steps; step++) {
        int slow_step = listed(slow_steps, slow_count, step);
        flare_scope_begin("train_step");
        for (long long k = 0; k < kernels; k++)
            CHECK(flare_sim_launch_kernel(stream, compute_ids[k % 3], grid, block, &compute,
                                          sizeof(compute)));
        if (slow_step && rank == slow_rank) {
            /* The stall comes after the compute has finished, so the step
             * grows by all of it. */
            CHECK(flare_sim_stream_synchronize(stream, 600000));
            sleep_ms(slow_ms);
        }
        if (step == crash_step) {
            CHECK(flare_sim_stream_synchronize(stream, 600000));
            raise(SIGKILL);
        }
        kernel_args collective = {nccl_us};
        if (slow_step && slow_rank >= 0 && rank != slow_rank)
            collective.duration_us += slow_ms * 1000 * wait_pct / 100;
        CHECK(
            flare_sim_launch_kernel(stream, nccl_id, grid, block, &collective, sizeof(collective)));
        CHECK(flare_sim_stream_synchronize(stream, 600000));
        flare_scope_end();
    }
    CHECK(flare_sim_free(scratch));
    CHECK(flare_sim_stream_destroy(stream));
    if (own_session)
        flare_shutdown();
    return 0;
}
