/*
 * sim_sass.c: the simulated SASS metrics hardware (sim_sass.h): one counter
 * table per device, written by kernels' threads with atomics only, handed
 * to the engine as records once stopped.
 *
 * A mark and a stop meet Dekker-style: the mark raises the unit's inflight
 * count and then reads started; stop clears started and then waits for
 * inflight to reach 0 (both sequentially consistent), so after stop no mark
 * touches the table and read sees every count. A row is claimed by one
 * compare-and-swap (empty -> writing), its key written, then published
 * (ready); another thread that meets a row being written waits for it a
 * bounded number of turns and otherwise counts its mark lost, so a kernel's
 * thread never waits on anything but another kernel's two stores.
 *
 * A unit's mutex guards start, stop, read and the table's memory; it is
 * never taken on a kernel's thread. Must never: block or allocate on a
 * kernel's thread, grow a started table, or lose a count uncounted.
 */
#include "backend/sim/sim_sass.h"
#include "backend/sim/sim_code.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim_internal.h"
#include "backend/sim/sim_pc.h"
#include "flare/flare.h"

/* Turns a mark waits for another thread's row to be published. */
#define CLAIM_SPINS 100000
/* Turns stop waits for marks under way (each a few atomics). */
#define STOP_SPINS 10000000

enum { ROW_EMPTY = 0, ROW_WRITING = 1, ROW_READY = 2 };

typedef struct sass_row {
    atomic_int state;
    _Atomic(const char *) kernel;
    _Atomic uint64_t pc_offset;
    _Atomic uint64_t executed;
} sass_row;

typedef struct sass_unit {
    int device;
    atomic_int started;
    atomic_int inflight;
    _Atomic uint64_t lost; /* marks that found no row, since the last read */
    pthread_mutex_t lock;  /* rows' memory, capacity, cursor, readable */
    sass_row *rows;
    uint32_t capacity;
    int readable;    /* stopped with counts not yet all read */
    uint32_t cursor; /* next row * SIM_SASS_METRICS + metric to hand over */
} sass_unit;

static sass_unit units[SIM_DEVICE_MAX];
static pthread_once_t units_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t starts_to_fail; /* guarded */
static uint32_t capacity_next;  /* guarded; 0: default */

static void units_init(void)
{
    for (int device = 0; device < SIM_DEVICE_MAX; device++) {
        units[device].device = device;
        pthread_mutex_init(&units[device].lock, NULL);
    }
}

void *sim_sass_hardware(int device)
{
    if (device < 0 || device >= SIM_DEVICE_MAX)
        return NULL;
    pthread_once(&units_once, units_init);
    return &units[device];
}

/* ---- on a kernel's thread ---- */

static uint64_t row_hash(const char *kernel, uint64_t pc_offset)
{
    uint64_t hash = (uint64_t)(uintptr_t)kernel * 0x9e3779b97f4a7c15ull;
    return (hash ^ (pc_offset * 0xff51afd7ed558ccdull)) >> 17;
}

/* Waits (bounded) for a row another thread is writing; its state after. */
static int wait_published(sass_row *row)
{
    int state = atomic_load_explicit(&row->state, memory_order_acquire);
    for (int spin = 0; state == ROW_WRITING && spin < CLAIM_SPINS; spin++) {
        if (spin % 64 == 63)
            sched_yield();
        state = atomic_load_explicit(&row->state, memory_order_acquire);
    }
    return state;
}

/* Adds one execution of (kernel, pc_offset) to unit's table; 0, or -1 when
 * it found no row (full, or a row kept being written). */
