/*
 * collector.c: drains the rings into the store and runs the participants'
 * beat (collector.h).
 *
 * The only reader of every ring and the only writer of the store while a
 * session runs. Features hear of the records it writes and of each poll
 * only through the participants (participants.h). A failed write never
 * stops collection: the batch is rolled back, its events are counted as
 * lost (stored as drops), and the next batch tries again.
 */
#include "session/collector.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/capability.h"
#include "core/log.h"
#include "core/runtime.h"
#include "session/participants.h"

struct session_collector {
    store *store;
    const backend_descriptor *backend;
    /* A backend the session adopted (session_collector_adopt_backend),
     * taken up by the thread at its next commit. */
    const backend_descriptor *_Atomic adopted;
    int64_t pid;
    uint32_t generation;
    uint64_t interval_ns;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t flushed;
    int stopping;
    uint64_t flush_requested;
    uint64_t flush_completed;
    session_collector_stats stats;
};

typedef struct drain_context {
    session_collector_stats *stats;
    store *store;
    const backend_descriptor *backend; /* may be NULL (benchmarks) */
    int64_t pid;
    uint32_t generation;
    int64_t thread_id;
    uint64_t written;
    uint64_t stale;
    uint64_t failed;
    int saturated;   /* a ring still held events when its share of the pass ran out */
    uint64_t room;   /* events the open batch may still take (participants.h) */
    int batch_full;  /* no room left: the batch commits before more is drained */
    uint64_t now_ns; /* when this pass began draining */
    /* How late kernel records reach the collector (docs/rules.md): the
     * worst delay since the last kernel_delivery_delay_ns row. */
    uint64_t delay_worst_ns;
    uint64_t delay_kernels;
    uint64_t delay_period_start_ns;
} drain_context;

/* One kernel_delivery_delay_ns row per this much collector time at most. */
#define COLLECTOR_DELAY_PERIOD_NS 100000000ull

/* Devices are recorded when they first appear in an event rather than at
 * session start, so that starting a session never fixes the simulated
 * device count before the program has configured it. */
static void note_device(drain_context *context, int device)
{
    if (device < 0 || device >= SESSION_COLLECTOR_MAX_DEVICES)
        return;
    uint64_t bit = 1ull << device;
    if (context->stats->devices_recorded & bit)
        return;
    char name[128];
    char backend_name[16];
    if (core_device_lookup(device, name, sizeof(name), backend_name, sizeof(backend_name)) != 0) {
        const backend_descriptor *backend = context->backend;
        if (backend == NULL || backend->device == NULL ||
            backend->device->device_name(device, name, sizeof(name)) != FLARE_OK)
            snprintf(name, sizeof(name), "device %d", device);
        snprintf(backend_name, sizeof(backend_name), "%s",
                 backend != NULL ? backend->name : "unknown");
    }
    if (store_put_device(context->store, context->pid, device, name, backend_name) == FLARE_OK)
        context->stats->devices_recorded |= bit;
}

/* A kernel's row; the participants hear of it, and its delivery delay
 * counts towards kernel_delivery_delay_ns. */
static int write_kernel(drain_context *context, const core_event *event)
{
    store_kernel_row row = {
        .pid = context->pid,
        .device = event->device,
        .stream_id = event->stream_id,
        .correlation_id = event->id,
        .context_id = event->context_id,
        .name = event->long_name != NULL ? event->long_name : event->name,
        .start_ns = event->start_ns,
        .end_ns = event->end_ns,
        .shared_memory_bytes = event->detail.kernel.shared_memory_bytes,
        .registers_per_thread = event->detail.kernel.registers_per_thread,
        .graph_id = event->graph_id,
        .graph_node_id = event->graph_node_id,
    };
    memcpy(row.grid, event->detail.kernel.grid, sizeof(row.grid));
    memcpy(row.block, event->detail.kernel.block, sizeof(row.block));
    int status = store_put_kernel(context->store, &row);
    if (context->now_ns > event->end_ns &&
        context->now_ns - event->end_ns > context->delay_worst_ns)
        context->delay_worst_ns = context->now_ns - event->end_ns;
    context->delay_kernels++;
    if (event->end_ns >= event->start_ns)
        session_participants_kernel(session_begin_order(), row.name, event->end_ns,
                                    event->end_ns - event->start_ns);
    return status;
}

