/*
 * sim_pc.c: simulated PC sampling hardware (sim_pc.h): the kernel slots
 * that stream workers mark, one sampler thread per started unit, and the
 * finite ring the engine reads.
 *
 * Slots are written by their own thread only and read by samplers, through
 * a sequence count (odd while a write is under way): a sampler retries a
 * torn read a few times and skips the slot for one tick if it keeps losing,
 * so a kernel's thread never waits for a sampler. Every field is atomic;
 * the stores after the odd count are release stores and the sampler's loads
 * before its second look at the count are acquire loads, which orders them
 * without fences.
 *
 * A simulated SM runs only while its worker thread runs: a busy slot whose
 * thread has used no CPU time since the unit's previous tick (the operating
 * system preempted it, or the kernel's body sleeps) is skipped for that tick
 * and counted in idle_skips. Otherwise a preempted worker would be sampled
 * frozen at whatever it marked last, for as long as the machine keeps it
 * off a core, which on a busy machine turns a 90/10 split into 10/90.
 *
 * A unit's mutex guards its ring, its counters and its sampler's control;
 * it is held while a tick writes its samples and never across a wait other
 * than the sampler's timed sleep (which releases it).
 * Must never: block or allocate on a kernel's thread, or grow the ring.
 */
#include "backend/sim/sim_pc.h"
#include "backend/sim/sim_code.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim_internal.h"
#include "backend/sim/sim_sass.h"
#include "core/clock.h"
#include "flare/flare.h"

/* Tries a sampler makes to read one slot consistently in one tick. */
#define SNAPSHOT_TRIES 8

/* ---- the kernel slots ---- */

typedef struct sim_pc_slot {
    atomic_int claimed; /* owned by a thread */
    atomic_uint seq;    /* odd while its thread writes */
    atomic_int busy;    /* a kernel runs */
    atomic_int device;
    _Atomic(const char *) kernel;
    _Atomic uint64_t pc_offset;
    atomic_uint stall;
    atomic_int cpu_clock_valid;
    _Atomic clockid_t cpu_clock; /* the owner thread's CPU-time clock */
} sim_pc_slot;

typedef struct slot_snapshot {
    int busy;
    int device;
    const char *kernel;
    uint64_t pc_offset;
    uint32_t stall;
    int cpu_clock_valid;
    clockid_t cpu_clock;
} slot_snapshot;

static sim_pc_slot slots[SIM_PC_SLOTS];
static _Thread_local sim_pc_slot *thread_slot;
/* The calling thread's kernel, for SASS metrics: kept apart from the slot,
 * so a kernel whose thread found no free slot still counts its marks. */
static _Thread_local const char *sass_kernel;
static _Thread_local int sass_device;
static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;
static int slot_key_ready;
static _Atomic uint64_t unsampled_kernels;

static unsigned write_begin(sim_pc_slot *slot)
{
    unsigned seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    atomic_store_explicit(&slot->seq, seq + 1, memory_order_relaxed);
    return seq;
}

static void write_end(sim_pc_slot *slot, unsigned seq)
{
    atomic_store_explicit(&slot->seq, seq + 2, memory_order_release);
}

/* The key's destructor: the exiting thread gives its slot back. */
static void slot_release(void *value)
{
    sim_pc_slot *slot = value;
    unsigned seq = write_begin(slot);
    atomic_store_explicit(&slot->busy, 0, memory_order_release);
    atomic_store_explicit(&slot->kernel, NULL, memory_order_release);
    write_end(slot, seq);
    atomic_store_explicit(&slot->claimed, 0, memory_order_release);
}

static void slot_key_create(void)
{
    slot_key_ready = pthread_key_create(&slot_key, slot_release) == 0;
}

/* The calling thread's slot, claimed on first use; NULL when all are taken
 * (or no key could be made to give one back at thread exit). */