static int table_add(sass_unit *unit, const char *kernel, uint64_t pc_offset)
{
    uint32_t capacity = unit->capacity;
    uint64_t start = row_hash(kernel, pc_offset) % capacity;
    for (uint32_t probe = 0; probe < capacity; probe++) {
        sass_row *row = &unit->rows[(start + probe) % capacity];
        int state = atomic_load_explicit(&row->state, memory_order_acquire);
        int expected = ROW_EMPTY;
        if (state == ROW_EMPTY &&
            atomic_compare_exchange_strong(&row->state, &expected, ROW_WRITING)) {
            atomic_store_explicit(&row->kernel, kernel, memory_order_relaxed);
            atomic_store_explicit(&row->pc_offset, pc_offset, memory_order_relaxed);
            atomic_store_explicit(&row->state, ROW_READY, memory_order_release);
            atomic_fetch_add_explicit(&row->executed, 1, memory_order_relaxed);
            return 0;
        }
        if (state != ROW_READY)
            state = wait_published(row);
        if (state != ROW_READY)
            return -1;
        if (atomic_load_explicit(&row->kernel, memory_order_relaxed) == kernel &&
            atomic_load_explicit(&row->pc_offset, memory_order_relaxed) == pc_offset) {
            atomic_fetch_add_explicit(&row->executed, 1, memory_order_relaxed);
            return 0;
        }
    }
    return -1;
}

void sim_sass_count(int device, const char *kernel, uint64_t pc_offset)
{
    if (device < 0 || device >= SIM_DEVICE_MAX || kernel == NULL)
        return;
    sass_unit *unit = &units[device];
    if (!atomic_load_explicit(&unit->started, memory_order_relaxed))
        return; /* the common case, one load: nothing started */
    atomic_fetch_add(&unit->inflight, 1);
    if (atomic_load(&unit->started) && table_add(unit, kernel, pc_offset) != 0)
        atomic_fetch_add_explicit(&unit->lost, 1, memory_order_relaxed);
    atomic_fetch_sub(&unit->inflight, 1);
}

/* ---- the hardware ops (the engine's threads) ---- */

static uint32_t take_capacity(void)
{
    pthread_mutex_lock(&fault_lock);
    uint32_t rows = capacity_next != 0 ? capacity_next : SIM_SASS_INSTRUCTIONS;
    pthread_mutex_unlock(&fault_lock);
    return rows;
}

static int take_start_fault(void)
{
    pthread_mutex_lock(&fault_lock);
    int fail = starts_to_fail > 0;
    if (fail)
        starts_to_fail--;
    pthread_mutex_unlock(&fault_lock);
    return fail;
}