static int write_api_call(const drain_context *context, const core_event *event)
{
    store_api_call_row row = {
        .pid = context->pid,
        .thread_id = context->thread_id,
        .correlation_id = event->id,
        .name = event->name,
        .start_ns = event->start_ns,
        .end_ns = event->end_ns,
    };
    return store_put_api_call(context->store, &row);
}

static int write_storm(const drain_context *context, const core_event *event)
{
    store_storm_row row = {
        .pid = context->pid,
        .device = event->device,
        .start_ns = event->start_ns,
        .end_ns = event->end_ns,
        .untimed_launches = event->detail.storm.untimed_launches,
        .still_open = (event->flags & CORE_EVENT_FLAG_STILL_OPEN) != 0,
    };
    return store_put_storm(context->store, &row);
}

static void write_event(const core_event *event, void *user)
{
    drain_context *context = user;
    if (event->generation != context->generation) {
        context->stale++;
        return;
    }
    /* Metrics are keyed by NVML's device index, which need not be CUDA's
     * ordinal: only GPU work names the devices table. */
    if (event->kind == CORE_EVENT_KERNEL || event->kind == CORE_EVENT_COPY ||
        event->kind == CORE_EVENT_MEMSET)
        note_device(context, event->device);
    int status = FLARE_OK;
    switch (event->kind) {
    case CORE_EVENT_KERNEL:
        status = write_kernel(context, event);
        break;
    case CORE_EVENT_COPY:
    case CORE_EVENT_MEMSET: {
        store_copy_row row = {
            .pid = context->pid,
            .device = event->device,
            .stream_id = event->stream_id,
            .correlation_id = event->id,
            .is_memset = event->kind == CORE_EVENT_MEMSET,
            .copy_kind = event->detail.copy.copy_kind,
            .bytes = event->detail.copy.bytes,
            .start_ns = event->start_ns,
            .end_ns = event->end_ns,
            .status = event->detail.copy.status,
            .graph_id = event->graph_id,
            .graph_node_id = event->graph_node_id,
        };
        status = store_put_copy(context->store, &row);
        break;
    }
    case CORE_EVENT_SCOPE: {
        store_scope_row row = {
            .pid = context->pid,
            .thread_id = context->thread_id,
            .instance_id = event->id,
            .name = event->long_name != NULL ? event->long_name : event->name,
            .depth = event->depth,
            .start_ns = event->start_ns,
            .end_ns = event->end_ns,
            .still_open = (event->flags & CORE_EVENT_FLAG_STILL_OPEN) != 0,
        };
        status = store_put_scope(context->store, &row);
        session_scope scope = {.start_ns = event->start_ns,
                               .end_ns = event->end_ns,
                               .instance_id = event->id,
                               .depth = event->depth,
                               .thread_id = context->thread_id,
                               .name = row.name};
        session_participants_scope_closed(session_begin_order(), &scope);
        break;
    }
    case CORE_EVENT_GRAPH_LAUNCH: {
        store_graph_launch_row row = {
            .pid = context->pid,
            .correlation_id = event->id,
            .thread_id = context->thread_id,
            .time_ns = event->start_ns,
            .stream_id = event->stream_id,
            .graph_exec = event->detail.graph_launch.graph_exec,
            .scope_instance_id = event->detail.graph_launch.scope_instance_id,
            .scope_name = event->long_name != NULL ? event->long_name : event->name,
        };
        status = store_put_graph_launch(context->store, &row);
        break;
    }
    case CORE_EVENT_API_CALL:
        status = write_api_call(context, event);
        break;
    case CORE_EVENT_UNTIMED_LAUNCH: {
        store_untimed_launch_row row = {
            .pid = context->pid,
            .correlation_id = event->id,
            .thread_id = context->thread_id,
            .time_ns = event->start_ns,
            .device = event->device,
            .name = event->long_name != NULL ? event->long_name : event->name,
            .scope_instance_id = event->detail.untimed_launch.scope_instance_id,
        };
        status = store_put_untimed_launch(context->store, &row);
        break;
    }
    case CORE_EVENT_STORM:
        status = write_storm(context, event);
        break;
    case CORE_EVENT_EXTERNAL_CORRELATION:
        status = store_put_external_correlation(context->store, context->pid, event->id,
                                                event->detail.external.external_kind,
                                                event->detail.external.external_id);
        break;
    case CORE_EVENT_METRIC: {
        store_metric_row row = {
            .pid = context->pid,
            .device = event->device,
            .name = event->name,
            .time_ns = event->start_ns,
            .value = event->detail.metric.value,
        };
        status = store_put_metric(context->store, &row);
        session_participants_metric(session_begin_order(), event->device, event->name,
                                    event->start_ns, event->detail.metric.value);
        break;
    }
    default:
        CORE_LOG_ONCE("collector.unknown_event_kind", CORE_LOG_ERROR,
                      "collector: event of unknown kind %u skipped", event->kind);
        context->failed++;
        return;
    }
    if (status == FLARE_OK)
        context->written++;
    else
        context->failed++;
}

