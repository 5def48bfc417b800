/*
 * store_sass.h: SASS metrics of deep windows (table sass_metrics, schema 13;
 * docs/schema.md): per (window, device, function, pc offset, metric), the
 * value a window's SASS metrics engine (CUPTI's SASS metrics API, or the
 * simulated device's) counted for one instruction, summed over the kernels
 * of that function that ran while the window was open. Metric names are
 * CUPTI's ("smsp__sass_inst_executed", "smsp__sass_thread_inst_executed",
 * ...), so a user can look each up in NVIDIA's documentation.
 *
 * The function name is interned into the names table as kernel names are
 * (sass_metrics.name_id); an instruction's source line goes to pc_lines,
 * the table PC samples use (schema 12): one (pid, function, pc offset) has
 * one line whichever engine saw it. Written by the collector, one call per
 * aggregate the engine hands over once the window is disarmed, inside its
 * open batch like the other puts; read by `flare report` and the Python
 * reader (sass_metrics()).
 *
 * Must never be called on an application thread or a launch path, nor
 * abort: like every store function it returns a flare_status and reports
 * SQLite's message through store_last_error. Rows are never evicted.
 */
#ifndef FLARE_STORE_STORE_SASS_H
#define FLARE_STORE_STORE_SASS_H

#include <stdint.h>

#include "store/store.h"
#include "store/store_pc.h"

typedef struct store_sass_row {
    int64_t pid;
    uint64_t window_id; /* windows.id of the window that armed the engine */
    int32_t device;
    const char *function; /* kernel (function) name, interned like kernel names */
    uint64_t pc_offset;   /* byte offset of the instruction in the function */
    const char *metric;   /* CUPTI's name: "smsp__sass_inst_executed", ... */
    uint64_t value;
    /* The instruction's source line (pc_lines), where its binary carries
     * line information: file NULL (or empty) when not. Read back too. */
    const char *file;
    uint32_t line;
    /* Where file is NULL: the function's machine code (store_pc_sample_row's
     * code). Not read back. */
    const store_pc_code *code;
    /* Read back only: the instruction's SASS text, or NULL. */
    const char *sass;
} store_sass_row;

/* Writes one aggregate (inside the collector's open batch). FLARE_OK;
 * FLARE_ERR_INVALID_ARGUMENT (nothing recorded) for a NULL handle, row,
 * function or metric, or an empty metric; else what store_writer_ready or
 * SQLite said, recorded. A value of 0 is kept (an instruction patched but
 * not executed in the window). Writing the same (pid, window, device,
 * function, offset, metric) again adds its value. */
int store_put_sass_metric(store *handle, const store_sass_row *row);

/* Every row with its line, by pid, window, device and metric, largest value
 * first, then function and offset; none (and 0) for a session older than
 * version 13. Strings are valid during the call only; callback returns
 * non-zero to stop (not an error). */
typedef int (*store_sass_callback)(const store_sass_row *row, void *user);
int store_read_sass_metrics(store *handle, store_sass_callback callback, void *user);

/* Per source line: per (pid, window, device, metric, file, line), the sum of
 * the values of the instructions on it and the function with the largest
 * share, by pid, window, device and metric, largest first; instructions
 * without a line are left out. None (and 0) before version 13. */
typedef struct store_sass_line_row {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    const char *metric;
    const char *file;
    uint32_t line;
    const char *function; /* the function with the largest value on the line */
    uint64_t value;
    uint32_t instructions; /* distinct (function, offset) on the line with this metric */
} store_sass_line_row;
typedef int (*store_sass_line_callback)(const store_sass_line_row *row, void *user);
int store_read_sass_lines(store *handle, store_sass_line_callback callback, void *user);

/* SASS metrics attributed to the scopes (flare scopes and NVTX ranges) they
 * ran in (store_pc_scope.c, the rule of store_read_pc_by_scope): per
 * window, device, scope name and metric. A function's values of a metric
 * in a window are split over the scopes its kernels ran in during the
 * window, in proportion to their kernel time there, each kernel credited
 * to the scope resolve picks for the middle of its time in the window
 * (attrib.h's rule); "(no range)" where none was open, "(no kernel in the
 * window)" for a function with no kernel record in its window. So values
 * are fractional, and sum per window, device and metric to its total. */
typedef struct store_sass_scope_row {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    const char *scope_name;
    const char *metric;
    double value;
} store_sass_scope_row;

/* Every row, by pid, window, device and metric, largest value first, then
 * scope name; none (and 0) for a session older than version 13. Strings are
 * valid during the call only; callback returns non-zero to stop (not an
 * error). FLARE_ERR_INVALID_ARGUMENT for a NULL handle, resolve or
 * callback; memory in proportion to the windows' kernels and scopes, and to
 * their functions times metrics; FLARE_ERR_NO_MEMORY when it cannot be
 * had; else the store's status. */
typedef int (*store_sass_scope_callback)(const store_sass_scope_row *row, void *user);
int store_read_sass_by_scope(store *handle, store_pc_scope_resolver resolve,
                             store_sass_scope_callback callback, void *user);

#endif /* FLARE_STORE_STORE_SASS_H */