static int sass_start(void *hardware, int device, uint64_t period_ns, char *reason,
                      size_t reason_size)
{
    (void)period_ns;
    sass_unit *unit = hardware;
    if (unit == NULL || device != unit->device) {
        snprintf(reason, reason_size, "sim SASS metrics: this unit counts device %d only",
                 unit != NULL ? unit->device : -1);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (take_start_fault()) {
        snprintf(reason, reason_size, "sim SASS metrics: patching failed (injected)");
        return FLARE_ERR_BACKEND;
    }
    uint32_t capacity = take_capacity();
    pthread_mutex_lock(&unit->lock);
    /* A mark the last stop stopped waiting for must be out of the table
     * before it is freed or cleared. */
    for (long spin = 0; atomic_load(&unit->inflight) != 0 && spin < STOP_SPINS; spin++)
        sched_yield();
    if (atomic_load(&unit->inflight) != 0) {
        pthread_mutex_unlock(&unit->lock);
        snprintf(reason, reason_size, "sim SASS metrics: a kernel's count is still under way");
        return FLARE_ERR_BACKEND;
    }
    if (unit->rows == NULL || unit->capacity != capacity) {
        sass_row *rows = calloc(capacity, sizeof(*rows));
        if (rows == NULL) {
            pthread_mutex_unlock(&unit->lock);
            snprintf(reason, reason_size, "sim SASS metrics: no memory for %u rows", capacity);
            return FLARE_ERR_NO_MEMORY;
        }
        free(unit->rows);
        unit->rows = rows;
        unit->capacity = capacity;
    } else {
        memset(unit->rows, 0, (size_t)capacity * sizeof(*unit->rows));
    }
    unit->readable = 0;
    unit->cursor = 0;
    atomic_store(&unit->started, 1); /* publishes rows and capacity */
    pthread_mutex_unlock(&unit->lock);
    return FLARE_OK;
}

static int sass_stop(void *hardware, char *reason, size_t reason_size)
{
    (void)reason;
    (void)reason_size;
    sass_unit *unit = hardware;
    pthread_mutex_lock(&unit->lock);
    atomic_store(&unit->started, 0);
    for (long spin = 0; atomic_load(&unit->inflight) != 0 && spin < STOP_SPINS; spin++)
        sched_yield();
    unit->readable = unit->rows != NULL;
    unit->cursor = 0;
    pthread_mutex_unlock(&unit->lock);
    return FLARE_OK;
}

/* The record at cursor, if its row holds a count; 0 when none. */
static int record_at(const sass_unit *unit, uint32_t cursor, pc_raw_sample *out)
{
    sass_row *row = &unit->rows[cursor / SIM_SASS_METRICS];
    uint32_t metric = cursor % SIM_SASS_METRICS;
    uint64_t executed = atomic_load_explicit(&row->executed, memory_order_relaxed);
    if (atomic_load_explicit(&row->state, memory_order_acquire) != ROW_READY || executed == 0)
        return 0;
    uint64_t pc_offset = atomic_load_explicit(&row->pc_offset, memory_order_relaxed);
    int has_line = pc_offset < SIM_PC_LINES_END;
    *out = (pc_raw_sample){
        .count = metric == SIM_SASS_METRIC_INST ? executed : executed * SIM_SASS_WARP_THREADS,
        .time_ns = 0, /* counted at the window's edge */
        .device = unit->device,
        .stall_reason = metric,
        .pc_offset = pc_offset,
        .function = atomic_load_explicit(&row->kernel, memory_order_relaxed),
        .file = has_line ? SIM_PC_SOURCE_FILE : NULL,
        .line = has_line ? SIM_PC_LINE(pc_offset) : 0};
    if (!has_line)
        out->code = sim_code_of(out->function);
    return 1;
}

static size_t sass_read(void *hardware, pc_raw_sample *out, size_t max, uint64_t *lost)
{
    sass_unit *unit = hardware;
    *lost += atomic_exchange(&unit->lost, 0);
    size_t moved = 0;
    pthread_mutex_lock(&unit->lock);
    uint32_t end = unit->capacity * SIM_SASS_METRICS;
    while (unit->readable && moved < max && unit->cursor < end)
        moved += (size_t)record_at(unit, unit->cursor++, &out[moved]);
    if (unit->cursor >= end)
        unit->readable = 0;
    pthread_mutex_unlock(&unit->lock);
    return moved;
}

static const char *sass_metric_name(void *hardware, uint32_t metric)
{
    (void)hardware;
    switch (metric) {
    case SIM_SASS_METRIC_INST:
        return "smsp__sass_inst_executed";
    case SIM_SASS_METRIC_THREAD_INST:
        return "smsp__sass_thread_inst_executed";
    }
    return "unknown";
}

static const pc_hardware_ops sass_ops = {
    .name = "sim-sass-metrics",
    .kind = PC_ENGINE_SASS,
    .start = sass_start,
    .stop = sass_stop,
    .read = sass_read,
    .stall_reason_name = sass_metric_name,
    .release = NULL, /* the units live for the process */
};

const pc_hardware_ops *sim_sass_hardware_ops(void)
{
    return &sass_ops;
}

/* ---- faults ---- */

void sim_sass_set_capacity(uint32_t rows)
{
    pthread_mutex_lock(&fault_lock);
    capacity_next = rows > SIM_SASS_INSTRUCTIONS ? SIM_SASS_INSTRUCTIONS : rows;
    pthread_mutex_unlock(&fault_lock);
}

void sim_sass_fail_next_starts(uint32_t count)
{
    pthread_mutex_lock(&fault_lock);
    starts_to_fail = count;
    pthread_mutex_unlock(&fault_lock);
}

void sim_sass_reset(void)
{
    pthread_mutex_lock(&fault_lock);
    starts_to_fail = 0;
    capacity_next = 0;
    pthread_mutex_unlock(&fault_lock);
}
