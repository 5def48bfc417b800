/*
 * bench_views.c: what the session's indexes cost and buy (issue 21): on a
 * session of 1,000,000 kernels, 100,000 scopes and 100,000 copies written
 * through the store's writer, the time to build the indexes at session end
 * and the file's growth, then the views' queries (median of 5 runs each):
 * top kernels, GPU time per scope, GPU busy time per device, copies by kind.
 * Targets: index build <= 3 s, file growth <= 35%, top kernels <= 0.3 s,
 * GPU time per scope <= 1 s. Writes only under a mkdtemp directory (in /tmp
 * unless FLARE_BENCH_DIR says otherwise) and removes it afterwards.
 *
 * Usage: bench_views [kernels] [scopes]
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_views.h"

#define BENCH_NAMES 50
#define BENCH_BATCH 10000
#define BENCH_RUNS  5

static double bench_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static int compare_double(const void *left, const void *right)
{
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

static long long file_size(const char *dir)
{
    char path[4200];
    struct stat info;
    snprintf(path, sizeof(path), "%s/session.db", dir);
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

/* One kernel every 1.5 us on one of 8 streams of 2 devices (so kernels
 * overlap), a scope around every kernels/scopes kernels, a copy per scope. */
static int write_session(const char *dir, long kernels, long scopes)
{
    char error[512];
    store *handle;
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof(error)) != 0) {
        fprintf(stderr, "%s\n", error);
        return -1;
    }
    store_session_info info = {.command = "bench_views", .start_ns = 1, .start_unix_ns = 1};
    char names[BENCH_NAMES][32];
    for (int i = 0; i < BENCH_NAMES; i++)
        snprintf(names[i], sizeof(names[i]), "kernel_%02d_with_a_longer_name", i);
    store_kernel_row row = {.pid = 4242, .grid = {128, 1, 1}, .block = {256, 1, 1}};
    uint64_t clock_ns = 1000000000000ull;
    uint32_t random = 12345;
    long per_scope = kernels / scopes;
    int failed = store_begin(handle) != 0 || store_session_begin(handle, &info) != 0 ||
                 store_process_begin(handle, 4242, 1, clock_ns, "sim", "bench") != 0 ||
                 store_commit(handle) != 0;
    uint64_t scope_start = clock_ns;
    long scope_index = 0;
    for (long i = 0; i < kernels && !failed; i += BENCH_BATCH) {
        failed = store_begin(handle) != 0;
        for (long j = i; j < i + BENCH_BATCH && j < kernels && !failed; j++) {
            random = random * 1664525u + 1013904223u;
            row.device = (int)(j & 1);
            row.stream_id = (uint64_t)(j & 7);
            row.correlation_id = (uint64_t)j;
            row.name = names[(random >> 8) % BENCH_NAMES];
            row.start_ns = clock_ns;
            row.end_ns = clock_ns + 2000 + (random >> 20);
            clock_ns += 1500;
            failed = store_put_kernel(handle, &row) != 0;
            if (!failed && (j + 1) % per_scope == 0 && scope_index < scopes) {
                store_scope_row scope = {.pid = 4242,
                                         .thread_id = 4242,
                                         .instance_id = (uint64_t)++scope_index,
                                         .name = "step",
                                         .depth = 0,
                                         .start_ns = scope_start,
                                         .end_ns = clock_ns};
                store_copy_row copy = {.pid = 4242,
                                       .device = 0,
                                       .stream_id = 9,
                                       .correlation_id = (uint64_t)(kernels + scope_index),
                                       .copy_kind = 1 + (int)(scope_index % 3),
                                       .bytes = 1u << 20,
                                       .start_ns = scope_start,
                                       .end_ns = scope_start + 40000};
                failed = store_put_scope(handle, &scope) != 0 || store_put_copy(handle, &copy) != 0;
                scope_start = clock_ns;
            }
        }
        if (!failed)
            failed = store_commit(handle) != 0;
    }
    if (failed)
        fprintf(stderr, "write failed: %s\n", store_last_error(handle));
    store_close(handle);
    return failed ? -1 : 0;
}

