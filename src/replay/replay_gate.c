/*
 * replay_gate.c: one reader/writer gate per device.
 *
 * A replaying launch holds the writer side from its drains through its last
 * pass; every other launch, asynchronous copy and memset on that device
 * holds the reader side while it is being submitted, so nothing new reaches
 * the device while a replay restores and re-runs memory. Writers are
 * preferred (a waiting replay stops new readers) so a busy program cannot
 * starve a replay. With no replay configured the gate costs one relaxed
 * load and touches no lock. A thread running a replay loop passes through
 * every gate: a tool callback that launches must never deadlock on it.
 * It must never block a reader without a writer present or waiting, nor
 * longer than the writer's stall bound past its last sign of life.
 */
#include "replay/replay_internal.h"

#include "core/clock.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

typedef struct device_gate {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int readers;
    int writer;
    pthread_t writer_thread; /* valid while writer is set */
    int writers_waiting;
    int readers_waiting; /* for replay_gate_waiting (tests) */
    /* While writer is set: its last sign of life, how long it may go without
     * one, and what it was doing then. */
    uint64_t writer_progress_ns;
    uint64_t writer_stall_ns;
    char writer_what[256];
} device_gate;

/* Until the writer says otherwise: the defaults' bound (2 x 60 s + 2 x 10 s). */
#define GATE_STALL_DEFAULT_NS 140000000000ull

static device_gate gates[REPLAY_DEVICE_MAX];
static pthread_once_t gates_once = PTHREAD_ONCE_INIT;

atomic_int replay_configured_count;

static void gates_init(void)
{
    for (int device = 0; device < REPLAY_DEVICE_MAX; device++) {
        pthread_mutex_init(&gates[device].lock, NULL);
        core_cond_init_monotonic(&gates[device].changed);
    }
}

static device_gate *gate_of(int device)
{
    if (device < 0 || device >= REPLAY_DEVICE_MAX) {
        return NULL;
    }
    pthread_once(&gates_once, gates_init);
    return &gates[device];
}

bool replay_configured(void)
{
    return atomic_load_explicit(&replay_configured_count, memory_order_relaxed) > 0;
}

int replay_gate_reader_enter_always(int device)
{
    device_gate *gate = gate_of(device);
    if (gate == NULL || replay_thread()->loop_depth > 0) {
        return 0;
    }
    pthread_mutex_lock(&gate->lock);
    /* The writer's own thread passes: work it submits while holding the
     * writer side (a profiler library launching from inside a pass) must
     * never wait for itself. */
    if (gate->writer && pthread_equal(gate->writer_thread, pthread_self())) {
        pthread_mutex_unlock(&gate->lock);
        return 0;
    }
    int waited = gate->writer || gate->writers_waiting > 0;
    gate->readers_waiting += waited;
    while (gate->writer || gate->writers_waiting > 0) {
        if (!gate->writer) {
            /* Only waiting writers: each gives up within its own timeout. */
            pthread_cond_wait(&gate->changed, &gate->lock);
            continue;
        }
        uint64_t give_up_ns = gate->writer_progress_ns > UINT64_MAX - gate->writer_stall_ns
                                  ? UINT64_MAX
                                  : gate->writer_progress_ns + gate->writer_stall_ns;
        uint64_t now_ns = core_now_ns();
        if (now_ns >= give_up_ns) {
            char message[1024];
            snprintf(message, sizeof message,
                     "an ordinary launch, copy or memset on device %d waited %.3g s for %.256s, "
                     "which gave no sign of life in that time (stuck inside CUPTI or the driver, "
                     "past every timeout of its own); letting the work through could let the "
                     "replay's next restore revert it, so flare stops the program",
                     device, (double)(now_ns - gate->writer_progress_ns) / 1e9,
                     gate->writer_what[0] != '\0' ? gate->writer_what : "a replay");
            gate->readers_waiting -= waited;
            pthread_mutex_unlock(&gate->lock);
            core_log(CORE_LOG_ERROR, "%s", message);
            replay_call_abort_handler(message);
            return 0; /* only a test's handler returns: the work goes through */
        }
        /* A second at a time: a bound near the largest duration must not
         * wrap the deadline. */
        uint64_t wait_ns = give_up_ns - now_ns;
        struct timespec deadline =
            core_deadline_after_ns(wait_ns < 1000000000ull ? wait_ns : 1000000000ull);
        pthread_cond_timedwait(&gate->changed, &gate->lock, &deadline);
    }
    gate->readers_waiting -= waited;
    gate->readers++;
    pthread_mutex_unlock(&gate->lock);
    replay_stats_add(0, 0, 0, 1, 0);
    return 1;
}

