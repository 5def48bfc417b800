/*
 * test_pc_engine.c: the PC sampling engine (pcsamp/pc_engine.c) on the
 * simulated PC sampling hardware (backend/sim/sim_pc.c), with real threads:
 * a "kernel" thread that plays a stream worker and marks where it is, the
 * sim's sampler thread, the engine's drain thread and, in one case, a
 * collector thread taking entries while windows come and go.
 *
 * Covered: the samples land where the kernel spends its time; counts add up
 * exactly (entries = samples, samples + drops = read, read + lost =
 * produced); the lease turns a second context and a PM engine's context
 * away, naming the holder; a full hardware ring loses and reports samples; a
 * failed start gives the lease back; a full aggregate table counts drops;
 * disarm during a read in progress, 50 windows in a row, a stalled sampler,
 * more kernel threads than slots; FLARE_PC_PERIOD; the stall reason names.
 *
 * Nothing waits a fixed time for another thread: conditions are polled with
 * TEST_WAIT_UNTIL, whose bound only turns a hang into a failure (the suite
 * runs on two cores kept busy by other work). The kernel thread spins on its
 * own CPU-time clock, so its split between offsets is by the time it ran, as
 * a warp's would be; the simulated sampler skips it while it is off a core.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/sim/sim_pc.h"
#include "flare/flare.h"
#include "pcsamp/pc_engine.h"
#include "test_util.h"
#include "tracebuf/lease.h"
#include "tracebuf/tracebuf.h"

#define US 1000ull
#define MS 1000000ull

#define HOT_OFFSET  0x100u
#define COLD_OFFSET 0x200u
/* Room for every entry a case takes. */
#define ENTRIES_MAX 20000u

/* ---- the kernel thread ---- */

typedef enum kernel_mode {
    KERNEL_HOT_COLD, /* one kernel: 900 us at HOT_OFFSET, 100 us at COLD_OFFSET, repeated */
    KERNEL_DISTINCT, /* one kernel: a new offset every 20 us (4096 of them) */
    KERNEL_LAUNCHES, /* kernels of 2 ms one after the other, three names, hot/cold inside */
} kernel_mode;

typedef struct kernel_thread {
    pthread_t thread;
    kernel_mode mode;
    atomic_int stop;
    atomic_int started;
    _Atomic uint64_t rounds;
} kernel_thread;

static const char *const launch_names[] = {"step_forward", "step_backward", "step_optimizer"};

/* The calling thread's CPU time: the simulated SM's clock (sim_pc.h samples
 * a kernel only while its thread runs, so the split is by the time it ran). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static void spin_until(uint64_t cpu_deadline_ns)
{
    while (thread_cpu_ns() < cpu_deadline_ns) {
    }
}

static void hot_cold_round(void)
{
    uint64_t began = thread_cpu_ns();
    sim_pc_mark(HOT_OFFSET, SIM_PC_STALL_LONG_SCOREBOARD);
    spin_until(began + 900 * US);
    sim_pc_mark(COLD_OFFSET, SIM_PC_STALL_MATH_PIPE_THROTTLE);
    spin_until(began + 1000 * US);
}

static void *kernel_main(void *argument)
{
    kernel_thread *kernel = argument;
    uint64_t round = 0;
    if (kernel->mode != KERNEL_LAUNCHES)
        sim_pc_kernel_begin(0, kernel->mode == KERNEL_HOT_COLD ? "hot_kernel" : "wide_kernel");
    atomic_store(&kernel->started, 1);
    while (!atomic_load(&kernel->stop)) {
        if (kernel->mode == KERNEL_HOT_COLD) {
            hot_cold_round();
        } else if (kernel->mode == KERNEL_DISTINCT) {
            sim_pc_mark(0x1000 + 16 * (round % 4096), SIM_PC_STALL_SELECTED);
            spin_until(thread_cpu_ns() + 20 * US);
        } else {
            sim_pc_kernel_begin(0, launch_names[round % 3]);
            hot_cold_round();
            hot_cold_round();
            sim_pc_kernel_end();
        }
        atomic_store(&kernel->rounds, ++round);
    }
    if (kernel->mode != KERNEL_LAUNCHES)
        sim_pc_kernel_end();
    return NULL;
}

/* File-wide so that the teardown of a failed case can stop and free them. */
static kernel_thread kernel;
static int kernel_running;
static pc_engine *engines[3];

