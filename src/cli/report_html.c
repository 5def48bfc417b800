/*
 * report_html.c: `flare report --html FILE [DIR]` (report_html.h): opens
 * the session, writes the page's sections in the order of the table
 * html_sections, and puts the file in place only when every section was
 * read. This file holds the command and the sections that are one table
 * each (session and capabilities, top kernels, GPU time per scope, drops
 * and warnings); the timeline, the PM samples and the replay results have
 * files of their own.
 *
 * Like `flare report` it reads a session still being written, or one cut
 * short, and says so (on stderr and in the page). It must never change
 * the session, never leave a partial FILE (a failed section, a write
 * error or a signal removes the temporary file), and never put a name
 * from the session into the page other than as escaped JSON (the page's
 * script makes text of it).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "cli/report_html.h"
#include "flare/flare.h"
#include "store/store_charts.h"
#include "store/store_export.h"

/* Warnings listed at most; the page gives the total. */
#define HTML_WARNINGS_MAX 200

/* ---- the report's state ---- */

void html_report_failed(html_report *report, const char *detail)
{
    if (report->error[0] == '\0')
        snprintf(report->error, sizeof report->error, "%s", detail);
    report->status = cli_failure("report", "reading %s: %s", report->section, detail);
}

void html_report_check(html_report *report, int status)
{
    if (status != 0)
        html_report_failed(report, store_last_error(report->database));
}

void html_report_note(html_report *report, const char *format, ...)
{
    if (report->note_count >= HTML_REPORT_NOTES_MAX)
        return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(report->notes[report->note_count++], sizeof report->notes[0], format, arguments);
    va_end(arguments);
}

const char *html_report_window_label(const store_window_row *row)
{
    if (row->has_cause && row->rule_text != NULL && row->rule_text[0] != '\0')
        return row->rule_text;
    return row->label != NULL ? row->label : "";
}

double html_report_seconds(const html_report *report, uint64_t time_ns)
{
    if (time_ns >= report->origin_ns)
        return (double)(time_ns - report->origin_ns) * 1e-9;
    return -(double)(report->origin_ns - time_ns) * 1e-9;
}

/* ---- a session that did not end ---- */

typedef struct process_scan {
    char host[256];
    int64_t running_pid; /* a process without an end that is alive here; 0: none */
} process_scan;

static int scan_process(const store_export_process_row *row, void *user)
{
    process_scan *scan = user;
    if (row->end_ns != 0 || row->pid <= 0 || scan->running_pid != 0)
        return 0;
    if (kill((pid_t)row->pid, 0) == 0 || errno == EPERM)
        scan->running_pid = row->pid;
    return 0;
}

/*
 * A session without an end is either still being written (a process of
 * it without an end is alive on this host) or was cut short (killed, or
 * crashed). Says which on stderr, as a note like the store's, and in the
 * page; the report goes on, as `flare report` does: what was committed is
 * shown. A pid alive on this host may be another program that reused it;
 * the note says "appears".
 */
static void note_unfinished(html_report *report)
{
    const store_session_summary *summary = &report->session->summary;
    if (summary->end_ns != 0)
        return;
    process_scan scan = {.running_pid = 0};
    if (gethostname(scan.host, sizeof scan.host) != 0)
        scan.host[0] = '\0';
    scan.host[sizeof scan.host - 1] = '\0';
    if (strcmp(scan.host, summary->host) == 0)
        store_export_processes(report->database, scan_process, &scan);
    if (scan.running_pid != 0)
        html_report_note(report,
                         "The session appears to be still being written (its process %lld is "
                         "running): this page shows what was committed when it was made.",
                         (long long)scan.running_pid);
    else
        html_report_note(report, "The session was cut short: it never recorded its end (its "
                                 "command was killed or crashed, or flare could not finish). "
                                 "This page shows everything recorded until then.");
    fprintf(stderr, "flare report: note: %s\n", report->notes[report->note_count - 1]);
}

/* ---- session and capabilities ---- */

