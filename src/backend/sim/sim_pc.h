/*
 * sim_pc.h: the simulated device's PC sampling hardware, behind the real
 * engine (pcsamp/pc_engine.h), with the hardware's failure modes on demand.
 *
 * The model. A simulated kernel runs as a C function on a stream worker
 * thread. The worker says when a kernel starts and ends
 * (sim_pc_kernel_begin / sim_pc_kernel_end), and the kernel's body may say
 * where it is and why it waits (sim_pc_mark: a pc offset and a stall reason),
 * as a warp's program counter and stall state would. Each thread that runs
 * kernels has one slot in a fixed table of SIM_PC_SLOTS (claimed at its
 * first kernel, freed when the thread exits); the slot is written with
 * atomics only, so marking costs a few stores and never blocks.
 *
 * While started on a device, a sampler thread ("flare-sim-pc") wakes every
 * period and writes one sample (now, device, stall reason, pc offset, kernel
 * name) per busy slot of that device into a finite ring (SIM_PC_BUFFER_SAMPLES,
 * or sim_pc_set_buffer_samples before start). The simulated SM runs only
 * while its worker thread does: a busy slot whose thread used no CPU time
 * since the previous tick (preempted, or sleeping in the kernel's body) is
 * not sampled at that tick (counted in idle_skips), so samples follow the
 * time a kernel really ran, even on a machine busy with other work. A
 * kernel body that should show up as stalled must spin, not sleep.
 * When the ring is full new
 * samples are lost, counted, and reported by the next read. Ticks the
 * sampler could not make in time (a busy machine) are not taken, as a
 * stalled hardware sampler would not take them; the samples produced are
 * counted either way (sim_pc_samples_produced), so tests check that every
 * sample is read or reported lost.
 *
 * One unit per simulated device (sim_pc_hardware(device)); units, slots and
 * faults are process-wide. For tests and the no-GPU demo.
 *
 * Must never: block a kernel's thread (begin, end and mark take no lock and
 * allocate nothing), grow (the ring is fixed while started), lose a sample
 * without counting it, or wait without a bound (a held read gives up after
 * SIM_PC_HOLD_LIMIT_NS).
 */
#ifndef FLARE_BACKEND_SIM_SIM_PC_H
#define FLARE_BACKEND_SIM_SIM_PC_H

#include <stddef.h>
#include <stdint.h>

#include "pcsamp/pc_engine.h"

/* Threads that can run kernels at once and be sampled. */
#define SIM_PC_SLOTS 64
/* The hardware ring's size by default, in samples. */
#define SIM_PC_BUFFER_SAMPLES 4096u
/* The sampler ticks at most this often: shorter periods are rounded up, as
 * real hardware rounds to what it can do. */
#define SIM_PC_PERIOD_FLOOR_NS 10000ull
/* The longest a read waits while reads are held (sim_pc_hold_reads). */
#define SIM_PC_HOLD_LIMIT_NS 10000000000ull

/* The simulated stall reasons (names: sim_pc_stall_reason_name). */
typedef enum sim_pc_stall {
    SIM_PC_STALL_SELECTED = 0, /* issuing: not stalled */
    SIM_PC_STALL_LONG_SCOREBOARD = 1,
    SIM_PC_STALL_SHORT_SCOREBOARD = 2,
    SIM_PC_STALL_MATH_PIPE_THROTTLE = 3,
    SIM_PC_STALL_BARRIER = 4,
    SIM_PC_STALL_NOT_SELECTED = 5,
    SIM_PC_STALL_WAIT = 6,
    SIM_PC_STALL_MIO_THROTTLE = 7,
    SIM_PC_STALL_LG_THROTTLE = 8,
    SIM_PC_STALL_BRANCH_RESOLVING = 9,
    SIM_PC_STALL_NO_INSTRUCTION = 10,
    SIM_PC_STALL_MEMBAR = 11,
    SIM_PC_STALL_SLEEPING = 12,
    SIM_PC_STALL_COUNT
} sim_pc_stall;

