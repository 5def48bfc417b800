/*
 * report_sass.h: the SASS metrics of a session's deep windows in `flare
 * report` (issue 26 item 2; table sass_metrics, schema 13, docs/schema.md):
 * per window and device that ran a SASS metrics engine, each metric's total,
 * the instructions executed most (smsp__sass_inst_executed) with what the
 * other metrics say of them, and the source lines executed most
 * (report_sass.c, report_sass_lines.c), and each metric split over the
 * scopes its kernels ran in (report_sass_scopes.c); the text section, the
 * JSON/CSV sections sass_metrics, sass_by_scope and sass_lines, and the
 * HTML page's section (report_html_sass.c) all hold the
 * same numbers.
 *
 * The values are exact counts, never samples. Two columns are derived, each
 * from two stored metrics of the same instruction (or line): threads per
 * warp instruction (smsp__sass_thread_inst_executed over
 * smsp__sass_inst_executed: 32 is a full warp, fewer is divergence) and
 * global memory sectors over the ideal (smsp__sass_sectors_mem_global over
 * smsp__sass_sectors_mem_global_ideal: 1.0x is coalesced).
 *
 * Must never change a stored value, present a derived column where one of
 * its two metrics was not counted, hide that rows were left out, or let
 * instructions without line information pass unsaid.
 */
#ifndef FLARE_CLI_REPORT_SASS_H
#define FLARE_CLI_REPORT_SASS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report.h"
#include "cli/report_emit.h"
#include "cli/report_pc.h"
#include "store/store.h"

/* CUPTI's names of the metrics the report reads by name. */
#define REPORT_SASS_INST    "smsp__sass_inst_executed"
#define REPORT_SASS_THREAD  "smsp__sass_thread_inst_executed"
#define REPORT_SASS_SECTORS "smsp__sass_sectors_mem_global"
#define REPORT_SASS_IDEAL   "smsp__sass_sectors_mem_global_ideal"

#define REPORT_SASS_TOP     REPORT_PC_TOP /* instructions and lines kept per window */
#define REPORT_SASS_METRICS 16            /* metric totals kept per window; the rest counted */

/* The first schema version whose sessions can hold SASS metrics. */
#define REPORT_SASS_SINCE 13

/* The metrics a derived column is made of, beside smsp__sass_inst_executed:
 * an index into report_sass_counts.value. */
typedef enum report_sass_part {
    REPORT_SASS_PART_THREAD,  /* smsp__sass_thread_inst_executed */
    REPORT_SASS_PART_SECTORS, /* smsp__sass_sectors_mem_global */
    REPORT_SASS_PART_IDEAL,   /* smsp__sass_sectors_mem_global_ideal */
    REPORT_SASS_PARTS
} report_sass_part;

/* What the derived columns of one instruction, line or window are made of:
 * its executed count and the other parts' values; has is a mask of
 * (1 << part) for each part that was counted. */
typedef struct report_sass_counts {
    uint64_t executed; /* smsp__sass_inst_executed */
    uint64_t value[REPORT_SASS_PARTS];
    unsigned has;
} report_sass_counts;

/* The part a metric name is, or REPORT_SASS_PARTS for any other. */
report_sass_part report_sass_part_of(const char *metric);
/* Threads per warp instruction (0 and *known clear when the thread metric
 * was not counted or nothing executed). */
double report_sass_threads(const report_sass_counts *counts, int *known);
/* Global sectors over the ideal (0 and *known clear when either was not
 * counted or the ideal is 0). */
double report_sass_sectors(const report_sass_counts *counts, int *known);
/* A 64-bit FNV-1a hash of text: how held rows are matched to rows of
 * other metrics whatever their names were cut to. Can't fail. */
uint64_t report_sass_hash(const char *text);

typedef struct report_sass_instruction {
    char function[96]; /* cut to fit */
    uint64_t function_hash;
    uint64_t pc_offset;
    char file[96]; /* empty: no line information; a longer path keeps its end */
    uint32_t source_line;
    char sass[80]; /* where no line is: its SASS text, cut to fit; or empty */
    report_sass_counts counts;
} report_sass_instruction;

typedef struct report_sass_total {
    char metric[64]; /* cut to fit */
    uint64_t metric_hash;
    uint64_t value;      /* over the window's instructions */
    size_t instructions; /* rows of the metric */
} report_sass_total;

/* One window's SASS metrics on one device, as the report shows them. A
 * window that ran a SASS engine and counted nothing is handed over too,
 * with rows 0 and device -1. */
typedef struct report_sass_window {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    int have;
    /* The window's record (empty when the windows table has none). */
    char engine[32];
    char engine_status[32];
    char engine_reason[256];
    uint64_t launches;   /* while it was open */
    size_t rows;         /* sass_metrics rows of the window and device */
    size_t instructions; /* of them smsp__sass_inst_executed's: one per instruction */
    size_t metrics;      /* in totals, by name */
    report_sass_total totals[REPORT_SASS_METRICS];
    size_t other_metrics;       /* metrics past REPORT_SASS_METRICS, counted only */
    uint64_t other_metric_hash; /* the last of them (report_sass_hash), as the walk counts */
    report_sass_counts counts;  /* the whole window's */
    /* The instructions that had no source line, and what they executed. */
    size_t no_line_instructions;
    uint64_t no_line_executed;
    size_t top_count; /* most executed first */
    report_sass_instruction top[REPORT_SASS_TOP];
} report_sass_window;

