/*
 * report.c: `flare report [DIR]`, the summary a person wants first.
 *
 * Reads a session database and prints: what ran, top kernels by total time
 * (count, mean, p50, p99), copies and memsets, scopes, application counters
 * (final value per counter), deep-profiling rules and windows, kernel
 * replay results per kernel and range replay results per span (each only
 * when there are any), and every drop counter that is not zero. It only reads: a missing, empty or
 * corrupt database is a clear error (exit 1), never a crash.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "core/config.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_replay.h"

static const char report_help[] =
    "usage: flare report [--top N] [DIR]\n"
    "\n"
    "Summarises a saved session: the command, top kernels by total GPU time\n"
    "(count, total, mean, p50, p99), copies and memsets, scopes, application\n"
    "counters (final value per counter), GPU metrics, deep-profiling rules and\n"
    "windows, kernel replay results ('flare replay': per kernel, each replayed\n"
    "launch with its metric values, and each declined launch with its reason),\n"
    "range replay results ('flare replay --range': per span, its kernels with\n"
    "their metric values, or the reason it was declined),\n"
    "the capability matrix, and every non-zero drop counter (events the profiler\n"
    "had to discard).\n"
    "\n"
    "DIR is a session directory, or a directory of sessions, in which case the\n"
    "newest is reported. Default: ./flare-out ($FLARE_OUTPUT_DIR if set).\n"
    "\n"
    "Options:\n"
    "  --top N      kernels and scopes to list, 1..100000 (default 10)\n"
    "  -h, --help   this help\n";

static int has_database(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_DATABASE_NAME);
    return access(path, F_OK) == 0;
}

int cli_find_session(const char *argument, char *session_dir, unsigned long size, char *error,
                     unsigned long error_size)
{
    const char *dir = argument;
    if (dir == NULL) {
        dir = getenv("FLARE_OUTPUT_DIR");
        if (dir == NULL || dir[0] == '\0')
            dir = CORE_DEFAULT_OUTPUT_BASE;
    }
    struct stat status;
    if (stat(dir, &status) != 0) {
        snprintf(error, error_size, "%s: %s%s", dir, strerror(errno),
                 argument == NULL ? " (no sessions yet? run 'flare trace -- CMD' first)" : "");
        return 1;
    }
    if (!S_ISDIR(status.st_mode)) {
        snprintf(error, error_size, "%s is not a directory", dir);
        return 1;
    }
    if (has_database(dir)) {
        snprintf(session_dir, size, "%s", dir);
        return 0;
    }
    /* Session directory names start with a UTC time stamp, so the greatest
     * name is the newest session. */
    DIR *listing = opendir(dir);
    if (listing == NULL) {
        snprintf(error, error_size, "cannot read %s: %s", dir, strerror(errno));
        return 1;
    }
    char newest[NAME_MAX + 1] = "";
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char candidate[PATH_MAX];
        if (snprintf(candidate, sizeof(candidate), "%s/%s", dir, entry->d_name) >=
            (int)sizeof(candidate))
            continue;
        if (has_database(candidate) && strcmp(entry->d_name, newest) > 0)
            snprintf(newest, sizeof(newest), "%s", entry->d_name);
    }
    closedir(listing);
    if (newest[0] == '\0') {
        snprintf(error, error_size, "no flare session in %s (no %s in it or its subdirectories)",
                 dir, STORE_DATABASE_NAME);
        return 1;
    }
    snprintf(session_dir, size, "%s/%s", dir, newest);
    return 0;
}

typedef struct table_context {
    int rows;
} table_context;

static int print_duration_row(const store_duration_stats *stats, void *user)
{
    table_context *context = user;
    char total[32], mean[32], p50[32], p99[32];
    cli_format_duration(stats->total_ns, total, sizeof(total));
    cli_format_duration(stats->mean_ns, mean, sizeof(mean));
    cli_format_duration(stats->p50_ns, p50, sizeof(p50));
    cli_format_duration(stats->p99_ns, p99, sizeof(p99));
    printf("  %-60.60s %10lld %12s %12s %12s %12s\n", stats->name, (long long)stats->count, total,
           mean, p50, p99);
    context->rows++;
    return 0;
}

static const char *copy_kind_name(int kind)
{
    switch (kind) {
    case BACKEND_COPY_HOST_TO_DEVICE:
        return "host to device";
    case BACKEND_COPY_DEVICE_TO_HOST:
        return "device to host";
    case BACKEND_COPY_DEVICE_TO_DEVICE:
        return "device to device";
    case BACKEND_COPY_HOST_TO_HOST:
        return "host to host";
    default:
        return "copy (unknown kind)";
    }
}

