/*
 * bench_diff.c: what `flare diff` costs on big sessions (issue 21, target
 * <= 5 s for two 1,000,000-kernel sessions). Writes BASE and NEW through
 * the store's writer (50 kernel names by default, one of them 30% slower
 * in NEW, one name only in each, a scope around every 10 kernels), then runs the built
 * `flare diff BASE NEW` (and `--format json`) as a user would, output to
 * /dev/null, and prints the median wall time of 5 runs, the median CPU
 * time (user + system: what a busy machine does not inflate) and the
 * child's peak memory. Writes only under a mkdtemp directory (in /tmp unless
 * FLARE_BENCH_DIR says otherwise) and removes it afterwards, unless
 * FLARE_BENCH_KEEP=1 (then it says where the sessions are).
 *
 * Usage: bench_diff [kernels] [names] [path of the flare binary]
 *        (default 1000000, 50, and ../bin/flare beside this program)
 */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "store/store.h"

#define BENCH_NAMES_DEFAULT 50
#define BENCH_BATCH         10000
#define BENCH_RUNS          5

/* One session: each kernel a pseudo-random pick of name_count names
 * (with 3 or more, the first only in BASE and the last only in NEW), a
 * duration of 2..6 us plus noise, 30% longer in NEW for name 1 (name 0
 * when there is only one). */
static int write_session(const char *dir, long kernels, int name_count, int is_new, uint32_t seed)
{
    char error[512];
    store *handle;
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof(error)) != 0) {
        fprintf(stderr, "%s\n", error);
        return -1;
    }
    store_session_info info = {.command = is_new ? "bench_diff new" : "bench_diff base",
                               .start_ns = 1,
                               .start_unix_ns = 1,
                               .host = "bench",
                               .flare_version = "bench"};
    char(*names)[64] = calloc((size_t)name_count, sizeof *names);
    if (names == NULL) {
        store_close(handle);
        return -1;
    }
    for (int i = 0; i < name_count; i++)
        snprintf(names[i], sizeof(names[i]), "void kernel_%02d<float, 128>(float const*, int)", i);
    int slow = name_count > 1 ? 1 : 0;
    store_kernel_row row = {.pid = 4242, .grid = {128, 1, 1}, .block = {256, 1, 1}};
    uint64_t clock_ns = 1000000000000ull;
    uint32_t random = seed;
    int failed = store_begin(handle) != 0 || store_session_begin(handle, &info) != 0 ||
                 store_process_begin(handle, 4242, 1, clock_ns, "sim", "bench") != 0 ||
                 store_put_device(handle, 4242, 0, "bench device", "sim") != 0 ||
                 store_commit(handle) != 0;
    uint64_t scope_start = clock_ns;
    for (long i = 0; i < kernels && !failed; i += BENCH_BATCH) {
        failed = store_begin(handle) != 0;
        for (long j = i; j < i + BENCH_BATCH && j < kernels && !failed; j++) {
            random = random * 1664525u + 1013904223u;
            int name = (int)((random >> 8) % (uint32_t)name_count);
            if (name_count >= 3 && name == (is_new ? 0 : name_count - 1))
                name = 1;
            uint64_t duration = 2000 + (uint64_t)(name % 50) * 80 + (random >> 22);
            if (is_new && name == slow)
                duration = duration * 13 / 10;
            row.stream_id = (uint64_t)(j & 7);
            row.correlation_id = (uint64_t)j;
            row.name = names[name];
            row.start_ns = clock_ns;
            row.end_ns = clock_ns + duration;
            clock_ns += duration + 100;
            failed = store_put_kernel(handle, &row) != 0;
            if (!failed && (j + 1) % 10 == 0) {
                store_scope_row scope = {.pid = 4242,
                                         .thread_id = 4242,
                                         .instance_id = (uint64_t)j,
                                         .name = "step",
                                         .start_ns = scope_start,
                                         .end_ns = clock_ns};
                failed = store_put_scope(handle, &scope) != 0;
                scope_start = clock_ns;
            }
        }
        if (!failed)
            failed = store_commit(handle) != 0;
    }
    if (!failed)
        failed = store_session_end(handle, clock_ns, 1, 0) != 0;
    if (failed)
        fprintf(stderr, "write failed: %s\n", store_last_error(handle));
    store_close(handle);
    free(names);
    return failed ? -1 : 0;
}

