/*
 * report_triggered.h: the triggered replays of a session, gathered once for
 * every form of `flare report` (text: report_triggered.c; JSON/CSV:
 * report_data.c; HTML: report_html_triggered.c): each triggered_replays row
 * (the rule that fired, its reading, the kernel or range chosen and why,
 * what became of it) with what the report shows beside it: the replayed
 * launch's speed-of-light throughputs and the PM window that was open when
 * the rule fired or while its replay ran, if any (docs/rules.md "What a
 * triggered replay's record says").
 *
 * Holds copies (the store's strings live for a callback only); must never
 * change a value, and never hold more replays than its caller's limit
 * (REPORT_TRIGGERED_MAX for the text and HTML forms; the rest are counted).
 */
#ifndef FLARE_CLI_REPORT_TRIGGERED_H
#define FLARE_CLI_REPORT_TRIGGERED_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "store/store_triggered.h"

#define REPORT_TRIGGERED_MAX     200
#define REPORT_TRIGGERED_METRICS 16 /* speed-of-light throughputs kept per launch */

/* The PM window beside a triggered replay. */
typedef struct report_triggered_window {
    int found;
    uint64_t id;
    char opened_by[160]; /* "rule 2", "scheduled 'deep-after 1s for 2s'", "manual 'x'" */
    uint64_t opened_ns, closed_ns;
    uint64_t samples;
    char engine_status[24];
} report_triggered_window;

typedef struct report_triggered_item {
    /* The row; its strings point at the copies below. */
    store_triggered_row row;
    char *strings; /* one allocation holding every string of row */
    /* The reading and threshold in the rule's unit ("21.6ms", "12000/s"),
     * and the metric's name ("kernel_duration_p99"); the raw numbers when
     * the rule text no longer parses. */
    char metric[64], reading[48], threshold[48];
    /* action replay: the launch's row was found, declined or not, and its
     * of-peak throughputs, compute side first. */
    int launch_found, launch_declined;
    size_t metric_count;
    char metric_names[REPORT_TRIGGERED_METRICS][96];
    double metric_values[REPORT_TRIGGERED_METRICS];
    int metric_has_value[REPORT_TRIGGERED_METRICS];
    /* action range: the span's kernels (found when its row was). */
    int span_found;
    uint32_t span_kernels;
    report_triggered_window window;
} report_triggered_item;

typedef struct report_triggered {
    report_triggered_item *items;
    size_t count;
    uint64_t left_out; /* rows past REPORT_TRIGGERED_MAX */
} report_triggered;

/* Reads the session's triggered replays into *out, at most limit of them
 * (the rest counted in left_out; SIZE_MAX: all, for JSON/CSV, which hold
 * everything), empty for a session with none or older than schema 10. 0,
 * or a store status (the store's error set) or FLARE_ERR_NO_MEMORY; *out
 * is then empty. */
int report_triggered_collect(store *database, size_t limit, report_triggered *out);
void report_triggered_free(report_triggered *triggered);

/* The JSON/CSV section triggered_replays (report_data.c): a record per
 * replay, between the caller's table begin and end (docs/cli.md). */
struct report_emit;
void report_triggered_emit(struct report_emit *emit, const report_triggered *triggered);

/* The text report's section (report.c): nothing at all when the session
 * has no triggered replay. 0 or a store status. */
struct cli_report_run;
int cli_report_triggered(struct cli_report_run *run);

#endif /* FLARE_CLI_REPORT_TRIGGERED_H */
