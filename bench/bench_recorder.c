/*
 * bench_recorder.c: what the flight recorder (flare trace --keep /
 * --max-size) costs the collector, and whether --max-size holds.
 *
 * Drives the store as the collector does, on a made-up clock, without the
 * rings: a steady 50,000 kernels a second (each with its API call, as the
 * simulated device and CUDA record them) in 100 ms batches for 20
 * simulated seconds, the recorder's batch hook before each commit. Runs
 * the same stream with the recorder off, with --keep 5s and with
 * --max-size 64M (the modes take turns), and prints medians over the runs
 * of: the collector's CPU per kernel (user plus system: "cpu ns/k"), the
 * part of it inside the recorder's hook ("hook ns/k", this thread's CPU
 * clock), the longest and the mean hook call that did work (the collector
 * writes nothing meanwhile: "stall"); and of the last run: kernels evicted,
 * the largest session.db and -wal, resident memory a fifth of the way in
 * and at the end, and for --max-size the files' sizes each simulated
 * second. Writes only under a mkdtemp directory (in
 * /tmp unless FLARE_BENCH_DIR says otherwise) and removes it afterwards.
 *
 * Usage: bench_recorder [seconds] [runs]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recorder/recorder.h"
#include "store/store.h"

#define BENCH_RATE     50000 /* kernels per simulated second */
#define BENCH_BATCHES  10    /* per simulated second (the default flush, 100 ms) */
#define BENCH_NAMES    50
#define BENCH_MAX_RUNS 16
#define BENCH_NS       1000000000ull
#define BENCH_START_NS (1000 * BENCH_NS)
#define BENCH_PID      777
#define BENCH_MAX_SECS 600

static double bench_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static double bench_cpu(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
}