/* A thread's ring and scope-depth drops into the open batch: when they
 * changed, or always (the session's last transaction). */
static void write_thread_drops(store *database, int64_t pid, core_thread *thread, int always)
{
    char detail[64];
    snprintf(detail, sizeof(detail), "thread %lld", (long long)thread->thread_id);
    uint64_t ring_drops = core_ring_dropped(&thread->ring) - thread->ring_drops_baseline;
    if (ring_drops != thread->ring_drops_stored || (always && ring_drops != 0)) {
        if (store_set_drops(database, pid, "event_ring", detail, ring_drops) == FLARE_OK)
            thread->ring_drops_stored = ring_drops;
    }
    uint64_t scope_drops = atomic_load_explicit(&thread->scope_depth_drops, memory_order_relaxed) -
                           thread->scope_drops_baseline;
    if (scope_drops != thread->scope_drops_stored || (always && scope_drops != 0)) {
        if (store_set_drops(database, pid, "scope_depth", detail, scope_drops) == FLARE_OK)
            thread->scope_drops_stored = scope_drops;
    }
}

/* The participants' room once the room given is used up: none ends the
 * batch (its batch hooks then make room, and the next batch drains on). */
static void ask_room(drain_context *context)
{
    context->room = session_participants_room(session_begin_order(), context->store);
    if (context->room == 0)
        context->batch_full = 1;
}

/* At a batch's start: the participants' room, at least SESSION_ROOM_MIN
 * (a participant that could not make room in the last batch's hooks does
 * not stop collection). */
static void begin_room(drain_context *context)
{
    context->batch_full = 0;
    context->room = session_participants_room(session_begin_order(), context->store);
    if (context->room < SESSION_ROOM_MIN)
        context->room = SESSION_ROOM_MIN;
}

static void drain_thread(core_thread *thread, void *user)
{
    drain_context *context = user;
    context->thread_id = thread->thread_id;
    /* A bounded share per pass, so one busy producer cannot starve the rest;
     * a ring left non-empty makes the collector go again without waiting.
     * The share goes in pieces no larger than the batch's room. */
    size_t left = (size_t)thread->ring.capacity * 4;
    while (left > 0 && !context->batch_full) {
        size_t piece = context->room < left ? (size_t)context->room : left;
        size_t drained = core_ring_drain(&thread->ring, piece, write_event, context);
        left -= drained;
        if (context->room != SESSION_ROOM_ANY)
            context->room -= drained;
        if (drained < piece)
            break; /* the ring is empty */
        if (context->room == 0)
            ask_room(context);
    }
    if (left == 0 || context->batch_full)
        context->saturated = 1;

    write_thread_drops(context->store, context->pid, thread, 0);
    core_thread_release_if_retired(thread);
}

