/*
 * bench_export.c: `flare export --format perfetto` on a synthetic session of
 * N kernels (default 1,000,000), each with the API call that launched it
 * (so every kernel also gets a call slice and a flow arrow: four events a
 * kernel), a scope every 10 kernels, over 8 streams of 2 devices and 50
 * kernel names, written through the store's writer as a session would.
 *
 * It runs the built flare (FLARE_CLI_PATH) pinned to one core, RUNS times
 * (default 5) to a plain .json and then to a .json.gz, and prints each run's
 * time and the medians: events written per second (every event, flows
 * included, as otherData.events counts them) and the gzip file's size
 * against the plain one's. The session and the traces go in a temporary
 * directory that is removed at the end, or in KEEP, which is kept (and
 * whose session is reused when it already holds one: for profiling).
 *
 * Usage: bench_export [kernels] [runs] [KEEP]
 * Exits 0, or 1 with a message on stderr.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "store/store.h"

#ifndef FLARE_CLI_PATH
#error "FLARE_CLI_PATH names the flare command (bench/CMakeLists.txt)"
#endif

#define SESSION_NAMES 50
#define SESSION_BATCH 10000
#define SESSION_PID   4242
#define MAX_RUNS      32

/* One batch of kernels [first, first + count), each after its call, with a
 * scope around every 10. 0, or nonzero with the store's error recorded. */
static int put_batch(store *handle, long first, long count, uint64_t *clock_ns, uint32_t *random,
                     char names[][40])
{
    store_kernel_row row = {
        .pid = SESSION_PID, .grid = {128, 1, 1}, .block = {256, 1, 1}, .registers_per_thread = 32};
    store_api_call_row call = {
        .pid = SESSION_PID, .thread_id = SESSION_PID, .name = "cuLaunchKernel"};
    for (long j = first; j < first + count; j++) {
        *random = *random * 1664525u + 1013904223u;
        call.correlation_id = (uint64_t)j + 1;
        call.start_ns = *clock_ns;
        call.end_ns = *clock_ns + 900;
        row.device = (int)(j & 1);
        row.stream_id = (uint64_t)(j & 7);
        row.correlation_id = (uint64_t)j + 1;
        row.name = names[(*random >> 8) % SESSION_NAMES];
        row.start_ns = *clock_ns + 3000;
        row.end_ns = row.start_ns + 2000 + (*random >> 20);
        *clock_ns += 1500;
        if (store_put_api_call(handle, &call) != 0 || store_put_kernel(handle, &row) != 0)
            return 1;
        if ((j + 1) % 10 != 0)
            continue;
        store_scope_row scope = {.pid = SESSION_PID,
                                 .thread_id = SESSION_PID,
                                 .instance_id = (uint64_t)j,
                                 .name = "step",
                                 .start_ns = *clock_ns - 15000,
                                 .end_ns = *clock_ns};
        if (store_put_scope(handle, &scope) != 0)
            return 1;
    }
    return 0;
}

static int make_session(const char *dir, long kernels)
{
    char error[512];
    store *handle;
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof error) != 0) {
        fprintf(stderr, "bench_export: %s\n", error);
        return 1;
    }
    char names[SESSION_NAMES][40];
    for (int i = 0; i < SESSION_NAMES; i++)
        snprintf(names[i], sizeof names[i], "void kernel_%02d<float, 128>(float*, int)", i);
    uint64_t clock_ns = 1000000000000ull;
    uint32_t random = 12345;
    store_session_info info = {
        .command = "bench_export", .start_ns = clock_ns, .start_unix_ns = 1, .host = "bench"};
    int failed = store_begin(handle) != 0 || store_session_begin(handle, &info) != 0 ||
                 store_process_begin(handle, SESSION_PID, 1, clock_ns, "sim", "bench") != 0 ||
                 store_put_device(handle, SESSION_PID, 0, "bench GPU 0", "sim") != 0 ||
                 store_put_device(handle, SESSION_PID, 1, "bench GPU 1", "sim") != 0 ||
                 store_commit(handle) != 0;
    for (long i = 0; i < kernels && !failed; i += SESSION_BATCH) {
        long count = kernels - i < SESSION_BATCH ? kernels - i : SESSION_BATCH;
        failed = store_begin(handle) != 0 ||
                 put_batch(handle, i, count, &clock_ns, &random, names) != 0 ||
                 store_commit(handle) != 0;
    }
    failed = failed || store_begin(handle) != 0 ||
             store_process_end(handle, SESSION_PID, clock_ns) != 0 ||
             store_session_end(handle, clock_ns, 1, 0) != 0 || store_commit(handle) != 0 ||
             store_settle(handle) != 0;
    if (failed)
        fprintf(stderr, "bench_export: %s\n", store_last_error(handle));
    store_close(handle);
    return failed;
}

