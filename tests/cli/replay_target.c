/*
 * replay_target.c: the program `flare replay` replays in the CLI's
 * end-to-end test (test_replay_cli.c), on the simulated device.
 *
 * It launches a read-modify-write kernel ("rmw_add": every element += 1)
 * N times (argument 1, default 4) interleaved with a bystander kernel on a
 * second buffer, then checks both buffers. A replay that did not restore
 * memory between passes, or reverted the bystander's writes, makes it print
 * the difference and exit 1. It must never depend on being profiled: run
 * alone it checks the same results.
 */
#include <stdio.h>
#include <stdlib.h>

#include "flare/flare.h"
#include "flare/sim.h"

#define ELEMENTS 4096

typedef struct buffer_args {
    float *data;
    int count;
} buffer_args;

static void rmw_add(const flare_sim_launch *launch)
{
    const buffer_args *args = launch->args;
    for (int i = 0; i < args->count; i++)
        args->data[i] += 1.0f;
}

static void bystander(const flare_sim_launch *launch)
{
    const buffer_args *args = launch->args;
    for (int i = 0; i < args->count; i++)
        args->data[i] += 2.0f;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != FLARE_OK) {                                                                 \
            fprintf(stderr, "replay_target: %s failed: %s\n", #call, flare_strerror(status_));     \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

static int count_wrong(const float *values, float expected)
{
    int wrong = 0;
    for (int i = 0; i < ELEMENTS; i++)
        wrong += values[i] != expected;
    return wrong;
}

int main(int argc, char **argv)
{
    int launches = argc > 1 ? atoi(argv[1]) : 4;
    if (launches < 1 || launches > 1000) {
        fprintf(stderr, "replay_target: launches must be 1..1000\n");
        return 2;
    }
    CHECK(flare_sim_configure(1));
    int own_session = 0;
    if (!flare_is_active() && flare_init(NULL) == FLARE_OK)
        own_session = 1;

    int rmw_id, bystander_id;
    CHECK(flare_sim_kernel_register("rmw_add", rmw_add, &rmw_id));
    CHECK(flare_sim_kernel_register("bystander", bystander, &bystander_id));
    flare_sim_stream *stream;
    CHECK(flare_sim_stream_create(0, &stream));
    float *data, *other;
    CHECK(flare_sim_malloc(0, sizeof(float) * ELEMENTS, (void **)&data));
    CHECK(flare_sim_malloc(0, sizeof(float) * ELEMENTS, (void **)&other));
    const uint32_t grid[3] = {ELEMENTS / 256, 1, 1}, block[3] = {256, 1, 1};
    buffer_args data_args = {data, ELEMENTS}, other_args = {other, ELEMENTS};
    for (int launch = 0; launch < launches; launch++) {
        CHECK(flare_sim_launch_kernel(stream, rmw_id, grid, block, &data_args, sizeof(data_args)));
        CHECK(flare_sim_launch_kernel(stream, bystander_id, grid, block, &other_args,
                                      sizeof(other_args)));
    }
    static float host_data[ELEMENTS], host_other[ELEMENTS];
    CHECK(flare_sim_memcpy_async(stream, host_data, data, sizeof(host_data)));
    CHECK(flare_sim_memcpy_async(stream, host_other, other, sizeof(host_other)));
    CHECK(flare_sim_stream_synchronize(stream, 30000));

    int wrong_data = count_wrong(host_data, (float)launches);
    int wrong_other = count_wrong(host_other, 2.0f * (float)launches);
    printf("replay_target: %d launches of rmw_add: data[0] = %g (expected %d), other[0] = %g "
           "(expected %d): %s\n",
           launches, host_data[0], launches, host_other[0], 2 * launches,
           wrong_data == 0 && wrong_other == 0 ? "correct" : "WRONG");
    flare_sim_free(data);
    flare_sim_free(other);
    flare_sim_stream_destroy(stream);
    if (own_session)
        flare_shutdown();
    return wrong_data == 0 && wrong_other == 0 ? 0 : 1;
}