/* Runs flare diff base new [extra] with its output to /dev/null; returns
 * the wall seconds (and the child's peak memory in *peak_kb), or -1. */
static double run_diff(const char *flare, const char *base, const char *new_dir, const char *extra,
                       long *peak_kb, double *cpu_seconds, int *exit_status)
{
    uint64_t start = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const char *arguments[] = {flare, "diff", base, new_dir, extra, NULL};
        execv(flare, (char *const *)arguments);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) != pid)
        return -1;
    double seconds = (double)(bench_now_ns() - start) * 1e-9;
    *peak_kb = usage.ru_maxrss;
    *cpu_seconds = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 +
                   (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
    *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return seconds;
}

int main(int argc, char **argv)
{
    long kernels = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    long name_count = argc > 2 ? strtol(argv[2], NULL, 10) : BENCH_NAMES_DEFAULT;
    if (kernels < 100 || name_count < 1 || name_count > 1000000) {
        fprintf(stderr, "usage: %s [kernels >= 100] [names 1..1000000] [flare binary]\n", argv[0]);
        return 2;
    }
    char flare[4096];
    if (argc > 3) {
        snprintf(flare, sizeof flare, "%s", argv[3]);
    } else {
        char self[4096];
        snprintf(self, sizeof self, "%s", argv[0]);
        snprintf(flare, sizeof flare, "%s/../bin/flare", dirname(self));
    }
    if (access(flare, X_OK) != 0) {
        fprintf(stderr, "no flare binary at %s (give its path)\n", flare);
        return 2;
    }
    const char *base_dir = getenv("FLARE_BENCH_DIR");
    char dir[4096], base[4200], new_dir[4200];
    snprintf(dir, sizeof(dir), "%s/flare-bench-diff-XXXXXX", base_dir != NULL ? base_dir : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(base, sizeof base, "%s/base", dir);
    snprintf(new_dir, sizeof new_dir, "%s/new", dir);
    int status = 1;
    uint64_t start = bench_now_ns();
    if (mkdir(base, 0755) != 0 || mkdir(new_dir, 0755) != 0 ||
        write_session(base, kernels, (int)name_count, 0, 12345) != 0 ||
        write_session(new_dir, kernels, (int)name_count, 1, 54321) != 0)
        goto done;
    printf("wrote two sessions of %ld kernels (%ld names) and %ld scopes each in %.1f s\n", kernels,
           name_count, kernels / 10, (double)(bench_now_ns() - start) * 1e-9);

    const char *variants[] = {"--top=10", "--format=json"};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        double runs[BENCH_RUNS], cpu[BENCH_RUNS];
        long peak_kb = 0;
        int exit_status = 0;
        for (int run = 0; run < BENCH_RUNS; run++) {
            long peak = 0;
            runs[run] = run_diff(flare, base, new_dir, variants[v], &peak, &cpu[run], &exit_status);
            if (runs[run] < 0 || exit_status != 0) {
                fprintf(stderr, "flare diff failed (exit %d)\n", exit_status);
                goto done;
            }
            peak_kb = peak > peak_kb ? peak : peak_kb;
        }
        double median = bench_median(runs, BENCH_RUNS);
        double cpu_median = bench_median(cpu, BENCH_RUNS);
        printf("flare diff %s: median %.2f s of %d runs (min %.2f, max %.2f; target <= 5 s), "
               "CPU (user + system) median %.2f s, peak memory %.1f MiB\n",
               variants[v], median, BENCH_RUNS, runs[0], runs[BENCH_RUNS - 1], cpu_median,
               (double)peak_kb / 1024.0);
    }
    status = 0;
done:;
    const char *keep = getenv("FLARE_BENCH_KEEP");
    if (keep != NULL && strcmp(keep, "1") == 0) {
        printf("sessions kept in %s\n", dir);
        return status;
    }
    char command[4300];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return status;
}
