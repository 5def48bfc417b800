/*
 * sim_sass.h: the simulated device's SASS metrics hardware, behind the real
 * instruction engine (pcsamp/pc_engine.h, kind PC_ENGINE_SASS), with its
 * failure modes on demand.
 *
 * The model. CUPTI's SASS metrics patch each kernel so that every executed
 * instruction adds to its own counters. Here a simulated kernel's
 * instructions are the places its body marks (sim_pc_mark, and the kernel's
 * start at offset 0): while the hardware is started on a device, each mark
 * of a kernel on that device is one warp instruction executed at that
 * offset (SIM_SASS_METRIC_INST: smsp__sass_inst_executed) by a warp of
 * SIM_SASS_WARP_THREADS threads (SIM_SASS_METRIC_THREAD_INST:
 * smsp__sass_thread_inst_executed). The counters live in a fixed table of
 * SIM_SASS_INSTRUCTIONS (kernel, offset) rows, or fewer
 * (sim_sass_set_capacity); a mark of an instruction that finds the table
 * full is lost and counted, and the next read reports it, as CUPTI's
 * dropped records. At stop the rows become the records read hands over,
 * one per (instruction, metric), the instruction's source line as the PC
 * hardware gives it (sim_pc.h: SIM_PC_LINE).
 *
 * Must never: block or allocate on a kernel's thread (a mark is a few
 * atomics; it never waits for a start or a stop), grow the table, lose a
 * count without counting it, or hand over a value of 0.
 */
#ifndef FLARE_BACKEND_SIM_SIM_SASS_H
#define FLARE_BACKEND_SIM_SIM_SASS_H

#include <stdint.h>

#include "pcsamp/pc_engine.h"

/* The counter table's size by default, in (kernel, offset) rows. */
#define SIM_SASS_INSTRUCTIONS 4096u
#define SIM_SASS_WARP_THREADS 32u

enum {
    SIM_SASS_METRIC_INST = 0,        /* smsp__sass_inst_executed */
    SIM_SASS_METRIC_THREAD_INST = 1, /* smsp__sass_thread_inst_executed */
    SIM_SASS_METRICS
};

/* On a kernel's thread: the kernel named kernel (the registry's name, kept
 * for the process) executed one instruction at pc_offset on device. Does
 * nothing unless the hardware is started on device. */
void sim_sass_count(int device, const char *kernel, uint64_t pc_offset);

/* The ops table ("sim-sass-metrics") and the hardware of device (0 <=
 * device < 64; NULL otherwise). */
const pc_hardware_ops *sim_sass_hardware_ops(void);
void *sim_sass_hardware(int device);

/* ---- faults and test hooks (process-wide) ---- */

/* Rows of tables started from now on (1..SIM_SASS_INSTRUCTIONS; 0: default). */
void sim_sass_set_capacity(uint32_t rows);
/* The next count starts fail with "sim SASS metrics: patching failed (injected)". */
void sim_sass_fail_next_starts(uint32_t count);
/* Clears the faults and settings above. */
void sim_sass_reset(void);

#endif /* FLARE_BACKEND_SIM_SIM_SASS_H */
