/*
 * sim_replay.c: what kernel replay needs from the simulated device: drains,
 * shadow memory and copies (replay_device_ops), and a metric collector
 * ("sim-metrics") with the same multi-pass shape as the CUDA range
 * profiler, plus faults for the tests.
 *
 * The simulated device's memory is host memory, so copies are memcpy; what
 * makes the tests meaningful is the gate and the drains, which are real. The
 * collector computes only what the simulated device knows (kernel time,
 * launch geometry); hardware metrics from the named sets are accepted and
 * reported as unavailable, never invented. It must never touch the
 * inventory: shadows are flare's memory, not the program's.
 */
#include "backend/sim/sim_internal.h"
#include "backend/sim/sim_pm.h"
#include "backend/sim/sim_times.h"
#include "core/clock.h"
#include "replay/replay.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_replay_fault fault;
static _Atomic uint64_t copies_done;

void sim_replay_fault_set(const sim_replay_fault *new_fault)
{
    pthread_mutex_lock(&fault_lock);
    if (new_fault != NULL) {
        fault = *new_fault;
    } else {
        memset(&fault, 0, sizeof fault);
    }
    atomic_store(&copies_done, 0);
    pthread_mutex_unlock(&fault_lock);
}

static sim_replay_fault fault_current(void)
{
    pthread_mutex_lock(&fault_lock);
    sim_replay_fault current = fault;
    pthread_mutex_unlock(&fault_lock);
    return current;
}

static int replay_stream_drain(void *stream, uint64_t timeout_ns)
{
    return sim_backend()->stream_drain((backend_stream *)stream, timeout_ns);
}

static int replay_device_drain(int device, uint64_t timeout_ns)
{
    return sim_backend()->device_drain(device, timeout_ns);
}

static int replay_shadow_alloc(int device, bool on_device, size_t bytes, void **out)
{
    sim_replay_fault current = fault_current();
    if ((on_device && current.fail_device_shadow) || (!on_device && current.fail_host_shadow)) {
        return FLARE_ERR_NO_MEMORY;
    }
    if (on_device) {
        return sim_memory_alloc(device, bytes, out);
    }
    *out = malloc(bytes);
    return *out != NULL ? FLARE_OK : FLARE_ERR_NO_MEMORY;
}

static void replay_shadow_free(int device, bool on_device, void *pointer)
{
    (void)device;
    if (on_device) {
        sim_memory_free(pointer);
    } else {
        free(pointer);
    }
}

static int sim_replay_copy(int device, void *destination, const void *source, size_t bytes,
                           uint64_t timeout_ns)
{
    (void)device;
    (void)timeout_ns;
    sim_replay_fault current = fault_current();
    uint64_t done = atomic_fetch_add(&copies_done, 1);
    if (current.fail_copy_after != 0 && done + 1 >= current.fail_copy_after) {
        return FLARE_ERR_BACKEND;
    }
    memcpy(destination, source, bytes);
    return FLARE_OK;
}

/* The batched form: the same copies, the first failure reported by index. */
static int sim_replay_copy_batch(int device, const replay_copy *copies, size_t count,
                                 uint64_t timeout_ns, size_t *failed_index)
{
    for (size_t index = 0; index < count; index++) {
        int status = sim_replay_copy(device, copies[index].destination, copies[index].source,
                                     copies[index].bytes, timeout_ns);
        if (status != FLARE_OK) {
            *failed_index = index;
            return status;
        }
    }
    return FLARE_OK;
}

static size_t replay_device_memory_free(int device)
{
    (void)device;
    sim_replay_fault current = fault_current();
    return current.device_free_bytes != 0 ? current.device_free_bytes : (size_t)64 << 30;
}

/* The simulated device has no notion of a current device: spans start on
 * device 0 (work on another device declines them). */
static int replay_current_device(void)
{
    return 0;
}

static const replay_device_ops sim_replay_operations = {
    .name = "sim",
    .stream_drain = replay_stream_drain,
    .device_drain = replay_device_drain,
    .shadow_alloc = replay_shadow_alloc,
    .shadow_free = replay_shadow_free,
    .copy = sim_replay_copy,
    .device_memory_free = replay_device_memory_free,
    .copy_batch = sim_replay_copy_batch,
    .current_device = replay_current_device,
    .kernel_times_begin = sim_times_begin,
    .kernel_times_end = sim_times_end,
    .pm_hardware = sim_pm_replay_hardware,
};

