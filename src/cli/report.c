/*
 * report.c: `flare report [DIR]`, the summary a person wants first.
 *
 * Reads a session database and prints its sections, in the order of the
 * table report_sections: what ran, top kernels by total time (count, share
 * of all kernels' GPU time, mean, p50, p99), copies and memsets, scopes,
 * application counters (final value per counter), metrics, deep-profiling
 * rules and windows, kernel replay results per kernel and range replay
 * results per span (each only when there are any; report_replay.c),
 * capabilities, and every drop counter that is not zero. Most sections are
 * one table: a title, a line of column headings, a row per row the store
 * reader returns, and a line saying there were none.
 *
 * --format json and csv write the same sections as data instead
 * (report_data.c); this file parses the options and picks the writer.
 *
 * It only reads: a missing, empty or corrupt database is a clear error
 * (exit 1), never a crash, and a section that cannot be read is named on
 * stderr while the other sections are still printed.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "cli/report_data.h"
#include "cli/report_emit.h"
#include "cli/report_html.h"
#include "cli/report_ranks.h"
#include "cli/report_recorder.h"
#include "cli/report_pc.h"
#include "cli/report_sass.h"
#include "cli/report_triggered.h"
#include "cli/session.h"
#include "core/config.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_pm.h"

static const char report_help[] =
    "usage: flare report [--top N] [--wide] [--format text|json|csv] [DIR]\n"
    "       flare report --html FILE [--top N] [DIR]\n"
    "\n"
    "Summarises a saved session: the command, top kernels by total GPU time\n"
    "(count, total, share of all kernels' GPU time, mean, p50, p99), copies and\n"
    "memsets, CUDA graphs, scopes, application counters (final value per\n"
    "counter), GPU metrics, deep-profiling rules and windows, the replays rules\n"
    "asked for (action replay/range: the reading, the kernel chosen and why, its\n"
    "speed of light), the windows' PM samples by range, kernel replay results\n"
    "('flare replay': per kernel, each replayed launch with its metric values,\n"
    "and each declined launch with its reason), range replay results ('flare\n"
    "replay --range': per span, its kernels with their metric values, or the\n"
    "reason it was declined), the capability matrix, and every non-zero drop\n"
    "counter (events the profiler had to discard). json and csv hold the same\n"
    "sections as raw numbers (nanoseconds, bytes, counts) with stable keys.\n"
    "\n"
    "The text's replay sections name metrics as people read them, in their\n"
    "units (\"DRAM read  5.3 MB\"), the most telling first, with kernel names\n"
    "shortened in the middle, in tables that fit $COLUMNS columns (100 when it\n"
    "is not set); --wide prints them as stored.\n"
    "\n"
    "DIR is a session directory, or a directory of sessions, in which case the\n"
    "newest (the one written to last) is reported. Default: ./flare-out\n"
    "($FLARE_OUTPUT_DIR if set).\n"
    "\n"
    "Options:\n"
    "  --top N      kernels, scopes and PM ranges (per window) to list,\n"
    "               1..100000 (default 10)\n"
    "  --wide       replay sections in full: raw metric names and values,\n"
    "               whole kernel names, every metric (json and csv are always\n"
    "               raw and whole)\n"
    "  -f, --format FORMAT\n"
    "               text (default), json (one object) or csv (one line per\n"
    "               field: section,row,key,value); the keys of json and csv\n"
    "               are listed in docs/cli.md\n"
    "  --html FILE  write one self-contained HTML page instead (charts of\n"
    "               the timeline, top kernels, scopes, PM samples and replay\n"
    "               results; it opens offline); '-' for standard output. FILE\n"
    "               appears whole or not at all (docs/cli.md, HTML report)\n"
    "  -h, --help   this help\n";

/* ---- rows ---- */

/* Every row printer's user is the report's cli_report_run: it counts the
 * rows it prints there. */

static int print_duration_row(const store_duration_stats *stats, void *user)
{
    cli_report_run *run = user;
    char total[32], mean[32], p50[32], p99[32];
    cli_format_duration(stats->total_ns, total, sizeof(total));
    cli_format_duration(stats->mean_ns, mean, sizeof(mean));
    cli_format_duration(stats->p50_ns, p50, sizeof(p50));
    cli_format_duration(stats->p99_ns, p99, sizeof(p99));
    printf("  %-60.60s %10lld %12s %12s %12s %12s\n", stats->name, (long long)stats->count, total,
           mean, p50, p99);
    run->rows++;
    return 0;
}

