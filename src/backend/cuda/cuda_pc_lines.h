/*
 * cuda_pc_lines.h: the source file and line of a PC sample's instruction,
 * for the CUDA PC sampling engine (cuda_pc.c), where the binary carries
 * line information (nvcc -lineinfo or -G).
 *
 * CUPTI answers "which line is this PC on" from the module's cubin
 * (cuptiGetSassToSourceCorrelation), which the program hands the driver
 * and CUPTI shows once, when the module loads. So the cubins are copied at
 * their load (bounded in bytes: FLARE_PC_CUBIN_MIB, default 256), matched
 * to a PC record by CUPTI's cubin CRC (computed on the drain thread, not at
 * the load), and each (cubin, function, offset) is looked up once: the
 * answer, a line or none, is cached (bounded). A function whose first
 * lookup finds no line (built without -lineinfo) is not asked again.
 * Found by the bare-CUPTI probe on the H200 (session 16): 92 of 92 PCs
 * answered, 99.9% of a hot loop's samples on its one line.
 *
 * Threads: module loads on any application thread (a copy, under a short
 * lock: the one thing done there, errno kept); lookups and reports one at
 * a time under this module's own lock, from the PC engine's drain, the
 * thread that disarms it, or the SASS engine's stop: pure reads of a kept
 * cubin.
 *
 * Must never: call CUPTI at a module load, free a kept cubin or file name
 * while the process runs (samples point at the names), grow past its
 * bounds (each refusal is counted and said in the pc_source_lines
 * capability), or guess a line: none is NULL and 0.
 */
#ifndef FLARE_BACKEND_CUDA_PC_LINES_H
#define FLARE_BACKEND_CUDA_PC_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_loader.h"
#include "store/store_pc_code.h"

/* Cubin bytes kept by default (FLARE_PC_CUBIN_MIB overrides, 0 keeps none). */
#define CUDA_PC_CUBIN_MIB_DEFAULT 256u
/* Modules kept, and (cubin, function, offset) answers cached. */
#define CUDA_PC_LINES_MODULES_MAX 8192u
#define CUDA_PC_LINES_CACHE_MAX   (1u << 18)

/* At PC sampling's install: finds CUPTI's two functions in its library
 * (absent: lines are off, the capability says why) and reads the budget.
 * FLARE_OK or a flare_status with reason. */
int cuda_pc_lines_install(const cuda_cupti_api *cupti, char *reason, size_t reason_size);

/* CUPTI_CBID_RESOURCE_MODULE_LOADED's cubin, copied when it fits the
 * budget (counted when not). Does nothing before install. */
void cuda_pc_lines_module_loaded(const void *cubin, size_t size);

/* The line of the instruction at offset in a function of the cubin whose
 * CRC is crc: *file (kept for the process) and *line, or NULL and 0.
 * cupti_name is CUPTI's (mangled) name, what the cubin knows; key the
 * caller's kept name for the function, one pointer per function, what the
 * cache is keyed by. Lookups are bounded in time (CUDA_PC_LINES_BUDGET_NS in
 * every CUDA_PC_LINES_BUDGET_WINDOW_NS): past it an instruction gets none
 * now and is asked again at a later call. Any thread (serialised here).
 * code (may be NULL): where the function has no line information and its
 * cubin is kept, the function's code (its cubin and CUPTI's name, kept for
 * the process: the session's end disassembles it); else NULL. */
void cuda_pc_lines_find(uint64_t crc, const char *cupti_name, const char *key, uint64_t offset,
                        const char **file, uint32_t *line, const store_pc_code **code);

/* Time CUPTI's lookups may take in every window of time (ns): most of a
 * lookup in a large cubin is CUPTI reading it again (19 ms a first lookup in
 * PyTorch's, session 17), and the engine's lock is held meanwhile. */
#define CUDA_PC_LINES_BUDGET_NS        20000000ull
#define CUDA_PC_LINES_BUDGET_WINDOW_NS 100000000ull
/* For tests: the budget in every window (0: none). */
void cuda_pc_lines_set_budget(uint64_t budget_ns);

/* Module loads go unwatched (the callback could not be enabled): lines
 * are off, with reason in the capability. */
void cuda_pc_lines_off(const char *reason);

/* Says what the lookups did in the pc_source_lines capability, when that
 * changed since the last call. Any thread (serialised here). */
void cuda_pc_lines_report(void);

#endif /* FLARE_BACKEND_CUDA_PC_LINES_H */
