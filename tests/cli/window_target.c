/*
 * window_target.c: a workload for test_window_open that runs until told to
 * stop, so a test can ask its session for windows at a time of its choosing
 * whatever the machine's speed, then end it cleanly.
 *
 * It launches a small kernel on the simulated device and waits for it, over
 * and over, inside the session `flare trace` starts (libflare's constructor),
 * until the file named by its argument exists; then it returns normally, so
 * its session ends as any other. Test-only. It must never run for more than
 * two minutes, whatever happens to the test that started it.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "flare/flare.h"
#include "flare/sim.h"

#define ELEMENTS   4096
#define LIMIT_S    120
#define PAUSE_NS   1000000L
#define TIMEOUT_MS 30000u

typedef struct buffer_args {
    float *data;
    int count;
} buffer_args;

static void add_one(const flare_sim_launch *launch)
{
    const buffer_args *args = launch->args;
    for (int i = 0; i < args->count; i++)
        args->data[i] += 1.0f;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != FLARE_OK) {                                                                 \
            fprintf(stderr, "window_target: %s failed: %s\n", #call, flare_strerror(status_));     \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: window_target STOP_FILE\n");
        return 2;
    }
    /* A window asked for early (a test's --deep-after 50ms, on a slow
     * sanitizer build) may have set the simulated device up first, with its
     * default of one device: that is the one wanted. */
    int configured = flare_sim_configure(1);
    if (!(configured == FLARE_ERR_STATE && flare_sim_device_count() == 1))
        CHECK(configured);
    int kernel;
    CHECK(flare_sim_kernel_register("add_one", add_one, &kernel));
    flare_sim_stream *stream;
    CHECK(flare_sim_stream_create(0, &stream));
    float *data;
    CHECK(flare_sim_malloc(0, sizeof(float) * ELEMENTS, (void **)&data));
    const uint32_t grid[3] = {ELEMENTS / 256, 1, 1}, block[3] = {256, 1, 1};
    buffer_args args = {data, ELEMENTS};
    time_t limit = time(NULL) + LIMIT_S;
    while (access(argv[1], F_OK) != 0 && time(NULL) < limit) {
        CHECK(flare_sim_launch_kernel(stream, kernel, grid, block, &args, sizeof(args)));
        CHECK(flare_sim_stream_synchronize(stream, TIMEOUT_MS));
        struct timespec pause = {0, PAUSE_NS};
        nanosleep(&pause, NULL);
    }
    flare_sim_free(data);
    flare_sim_stream_destroy(stream);
    return 0;
}