/* Runs `flare export DIR -f perfetto -o OUT` pinned to the first core this
 * process may use. Returns its wall time in seconds, or -1; *cpu gets the
 * CPU time it used (user + system), which a busy machine disturbs less. */
static double run_export(const char *dir, const char *out, double *cpu)
{
    cpu_set_t allowed, one;
    CPU_ZERO(&one);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        for (int core = 0; core < CPU_SETSIZE; core++)
            if (CPU_ISSET(core, &allowed)) {
                CPU_SET(core, &one);
                break;
            }
    }
    unlink(out); /* not timed: freeing the last run's file is not the export's work */
    uint64_t start = bench_now_ns();
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        sched_setaffinity(0, sizeof one, &one);
        execl(FLARE_CLI_PATH, "flare", "export", dir, "-f", "perfetto", "-o", out, (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(child, &status, 0, &usage) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_export: flare export %s -o %s failed\n", dir, out);
        return -1;
    }
    *cpu = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
    return (double)(bench_now_ns() - start) / 1e9;
}

/* otherData.events of the plain trace at path (its last line), or 0. */
static unsigned long long trace_events(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return 0;
    char tail[4096];
    fseek(file, -(long)(sizeof tail - 1), SEEK_END);
    size_t got = fread(tail, 1, sizeof tail - 1, file);
    fclose(file);
    tail[got] = '\0';
    const char *at = strstr(tail, "\"events\":");
    return at != NULL ? strtoull(at + 9, NULL, 10) : 0;
}

static long long file_size(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

int main(int argc, char **argv)
{
    long kernels = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (argc > 4 || kernels <= 0 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: bench_export [kernels > 0] [runs 1..%d] [KEEP]\n", MAX_RUNS);
        return 1;
    }
    const char *keep = argc > 3 ? argv[3] : NULL;
    const char *tmp = getenv("TMPDIR");
    char root[512], session[600], plain[600], packed[600];
    if (keep != NULL) {
        snprintf(root, sizeof root, "%s", keep);
        mkdir(root, 0755);
    } else {
        snprintf(root, sizeof root, "%s/flare-bench-export-XXXXXX",
                 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
        if (mkdtemp(root) == NULL) {
            perror("bench_export: mkdtemp");
            return 1;
        }
    }
    snprintf(session, sizeof session, "%s/session", root);
    snprintf(plain, sizeof plain, "%s/trace.json", root);
    snprintf(packed, sizeof packed, "%s/trace.json.gz", root);
    int failed = 0;
    if (mkdir(session, 0755) == 0) {
        uint64_t made = bench_now_ns();
        failed = make_session(session, kernels) != 0;
        printf("bench_export: %ld kernels, %ld API calls, %ld scopes written in %.1f s\n", kernels,
               kernels, kernels / 10, (double)(bench_now_ns() - made) / 1e9);
    } else if (keep == NULL) {
        failed = 1;
    } else {
        printf("bench_export: reusing the session in %s\n", session);
    }

    double seconds[2][MAX_RUNS], cpu[2][MAX_RUNS];
    const char *outputs[2] = {plain, packed};
    const char *labels[2] = {"plain", "gzip"};
    unsigned long long events = 0;
    for (int kind = 0; kind < 2; kind++) {
        for (int run = 0; run < runs && !failed; run++) {
            seconds[kind][run] = run_export(session, outputs[kind], &cpu[kind][run]);
            if (kind == 0)
                events = trace_events(plain);
            failed = seconds[kind][run] < 0 || events == 0;
            if (!failed)
                printf("  %s run %d: %.3f s wall, %.3f s CPU: %.2f M events/s (%.2f M per CPU "
                       "second)\n",
                       labels[kind], run + 1, seconds[kind][run], cpu[kind][run],
                       (double)events / seconds[kind][run] / 1e6,
                       (double)events / cpu[kind][run] / 1e6);
        }
    }
    if (!failed) {
        long long bytes[2] = {file_size(plain), file_size(packed)};
        for (int kind = 0; kind < 2; kind++) {
            double wall = bench_median(seconds[kind], (size_t)runs);
            double used = bench_median(cpu[kind], (size_t)runs);
            printf("%-5s median %.3f s wall (%.2f M events/s), %.3f s CPU (%.2f M events per CPU "
                   "second); %llu events, %.1f MB",
                   labels[kind], wall, (double)events / wall / 1e6, used,
                   (double)events / used / 1e6, events, (double)bytes[kind] / 1e6);
            if (kind == 1)
                printf(" = 1/%.1f of plain", (double)bytes[0] / (double)bytes[1]);
            printf("\n");
        }
    }
    char command[700];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (keep == NULL && system(command) != 0)
        fprintf(stderr, "bench_export: could not remove %s\n", root);
    return failed ? 1 : 0;
}
