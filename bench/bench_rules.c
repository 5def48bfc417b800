/*
 * bench_rules.c: the cost of evaluating rules on the collector's beat.
 *
 * Installs 16 rules (launch rate, kernel duration percentiles, NVML gauges,
 * custom counter rates) through FLARE_DEEP_WHEN, feeds them kernels, gauges
 * and counter ticks as a busy program would, and times rules_session_beat at
 * a simulated 1 kHz beat over 20 simulated seconds (the feeding is not
 * timed: it is the collector's job either way). Prints the median CPU time
 * per beat over 5 runs, and what that is as a share of one core at 1 kHz.
 * Target (issue 5): 16 rules at a 1 kHz beat cost at most 1% of one core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim.h"
#include "bench_common.h"
#include "flare/flare.h"
#include "rules/rules_session.h"
#include "store/store.h"
#include "deepwin/deepwin_session.h"

#define RUNS  5
#define BEATS 20000

static const char rules[] = "kernel_launch_rate < 1/s for 2s over 1s;"
                            "kernel_launch_rate > 100000000/s over 500ms;"
                            "kernel_duration_p50 > 1s for 1s;"
                            "kernel_duration_p90 > 1s over 2s;"
                            "kernel_duration_p99 > 2s for 500ms;"
                            "kernel_duration_p99 > 5s over 5s;"
                            "gpu0.utilization < 1% for 3s;"
                            "gpu0.power > 2000W;"
                            "gpu0.sm_clock < 10MHz for 1s;"
                            "gpu0.memory_used > 1000GiB;"
                            "gpu1.utilization < 1% for 3s;"
                            "gpu1.power > 2000W for 1s;"
                            "custom.bench.tokens < 1/s for 2s;"
                            "custom.bench.requests > 1000000000/s;"
                            "custom.bench.tokens > 1000000000/s over 2s;"
                            "custom.bench.requests < 1/s for 5s over 2s";

static uint64_t thread_cpu_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

int main(void)
{
    setenv("FLARE_DEEP_WHEN", rules, 1);
    flare_counter *tokens, *requests;
    flare_counter_get("bench.tokens", &tokens);
    flare_counter_get("bench.requests", &requests);
    double per_beat_ns[RUNS];
    for (int run = 0; run < RUNS; run++) {
        char dir[] = "/tmp/flare-bench-rules-XXXXXX";
        if (mkdtemp(dir) == NULL)
            return 1;
        store *database;
        char error[512];
        if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != 0) {
            fprintf(stderr, "%s\n", error);
            return 1;
        }
        uint64_t start = 1000000000ull;
        deepwin_session_begin(start, sim_engine());
        rules_session_begin(start);
        store_begin(database);
        uint64_t busy = 0;
        for (int beat = 0; beat < BEATS; beat++) {
            uint64_t now = start + (uint64_t)beat * 1000000ull; /* 1 kHz */
            for (int k = 0; k < 20; k++) {                      /* 20,000 kernels/s */
                rules_session_kernel("bench_kernel", now - (uint64_t)k * 1000, 10000 + (uint64_t)k);
                deepwin_session_count_launch();
            }
            if (beat % 100 == 0) /* NVML every 100 ms */
                for (int device = 0; device < 2; device++) {
                    rules_session_metric(device, "gpu_utilization_pct", now, 80);
                    rules_session_metric(device, "power_mw", now, 400000);
                    rules_session_metric(device, "sm_clock_mhz", now, 1980);
                    rules_session_metric(device, "memory_used_bytes", now, 1ll << 34);
                }
            flare_counter_add(tokens, 50);
            flare_counter_add(requests, 1);
            uint64_t before = thread_cpu_ns();
            rules_session_beat(database, 1, now);
            busy += thread_cpu_ns() - before;
        }
        rules_session_end(database, 1, start + BEATS * 1000000ull);
        store_commit(database);
        store_close(database);
        per_beat_ns[run] = (double)busy / BEATS;
        printf("run %d: %.2f us CPU per beat of 16 rules = %.3f%% of one core at 1 kHz\n", run + 1,
               per_beat_ns[run] / 1e3, per_beat_ns[run] * 1000.0 / 1e9 * 100.0);
        char command[128];
        snprintf(command, sizeof(command), "rm -rf '%s'", dir);
        if (system(command) != 0)
            return 1;
    }
    double median = bench_median(per_beat_ns, RUNS);
    printf("16 rules at 1 kHz: median %.2f us per beat = %.3f%% of one core\n", median / 1e3,
           median * 1000.0 / 1e9 * 100.0);
    return 0;
}
