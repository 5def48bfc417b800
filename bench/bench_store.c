/*
 * bench_store.c: how many kernel rows a second the store's writer sustains.
 *
 * Mimics the collector: one thread, a fresh database, transactions of
 * 10,000 rows, about 50 distinct kernel names. The target is at least
 * 1,000,000 rows/s on one core. It writes only under a mkdtemp directory
 * (in /tmp unless FLARE_BENCH_DIR says otherwise) and removes it afterwards.
 *
 * Usage: bench_store [rows] [runs]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define BENCH_NAMES    50
#define BENCH_BATCH    10000
#define BENCH_MAX_RUNS 64

static double bench_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* CPU seconds of this process, user plus system: steadier than wall time
 * on a shared machine, and what "one core" in the target means. */
static double bench_cpu(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
}

static int bench_compare(const void *left, const void *right)
{
    double a = *(const double *)left;
    double b = *(const double *)right;
    return (a > b) - (a < b);
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

/* One run: returns rows/s of the put+commit loop, or a negative value. */
static double bench_run(long rows, const char *base, int run)
{
    static char names[BENCH_NAMES][64];
    for (int i = 0; i < BENCH_NAMES; i++)
        snprintf(names[i], sizeof names[i], "void gemm_kernel<float, %d, %d>(Params)_%02d",
                 64 << (i % 3), 8 << (i % 4), i);

    char dir[4096];
    snprintf(dir, sizeof dir, "%s/flare-bench-store-XXXXXX", base);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    char error[1024];
    store *handle = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof error) != 0) {
        fprintf(stderr, "store_open: %s\n", error);
        bench_remove_dir(dir);
        return -1;
    }

    store_kernel_row row = {
        .pid = 4242,
        .grid = {128, 1, 1},
        .block = {256, 1, 1},
        .shared_memory_bytes = 4096,
        .registers_per_thread = 32,
    };
    uint64_t clock_ns = 1000000000000ull;
    uint32_t random = 12345;
    int failed = 0;

    double start = bench_now();
    double cpu_start = bench_cpu();
    for (long i = 0; i < rows && !failed; i += BENCH_BATCH) {
        if (store_begin(handle) != 0) {
            failed = 1;
            break;
        }
        long end = i + BENCH_BATCH < rows ? i + BENCH_BATCH : rows;
        for (long j = i; j < end; j++) {
            random = random * 1664525u + 1013904223u;
            row.device = (int)(j & 1);
            row.stream_id = (uint64_t)(j & 7);
            row.correlation_id = (uint64_t)j;
            row.name = names[(random >> 8) % BENCH_NAMES];
            row.start_ns = clock_ns;
            row.end_ns = clock_ns + 2000 + (random >> 20);
            row.grid[0] = 1 + (random >> 24);
            clock_ns += 1500;
            if (store_put_kernel(handle, &row) != 0) {
                failed = 1;
                break;
            }
        }
        if (!failed && store_commit(handle) != 0)
            failed = 1;
    }
    double elapsed = bench_now() - start;
    double cpu = bench_cpu() - cpu_start;
    if (failed)
        fprintf(stderr, "write failed: %s\n", store_last_error(handle));

    long long db_bytes = bench_file_size(dir, "session.db");
    long long wal_bytes = bench_file_size(dir, "session.db-wal");
    double close_start = bench_now();
    store_close(handle);
    double close_elapsed = bench_now() - close_start;

    /* A run that wrote fewer rows than it claims is worthless. */
    if (!failed && store_open(dir, STORE_OPEN_READ, &handle, error, sizeof error) == 0) {
        store_session_summary summary;
        if (store_read_session(handle, &summary) != 0 || summary.kernel_count != rows) {
            fprintf(stderr, "verification failed: %lld rows\n", (long long)summary.kernel_count);
            failed = 1;
        }
        store_close(handle);
    } else if (!failed) {
        fprintf(stderr, "reopen failed: %s\n", error);
        failed = 1;
    }
    bench_remove_dir(dir);
    if (failed)
        return -1;

    double rate = (double)rows / elapsed;
    printf("run %d: %.3f M rows/s (%.3f s put+commit, %.3f s of it on CPU = %.3f M rows/s per "
           "CPU second; close %.3f s; db %.1f MB, wal %.1f MB before close)\n",
           run, rate / 1e6, elapsed, cpu, (double)rows / cpu / 1e6, close_elapsed,
           (double)db_bytes / 1e6, (double)wal_bytes / 1e6);
    fflush(stdout);
    return rate;
}

int main(int argc, char **argv)
{
    long rows = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    const char *base = getenv("FLARE_BENCH_DIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    if (rows <= 0 || runs <= 0 || runs > BENCH_MAX_RUNS) {
        fprintf(stderr, "usage: %s [rows > 0] [runs 1..%d]\n", argv[0], BENCH_MAX_RUNS);
        return 2;
    }

    double rates[BENCH_MAX_RUNS];
    for (int run = 0; run < runs; run++) {
        rates[run] = bench_run(rows, base, run + 1);
        if (rates[run] < 0)
            return 1;
    }
    qsort(rates, (size_t)runs, sizeof rates[0], bench_compare);
    double median = runs % 2 ? rates[runs / 2] : (rates[runs / 2 - 1] + rates[runs / 2]) / 2.0;
    printf("store_put_kernel: median %.2f M rows/s over %d runs (%ld rows each)\n", median / 1e6,
           runs, rows);
    return 0;
}
