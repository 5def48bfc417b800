/*
 * store_pc.h: PC samples of deep windows (table pc_samples, schema 11,
 * and the source lines of their instructions, pc_lines, schema 12;
 * docs/schema.md): how many PC samples a window's PC sampling engine
 * (src/pcsamp) counted per (device, function, pc offset, stall reason).
 * Written by the collector, one call per aggregate the engine hands over
 * once the window is disarmed, inside its open batch like the other puts;
 * read by `flare report` and the Python reader (pc_samples()).
 *
 * The function name is interned into the names table, as kernel names are
 * (pc_samples.name_id; the view v_pc_samples names it). Must never be called
 * on an application thread or a launch path, nor abort: like every store
 * function it returns a flare_status and reports SQLite's message through
 * store_last_error. Rows are never evicted (store_evict.c leaves the table
 * alone, as it does pm_samples).
 */
#ifndef FLARE_STORE_STORE_PC_H
#define FLARE_STORE_STORE_PC_H

#include <stdint.h>

#include "store/store.h"
#include "store/store_pc_code.h"

typedef struct store_pc_sample_row {
    int64_t pid;
    uint64_t window_id; /* windows.id of the window that armed the engine */
    int32_t device;
    const char *function;     /* kernel (function) name, interned like kernel names */
    uint64_t pc_offset;       /* byte offset of the instruction in the function */
    const char *stall_reason; /* "long_scoreboard", "selected", ... */
    uint64_t samples;
    uint64_t first_ns, last_ns; /* flare clock (CLOCK_MONOTONIC ns), like every time column */
    /* The instruction's source line (table pc_lines, schema 12), where its
     * binary carries line information: file NULL (or empty) when not. Read
     * back by store_read_pc_samples too (NULL for a session older than 12). */
    const char *file;
    uint32_t line;
    /* Where file is NULL: the function's machine code, written to pc_code
     * and pc_cubins (schema 15; NULL: not known). Not read back. */
    const store_pc_code *code;
    /* Read back only: the instruction's SASS text (pc_instructions), where
     * the session's end disassembled it; NULL otherwise. */
    const char *sass;
} store_pc_sample_row;

/* Writes one aggregate (inside the collector's open batch). FLARE_OK;
 * FLARE_ERR_INVALID_ARGUMENT (nothing recorded) for a NULL handle, row,
 * function or stall reason, an empty stall reason, no samples, or
 * last_ns before first_ns; else what store_writer_ready or SQLite said,
 * recorded. Writing the same (pid, window, device, function, offset,
 * reason) again adds its samples and widens first_ns..last_ns. */
int store_put_pc_sample(store *handle, const store_pc_sample_row *row);

/* The hottest source lines: per (pid, window, device, file, line), the
 * samples of the instructions on it and the stall reason with the most of
 * them, by pid, window and device, most samples first. None (and 0) for a
 * session older than version 12 or without line information. */
typedef struct store_pc_line_row {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    const char *file;
    uint32_t line;
    const char *function; /* the function with the most samples on the line */
    uint64_t samples;
    const char *top_stall; /* the line's most frequent stall reason */
    uint64_t top_stall_samples;
} store_pc_line_row;
typedef int (*store_pc_line_callback)(const store_pc_line_row *row, void *user);
int store_read_pc_lines(store *handle, store_pc_line_callback callback, void *user);

/* Every row, by pid, window and device, most samples first, then
 * function, offset and stall reason; none (and 0) for a session older than version 11. Strings
 * are valid during the call only. callback returns non-zero to stop (not
 * an error). */
typedef int (*store_pc_sample_callback)(const store_pc_sample_row *row, void *user);
int store_read_pc_samples(store *handle, store_pc_sample_callback callback, void *user);

/* PC samples attributed to the scopes (flare scopes and NVTX ranges) they
 * ran in (store_pc_scope.c): per window, device, scope name and stall
 * reason. A function's samples in a window are split over the scopes its
 * kernels ran in during the window, in proportion to their kernel time
 * there, each kernel credited to the scope resolve picks for the middle of
 * its time in the window (attrib.h's rule: the deepest open scope of the
 * process); "(no range)" where none was open, "(no kernel in the window)"
 * for a function with no kernel record in its window. A function name of
 * 255 bytes that no kernel has (cut by the engine before session 16)
 * stands for every kernel name it begins. So
 * samples are fractional, and sum per window to its total. */
typedef struct store_pc_scope_row {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    const char *scope_name;
    const char *stall_reason;
    double samples;
} store_pc_scope_row;

/* A scope as the resolver sees it (end_ns UINT64_MAX: still open). */
typedef struct store_pc_scope_span {
    uint64_t start_ns, end_ns;
    uint64_t instance_id;
    uint32_t depth;
} store_pc_scope_span;

/* For each of count times, the index into spans of the scope that gets it,
 * or -1 for none; FLARE_OK or a negative flare_status. The store stays
 * below the attribution module: the caller passes it (cli: attrib_resolve).
 * store_read_sass_by_scope (store_sass.h) takes the same. */
typedef int (*store_pc_scope_resolver)(const store_pc_scope_span *spans, size_t span_count,
                                       const uint64_t *times, size_t count, int64_t *winners);

/* Every row, by pid, window, device and scope name, most samples first;
 * none for a session older than version 11. Strings are valid during the
 * call only; callback returns non-zero to stop (not an error). Memory in
 * proportion to the windows' kernels and scopes; FLARE_ERR_NO_MEMORY when
 * it cannot be had. */
typedef int (*store_pc_scope_callback)(const store_pc_scope_row *row, void *user);
int store_read_pc_by_scope(store *handle, store_pc_scope_resolver resolve,
                           store_pc_scope_callback callback, void *user);

#endif /* FLARE_STORE_STORE_PC_H */