static void kernel_start(kernel_mode mode)
{
    memset(&kernel, 0, sizeof(kernel));
    kernel.mode = mode;
    assert_int_equal(pthread_create(&kernel.thread, NULL, kernel_main, &kernel), 0);
    kernel_running = 1;
    TEST_WAIT_UNTIL(atomic_load(&kernel.started));
}

static void kernel_stop(void)
{
    if (!kernel_running)
        return;
    atomic_store(&kernel.stop, 1);
    pthread_join(kernel.thread, NULL);
    kernel_running = 0;
}

static pc_engine *engine_make(int index, uint64_t context_id)
{
    assert_int_equal(
        pc_engine_create(sim_pc_hardware_ops(), sim_pc_hardware(0), context_id, &engines[index]),
        FLARE_OK);
    return engines[index];
}

static int setup(void **state)
{
    (void)state;
    unsetenv("FLARE_PC_PERIOD");
    sim_pc_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sim_pc_reset(); /* lets a held read go first, or destroy's disarm would wait for it */
    kernel_stop();
    for (int i = 0; i < 3; i++) {
        pc_engine_destroy(engines[i]);
        engines[i] = NULL;
    }
    unsetenv("FLARE_PC_PERIOD");
    return 0;
}

static pc_engine_stats stats_of(pc_engine *engine)
{
    pc_engine_stats stats;
    pc_engine_stats_get(engine, &stats);
    return stats;
}

static backend_engine_config window(uint64_t window_id, uint64_t period_ns)
{
    return (backend_engine_config){
        .sample_interval_ns = period_ns, .label = "test", .window_id = window_id};
}

/* Everything take hands out now, appended to entries[*count]. */
static void take_all(pc_engine *engine, pc_entry *entries, size_t *count)
{
    size_t taken;
    while ((taken = pc_engine_take(engine, entries + *count, 64)) > 0) {
        *count += taken;
        assert_true(*count + 64 <= ENTRIES_MAX);
    }
}

static uint64_t entries_sum(const pc_entry *entries, size_t count)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += entries[i].samples;
    return sum;
}

/* Every sample the sim took is in the table, dropped by it, or lost. */
static void assert_accounted(pc_engine *engine, uint64_t produced)
{
    pc_engine_stats stats = stats_of(engine);
    assert_int_equal(stats.samples + stats.aggregate_drops, stats.samples_read);
    assert_int_equal(stats.samples_read + stats.samples_lost, produced);
}

/* ---- cases ---- */

static void test_stall_reason_names(void **state)
{
    (void)state;
    const pc_hardware_ops *ops = sim_pc_hardware_ops();
    void *hardware = sim_pc_hardware(0);
    assert_string_equal(ops->stall_reason_name(hardware, 0), "selected");
    assert_string_equal(ops->stall_reason_name(hardware, 1), "long_scoreboard");
    assert_string_equal(ops->stall_reason_name(hardware, 2), "short_scoreboard");
    assert_string_equal(ops->stall_reason_name(hardware, 3), "math_pipe_throttle");
    assert_string_equal(ops->stall_reason_name(hardware, 4), "barrier");
    assert_string_equal(ops->stall_reason_name(hardware, 5), "not_selected");
    assert_string_equal(ops->stall_reason_name(hardware, SIM_PC_STALL_COUNT), "unknown");
    assert_string_equal(ops->stall_reason_name(hardware, UINT32_MAX), "unknown");
    for (uint32_t reason = 0; reason < SIM_PC_STALL_COUNT; reason++) {
        const char *name = sim_pc_stall_reason_name(reason);
        assert_non_null(name);
        assert_true(strlen(name) < PC_STALL_NAME_MAX);
        for (const char *c = name; *c != '\0'; c++)
            assert_true((*c >= 'a' && *c <= 'z') || *c == '_');
    }
    assert_null(sim_pc_hardware(-1));
    assert_null(sim_pc_hardware(64));
}