static int print_copy_row(const store_copy_stats *stats, void *user)
{
    table_context *context = user;
    char bytes[32], total[32];
    cli_format_bytes(stats->bytes, bytes, sizeof(bytes));
    cli_format_duration(stats->total_ns, total, sizeof(total));
    printf("  %-20s %10lld %12s %12s",
           stats->is_memset ? "memset" : copy_kind_name(stats->copy_kind), (long long)stats->count,
           bytes, total);
    if (stats->failed > 0)
        printf("   %lld FAILED", (long long)stats->failed);
    printf("\n");
    context->rows++;
    return 0;
}

static int print_capability_row(const store_capability_row *row, void *user)
{
    table_context *context = user;
    printf("  %-22s %-12s %-4s %s   (pid %lld)\n", row->feature, row->status,
           row->requested ? "yes" : "no", row->reason, (long long)row->pid);
    context->rows++;
    return 0;
}

static int print_metric_row(const store_metric_stats *stats, void *user)
{
    table_context *context = user;
    if (strncmp(stats->name, "external_correlation.", 21) == 0)
        return 0;
    char where[32];
    if (stats->device < 0)
        snprintf(where, sizeof(where), "process");
    else
        snprintf(where, sizeof(where), "device %d", stats->device);
    printf("  %-10s %-24s %8lld %16lld %16.1f %16lld\n", where, stats->name,
           (long long)stats->count, (long long)stats->minimum, stats->mean,
           (long long)stats->maximum);
    context->rows++;
    return 0;
}

static int print_counter_row(const store_counter_row *row, void *user)
{
    table_context *context = user;
    printf("  %-60.96s %20llu %8lld   (pid %lld)\n", row->name, (unsigned long long)row->value,
           (long long)row->samples, (long long)row->pid);
    context->rows++;
    return 0;
}

/* The launch-storm guard's untimed work, every process added up. */
typedef struct untimed_work {
    uint64_t launches;
    uint64_t copies; /* and memsets */
} untimed_work;

static int sum_untimed_work(const store_drop_row *row, void *user)
{
    untimed_work *untimed = user;
    if (strcmp(row->source, "storm_guard") != 0)
        return 0;
    if (strncmp(row->detail, "kernel launches", 15) == 0)
        untimed->launches += row->count;
    else if (strncmp(row->detail, "copies", 6) == 0)
        untimed->copies += row->count;
    return 0;
}

static int print_drop_row(const store_drop_row *row, void *user)
{
    table_context *context = user;
    printf("  %-14s %-32s %12llu   (pid %lld)\n", row->source, row->detail,
           (unsigned long long)row->count, (long long)row->pid);
    context->rows++;
    return 0;
}

/* One deep-profiling rule's outcome (docs/rules.md): never true, fired,
 * exhausted, refused with its reason, stale source, metric missing. */
static int print_rule_row(const store_rule_row *row, void *user)
{
    table_context *context = user;
    char fired[48];
    snprintf(fired, sizeof(fired), "%llu", (unsigned long long)row->windows_fired);
    printf("  %4u %-20s %6s %6llu %6llu %6llu %6llu  %s\n", row->rule_id,
           row->status != NULL ? row->status : "", fired, (unsigned long long)row->times_true,
           (unsigned long long)row->busy_refusals, (unsigned long long)row->stale_readings,
           (unsigned long long)row->missing_readings, row->text != NULL ? row->text : "");
    if (row->reason != NULL && row->reason[0] != '\0')
        printf("       %s\n", row->reason);
    context->rows++;
    return 0;
}

/* One deep-profiling window (docs/windows.md): who opened it, when relative
 * to the session's start, how long, why it closed, and whether the value
 * that fired it came from a truncated (partial) window. */
typedef struct window_context {
    int rows;
    uint64_t session_start_ns;
} window_context;

static int print_window_row(const store_window_row *row, void *user)
{
    window_context *context = user;
    char opened_by[160];
    const char *kind = row->token_kind != NULL ? row->token_kind : "";
    const char *label = row->label != NULL ? row->label : "";
    if (strcmp(kind, "rule") == 0)
        snprintf(opened_by, sizeof(opened_by), "rule %u: %s", row->rule_id,
                 row->rule_text != NULL && row->rule_text[0] ? row->rule_text : label);
    else if (label[0] != '\0')
        snprintf(opened_by, sizeof(opened_by), "%s '%s'", kind, label);
    else
        snprintf(opened_by, sizeof(opened_by), "%s", kind);
    char opened[32] = "never", closed[32] = "-", length[32] = "-";
    if (row->opened_ns != 0 && row->opened_ns >= context->session_start_ns) {
        cli_format_duration(row->opened_ns - context->session_start_ns, opened + 1,
                            sizeof(opened) - 1);
        opened[0] = '+';
    }
    if (row->closed_ns != 0 && row->closed_ns >= context->session_start_ns) {
        cli_format_duration(row->closed_ns - context->session_start_ns, closed + 1,
                            sizeof(closed) - 1);
        closed[0] = '+';
    }
    if (row->opened_ns != 0 && row->closed_ns >= row->opened_ns)
        cli_format_duration(row->closed_ns - row->opened_ns, length, sizeof(length));
    printf("  %4llu %-44.44s %11s %11s %10s %-12s %8llu %-8s %-8s %s\n",
           (unsigned long long)row->id, opened_by, opened, closed, length,
           row->close_reason != NULL ? row->close_reason : "", (unsigned long long)row->launches,
           row->engine != NULL ? row->engine : "",
           row->engine_status != NULL ? row->engine_status : "",
           row->observed_partial ? "partial" : "-");
    if (row->engine_reason != NULL && row->engine_reason[0] != '\0')
        printf("       engine: %s\n", row->engine_reason);
    context->rows++;
    return 0;
}