const replay_device_ops *sim_replay_ops(void)
{
    return &sim_replay_operations;
}

/* ---- The simulated metric collector ----
 *
 * Two metrics per pass, like a hardware counter budget, so a set of n
 * metrics needs ceil(n / 2) passes. State is per launching thread: a thread
 * runs one replay loop at a time.
 */
#define SIM_METRICS_PER_PASS 2

typedef struct sim_collection {
    size_t metric_count;
    char names[REPLAY_RECORD_METRIC_MAX][REPLAY_METRIC_NAME_MAX];
    double values[REPLAY_RECORD_METRIC_MAX];
    uint64_t pass_begin_ns;
    bool any_unavailable;
    bool holds_turn; /* the devices' collection turn (replay_turn.c) */
} sim_collection;

/* Kept off static TLS (too large for a dlopen'ed libflare's TLS block):
 * each launching thread gets one on the heap, freed when it exits. */
static pthread_key_t collection_key;
static pthread_once_t collection_key_once = PTHREAD_ONCE_INIT;

static void collection_key_create(void)
{
    pthread_key_create(&collection_key, free);
}

static sim_collection *thread_collection(void)
{
    pthread_once(&collection_key_once, collection_key_create);
    sim_collection *collection = pthread_getspecific(collection_key);
    if (collection == NULL) {
        collection = calloc(1, sizeof *collection);
        if (collection != NULL && pthread_setspecific(collection_key, collection) != 0) {
            free(collection);
            collection = NULL;
        }
    }
    return collection;
}

static bool metric_simulated(const char *name)
{
    return strcmp(name, "gpu__time_duration.sum") == 0 || strcmp(name, "launch__grid_size") == 0 ||
           strcmp(name, "launch__block_size") == 0 || strcmp(name, "launch__thread_count") == 0;
}

static bool metric_in_some_set(const char *name)
{
    size_t count = 0;
    const replay_metric_set *sets = replay_metric_sets(&count);
    size_t length = strlen(name);
    for (size_t index = 0; index < count; index++) {
        const char *cursor = sets[index].metrics;
        while ((cursor = strstr(cursor, name)) != NULL) {
            bool starts = cursor == sets[index].metrics || cursor[-1] == ',';
            bool ends = cursor[length] == '\0' || cursor[length] == ',';
            if (starts && ends) {
                return true;
            }
            cursor += length;
        }
    }
    return false;
}