static void test_period_settings(void **state)
{
    (void)state;
    char error[256];
    uint64_t period = 0;
    assert_int_equal(pc_settings_from_environment(&period, error, sizeof(error)), FLARE_OK);
    assert_int_equal(period, PC_PERIOD_DEFAULT_NS);
    setenv("FLARE_PC_PERIOD", "10us", 1);
    assert_int_equal(pc_settings_from_environment(&period, error, sizeof(error)), FLARE_OK);
    assert_int_equal(period, 10 * US);
    setenv("FLARE_PC_PERIOD", "2.5ms", 1);
    assert_int_equal(pc_settings_from_environment(&period, error, sizeof(error)), FLARE_OK);
    assert_int_equal(period, 2500 * US);
    const char *bad[] = {"5", "10 us", "-1us", "500ns", "2s", "fast"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("FLARE_PC_PERIOD", bad[i], 1);
        error[0] = '\0';
        assert_int_equal(pc_settings_from_environment(&period, error, sizeof(error)),
                         FLARE_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(error, "FLARE_PC_PERIOD="));
    }

    /* The engine reads it at create: arms without a period of their own
     * fail with its message; a window's own period still works. */
    setenv("FLARE_PC_PERIOD", "5", 1);
    pc_engine *engine = engine_make(0, 41);
    char reason[256] = "";
    assert_int_equal(pc_engine_probe(engine, reason, sizeof(reason)), FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(reason, "FLARE_PC_PERIOD=5"));
    backend_engine_config no_period = window(1, 0);
    reason[0] = '\0';
    assert_int_equal(pc_engine_arm(engine, 0, &no_period, test_now_ns(), reason, sizeof(reason)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(reason, "FLARE_PC_PERIOD=5"));
    assert_int_equal(tracebuf_lease_holder(0), 0);
    backend_engine_config too_short = window(1, 10);
    assert_int_equal(pc_engine_arm(engine, 0, &too_short, test_now_ns(), reason, sizeof(reason)),
                     FLARE_ERR_INVALID_ARGUMENT);
    backend_engine_config own = window(1, 50 * US);
    assert_int_equal(pc_engine_arm(engine, 0, &own, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), NULL), FLARE_OK);
}

static void test_samples_follow_the_kernel(void **state)
{
    (void)state;
    static pc_entry entries[ENTRIES_MAX];
    size_t count = 0;
    kernel_start(KERNEL_HOT_COLD);
    pc_engine *engine = engine_make(0, 11);
    backend_engine_config config = window(7, 20 * US);
    char reason[256] = "";
    uint64_t armed_ns = test_now_ns();
    assert_int_equal(pc_engine_arm(engine, 0, &config, armed_ns, reason, sizeof(reason)), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(0), 11);
    /* The drain thread moves samples while the window is open; the window
     * lasts long enough that a busy machine's preemptions average out. */
    TEST_WAIT_UNTIL(stats_of(engine).samples >= 500 && test_now_ns() - armed_ns >= 200 * MS);
    assert_int_equal(pc_engine_take(engine, entries, 16), 0); /* the window is still open */
    uint64_t disarmed_ns = test_now_ns();
    backend_engine_result result = {0};
    assert_int_equal(pc_engine_disarm(engine, 0, disarmed_ns, &result), FLARE_OK);
    uint64_t after_ns = test_now_ns();
    kernel_stop();
    assert_int_equal(tracebuf_lease_holder(0), 0);

    take_all(engine, entries, &count);
    pc_engine_stats stats = stats_of(engine);
    uint64_t hot = 0;
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(entries[i].window_id, 7);
        assert_int_equal(entries[i].device, 0);
        assert_string_equal(entries[i].function, "hot_kernel");
        assert_true(entries[i].samples > 0);
        assert_true(entries[i].first_ns <= entries[i].last_ns);
        assert_true(entries[i].first_ns >= armed_ns && entries[i].last_ns <= after_ns);
        if (entries[i].pc_offset == HOT_OFFSET &&
            strcmp(entries[i].stall_reason, "long_scoreboard") == 0)
            hot += entries[i].samples;
    }
    uint64_t total = entries_sum(entries, count);
    assert_int_equal(total, stats.samples);
    assert_int_equal(result.samples, stats.samples);
    assert_int_equal(result.armed_ns, armed_ns);
    assert_int_equal(result.disarmed_ns, disarmed_ns);
    assert_int_equal(stats.aggregate_drops, 0);
    assert_int_equal(stats.entries_held, 0);
    assert_int_equal(stats.arms, 1);
    assert_int_equal(stats.disarms, 1);
    assert_true(total >= 500);
    print_message("%llu of %llu samples at the hot offset (%.1f%%), %llu lost, %zu keys\n",
                  (unsigned long long)hot, (unsigned long long)total, 100.0 * hot / total,
                  (unsigned long long)stats.samples_lost, count);
    if (hot * 100 < total * 80)
        fail_msg("%llu of %llu samples at the hot offset", (unsigned long long)hot,
                 (unsigned long long)total);
    assert_accounted(engine, sim_pc_samples_produced(0));
    assert_int_equal(pc_engine_take(engine, entries, 16), 0); /* each entry once */
}