static int write_capability(const store_capability_row *row, void *user)
{
    html_page *page = ((html_report *)user)->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_string(page, "feature", row->feature);
    html_json_bool(page, "requested", row->requested);
    html_json_string(page, "status", row->status);
    html_json_string(page, "reason", row->reason);
    html_json_end(page);
    return 0;
}

static void write_start_time(html_page *page, const store_session_summary *summary)
{
    if (summary->start_unix_ns <= 0) {
        html_json_null(page, "started");
        return;
    }
    time_t seconds = (time_t)(summary->start_unix_ns / 1000000000ll);
    struct tm utc;
    gmtime_r(&seconds, &utc);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    html_json_string(page, "started", when);
}

static void section_session(html_report *report)
{
    const store_session_summary *summary = &report->session->summary;
    html_page *page = report->page;
    html_json_string(page, "directory", report->session->directory);
    html_json_string(page, "command", summary->command);
    html_json_string(page, "host", summary->host);
    html_json_string(page, "flare_version", summary->flare_version);
    html_json_string(page, "report_flare_version", flare_version());
    html_json_i64(page, "schema_version", summary->schema_version);
    write_start_time(page, summary);
    html_json_bool(page, "ended", summary->end_ns != 0);
    if (summary->end_ns > summary->start_ns)
        html_json_u64(page, "duration_ns", summary->end_ns - summary->start_ns);
    else
        html_json_null(page, "duration_ns");
    html_json_u64(page, "span_ns", report->end_ns - report->origin_ns);
    if (summary->has_exit_status)
        html_json_i64(page, "exit_status", summary->exit_status);
    else
        html_json_null(page, "exit_status");
    html_json_i64(page, "processes", summary->process_count);
    html_json_i64(page, "kernels", summary->kernel_count);
    html_json_i64(page, "copies", summary->copy_count);
    html_json_i64(page, "scopes", summary->scope_count);
    html_json_u64(page, "kernel_gpu_ns", report->kernels.all_ns);
    cli_report_untimed_work untimed;
    html_report_check(report, cli_report_untimed(report->database, &untimed));
    html_json_u64(page, "untimed_launches", untimed.launches);
    html_json_u64(page, "untimed_copies", untimed.copies);
    if (untimed.launches + untimed.copies > 0)
        html_report_note(report,
                         "%llu kernel launches and %llu copies/memsets ran during launch storms "
                         "and were counted but not timed: the kernel tables and charts hold the "
                         "timed ones only.",
                         (unsigned long long)untimed.launches, (unsigned long long)untimed.copies);
    if (summary->process_count == 0)
        html_report_note(report, "No process started a flare session: nothing was recorded. See "
                                 "flare.log in the session directory.");
    html_json_array(page, "capabilities");
    html_report_check(report, store_read_capabilities(report->database, write_capability, report));
    html_json_end(page);
}

/* ---- top kernels ---- */

static void section_kernels(html_report *report)
{
    html_page *page = report->page;
    if (report->kernels_failure[0] != '\0')
        html_report_failed(report, report->kernels_failure);
    html_json_u64(page, "all_ns", report->kernels.all_ns);
    html_json_u64(page, "top", report->top);
    html_json_array(page, "rows");
    for (size_t i = 0; i < report->kernels.count; i++) {
        const store_duration_stats *stats = &report->kernels.rows[i];
        html_json_object(page, NULL);
        html_json_string(page, "name", stats->name);
        html_json_i64(page, "count", stats->count);
        html_json_u64(page, "total_ns", stats->total_ns);
        html_json_double(page, "pct",
                         cli_report_share_pct(stats->total_ns, report->kernels.all_ns));
        html_json_u64(page, "mean_ns", stats->mean_ns);
        html_json_u64(page, "p50_ns", stats->p50_ns);
        html_json_u64(page, "p99_ns", stats->p99_ns);
        html_json_u64(page, "max_ns", stats->max_ns);
        html_json_end(page);
    }
    html_json_end(page);
}

/* ---- GPU time per scope ---- */

/* Without the kernels' index, the view scans every kernel for every
 * scope: past this many pairs the section says how to build it instead. */
