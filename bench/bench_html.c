/*
 * bench_html.c: what `flare report --html` costs on a big session (issue 20
 * item 3). Writes a synthetic session through the store's writer, as a
 * finished `flare trace` leaves it (indexes built): 1,000,000 kernels of 50
 * names on 8 streams of 2 devices, train_step scopes (100 of them, with
 * an idle gap after each) with forward, backward and optimizer inside, NVML gauges of both devices
 * every 0.5 ms, a deep window over a tenth of the session with PM samples every 100 us (6 metrics),
 * a launch storm, kernel replay of 3 kernels and a range replay of one step's 300 kernels with
 * speed-of-light metrics, drops and a warning. Then times `flare report --html` on it (median of
 * 5), its file's size, and how long a headless Chromium takes to open the page until <body
 * data-rendered="ok"> (median of 3: the wall time of `chromium --headless --dump-dom`, which
 * includes starting the browser, and the page's own performance.now() when
 * it finished drawing). Targets: <= 5 s, <= 10 MB, interactive <= 3 s.
 * Writes only under a mkdtemp directory (in /tmp unless FLARE_BENCH_DIR
 * says otherwise) and removes it afterwards.
 *
 * Usage: bench_html [kernels] [flare binary]
 *          (default 1000000, and ../bin/flare beside this program)
 *        bench_html --session DIR [kernels]
 *          writes the session only, into DIR (which must not exist), for
 *          scripts/html-screenshots.sh
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_pm.h"
#include "store/store_views.h"

#define BENCH_NAMES  50
#define BENCH_BATCH  10000
#define BENCH_RUNS   5
#define BROWSER_RUNS 3
#define PID          4242
#define ORIGIN       1000000000000ull
#define MS           1000000ull

static const char *const name_stems[] = {
    "ampere_bf16_s16816gemm_relu_128x256",
    "flash_fwd_kernel<Flash_fwd_params, 128>",
    "layer_norm_fwd<float, 1024>",
    "softmax_warp_forward<bf16, 11>",
    "vectorized_elementwise_kernel<add>",
    "reduce_kernel<512, 1, sum>",
    "cross_entropy_loss_fwd",
    "adam_apply_kernel<float>",
    "embedding_backward_feature_kernel",
    "nccl_allreduce_ring_ll128",
};

/* ---- the session ---- */

typedef struct bench_session {
    store *handle;
    char names[BENCH_NAMES][96];
    uint64_t end_ns;
} bench_session;

/* Scopes of step (a step every kernels/100 kernels, at least 1000): the
 * step, and forward (40%), backward (50%), optimizer (10%) in it. */