static void test_lease_between_contexts_and_engine_kinds(void **state)
{
    (void)state;
    pc_engine *first = engine_make(0, 101);
    pc_engine *second = engine_make(1, 102);
    backend_engine_config config = window(1, 50 * US);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(first, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(pc_engine_arm(first, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_ERR_STATE);
    assert_int_equal(pc_engine_arm(second, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     BACKEND_ENGINE_BUSY);
    assert_non_null(strstr(reason, "PC sampling busy, held by context 101"));
    assert_int_equal(stats_of(second).busy_refusals, 1);
    assert_int_equal(stats_of(second).arms, 0);
    assert_int_equal(pc_engine_disarm(second, 0, test_now_ns(), NULL), FLARE_ERR_STATE);
    assert_int_equal(pc_engine_disarm(first, 1, test_now_ns(), NULL), FLARE_ERR_STATE);
    assert_int_equal(pc_engine_disarm(first, 0, test_now_ns(), NULL), FLARE_OK);

    /* Once the first has given the device back, the second may have it. */
    assert_int_equal(pc_engine_arm(second, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(0), 102);
    assert_int_equal(pc_engine_disarm(second, 0, test_now_ns(), NULL), FLARE_OK);

    /* The lease decides between two engine kinds: a PM engine's context
     * holding the device turns PC sampling away the same way. */
    char holder[TRACEBUF_HOLDER_MAX];
    assert_int_equal(tracebuf_lease_acquire(0, 103, holder), FLARE_OK);
    reason[0] = '\0';
    assert_int_equal(pc_engine_arm(first, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     BACKEND_ENGINE_BUSY);
    assert_non_null(strstr(reason, "PC sampling busy, held by context 103"));
    /* ...and PC sampling holding it turns the PM engine away. */
    assert_int_equal(tracebuf_lease_release(0, 103), FLARE_OK);
    assert_int_equal(pc_engine_arm(first, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 103, holder), FLARE_ERR_STATE);
    assert_string_equal(holder, "context 101");
    assert_int_equal(pc_engine_disarm(first, 0, test_now_ns(), NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(0), 0);
    assert_int_equal(stats_of(first).busy_refusals, 1);

    assert_int_equal(pc_engine_arm(first, -1, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_ERR_UNSUPPORTED);
    assert_int_equal(
        pc_engine_arm(first, TRACEBUF_MAX_DEVICES, &config, test_now_ns(), reason, sizeof(reason)),
        FLARE_ERR_INVALID_ARGUMENT);
}

static void test_hardware_buffer_overflow(void **state)
{
    (void)state;
    static pc_entry entries[ENTRIES_MAX];
    size_t count = 0;
    sim_pc_set_buffer_samples(64);
    kernel_start(KERNEL_HOT_COLD);
    pc_engine *engine = engine_make(0, 12);
    pc_engine_pause_drain(engine, 1);
    backend_engine_config config = window(3, 20 * US);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(sim_pc_samples_produced(0) >= 1000);
    backend_engine_result result = {0};
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), &result), FLARE_OK);
    kernel_stop();

    pc_engine_stats stats = stats_of(engine);
    uint64_t produced = sim_pc_samples_produced(0);
    sim_pc_stats sim;
    sim_pc_stats_get(0, &sim);
    /* The drain never ran: disarm read what the ring kept, the rest was lost. */
    assert_int_equal(stats.samples_read, 64);
    assert_true(stats.samples_lost >= 1000 - 64);
    assert_int_equal(stats.samples_lost, sim.lost);
    assert_int_equal(stats.window_lost, stats.samples_lost);
    assert_int_equal(result.samples, 64);
    assert_accounted(engine, produced);
    take_all(engine, entries, &count);
    assert_int_equal(entries_sum(entries, count), stats.samples);

    /* With the drain running again the same small ring keeps up or not, but
     * every sample is still read or reported lost. */
    pc_engine_pause_drain(engine, 0);
    config.window_id = 4;
    kernel_start(KERNEL_HOT_COLD);
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(stats_of(engine).samples_read >= 64 + 200);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), &result), FLARE_OK);
    kernel_stop();
    stats = stats_of(engine);
    assert_int_equal(stats.samples_read + stats.samples_lost,
                     produced + sim_pc_samples_produced(0));
    count = 0;
    take_all(engine, entries, &count);
    assert_int_equal(entries_sum(entries, count), result.samples);
}

static void test_start_failure_gives_the_lease_back(void **state)
{
    (void)state;
    pc_engine *engine = engine_make(0, 13);
    sim_pc_fail_next_starts(1);
    backend_engine_config config = window(1, 50 * US);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_ERR_BACKEND);
    assert_non_null(strstr(reason, "sim PC sampling: configuration failed (injected)"));
    pc_engine_stats stats = stats_of(engine);
    assert_int_equal(stats.start_failures, 1);
    assert_int_equal(stats.arms, 0);
    assert_int_equal(tracebuf_lease_holder(0), 0);
    /* Another context can take the device at once. */
    assert_int_equal(tracebuf_lease_acquire(0, 999, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(0, 999), FLARE_OK);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), NULL), FLARE_ERR_STATE);
    /* The fault was for one start only. */
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), NULL), FLARE_OK);
    /* A unit refuses another device: the engine says so as a backend error. */
    reason[0] = '\0';
    assert_int_equal(pc_engine_arm(engine, 1, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_ERR_BACKEND);
    assert_non_null(strstr(reason, "samples device 0, not 1"));
    assert_int_equal(tracebuf_lease_holder(1), 0);
}

