/*
 * report_html.h: `flare report --html FILE [DIR]` (report_html.c), one
 * self-contained HTML page of a session: what ran and the capability
 * matrix, a timeline per device (GPU busy, NVML metrics, deep windows and
 * launch storms), top kernels, GPU time per scope, the deep windows' PM
 * samples with the scopes that covered them, the replays rules asked for
 * beside their firing and PM window, replay results as speed-of-light
 * bars, and drops and warnings (docs/cli.md, "HTML
 * report").
 *
 * Also what its section writers (report_html_timeline.c, report_html_pm.c,
 * report_html_replay.c) share: the state of one report as its sections
 * are written. A section writes its data into the page (report_html_page.h)
 * and reports a failure to read the session through html_report_failed;
 * it must never stop the report, never change the session (it is opened
 * read-only), and never put a number in the page that drawing reduced:
 * labels and tables carry the store's exact values.
 */
#ifndef FLARE_CLI_REPORT_HTML_H
#define FLARE_CLI_REPORT_HTML_H

#include <stdint.h>

#include "cli/report_data.h"
#include "cli/report_html_page.h"
#include "cli/session.h"

/*
 * Writes the report of the session directory names (NULL: the default
 * output directory, as `flare report`) to path ("-": standard output),
 * with at most top kernels and scopes. Returns CLI_EXIT_OK, or
 * CLI_EXIT_FAILURE with the reason on stderr ("flare report: ..."): the
 * session cannot be opened or a section cannot be read (then no file is
 * left at path), or the file cannot be written.
 */
int cli_report_html(const char *directory, const char *path, uint32_t top);

/*
 * The option parser's part for --html FILE and --html=FILE: when
 * argv[*index] is one of them, takes FILE into *path (moving *index past
 * it) and returns 0; returns -1 when it is another argument; returns
 * CLI_EXIT_USAGE, the message printed, for a missing or empty FILE, one
 * that looks like an option ("-" alone is standard output), or a second
 * --html.
 */
int cli_report_html_option(int argc, char **argv, int *index, const char **path);

/* Data-quality notes the drops section lists, at most this many. */
#define HTML_REPORT_NOTES_MAX 12

/* One HTML report, as its sections are written. */
typedef struct html_report {
    const cli_session *session;
    store *database;
    html_page *page;
    uint32_t top;
    const char *section; /* the section being written: what a failure names */
    int status;          /* CLI_EXIT_OK, or CLI_EXIT_FAILURE once a section failed */
    char error[512];     /* the section's first failure, written into its data */
    uint64_t origin_ns;  /* the session's start: time 0 of every chart */
    uint64_t end_ns;     /* its end, or the last time it recorded anything */
    cli_report_kernels kernels;
    char kernels_failure[512];
    uint64_t pm_flagged; /* PM samples left out for their flags (pm section) */
    char notes[HTML_REPORT_NOTES_MAX][512];
    int note_count;
} html_report;

/* Prints "flare report: reading SECTION: detail" to stderr, keeps the
 * first such detail of the section for the page, and marks the report
 * failed (exit 1, no file written). */
void html_report_failed(html_report *report, const char *detail);
/* Reports status, a store reader's, when it is a failure. */
void html_report_check(html_report *report, int status);
/* Adds a data-quality note (printf format) for the drops section. */
void html_report_note(html_report *report, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* A session time as seconds from its start. */
double html_report_seconds(const html_report *report, uint64_t time_ns);
/* What a window is called on the page: a rule's window by its rule as
 * written ("kernel_launch_rate > 2000/s for 200ms"), others by their label. */
const char *html_report_window_label(const store_window_row *row);

/* The sections of other files. Each writes its members into the open
 * section's JSON object. */
void html_section_timeline(html_report *report);
void html_section_pm(html_report *report);
void html_section_replay(html_report *report);
void html_section_triggered(html_report *report);
/* Per window that ran PC sampling: stall reasons and hottest instructions. */
void html_section_pc(html_report *report);
/* Per window that ran SASS metrics: metric totals, hottest instructions and
 * source lines (report_html_sass.c). */
void html_section_sass(html_report *report);

#endif /* FLARE_CLI_REPORT_HTML_H */
