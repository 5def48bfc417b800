/*
 * pc_engine.h: the instruction-level deep engines, PC sampling and SASS
 * metrics, independent of the hardware.
 *
 * PC sampling takes, every period on every SM, the program counter of one
 * warp and the reason it is stalled (or "selected": issuing). One engine
 * samples one device at a time. The hardware side (CUPTI's PC sampling API
 * in backend/cuda/cuda_pc.c, the simulated device in backend/sim/sim_pc.c) fills a
 * pc_hardware_ops table of four small steps: start, stop, read raw samples
 * out of its finite buffer, name a stall reason. Everything that must behave
 * the same on every device lives here, written once: FLARE_PC_PERIOD, the
 * device's lease, the drain thread that keeps the hardware buffer from
 * overflowing, and the bounded aggregate table the collector takes from.
 *
 * Life: create -> arm / disarm per window -> destroy. There is no prepare:
 * PC sampling needs no long set-up, so arm takes the device's lease
 * (tracebuf/lease.h) and disarm gives it back. While a PM engine (or any
 * other context) holds the device, arm answers BACKEND_ENGINE_BUSY: the
 * lease decides between engine kinds as it does between processes.
 *
 * Samples are not kept one by one: they are counted per key (window, device,
 * function, pc offset, stall reason) in a table of at most
 * pc_engine_set_aggregate_capacity() keys (PC_AGGREGATE_MAX by default). A
 * sample whose key does not fit is counted in aggregate_drops, a sample the
 * hardware lost in samples_lost. The collector takes a window's entries once
 * the window is disarmed (pc_engine_take), oldest first, each once.
 *
 * Threads: arm and disarm come from one coordinator thread at a time; take
 * from the collector, concurrently with the drain thread. A mutex guards the
 * table and the counters; it is never taken on an application thread (the
 * engine has no application hot path) and never held across a hardware call.
 *
 * SASS metrics (pc_hardware_ops.kind PC_ENGINE_SASS) use the same engine:
 * the hardware patches each kernel so its instructions count themselves, and
 * hands over at stop, per (function, pc offset, metric), the value counted
 * while armed: a pc_raw_sample's count is that value and its stall_reason
 * the metric's code, named by stall_reason_name ("smsp__sass_inst_executed").
 * Such an engine has no period (FLARE_PC_PERIOD and an interval are not
 * read), its lease words say "SASS metrics", and the collector writes its
 * aggregates to sass_metrics instead of pc_samples (pc_session.c). Its
 * hardware never hands over a value of 0.
 *
 * Must never: block arm or disarm on the hardware for longer than a start or
 * a stop (disarm may wait for one read batch the drain thread has begun),
 * grow (the table is fixed; every loss is counted), crash on a hardware error
 * (errors become reasons), wait without a bound, or read a clock in arm or
 * disarm other than the now_ns it is given.
 */
#ifndef FLARE_PCSAMP_PC_ENGINE_H
#define FLARE_PCSAMP_PC_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "store/store_pc_code.h"

/* Bytes of a stall reason (or SASS metric) name in a pc_entry, NUL
 * included: CUPTI's longest SASS metric name has 49 bytes. */
#define PC_STALL_NAME_MAX 64

/* Sampling period limits (ns). CUPTI takes a power of two of SM cycles
 * (2^5 to 2^31); the hardware side rounds to what its device accepts. */
#define PC_PERIOD_MIN_NS     1000ull
#define PC_PERIOD_MAX_NS     1000000000ull
#define PC_PERIOD_DEFAULT_NS 100000ull

/* How often the drain thread empties the hardware buffer while armed. */
#define PC_DRAIN_PERIOD_NS 5000000ull
/* Distinct keys the aggregate table holds by default. */
#define PC_AGGREGATE_MAX 16384u
/* Raw samples one read moves (the engine's read buffer). */
#define PC_READ_BATCH 256u

/* One sample as the hardware gives it, or several of one key: CUPTI's PC
 * sampling hands over per-PC counts per stall reason, not single samples. */