/* ---- Kernel replay (docs/replay.md) ---- */

/* One launch copied out of the reader's callback (its strings and arrays
 * live only for the callback), so a kernel's launches can be laid out as
 * one table once they have all been read. */
typedef struct replay_launch_copy {
    store_replay_launch_row row; /* pointers cleared; the copies below hold the data */
    char *reason;
    char *collector;
    size_t metric_count;
    char **metric_names;
    double *metric_values;
    int *metric_has_value;
} replay_launch_copy;

typedef struct replay_section {
    char *kernel; /* of the launches held */
    replay_launch_copy *launches;
    size_t count;
    size_t capacity;
    int failed; /* out of memory: the section says so instead of printing half */
    /* Totals over every kernel. */
    long long kernels;
    long long replayed;
    long long declined;
    unsigned long long passes;
    uint64_t snapshot_bytes;
    uint64_t bytes_restored;
    uint64_t collection_ns;
} replay_section;

static void replay_launch_copy_free(replay_launch_copy *copy)
{
    free(copy->reason);
    free(copy->collector);
    for (size_t index = 0; index < copy->metric_count; index++)
        free(copy->metric_names[index]);
    free(copy->metric_names);
    free(copy->metric_values);
    free(copy->metric_has_value);
}

static void replay_section_clear(replay_section *section)
{
    for (size_t index = 0; index < section->count; index++)
        replay_launch_copy_free(&section->launches[index]);
    section->count = 0;
    free(section->kernel);
    section->kernel = NULL;
}

static char *copy_text(const char *text)
{
    return strdup(text != NULL ? text : "");
}

static int replay_copy_launch(const store_replay_launch_row *row, replay_launch_copy *copy)
{
    memset(copy, 0, sizeof(*copy));
    copy->row = *row;
    copy->row.kernel = copy->row.reason = copy->row.collector = NULL;
    copy->row.metric_names = NULL;
    copy->row.metric_values = NULL;
    copy->row.metric_has_value = NULL;
    copy->reason = copy_text(row->reason);
    copy->collector = copy_text(row->collector);
    if (copy->reason == NULL || copy->collector == NULL)
        return -1;
    if (row->metric_count == 0)
        return 0;
    copy->metric_names = calloc(row->metric_count, sizeof(*copy->metric_names));
    copy->metric_values = calloc(row->metric_count, sizeof(*copy->metric_values));
    copy->metric_has_value = calloc(row->metric_count, sizeof(*copy->metric_has_value));
    if (copy->metric_names == NULL || copy->metric_values == NULL || copy->metric_has_value == NULL)
        return -1;
    for (size_t index = 0; index < row->metric_count; index++) {
        copy->metric_names[index] = copy_text(row->metric_names[index]);
        if (copy->metric_names[index] == NULL)
            return -1;
        copy->metric_count = index + 1;
        copy->metric_values[index] = row->metric_values[index];
        copy->metric_has_value[index] = row->metric_has_value[index];
    }
    return 0;
}

static void format_metric_value(double value, int has_value, char *buffer, size_t size)
{
    if (!has_value || isnan(value))
        snprintf(buffer, size, "n/a");
    else if (value == floor(value) && fabs(value) < 1e15)
        snprintf(buffer, size, "%.0f", value);
    else
        snprintf(buffer, size, "%.6g", value);
}

/* Launches side by side in the metrics table: with the metric name's 56
 * columns, four fit a 120-column terminal. */
#define REPLAY_METRIC_COLUMNS 4

/* The metric names of the kernel's replayed launches, each once, in the
 * order they first appear (the order they were asked for). */
