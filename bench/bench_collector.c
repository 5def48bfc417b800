/*
 * bench_collector.c: collector throughput from rings into SQLite.
 *
 * Fills one thread's ring with kernel events (1,000,000 per run, 50 distinct
 * names), then times session_collector_drain_once draining all of them into a
 * fresh session database in one thread: ring read, row conversion, name
 * interning, insert, commit. Five runs; prints each and the median.
 * Target (issue 2): at least 1,000,000 kernel records per second on one core.
 */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"
#include "session/collector.h"
#include "core/runtime.h"
#include "store/store.h"

#define EVENTS (1u << 20)
#define RUNS   5

int main(void)
{
    double rates[RUNS];
    char names[50][32];
    for (int n = 0; n < 50; n++)
        snprintf(names[n], sizeof(names[n]), "kernel_%02d_gemm_tile", n);
    core_threads_set_ring_capacity(EVENTS);
    /* A session word by hand: this benchmark drives the collector itself. */
    atomic_store(&core_session_word, (7ull << 1) | 1u);
    for (int run = 0; run < RUNS; run++) {
        char dir[] = "/tmp/flare-bench-collector-XXXXXX";
        if (mkdtemp(dir) == NULL)
            return 1;
        store *database;
        char error[512];
        if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != 0) {
            fprintf(stderr, "%s\n", error);
            return 1;
        }
        for (uint32_t i = 0; i < EVENTS; i++) {
            core_thread *thread;
            core_event *event = core_emit_reserve(&thread);
            if (event == NULL) {
                fprintf(stderr, "ring full at %u\n", i);
                return 1;
            }
            event->kind = CORE_EVENT_KERNEL;
            event->start_ns = 1000000ull + i * 2000ull;
            event->end_ns = event->start_ns + 1500 + (i % 97);
            event->id = i;
            event->stream_id = 1 + (i % 4);
            event->device = 0;
            event->depth = 0;
            event->detail.kernel.grid[0] = 128;
            event->detail.kernel.grid[1] = event->detail.kernel.grid[2] = 1;
            event->detail.kernel.block[0] = 256;
            event->detail.kernel.block[1] = event->detail.kernel.block[2] = 1;
            event->detail.kernel.shared_memory_bytes = 0;
            event->detail.kernel.registers_per_thread = 32;
            core_copy_name(event->name, names[i % 50]);
            core_emit_commit(thread);
        }
        session_collector_stats stats = {0};
        uint64_t start = bench_now_ns();
        int status;
        do {
            status = session_collector_drain_once(database, NULL, 1, 7, &stats);
        } while (status == SESSION_COLLECTOR_MORE_PENDING);
        uint64_t end = bench_now_ns();
        store_close(database);
        if (status != 0 || stats.events_written != EVENTS) {
            fprintf(stderr, "drain failed: status %d, %llu written\n", status,
                    (unsigned long long)stats.events_written);
            return 1;
        }
        rates[run] = EVENTS / ((double)(end - start) / 1e9);
        printf("run %d: %.3f M kernel records/s (%u records, %.3f s)\n", run + 1, rates[run] / 1e6,
               EVENTS, (double)(end - start) / 1e9);
        char command[128];
        snprintf(command, sizeof(command), "rm -rf '%s'", dir);
        if (system(command) != 0)
            return 1;
    }
    printf("collector into SQLite: median %.3f M kernel records/s over %d runs\n",
           bench_median(rates, RUNS) / 1e6, RUNS);
    return 0;
}