/* Calls done for each window with SASS metrics, per device, and each window
 * whose engine counted SASS metrics but stored none, in (pid, window,
 * device) order. FLARE_OK, FLARE_ERR_NO_MEMORY or the store's status. */
int report_sass_windows(store *database, void (*done)(report_sass_window *window, void *user),
                        void *user);

/* ---- the hottest source lines (report_sass_lines.c) ---- */

typedef struct report_sass_line {
    char file[160]; /* a longer path keeps its end, after "..." */
    uint64_t file_hash;
    uint32_t line;
    char function[96]; /* the line's function executing most, cut to fit */
    uint32_t instructions;
    report_sass_counts counts;
} report_sass_line;

typedef struct report_sass_lines_window {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    size_t count; /* lines with smsp__sass_inst_executed */
    size_t first; /* its held lines: rows[first .. first + shown) */
    size_t shown; /* at most REPORT_SASS_TOP */
} report_sass_lines_window;

typedef struct report_sass_lines {
    int unreadable; /* they could not be read (none are held) */
    report_sass_lines_window *windows;
    size_t window_count, window_capacity;
    report_sass_line *rows;
    size_t row_count, row_capacity;
    size_t cursor;
} report_sass_lines;

/* Reads every window's top REPORT_SASS_TOP lines by smsp__sass_inst_executed,
 * with the other parts' sums on them. FLARE_OK, FLARE_ERR_NO_MEMORY or the
 * store's status (then none are held and unreadable is set); free with
 * report_sass_lines_free. */
int report_sass_lines_load(store *database, report_sass_lines *lines);
void report_sass_lines_free(report_sass_lines *lines);
/* The window's lines, or NULL when it has none. */
const report_sass_lines_window *report_sass_lines_of_window(report_sass_lines *lines, int64_t pid,
                                                            uint64_t window_id, int32_t device);

/* ---- by scope (report_sass_scopes.c) ---- */

#define REPORT_SASS_SCOPES_SHOWN 6 /* scopes printed per window, largest share first */

/* A row of store_read_sass_by_scope, held: one metric's value (fractional)
 * in one scope of a window and device. */
typedef struct report_sass_scope {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    char metric[64];  /* cut to fit */
    char *scope_name; /* whole; owned by the report_sass_scopes */
    double value;
} report_sass_scope;

typedef struct report_sass_scopes {
    int unreadable;          /* they could not be read (none are held) */
    report_sass_scope *rows; /* the store's order: window, device, metric, largest first */
    size_t count, capacity;
} report_sass_scopes;

/* One window's split of one metric: the metric is smsp__sass_inst_executed
 * where the window counted it, else the window's first by name. */
typedef struct report_sass_scope_split {
    const char *metric;            /* NULL: the window has no rows */
    const report_sass_scope *rows; /* the metric's scopes, largest first */
    size_t count;
    double total; /* their sum: the metric's total in the window (the store's rule) */
} report_sass_scope_split;

/* Reads every window's rows (memory in proportion: windows times devices,
 * metrics and scopes). FLARE_OK, FLARE_ERR_NO_MEMORY or the store's status
 * (then none are held and unreadable is set); free with
 * report_sass_scopes_free. */
int report_sass_scopes_load(store *database, report_sass_scopes *scopes);
void report_sass_scopes_free(report_sass_scopes *scopes);
/* The window's split (split->metric NULL when it has no rows). Can't fail. */
void report_sass_scopes_of_window(const report_sass_scopes *scopes, int64_t pid, uint64_t window_id,
                                  int32_t device, report_sass_scope_split *split);

/* ---- the text report ---- */

/* What the text section has said once: each derived column's meaning. */
typedef struct report_sass_legend {
    int threads_said, sectors_said;
} report_sass_legend;

/* Prints the derived columns' headings ("threads", "sectors") the window
 * has, or their values for counts ("-" where not known). */
void report_sass_print_derived_heading(const report_sass_window *window);
void report_sass_print_derived(const report_sass_window *window, const report_sass_counts *counts);
/* The legend lines of the derived columns the window shows and that were
 * not explained yet. */
void report_sass_print_legend(const report_sass_window *window, report_sass_legend *legend);

/* The window's "by scope" line (nothing when it has no rows): its scopes by
 * share of the split metric's total. */
void report_sass_scopes_print(const report_sass_scopes *scopes, const report_sass_window *window);

/* The window's "hottest source lines" list and what had no line. */
void report_sass_lines_print(report_sass_lines *lines, const report_sass_window *window);

/* The text section (titled by itself, only when there is something to say). */
int cli_report_sass(cli_report_run *run);

/* Every sass_metrics row (sass_metrics) and every store_read_sass_lines row
 * (sass_lines) as records of the open table. FLARE_OK or the store's
 * status. */
int report_sass_emit(store *database, report_emit *emit);
int report_sass_lines_emit(store *database, report_emit *emit);
/* Every store_read_sass_by_scope row (sass_by_scope) as a record of the
 * open table. FLARE_OK or the store's status. */
int report_sass_scopes_emit(store *database, report_emit *emit);

#endif /* FLARE_CLI_REPORT_SASS_H */