/* A failed commit lost the drop counts its batch set: write them again. */
static void forget_stored_drops(core_thread *thread, void *user)
{
    (void)user;
    thread->ring_drops_stored = 0;
    thread->scope_drops_stored = 0;
}

/* The process-wide drop counters (lost: events the store could not take). */
static void write_process_drops(store *database, int64_t pid, uint64_t lost)
{
    uint64_t lost_threads = core_thread_claim_failures();
    if (lost_threads != 0)
        store_set_drops(database, pid, "thread_slots", "no free thread slot", lost_threads);
    uint64_t log_drops = core_log_queue_drops();
    if (log_drops != 0)
        store_set_drops(database, pid, "log_queue", "log lines", log_drops);
    if (lost != 0)
        store_set_drops(database, pid, "store_write", "events not written", lost);
    uint64_t intern_failures = core_intern_failures();
    if (intern_failures != 0)
        store_set_drops(database, pid, "name_intern", "names stored truncated", intern_failures);
}

typedef struct drops_target {
    store *store;
    int64_t pid;
} drops_target;

static void write_every_thread_drops(core_thread *thread, void *user)
{
    drops_target *target = user;
    write_thread_drops(target->store, target->pid, thread, 1);
}

void session_collector_write_drops(store *database, int64_t pid,
                                   const session_collector_stats *stats)
{
    drops_target target = {.store = database, .pid = pid};
    core_threads_for_each(write_every_thread_drops, &target);
    write_process_drops(database, pid, stats->events_lost);
}

static void write_log_lines(drain_context *context)
{
    core_log_line lines[32];
    int count;
    while ((count = core_log_take(lines, 32)) > 0) {
        for (int i = 0; i < count; i++)
            store_put_log(context->store, context->pid, lines[i].time_ns,
                          core_log_level_name(lines[i].level), lines[i].text);
    }
}

/* Writes the worst delivery delay of the kernels drained in the last
 * period, as a process metric (schema.md), when a period has passed. */
static void write_delivery_delay(drain_context *context)
{
    if (context->delay_kernels == 0) {
        context->delay_period_start_ns = context->now_ns;
        return;
    }
    if (context->now_ns - context->delay_period_start_ns < COLLECTOR_DELAY_PERIOD_NS)
        return;
    store_metric_row row = {.pid = context->pid,
                            .device = -1,
                            .name = "kernel_delivery_delay_ns",
                            .time_ns = context->now_ns,
                            .value = (int64_t)context->delay_worst_ns};
    if (store_put_metric(context->store, &row) != FLARE_OK)
        context->failed++;
    context->delay_worst_ns = 0;
    context->delay_kernels = 0;
    context->delay_period_start_ns = context->now_ns;
}

/* Drains every ring into the open transaction; counts go to context. */
static void drain_rings(drain_context *context)
{
    context->now_ns = core_now_ns();
    core_threads_for_each(drain_thread, context);
    write_delivery_delay(context);
}

/* Writes the batch's drop counters and log lines, then commits. On failure
 * the batch's events are counted as lost (and stored as such next time). */
static int commit_batch(drain_context *context)
{
    store *database = context->store;
    session_collector_stats *stats = context->stats;
    write_process_drops(database, context->pid, stats->events_lost + context->failed);
    session_participants_batch(session_begin_order(), database, context->pid, core_now_ns());
    core_capabilities_write(database, context->pid, 0);
    write_log_lines(context);
    int status = store_commit(database);
    session_participants_committed(session_begin_order(), status == FLARE_OK);
    if (status != FLARE_OK) {
        CORE_LOG_ONCE("collector.commit", CORE_LOG_ERROR,
                      "collector: a batch of %llu events could not be committed: %s",
                      (unsigned long long)context->written, store_last_error(database));
        store_rollback(database);
        core_threads_for_each(forget_stored_drops, NULL);
        stats->events_lost += context->written + context->failed;
    } else {
        stats->events_written += context->written;
        stats->events_lost += context->failed;
        stats->flushes++;
    }
    stats->events_stale += context->stale;
    context->written = context->failed = context->stale = 0;
    return status;
}

