/*
 * bench_push.c: the cost of recording one event on the producer side.
 *
 * Measures, with a live session and its collector running: (1) one kernel
 * event pushed through core_emit_reserve/commit, the path backend
 * completions take; (2) a flare_scope_begin + flare_scope_end pair (one
 * event). Times batches of 1000 and reports the median and p90 per event.
 * Target (issue 2): event push at most 20 ns median on the 2-core dev machine.
 */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "core/runtime.h"
#include "flare/flare.h"

#define BATCH   1000
#define BATCHES 4000

static void push_kernel(uint64_t i)
{
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_KERNEL;
    event->start_ns = i;
    event->end_ns = i + 1000;
    event->id = i;
    event->stream_id = 1;
    event->device = 0;
    event->depth = 0;
    memset(&event->detail, 0, sizeof(event->detail));
    core_copy_name(event->name, "bench_kernel");
    core_emit_commit(thread);
}

int main(void)
{
    char dir[] = "/tmp/flare-bench-push-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.ring_capacity = 1u << 16;
    if (flare_init(&options) != FLARE_OK) {
        fprintf(stderr, "cannot start a session in %s\n", dir);
        return 1;
    }
    static double push_ns[BATCHES], scope_ns[BATCHES];
    /* Warm-up claims the thread's slot and faults in the ring. */
    for (int i = 0; i < 100000; i++)
        push_kernel((uint64_t)i);
    flare_flush(5000);
    for (int b = 0; b < BATCHES; b++) {
        uint64_t start = bench_now_ns();
        for (int i = 0; i < BATCH; i++)
            push_kernel((uint64_t)i);
        uint64_t middle = bench_now_ns();
        for (int i = 0; i < BATCH; i++) {
            flare_scope_begin("bench_scope");
            flare_scope_end();
        }
        uint64_t end = bench_now_ns();
        push_ns[b] = (double)(middle - start) / BATCH;
        scope_ns[b] = (double)(end - middle) / BATCH;
        /* Stay under the ring's capacity so every push is a real write: 2000
         * events per batch, and the collector polls every 5 ms. */
        if ((b & 7) == 7)
            flare_flush(5000);
    }
    flare_shutdown();
    double push_median = bench_median(push_ns, BATCHES);
    double push_p90 = bench_percentile(push_ns, BATCHES, 0.9);
    double scope_median = bench_median(scope_ns, BATCHES);
    double scope_p90 = bench_percentile(scope_ns, BATCHES, 0.9);
    printf("event push (kernel record):  median %.1f ns, p90 %.1f ns  (%d batches of %d)\n",
           push_median, push_p90, BATCHES, BATCH);
    printf("scope begin+end (one event): median %.1f ns, p90 %.1f ns  (%d batches of %d)\n",
           scope_median, scope_p90, BATCHES, BATCH);
    char command[128];
    snprintf(command, sizeof(command), "rm -rf '%s'", dir);
    if (system(command) != 0)
        return 1;
    return 0;
}