static size_t replay_metric_union(const replay_section *section, const char **names,
                                  size_t capacity)
{
    size_t count = 0;
    for (size_t launch = 0; launch < section->count; launch++) {
        const replay_launch_copy *copy = &section->launches[launch];
        for (size_t metric = 0; metric < copy->metric_count; metric++) {
            size_t seen = 0;
            while (seen < count && strcmp(names[seen], copy->metric_names[metric]) != 0)
                seen++;
            if (seen == count && count < capacity)
                names[count++] = copy->metric_names[metric];
        }
    }
    return count;
}

static const replay_launch_copy *replay_find_metric(const replay_launch_copy *copy,
                                                    const char *name, double *value, int *has_value)
{
    for (size_t metric = 0; metric < copy->metric_count; metric++) {
        if (strcmp(copy->metric_names[metric], name) == 0) {
            *value = copy->metric_values[metric];
            *has_value = copy->metric_has_value[metric];
            return copy;
        }
    }
    return NULL;
}

static void replay_print_metrics(const replay_section *section)
{
    /* Launches that collected anything, in table order. */
    size_t *columns = malloc((section->count > 0 ? section->count : 1) * sizeof(*columns));
    if (columns == NULL) {
        printf("    (metrics not shown: out of memory)\n");
        return;
    }
    size_t column_count = 0;
    for (size_t launch = 0; launch < section->count; launch++)
        if (!section->launches[launch].row.declined && section->launches[launch].metric_count > 0)
            columns[column_count++] = launch;
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = replay_metric_union(section, names, sizeof(names) / sizeof(names[0]));
    for (size_t first = 0; first < column_count; first += REPLAY_METRIC_COLUMNS) {
        size_t last = first + REPLAY_METRIC_COLUMNS < column_count ? first + REPLAY_METRIC_COLUMNS
                                                                   : column_count;
        printf("    %-56s", "metric");
        for (size_t column = first; column < last; column++) {
            char heading[32];
            snprintf(heading, sizeof(heading), "launch %llu",
                     (unsigned long long)section->launches[columns[column]].row.launch_id);
            printf(" %16s", heading);
        }
        printf("\n");
        for (size_t name = 0; name < name_count; name++) {
            printf("    %-56s", names[name]);
            for (size_t column = first; column < last; column++) {
                double value = NAN;
                int has_value = 0;
                char text[40] = "-"; /* not collected for this launch */
                if (replay_find_metric(&section->launches[columns[column]], names[name], &value,
                                       &has_value) != NULL)
                    format_metric_value(value, has_value, text, sizeof(text));
                printf(" %16s", text);
            }
            printf("\n");
        }
    }
    free(columns);
}

