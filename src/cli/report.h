/*
 * report.h: what `flare report` (report.c) shares with its replay sections
 * (report_replay.c): the state of one report as its table of sections is
 * printed, and the two sections that are more than a table.
 *
 * A section prints to standard output and reports a failure to read the
 * session through cli_report_failed, which names the section; it must
 * never stop the report (the next section is printed all the same), never
 * change the session (it is opened read-only), and never print a partial
 * table when memory runs out (it says so instead).
 */
#ifndef FLARE_CLI_REPORT_H
#define FLARE_CLI_REPORT_H

#include <stdint.h>

#include "store/store.h"
#include "store/store_replay.h"

/* One report, as its sections are printed. */
typedef struct cli_report_run {
    store *database;
    const char *session_dir;
    const store_session_summary *summary;
    uint32_t top;        /* --top: kernels and scopes listed */
    const char *section; /* the section being printed: what a failure names */
    int rows;            /* rows the section has printed */
    int status;          /* CLI_EXIT_OK, or CLI_EXIT_FAILURE once a section failed */
    /* Read by the kernel replay section (zeroed, or partly filled, when the
     * read failed); the range replay section, printed after it, uses it. */
    store_replay_summary replay;
    /* --wide: the replay sections print raw metric names and values, whole
     * kernel names and every metric, as the database has them; otherwise
     * human names and units (metric_labels.h) in tables that fit the width
     * of $COLUMNS, or 100 columns when it is unset (report_replay.c). */
    int wide;
} cli_report_run;

/* Prints "flare report: reading SECTION: detail" to stderr and marks the
 * report failed (exit 1). */
void cli_report_failed(cli_report_run *run, const char *detail);

/* The launch-storm guard's untimed work, every process added up (drops of
 * source storm_guard): what the text, json/csv and HTML reports say up
 * front. Returns store_read_drops's status; the counts are 0 on failure. */
typedef struct cli_report_untimed_work {
    uint64_t launches;
    uint64_t copies; /* and memsets */
} cli_report_untimed_work;
int cli_report_untimed(store *database, cli_report_untimed_work *untimed);

/* The kernel replay section (docs/replay.md): reads run->replay, then, only
 * when the session replayed launches on their own, each kernel's launches,
 * reasons and metrics, and the totals. Failures are reported through
 * cli_report_failed; returns 0. */
int cli_report_kernel_replay(cli_report_run *run);

/* The range replay section (docs/replay.md#range-replay), only when
 * run->replay counts spans: each span with its kernels and their metrics,
 * then the totals. Failures are reported through cli_report_failed;
 * returns 0. */
int cli_report_range_replay(cli_report_run *run);

#endif /* FLARE_CLI_REPORT_H */
