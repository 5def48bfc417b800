/*
 * report_replay_common.h: what the two replay sections of `flare report`
 * share (report_replay.c: kernel replay; report_span.c: range replay): the
 * width the readable tables fit, a line written cell by cell, metric order
 * and values (with how each was produced, where a note says: a PM-sampled
 * span's error bounds and statuses), and the small formats of passes, snapshots and totals.
 * Internal to the report; each function is described where it is defined
 * (report_replay_common.c). Must never hold state.
 */
#ifndef FLARE_CLI_REPORT_REPLAY_COMMON_H
#define FLARE_CLI_REPORT_REPLAY_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report.h"

/* The readable tables' width: $COLUMNS held to MIN..MAX, else DEFAULT. */
#define REPLAY_WIDTH_DEFAULT 100
#define REPLAY_WIDTH_MIN     60
#define REPLAY_WIDTH_MAX     1000

/* A line of a readable table, printed cell by cell. Blanks are written
 * only when text follows them, so no line ends in spaces. */
typedef struct report_table_line {
    size_t pending; /* blanks owed before the next text */
} report_table_line;

/* The closing "In all" line's sizes and time. */
typedef struct report_replay_totals_text {
    char snapshot[32];
    char restored[32];
    char took[32];
} report_replay_totals_text;

size_t report_replay_width(void);
void report_line_space(report_table_line *line, size_t count);
void report_line_cell(report_table_line *line, const char *text, size_t width, int left);
void report_replay_sort_by_rank(const char **names, size_t count);
void report_replay_format_value(double value, int has_value, char *buffer, size_t size);
void report_replay_metric_text(const char *const *names, const double *values, const int *has_value,
                               size_t count, const char *name, int wide, char *text, size_t size);
void report_replay_launch_metric_text(const store_replay_launch_row *launch, const char *name,
                                      int wide, char *text, size_t size);
int report_replay_launch_noted(const store_replay_launch_row *launch, const char *method);
int report_replay_span_method(const store_replay_span_row *row, char *text, size_t size);
void report_replay_format_bound(const char *name, double value, double bound, int wide, char *text,
                                size_t size);
size_t report_replay_union_add(const char **names, size_t count, size_t capacity,
                               const char *const *more, size_t more_count);
void report_replay_format_passes(uint32_t run, uint32_t planned, char *text, size_t size);
void report_replay_format_pass_mean(uint32_t passes_kept, uint64_t mean_ns, char *text,
                                    size_t size);
void report_replay_format_elapsed(uint64_t begin_ns, uint64_t end_ns, char *text, size_t size);
const char *report_replay_shadow_name(uint64_t snapshot_bytes, int on_device, const char *none);
int report_replay_read_succeeded(cli_report_run *run, int status, int out_of_memory);
void report_replay_format_totals(uint64_t snapshot_bytes, uint64_t bytes_restored, uint64_t ns,
                                 report_replay_totals_text *text);

#endif /* FLARE_CLI_REPORT_REPLAY_COMMON_H */