static sim_pc_slot *slot_claim(void)
{
    if (thread_slot != NULL)
        return thread_slot;
    pthread_once(&slot_key_once, slot_key_create);
    if (!slot_key_ready)
        return NULL;
    for (int i = 0; i < SIM_PC_SLOTS; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&slots[i].claimed, &expected, 1)) {
            thread_slot = &slots[i];
            pthread_setspecific(slot_key, thread_slot);
            return thread_slot;
        }
    }
    return NULL;
}

void sim_pc_kernel_begin(int device, const char *name)
{
    sass_kernel = name != NULL ? name : "?";
    sass_device = device;
    sim_sass_count(device, sass_kernel, 0); /* its first instruction */
    sim_pc_slot *slot = slot_claim();
    if (slot == NULL) {
        atomic_fetch_add_explicit(&unsampled_kernels, 1, memory_order_relaxed);
        return;
    }
    clockid_t cpu_clock;
    int cpu_clock_valid = pthread_getcpuclockid(pthread_self(), &cpu_clock) == 0;
    unsigned seq = write_begin(slot);
    atomic_store_explicit(&slot->cpu_clock_valid, cpu_clock_valid, memory_order_release);
    if (cpu_clock_valid)
        atomic_store_explicit(&slot->cpu_clock, cpu_clock, memory_order_release);
    atomic_store_explicit(&slot->device, device, memory_order_release);
    atomic_store_explicit(&slot->kernel, name != NULL ? name : "?", memory_order_release);
    atomic_store_explicit(&slot->pc_offset, 0, memory_order_release);
    atomic_store_explicit(&slot->stall, SIM_PC_STALL_SELECTED, memory_order_release);
    atomic_store_explicit(&slot->busy, 1, memory_order_release);
    write_end(slot, seq);
}

void sim_pc_kernel_end(void)
{
    sass_kernel = NULL;
    sim_pc_slot *slot = thread_slot;
    if (slot == NULL)
        return;
    unsigned seq = write_begin(slot);
    atomic_store_explicit(&slot->busy, 0, memory_order_release);
    atomic_store_explicit(&slot->kernel, NULL, memory_order_release);
    write_end(slot, seq);
}

void sim_pc_mark(uint64_t pc_offset, uint32_t stall_reason)
{
    if (sass_kernel != NULL)
        sim_sass_count(sass_device, sass_kernel, pc_offset);
    sim_pc_slot *slot = thread_slot;
    if (slot == NULL || !atomic_load_explicit(&slot->busy, memory_order_relaxed))
        return;
    unsigned seq = write_begin(slot);
    atomic_store_explicit(&slot->pc_offset, pc_offset, memory_order_release);
    atomic_store_explicit(&slot->stall, stall_reason, memory_order_release);
    write_end(slot, seq);
}

/* A consistent copy of slot; 0 when its thread kept writing. */
static int slot_read(sim_pc_slot *slot, slot_snapshot *out)
{
    for (int attempt = 0; attempt < SNAPSHOT_TRIES; attempt++) {
        unsigned before = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (before & 1u)
            continue;
        out->busy = atomic_load_explicit(&slot->busy, memory_order_acquire);
        out->device = atomic_load_explicit(&slot->device, memory_order_acquire);
        out->kernel = atomic_load_explicit(&slot->kernel, memory_order_acquire);
        out->pc_offset = atomic_load_explicit(&slot->pc_offset, memory_order_acquire);
        out->stall = atomic_load_explicit(&slot->stall, memory_order_acquire);
        out->cpu_clock_valid = atomic_load_explicit(&slot->cpu_clock_valid, memory_order_acquire);
        out->cpu_clock = atomic_load_explicit(&slot->cpu_clock, memory_order_acquire);
        if (atomic_load_explicit(&slot->seq, memory_order_relaxed) == before)
            return 1;
    }
    return 0;
}

/* ---- stall reasons ---- */