static int print_copy_row(const store_copy_stats *stats, void *user)
{
    cli_report_run *run = user;
    char bytes[32], total[32];
    cli_format_bytes(stats->bytes, bytes, sizeof(bytes));
    cli_format_duration(stats->total_ns, total, sizeof(total));
    printf("  %-20s %10lld %12s %12s",
           stats->is_memset ? "memset"
                            : cli_copy_kind_name(stats->copy_kind, "copy (unknown kind)"),
           (long long)stats->count, bytes, total);
    if (stats->failed > 0)
        printf("   %lld FAILED", (long long)stats->failed);
    printf("\n");
    run->rows++;
    return 0;
}

static int print_capability_row(const store_capability_row *row, void *user)
{
    cli_report_run *run = user;
    printf("  %-22s %-12s %-4s %s   (pid %lld)\n", row->feature, row->status,
           row->requested ? "yes" : "no", row->reason, (long long)row->pid);
    run->rows++;
    return 0;
}

static int print_metric_row(const store_metric_stats *stats, void *user)
{
    cli_report_run *run = user;
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
    run->rows++;
    return 0;
}

static int print_counter_row(const store_counter_row *row, void *user)
{
    cli_report_run *run = user;
    printf("  %-60.96s %20llu %8lld   (pid %lld)\n", row->name, (unsigned long long)row->value,
           (long long)row->samples, (long long)row->pid);
    run->rows++;
    return 0;
}

static int print_drop_row(const store_drop_row *row, void *user)
{
    cli_report_run *run = user;
    printf("  %-14s %-32s %12llu   (pid %lld)\n", row->source, row->detail,
           (unsigned long long)row->count, (long long)row->pid);
    run->rows++;
    return 0;
}

/* One deep-profiling rule's outcome (docs/rules.md): never true, fired,
 * exhausted, refused with its reason, stale source, metric missing. */
static int print_rule_row(const store_rule_row *row, void *user)
{
    cli_report_run *run = user;
    char fired[48];
    snprintf(fired, sizeof(fired), "%llu", (unsigned long long)row->windows_fired);
    printf("  %4u %-20s %6s %6llu %6llu %6llu %6llu  %s\n", row->rule_id,
           row->status != NULL ? row->status : "", fired, (unsigned long long)row->times_true,
           (unsigned long long)row->busy_refusals, (unsigned long long)row->stale_readings,
           (unsigned long long)row->missing_readings, row->text != NULL ? row->text : "");
    if (row->reason != NULL && row->reason[0] != '\0')
        printf("       %s\n", row->reason);
    run->rows++;
    return 0;
}

/* A time of the session as "+1.2 ms" from its start into text, or leaves
 * text as it is (its caller's "never" or "-") when time_ns is 0 or before
 * the start. */
static void format_session_time(uint64_t time_ns, uint64_t start_ns, char *text, size_t size)
{
    if (time_ns != 0 && time_ns >= start_ns) {
        cli_format_duration(time_ns - start_ns, text + 1, size - 1);
        text[0] = '+';
    }
}

/* One deep-profiling window (docs/windows.md): who opened it, when relative
 * to the session's start, how long, why it closed, and whether the value
 * that fired it came from a truncated (partial) window. */
static int print_window_row(const store_window_row *row, void *user)
{
    cli_report_run *run = user;
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
    format_session_time(row->opened_ns, run->summary->start_ns, opened, sizeof(opened));
    format_session_time(row->closed_ns, run->summary->start_ns, closed, sizeof(closed));
    if (row->opened_ns != 0 && row->closed_ns >= row->opened_ns)
        cli_format_duration(row->closed_ns - row->opened_ns, length, sizeof(length));
    printf("  %4llu %-44.44s %11s %11s %10s %-12s %8llu %-8s %-13s %8llu %s\n",
           (unsigned long long)row->id, opened_by, opened, closed, length,
           row->close_reason != NULL ? row->close_reason : "", (unsigned long long)row->launches,
           row->engine != NULL ? row->engine : "",
           row->engine_status != NULL ? row->engine_status : "",
           (unsigned long long)row->engine_samples, row->observed_partial ? "partial" : "-");
    if (row->engine_reason != NULL && row->engine_reason[0] != '\0')
        printf("       engine: %s\n", row->engine_reason);
    run->rows++;
    return 0;
}