/* CPU seconds of this thread: what the recorder's hook costs the collector. */
static double bench_thread_cpu(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* This process's resident memory now, in KiB (0 when unknown). */
static long bench_rss_kib(void)
{
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (status != NULL && fgets(line, sizeof line, status) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (status != NULL)
        fclose(status);
    return kib;
}

static int bench_compare(const void *left, const void *right)
{
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

static double bench_median(double *values, int count)
{
    qsort(values, (size_t)count, sizeof(double), bench_compare);
    return values[count / 2];
}

static void bench_remove_dir(const char *path)
{
    DIR *dir = opendir(path);
    if (dir != NULL) {
        struct dirent *entry;
        while ((entry = readdir(dir)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
                continue;
            char file[8192];
            snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
            unlink(file);
        }
        closedir(dir);
    }
    rmdir(path);
}

static long long bench_file_size(const char *dir, const char *name)
{
    char path[8192];
    struct stat info;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &info) == 0 ? (long long)info.st_size : 0;
}

typedef struct bench_result {
    double cpu_ns_per_kernel;
    double hook_ns_per_kernel; /* CPU inside the recorder's hook */
    double pass_max_ms;
    double pass_mean_ms;
    unsigned long long evicted;
    long long largest_db;
    long long largest_wal;
    long long final_db;
    long rss_early_kib; /* resident memory after the first fifth of the run */
    long rss_end_kib;
    long long sizes[BENCH_MAX_SECS][2]; /* per simulated second: db, wal */
} bench_result;

static char bench_names[BENCH_NAMES][64];

/* One 100 ms batch: its kernels and API calls, then the recorder, then
 * the commit. Returns the seconds the recorder's hook took, or < 0. */
static double bench_batch(store *db, uint64_t from_ns, uint64_t *correlation, double *hook_cpu)
{
    const int rows = BENCH_RATE / BENCH_BATCHES;
    const uint64_t step = BENCH_NS / BENCH_BATCHES / (uint64_t)rows;
    if (store_begin(db) != 0)
        return -1;
    for (int i = 0; i < rows; i++) {
        uint64_t start = from_ns + (uint64_t)i * step;
        store_kernel_row kernel = {.pid = BENCH_PID,
                                   .stream_id = 7,
                                   .correlation_id = ++*correlation,
                                   .name = bench_names[*correlation % BENCH_NAMES],
                                   .start_ns = start + 3000,
                                   .end_ns = start + 3000 + 1000 + *correlation % 3000,
                                   .grid = {128, 1, 1},
                                   .block = {256, 1, 1},
                                   .registers_per_thread = 32};
        store_api_call_row call = {.pid = BENCH_PID,
                                   .thread_id = 4242,
                                   .correlation_id = *correlation,
                                   .name = "cuLaunchKernel",
                                   .start_ns = start,
                                   .end_ns = start + 1500};
        if (store_put_kernel(db, &kernel) != 0 || store_put_api_call(db, &call) != 0)
            return -1;
    }
    uint64_t now = from_ns + BENCH_NS / BENCH_BATCHES;
    double before = bench_now(), cpu_before = bench_thread_cpu();
    recorder_batch(db, BENCH_PID, now, false);
    double took = bench_now() - before;
    *hook_cpu += bench_thread_cpu() - cpu_before;
    int committed = store_commit(db) == 0;
    recorder_committed(committed);
    return committed ? took : -1;
}

/* One run over a fresh database; 0 or -1. */
static int bench_run(const char *base, const recorder_settings *settings, int seconds,
                     bench_result *result)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/flare-bench-recorder-XXXXXX", base);
    if (mkdtemp(dir) == NULL)
        return -1;
    store *db = NULL;
    char error[1024];
    int status = store_open(dir, STORE_OPEN_WRITE, &db, error, sizeof error);
    store_session_info info = {
        .command = "bench", .start_ns = BENCH_START_NS, .host = "bench", .flare_version = "bench"};
    if (status == 0)
        status = store_session_begin(db, &info);
    if (status != 0) {
        fprintf(stderr, "bench_recorder: %s\n", status != 0 && db == NULL ? error : "cannot begin");
        store_close(db);
        bench_remove_dir(dir);
        return -1;
    }
    memset(result, 0, sizeof(*result));
    recorder_begin_with(settings, BENCH_START_NS);
    uint64_t correlation = 0;
    double cpu = bench_cpu(), pass_total = 0, hook_cpu = 0;
    int passes = 0;
    for (int second = 0; second < seconds && status == 0; second++) {
        for (int b = 0; b < BENCH_BATCHES && status == 0; b++) {
            uint64_t from = BENCH_START_NS + (uint64_t)second * BENCH_NS +
                            (uint64_t)b * (BENCH_NS / BENCH_BATCHES);
            double took = bench_batch(db, from, &correlation, &hook_cpu);
            if (took < 0) {
                status = -1;
            } else if (took > 1e-4) {
                pass_total += took;
                passes++;
                result->pass_max_ms =
                    took * 1e3 > result->pass_max_ms ? took * 1e3 : result->pass_max_ms;
            }
        }
        if (second == seconds / 5)
            result->rss_early_kib = bench_rss_kib();
        long long size = bench_file_size(dir, "session.db"),
                  wal = bench_file_size(dir, "session.db-wal");
        result->sizes[second][0] = size;
        result->sizes[second][1] = wal;
        result->largest_db = size > result->largest_db ? size : result->largest_db;
        result->largest_wal = wal > result->largest_wal ? wal : result->largest_wal;
    }
    result->cpu_ns_per_kernel = (bench_cpu() - cpu) * 1e9 / (double)correlation;
    result->hook_ns_per_kernel = hook_cpu * 1e9 / (double)correlation;
    result->rss_end_kib = bench_rss_kib();
    result->pass_mean_ms = passes > 0 ? pass_total * 1e3 / passes : 0;
    recorder_stats stats;
    recorder_stats_get(&stats);
    result->evicted = (unsigned long long)stats.evicted_kernels;
    recorder_end();
    store_close(db);
    result->final_db = bench_file_size(dir, "session.db");
    bench_remove_dir(dir);
    return status;
}

typedef struct bench_mode {
    const char *name;
    recorder_settings settings;
} bench_mode;

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 20;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    if (seconds < 1 || seconds > BENCH_MAX_SECS || runs < 1 || runs > BENCH_MAX_RUNS) {
        fprintf(stderr, "usage: bench_recorder [seconds 1..%d] [runs 1..%d]\n", BENCH_MAX_SECS,
                BENCH_MAX_RUNS);
        return 2;
    }
    for (int i = 0; i < BENCH_NAMES; i++)
        snprintf(bench_names[i], sizeof bench_names[i], "void gemm_kernel<float, %d>(Params)", i);
    const char *base = getenv("FLARE_BENCH_DIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    const bench_mode modes[] = {
        {"off", {0, 0}},
        {"--keep 5s", {5 * BENCH_NS, 0}},
        {"--max-size 64M", {0, 64ull << 20}},
    };
    enum { MODES = sizeof modes / sizeof modes[0] };
    static bench_result results[MODES][BENCH_MAX_RUNS];
    printf("bench_recorder: %d kernels/s + their API calls, %d batches/s, %d simulated s, %d "
           "run(s) of each mode, interleaved\n",
           BENCH_RATE, BENCH_BATCHES, seconds, runs);
    /* Modes take turns, so a busy moment of the machine hits them alike. */
    for (int run = 0; run < runs; run++)
        for (size_t m = 0; m < MODES; m++)
            if (bench_run(base, &modes[m].settings, seconds, &results[m][run]) != 0)
                return 1;
    printf("%-16s %10s %10s %12s %12s %10s %12s %12s %14s\n", "mode", "cpu ns/k", "hook ns/k",
           "stall max ms", "stall mean", "evicted", "largest db", "largest wal", "rss KiB 1/5,end");
    for (size_t m = 0; m < MODES; m++) {
        double cpu[BENCH_MAX_RUNS], hook[BENCH_MAX_RUNS], pass_max[BENCH_MAX_RUNS],
            pass_mean[BENCH_MAX_RUNS];
        for (int run = 0; run < runs; run++) {
            cpu[run] = results[m][run].cpu_ns_per_kernel;
            hook[run] = results[m][run].hook_ns_per_kernel;
            pass_max[run] = results[m][run].pass_max_ms;
            pass_mean[run] = results[m][run].pass_mean_ms;
        }
        const bench_result *last = &results[m][runs - 1];
        printf("%-16s %10.0f %10.0f %12.1f %12.1f %10llu %12lld %12lld %7ld,%ld\n", modes[m].name,
               bench_median(cpu, runs), bench_median(hook, runs), bench_median(pass_max, runs),
               bench_median(pass_mean, runs), last->evicted, last->largest_db, last->largest_wal,
               last->rss_early_kib, last->rss_end_kib);
    }
    for (size_t m = 0; m < MODES; m++) {
        if (modes[m].settings.max_bytes == 0)
            continue;
        const bench_result *last = &results[m][runs - 1];
        printf("%s, last run, per simulated second: session.db / session.db-wal bytes\n",
               modes[m].name);
        for (int second = 0; second < seconds; second++)
            printf("  %3d s %12lld %12lld\n", second + 1, last->sizes[second][0],
                   last->sizes[second][1]);
    }
    return 0;
}
