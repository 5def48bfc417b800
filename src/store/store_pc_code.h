/*
 * store_pc_code.h: the machine code of sampled functions built without line
 * information (schema 15; docs/schema.md): where such a function's code is
 * (pc_code: its cubin's CRC and the symbol the cubin names it by), the
 * cubin's bytes (pc_cubins) until the session's end disassembles them, and
 * the SASS text of each sampled instruction (pc_instructions), which the
 * report shows where no source line is.
 *
 * The engines' writers (store_put_pc_sample, store_put_sass_metric) record
 * a row's code when it carries one; the disassembly pass (src/disasm,
 * run by `flare trace` at the session's end and by `flare disasm`) reads
 * the cubins and what is wanted of each, writes the texts and drops the
 * cubin. A function whose name two cubins of a process hold gets no text
 * (its samples cannot be told apart). Must never: write a cubin twice for
 * one process, or keep a text for an instruction no window sampled.
 */
#ifndef FLARE_STORE_STORE_PC_CODE_H
#define FLARE_STORE_STORE_PC_CODE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* A function's machine code as an engine's hardware side knows it: kept by
 * that side for as long as the process lives (rows point at it). */
typedef struct store_pc_code {
    uint64_t cubin_crc; /* identifies the cubin (CUPTI's cubin CRC on CUDA) */
    const char
        *symbol;       /* the function's name in the cubin (mangled, as a disassembler prints it) */
    const void *cubin; /* the cubin's bytes */
    size_t cubin_size;
} store_pc_code;

/* Each kept cubin, by pid and CRC. bytes valid during the call only;
 * callback returns non-zero to stop (not an error). None (and 0) for a
 * session older than version 15. */
typedef int (*store_pc_cubin_callback)(int64_t pid, uint64_t cubin_crc, const void *bytes,
                                       size_t size, void *user);
int store_read_pc_cubins(store *handle, store_pc_cubin_callback callback, void *user);

/* One kept cubin (pid, CRC), as store_read_pc_cubins gives each; none
 * when it is not kept. */
int store_read_pc_cubin(store *handle, int64_t pid, uint64_t cubin_crc,
                        store_pc_cubin_callback callback, void *user);

/* The pids of the session's processes that have not recorded their end
 * (running, or killed), by pid; callback non-zero stops. */
int store_read_unended_pids(store *handle, int (*callback)(int64_t pid, void *user), void *user);

/* The instructions wanted of one cubin: every instruction a window sampled
 * (pc_samples or sass_metrics) in a function pc_code places in it, that has
 * neither a source line nor a text yet; by symbol (byte order), then offset.
 * name_id is the function's id in names. */
typedef struct store_pc_wanted_row {
    int64_t name_id;
    const char *symbol;
    uint64_t pc_offset;
} store_pc_wanted_row;
typedef int (*store_pc_wanted_callback)(const store_pc_wanted_row *row, void *user);
int store_read_pc_wanted(store *handle, int64_t pid, uint64_t cubin_crc,
                         store_pc_wanted_callback callback, void *user);

/* An instruction's SASS text (inside an open batch). FLARE_OK, invalid
 * argument for an empty text, or the store's error recorded. A second text
 * for the same instruction is ignored. */
int store_put_pc_instruction(store *handle, int64_t pid, int64_t name_id, uint64_t pc_offset,
                             const char *sass);

/* Drops a cubin once its instructions were disassembled (inside an open
 * batch). FLARE_OK or the store's error. */
int store_drop_pc_cubin(store *handle, int64_t pid, uint64_t cubin_crc);

/* After cubins were dropped: gives their pages back to the file system
 * (VACUUM) when they were at least a quarter of the database and 16 MiB, so
 * a session does not keep its cubins' size. Outside a batch. FLARE_OK, or
 * the store's error (the session is unchanged then). */
int store_pc_cubins_compact(store *handle, uint64_t dropped_bytes);

/* Counts for the report: instructions sampled without a line, those with
 * a text, and the cubins still kept (not disassembled). Zeros for a
 * session older than version 15. */
typedef struct store_pc_code_counts {
    uint64_t without_line, with_text, cubins_kept;
    uint64_t shared_names; /* functions whose name two cubins hold: no text */
} store_pc_code_counts;
int store_read_pc_code_counts(store *handle, int64_t pid, store_pc_code_counts *counts);

#endif /* FLARE_STORE_STORE_PC_CODE_H */