/* A stop that fails still ends the window: the samples read are kept, the
 * lease is given back, and the result says why (the window record shows it). */
static void test_failed_stop_says_why(void **state)
{
    (void)state;
    pc_engine *engine = engine_make(0, 14);
    backend_engine_config config = window(2, 50 * US);
    char reason[256] = "";
    kernel_start(KERNEL_HOT_COLD);
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(stats_of(engine).samples > 0);
    sim_pc_fail_next_stops(1);
    backend_engine_result result;
    memset(&result, 0, sizeof(result));
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), &result), FLARE_ERR_BACKEND);
    kernel_stop();
    assert_string_equal(result.reason, "sim PC sampling: stop failed (injected)");
    assert_true(result.samples > 0);
    assert_int_equal(tracebuf_lease_holder(0), 0);
    /* The fault was for one stop: the next window ends cleanly, saying nothing. */
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), &result), FLARE_OK);
    assert_string_equal(result.reason, "");
}

static void test_aggregate_table_overflow(void **state)
{
    (void)state;
    static pc_entry entries[ENTRIES_MAX];
    size_t count = 0;
    kernel_start(KERNEL_DISTINCT);
    pc_engine *engine = engine_make(0, 14);
    assert_int_equal(pc_engine_set_aggregate_capacity(engine, 0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(pc_engine_set_aggregate_capacity(engine, 8), FLARE_OK);
    backend_engine_config config = window(5, 20 * US);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    assert_int_equal(pc_engine_set_aggregate_capacity(engine, 16), FLARE_ERR_STATE);
    TEST_WAIT_UNTIL(stats_of(engine).aggregate_drops >= 100);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), NULL), FLARE_OK);
    kernel_stop();

    pc_engine_stats stats = stats_of(engine);
    assert_int_equal(stats.entries_held, 8);
    assert_int_equal(stats.window_drops, stats.aggregate_drops);
    assert_accounted(engine, sim_pc_samples_produced(0));
    /* Entries not taken keep their room: the size cannot change under them. */
    assert_int_equal(pc_engine_set_aggregate_capacity(engine, 16), FLARE_ERR_STATE);
    take_all(engine, entries, &count);
    assert_int_equal(count, 8);
    assert_int_equal(entries_sum(entries, count), stats.samples);
    for (size_t i = 0; i < count; i++)
        assert_string_equal(entries[i].function, "wide_kernel");
    assert_int_equal(pc_engine_set_aggregate_capacity(engine, 16), FLARE_OK);
}