/* ---- sections ---- */

static int sum_untimed_work(const store_drop_row *row, void *user)
{
    cli_report_untimed_work *untimed = user;
    if (strcmp(row->source, "storm_guard") != 0)
        return 0;
    if (strncmp(row->detail, "kernel launches", 15) == 0)
        untimed->launches += row->count;
    else if (strncmp(row->detail, "copies", 6) == 0)
        untimed->copies += row->count;
    return 0;
}

int cli_report_untimed(store *database, cli_report_untimed_work *untimed)
{
    *untimed = (cli_report_untimed_work){0, 0};
    int status = store_read_drops(database, sum_untimed_work, untimed);
    if (status != 0)
        *untimed = (cli_report_untimed_work){0, 0};
    return status;
}

/* "  started    <UTC time>, ran <length>", when the start is known. */
static void print_started(const store_session_summary *summary)
{
    if (summary->start_unix_ns <= 0)
        return;
    time_t seconds = (time_t)(summary->start_unix_ns / 1000000000ll);
    struct tm utc;
    gmtime_r(&seconds, &utc);
    char when[64];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc);
    printf("  started    %s", when);
    if (summary->end_ns > summary->start_ns) {
        char length[32];
        cli_format_duration(summary->end_ns - summary->start_ns, length, sizeof(length));
        printf(", ran %s", length);
    } else {
        printf(", did not end cleanly (killed or still running)");
    }
    printf("\n");
}

/* What ran, when, and what was recorded. */
static int section_session(cli_report_run *run)
{
    const store_session_summary *summary = run->summary;
    printf("flare session %s\n", run->session_dir);
    printf("  command    %s\n", summary->command[0] ? summary->command : "(unknown)");
    print_started(summary);
    if (summary->has_exit_status)
        printf("  exit       %d\n", summary->exit_status);
    printf("  recorded   %lld process(es), %lld kernels, %lld copies/memsets, %lld scopes\n",
           (long long)summary->process_count, (long long)summary->kernel_count,
           (long long)summary->copy_count, (long long)summary->scope_count);
    /* Said up front: the kernel tables below count only timed kernels. */
    cli_report_untimed_work untimed;
    if (cli_report_untimed(run->database, &untimed) == 0 && untimed.launches + untimed.copies > 0)
        printf("  untimed    %llu more kernel launches and %llu copies/memsets, counted but not "
               "timed during\n             launch storms (flare trace --storm-rate; the tables "
               "below hold the timed ones)\n",
               (unsigned long long)untimed.launches, (unsigned long long)untimed.copies);
    cli_report_ranks_note(run->database);    /* which process was which rank */
    cli_report_recorder_note(run->database); /* what --keep / --max-size evicted */
    if (summary->process_count == 0)
        printf("\n  No process started a flare session: nothing was recorded. See %s/flare.log.\n",
               run->session_dir);
    return 0;
}

/* The tables: each prints its column headings, then reads its rows into
 * its row printer, and returns the reader's status. */

static void print_duration_heading(void)
{
    printf("  %-60s %10s %12s %12s %12s %12s\n", "name", "count", "total", "mean", "p50", "p99");
}

/* The kernels, with each one's share of every kernel's GPU time (listed
 * or not; report_data.c reads both). */