/* One kernel: a table of its launches, the reasons, then its metrics. */
static void replay_print_kernel(replay_section *section)
{
    long long replayed = 0, declined = 0;
    unsigned long long passes = 0;
    uint64_t collection_ns = 0;
    const char *collector = "";
    for (size_t index = 0; index < section->count; index++) {
        const replay_launch_copy *copy = &section->launches[index];
        if (copy->row.declined) {
            declined++;
        } else {
            replayed++;
            passes += copy->row.passes_run;
            section->snapshot_bytes += copy->row.snapshot_bytes;
            if (copy->collector[0] != '\0')
                collector = copy->collector;
        }
        section->bytes_restored += copy->row.bytes_restored;
        if (copy->row.end_ns > copy->row.begin_ns)
            collection_ns += copy->row.end_ns - copy->row.begin_ns;
    }
    section->kernels++;
    section->replayed += replayed;
    section->declined += declined;
    section->passes += passes;
    section->collection_ns += collection_ns;
    char took[32];
    cli_format_duration(collection_ns, took, sizeof(took));
    printf("\n  %s\n", section->kernel);
    printf("    %lld launch(es) replayed, %lld declined; %llu passes; %s in replay%s%s\n", replayed,
           declined, passes, took, collector[0] ? "; metrics from " : "", collector);
    printf("    %10s %5s %8s %4s %8s %9s %11s %11s %-6s %10s %10s %10s\n", "launch", "nth", "pid",
           "dev", "stream", "passes", "snapshot", "restored", "shadow", "drain", "per pass",
           "total");
    for (size_t index = 0; index < section->count; index++) {
        const replay_launch_copy *copy = &section->launches[index];
        const store_replay_launch_row *row = &copy->row;
        char passes_text[32], snapshot[32], restored[32], drain[32], per_pass[32], total[32];
        if (row->passes_planned != 0 && row->passes_planned != row->passes_run)
            snprintf(passes_text, sizeof(passes_text), "%u/%u", row->passes_run,
                     row->passes_planned);
        else
            snprintf(passes_text, sizeof(passes_text), "%u", row->passes_run);
        cli_format_bytes(row->snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(row->bytes_restored, restored, sizeof(restored));
        cli_format_duration(row->drain_ns, drain, sizeof(drain));
        if (row->passes_kept > 0)
            cli_format_duration(row->pass_mean_ns, per_pass, sizeof(per_pass));
        else
            snprintf(per_pass, sizeof(per_pass), "-");
        cli_format_duration(row->end_ns > row->begin_ns ? row->end_ns - row->begin_ns : 0, total,
                            sizeof(total));
        if (row->declined) {
            printf("    %10llu %5llu %8lld %4d %8llu %9s %11s %11s %-6s %10s %10s %10s\n",
                   (unsigned long long)row->launch_id, (unsigned long long)row->launch_index + 1,
                   (long long)row->pid, row->device, (unsigned long long)row->stream_id, "1", "-",
                   "-", "-", drain, "-", total);
        } else {
            printf("    %10llu %5llu %8lld %4d %8llu %9s %11s %11s %-6s %10s %10s %10s\n",
                   (unsigned long long)row->launch_id, (unsigned long long)row->launch_index + 1,
                   (long long)row->pid, row->device, (unsigned long long)row->stream_id,
                   passes_text, snapshot, restored,
                   row->snapshot_bytes == 0 ? "-"
                   : row->shadow_on_device  ? "device"
                                            : "host",
                   drain, per_pass, total);
        }
    }
    for (size_t index = 0; index < section->count; index++) {
        const replay_launch_copy *copy = &section->launches[index];
        /* Span kernels come here only when their span's record was lost;
         * say so, or the launch would look replayed on its own. */
        if (copy->row.span_id != 0)
            printf("    launch %llu: recorded in span %llu, whose record was lost\n",
                   (unsigned long long)copy->row.launch_id, (unsigned long long)copy->row.span_id);
        if (copy->reason[0] == '\0')
            continue;
        printf("    %s launch %llu: %s\n", copy->row.declined ? "declined" : "note",
               (unsigned long long)copy->row.launch_id, copy->reason);
    }
    replay_print_metrics(section);
}

static int replay_collect_launch(const store_replay_launch_row *row, void *user)
{
    replay_section *section = user;
    const char *kernel = row->kernel != NULL ? row->kernel : "";
    if (section->kernel != NULL && strcmp(section->kernel, kernel) != 0) {
        replay_print_kernel(section);
        replay_section_clear(section);
    }
    if (section->kernel == NULL) {
        section->kernel = strdup(kernel);
        if (section->kernel == NULL)
            goto out_of_memory;
    }
    if (section->count == section->capacity) {
        size_t capacity = section->capacity ? section->capacity * 2 : 16;
        replay_launch_copy *launches =
            realloc(section->launches, capacity * sizeof(*section->launches));
        if (launches == NULL)
            goto out_of_memory;
        section->launches = launches;
        section->capacity = capacity;
    }
    if (replay_copy_launch(row, &section->launches[section->count]) != 0) {
        replay_launch_copy_free(&section->launches[section->count]);
        goto out_of_memory;
    }
    section->count++;
    return 0;
out_of_memory:
    section->failed = 1;
    return 1;
}

/* ---- Range replay (docs/replay.md#range-replay) ---- */

/* Kernel names longer than this are cut with "..." in the span table, so a
 * demangled template name does not push the metric columns off screen; the
 * per-kernel tables of `flare report` and the database keep it whole. */
#define SPAN_KERNEL_NAME_WIDTH 48

typedef struct span_section {
    int spans;
    int failed; /* out of memory while laying out a table */
} span_section;

/* The metric names of the span's kernels, each once, in the order they
 * first appear (the order they were asked for). */
static size_t span_metric_union(const store_replay_span_row *row, const char **names,
                                size_t capacity)
{
    size_t count = 0;
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        for (size_t metric = 0; metric < launch->metric_count; metric++) {
            size_t seen = 0;
            while (seen < count && strcmp(names[seen], launch->metric_names[metric]) != 0)
                seen++;
            if (seen == count && count < capacity)
                names[count++] = launch->metric_names[metric];
        }
    }
    return count;
}

/* The value of metric name for one kernel: "n/a" when stored NULL, "-" when
 * the kernel has no such metric at all. */
static void span_metric_text(const store_replay_launch_row *launch, const char *name, char *text,
                             size_t size)
{
    snprintf(text, size, "-");
    for (size_t metric = 0; metric < launch->metric_count; metric++) {
        if (strcmp(launch->metric_names[metric], name) == 0) {
            format_metric_value(launch->metric_values[metric], launch->metric_has_value[metric],
                                text, size);
            return;
        }
    }
}

/* One row per kernel in launch order, one column per metric, each column as
 * wide as its metric's name (or its widest value). */
