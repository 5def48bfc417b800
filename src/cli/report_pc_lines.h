/*
 * report_pc_lines.h: the hottest source lines of each window that ran PC
 * sampling (store_read_pc_lines: per line, its samples, the function with
 * the most of them and its top stall reason), as `flare report` shows them:
 * a list per window in the text report, the HTML page's table and the
 * Perfetto window slice's pc_lines arg all hold the same rows
 * (report_pc_lines.c), and the JSON/CSV section pc_lines every row as read.
 *
 * Must never change a value, hide that lines were left out, or let samples
 * without line information pass unsaid: every window says what share of
 * its samples had no line (code built without nvcc -lineinfo).
 */
#ifndef FLARE_CLI_REPORT_PC_LINES_H
#define FLARE_CLI_REPORT_PC_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report_emit.h"
#include "cli/report_pc.h"
#include "store/store.h"

/* Lines kept per window, most samples first: as many as instructions. */
#define REPORT_PC_LINES_TOP REPORT_PC_TOP

/* The first schema version whose sessions store source lines. */
#define REPORT_PC_LINES_SINCE 12

typedef struct report_pc_source_line {
    char file[160]; /* a longer path keeps its end, after "..." */
    uint32_t line;
    char function[96]; /* the line's function with the most samples, cut to fit */
    uint64_t samples;
    char top_stall[32]; /* the line's most frequent stall reason */
    uint64_t top_stall_samples;
} report_pc_source_line;

/* One window's lines on one device. */
typedef struct report_pc_lines_window {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    uint64_t samples; /* on any line: the window's samples with line information */
    size_t count;     /* lines with samples */
    size_t first;     /* its held lines: rows[first .. first + shown) */
    size_t shown;     /* at most REPORT_PC_LINES_TOP */
} report_pc_lines_window;

typedef struct report_pc_lines {
    int recorded;                    /* the session is of a version that stores lines */
    int unreadable;                  /* they could not be read (none are held) */
    report_pc_lines_window *windows; /* in the store's order: pid, window, device */
    size_t window_count, window_capacity;
    report_pc_source_line *rows; /* each window's top lines, one window after another */
    size_t row_count, row_capacity;
    size_t cursor; /* where the last report_pc_lines_of_window found its window */
} report_pc_lines;

/* Reads every window's lines, holding each window's top REPORT_PC_LINES_TOP
 * (memory in proportion to the windows); schema_version is the session's
 * (older than REPORT_PC_LINES_SINCE: recorded stays clear, nothing is
 * read). FLARE_OK, FLARE_ERR_NO_MEMORY or the store's status (then none are
 * held, and unreadable is set); free with report_pc_lines_free. */
int report_pc_lines_load(store *database, int schema_version, report_pc_lines *lines);
void report_pc_lines_free(report_pc_lines *lines);

/* The window's lines, or NULL when it has none (no line information, or a
 * session that does not record them). Fastest when asked in the store's
 * order, as report_pc_windows hands windows over. */
const report_pc_lines_window *report_pc_lines_of_window(report_pc_lines *lines, int64_t pid,
                                                        uint64_t window_id, int32_t device);

/* The window's "hottest source lines" list (text report) for a window of
 * total samples: its top lines, how many more there are, and the share of
 * total without a line; one line saying why when it has none. */
void report_pc_lines_print(report_pc_lines *lines, int64_t pid, uint64_t window_id, int32_t device,
                           uint64_t total);

/* path into file (size bytes, at least 8); a longer one keeps its end,
 * the file's name, after "...". Can't fail. */
void report_pc_path_tail(char *file, size_t size, const char *path);

/* text into out (out_size bytes), ending in "..." when it does not fit: a
 * SASS text the column cuts says so (JSON/CSV have it whole). */
void report_pc_fit_text(char *out, size_t out_size, const char *text);

/* Every store_read_pc_lines row as a record of the open table. FLARE_OK or
 * the store's status. */
int report_pc_lines_emit(store *database, report_emit *emit);

#endif /* FLARE_CLI_REPORT_PC_LINES_H */
