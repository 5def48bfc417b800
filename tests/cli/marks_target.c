/*
 * marks_target.c: a workload for test_disasm_cli, run under `flare trace`:
 * one kernel on the simulated device whose body marks instructions with and
 * without line information (offsets from 0x10000 on have none, sim_pc.h),
 * launched LAUNCHES times inside a deep window with engine "sass" that the
 * program opens and closes itself, so its counts are exact. Test-only; it
 * must never wait without a bound.
 */
#include <stdio.h>

#include "flare/flare.h"
#include "flare/sim.h"

#define LAUNCHES   20u
#define TIMEOUT_MS 30000u

static void marked(const flare_sim_launch *launch)
{
    (void)launch;
    flare_sim_pc_mark(0x100u, FLARE_SIM_STALL_SELECTED); /* on a line */
    for (int i = 0; i < 10; i++)
        flare_sim_pc_mark(0x10040u, FLARE_SIM_STALL_LONG_SCOREBOARD);
    flare_sim_pc_mark(0x10050u, FLARE_SIM_STALL_SELECTED);
    flare_sim_pc_mark(0x10008u, FLARE_SIM_STALL_BARRIER); /* no instruction starts here */
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        if (status_ != FLARE_OK) {                                                                 \
            fprintf(stderr, "marks_target: %s failed: %s\n", #call, flare_strerror(status_));      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    int kernel;
    CHECK(flare_sim_kernel_register("marks_kernel", marked, &kernel));
    flare_sim_stream *stream;
    CHECK(flare_sim_stream_create(0, &stream));
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 60000; /* closed below */
    window.engine = "sass";
    CHECK(flare_window_open(&window));
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    for (unsigned i = 0; i < LAUNCHES; i++)
        CHECK(flare_sim_launch_kernel(stream, kernel, grid, block, NULL, 0));
    CHECK(flare_sim_stream_synchronize(stream, TIMEOUT_MS));
    CHECK(flare_window_close());
    CHECK(flare_sim_stream_destroy(stream));
    return 0;
}