typedef struct pc_raw_sample {
    uint64_t count;   /* samples this record stands for; 0 reads as 1 */
    uint64_t time_ns; /* flare's clock (CLOCK_MONOTONIC): the hardware side converts */
    int32_t device;
    uint32_t stall_reason; /* the hardware's code; stall_reason_name names it */
    uint64_t pc_offset;    /* within the function */
    /* The function's whole name (NULL reads as "(unknown function)"), kept
     * by the hardware side for as long as the engine lives: entries point
     * at it. C++ kernels' names run to thousands of bytes, and a name cut
     * short would no longer match its kernel records (pc_names.h). */
    const char *function;
    /* The instruction's source file and line, where the binary carries
     * line information (NULL and 0 otherwise): kept by the hardware side
     * as function is. One (function, pc_offset) has one line. */
    const char *file;
    uint32_t line;
    /* Where file is NULL: the function's machine code, for its SASS text
     * at the session's end (store_pc_code.h), or NULL where not kept. Kept
     * by the hardware side as function is. */
    const store_pc_code *code;
} pc_raw_sample;

/* ---- the hardware side ---- */

/* What a hardware counts (see the top of this file). */
typedef enum pc_engine_kind {
    PC_ENGINE_SAMPLING = 0, /* samples of the program counter, per stall reason */
    PC_ENGINE_SASS = 1,     /* SASS metrics: per-instruction values, per metric */
} pc_engine_kind;

typedef struct pc_hardware_ops {
    const char *name;    /* "cuda-pc-sampling", "sim-pc-sampling", "cuda-sass-metrics" */
    pc_engine_kind kind; /* 0: PC sampling */
    /* Starts sampling device every period_ns (rounded as the hardware can;
     * 0 for SASS metrics). 0, or a negative flare_status with reason. */
    int (*start)(void *hardware, int device, uint64_t period_ns, char *reason, size_t reason_size);
    /* Stops sampling; what the buffer holds stays readable. 0, or a negative
     * flare_status with reason. */
    int (*stop)(void *hardware, char *reason, size_t reason_size);
    /* Moves up to max samples out of the hardware buffer into out, oldest
     * first, and adds the samples the hardware lost since the last read to
     * *lost. Returns how many it moved; never blocks beyond its own short
     * locks. After stop, repeated reads return 0 once the buffer is empty. */
    size_t (*read)(void *hardware, pc_raw_sample *out, size_t max, uint64_t *lost);
    /* A stable lowercase name for a stall reason code ("long_scoreboard",
     * "selected", ...; "unknown" for a code it does not know). Never NULL,
     * never blocks: the engine calls it under its table mutex. */
    const char *(*stall_reason_name)(void *hardware, uint32_t reason);
    /* Optional: gives everything back (the engine is being destroyed). */
    void (*release)(void *hardware);
} pc_hardware_ops;

/* ---- the engine ---- */

/* One aggregate: how many samples of one window had this key. */
typedef struct pc_entry {
    uint64_t window_id; /* backend_engine_config.window_id of the window */
    int32_t device;
    const char *function; /* the hardware side's (pc_raw_sample), whole */
    uint64_t pc_offset;
    const char *file; /* the instruction's source file, or NULL (pc_raw_sample) */
    uint32_t line;
    const store_pc_code *code;            /* where file is NULL, or NULL (pc_raw_sample) */
    char stall_reason[PC_STALL_NAME_MAX]; /* SASS: the metric's name */
    uint64_t samples;                     /* SASS: the metric's value */
    /* The first and last sample's time, within the window's arm and disarm
     * times (a sample the hardware took after the disarm's now, before its
     * stop, or stamped when read, counts at the edge). */
    uint64_t first_ns, last_ns;
} pc_entry;

typedef struct pc_engine_stats {
    /* Counted into the table (what take's entries add up to). SASS metrics
     * count records here and in the drops and losses below, never values. */
    uint64_t samples;
    uint64_t samples_read;    /* moved out of the hardware: samples + aggregate_drops */
    uint64_t samples_lost;    /* the hardware lost them (its buffer was full) */
    uint64_t aggregate_drops; /* read, but their key did not fit in the table */
    uint64_t reads;           /* read calls */
    uint64_t arms;
    uint64_t disarms;
    uint64_t busy_refusals;  /* arms turned down by the lease */
    uint64_t start_failures; /* arms the hardware's start refused */
    uint64_t entries_held;   /* keys in the table now (open windows and not yet taken) */
    /* The last disarmed window's share of samples, samples_lost and
     * aggregate_drops (what its window record should say). */
    uint64_t window_samples;
    uint64_t window_lost;
    uint64_t window_drops;
    uint64_t entries_made;   /* keys made in the table, ever */
    uint64_t window_entries; /* of those, the last disarmed window's */
} pc_engine_stats;

typedef struct pc_engine pc_engine;