static const char *const stall_names[SIM_PC_STALL_COUNT] = {
    [SIM_PC_STALL_SELECTED] = "selected",
    [SIM_PC_STALL_LONG_SCOREBOARD] = "long_scoreboard",
    [SIM_PC_STALL_SHORT_SCOREBOARD] = "short_scoreboard",
    [SIM_PC_STALL_MATH_PIPE_THROTTLE] = "math_pipe_throttle",
    [SIM_PC_STALL_BARRIER] = "barrier",
    [SIM_PC_STALL_NOT_SELECTED] = "not_selected",
    [SIM_PC_STALL_WAIT] = "wait",
    [SIM_PC_STALL_MIO_THROTTLE] = "mio_throttle",
    [SIM_PC_STALL_LG_THROTTLE] = "lg_throttle",
    [SIM_PC_STALL_BRANCH_RESOLVING] = "branch_resolving",
    [SIM_PC_STALL_NO_INSTRUCTION] = "no_instruction",
    [SIM_PC_STALL_MEMBAR] = "membar",
    [SIM_PC_STALL_SLEEPING] = "sleeping",
};

const char *sim_pc_stall_reason_name(uint32_t reason)
{
    return reason < SIM_PC_STALL_COUNT ? stall_names[reason] : "unknown";
}

/* ---- faults ---- */

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_released;    /* CLOCK_MONOTONIC; initialised with the units */
static uint32_t buffer_samples_setting; /* guarded by fault_lock; 0: default */
static uint32_t starts_to_fail;         /* guarded */
static uint32_t stops_to_fail;          /* guarded */
static int reads_hold;                  /* guarded */
static int reads_waiting;               /* guarded */
static _Atomic uint64_t stall_until_ns;

void sim_pc_set_buffer_samples(uint32_t samples)
{
    pthread_mutex_lock(&fault_lock);
    buffer_samples_setting = samples;
    pthread_mutex_unlock(&fault_lock);
}

void sim_pc_fail_next_starts(uint32_t count)
{
    pthread_mutex_lock(&fault_lock);
    starts_to_fail = count;
    pthread_mutex_unlock(&fault_lock);
}

void sim_pc_fail_next_stops(uint32_t count)
{
    pthread_mutex_lock(&fault_lock);
    stops_to_fail = count;
    pthread_mutex_unlock(&fault_lock);
}

void sim_pc_stall_sampler(uint64_t duration_ns)
{
    atomic_store(&stall_until_ns, duration_ns != 0 ? sim_clock_ns() + duration_ns : 0);
}

/* ---- the units ---- */

typedef struct sim_pc_unit {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* CLOCK_MONOTONIC: stop wakes the sampler */
    int device;
    int running;
    pthread_t sampler;
    int sampler_started;
    uint64_t period_ns;
    pc_raw_sample *ring;
    uint32_t capacity, head, count;
    uint64_t lost_pending; /* lost since the last read */
    uint64_t produced, lost, ticks, stalled_ticks, idle_skips;
    uint64_t last_cpu_ns[SIM_PC_SLOTS]; /* each slot's thread's CPU time at the last tick */
} sim_pc_unit;

static sim_pc_unit units[SIM_DEVICE_MAX];
static pthread_once_t units_once = PTHREAD_ONCE_INIT;

static void units_init(void)
{
    for (int device = 0; device < SIM_DEVICE_MAX; device++) {
        pthread_mutex_init(&units[device].lock, NULL);
        core_cond_init_monotonic(&units[device].wake);
        units[device].device = device;
    }
    core_cond_init_monotonic(&hold_released);
}

void *sim_pc_hardware(int device)
{
    if (device < 0 || device >= SIM_DEVICE_MAX)
        return NULL;
    pthread_once(&units_once, units_init);
    return &units[device];
}

static struct timespec timespec_at(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
}

/* Whether slot index's thread has run since the unit's last tick (lock
 * held). A thread that has exited (its clock is gone) has not. */