static int table_kernels(cli_report_run *run)
{
    printf("  %-60s %10s %12s %6s %12s %12s %12s\n", "name", "count", "total", "% GPU", "mean",
           "p50", "p99");
    cli_report_kernels kernels;
    const char *failure = cli_report_kernels_read(run->database, run->top, &kernels);
    if (failure != NULL)
        cli_report_failed(run, failure);
    for (size_t i = 0; i < kernels.count; i++) {
        const store_duration_stats *stats = &kernels.rows[i];
        char total[32], share[16] = "-", mean[32], p50[32], p99[32];
        cli_format_duration(stats->total_ns, total, sizeof(total));
        if (kernels.all_ns > 0)
            snprintf(share, sizeof(share), "%.1f",
                     cli_report_share_pct(stats->total_ns, kernels.all_ns));
        cli_format_duration(stats->mean_ns, mean, sizeof(mean));
        cli_format_duration(stats->p50_ns, p50, sizeof(p50));
        cli_format_duration(stats->p99_ns, p99, sizeof(p99));
        printf("  %-60.60s %10lld %12s %6s %12s %12s %12s\n", stats->name, (long long)stats->count,
               total, share, mean, p50, p99);
        run->rows++;
    }
    cli_report_kernels_free(&kernels);
    return 0;
}

static int table_copies(cli_report_run *run)
{
    printf("  %-20s %10s %12s %12s\n", "kind", "count", "bytes", "total");
    return store_read_copy_stats(run->database, print_copy_row, run);
}

static int table_scopes(cli_report_run *run)
{
    print_duration_heading();
    return store_read_scope_stats(run->database, (int)run->top, print_duration_row, run);
}

static int table_counters(cli_report_run *run)
{
    printf("  %-60s %20s %8s\n", "name", "value", "samples");
    return store_read_counters(run->database, print_counter_row, run);
}

static int table_metrics(cli_report_run *run)
{
    printf("  %-10s %-24s %8s %16s %16s %16s\n", "where", "metric", "samples", "min", "mean",
           "max");
    return store_read_metric_stats(run->database, print_metric_row, run);
}

static int table_rules(cli_report_run *run)
{
    printf("  %4s %-20s %6s %6s %6s %6s %6s  %s\n", "rule", "outcome", "fired", "true", "busy",
           "stale", "missing", "rule as written");
    return store_read_rules(run->database, print_rule_row, run);
}

static int table_windows(cli_report_run *run)
{
    printf("  %4s %-44s %11s %11s %10s %-12s %8s %-8s %-13s %8s %s\n", "id", "opened by", "open",
           "close", "length", "closed by", "launches", "engine", "engine status", "samples",
           "data");
    return store_read_windows(run->database, print_window_row, run);
}

/* CUDA graphs (docs/cli.md "CUDA graphs"): a line per graph, then its
 * kernels by name. Titled only when the session ran graphs. */
typedef struct graph_print {
    cli_report_run *run;
    int64_t pid;
    uint32_t graph_id;
    int any;
} graph_print;

static int print_graph_row(const store_graph_row *row, void *user)
{
    graph_print *print = user;
    if (!print->any) {
        printf("\nCUDA graphs (each graph's work, by GPU time; then its kernels)\n");
        printf("  %6s %8s %8s %8s %8s %12s  %s\n", "graph", "launches", "kernels", "nodes",
               "copies", "GPU time", "launched from");
        print->any = 1;
    }
    char time[32];
    if (row->pid != print->pid || row->graph_id != print->graph_id) {
        print->pid = row->pid;
        print->graph_id = row->graph_id;
        cli_format_duration(row->gpu_ns, time, sizeof(time));
        printf("  %6u %8llu %8llu %8llu %8llu %12s  %s   (pid %lld)\n", row->graph_id,
               (unsigned long long)row->launches, (unsigned long long)row->kernels,
               (unsigned long long)row->kernel_nodes, (unsigned long long)row->copies, time,
               row->launched_from[0] != '\0' ? row->launched_from : "(launch not recorded)",
               (long long)row->pid);
        print->run->rows++;
    }
    cli_format_duration(row->name_gpu_ns, time, sizeof(time));
    printf("         %8llu x %-60.96s %12s\n", (unsigned long long)row->name_count,
           row->kernel_name, time);
    return 0;
}

static int table_graphs(cli_report_run *run)
{
    graph_print print = {.run = run, .pid = -1};
    return store_read_graphs(run->database, print_graph_row, &print);
}

/* PM samples of the deep windows by range and metric (docs/pm-sampling.md):
 * the top N ranges of each window. A flagged sample is never in a sum or a
 * mean, only in the flagged count. Titled only when there are samples. */