/* Disarm from a thread of its own, so the test can hold a read meanwhile. */
typedef struct disarm_call {
    pthread_t thread;
    pc_engine *engine;
    atomic_int entered;
    atomic_int done;
    int status;
    backend_engine_result result;
} disarm_call;

static void *disarm_main(void *argument)
{
    disarm_call *call = argument;
    atomic_store(&call->entered, 1);
    call->status = pc_engine_disarm(call->engine, 0, test_now_ns(), &call->result);
    atomic_store(&call->done, 1);
    return NULL;
}

static void test_disarm_during_a_read(void **state)
{
    (void)state;
    static pc_entry entries[ENTRIES_MAX];
    size_t count = 0;
    kernel_start(KERNEL_HOT_COLD);
    pc_engine *engine = engine_make(0, 15);
    backend_engine_config config = window(9, 20 * US);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(stats_of(engine).samples > 0);
    /* The drain thread's next read stops inside the hardware, holding it. */
    sim_pc_hold_reads(1);
    TEST_WAIT_UNTIL(sim_pc_reads_held() == 1);
    disarm_call call = {.engine = engine};
    assert_int_equal(pthread_create(&call.thread, NULL, disarm_main, &call), 0);
    TEST_WAIT_UNTIL(atomic_load(&call.entered));
    test_pause_ms(20); /* not for correctness: gives a wrong disarm time to finish */
    assert_false(atomic_load(&call.done));
    sim_pc_hold_reads(0);
    TEST_WAIT_UNTIL(atomic_load(&call.done));
    pthread_join(call.thread, NULL);
    kernel_stop();
    assert_int_equal(call.status, FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(0), 0);
    take_all(engine, entries, &count);
    pc_engine_stats stats = stats_of(engine);
    assert_int_equal(entries_sum(entries, count), stats.samples);
    assert_int_equal(call.result.samples, stats.samples);
    assert_accounted(engine, sim_pc_samples_produced(0));
}

/* Takes entries while windows come and go, as the collector will. */
typedef struct collector {
    pthread_t thread;
    pc_engine *engine;
    atomic_int stop;
    pc_entry *entries;
    size_t count;
} collector;

static void *collector_main(void *argument)
{
    collector *taker = argument;
    while (!atomic_load(&taker->stop)) {
        size_t room = ENTRIES_MAX - taker->count;
        taker->count +=
            pc_engine_take(taker->engine, taker->entries + taker->count, room < 32 ? room : 32);
        test_pause_ms(1);
    }
    return NULL;
}

static int same_key(const pc_entry *a, const pc_entry *b)
{
    return a->window_id == b->window_id && a->device == b->device && a->pc_offset == b->pc_offset &&
           strcmp(a->function, b->function) == 0 && strcmp(a->stall_reason, b->stall_reason) == 0;
}

#define CYCLES 50