static void print_span_kernels(const store_replay_span_row *row, span_section *section)
{
    if (row->kernel_count == 0) {
        printf("    (no kernel recorded)\n");
        return;
    }
    const char *names[REPLAY_RECORD_METRIC_MAX * 2];
    size_t name_count = span_metric_union(row, names, sizeof(names) / sizeof(names[0]));
    int widths[REPLAY_RECORD_METRIC_MAX * 2];
    for (size_t name = 0; name < name_count; name++) {
        widths[name] = (int)strlen(names[name]);
        for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
            char text[40];
            span_metric_text(&row->kernel_rows[kernel], names[name], text, sizeof(text));
            if ((int)strlen(text) > widths[name])
                widths[name] = (int)strlen(text);
        }
    }
    int name_width = 6; /* "kernel" */
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        int length = (int)strlen(row->kernel_rows[kernel].kernel);
        if (length > name_width)
            name_width = length;
    }
    if (name_width > SPAN_KERNEL_NAME_WIDTH)
        name_width = SPAN_KERNEL_NAME_WIDTH;
    char *line_name = malloc((size_t)name_width + 1);
    if (line_name == NULL) {
        printf("    (kernels not shown: out of memory)\n");
        section->failed = 1;
        return;
    }
    /* The name column is padded only when metric columns follow it. */
    int pad = name_count > 0 ? name_width : 0;
    printf("    %10s %5s %-*s", "launch", "nth", pad, "kernel");
    for (size_t name = 0; name < name_count; name++)
        printf("  %*s", widths[name], names[name]);
    printf("\n");
    for (size_t kernel = 0; kernel < row->kernel_count; kernel++) {
        const store_replay_launch_row *launch = &row->kernel_rows[kernel];
        if ((int)strlen(launch->kernel) > name_width)
            snprintf(line_name, (size_t)name_width + 1, "%.*s...", name_width - 3, launch->kernel);
        else
            snprintf(line_name, (size_t)name_width + 1, "%s", launch->kernel);
        printf("    %10llu %5llu %-*s", (unsigned long long)launch->launch_id,
               (unsigned long long)launch->launch_index + 1, pad, line_name);
        for (size_t name = 0; name < name_count; name++) {
            char text[40];
            span_metric_text(launch, names[name], text, sizeof(text));
            printf("  %*s", widths[name], text);
        }
        printf("\n");
    }
    free(line_name);
    if (row->kernel_count < row->kernels)
        printf("    (%u kernel(s) recorded, %zu stored: the other records were lost; see "
               "Dropped data)\n",
               row->kernels, row->kernel_count);
}

static int print_span(const store_replay_span_row *row, void *user)
{
    span_section *section = user;
    section->spans++;
    char which[64], device[32], took[32], snapshot[32], restore[32], per_pass[32];
    /* Explicit spans (flare_replay_range_begin) have no occurrence. */
    if (row->occurrence > 0)
        snprintf(which, sizeof(which), "occurrence %llu", (unsigned long long)row->occurrence);
    else
        snprintf(which, sizeof(which), "flare_replay_range_begin");
    if (row->device >= 0)
        snprintf(device, sizeof(device), "device %d", row->device);
    else
        snprintf(device, sizeof(device), "no device");
    printf("\n  span \"%s\" (%s; pid %lld, %s; span %llu): ", row->name, which, (long long)row->pid,
           device, (unsigned long long)row->span_id);
    if (row->declined)
        printf("declined: %s\n", row->reason);
    else
        printf("replayed\n");
    cli_format_duration(row->end_ns > row->begin_ns ? row->end_ns - row->begin_ns : 0, took,
                        sizeof(took));
    cli_format_bytes(row->snapshot_bytes, snapshot, sizeof(snapshot));
    cli_format_duration(row->restore_ns, restore, sizeof(restore));
    if (row->passes_kept > 0)
        cli_format_duration(row->pass_mean_ns, per_pass, sizeof(per_pass));
    else
        snprintf(per_pass, sizeof(per_pass), "-");
    if (row->declined) {
        /* What a declined span recorded before the decline: its kernels
         * below ran once, with no values. */
        printf("    ran once, as without flare: nothing was snapshotted or restored; %s from its "
               "start to its end\n",
               took);
        printf("    recorded before the decline: %u kernel(s), %u copies/memsets\n", row->kernels,
               row->copies);
    } else {
        char passes[32];
        if (row->passes_planned != 0 && row->passes_planned != row->passes_run)
            snprintf(passes, sizeof(passes), "%u/%u", row->passes_run, row->passes_planned);
        else
            snprintf(passes, sizeof(passes), "%u", row->passes_run);
        printf("    %u kernel(s), %u copies/memsets; %s pass(es), %s per pass; %s collecting in "
               "all\n",
               row->kernels, row->copies, passes, per_pass, took);
        printf("    %s snapshotted (%s shadows); restores took %s in all%s%s\n", snapshot,
               row->snapshot_bytes == 0 ? "no"
               : row->shadow_on_device  ? "device"
                                        : "host",
               restore, row->collector[0] ? "; metrics from " : "", row->collector);
        if (row->reason[0] != '\0')
            printf("    note: %s\n", row->reason);
    }
    print_span_kernels(row, section);
    return 0;
}