typedef struct pm_print {
    cli_report_run *run;
    int64_t pid;
    uint64_t window_id;
    char range[FLARE_NAME_MAX + 16];
    uint32_t ranges; /* ranges printed of this window */
    int any;
} pm_print;

static int print_pm_row(const store_pm_summary_row *row, void *user)
{
    pm_print *print = user;
    if (!print->any) {
        printf("\nPM samples by range (deep windows; flagged samples are counted, never summed)\n");
        printf("  %6s %-32s %-40s %8s %14s %14s %8s\n", "window", "range", "metric", "samples",
               "mean", "sum", "flagged");
        print->any = 1;
    }
    if (row->pid != print->pid || row->window_id != print->window_id) {
        print->pid = row->pid;
        print->window_id = row->window_id;
        print->ranges = 0;
        print->range[0] = '\0';
    }
    if (strcmp(row->range, print->range) != 0) {
        snprintf(print->range, sizeof(print->range), "%s", row->range);
        print->ranges++;
    }
    if (print->ranges > print->run->top)
        return 0;
    char mean[32] = "-", sum[32] = "-";
    if (row->has_value) {
        snprintf(mean, sizeof(mean), "%.6g", row->mean);
        snprintf(sum, sizeof(sum), "%.6g", row->sum);
    }
    printf("  %6llu %-32.32s %-40.40s %8llu %14s %14s %8llu\n", (unsigned long long)row->window_id,
           row->range, row->metric, (unsigned long long)row->samples, mean, sum,
           (unsigned long long)row->flagged);
    print->run->rows++;
    return 0;
}

static int table_pm_samples(cli_report_run *run)
{
    pm_print print = {.run = run, .pid = -1, .window_id = UINT64_MAX};
    return store_read_pm_summary(run->database, print_pm_row, &print);
}

static int table_capabilities(cli_report_run *run)
{
    printf("  %-22s %-12s %-4s %s\n", "feature", "status", "req", "reason");
    return store_read_capabilities(run->database, print_capability_row, run);
}

static int table_drops(cli_report_run *run)
{
    return store_read_drops(run->database, print_drop_row, run);
}

/*
 * One section of the report. name is what a failure to read it is called
 * ("flare report: reading NAME: ..."); title, when set, is printed first,
 * after a blank line; print prints the rest and returns a store reader's
 * status (non-zero: the read failed, and the failure is reported with the
 * store's error; sections that report their own return 0); none, when set,
 * is printed when print printed no row (after a failure too).
 */
typedef struct report_section {
    const char *name;
    const char *title;
    int (*print)(cli_report_run *run);
    const char *none;
} report_section;

static const report_section report_sections[] = {
    {"session", NULL, section_session, NULL},
    {"kernels", "Top kernels by total time", table_kernels, "  (no kernels recorded)\n"},
    {"copies", "Copies and memsets", table_copies, "  (none recorded)\n"},
    /* Titled by itself, only when the session ran CUDA graphs. */
    {"graphs", NULL, table_graphs, NULL},
    {"scopes", "Scopes by total time", table_scopes, "  (no scopes recorded)\n"},
    {"counters", "Counters (final value in this session)", table_counters,
     "  (no counters registered)\n"},
    {"metrics", "GPU and host metrics (samples)", table_metrics, "  (none recorded)\n"},
    {"rules", "Deep-profiling rules (pid, then rule)", table_rules,
     "  (none: no --deep-when rules)\n"},
    {"windows", "Deep-profiling windows (times from the session's start)", table_windows,
     "  (none)\n"},
    /* Titled by itself, only when a rule asked for a replay. */
    {"triggered replays", NULL, cli_report_triggered, NULL},
    /* Titled by itself, only when a window recorded PM samples. */
    {"pm samples", NULL, table_pm_samples, NULL},
    /* Titled by itself, only when a window ran PC sampling. */
    {"pc samples", NULL, cli_report_pc, NULL},
    /* Titled by itself, only when a window ran SASS metrics. */
    {"sass metrics", NULL, cli_report_sass, NULL},
    /* Titled only when the session has replay rows, so a plain trace's
     * report stays as it was; range replay uses what kernel replay read. */
    {"kernel replay", NULL, cli_report_kernel_replay, NULL},
    {"range replay", NULL, cli_report_range_replay, NULL},
    {"capabilities", "Capabilities", table_capabilities,
     "  (no GPU backend started: kernels come from the simulated device, if any)\n"},
    {"drop counters", "Dropped data", table_drops, "  none: every event was recorded\n"},
};