/* ---- on the thread that runs a kernel (a stream worker) ---- */

/* A kernel starts on device on the calling thread: its slot (claimed now if
 * it has none) becomes busy with pc offset 0, "selected". name must stay
 * valid for the rest of the process (the kernel registry's names do): the
 * samples taken while the kernel runs point at it. When all SIM_PC_SLOTS are taken
 * the kernel is not sampled and the miss is counted (sim_pc_stats). */
void sim_pc_kernel_begin(int device, const char *name);
/* The kernel on the calling thread ended: its slot is no longer sampled. */
void sim_pc_kernel_end(void);
/* The calling thread's kernel is now at pc_offset, in stall_reason (a
 * sim_pc_stall; other codes are sampled as given and named "unknown").
 * Does nothing outside a kernel. The simulated binary carries line
 * information below SIM_PC_LINES_END: offset o is on line SIM_PC_LINE(o) of
 * SIM_PC_SOURCE_FILE, four 16-byte instructions a line; offsets from
 * SIM_PC_LINES_END on have none (code built without -lineinfo). */
#define SIM_PC_SOURCE_FILE  "simulated_kernels.cu"
#define SIM_PC_LINES_END    0x10000u
#define SIM_PC_LINE(offset) ((uint32_t)(1u + (offset) / 64u))
void sim_pc_mark(uint64_t pc_offset, uint32_t stall_reason);

/* ---- the hardware ---- */

/* The ops table ("sim-pc-sampling") and the unit of device (0 <=
 * device < 64; NULL otherwise). A unit starts only on its own device. */
const pc_hardware_ops *sim_pc_hardware_ops(void);
void *sim_pc_hardware(int device);
/* The stable name of a simulated stall reason; "unknown" out of range. */
const char *sim_pc_stall_reason_name(uint32_t reason);

/* ---- faults and test hooks (process-wide) ---- */

/* The ring size, in samples, of units started from now on (0: default). */
void sim_pc_set_buffer_samples(uint32_t samples);
/* The next count starts fail with "sim PC sampling: configuration failed
 * (injected)". */
void sim_pc_fail_next_starts(uint32_t count);
/* The next count stops end the sampling but fail, with "sim PC sampling:
 * stop failed (injected)" (as a CUDA stop whose context is gone). */
void sim_pc_fail_next_stops(uint32_t count);
/* Every started sampler writes nothing for duration_ns from now (0 ends a
 * stall at once); its ticks are counted as stalled. */
void sim_pc_stall_sampler(uint64_t duration_ns);
/* While hold is set, every read waits (up to SIM_PC_HOLD_LIMIT_NS) before it
 * moves anything: a read "in progress" that tests can hold. */
void sim_pc_hold_reads(int hold);
/* Reads waiting in a hold now. */
int sim_pc_reads_held(void);
/* Clears every fault and setting above (not the slots, nor running units). */
void sim_pc_reset(void);

typedef struct sim_pc_stats {
    uint64_t produced;          /* samples the sampler took since the last start, kept or lost */
    uint64_t lost;              /* of those, lost to a full ring */
    uint64_t ticks;             /* sampler ticks since the last start */
    uint64_t stalled_ticks;     /* ticks skipped by sim_pc_stall_sampler */
    uint64_t idle_skips;        /* busy slots not sampled: their thread had not run since */
    uint64_t unsampled_kernels; /* kernel begins that found no free slot (process-wide) */
    int running;
} sim_pc_stats;

/* device's unit's counters; zeros for a bad device. */
void sim_pc_stats_get(int device, sim_pc_stats *stats);
/* sim_pc_stats_get(device).produced: what a test compares with the engine's
 * samples read plus samples lost. */
uint64_t sim_pc_samples_produced(int device);

#endif /* FLARE_BACKEND_SIM_SIM_PC_H */
