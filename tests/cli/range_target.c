/*
 * range_target.c: the program `flare replay --range` replays in the CLI's
 * end-to-end test (test_replay_cli.c), on the simulated device.
 *
 * It runs STEPS training-like steps (argument 1, default 3), each inside a
 * flare scope named "step": upload this step's input from a host buffer
 * (which the program then overwrites), two order-sensitive kernels on one
 * buffer (data = data * 2 + input, then data += 1), and a memset of a
 * second buffer. Argument 2 "alloc" makes step 2 allocate a scratch buffer
 * inside its scope, which a span cannot replay. At the end it copies the
 * results back and checks them against the same arithmetic done on the
 * host: a span replayed without restoring memory, out of order, or with the
 * host buffer as it is now rather than as it was uploaded, makes it print
 * WRONG and exit 1. It must never depend on being profiled: run alone (no
 * session, the scopes record nothing) it checks the same results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "flare/sim.h"

#define ELEMENTS 4096

typedef struct step_args {
    float *data;
    const float *input;
    int count;
} step_args;

/* data = data * 2 + input: run twice over the same memory it gives a
 * different answer, so a pass without a restore shows. */
static void scale_add(const flare_sim_launch *launch)
{
    const step_args *args = launch->args;
    for (int i = 0; i < args->count; i++)
        args->data[i] = args->data[i] * 2.0f + args->input[i];
}

static void rmw_add(const flare_sim_launch *launch)
{
    const step_args *args = launch->args;
    for (int i = 0; i < args->count; i++)
        args->data[i] += 1.0f;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != FLARE_OK) {                                                                 \
            fprintf(stderr, "range_target: %s failed: %s\n", #call, flare_strerror(status_));      \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

/* Step s's input for element i: varies by element so a copy of the wrong
 * bytes cannot pass. */
static float input_value(int step, int i)
{
    return (float)step + (float)(i % 7);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    int allocate_in_step_2 = argc > 2 && strcmp(argv[2], "alloc") == 0;
    if (steps < 1 || steps > 10) {
        fprintf(stderr, "range_target: steps must be 1..10\n");
        return 2;
    }
    CHECK(flare_sim_configure(1));
    int own_session = 0;
    if (!flare_is_active() && flare_init(NULL) == FLARE_OK)
        own_session = 1;

    int scale_id, rmw_id;
    CHECK(flare_sim_kernel_register("scale_add", scale_add, &scale_id));
    CHECK(flare_sim_kernel_register("rmw_add", rmw_add, &rmw_id));
    flare_sim_stream *stream;
    CHECK(flare_sim_stream_create(0, &stream));
    float *data, *input;
    unsigned char *other;
    CHECK(flare_sim_malloc(0, sizeof(float) * ELEMENTS, (void **)&data));
    CHECK(flare_sim_malloc(0, sizeof(float) * ELEMENTS, (void **)&input));
    CHECK(flare_sim_malloc(0, ELEMENTS, (void **)&other));
    CHECK(flare_sim_memset_async(stream, data, 0, sizeof(float) * ELEMENTS));
    CHECK(flare_sim_memset_async(stream, other, 0, ELEMENTS));

    static float host_input[ELEMENTS];
    const uint32_t scale_grid[3] = {ELEMENTS / 256, 1, 1}, scale_block[3] = {256, 1, 1};
    const uint32_t rmw_grid[3] = {4, 2, 1}, rmw_block[3] = {128, 1, 1};
    step_args args = {data, input, ELEMENTS};
    void *scratch = NULL;
    for (int step = 1; step <= steps; step++) {
        for (int i = 0; i < ELEMENTS; i++)
            host_input[i] = input_value(step, i);
        flare_scope_begin("step");
        CHECK(flare_sim_memcpy_async(stream, input, host_input, sizeof(host_input)));
        CHECK(flare_sim_launch_kernel(stream, scale_id, scale_grid, scale_block, &args,
                                      sizeof(args)));
        if (allocate_in_step_2 && step == 2)
            CHECK(flare_sim_malloc(0, 64, &scratch));
        CHECK(flare_sim_launch_kernel(stream, rmw_id, rmw_grid, rmw_block, &args, sizeof(args)));
        CHECK(flare_sim_memset_async(stream, other, step, ELEMENTS));
        CHECK(flare_sim_stream_synchronize(stream, 30000));
        /* The program reuses its host buffer before the step ends: a
         * replay must upload what the first run uploaded. */
        memset(host_input, 0xff, sizeof(host_input));
        flare_scope_end();
    }
    if (scratch != NULL)
        flare_sim_free(scratch);

    static float host_data[ELEMENTS];
    static unsigned char host_other[ELEMENTS];
    CHECK(flare_sim_memcpy_async(stream, host_data, data, sizeof(host_data)));
    CHECK(flare_sim_memcpy_async(stream, host_other, other, sizeof(host_other)));
    CHECK(flare_sim_stream_synchronize(stream, 30000));

    int wrong = 0;
    float first_expected = 0.0f;
    for (int i = 0; i < ELEMENTS; i++) {
        float expected = 0.0f;
        for (int step = 1; step <= steps; step++)
            expected = expected * 2.0f + input_value(step, i) + 1.0f;
        if (i == 0)
            first_expected = expected;
        wrong += host_data[i] != expected || host_other[i] != (unsigned char)steps;
    }
    printf("range_target: %d steps: data[0] = %g (expected %g), other[0] = %d (expected %d): %s\n",
           steps, host_data[0], first_expected, host_other[0], steps,
           wrong == 0 ? "correct" : "WRONG");
    flare_sim_free(data);
    flare_sim_free(input);
    flare_sim_free(other);
    flare_sim_stream_destroy(stream);
    if (own_session)
        flare_shutdown();
    return wrong == 0 ? 0 : 1;
}