#define HTML_SCOPE_SCAN_MAX 20000000.0

static int write_scope_time(const store_chart_scope_time *row, void *user)
{
    html_page *page = ((html_report *)user)->page;
    html_json_object(page, NULL);
    html_json_string(page, "name", row->name);
    html_json_i64(page, "count", row->count);
    html_json_u64(page, "duration_ns", row->duration_ns);
    html_json_u64(page, "gpu_ns", row->gpu_ns);
    html_json_u64(page, "kernels", row->kernels);
    html_json_end(page);
    return 0;
}

static void section_scopes(html_report *report)
{
    html_page *page = report->page;
    const store_session_summary *summary = &report->session->summary;
    int has_view = 0, indexed = 0;
    html_report_check(report, store_chart_scope_view_state(report->database, &has_view, &indexed));
    html_json_u64(page, "kernel_gpu_ns", report->kernels.all_ns);
    html_json_u64(page, "top", report->top);
    const char *missing = NULL;
    if (!has_view)
        missing = "this session's database predates the view v_scope_gpu_time (schema 7): run "
                  "'flare index DIR' to add it";
    else if (!indexed &&
             (double)summary->kernel_count * (double)summary->scope_count > HTML_SCOPE_SCAN_MAX)
        missing = "this session has no kernel index (it did not end normally): run 'flare index "
                  "DIR' to build it, then make the report again";
    html_json_string(page, "unavailable", missing);
    html_json_array(page, "rows");
    if (missing == NULL)
        html_report_check(report, store_chart_scope_gpu_time(report->database, (int)report->top,
                                                             write_scope_time, report));
    html_json_end(page);
    if (missing != NULL)
        html_report_note(report, "GPU time per scope is not shown: %s.", missing);
}

/* ---- drops, warnings and notes ---- */

static int write_drop(const store_drop_row *row, void *user)
{
    html_page *page = ((html_report *)user)->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_string(page, "source", row->source);
    html_json_string(page, "detail", row->detail);
    html_json_u64(page, "count", row->count);
    html_json_end(page);
    return 0;
}

typedef struct warning_list {
    html_report *report;
    int listed;
} warning_list;

static int write_warning(const store_chart_log_row *row, void *user)
{
    warning_list *list = user;
    if (list->listed++ >= HTML_WARNINGS_MAX)
        return 1;
    html_page *page = list->report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_double(page, "time_s", html_report_seconds(list->report, row->time_ns));
    html_json_string(page, "level", row->level);
    html_json_string(page, "message", row->message);
    html_json_end(page);
    return 0;
}

static void section_drops(html_report *report)
{
    html_page *page = report->page;
    html_json_array(page, "drops");
    html_report_check(report, store_read_drops(report->database, write_drop, report));
    html_json_end(page);
    int64_t total = 0;
    warning_list list = {report, 0};
    html_json_array(page, "warnings");
    html_report_check(report, store_chart_warnings(report->database, &total, write_warning, &list));
    html_json_end(page);
    html_json_i64(page, "warnings_total", total);
    if (report->pm_flagged > 0)
        html_report_note(report,
                         "%llu PM sample values were flagged (overflow, a hole before them, or an "
                         "unverified time) and are left out of the PM charts and their means.",
                         (unsigned long long)report->pm_flagged);
    const char *notice = store_read_notice(report->database);
    if (notice != NULL)
        html_report_note(report, "%s", notice);
    html_json_array(page, "notes");
    for (int i = 0; i < report->note_count; i++)
        html_json_string(page, NULL, report->notes[i]);
    html_json_end(page);
}

/* ---- the page ---- */

typedef struct html_section {
    const char *id;
    const char *title;
    void (*write)(html_report *report);
} html_section;

/* In page order; the drops section is last: it lists the notes the
 * others made. */