static int collector_prepare(const flare_replay_launch *launch, const char *const *metrics,
                             size_t metric_count, char *reason, size_t reason_size)
{
    (void)launch;
    if (metric_count == 0 || metric_count > REPLAY_RECORD_METRIC_MAX) {
        snprintf(reason, reason_size, "no metrics to collect");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    for (size_t index = 0; index < metric_count; index++) {
        if (!metric_simulated(metrics[index]) && !metric_in_some_set(metrics[index])) {
            snprintf(reason, reason_size, "unknown metric \"%.100s\" on the simulated device",
                     metrics[index]);
            return FLARE_ERR_NOT_FOUND;
        }
    }
    sim_collection *collection = thread_collection();
    if (collection == NULL) {
        snprintf(reason, reason_size, "out of memory");
        return FLARE_ERR_NO_MEMORY;
    }
    replay_collection_turn_give(&collection->holds_turn);
    memset(collection, 0, sizeof *collection);
    collection->metric_count = metric_count;
    for (size_t index = 0; index < metric_count; index++) {
        snprintf(collection->names[index], REPLAY_METRIC_NAME_MAX, "%s", metrics[index]);
        collection->values[index] = NAN;
    }
    return (int)((metric_count + SIM_METRICS_PER_PASS - 1) / SIM_METRICS_PER_PASS);
}

static int collector_pass_begin(const flare_replay_launch *launch, uint32_t pass)
{
    (void)launch;
    (void)pass;
    sim_collection *collection = thread_collection();
    if (collection == NULL) {
        return FLARE_ERR_NO_MEMORY;
    }
    /* As the CUDA collector: with devices taking turns, from the first pass
     * to end(). */
    if (replay_collection_turn_take(&collection->holds_turn) != FLARE_OK) {
        return FLARE_ERR_TIMEOUT;
    }
    collection->pass_begin_ns = core_now_ns();
    return FLARE_OK;
}

static int collector_pass_end(const flare_replay_launch *launch, uint32_t pass)
{
    sim_collection *collection = thread_collection();
    uint64_t elapsed = core_now_ns() - collection->pass_begin_ns;
    double grid = (double)launch->grid[0] * launch->grid[1] * launch->grid[2];
    double block = (double)launch->block[0] * launch->block[1] * launch->block[2];
    for (size_t index = (size_t)pass * SIM_METRICS_PER_PASS;
         index < collection->metric_count && index < ((size_t)pass + 1) * SIM_METRICS_PER_PASS;
         index++) {
        const char *name = collection->names[index];
        if (strcmp(name, "gpu__time_duration.sum") == 0) {
            collection->values[index] = (double)elapsed;
        } else if (strcmp(name, "launch__grid_size") == 0) {
            collection->values[index] = grid;
        } else if (strcmp(name, "launch__block_size") == 0) {
            collection->values[index] = block;
        } else if (strcmp(name, "launch__thread_count") == 0) {
            collection->values[index] = grid * block;
        } else {
            collection->any_unavailable = true;
        }
    }
    return FLARE_OK;
}

static int collector_finish(const flare_replay_launch *launch, double *values, size_t metric_count,
                            char *reason, size_t reason_size)
{
    (void)launch;
    sim_collection *collection = thread_collection();
    for (size_t index = 0; index < metric_count && index < collection->metric_count; index++) {
        values[index] = collection->values[index];
    }
    if (collection->any_unavailable) {
        snprintf(reason, reason_size,
                 "hardware metrics are not available on the simulated device (stored as NULL)");
    }
    return FLARE_OK;
}

/* Spans: launch geometry per kernel; the simulated device keeps no
 * per-kernel timings inside a pass, so time and hardware metrics are NULL. */
static int collector_finish_ranges(const flare_replay_launch *span,
                                   const flare_replay_launch *ranges, size_t range_count,
                                   double *values, size_t metric_count, char *reason,
                                   size_t reason_size)
{
    (void)span;
    sim_collection *collection = thread_collection();
    bool unavailable = false;
    for (size_t range = 0; range < range_count; range++) {
        double grid = (double)ranges[range].grid[0] * ranges[range].grid[1] * ranges[range].grid[2];
        double block =
            (double)ranges[range].block[0] * ranges[range].block[1] * ranges[range].block[2];
        for (size_t metric = 0; metric < metric_count && metric < collection->metric_count;
             metric++) {
            const char *name = collection->names[metric];
            double *value = &values[range * metric_count + metric];
            if (strcmp(name, "launch__grid_size") == 0) {
                *value = grid;
            } else if (strcmp(name, "launch__block_size") == 0) {
                *value = block;
            } else if (strcmp(name, "launch__thread_count") == 0) {
                *value = grid * block;
            } else {
                *value = NAN;
                unavailable = true;
            }
        }
    }
    if (unavailable) {
        snprintf(reason, reason_size,
                 "per-kernel time and hardware metrics are not available on the simulated device "
                 "(stored as NULL)");
    }
    return FLARE_OK;
}

static void collector_end(const flare_replay_launch *launch)
{
    (void)launch;
    sim_collection *collection = thread_collection();
    if (collection != NULL) {
        replay_collection_turn_give(&collection->holds_turn);
    }
}

static const replay_metric_collector sim_collector = {
    .name = "sim-metrics",
    .prepare = collector_prepare,
    .pass_begin = collector_pass_begin,
    .pass_end = collector_pass_end,
    .finish = collector_finish,
    .finish_ranges = collector_finish_ranges,
    .end = collector_end,
};

const replay_metric_collector *sim_replay_collector(void)
{
    return &sim_collector;
}