void replay_gate_waiting(int device, int *writers, int *readers)
{
    *writers = 0;
    *readers = 0;
    device_gate *gate = gate_of(device);
    if (gate == NULL) {
        return;
    }
    pthread_mutex_lock(&gate->lock);
    *writers = gate->writers_waiting;
    *readers = gate->readers_waiting;
    pthread_mutex_unlock(&gate->lock);
}

int replay_gate_enter(int device)
{
    if (!replay_configured()) {
        return 0;
    }
    return replay_gate_reader_enter_always(device);
}

void replay_gate_exit(int device, int token)
{
    if (token == 0) {
        return;
    }
    device_gate *gate = gate_of(device);
    if (gate == NULL) {
        return;
    }
    pthread_mutex_lock(&gate->lock);
    gate->readers--;
    if (gate->readers == 0) {
        pthread_cond_broadcast(&gate->changed);
    }
    pthread_mutex_unlock(&gate->lock);
}

int replay_gate_writer_enter(int device, uint64_t timeout_ns)
{
    device_gate *gate = gate_of(device);
    if (gate == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    struct timespec deadline = core_deadline_after_ns(timeout_ns);
    int status = FLARE_OK;
    pthread_mutex_lock(&gate->lock);
    gate->writers_waiting++;
    while (gate->writer || gate->readers > 0) {
        if (pthread_cond_timedwait(&gate->changed, &gate->lock, &deadline) == ETIMEDOUT &&
            (gate->writer || gate->readers > 0)) {
            status = FLARE_ERR_TIMEOUT;
            break;
        }
    }
    gate->writers_waiting--;
    if (status == FLARE_OK) {
        gate->writer = 1;
        gate->writer_thread = pthread_self();
        gate->writer_progress_ns = core_now_ns();
        gate->writer_stall_ns = GATE_STALL_DEFAULT_NS;
        gate->writer_what[0] = '\0';
        /* Readers that queued behind this writer while it only waited sleep
         * without a deadline: wake them to take up the writer's bound. */
        pthread_cond_broadcast(&gate->changed);
    } else {
        /* Readers held back by this waiting writer may go again. */
        pthread_cond_broadcast(&gate->changed);
    }
    pthread_mutex_unlock(&gate->lock);
    return status;
}

void replay_gate_writer_exit(int device)
{
    device_gate *gate = gate_of(device);
    if (gate == NULL) {
        return;
    }
    pthread_mutex_lock(&gate->lock);
    gate->writer = 0;
    pthread_cond_broadcast(&gate->changed);
    pthread_mutex_unlock(&gate->lock);
}

uint64_t replay_gate_stall_ns(const replay_settings *settings)
{
    /* Saturating: timeouts may be set near the largest duration. */
    uint64_t bound = 0;
    const uint64_t parts[] = {settings->pass_timeout_ns, settings->pass_timeout_ns,
                              settings->drain_timeout_ns, settings->drain_timeout_ns};
    for (size_t index = 0; index < sizeof parts / sizeof parts[0]; index++) {
        bound = parts[index] > UINT64_MAX - bound ? UINT64_MAX : bound + parts[index];
    }
    return bound;
}

void replay_gate_writer_progress(int device, const char *what, uint64_t stall_ns)
{
    device_gate *gate = gate_of(device);
    if (gate == NULL) {
        return;
    }
    pthread_mutex_lock(&gate->lock);
    if (gate->writer && pthread_equal(gate->writer_thread, pthread_self())) {
        gate->writer_progress_ns = core_now_ns();
        gate->writer_stall_ns = stall_ns;
        if (what != NULL) {
            snprintf(gate->writer_what, sizeof gate->writer_what, "%s", what);
        }
        /* Readers sleep until the bound they last saw: a shorter one must
         * reach them now (a few calls per pass; readers only recheck). */
        pthread_cond_broadcast(&gate->changed);
    }
    pthread_mutex_unlock(&gate->lock);
}