static int slot_progressed(sim_pc_unit *unit, int index, const slot_snapshot *snapshot)
{
    if (!snapshot->cpu_clock_valid)
        return 1; /* no clock to tell: sampled as if it ran */
    struct timespec cpu;
    if (clock_gettime(snapshot->cpu_clock, &cpu) != 0)
        return 0;
    uint64_t cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
    int progressed = cpu_ns != unit->last_cpu_ns[index];
    unit->last_cpu_ns[index] = cpu_ns;
    return progressed;
}

/* One tick (lock held): one sample per busy slot of the unit's device whose
 * thread has run since the last tick, into the ring or, when it is full,
 * counted lost. */
static void sample_slots(sim_pc_unit *unit, uint64_t now_ns)
{
    for (int i = 0; i < SIM_PC_SLOTS; i++) {
        slot_snapshot snapshot;
        if (!atomic_load_explicit(&slots[i].claimed, memory_order_acquire) ||
            !slot_read(&slots[i], &snapshot) || !snapshot.busy || snapshot.kernel == NULL ||
            snapshot.device != unit->device)
            continue;
        if (!slot_progressed(unit, i, &snapshot)) {
            unit->idle_skips++;
            continue;
        }
        unit->produced++;
        if (unit->count == unit->capacity) {
            unit->lost++;
            unit->lost_pending++;
            continue;
        }
        pc_raw_sample *sample = &unit->ring[(unit->head + unit->count) % unit->capacity];
        unit->count++;
        sample->count = 1;
        sample->time_ns = now_ns;
        sample->device = unit->device;
        sample->stall_reason = snapshot.stall;
        sample->pc_offset = snapshot.pc_offset;
        sample->function = snapshot.kernel; /* the registry's: lives with the process */
        sample->file = snapshot.pc_offset < SIM_PC_LINES_END ? SIM_PC_SOURCE_FILE : NULL;
        sample->line = snapshot.pc_offset < SIM_PC_LINES_END ? SIM_PC_LINE(snapshot.pc_offset) : 0;
        sample->code = snapshot.pc_offset < SIM_PC_LINES_END ? NULL : sim_code_of(snapshot.kernel);
    }
}

static void *sampler_main(void *argument)
{
    pthread_setname_np(pthread_self(), "flare-sim-pc");
    sim_pc_unit *unit = argument;
    pthread_mutex_lock(&unit->lock);
    uint64_t next = sim_clock_ns() + unit->period_ns;
    while (unit->running) {
        uint64_t now = sim_clock_ns();
        if (now < next) {
            struct timespec deadline = timespec_at(next);
            pthread_cond_timedwait(&unit->wake, &unit->lock, &deadline);
            continue;
        }
        /* Ticks missed while this thread waited for a core are not taken. */
        next = next + unit->period_ns > now ? next + unit->period_ns : now + unit->period_ns;
        if (now < atomic_load(&stall_until_ns)) {
            unit->stalled_ticks++;
            continue;
        }
        unit->ticks++;
        sample_slots(unit, now);
    }
    pthread_mutex_unlock(&unit->lock);
    return NULL;
}

/* Sizes the ring for a start (lock held); what an earlier window left unread
 * is counted lost, never dropped silently. 0 or FLARE_ERR_NO_MEMORY. */
static int ring_prepare(sim_pc_unit *unit, uint32_t capacity)
{
    unit->lost_pending += unit->count;
    unit->lost += unit->count;
    unit->count = 0;
    unit->head = 0;
    if (unit->ring != NULL && unit->capacity == capacity)
        return FLARE_OK;
    pc_raw_sample *ring = calloc(capacity, sizeof(*ring));
    if (ring == NULL)
        return FLARE_ERR_NO_MEMORY;
    free(unit->ring);
    unit->ring = ring;
    unit->capacity = capacity;
    return FLARE_OK;
}