/* The participants' beat, at every poll (5 ms) rather than every commit,
 * so rules see fresh readings and windows open and close within a poll of
 * when they should (the order is the participants', features.c). They
 * write into the open batch. */
static void beat(drain_context *context)
{
    session_beat beat = {.store = context->store,
                         .pid = context->pid,
                         .now_ns = core_now_ns(),
                         .rings_drained = !context->saturated};
    session_participants_beat(session_beat_order(), &beat);
}

static int begin_batch(drain_context *context)
{
    int status = store_begin(context->store);
    if (status != FLARE_OK)
        CORE_LOG_ONCE("collector.begin", CORE_LOG_ERROR, "collector: cannot begin a batch: %s",
                      store_last_error(context->store));
    return status;
}

int session_collector_drain_once(store *database, const backend_descriptor *backend, int64_t pid,
                                 uint32_t generation, session_collector_stats *stats)
{
    drain_context context = {.stats = stats,
                             .store = database,
                             .backend = backend,
                             .pid = pid,
                             .generation = generation};
    int status = begin_batch(&context);
    if (status != FLARE_OK)
        return status;
    begin_room(&context);
    drain_rings(&context);
    beat(&context);
    int saturated = context.saturated;
    status = commit_batch(&context);
    if (status != FLARE_OK)
        return status;
    return saturated ? SESSION_COLLECTOR_MORE_PENDING : FLARE_OK;
}

/*
 * The collector polls the rings every few milliseconds, so a ring only has
 * to hold a few milliseconds of a thread's events, but commits once per
 * flush interval, so SQLite pays for a transaction only that often. The
 * write transaction stays open between polls of one batch; other processes
 * of the session wait for it through the store's busy timeout.
 */
#define COLLECTOR_POLL_NS 5000000ull

/* Inside the open batch: a backend adopted since the last commit names the
 * process's backend from now on (a failed update is tried again). */
static void take_adopted_backend(session_collector *collector, drain_context *context)
{
    const backend_descriptor *adopted = atomic_load(&collector->adopted);
    if (adopted == NULL || adopted == context->backend)
        return;
    if (store_process_set_backend(context->store, context->pid, adopted->name) == FLARE_OK)
        context->backend = collector->backend = adopted;
}

void session_collector_adopt_backend(session_collector *collector,
                                     const backend_descriptor *backend)
{
    atomic_store(&collector->adopted, backend);
}

static void *collector_main(void *argument)
{
    /* Named for top -H and ps, and the H200 soak check's CPU times. */
    pthread_setname_np(pthread_self(), "flare-collector");
    session_collector *collector = argument;
    drain_context context = {.stats = &collector->stats,
                             .store = collector->store,
                             .backend = collector->backend,
                             .pid = collector->pid,
                             .generation = collector->generation};
    int in_batch = 0;
    uint64_t batch_started = 0;
    uint64_t poll_ns =
        collector->interval_ns < COLLECTOR_POLL_NS ? collector->interval_ns : COLLECTOR_POLL_NS;
    pthread_mutex_lock(&collector->lock);
    for (;;) {
        struct timespec deadline = core_deadline_after_ns(poll_ns);
        while (!context.saturated && !collector->stopping &&
               collector->flush_requested == collector->flush_completed) {
            if (pthread_cond_timedwait(&collector->wake, &collector->lock, &deadline) == ETIMEDOUT)
                break;
        }
        int stopping = collector->stopping;
        uint64_t requested = collector->flush_requested;
        int flush_wanted = requested != collector->flush_completed;
        pthread_mutex_unlock(&collector->lock);

        if (!in_batch && begin_batch(&context) == FLARE_OK) {
            in_batch = 1;
            batch_started = core_now_ns();
            begin_room(&context);
        }
        context.saturated = 0;
        /* A batch cut short for room left events behind: a flush waits for
         * the batch after it. */
        int cut = 0;
        if (in_batch) {
            drain_rings(&context);
            beat(&context);
            cut = context.batch_full;
            if (stopping || flush_wanted || cut ||
                core_now_ns() - batch_started >= collector->interval_ns) {
                take_adopted_backend(collector, &context);
                commit_batch(&context);
                in_batch = 0;
            }
        }

        pthread_mutex_lock(&collector->lock);
        if (!in_batch && !cut) {
            collector->flush_completed = requested;
            pthread_cond_broadcast(&collector->flushed);
        }
        if (stopping && !in_batch)
            break;
        if (stopping && in_batch) {
            /* Could not begin or commit: give up the batch rather than spin. */
            store_rollback(collector->store);
            break;
        }
    }
    pthread_mutex_unlock(&collector->lock);
    return NULL;
}