/* Median seconds of BENCH_RUNS runs of sql, stepping every row. */
static double time_query(const char *dir, const char *sql, long long *rows_out)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return -1;
    double runs[BENCH_RUNS];
    for (int run = 0; run < BENCH_RUNS; run++) {
        sqlite3_stmt *statement;
        double start = bench_now();
        if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) {
            fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
            sqlite3_close(db);
            return -1;
        }
        long long rows = 0;
        while (sqlite3_step(statement) == SQLITE_ROW)
            rows++;
        sqlite3_finalize(statement);
        runs[run] = bench_now() - start;
        *rows_out = rows;
    }
    sqlite3_close(db);
    qsort(runs, BENCH_RUNS, sizeof(double), compare_double);
    return runs[BENCH_RUNS / 2];
}

int main(int argc, char **argv)
{
    long kernels = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    long scopes = argc > 2 ? strtol(argv[2], NULL, 10) : 100000;
    if (kernels <= 0 || scopes <= 0 || scopes > kernels) {
        fprintf(stderr, "usage: %s [kernels > 0] [scopes 1..kernels]\n", argv[0]);
        return 2;
    }
    const char *base = getenv("FLARE_BENCH_DIR");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/flare-bench-views-XXXXXX", base != NULL ? base : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    int status = 1;
    double start = bench_now();
    if (write_session(dir, kernels, scopes) != 0)
        goto done;
    printf("wrote %ld kernels, %ld scopes, %ld copies in %.2f s\n", kernels, scopes, scopes,
           bench_now() - start);
    long long before = file_size(dir);

    long long rows = 0;
    double top_before = time_query(dir, "SELECT * FROM v_top_kernels", &rows);
    printf("before indexing: top kernels %.3f s (%lld rows)\n", top_before, rows);

    char error[512];
    store *handle;
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof(error)) != 0) {
        fprintf(stderr, "%s\n", error);
        goto done;
    }
    store_index_result result;
    double build_started = bench_now();
    if (store_build_indexes(handle, &result) != 0) {
        fprintf(stderr, "index: %s\n", store_last_error(handle));
        store_close(handle);
        goto done;
    }
    double build_s = bench_now() - build_started;
    store_close(handle);
    long long after = file_size(dir);
    printf("index build: %.3f s (target <= 3 s); session.db %.1f MB -> %.1f MB, +%.1f%% "
           "(target <= 35%%)\n",
           build_s, (double)before / 1e6, (double)after / 1e6,
           100.0 * (double)(after - before) / (double)before);

    static const struct {
        const char *what, *sql;
        double target_s;
    } queries[] = {
        {"top kernels", "SELECT * FROM v_top_kernels", 0.3},
        {"GPU time per scope", "SELECT * FROM v_scope_gpu_time", 1.0},
        {"GPU busy time per device", "SELECT * FROM v_gpu_busy", 0},
        {"copies by kind",
         "SELECT kind, COUNT(*), SUM(bytes), AVG(gb_per_s) FROM v_copies "
         "GROUP BY kind",
         0},
        {"kernels with names", "SELECT * FROM v_kernels", 0},
    };
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        double seconds = time_query(dir, queries[i].sql, &rows);
        if (seconds < 0)
            goto done;
        if (queries[i].target_s > 0)
            printf("%-26s %.3f s median of %d (%lld rows; target <= %.1f s)\n", queries[i].what,
                   seconds, BENCH_RUNS, rows, queries[i].target_s);
        else
            printf("%-26s %.3f s median of %d (%lld rows)\n", queries[i].what, seconds, BENCH_RUNS,
                   rows);
    }
    status = 0;
done:;
    char command[4200];
    snprintf(command, sizeof(command), "rm -rf '%s'", dir);
    if (system(command) != 0)
        status = 1;
    return status;
}