/*
 * Reads FLARE_PC_PERIOD (a duration with a unit: "10us", "1ms"; default
 * PC_PERIOD_DEFAULT_NS), within [PC_PERIOD_MIN_NS, PC_PERIOD_MAX_NS]. 0, or
 * FLARE_ERR_INVALID_ARGUMENT with error naming the variable, the value and
 * the rule it broke ("FLARE_PC_PERIOD=5: '5' has no unit ...").
 */
int pc_settings_from_environment(uint64_t *period_ns, char *error, size_t error_size);

/*
 * Makes an engine over hardware (which the caller owns and keeps alive until
 * destroy). context_id is the lease owner key (non-zero; distinct from every
 * other engine's that must not share the device). Reads FLARE_PC_PERIOD now,
 * once: a bad value makes arms without an explicit interval fail with its
 * message. FLARE_OK, FLARE_ERR_INVALID_ARGUMENT (NULL ops, a missing op, a
 * zero id) or FLARE_ERR_NO_MEMORY. Starts no thread (the first arm does).
 */
int pc_engine_create(const pc_hardware_ops *ops, void *hardware, uint64_t context_id,
                     pc_engine **out);
/* Disarms if armed (at the clock's now), stops the drain thread, calls the
 * hardware's release and frees the engine and every entry not taken. */
void pc_engine_destroy(pc_engine *engine);

/*
 * Starts sampling device (>= 0) for the window config names (config may be
 * NULL: window 0, the default period). Takes the device's lease for the
 * engine's context first. Returns:
 *   FLARE_OK;
 *   BACKEND_ENGINE_BUSY when another context holds the device, with reason
 *     "PC sampling busy, held by context N on device D" (nothing armed);
 *   FLARE_ERR_BACKEND when the hardware's start failed, with its reason (the
 *     lease is given back);
 *   FLARE_ERR_INVALID_ARGUMENT for a bad device or period (config's, or
 *     FLARE_PC_PERIOD's when config has none), with the reason;
 *   FLARE_ERR_STATE when already armed.
 * now_ns is the window's open on flare's clock (kept, not compared).
 */
int pc_engine_arm(pc_engine *engine, int device, const backend_engine_config *config,
                  uint64_t now_ns, char *reason, size_t reason_size);
/*
 * Stops sampling, reads what the hardware still holds into the window,
 * gives the lease back and closes the window (its entries become takeable).
 * result (may be NULL) gets the arm and disarm times and the samples counted
 * into the window's entries (SASS metrics: the window's keys, one per
 * instruction and metric, as values of different metrics do not add up). FLARE_OK;
 * FLARE_ERR_BACKEND when the hardware's stop failed (everything else still done); FLARE_ERR_STATE
 * when not armed or device is not the one armed.
 */
int pc_engine_disarm(pc_engine *engine, int device, uint64_t now_ns, backend_engine_result *result);
/* 0 when an arm without an explicit interval could succeed as far as the
 * engine's settings go; else FLARE_ERR_INVALID_ARGUMENT with the reason.
 * The lease is not tried (another context may change it at any time). */
int pc_engine_probe(pc_engine *engine, char *reason, size_t reason_size);

/* Moves up to max entries of disarmed windows to out, oldest first (windows
 * in arm order; within a window, keys in the order first seen) and frees
 * their room in the table. Never returns an entry twice, nor one of the
 * window still armed. Collector thread; may run beside the drain thread. */
size_t pc_engine_take(pc_engine *engine, pc_entry *out, size_t max);
void pc_engine_stats_get(pc_engine *engine, pc_engine_stats *stats);
const char *pc_engine_name(pc_engine *engine);
pc_engine_kind pc_engine_kind_of(pc_engine *engine);

/* Sets how many keys the table holds (1 .. 16 * PC_AGGREGATE_MAX), for
 * tests and small machines. Only while the table is empty and nothing is
 * armed: FLARE_OK, FLARE_ERR_STATE, FLARE_ERR_INVALID_ARGUMENT or
 * FLARE_ERR_NO_MEMORY (the old table is kept). */
int pc_engine_set_aggregate_capacity(pc_engine *engine, size_t capacity);
/* Reads FLARE_PC_PERIOD again (a session starts: the engine may outlive the
 * last one, whose value, good or bad, no longer stands). Not while a window
 * can arm (the session calls it before its collector starts). */
void pc_engine_reload_settings(pc_engine *engine);
/* Test hook: the drain thread skips reading while paused (to make the
 * hardware buffer overflow). Disarm still reads what is left. */
void pc_engine_pause_drain(pc_engine *engine, int paused);

#endif /* FLARE_PCSAMP_PC_ENGINE_H */
