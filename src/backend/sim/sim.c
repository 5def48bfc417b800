/*
 * sim.c: the simulated device itself: process-wide device state, streams
 * with one worker thread and a bounded FIFO each, in-flight accounting,
 * drains, completion delivery and the backend_ops table.
 *
 * It must never lose or duplicate a completion, never block a caller beyond
 * the bounded waits it documents, and never hold a stream or device lock
 * while running a kernel or the completion handler.
 *
 * Lock order, to rule out deadlocks: handler lock (read side, held around
 * the handler call, which may submit work), then the held-completions lock
 * (held around handing held completions over), then stream lock, then device
 * lock, then fault lock. A handler must therefore never replace the handler.
 */
#include "backend/sim/sim_busy.h"
#include "backend/sim/sim_times.h"
#include "backend/sim/sim_internal.h"
#include "backend/sim/sim_pc.h"
#include "core/clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NANOSECONDS_PER_SECOND      1000000000ull
#define NANOSECONDS_PER_MILLISECOND 1000000ull

typedef struct sim_work_item {
    backend_work_kind kind;
    uint64_t correlation_id;
    int kernel_id;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_memory_bytes;
    void *args; /* owned copy, freed by the worker */
    size_t args_size;
    void *destination;
    const void *source;
    size_t bytes;
    backend_copy_kind copy_kind;
    int memset_value;
    sim_fault_decision fault;
} sim_work_item;

typedef struct sim_device {
    pthread_mutex_t lock;
    /* Drainers wait here; timed on CLOCK_MONOTONIC. A device-wide counter
     * (rather than walking the streams) keeps device_drain independent of
     * streams being destroyed while it waits. */
    pthread_cond_t idle;
    atomic_uint_fast64_t in_flight;
    /* Every live stream of the device, under lock: destroy unlinks it, and
     * sim_device_stream_count lets tests see that it did. */
    backend_stream *streams;
    int stream_count;
} sim_device;

struct backend_stream {
    uint64_t id;
    int device;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t work_available;
    pthread_cond_t room_available; /* timed, CLOCK_MONOTONIC */
    pthread_cond_t idle;           /* timed, CLOCK_MONOTONIC */
    sim_work_item *queue;          /* ring of SIM_STREAM_QUEUE_CAPACITY */
    size_t queue_head;
    size_t queue_count;
    bool stopping;
    /* Atomic so the const accessors can read it without the lock; it is
     * still only changed under the lock so drainers never miss a wake-up. */
    atomic_uint_fast64_t in_flight;
    uint64_t last_start_ns; /* worker only */
    atomic_bool timed;      /* flare's replay stream: its kernels' times go to sim_times */
    backend_stream *registry_previous;
    backend_stream *registry_next;
};

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool state_ready;
static int configured_device_count; /* 0: not configured */
static int device_count;
static sim_device devices[SIM_DEVICE_MAX];

/* Readers are workers calling the handler; the writer is whoever replaces
 * it, which therefore waits for calls in progress. Writers are preferred so
 * a stream of completions cannot starve a replacement. Statically
 * initialised so that installing a handler (which a session does at start)
 * does not count as first use and fix the device count. */
static pthread_rwlock_t handler_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static backend_completion_handler completion_handler;
static void *completion_handler_user;

static atomic_uint_fast64_t next_stream_id = 1;
static atomic_uint_fast64_t next_correlation_id = 1;
/* The correlation id of the work this thread submitted last: the public
 * API's API call records (sim_public.c) read it right after a submit. */
static _Thread_local uint64_t last_submitted_correlation_id;

uint64_t sim_last_correlation_id(void)
{
    return last_submitted_correlation_id;
}

uint64_t sim_clock_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * NANOSECONDS_PER_SECOND + (uint64_t)now.tv_nsec;
}

struct timespec sim_deadline_after_ns(uint64_t timeout_ns)
{
    uint64_t now = sim_clock_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
    return (struct timespec){.tv_sec = (time_t)(deadline / NANOSECONDS_PER_SECOND),
                             .tv_nsec = (long)(deadline % NANOSECONDS_PER_SECOND)};
}