static const html_section html_sections[] = {
    {"session", "Session", section_session},
    {"timeline", "Timeline", html_section_timeline},
    {"kernels", "Top kernels by GPU time", section_kernels},
    {"scopes", "GPU time per scope and NVTX range", section_scopes},
    {"pm", "Deep windows: PM samples", html_section_pm},
    {"pc", "Deep windows: PC samples (where warps waited)", html_section_pc},
    {"sass", "Deep windows: SASS metrics (what each instruction executed)", html_section_sass},
    {"triggered", "Triggered replays: rule, speed of light, PM window", html_section_triggered},
    {"replay", "Replay: speed of light", html_section_replay},
    {"drops", "Drops and warnings", section_drops},
};

static void write_section(html_report *report, const html_section *section)
{
    report->section = section->id;
    report->error[0] = '\0';
    html_page_section_begin(report->page, section->id, section->title);
    section->write(report);
    html_page_section_end(report->page, report->error[0] != '\0' ? report->error : NULL);
}

/* The time the charts end at: the session's end, or for one that did
 * not end, the last time it recorded anything. */
static void find_extent(html_report *report)
{
    const store_session_summary *summary = &report->session->summary;
    report->origin_ns = summary->start_ns;
    report->end_ns = summary->end_ns;
    if (report->end_ns <= report->origin_ns) {
        uint64_t last_ns = 0;
        report->section = "session";
        html_report_check(report, store_chart_last_ns(report->database, &last_ns));
        report->end_ns = last_ns;
    }
    if (report->end_ns <= report->origin_ns)
        report->end_ns = report->origin_ns + 1;
}

/* Writes every section of the open session into page; returns the
 * report's status. */
static int write_report(const cli_session *session, html_page *page, uint32_t top)
{
    html_report *report = calloc(1, sizeof *report);
    if (report == NULL)
        return cli_failure("report", "out of memory");
    *report = (html_report){
        .session = session,
        .database = session->database,
        .page = page,
        .top = top,
        .status = CLI_EXIT_OK,
    };
    const char *failure = cli_report_kernels_read(report->database, top, &report->kernels);
    if (failure != NULL)
        snprintf(report->kernels_failure, sizeof report->kernels_failure, "%s", failure);
    note_unfinished(report);
    find_extent(report);
    for (size_t i = 0; i < sizeof html_sections / sizeof html_sections[0]; i++)
        write_section(report, &html_sections[i]);
    int status = report->status;
    cli_report_kernels_free(&report->kernels);
    free(report);
    return status;
}

int cli_report_html(const char *directory, const char *path, uint32_t top)
{
    char error[3 * 1024 + 64];
    cli_session session;
    if (cli_session_open(&session, "report", directory, 1, error, sizeof error) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    html_page *page = NULL;
    if (html_page_open(path, &page, error, sizeof error) != 0) {
        cli_session_close(&session);
        return cli_failure("report", "%s", error);
    }
    int status = write_report(&session, page, top);
    cli_session_close(&session);
    if (html_page_close(page, status == CLI_EXIT_OK, error, sizeof error) != 0)
        return cli_failure("report", "%s", error);
    if (status != CLI_EXIT_OK && path != NULL && strcmp(path, "-") != 0)
        fprintf(stderr, "flare report: %s was not written: the report is incomplete\n", path);
    return status;
}

int cli_report_html_option(int argc, char **argv, int *index, const char **path)
{
    const char *argument = argv[*index];
    const char *value;
    if (strncmp(argument, "--html=", 7) == 0) {
        value = argument + 7;
    } else if (strcmp(argument, "--html") == 0) {
        if (*index + 1 >= argc)
            return cli_usage_error("report", "option '--html' needs a file name (or - for "
                                             "standard output)");
        value = argv[++*index];
    } else {
        return -1;
    }
    if (value[0] == '\0')
        return cli_usage_error("report", "option '--html' needs a file name (or - for standard "
                                         "output)");
    if (value[0] == '-' && value[1] != '\0')
        return cli_usage_error("report",
                               "option '--html' needs a file name, not '%s' (write "
                               "./%s for a file named so)",
                               value, value);
    if (*path != NULL)
        return cli_usage_error("report", "option '--html' given twice");
    *path = value;
    return 0;
}