static void arm_wait_disarm(pc_engine *engine, uint64_t window_id, backend_engine_result *result)
{
    backend_engine_config config = window(window_id, 20 * US);
    char reason[256] = "";
    pc_engine_stats before = stats_of(engine);
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    if (window_id % 3 == 0) /* disarm right after a drain read */
        TEST_WAIT_UNTIL(stats_of(engine).reads > before.reads);
    else if (window_id % 3 == 1) /* after some samples */
        TEST_WAIT_UNTIL(stats_of(engine).samples >= before.samples + 20);
    /* else at once, whatever the drain thread is doing */
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), result), FLARE_OK);
}

static void test_many_windows_with_a_collector(void **state)
{
    (void)state;
    static pc_entry entries[ENTRIES_MAX];
    backend_engine_result results[CYCLES + 1] = {0};
    kernel_start(KERNEL_LAUNCHES);
    pc_engine *engine = engine_make(0, 16);
    collector taker = {.engine = engine, .entries = entries};
    assert_int_equal(pthread_create(&taker.thread, NULL, collector_main, &taker), 0);
    uint64_t produced = 0;
    for (uint64_t window_id = 1; window_id <= CYCLES; window_id++) {
        arm_wait_disarm(engine, window_id, &results[window_id]);
        produced += sim_pc_samples_produced(0); /* the unit has stopped */
    }
    atomic_store(&taker.stop, 1);
    pthread_join(taker.thread, NULL);
    kernel_stop();
    take_all(engine, entries, &taker.count);

    pc_engine_stats stats = stats_of(engine);
    assert_int_equal(stats.arms, CYCLES);
    assert_int_equal(stats.disarms, CYCLES);
    assert_int_equal(stats.entries_held, 0);
    assert_int_equal(entries_sum(entries, taker.count), stats.samples);
    assert_accounted(engine, produced);
    /* Each window's entries add up to what its disarm said, and no key
     * appears twice in a window (an entry handed out while its window was
     * open would have come back as a second one). */
    uint64_t per_window[CYCLES + 1] = {0};
    for (size_t i = 0; i < taker.count; i++) {
        assert_true(entries[i].window_id >= 1 && entries[i].window_id <= CYCLES);
        per_window[entries[i].window_id] += entries[i].samples;
        for (size_t j = i + 1; j < taker.count && entries[j].window_id == entries[i].window_id; j++)
            assert_false(same_key(&entries[i], &entries[j]));
        if (i > 0)
            assert_true(entries[i].window_id >= entries[i - 1].window_id); /* oldest first */
    }
    for (int window_id = 1; window_id <= CYCLES; window_id++)
        assert_int_equal(per_window[window_id], results[window_id].samples);
}

static void test_stalled_sampler(void **state)
{
    (void)state;
    kernel_start(KERNEL_HOT_COLD);
    pc_engine *engine = engine_make(0, 17);
    sim_pc_stall_sampler(600000 * MS);
    backend_engine_config config = window(1, 20 * US);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    sim_pc_stats sim;
    TEST_WAIT_UNTIL((sim_pc_stats_get(0, &sim), sim.stalled_ticks >= 20) &&
                    stats_of(engine).reads >= 2);
    backend_engine_result result = {0};
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), &result), FLARE_OK);
    assert_int_equal(result.samples, 0);
    assert_int_equal(sim_pc_samples_produced(0), 0);
    assert_int_equal(stats_of(engine).samples_lost, 0);

    sim_pc_stall_sampler(0);
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(stats_of(engine).samples >= 10);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), &result), FLARE_OK);
    kernel_stop();
    assert_accounted(engine, sim_pc_samples_produced(0));
}

/* A crowd of kernel threads, more than there are slots. */
typedef struct crowd {
    atomic_int began;
    atomic_int release;
} crowd;

static void *crowd_main(void *argument)
{
    crowd *people = argument;
    sim_pc_kernel_begin(0, "crowd_kernel");
    sim_pc_mark(0x40, SIM_PC_STALL_BARRIER);
    atomic_fetch_add(&people->began, 1);
    while (!atomic_load(&people->release))
        test_pause_ms(1);
    sim_pc_kernel_end();
    return NULL;
}