void cli_report_failed(cli_report_run *run, const char *detail)
{
    run->status = cli_failure("report", "reading %s: %s", run->section, detail);
}

static void report_print_section(cli_report_run *run, const report_section *section)
{
    run->section = section->name;
    run->rows = 0;
    if (section->title != NULL)
        printf("\n%s\n", section->title);
    if (section->print(run) != 0)
        cli_report_failed(run, store_last_error(run->database));
    if (section->none != NULL && run->rows == 0)
        fputs(section->none, stdout);
}

/* ---- the command ---- */

/* The command line, parsed. */
typedef struct report_options {
    const char *directory;            /* NULL: the default output directory */
    uint32_t top;                     /* --top */
    const report_emit_format *format; /* --format json or csv; NULL: text */
    int wide;                         /* --wide: replay sections as stored */
    const char *html;                 /* --html FILE: the page instead of text */
} report_options;

/* --format's value: NULL (and *known set) for text, json and csv's emitter,
 * or NULL with *known clear for any other word. */
static const report_emit_format *report_format(const char *name, int *known)
{
    *known = strcmp(name, "text") == 0;
    if (*known)
        return NULL;
    const report_emit_format *format = report_emit_find(name);
    *known = format != NULL;
    return format;
}

/*
 * Parses argv into *options. Returns -1 when the report should go ahead,
 * or the exit code to return now: CLI_EXIT_OK after --help, CLI_EXIT_USAGE
 * after a usage error (printed).
 */
static int report_parse(int argc, char **argv, report_options *options)
{
    *options = (report_options){.top = 10};
    int html;
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
            if (core_parse_u32(value, 1, 100000, &options->top) != 0)
                return cli_usage_error("report", "'--top %s': expected a whole number in 1..100000",
                                       value);
        } else if ((html = cli_report_html_option(argc, argv, &index, &options->html)) >= 0) {
            if (html != 0)
                return html;
        } else if (strcmp(argument, "--wide") == 0) {
            options->wide = 1;
        } else if (strcmp(argument, "-f") == 0 || strcmp(argument, "--format") == 0 ||
                   strncmp(argument, "--format=", 9) == 0) {
            const char *value = argument[1] == 'f' ? NULL : strchr(argument, '=');
            if (value != NULL)
                value++;
            else if (index + 1 < argc)
                value = argv[++index];
            else
                return cli_usage_error("report", "option '%s' needs a format (text, json, csv)",
                                       argument);
            int known;
            options->format = report_format(value, &known);
            if (!known)
                return cli_usage_error("report", "unknown format '%s' (formats: text, json, csv)",
                                       value);
        } else if (argument[0] == '-' && argument[1] != '\0') {
            return cli_usage_error("report", "unknown option '%s'", argument);
        } else if (options->directory != NULL) {
            return cli_usage_error("report", "unexpected argument '%s' (one DIR at most)",
                                   argument);
        } else {
            options->directory = argument;
        }
    }
    if (options->html != NULL && options->format != NULL)
        return cli_usage_error("report", "--html and --format exclude each other");
    return -1;
}

int cli_report(int argc, char **argv)
{
    report_options options;
    int parsed = report_parse(argc, argv, &options);
    if (parsed >= 0)
        return parsed;
    if (options.html != NULL)
        return cli_report_html(options.directory, options.html, options.top);

    char error[1024];
    cli_session session;
    if (cli_session_open(&session, "report", options.directory, 0, error, sizeof(error)) !=
        CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    if (options.format != NULL) {
        int status = cli_report_data(&session, options.top, options.format);
        cli_session_close(&session);
        return status;
    }
    cli_report_run run = {
        .database = session.database,
        .session_dir = session.directory,
        .summary = &session.summary,
        .top = options.top,
        .status = CLI_EXIT_OK,
        .wide = options.wide,
    };
    for (size_t i = 0; i < sizeof(report_sections) / sizeof(report_sections[0]); i++)
        report_print_section(&run, &report_sections[i]);
    cli_session_close(&session);
    return run.status;
}