int session_collector_start(store *database, const backend_descriptor *backend, int64_t pid,
                            uint32_t generation, uint32_t flush_interval_ms,
                            session_collector **out)
{
    session_collector *collector = calloc(1, sizeof(*collector));
    if (collector == NULL)
        return FLARE_ERR_NO_MEMORY;
    collector->store = database;
    collector->backend = backend;
    collector->pid = pid;
    collector->generation = generation;
    collector->interval_ns = (uint64_t)flush_interval_ms * 1000000ull;
    pthread_mutex_init(&collector->lock, NULL);
    core_cond_init_monotonic(&collector->wake);
    core_cond_init_monotonic(&collector->flushed);

    /* The collector must not take the application's signals. */
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int error = pthread_create(&collector->thread, NULL, collector_main, collector);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (error != 0) {
        pthread_cond_destroy(&collector->flushed);
        pthread_cond_destroy(&collector->wake);
        pthread_mutex_destroy(&collector->lock);
        free(collector);
        return FLARE_ERR_NO_MEMORY;
    }
    *out = collector;
    return FLARE_OK;
}

int session_collector_flush(session_collector *collector, uint64_t timeout_ns)
{
    struct timespec deadline = core_deadline_after_ns(timeout_ns);
    pthread_mutex_lock(&collector->lock);
    uint64_t ticket = ++collector->flush_requested;
    pthread_cond_signal(&collector->wake);
    int status = FLARE_OK;
    while (collector->flush_completed < ticket) {
        if (pthread_cond_timedwait(&collector->flushed, &collector->lock, &deadline) == ETIMEDOUT) {
            status = collector->flush_completed >= ticket ? FLARE_OK : FLARE_ERR_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&collector->lock);
    return status;
}

void session_collector_stop(session_collector *collector, session_collector_stats *stats)
{
    pthread_mutex_lock(&collector->lock);
    collector->stopping = 1;
    pthread_cond_signal(&collector->wake);
    pthread_mutex_unlock(&collector->lock);
    pthread_join(collector->thread, NULL);
    drain_context adopting = {
        .store = collector->store, .backend = collector->backend, .pid = collector->pid};
    if (store_begin(collector->store) == FLARE_OK) {
        take_adopted_backend(collector, &adopting);
        if (store_commit(collector->store) != FLARE_OK)
            store_rollback(collector->store);
    }
    /* The thread's last pass drained one ring's worth per thread; finish the rest. */
    for (int pass = 0; pass < 1024; pass++) {
        uint64_t before = collector->stats.events_written + collector->stats.events_stale +
                          collector->stats.events_lost;
        session_collector_drain_once(collector->store, collector->backend, collector->pid,
                                     collector->generation, &collector->stats);
        uint64_t after = collector->stats.events_written + collector->stats.events_stale +
                         collector->stats.events_lost;
        if (after == before)
            break;
    }
    if (stats != NULL)
        *stats = collector->stats;
    pthread_cond_destroy(&collector->flushed);
    pthread_cond_destroy(&collector->wake);
    pthread_mutex_destroy(&collector->lock);
    free(collector);
}