/* The fault and the ring size a start sees. 1 when this start must fail. */
static int start_settings(uint32_t *capacity)
{
    pthread_mutex_lock(&fault_lock);
    int fail = starts_to_fail > 0;
    if (fail)
        starts_to_fail--;
    *capacity = buffer_samples_setting != 0 ? buffer_samples_setting : SIM_PC_BUFFER_SAMPLES;
    pthread_mutex_unlock(&fault_lock);
    return fail;
}

/* Starts the sampler thread (lock held), signals blocked as flare's threads
 * have them. 0, or FLARE_ERR_BACKEND. */
static int sampler_launch(sim_pc_unit *unit)
{
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int created = pthread_create(&unit->sampler, NULL, sampler_main, unit);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    unit->sampler_started = created == 0;
    return created == 0 ? FLARE_OK : FLARE_ERR_BACKEND;
}

static int sim_pc_start(void *hardware, int device, uint64_t period_ns, char *reason,
                        size_t reason_size)
{
    sim_pc_unit *unit = hardware;
    uint32_t capacity = 0;
    if (device != unit->device) {
        snprintf(reason, reason_size, "sim PC sampling: this unit samples device %d, not %d",
                 unit->device, device);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (start_settings(&capacity)) {
        snprintf(reason, reason_size, "sim PC sampling: configuration failed (injected)");
        return FLARE_ERR_BACKEND;
    }
    pthread_mutex_lock(&unit->lock);
    int status = FLARE_ERR_STATE;
    if (unit->running || unit->sampler_started) {
        snprintf(reason, reason_size, "sim PC sampling: device %d is already sampling", device);
    } else {
        /* Counters restart with each start; lost also counts what an
         * earlier window left unread (ring_prepare). */
        unit->produced = unit->lost = unit->ticks = unit->stalled_ticks = unit->idle_skips = 0;
        memset(unit->last_cpu_ns, 0, sizeof(unit->last_cpu_ns));
        if ((status = ring_prepare(unit, capacity)) != FLARE_OK)
            snprintf(reason, reason_size, "sim PC sampling: no memory for %u samples", capacity);
    }
    if (status == FLARE_OK) {
        unit->period_ns = period_ns > SIM_PC_PERIOD_FLOOR_NS ? period_ns : SIM_PC_PERIOD_FLOOR_NS;
        unit->running = 1;
        if ((status = sampler_launch(unit)) != FLARE_OK) {
            unit->running = 0;
            snprintf(reason, reason_size, "sim PC sampling: no sampler thread");
        }
    }
    pthread_mutex_unlock(&unit->lock);
    return status;
}

static int sim_pc_stop(void *hardware, char *reason, size_t reason_size)
{
    sim_pc_unit *unit = hardware;
    pthread_mutex_lock(&unit->lock);
    if (!unit->running) {
        pthread_mutex_unlock(&unit->lock);
        snprintf(reason, reason_size, "sim PC sampling: device %d is not sampling", unit->device);
        return FLARE_ERR_STATE;
    }
    unit->running = 0;
    pthread_cond_broadcast(&unit->wake);
    pthread_t sampler = unit->sampler;
    pthread_mutex_unlock(&unit->lock);
    /* The sampler wakes at once and leaves after at most the tick in hand. */
    pthread_join(sampler, NULL);
    pthread_mutex_lock(&unit->lock);
    unit->sampler_started = 0;
    pthread_mutex_unlock(&unit->lock);
    pthread_mutex_lock(&fault_lock);
    int fail = stops_to_fail > 0;
    if (fail)
        stops_to_fail--;
    pthread_mutex_unlock(&fault_lock);
    if (fail) {
        snprintf(reason, reason_size, "sim PC sampling: stop failed (injected)");
        return FLARE_ERR_BACKEND;
    }
    return FLARE_OK;
}

/* Waits while reads are held (sim_pc_hold_reads), at most SIM_PC_HOLD_LIMIT_NS. */
static void read_hold_wait(void)
{
    pthread_mutex_lock(&fault_lock);
    if (reads_hold) {
        struct timespec deadline = sim_deadline_after_ns(SIM_PC_HOLD_LIMIT_NS);
        reads_waiting++;
        while (reads_hold && pthread_cond_timedwait(&hold_released, &fault_lock, &deadline) == 0) {
        }
        reads_waiting--;
    }
    pthread_mutex_unlock(&fault_lock);
}

static size_t sim_pc_read(void *hardware, pc_raw_sample *out, size_t max, uint64_t *lost)
{
    sim_pc_unit *unit = hardware;
    read_hold_wait();
    pthread_mutex_lock(&unit->lock);
    size_t moved = 0;
    while (moved < max && unit->count > 0) {
        out[moved++] = unit->ring[unit->head];
        unit->head = (unit->head + 1) % unit->capacity;
        unit->count--;
    }
    *lost += unit->lost_pending;
    unit->lost_pending = 0;
    pthread_mutex_unlock(&unit->lock);
    return moved;
}

static const char *sim_pc_hw_stall_name(void *hardware, uint32_t reason)
{
    (void)hardware;
    return sim_pc_stall_reason_name(reason);
}

/* The engine is done with the unit: its ring is freed unless another engine
 * has it sampling (units are shared by every engine on one device). */
static void sim_pc_release(void *hardware)
{
    sim_pc_unit *unit = hardware;
    pthread_mutex_lock(&unit->lock);
    if (!unit->running && !unit->sampler_started) {
        unit->lost_pending += unit->count;
        unit->lost += unit->count;
        unit->count = 0;
        free(unit->ring);
        unit->ring = NULL;
        unit->capacity = 0;
    }
    pthread_mutex_unlock(&unit->lock);
}

static const pc_hardware_ops sim_pc_ops = {
    .name = "sim-pc-sampling",
    .start = sim_pc_start,
    .stop = sim_pc_stop,
    .read = sim_pc_read,
    .stall_reason_name = sim_pc_hw_stall_name,
    .release = sim_pc_release,
};

const pc_hardware_ops *sim_pc_hardware_ops(void)
{
    return &sim_pc_ops;
}

/* ---- test hooks ---- */

void sim_pc_hold_reads(int hold)
{
    pthread_once(&units_once, units_init);
    pthread_mutex_lock(&fault_lock);
    reads_hold = hold;
    pthread_cond_broadcast(&hold_released);
    pthread_mutex_unlock(&fault_lock);
}

int sim_pc_reads_held(void)
{
    pthread_mutex_lock(&fault_lock);
    int waiting = reads_waiting;
    pthread_mutex_unlock(&fault_lock);
    return waiting;
}

void sim_pc_reset(void)
{
    sim_pc_hold_reads(0);
    pthread_mutex_lock(&fault_lock);
    buffer_samples_setting = 0;
    starts_to_fail = 0;
    stops_to_fail = 0;
    pthread_mutex_unlock(&fault_lock);
    atomic_store(&stall_until_ns, 0);
}

void sim_pc_stats_get(int device, sim_pc_stats *stats)
{
    *stats = (sim_pc_stats){.unsampled_kernels = atomic_load(&unsampled_kernels)};
    sim_pc_unit *unit = sim_pc_hardware(device);
    if (unit == NULL)
        return;
    pthread_mutex_lock(&unit->lock);
    stats->produced = unit->produced;
    stats->lost = unit->lost;
    stats->ticks = unit->ticks;
    stats->stalled_ticks = unit->stalled_ticks;
    stats->idle_skips = unit->idle_skips;
    stats->running = unit->running;
    pthread_mutex_unlock(&unit->lock);
}

uint64_t sim_pc_samples_produced(int device)
{
    sim_pc_stats stats;
    sim_pc_stats_get(device, &stats);
    return stats.produced;
}