static int put_step_scopes(store *handle, uint64_t step, uint64_t start, uint64_t end)
{
    uint64_t length = end - start;
    uint64_t cut1 = start + length * 4 / 10, cut2 = start + length * 9 / 10;
    store_scope_row rows[] = {
        {PID, PID, 4 * step + 1, "train_step", 0, start, end, 0},
        {PID, PID, 4 * step + 2, "forward", 1, start, cut1, 0},
        {PID, PID, 4 * step + 3, "backward", 1, cut1, cut2, 0},
        {PID, PID, 4 * step + 4, "optimizer", 1, cut2, end, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (store_put_scope(handle, &rows[i]) != 0)
            return -1;
    return 0;
}

/* One kernel every 1.5 us on one of 8 streams of 2 devices, so kernels
 * overlap; a step every per_step kernels, then a gap of a fifth of one. */
static int put_kernels(bench_session *session, long kernels)
{
    store *handle = session->handle;
    store_kernel_row row = {.pid = PID, .grid = {1024, 1, 1}, .block = {256, 1, 1}};
    uint64_t clock_ns = ORIGIN + MS;
    uint32_t random = 12345;
    long per_step = kernels / 100 > 1000 ? kernels / 100 : 1000;
    uint64_t step_start = clock_ns, step = 0;
    int failed = 0;
    for (long i = 0; i < kernels && !failed; i += BENCH_BATCH) {
        failed = store_begin(handle) != 0;
        for (long j = i; j < i + BENCH_BATCH && j < kernels && !failed; j++) {
            random = random * 1664525u + 1013904223u;
            row.device = (int)(j & 1);
            row.stream_id = (uint64_t)(j & 7);
            row.correlation_id = (uint64_t)j;
            /* A few names take most of the time, as in a real program. */
            double u = (double)(random >> 8) / 16777216.0;
            int name = (int)(u * u * u * BENCH_NAMES);
            row.name = session->names[name];
            row.start_ns = clock_ns;
            row.end_ns = clock_ns + 1000 + 12000 / (uint64_t)(1 + name) + (random >> 21);
            clock_ns += 1500;
            failed = store_put_kernel(handle, &row) != 0;
            if (!failed && (j + 1) % per_step == 0) {
                failed = put_step_scopes(handle, step++, step_start, clock_ns) != 0;
                /* The data loader: the GPUs idle a fifth of a step. */
                clock_ns += (uint64_t)per_step * 1500 / 5;
                step_start = clock_ns;
            }
        }
        if (!failed)
            failed = store_commit(handle) != 0;
    }
    session->end_ns = clock_ns + MS;
    return failed ? -1 : 0;
}

/* NVML's five gauges on both devices every 0.5 ms. */
static int put_metrics(bench_session *session)
{
    static const char *const gauges[] = {"gpu_utilization_pct", "memory_used_bytes", "power_mw",
                                         "sm_clock_mhz", "temperature_c"};
    int failed = store_begin(session->handle) != 0;
    uint64_t count = 0;
    for (uint64_t t = ORIGIN; t < session->end_ns && !failed; t += MS / 2, count++) {
        for (int device = 0; device < 2 && !failed; device++) {
            double phase = (double)count / 400.0 + device;
            int64_t values[] = {(int64_t)(70 + 25 * sin(phase)),
                                (int64_t)((60ull << 30) + (uint64_t)(count * 4096)),
                                (int64_t)(450000 + 180000 * sin(phase * 1.3)),
                                (int64_t)(1755 + 225 * (count % 50 == 0)),
                                (int64_t)(52 + count / 600)};
            for (int gauge = 0; gauge < 5 && !failed; gauge++) {
                store_metric_row row = {PID, device, gauges[gauge], t, values[gauge]};
                failed = store_put_metric(session->handle, &row) != 0;
            }
        }
    }
    return failed || store_commit(session->handle) != 0 ? -1 : 0;
}

/* A rule's window over a tenth of the session (200 ms at most) from 30%
 * into it, with PM samples of six metrics every 100 us. */
static int put_window(bench_session *session)
{
    uint64_t open_ns = ORIGIN + (session->end_ns - ORIGIN) * 3 / 10;
    uint64_t length_ns = (session->end_ns - ORIGIN) / 10;
    uint64_t close_ns = open_ns + (length_ns < 200 * MS ? length_ns : 200 * MS);
    store_window_row window = {.pid = PID,
                               .id = 1,
                               .token_kind = "rule",
                               .label = "",
                               .has_cause = 1,
                               .rule_id = 1,
                               .rule_text = "kernel_launch_rate < 500/s for 2s",
                               .requested_ns = open_ns - MS,
                               .opened_ns = open_ns,
                               .closed_ns = close_ns,
                               .close_reason = "duration",
                               .launches = (close_ns - open_ns) / 1500,
                               .engine = "cuda-pm",
                               .engine_status = "disarmed",
                               .engine_reason = "",
                               .engine_samples = (close_ns - open_ns) / 100000};
    static const char *const metrics[] = {"sm__cycles_active.avg", "gr__cycles_elapsed.max",
                                          "dram__bytes_read.sum",  "dram__bytes_write.sum",
                                          "tensor_pipe_active",    "gpu__time_duration.sum"};
    int failed = store_begin(session->handle) != 0 || store_put_window(session->handle, &window);
    uint64_t index = 0;
    for (uint64_t t = open_ns; t + 100000 <= close_ns && !failed; t += 100000, index++) {
        double wave = 0.5 + 0.45 * sin((double)index / 37.0);
        double values[] = {1980.0 * 100 * wave, 198000,     3.2e8 * wave,
                           1.1e8 * (1 - wave),  0.9 * wave, 100000};
        for (int metric = 0; metric < 6 && !failed; metric++) {
            store_pm_row row = {.pid = PID,
                                .window_id = 1,
                                .device = 0,
                                .sample_index = index,
                                .start_ns = t,
                                .end_ns = t + 100000,
                                .has_scope = 1,
                                .scope_instance_id = 1,
                                .scope_name = index % 100 < 40 ? "forward" : "backward",
                                .flags = index == 7 ? 2u : 0u,
                                .metric = metrics[metric],
                                .value = values[metric]};
            failed = store_put_pm_samples(session->handle, &row, 1) != 0;
        }
    }
    return failed || store_commit(session->handle) != 0 ? -1 : 0;
}

static replay_record *replay_record_of(uint64_t id, const char *kernel, uint64_t index)
{
    replay_record *record = calloc(1, sizeof *record);
    if (record == NULL)
        return NULL;
    record->launch_id = id;
    snprintf(record->kernel_name, sizeof record->kernel_name, "%s", kernel);
    record->launch_index = index;
    record->passes_planned = record->passes_run = 8;
    record->begin_ns = ORIGIN + 50 * MS + id * 100000;
    record->end_ns = record->begin_ns + 90000;
    snprintf(record->collector, sizeof record->collector, "cuda-range-profiler");
    return record;
}

static void add_metric(replay_record *record, const char *name, double value)
{
    uint32_t at = record->metric_count++;
    snprintf(record->metric_names[at], sizeof record->metric_names[at], "%s", name);
    record->metric_values[at] = value;
}

/* The speed-of-light set (src/replay/replay_selection.c), values that vary
 * with seed. */
static void add_speed_of_light(replay_record *record, uint32_t seed)
{
    double a = (double)(seed * 2654435761u % 1000) / 1000.0, b = 1.0 - a * 0.6;
    add_metric(record, "gpu__time_duration.sum", 8000 + 90000 * a);
    add_metric(record, "sm__throughput.avg.pct_of_peak_sustained_elapsed", 12 + 80 * a);
    add_metric(record, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
               10 + 85 * b);
    add_metric(record, "dram__bytes_read.sum", 2e6 + 5e7 * b);
    add_metric(record, "dram__bytes_write.sum", 1e6 + 2e7 * b);
    add_metric(record, "l1tex__throughput.avg.pct_of_peak_sustained_active", 20 + 60 * a);
    add_metric(record, "lts__throughput.avg.pct_of_peak_sustained_elapsed", 15 + 70 * b);
    add_metric(record, "sm__cycles_active.avg", 1.2e4 + 1e5 * a);
    add_metric(record, "smsp__inst_executed.sum", 3e6 + 4e7 * a);
    add_metric(record, "sm__warps_active.avg.pct_of_peak_sustained_active", 30 + 50 * a);
}

/* Kernel replay of three kernels (the second launch of the first
 * declined), and range replay of step 3 with its 300 kernels. */
static int put_replay(bench_session *session)
{
    enum { SPAN_KERNELS = 300, COUNT = 6 + 1 + SPAN_KERNELS };
    replay_record **records = calloc(COUNT, sizeof *records);
    int failed = records == NULL;
    size_t count = 0;
    for (uint64_t launch = 0; launch < 6 && !failed; launch++) {
        replay_record *record =
            replay_record_of(launch + 1, session->names[launch / 2], launch % 2 * 40);
        failed = record == NULL;
        if (!failed && launch == 1) {
            record->declined = 1;
            record->passes_run = 1;
            snprintf(record->reason, sizeof record->reason,
                     "the kernel's footprint is over --footprint-budget (3.1 GiB > 2 GiB)");
        } else if (!failed) {
            add_speed_of_light(record, (uint32_t)launch);
        }
        records[count++] = record;
    }
    replay_record *span = failed ? NULL : replay_record_of(100, "train_step", 3);
    failed = failed || span == NULL;
    if (!failed) {
        span->is_span = 1;
        span->span_id = 100;
        span->span_kernels = SPAN_KERNELS;
        span->span_copies = 4;
        records[count++] = span;
    }
    for (uint64_t kernel = 0; kernel < SPAN_KERNELS && !failed; kernel++) {
        replay_record *record =
            replay_record_of(101 + kernel, session->names[kernel * 7 % BENCH_NAMES], kernel);
        failed = record == NULL;
        if (!failed) {
            record->span_id = 100;
            add_speed_of_light(record, (uint32_t)(kernel + 11));
            records[count++] = record;
        }
    }
    if (!failed)
        failed = store_begin(session->handle) != 0 ||
                 replay_records_store(session->handle, PID, records, count) != 0 ||
                 store_commit(session->handle) != 0;
    for (size_t i = 0; records != NULL && i < count; i++)
        free(records[i]);
    free(records);
    return failed ? -1 : 0;
}

static int put_the_rest(bench_session *session)
{
    store *handle = session->handle;
    uint64_t span = session->end_ns - ORIGIN;
    store_storm_row storm = {PID, -1, ORIGIN + span * 7 / 10, ORIGIN + span * 3 / 4, 41873, 0};
    int failed =
        store_begin(handle) != 0 || store_put_storm(handle, &storm) != 0 ||
        store_set_drops(handle, PID, "storm_guard",
                        "kernel launches counted but not timed (launch storm)", 41873) != 0 ||
        store_put_log(handle, PID, ORIGIN + 2 * MS, "warning",
                      "nvml: power readings are not supported on device 1") != 0 ||
        store_set_capability(handle, PID, "kernels", 1, "active", "CUPTI activity") != 0 ||
        store_set_capability(handle, PID, "nvml", 1, "active", "") != 0 ||
        store_set_capability(handle, PID, "pm_sampling", 1, "active", "preset overview") != 0 ||
        store_put_device(handle, PID, 0, "NVIDIA H200", "cuda") != 0 ||
        store_put_device(handle, PID, 1, "NVIDIA H200", "cuda") != 0 ||
        store_process_end(handle, PID, session->end_ns) != 0 ||
        store_session_end(handle, session->end_ns, 1, 0) != 0 || store_commit(handle) != 0;
    return failed ? -1 : 0;
}

/* The whole session in dir, indexed as `flare trace` leaves it. */
static int write_session(const char *dir, long kernels)
{
    char error[512];
    bench_session session = {0};
    for (int i = 0; i < BENCH_NAMES; i++)
        snprintf(session.names[i], sizeof session.names[i], "%s%s", name_stems[i % 10],
                 i < 10   ? ""
                 : i < 30 ? " [tail]"
                          : " (variant)");
    for (int i = 10; i < BENCH_NAMES; i++)
        snprintf(session.names[i] + strlen(session.names[i]),
                 sizeof session.names[i] - strlen(session.names[i]), " #%d", i);
    if (store_open(dir, STORE_OPEN_WRITE, &session.handle, error, sizeof error) != 0) {
        fprintf(stderr, "%s\n", error);
        return -1;
    }
    store_session_info info = {.command = "python3 train.py --steps 100",
                               .start_ns = ORIGIN,
                               .start_unix_ns = 1767225600000000000ll,
                               .host = "bench-host",
                               .flare_version = "0.1.0"};
    store_index_result indexed;
    int failed =
        store_begin(session.handle) != 0 || store_session_begin(session.handle, &info) != 0 ||
        store_process_begin(session.handle, PID, 1, ORIGIN, "cuda", "python3") != 0 ||
        store_commit(session.handle) != 0 || put_kernels(&session, kernels) != 0 ||
        put_metrics(&session) != 0 || put_window(&session) != 0 || put_replay(&session) != 0 ||
        put_the_rest(&session) != 0 || store_build_indexes(session.handle, &indexed) != 0;
    if (failed)
        fprintf(stderr, "write failed: %s\n", store_last_error(session.handle));
    store_close(session.handle);
    return failed ? -1 : 0;
}

/* ---- timing ---- */

/* Runs flare report --html page dir, output to /dev/null; the wall
 * seconds, or -1 when it did not exit 0. */
static double run_report(const char *flare, const char *page, const char *dir)
{
    uint64_t start = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const char *arguments[] = {flare, "report", "--html", page, dir, NULL};
        execv(flare, (char *const *)arguments);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return (double)(bench_now_ns() - start) * 1e-9;
}

/* Opens page in a headless Chromium (no virtual time: the DOM is dumped
 * once the page has loaded, after its script drew); returns the wall
 * seconds and the page's own drawing time in *page_ms, or -1 when the
 * page did not say data-rendered="ok". */
static double run_browser(const char *chromium, const char *page, const char *profile,
                          double *page_ms)
{
    char command[16384];
    snprintf(command, sizeof command,
             "'%s' --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions "
             "--user-data-dir='%s' --window-size=1280,1000 --dump-dom 'file://%s' 2>/dev/null",
             chromium, profile, page);
    uint64_t start = bench_now_ns();
    FILE *pipe = popen(command, "r");
    if (pipe == NULL)
        return -1;
    static char dom[1 << 16];
    size_t used = 0, got;
    int ok = 0;
    *page_ms = -1;
    /* The body's attributes come first; keep reading to the end. */
    while ((got = fread(dom + used, 1, sizeof dom - 1 - used, pipe)) > 0) {
        used += got;
        dom[used] = '\0';
        const char *body = strstr(dom, "<body");
        if (body != NULL && !ok) {
            ok = strstr(body, "data-rendered=\"ok\"") != NULL;
            const char *ms = strstr(body, "data-rendered-ms=\"");
            if (ms != NULL)
                *page_ms = atof(ms + 18);
        }
        if (used > sizeof dom / 2)
            used = 0; /* the rest of the page: only read */
    }
    double seconds = (double)(bench_now_ns() - start) * 1e-9;
    if (pclose(pipe) != 0 || !ok)
        return -1;
    return seconds;
}

static int find_chromium(char *path, size_t size)
{
    const char *named = getenv("FLARE_CHROMIUM");
    const char *candidates[] = {named, "/usr/bin/chromium", "/usr/bin/chromium-browser", NULL};
    for (int i = 0; i < 3; i++)
        if (candidates[i] != NULL && access(candidates[i], X_OK) == 0) {
            snprintf(path, size, "%s", candidates[i]);
            return 0;
        }
    return -1;
}

/* Median wall seconds of BROWSER_RUNS openings of page (and its own drawing
 * time in *page_ms), or -1. */
static double browser_median(const char *chromium, const char *page, const char *profile,
                             double *page_ms)
{
    double walls[BROWSER_RUNS], pages[BROWSER_RUNS];
    for (int run = 0; run < BROWSER_RUNS; run++) {
        walls[run] = run_browser(chromium, page, profile, &pages[run]);
        if (walls[run] < 0)
            return -1;
    }
    *page_ms = bench_median(pages, BROWSER_RUNS);
    return bench_median(walls, BROWSER_RUNS);
}

static void measure_browser(const char *page, const char *dir)
{
    char chromium[4096], profile[4200], blank[4200];
    if (find_chromium(chromium, sizeof chromium) != 0) {
        printf("browser: no chromium (FLARE_CHROMIUM or /usr/bin/chromium): not measured\n");
        return;
    }
    snprintf(profile, sizeof profile, "%s/chromium-profile", dir);
    /* What starting the browser and loading any page costs here. */
    snprintf(blank, sizeof blank, "%s/blank.html", dir);
    FILE *file = fopen(blank, "w");
    if (file == NULL)
        return;
    fputs("<!DOCTYPE html><html><body data-rendered=\"ok\" data-rendered-ms=\"0\"></body></html>\n",
          file);
    fclose(file);
    double blank_ms, page_ms;
    double blank_s = browser_median(chromium, blank, profile, &blank_ms);
    double page_s = browser_median(chromium, page, profile, &page_ms);
    if (page_s < 0 || blank_s < 0) {
        printf("browser: the page did not say data-rendered=\"ok\"\n");
        return;
    }
    printf("browser: headless chromium --dump-dom until data-rendered=\"ok\": %.2f s wall (median "
           "of %d), of which %.2f s is starting the browser (an empty page); the page's own time "
           "from navigation to drawn: %.0f ms (target <= 3 s)\n",
           page_s, BROWSER_RUNS, blank_s, page_ms);
}

static int measure(const char *flare, const char *dir, const char *session)
{
    char page[4200];
    snprintf(page, sizeof page, "%s/report.html", dir);
    double runs[BENCH_RUNS];
    for (int run = 0; run < BENCH_RUNS; run++) {
        runs[run] = run_report(flare, page, session);
        if (runs[run] < 0) {
            fprintf(stderr, "%s report --html %s %s failed\n", flare, page, session);
            return -1;
        }
    }
    struct stat info;
    long long size = stat(page, &info) == 0 ? (long long)info.st_size : -1;
    double median = bench_median(runs, BENCH_RUNS); /* sorts runs */
    printf("flare report --html: %.2f s (median of %d, min %.2f, max %.2f; target <= 5 s)\n",
           median, BENCH_RUNS, runs[0], runs[BENCH_RUNS - 1]);
    printf("page: %.2f MB (target <= 10 MB)\n", (double)size / 1e6);
    measure_browser(page, dir);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--session") == 0) {
        long kernels = argc > 3 ? strtol(argv[3], NULL, 10) : 1000000;
        if (kernels < 1000 || mkdir(argv[2], 0755) != 0) {
            fprintf(stderr, "usage: %s --session NEW_DIR [kernels >= 1000]\n", argv[0]);
            return 2;
        }
        return write_session(argv[2], kernels) == 0 ? 0 : 1;
    }
    long kernels = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    if (kernels < 1000) {
        fprintf(stderr, "usage: %s [kernels >= 1000] [flare binary]\n", argv[0]);
        return 2;
    }
    char flare[4096];
    if (argc > 2) {
        snprintf(flare, sizeof flare, "%s", argv[2]);
    } else {
        char self[4000];
        ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
        self[length > 0 ? length : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL)
            *slash = '\0';
        snprintf(flare, sizeof flare, "%s/../bin/flare", self);
    }
    const char *base = getenv("FLARE_BENCH_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/flare-bench-html-XXXXXX", base != NULL ? base : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char session[4200];
    snprintf(session, sizeof session, "%s/session", dir);
    int status = 1;
    uint64_t start = bench_now_ns();
    if (mkdir(session, 0755) != 0 || write_session(session, kernels) != 0)
        goto done;
    printf("wrote and indexed a session of %ld kernels in %.2f s\n", kernels,
           (double)(bench_now_ns() - start) * 1e-9);
    status = measure(flare, dir, session) == 0 ? 0 : 1;
done : {
    char command[4200];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
    return status;
}