int cli_report(int argc, char **argv)
{
    const char *directory = NULL;
    uint32_t top = 10;
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        if (cli_is_help(argument)) {
            fputs(report_help, stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argument, "--top") == 0) {
            if (index + 1 >= argc)
                return cli_usage_error("report", "option '--top' needs a number");
            const char *value = argv[++index];
            if (core_parse_u32(value, 1, 100000, &top) != 0)
                return cli_usage_error("report", "'--top %s': expected a whole number in 1..100000",
                                       value);
        } else if (argument[0] == '-' && argument[1] != '\0') {
            return cli_usage_error("report", "unknown option '%s'", argument);
        } else if (directory != NULL) {
            return cli_usage_error("report", "unexpected argument '%s' (one DIR at most)",
                                   argument);
        } else {
            directory = argument;
        }
    }

    char session_dir[PATH_MAX];
    char error[1024];
    if (cli_find_session(directory, session_dir, sizeof(session_dir), error, sizeof(error)) != 0)
        return cli_failure("report", "%s", error);
    store *database;
    if (store_open(session_dir, STORE_OPEN_READ, &database, error, sizeof(error)) != 0)
        return cli_failure("report", "%s", error);

    store_session_summary summary;
    memset(&summary, 0, sizeof(summary));
    if (store_read_session(database, &summary) != 0) {
        cli_failure("report", "cannot read the session in %s: %s", session_dir,
                    store_last_error(database));
        store_close(database);
        return CLI_EXIT_FAILURE;
    }
    printf("flare session %s\n", session_dir);
    printf("  command    %s\n", summary.command[0] ? summary.command : "(unknown)");
    if (summary.start_unix_ns > 0) {
        time_t seconds = (time_t)(summary.start_unix_ns / 1000000000ll);
        struct tm utc;
        gmtime_r(&seconds, &utc);
        char when[64];
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc);
        printf("  started    %s", when);
        if (summary.end_ns > summary.start_ns) {
            char length[32];
            cli_format_duration(summary.end_ns - summary.start_ns, length, sizeof(length));
            printf(", ran %s", length);
        } else {
            printf(", did not end cleanly (killed or still running)");
        }
        printf("\n");
    }
    if (summary.has_exit_status)
        printf("  exit       %d\n", summary.exit_status);
    printf("  recorded   %lld process(es), %lld kernels, %lld copies/memsets, %lld scopes\n",
           (long long)summary.process_count, (long long)summary.kernel_count,
           (long long)summary.copy_count, (long long)summary.scope_count);
    int status = CLI_EXIT_OK;
    /* Said up front: the kernel tables below count only timed kernels. */
    untimed_work untimed = {0, 0};
    if (store_read_drops(database, sum_untimed_work, &untimed) == 0 &&
        untimed.launches + untimed.copies > 0)
        printf("  untimed    %llu more kernel launches and %llu copies/memsets, counted but not "
               "timed during\n             launch storms (flare trace --storm-rate; the tables "
               "below hold the timed ones)\n",
               (unsigned long long)untimed.launches, (unsigned long long)untimed.copies);
    if (summary.process_count == 0)
        printf("\n  No process started a flare session: nothing was recorded. See %s/flare.log.\n",
               session_dir);

    table_context context = {0};
    printf("\nTop kernels by total time\n");
    printf("  %-60s %10s %12s %12s %12s %12s\n", "name", "count", "total", "mean", "p50", "p99");
    if (store_read_kernel_stats(database, (int)top, print_duration_row, &context) != 0)
        status = cli_failure("report", "reading kernels: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (no kernels recorded)\n");

    context.rows = 0;
    printf("\nCopies and memsets\n");
    printf("  %-20s %10s %12s %12s\n", "kind", "count", "bytes", "total");
    if (store_read_copy_stats(database, print_copy_row, &context) != 0)
        status = cli_failure("report", "reading copies: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (none recorded)\n");

    context.rows = 0;
    printf("\nScopes by total time\n");
    printf("  %-60s %10s %12s %12s %12s %12s\n", "name", "count", "total", "mean", "p50", "p99");
    if (store_read_scope_stats(database, (int)top, print_duration_row, &context) != 0)
        status = cli_failure("report", "reading scopes: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (no scopes recorded)\n");

    context.rows = 0;
    printf("\nCounters (final value in this session)\n");
    printf("  %-60s %20s %8s\n", "name", "value", "samples");
    if (store_read_counters(database, print_counter_row, &context) != 0)
        status = cli_failure("report", "reading counters: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (no counters registered)\n");

    context.rows = 0;
    printf("\nGPU and host metrics (samples)\n");
    printf("  %-10s %-24s %8s %16s %16s %16s\n", "where", "metric", "samples", "min", "mean",
           "max");
    if (store_read_metric_stats(database, print_metric_row, &context) != 0)
        status = cli_failure("report", "reading metrics: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (none recorded)\n");

    context.rows = 0;
    printf("\nDeep-profiling rules (pid, then rule)\n");
    printf("  %4s %-20s %6s %6s %6s %6s %6s  %s\n", "rule", "outcome", "fired", "true", "busy",
           "stale", "missing", "rule as written");
    if (store_read_rules(database, print_rule_row, &context) != 0)
        status = cli_failure("report", "reading rules: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (none: no --deep-when rules)\n");

    window_context windows = {.rows = 0, .session_start_ns = summary.start_ns};
    printf("\nDeep-profiling windows (times from the session's start)\n");
    printf("  %4s %-44s %11s %11s %10s %-12s %8s %-8s %-8s %s\n", "id", "opened by", "open",
           "close", "length", "reason", "launches", "engine", "status", "data");
    if (store_read_windows(database, print_window_row, &windows) != 0)
        status = cli_failure("report", "reading windows: %s", store_last_error(database));
    if (windows.rows == 0)
        printf("  (none)\n");

    /* Kernel replay: printed only when the session has replay rows, so a
     * plain trace's report stays as it was. */
    store_replay_summary replay_summary;
    if (store_read_replay_summary(database, &replay_summary) != 0) {
        status = cli_failure("report", "reading kernel replay: %s", store_last_error(database));
    } else if (replay_summary.launches > 0) {
        /* Kernels recorded in spans are not here: they are listed under
         * their span, in the Range replay section below. */
        printf("\nKernel replay (flare replay; per kernel, each chosen launch)\n");
        replay_section replay = {0};
        if (store_read_replay_launches(database, replay_collect_launch, &replay) != 0)
            status = cli_failure("report", "reading kernel replay: %s", store_last_error(database));
        else if (replay.failed)
            status = cli_failure("report", "reading kernel replay: out of memory");
        else if (replay.kernel != NULL)
            replay_print_kernel(&replay);
        replay_section_clear(&replay);
        free(replay.launches);
        char snapshot[32], restored[32], took[32];
        cli_format_bytes(replay.snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(replay.bytes_restored, restored, sizeof(restored));
        cli_format_duration(replay.collection_ns, took, sizeof(took));
        printf("\n  In all: %lld launch(es) of %lld kernel(s) replayed, %lld declined; "
               "%llu passes; %s snapshotted, %s restored; %s in replay\n",
               replay.replayed, replay.kernels, replay.declined, replay.passes, snapshot, restored,
               took);
    }
    /* Range replay: a section only for sessions with spans. */
    if (replay_summary.spans > 0) {
        printf("\nRange replay (flare replay --range; per span, its kernels in launch order)\n");
        span_section spans = {0};
        if (store_read_replay_spans(database, print_span, &spans) != 0)
            status = cli_failure("report", "reading range replay: %s", store_last_error(database));
        else if (spans.failed)
            status = cli_failure("report", "reading range replay: out of memory");
        char snapshot[32], restored[32], took[32];
        cli_format_bytes(replay_summary.span_snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(replay_summary.span_bytes_restored, restored, sizeof(restored));
        cli_format_duration(replay_summary.span_collection_ns, took, sizeof(took));
        printf("\n  In all: %lld span(s) replayed, %lld declined; %lld kernel(s) in them; %llu "
               "passes; %s snapshotted, %s restored; %s collecting\n",
               (long long)replay_summary.spans_replayed, (long long)replay_summary.spans_declined,
               (long long)replay_summary.span_kernels,
               (unsigned long long)replay_summary.span_passes, snapshot, restored, took);
    }

    context.rows = 0;
    printf("\nCapabilities\n");
    printf("  %-22s %-12s %-4s %s\n", "feature", "status", "req", "reason");
    if (store_read_capabilities(database, print_capability_row, &context) != 0)
        status = cli_failure("report", "reading capabilities: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  (no GPU backend started: kernels come from the simulated device, if any)\n");

    context.rows = 0;
    printf("\nDropped data\n");
    if (store_read_drops(database, print_drop_row, &context) != 0)
        status = cli_failure("report", "reading drop counters: %s", store_last_error(database));
    if (context.rows == 0)
        printf("  none: every event was recorded\n");
    store_close(database);
    return status;
}