#define CROWD (SIM_PC_SLOTS + 6)

static void test_more_kernel_threads_than_slots(void **state)
{
    (void)state;
    static pc_entry entries[ENTRIES_MAX];
    size_t count = 0;
    pthread_t threads[CROWD];
    crowd people = {0};
    sim_pc_stats before;
    sim_pc_stats_get(0, &before);
    for (int i = 0; i < CROWD; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, crowd_main, &people), 0);
    TEST_WAIT_UNTIL(atomic_load(&people.began) == CROWD);
    pc_engine *engine = engine_make(0, 18);
    backend_engine_config config = window(2, 1 * MS); /* up to 64 samples a tick */
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(stats_of(engine).samples >= 3 * SIM_PC_SLOTS);
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), NULL), FLARE_OK);
    atomic_store(&people.release, 1);
    for (int i = 0; i < CROWD; i++)
        pthread_join(threads[i], NULL);
    sim_pc_stats after;
    sim_pc_stats_get(0, &after);
    /* Earlier cases' threads gave their slots back when they exited. */
    assert_int_equal(after.unsampled_kernels - before.unsampled_kernels, CROWD - SIM_PC_SLOTS);
    take_all(engine, entries, &count);
    assert_int_equal(count, 1); /* one key: crowd_kernel, 0x40, barrier */
    assert_string_equal(entries[0].stall_reason, "barrier");
    assert_int_equal(entries[0].pc_offset, 0x40);
    assert_accounted(engine, sim_pc_samples_produced(0));
}

/* A kernel whose thread blocks: the simulated SM has nothing running. */
typedef struct sleeper {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int began;
    int release;
} sleeper;

static void *sleeper_main(void *argument)
{
    sleeper *sleepy = argument;
    sim_pc_kernel_begin(0, "sleepy_kernel");
    sim_pc_mark(0x80, SIM_PC_STALL_SLEEPING);
    pthread_mutex_lock(&sleepy->lock);
    sleepy->began = 1;
    pthread_cond_broadcast(&sleepy->wake);
    while (!sleepy->release)
        pthread_cond_wait(&sleepy->wake, &sleepy->lock);
    pthread_mutex_unlock(&sleepy->lock);
    sim_pc_kernel_end();
    return NULL;
}

static int sleeper_began(sleeper *sleepy)
{
    pthread_mutex_lock(&sleepy->lock);
    int began = sleepy->began;
    pthread_mutex_unlock(&sleepy->lock);
    return began;
}

static void test_blocked_kernel_thread_is_not_sampled(void **state)
{
    (void)state;
    sleeper sleepy = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, sleeper_main, &sleepy), 0);
    TEST_WAIT_UNTIL(sleeper_began(&sleepy));
    pc_engine *engine = engine_make(0, 19);
    backend_engine_config config = window(1, 1 * MS);
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, test_now_ns(), reason, sizeof(reason)),
                     FLARE_OK);
    sim_pc_stats sim;
    TEST_WAIT_UNTIL((sim_pc_stats_get(0, &sim), sim.ticks >= 20));
    assert_int_equal(pc_engine_disarm(engine, 0, test_now_ns(), NULL), FLARE_OK);
    pthread_mutex_lock(&sleepy.lock);
    sleepy.release = 1;
    pthread_cond_broadcast(&sleepy.wake);
    pthread_mutex_unlock(&sleepy.lock);
    pthread_join(thread, NULL);
    sim_pc_stats_get(0, &sim);
    /* The first tick has no earlier CPU time to compare with; after it, the
     * blocked thread never ran. */
    assert_true(sim.produced <= 1);
    assert_true(sim.idle_skips >= 19);
    assert_accounted(engine, sim.produced);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stall_reason_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_period_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_samples_follow_the_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_between_contexts_and_engine_kinds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hardware_buffer_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_failure_gives_the_lease_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_stop_says_why, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregate_table_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disarm_during_a_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_windows_with_a_collector, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stalled_sampler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_more_kernel_threads_than_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocked_kernel_thread_is_not_sampled, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