/* Invalid text falls back to one device silently: the library must not
 * write to stderr, and a profiler must not refuse to start over this. */
static int device_count_from_environment(void)
{
    const char *text = getenv("FLARE_SIM_DEVICES");
    if (text == NULL || text[0] == '\0') {
        return 1;
    }
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < 1 || value > SIM_DEVICE_MAX) {
        return 1;
    }
    return (int)value;
}

void sim_state_ensure(void)
{
    if (atomic_load_explicit(&state_ready, memory_order_acquire)) {
        return;
    }
    pthread_mutex_lock(&state_lock);
    if (!atomic_load_explicit(&state_ready, memory_order_relaxed)) {
        device_count = configured_device_count != 0 ? configured_device_count
                                                    : device_count_from_environment();
        for (int device = 0; device < device_count; device++) {
            pthread_mutex_init(&devices[device].lock, NULL);
            core_cond_init_monotonic(&devices[device].idle);
            atomic_init(&devices[device].in_flight, 0);
        }
        atomic_store_explicit(&state_ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&state_lock);
}

int sim_configure(int requested_device_count)
{
    if (requested_device_count < 1 || requested_device_count > SIM_DEVICE_MAX) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    int status = FLARE_OK;
    pthread_mutex_lock(&state_lock);
    if (atomic_load_explicit(&state_ready, memory_order_relaxed)) {
        status = FLARE_ERR_STATE;
    } else {
        configured_device_count = requested_device_count;
    }
    pthread_mutex_unlock(&state_lock);
    return status;
}

bool sim_device_valid(int device)
{
    sim_state_ensure();
    return device >= 0 && device < device_count;
}

static int get_device_count(void)
{
    sim_state_ensure();
    return device_count;
}

static int get_device_name(int device, char *buffer, size_t size)
{
    if (!sim_device_valid(device) || buffer == NULL || size == 0) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    int length = snprintf(buffer, size, "flare simulated device %d", device);
    if (length < 0 || (size_t)length >= size) {
        buffer[0] = '\0';
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    return FLARE_OK;
}

int sim_device_stream_count(int device)
{
    if (!sim_device_valid(device)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&devices[device].lock);
    int count = devices[device].stream_count;
    pthread_mutex_unlock(&devices[device].lock);
    return count;
}

static void deliver_completion(const backend_completion *completion, uint32_t slow_completion_ms)
{
    pthread_rwlock_rdlock(&handler_lock);
    if (completion_handler != NULL) {
        if (slow_completion_ms > 0) {
            struct timespec pause = {.tv_sec = slow_completion_ms / 1000,
                                     .tv_nsec = (long)(slow_completion_ms % 1000) *
                                                (long)NANOSECONDS_PER_MILLISECOND};
            while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
            }
        }
        completion_handler(completion, completion_handler_user);
    }
    pthread_rwlock_unlock(&handler_lock);
}

/* Completions held back (sim_fault.hold_completions): copies, in order.
 * Names point into the kernel registry, which lives as long as the process. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static backend_completion held[SIM_HELD_MAX];
static uint32_t held_count;

/* held_lock held, handler_lock read-held. */
static void deliver_held_locked(void)
{
    for (uint32_t i = 0; i < held_count; i++)
        if (completion_handler != NULL)
            completion_handler(&held[i], completion_handler_user);
    held_count = 0;
}

void sim_deliver_held(void)
{
    pthread_rwlock_rdlock(&handler_lock);
    pthread_mutex_lock(&held_lock);
    deliver_held_locked();
    pthread_mutex_unlock(&held_lock);
    pthread_rwlock_unlock(&handler_lock);
}

/* Holds completion back when asked to; returns whether it did. A full
 * buffer is handed over whole, as CUPTI hands over a full buffer. */
static bool hold_completion(const backend_completion *completion, uint32_t limit)
{
    if (limit == 0)
        return false;
    if (limit > SIM_HELD_MAX)
        limit = SIM_HELD_MAX;
    pthread_rwlock_rdlock(&handler_lock);
    pthread_mutex_lock(&held_lock);
    held[held_count++] = *completion;
    if (held_count >= limit)
        deliver_held_locked();
    pthread_mutex_unlock(&held_lock);
    pthread_rwlock_unlock(&handler_lock);
    return true;
}

static void set_completion_handler(backend_completion_handler handler, void *user)
{
    pthread_rwlock_wrlock(&handler_lock);
    completion_handler = handler;
    completion_handler_user = user;
    pthread_rwlock_unlock(&handler_lock);
}

/* Consumers order a stream's work by start time, so the worker makes starts
 * strictly increasing even when the clock is coarser than the work. */
static uint64_t stream_next_start_ns(backend_stream *stream)
{
    uint64_t start = sim_clock_ns();
    if (start <= stream->last_start_ns) {
        start = stream->last_start_ns + 1;
    }
    stream->last_start_ns = start;
    return start;
}

static void run_work_item(backend_stream *stream, sim_work_item *item,
                          backend_completion *completion)
{
    *completion = (backend_completion){
        .kind = item->kind,
        .device = stream->device,
        .stream_id = stream->id,
        .correlation_id = item->correlation_id,
        .bytes = item->bytes,
        .copy_kind = item->copy_kind,
        .status = FLARE_OK,
    };
    completion->start_ns = stream_next_start_ns(stream);
    /* In the busy log from its start (sim_busy.h: the PM hardware's values). */
    uint64_t busy = item->kind == BACKEND_WORK_KERNEL
                        ? sim_busy_begin(stream->device, completion->start_ns)
                        : SIM_BUSY_OFF;
    switch (item->kind) {
    case BACKEND_WORK_KERNEL: {
        flare_sim_launch launch = {
            .device = stream->device, .args = item->args, .args_size = item->args_size};
        memcpy(launch.grid, item->grid, sizeof launch.grid);
        memcpy(launch.block, item->block, sizeof launch.block);
        /* The hang counts towards the kernel's duration, as a real hung
         * kernel's would. */
        if (item->fault.hang) {
            sim_fault_wait_until_released(item->fault.hang_generation);
        }
        /* PC sampling sees the kernel while its body runs (sim_pc.h). */
        sim_pc_kernel_begin(stream->device, sim_kernel_name(item->kernel_id));
        sim_kernel_function(item->kernel_id)(&launch);
        sim_pc_kernel_end();
        completion->name = sim_kernel_name(item->kernel_id);
        memcpy(completion->grid, item->grid, sizeof completion->grid);
        memcpy(completion->block, item->block, sizeof completion->block);
        completion->shared_memory_bytes = item->shared_memory_bytes;
        completion->registers_per_thread = SIM_REGISTERS_PER_THREAD;
        break;
    }
    case BACKEND_WORK_COPY:
        if (item->fault.fail) {
            completion->status = FLARE_ERR_BACKEND;
        } else if (item->bytes > 0) {
            memmove(item->destination, item->source, item->bytes);
        }
        break;
    case BACKEND_WORK_MEMSET:
        if (item->bytes > 0) {
            memset(item->destination, item->memset_value, item->bytes);
        }
        break;
    }
    uint64_t end = sim_clock_ns();
    completion->end_ns = end > completion->start_ns ? end : completion->start_ns;
    sim_busy_end(busy, completion->end_ns);
    if (item->kind == BACKEND_WORK_KERNEL &&
        atomic_load_explicit(&stream->timed, memory_order_relaxed))
        sim_times_note(stream->device, completion->start_ns, completion->end_ns);
}

void sim_stream_set_timed(backend_stream *stream)
{
    atomic_store(&stream->timed, true);
}

/* Called after the handler returned: only now is the item no longer in flight.
 * The stream count drops first and the device count inside the same stream
 * critical section, so whoever sees the device idle also sees each of its
 * streams idle, and a stream drainer wakes only once the device count has
 * dropped too. */
static void stream_finish_item(backend_stream *stream)
{
    sim_device *device = &devices[stream->device];
    pthread_mutex_lock(&stream->lock);
    if (atomic_fetch_sub(&stream->in_flight, 1) == 1) {
        pthread_cond_broadcast(&stream->idle);
    }
    pthread_mutex_lock(&device->lock);
    if (atomic_fetch_sub(&device->in_flight, 1) == 1) {
        pthread_cond_broadcast(&device->idle);
    }
    pthread_mutex_unlock(&device->lock);
    pthread_mutex_unlock(&stream->lock);
}

static void *stream_worker(void *argument)
{
    backend_stream *stream = argument;
    pthread_mutex_lock(&stream->lock);
    for (;;) {
        while (stream->queue_count == 0 && !stream->stopping) {
            pthread_cond_wait(&stream->work_available, &stream->lock);
        }
        /* Stopping only ends the loop once the queue is empty, so work
         * submitted before destroy still completes. */
        if (stream->queue_count == 0) {
            break;
        }
        sim_work_item item = stream->queue[stream->queue_head];
        stream->queue_head = (stream->queue_head + 1) % SIM_STREAM_QUEUE_CAPACITY;
        stream->queue_count--;
        pthread_cond_broadcast(&stream->room_available);
        pthread_mutex_unlock(&stream->lock);

        backend_completion completion;
        run_work_item(stream, &item, &completion);
        if (!hold_completion(&completion, item.fault.hold_limit))
            deliver_completion(&completion, item.fault.slow_completion_ms);
        free(item.args);
        stream_finish_item(stream);

        pthread_mutex_lock(&stream->lock);
    }
    pthread_mutex_unlock(&stream->lock);
    return NULL;
}

static int stream_submit(backend_stream *stream, sim_work_item *item, const char *kernel_name)
{
    struct timespec deadline =
        sim_deadline_after_ns((uint64_t)SIM_SUBMIT_WAIT_MS * NANOSECONDS_PER_MILLISECOND);
    pthread_mutex_lock(&stream->lock);
    while (!stream->stopping && stream->queue_count == SIM_STREAM_QUEUE_CAPACITY) {
        if (pthread_cond_timedwait(&stream->room_available, &stream->lock, &deadline) ==
            ETIMEDOUT) {
            break;
        }
    }
    if (stream->stopping || stream->queue_count == SIM_STREAM_QUEUE_CAPACITY) {
        int status = stream->stopping ? FLARE_ERR_STATE : FLARE_ERR_FULL;
        pthread_mutex_unlock(&stream->lock);
        return status;
    }
    /* Decided only once the item is sure to be queued, so a rejected copy
     * does not use up one of the injected failures. */
    item->fault = sim_fault_decide(item->kind, kernel_name);
    item->correlation_id = atomic_fetch_add(&next_correlation_id, 1);
    last_submitted_correlation_id = item->correlation_id;
    size_t tail = (stream->queue_head + stream->queue_count) % SIM_STREAM_QUEUE_CAPACITY;
    stream->queue[tail] = *item;
    stream->queue_count++;
    /* Counted before the worker can see the item, so neither counter can
     * drop below the work it covers. */
    atomic_fetch_add(&stream->in_flight, 1);
    atomic_fetch_add(&devices[stream->device].in_flight, 1);
    pthread_cond_signal(&stream->work_available);
    pthread_mutex_unlock(&stream->lock);
    return FLARE_OK;
}

static void stream_release_resources(backend_stream *stream)
{
    pthread_cond_destroy(&stream->idle);
    pthread_cond_destroy(&stream->room_available);
    pthread_cond_destroy(&stream->work_available);
    pthread_mutex_destroy(&stream->lock);
    free(stream->queue);
    free(stream);
}

static int stream_create(int device, backend_stream **out)
{
    if (out == NULL || !sim_device_valid(device)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    backend_stream *stream = calloc(1, sizeof *stream);
    if (stream == NULL) {
        return FLARE_ERR_NO_MEMORY;
    }
    stream->queue = calloc(SIM_STREAM_QUEUE_CAPACITY, sizeof *stream->queue);
    if (stream->queue == NULL) {
        free(stream);
        return FLARE_ERR_NO_MEMORY;
    }
    stream->id = atomic_fetch_add(&next_stream_id, 1);
    stream->device = device;
    atomic_init(&stream->in_flight, 0);
    pthread_mutex_init(&stream->lock, NULL);
    pthread_cond_init(&stream->work_available, NULL);
    core_cond_init_monotonic(&stream->room_available);
    core_cond_init_monotonic(&stream->idle);

    /* Application signal handlers belong on application threads; the worker
     * inherits a full mask. */
    sigset_t all_signals;
    sigset_t previous_signals;
    sigfillset(&all_signals);
    pthread_sigmask(SIG_SETMASK, &all_signals, &previous_signals);
    int created = pthread_create(&stream->worker, NULL, stream_worker, stream);
    pthread_sigmask(SIG_SETMASK, &previous_signals, NULL);
    if (created != 0) {
        stream_release_resources(stream);
        return FLARE_ERR_BACKEND;
    }
    char thread_name[16];
    snprintf(thread_name, sizeof thread_name, "flare-sim-%llu",
             (unsigned long long)(stream->id % 100000));
    pthread_setname_np(stream->worker, thread_name);

    sim_device *owner = &devices[device];
    pthread_mutex_lock(&owner->lock);
    stream->registry_next = owner->streams;
    if (owner->streams != NULL) {
        owner->streams->registry_previous = stream;
    }
    owner->streams = stream;
    owner->stream_count++;
    pthread_mutex_unlock(&owner->lock);
    *out = stream;
    return FLARE_OK;
}

static int stream_drain(backend_stream *stream, uint64_t timeout_ns)
{
    if (stream == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    struct timespec deadline = sim_deadline_after_ns(timeout_ns);
    int status = FLARE_OK;
    pthread_mutex_lock(&stream->lock);
    while (atomic_load(&stream->in_flight) > 0) {
        if (pthread_cond_timedwait(&stream->idle, &stream->lock, &deadline) == ETIMEDOUT) {
            status = atomic_load(&stream->in_flight) > 0 ? FLARE_ERR_TIMEOUT : FLARE_OK;
            break;
        }
    }
    pthread_mutex_unlock(&stream->lock);
    return status;
}

static int device_drain(int device, uint64_t timeout_ns)
{
    if (!sim_device_valid(device)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    sim_device *target = &devices[device];
    struct timespec deadline = sim_deadline_after_ns(timeout_ns);
    int status = FLARE_OK;
    pthread_mutex_lock(&target->lock);
    while (atomic_load(&target->in_flight) > 0) {
        if (pthread_cond_timedwait(&target->idle, &target->lock, &deadline) == ETIMEDOUT) {
            status = atomic_load(&target->in_flight) > 0 ? FLARE_ERR_TIMEOUT : FLARE_OK;
            break;
        }
    }
    pthread_mutex_unlock(&target->lock);
    return status;
}

static int stream_destroy(backend_stream *stream)
{
    if (stream == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    /* A completion handler destroying its own stream would join itself. */
    if (pthread_equal(pthread_self(), stream->worker)) {
        return FLARE_ERR_STATE;
    }
    int status = stream_drain(stream, (uint64_t)SIM_STREAM_DESTROY_WAIT_S * NANOSECONDS_PER_SECOND);
    if (status != FLARE_OK) {
        return status;
    }
    pthread_mutex_lock(&stream->lock);
    stream->stopping = true;
    pthread_cond_broadcast(&stream->work_available);
    pthread_cond_broadcast(&stream->room_available);
    pthread_mutex_unlock(&stream->lock);
    pthread_join(stream->worker, NULL);

    sim_device *owner = &devices[stream->device];
    pthread_mutex_lock(&owner->lock);
    if (stream->registry_previous != NULL) {
        stream->registry_previous->registry_next = stream->registry_next;
    } else {
        owner->streams = stream->registry_next;
    }
    if (stream->registry_next != NULL) {
        stream->registry_next->registry_previous = stream->registry_previous;
    }
    owner->stream_count--;
    pthread_mutex_unlock(&owner->lock);
    stream_release_resources(stream);
    return FLARE_OK;
}

static uint64_t stream_id(const backend_stream *stream)
{
    return stream != NULL ? stream->id : 0;
}

static int stream_device(const backend_stream *stream)
{
    return stream != NULL ? stream->device : FLARE_ERR_INVALID_ARGUMENT;
}

static uint64_t stream_in_flight(const backend_stream *stream)
{
    return stream != NULL ? atomic_load(&stream->in_flight) : 0;
}

static uint64_t device_in_flight(int device)
{
    return sim_device_valid(device) ? atomic_load(&devices[device].in_flight) : 0;
}

/* A range that starts in simulated memory must end there too; host ranges
 * are the caller's business, as with a real device. */
static bool device_range_fits(const void *pointer, size_t bytes)
{
    size_t bytes_after = 0;
    return !sim_memory_lookup(pointer, &bytes_after) || bytes <= bytes_after;
}

static int copy_async(backend_stream *stream, void *destination, const void *source, size_t bytes,
                      backend_copy_kind kind)
{
    if (stream == NULL || (bytes > 0 && (destination == NULL || source == NULL)) ||
        kind < BACKEND_COPY_UNKNOWN || kind > BACKEND_COPY_HOST_TO_HOST ||
        !device_range_fits(destination, bytes) || !device_range_fits(source, bytes)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    sim_work_item item = {.kind = BACKEND_WORK_COPY,
                          .destination = destination,
                          .source = source,
                          .bytes = bytes,
                          .copy_kind = kind};
    return stream_submit(stream, &item, NULL);
}

static int memset_async(backend_stream *stream, void *destination, int value, size_t bytes)
{
    if (stream == NULL || (bytes > 0 && destination == NULL) ||
        !device_range_fits(destination, bytes)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    sim_work_item item = {.kind = BACKEND_WORK_MEMSET,
                          .destination = destination,
                          .bytes = bytes,
                          .memset_value = value};
    return stream_submit(stream, &item, NULL);
}

static int launch_kernel(backend_stream *stream, const backend_launch *launch)
{
    if (stream == NULL || launch == NULL || launch->args_size > SIM_ARGS_MAX ||
        (launch->args_size > 0 && launch->args == NULL)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    const char *kernel_name = sim_kernel_name(launch->kernel_id);
    if (kernel_name == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    for (int axis = 0; axis < 3; axis++) {
        if (launch->grid[axis] == 0 || launch->block[axis] == 0) {
            return FLARE_ERR_INVALID_ARGUMENT;
        }
    }
    sim_work_item item = {.kind = BACKEND_WORK_KERNEL,
                          .kernel_id = launch->kernel_id,
                          .shared_memory_bytes = launch->shared_memory_bytes,
                          .args_size = launch->args_size};
    memcpy(item.grid, launch->grid, sizeof item.grid);
    memcpy(item.block, launch->block, sizeof item.block);
    if (launch->args_size > 0) {
        item.args = malloc(launch->args_size);
        if (item.args == NULL) {
            return FLARE_ERR_NO_MEMORY;
        }
        memcpy(item.args, launch->args, launch->args_size);
    }
    int status = stream_submit(stream, &item, kernel_name);
    if (status != FLARE_OK) {
        free(item.args);
    }
    return status;
}

static int memory_alloc(int device, size_t bytes, void **out)
{
    return sim_memory_alloc(device, bytes, out);
}

static int memory_free(void *pointer)
{
    return sim_memory_free(pointer);
}

const backend_ops sim_device_ops = {
    .name = "sim",
    .device_count = get_device_count,
    .device_name = get_device_name,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_id = stream_id,
    .stream_device = stream_device,
    .stream_in_flight = stream_in_flight,
    .device_in_flight = device_in_flight,
    .stream_drain = stream_drain,
    .device_drain = device_drain,
    .memory_alloc = memory_alloc,
    .memory_free = memory_free,
    .copy_async = copy_async,
    .memset_async = memset_async,
    .launch = launch_kernel,
    .set_completion_handler = set_completion_handler,
};

const backend_ops *sim_backend(void)
{
    return &sim_device_ops;
}
