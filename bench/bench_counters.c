/*
 * bench_counters.c: the cost of flare_counter_add, alone and under
 * contention, against one shared atomic counter measured in the same run.
 *
 *   bench_counters [THREADS] [--library PATH/libflare.so]
 *
 * Prints medians over BENCH_RUNS runs of: single-thread add (direct call;
 * through the runtime ABI table, as the Python module and plugins call it;
 * with --library also through libflare.so's exported function, which adds
 * the PLT), flare_counter_tick (a name look-up per call), then THREADS threads
 * (default 16) adding to one counter vs THREADS threads doing
 * atomic_fetch_add on one shared word: aggregate adds per second and the
 * ratio. The targets: single-thread add <= 3 ns median; with 16
 * threads on the H200 host, ratio >= 8.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "flare/flare.h"

#define BENCH_RUNS        7
#define SINGLE_ADDS       20000000
#define ADDS_PER_THREAD   4000000
#define BENCH_MAX_THREADS 256

typedef int (*add_function)(flare_counter *counter, int64_t n);

static double single_thread_ns(add_function add, flare_counter *counter)
{
    double samples[BENCH_RUNS];
    for (int run = 0; run < BENCH_RUNS; run++) {
        uint64_t start = bench_now_ns();
        for (int i = 0; i < SINGLE_ADDS; i++)
            add(counter, 1);
        samples[run] = (double)(bench_now_ns() - start) / SINGLE_ADDS;
    }
    return bench_median(samples, BENCH_RUNS);
}

/* flare_counter_tick: a name look-up and an add per call. */
static double tick_ns(const char *name)
{
    enum { TICKS = SINGLE_ADDS / 10 };
    double samples[BENCH_RUNS];
    for (int run = 0; run < BENCH_RUNS; run++) {
        uint64_t start = bench_now_ns();
        for (int i = 0; i < TICKS; i++)
            flare_counter_tick(name, 1);
        samples[run] = (double)(bench_now_ns() - start) / TICKS;
    }
    return bench_median(samples, BENCH_RUNS);
}

static _Alignas(64) _Atomic uint64_t shared_word;

typedef struct worker {
    pthread_barrier_t *start;
    flare_counter *counter; /* NULL: the shared atomic */
} worker;

static void *work(void *argument)
{
    worker *self = argument;
    pthread_barrier_wait(self->start);
    if (self->counter != NULL) {
        for (int i = 0; i < ADDS_PER_THREAD; i++)
            flare_counter_add(self->counter, 1);
    } else {
        for (int i = 0; i < ADDS_PER_THREAD; i++)
            atomic_fetch_add_explicit(&shared_word, 1, memory_order_relaxed);
    }
    pthread_barrier_wait(self->start);
    return NULL;
}

/* Aggregate adds per second of threads adding to counter (or the atomic). */
static double threaded_rate(int threads, flare_counter *counter)
{
    pthread_t ids[BENCH_MAX_THREADS];
    worker workers[BENCH_MAX_THREADS];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        workers[i] = (worker){.start = &barrier, .counter = counter};
        if (pthread_create(&ids[i], NULL, work, &workers[i]) != 0) {
            fprintf(stderr, "bench_counters: cannot start thread %d\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&barrier);
    uint64_t start = bench_now_ns();
    pthread_barrier_wait(&barrier);
    uint64_t elapsed = bench_now_ns() - start;
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    pthread_barrier_destroy(&barrier);
    return (double)threads * ADDS_PER_THREAD / ((double)elapsed / 1e9);
}

int main(int argc, char **argv)
{
    int threads = 16;
    const char *library = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--library") == 0 && i + 1 < argc)
            library = argv[++i];
        else
            threads = atoi(argv[i]);
    }
    if (threads < 1 || threads > BENCH_MAX_THREADS) {
        fprintf(stderr, "usage: bench_counters [THREADS 1..%d] [--library libflare.so]\n",
                BENCH_MAX_THREADS);
        return 2;
    }

    flare_counter *counter = NULL;
    if (flare_counter_get("bench.single", &counter) != FLARE_OK)
        return 1;
    const flare_runtime_abi *table = flare_runtime_get(FLARE_RUNTIME_ABI_VERSION);
    printf("bench_counters: medians of %d runs\n", BENCH_RUNS);
    printf("  single thread, flare_counter_add (direct)    %6.2f ns/add\n",
           single_thread_ns(flare_counter_add, counter));
    printf("  single thread, through the runtime ABI table %6.2f ns/add\n",
           single_thread_ns(table->counter_add, counter));
    printf("  single thread, flare_counter_tick (look-up)  %6.2f ns/tick\n",
           tick_ns("bench.single.tick.a.name.of.typical.length"));
    if (library != NULL) {
        void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        add_function shared_add = handle ? (add_function)dlsym(handle, "flare_counter_add") : NULL;
        int (*shared_get)(const char *, flare_counter **) =
            handle ? (int (*)(const char *, flare_counter **))dlsym(handle, "flare_counter_get")
                   : NULL;
        flare_counter *shared_counter = NULL;
        if (shared_add == NULL || shared_get == NULL ||
            shared_get("bench.shared", &shared_counter) != FLARE_OK) {
            fprintf(stderr, "bench_counters: cannot use %s: %s\n", library, dlerror());
            return 1;
        }
        printf("  single thread, libflare.so's export (PLT)    %6.2f ns/add\n",
               single_thread_ns(shared_add, shared_counter));
    }

    flare_counter *contended = NULL;
    if (flare_counter_get("bench.contended", &contended) != FLARE_OK)
        return 1;
    double counter_rates[BENCH_RUNS], atomic_rates[BENCH_RUNS], ratios[BENCH_RUNS];
    for (int run = 0; run < BENCH_RUNS; run++) {
        /* Interleaved, so drift on a shared machine hits both alike. */
        counter_rates[run] = threaded_rate(threads, contended);
        atomic_rates[run] = threaded_rate(threads, NULL);
        ratios[run] = counter_rates[run] / atomic_rates[run];
    }
    uint64_t total = 0;
    flare_counter_value(contended, &total);
    if (total != (uint64_t)BENCH_RUNS * (uint64_t)threads * ADDS_PER_THREAD) {
        fprintf(stderr, "bench_counters: the counter reads %llu, expected %llu\n",
                (unsigned long long)total,
                (unsigned long long)BENCH_RUNS * (unsigned long long)threads * ADDS_PER_THREAD);
        return 1;
    }
    printf("  %d threads, one counter: flare_counter_add   %8.1f M adds/s\n", threads,
           bench_median(counter_rates, BENCH_RUNS) / 1e6);
    printf("  %d threads, one shared atomic_fetch_add      %8.1f M adds/s\n", threads,
           bench_median(atomic_rates, BENCH_RUNS) / 1e6);
    printf("  ratio (counter / atomic), median of runs     %8.2fx\n",
           bench_median(ratios, BENCH_RUNS));
    return 0;
}
