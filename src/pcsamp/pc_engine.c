/*
 * pc_engine.c: the hardware-independent PC sampling engine (pc_engine.h):
 * FLARE_PC_PERIOD, the lease, the drain thread, and the bounded aggregate
 * table the collector takes from.
 *
 * Locks: `lock` guards the armed state, the armed device and the drain
 * thread's control; `hardware_lock` serialises every hardware call (start,
 * stop, read) and guards the window fields and the read buffer, so the drain
 * thread and disarm never touch the hardware at once; `table_lock` guards the
 * aggregate table, the open window's epoch and the counters. Order:
 * hardware_lock before table_lock; `lock` is never taken inside the others.
 * No lock is held across anything that waits, except hardware_lock across a
 * hardware call (which the ops contract keeps short).
 *
 * Must never: hand out an entry of the window still armed, or one entry
 * twice; lose a sample without counting it; wait without a bound.
 */
#include "pcsamp/pc_engine.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "flare/flare.h"
#include "tracebuf/lease.h"

/* Read batches one drain round moves at most (then it sleeps again). */
#define DRAIN_BATCHES_MAX 64
/* Read batches disarm moves at most after the stop: the hardware has stopped,
 * so its buffer only empties; the bound turns a hardware that keeps
 * producing after stop into a logged warning instead of a hang. */
#define DISARM_BATCHES_MAX 65536
/* The drain thread's wait while nothing is armed (arm wakes it at once). */
#define IDLE_WAIT_NS 1000000000ull
/* Table sizes pc_engine_set_aggregate_capacity accepts. */
#define AGGREGATE_CAPACITY_LIMIT (16u * PC_AGGREGATE_MAX)

/* Writes a message into reason when the caller gave room for one. */
static void say(char *reason, size_t reason_size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *reason, size_t reason_size, const char *format, ...)
{
    if (reason == NULL || reason_size == 0)
        return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(reason, reason_size, format, arguments);
    va_end(arguments);
}

/* ---- settings ---- */

int pc_settings_from_environment(uint64_t *period_ns, char *error, size_t error_size)
{
    *period_ns = PC_PERIOD_DEFAULT_NS;
    const char *text = getenv("FLARE_PC_PERIOD");
    if (text == NULL || text[0] == '\0')
        return FLARE_OK;
    char message[160] = "";
    uint64_t value = 0;
    if (core_duration_parse(text, strlen(text), PC_PERIOD_MIN_NS, PC_PERIOD_MAX_NS, &value, message,
                            sizeof(message)) != FLARE_OK) {
        say(error, error_size, "FLARE_PC_PERIOD=%.32s: %s", text, message);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    *period_ns = value;
    return FLARE_OK;
}

/* ---- the aggregate table ----
 *
 * A fixed array of aggregates with two intrusive lists through it: a hash
 * chain per bucket (to find a key) and one list in arrival order (what take
 * walks; free aggregates are chained through the same link). Windows are
 * armed one after the other and each is drained completely before the next
 * starts, so the arrival list holds closed windows first, then the open one.
 */

#define NIL UINT32_MAX
/* What a sample without a function name counts under. */
#define PC_UNKNOWN_FUNCTION "(unknown function)"

typedef struct pc_aggregate {
    uint64_t epoch; /* the engine's own window number: unique, unlike window ids */
    uint64_t window_id;
    uint64_t pc_offset;
    uint64_t hash;
    uint64_t samples, first_ns, last_ns;
    int32_t device;
    uint32_t stall_reason;
    uint32_t bucket_next; /* next in its bucket's chain */
    uint32_t order_next;  /* next in arrival order; next free when free */
    const char *function; /* the hardware side's, kept while the engine lives */
    const char *file;     /* its source line, as the first sample said (not in the key) */
    uint32_t line;
    const store_pc_code *code; /* its function's code where no line is (not in the key) */
} pc_aggregate;

typedef struct pc_table {
    pc_aggregate *entries;
    uint32_t *buckets; /* bucket_mask + 1 chain heads */
    size_t capacity;
    size_t bucket_mask;
    size_t used;
    size_t fresh;       /* entries[fresh..capacity) were never used (untouched memory) */
    uint32_t free_head; /* aggregates taken and free again */
    uint32_t order_head, order_tail;
} pc_table;

/* FLARE_OK or FLARE_ERR_NO_MEMORY (table left empty). */
static int table_init(pc_table *table, size_t capacity)
{
    size_t buckets = 16;
    while (buckets < capacity * 2)
        buckets *= 2;
    *table = (pc_table){.capacity = capacity, .bucket_mask = buckets - 1};
    table->entries = calloc(capacity, sizeof(*table->entries));
    table->buckets = malloc(buckets * sizeof(*table->buckets));
    if (table->entries == NULL || table->buckets == NULL) {
        free(table->entries);
        free(table->buckets);
        *table = (pc_table){0};
        return FLARE_ERR_NO_MEMORY;
    }
    memset(table->buckets, 0xff, buckets * sizeof(*table->buckets)); /* every head NIL */
    /* No free list is built: aggregates are handed out from `fresh` first,
     * so an engine that samples little never touches most of its table. */
    table->free_head = table->order_head = table->order_tail = NIL;
    return FLARE_OK;
}

static void table_free(pc_table *table)
{
    free(table->entries);
    free(table->buckets);
    *table = (pc_table){0};
}

/* FNV-1a over the key's fields and the function's bytes. */
static uint64_t hash_bytes(uint64_t hash, const void *bytes, size_t length)
{
    const unsigned char *cursor = bytes;
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ cursor[i]) * 0x100000001b3ull;
    return hash;
}

static uint64_t key_hash(uint64_t epoch, const pc_raw_sample *sample)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    hash = hash_bytes(hash, &epoch, sizeof(epoch));
    hash = hash_bytes(hash, &sample->device, sizeof(sample->device));
    hash = hash_bytes(hash, &sample->stall_reason, sizeof(sample->stall_reason));
    hash = hash_bytes(hash, &sample->pc_offset, sizeof(sample->pc_offset));
    return hash_bytes(hash, sample->function, strlen(sample->function));
}

static int key_matches(const pc_aggregate *entry, uint64_t hash, uint64_t epoch,
                       const pc_raw_sample *sample)
{
    return entry->hash == hash && entry->epoch == epoch && entry->device == sample->device &&
           entry->stall_reason == sample->stall_reason && entry->pc_offset == sample->pc_offset &&
           (entry->function == sample->function || strcmp(entry->function, sample->function) == 0);
}

static uint64_t sample_count(const pc_raw_sample *sample)
{
    return sample->count != 0 ? sample->count : 1;
}

/* Counts sample into its key's aggregate, making one if there is room.
 * 0, 1 when it made the key, or -1 when the key is new and the table full
 * (the caller counts it). */
static int table_count(pc_table *table, uint64_t epoch, uint64_t window_id,
                       const pc_raw_sample *sample)
{
    uint64_t hash = key_hash(epoch, sample);
    uint32_t *head = &table->buckets[hash & table->bucket_mask];
    for (uint32_t index = *head; index != NIL; index = table->entries[index].bucket_next) {
        pc_aggregate *entry = &table->entries[index];
        if (!key_matches(entry, hash, epoch, sample))
            continue;
        entry->samples += sample_count(sample);
        if (entry->file == NULL && sample->file != NULL) {
            /* Its line was looked up after the first sample (put off). */
            entry->file = sample->file;
            entry->line = sample->line;
        }
        if (entry->file == NULL && entry->code == NULL)
            entry->code = sample->code;
        if (sample->time_ns < entry->first_ns)
            entry->first_ns = sample->time_ns;
        if (sample->time_ns > entry->last_ns)
            entry->last_ns = sample->time_ns;
        return 0;
    }
    uint32_t index = table->free_head;
    if (index != NIL)
        table->free_head = table->entries[index].order_next;
    else if (table->fresh < table->capacity)
        index = (uint32_t)table->fresh++;
    else
        return -1;
    pc_aggregate *entry = &table->entries[index];
    *entry = (pc_aggregate){.epoch = epoch,
                            .window_id = window_id,
                            .pc_offset = sample->pc_offset,
                            .hash = hash,
                            .samples = sample_count(sample),
                            .first_ns = sample->time_ns,
                            .last_ns = sample->time_ns,
                            .device = sample->device,
                            .stall_reason = sample->stall_reason,
                            .bucket_next = *head,
                            .order_next = NIL,
                            .function = sample->function,
                            .file = sample->file,
                            .line = sample->file != NULL ? sample->line : 0,
                            .code = sample->file == NULL ? sample->code : NULL};
    *head = index;
    if (table->order_tail == NIL)
        table->order_head = index;
    else
        table->entries[table->order_tail].order_next = index;
    table->order_tail = index;
    table->used++;
    return 1;
}

/* Unlinks the oldest aggregate (there is one) and puts it on the free list. */
static void table_remove_oldest(pc_table *table)
{
    uint32_t index = table->order_head;
    pc_aggregate *entry = &table->entries[index];
    uint32_t *link = &table->buckets[entry->hash & table->bucket_mask];
    while (*link != index)
        link = &table->entries[*link].bucket_next;
    *link = entry->bucket_next;
    table->order_head = entry->order_next;
    if (table->order_head == NIL)
        table->order_tail = NIL;
    entry->order_next = table->free_head;
    table->free_head = index;
    table->used--;
}

/* ---- the engine ---- */

struct pc_engine {
    const pc_hardware_ops *ops;
    void *hardware;
    uint64_t context_id;
    uint64_t default_period_ns;
    int settings_status;
    char settings_error[192];

    pthread_mutex_t lock; /* armed, device, drain thread control */
    pthread_cond_t wake;  /* CLOCK_MONOTONIC */
    _Atomic int armed;
    _Atomic int paused;
    int device;
    int thread_started;
    int thread_exit;
    pthread_t thread;

    pthread_mutex_t hardware_lock; /* hardware calls and the fields below */
    _Atomic int sampling;          /* started and not yet drained by disarm */
    _Atomic int disarm_waiting;    /* disarm wants hardware_lock: the drain round yields */
    uint64_t epoch;                /* the current (or last) window's number */
    uint64_t window_id;
    uint64_t armed_ns;
    uint64_t close_ns;    /* disarm's now_ns while it drains; 0 while the window is open */
    pc_raw_sample *batch; /* PC_READ_BATCH samples */

    pthread_mutex_t table_lock; /* the table, open_epoch, the counters */
    pc_table table;
    uint64_t open_epoch; /* the armed window's epoch; 0: none open */
    pc_engine_stats stats;
    pc_engine_stats window_base; /* the counters when the open window was armed */
};

static void *drain_main(void *argument);

static int ops_complete(const pc_hardware_ops *ops)
{
    return ops != NULL && ops->start != NULL && ops->stop != NULL && ops->read != NULL &&
           ops->stall_reason_name != NULL;
}

int pc_engine_create(const pc_hardware_ops *ops, void *hardware, uint64_t context_id,
                     pc_engine **out)
{
    if (!ops_complete(ops) || out == NULL || context_id == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    pc_engine *engine = calloc(1, sizeof(*engine));
    if (engine == NULL)
        return FLARE_ERR_NO_MEMORY;
    engine->batch = calloc(PC_READ_BATCH, sizeof(*engine->batch));
    if (engine->batch == NULL || table_init(&engine->table, PC_AGGREGATE_MAX) != FLARE_OK) {
        free(engine->batch);
        free(engine);
        return FLARE_ERR_NO_MEMORY;
    }
    engine->ops = ops;
    engine->hardware = hardware;
    engine->context_id = context_id;
    engine->device = -1;
    engine->settings_status = pc_settings_from_environment(
        &engine->default_period_ns, engine->settings_error, sizeof(engine->settings_error));
    pthread_mutex_init(&engine->lock, NULL);
    pthread_mutex_init(&engine->hardware_lock, NULL);
    pthread_mutex_init(&engine->table_lock, NULL);
    core_cond_init_monotonic(&engine->wake);
    *out = engine;
    return FLARE_OK;
}

void pc_engine_destroy(pc_engine *engine)
{
    if (engine == NULL)
        return;
    pthread_mutex_lock(&engine->lock);
    int device = atomic_load(&engine->armed) ? engine->device : -1;
    pthread_mutex_unlock(&engine->lock);
    if (device >= 0)
        pc_engine_disarm(engine, device, core_now_ns(), NULL);
    pthread_mutex_lock(&engine->lock);
    engine->thread_exit = 1;
    pthread_cond_broadcast(&engine->wake);
    int joined = engine->thread_started;
    pthread_mutex_unlock(&engine->lock);
    if (joined)
        pthread_join(engine->thread, NULL);
    if (engine->ops->release != NULL)
        engine->ops->release(engine->hardware);
    pthread_cond_destroy(&engine->wake);
    pthread_mutex_destroy(&engine->lock);
    pthread_mutex_destroy(&engine->hardware_lock);
    pthread_mutex_destroy(&engine->table_lock);
    table_free(&engine->table);
    free(engine->batch);
    free(engine);
}

void pc_engine_reload_settings(pc_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
    engine->settings_status = pc_settings_from_environment(
        &engine->default_period_ns, engine->settings_error, sizeof(engine->settings_error));
    pthread_mutex_unlock(&engine->lock);
}

/* "PC sampling" or "SASS metrics", for the lease's words. */
static const char *kind_words(const pc_engine *engine)
{
    return engine->ops->kind == PC_ENGINE_SASS ? "SASS metrics" : "PC sampling";
}

int pc_engine_probe(pc_engine *engine, char *reason, size_t reason_size)
{
    if (engine->ops->kind != PC_ENGINE_SASS && engine->settings_status != FLARE_OK) {
        say(reason, reason_size, "%s", engine->settings_error);
        return engine->settings_status;
    }
    return FLARE_OK;
}

/* ---- arming ---- */

/* The window's period: config's, else FLARE_PC_PERIOD's (read at create and
 * at each session's start); none for SASS metrics. */
static int arm_period(pc_engine *engine, const backend_engine_config *config, uint64_t *period_ns,
                      char *reason, size_t reason_size)
{
    if (engine->ops->kind == PC_ENGINE_SASS) {
        *period_ns = 0;
        return FLARE_OK;
    }
    if (config != NULL && config->sample_interval_ns != 0) {
        uint64_t period = config->sample_interval_ns;
        if (period < PC_PERIOD_MIN_NS || period > PC_PERIOD_MAX_NS) {
            say(reason, reason_size, "%s: a sampling period of %llu ns is outside 1us..1s",
                engine->ops->name, (unsigned long long)period);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        *period_ns = period;
        return FLARE_OK;
    }
    if (engine->settings_status != FLARE_OK) {
        say(reason, reason_size, "%s", engine->settings_error);
        return engine->settings_status;
    }
    *period_ns = engine->default_period_ns;
    return FLARE_OK;
}

/* Takes the device's lease for the engine's context; BACKEND_ENGINE_BUSY
 * (counted) with the holder named when another context has it. */
static int arm_lease(pc_engine *engine, int device, char *reason, size_t reason_size)
{
    char holder[TRACEBUF_HOLDER_MAX] = "";
    int status = tracebuf_lease_acquire(device, engine->context_id, holder);
    if (status == FLARE_OK)
        return FLARE_OK;
    if (status == FLARE_ERR_INVALID_ARGUMENT) {
        say(reason, reason_size, "%s: no device %d to sample", engine->ops->name, device);
        return status;
    }
    if (strcmp(holder, "shutdown") == 0)
        say(reason, reason_size, "%s unavailable on device %d: flare is shutting down",
            kind_words(engine), device);
    else
        say(reason, reason_size, "%s busy, held by %s on device %d", kind_words(engine), holder,
            device);
    pthread_mutex_lock(&engine->table_lock);
    engine->stats.busy_refusals++;
    pthread_mutex_unlock(&engine->table_lock);
    return BACKEND_ENGINE_BUSY;
}

/* Starts the hardware for a new window. The window is opened in the table
 * before sampling is flagged, so no sample of it can be counted while take
 * would still see it as closed. 0, or FLARE_ERR_BACKEND with the reason. */
static int arm_start(pc_engine *engine, int device, const backend_engine_config *config,
                     uint64_t now_ns, uint64_t period_ns, char *reason, size_t reason_size)
{
    char message[192] = "";
    pthread_mutex_lock(&engine->hardware_lock);
    int status = engine->ops->start(engine->hardware, device, period_ns, message, sizeof(message));
    pthread_mutex_lock(&engine->table_lock);
    if (status == FLARE_OK) {
        engine->epoch++;
        engine->window_id = config != NULL ? config->window_id : 0;
        engine->armed_ns = now_ns;
        engine->close_ns = 0;
        engine->open_epoch = engine->epoch;
        engine->stats.arms++;
        engine->window_base = engine->stats;
    } else {
        engine->stats.start_failures++;
    }
    pthread_mutex_unlock(&engine->table_lock);
    if (status == FLARE_OK)
        atomic_store(&engine->sampling, 1);
    pthread_mutex_unlock(&engine->hardware_lock);
    if (status == FLARE_OK)
        return FLARE_OK;
    if (message[0] == '\0')
        snprintf(message, sizeof(message), "%s: start failed: %s", engine->ops->name,
                 flare_strerror(status));
    say(reason, reason_size, "%s", message);
    return FLARE_ERR_BACKEND;
}

/* Starts the drain thread on the first arm (lock held). Without one, disarm
 * still reads everything the hardware kept: samples only arrive late, and a
 * full hardware buffer loses (and counts) the rest. */
static void ensure_drain_thread(pc_engine *engine)
{
    if (engine->thread_started)
        return;
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    engine->thread_started = pthread_create(&engine->thread, NULL, drain_main, engine) == 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (!engine->thread_started)
        core_log(CORE_LOG_WARNING, "%s: no drain thread; samples are read at window close",
                 engine->ops->name);
}

int pc_engine_arm(pc_engine *engine, int device, const backend_engine_config *config,
                  uint64_t now_ns, char *reason, size_t reason_size)
{
    if (atomic_load(&engine->armed)) {
        say(reason, reason_size, "%s: already sampling", engine->ops->name);
        return FLARE_ERR_STATE;
    }
    if (device < 0) {
        say(reason, reason_size, "%s samples one device at a time (asked for device %d)",
            engine->ops->name, device);
        return FLARE_ERR_UNSUPPORTED;
    }
    uint64_t period_ns = 0;
    int status = arm_period(engine, config, &period_ns, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    status = arm_lease(engine, device, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    status = arm_start(engine, device, config, now_ns, period_ns, reason, reason_size);
    if (status != FLARE_OK) {
        tracebuf_lease_release(device, engine->context_id);
        return status;
    }
    pthread_mutex_lock(&engine->lock);
    engine->device = device;
    atomic_store(&engine->armed, 1);
    ensure_drain_thread(engine);
    pthread_cond_broadcast(&engine->wake);
    pthread_mutex_unlock(&engine->lock);
    return FLARE_OK;
}

/* ---- draining (hardware_lock held) ---- */

/* A sample's time within its window's open and close: the hardware keeps
 * sampling between the window's close and its stop (seen under TSan: a
 * sample a few microseconds after closed_ns), and CUDA's samples carry the
 * time they were read, after the stop for the last ones. They are the
 * window's samples; they count at its edge. */
static void clamp_to_window(const pc_engine *engine, pc_raw_sample *sample)
{
    if (sample->time_ns < engine->armed_ns)
        sample->time_ns = engine->armed_ns;
    if (engine->close_ns != 0 && sample->time_ns > engine->close_ns)
        sample->time_ns = engine->close_ns;
}

/* Reads one batch and counts every sample in it, and the hardware's losses.
 * Returns how many samples the read moved. */
static size_t drain_batch(pc_engine *engine)
{
    uint64_t lost = 0;
    size_t count = engine->ops->read(engine->hardware, engine->batch, PC_READ_BATCH, &lost);
    if (count > PC_READ_BATCH)
        count = PC_READ_BATCH; /* a read that overstates: only PC_READ_BATCH exist */
    uint64_t counted = 0, dropped = 0, made = 0;
    /* SASS metrics count records (values of different metrics, and of one
     * metric over instructions, are not samples to add up). */
    int by_record = engine->ops->kind == PC_ENGINE_SASS;
    pthread_mutex_lock(&engine->table_lock);
    for (size_t i = 0; i < count; i++) {
        pc_raw_sample *sample = &engine->batch[i];
        if (sample->function == NULL)
            sample->function = PC_UNKNOWN_FUNCTION;
        clamp_to_window(engine, sample);
        int counted_as = table_count(&engine->table, engine->epoch, engine->window_id, sample);
        uint64_t weight = by_record ? 1 : sample_count(sample);
        if (counted_as >= 0)
            counted += weight;
        else
            dropped += weight;
        made += counted_as == 1;
    }
    engine->stats.entries_made += made;
    engine->stats.reads++;
    engine->stats.samples += counted;
    engine->stats.aggregate_drops += dropped;
    engine->stats.samples_read += counted + dropped;
    engine->stats.samples_lost += lost;
    pthread_mutex_unlock(&engine->table_lock);
    return count;
}

/* The drain thread's round: full batches until the buffer is short of one,
 * at most DRAIN_BATCHES_MAX, and never keeping a waiting disarm longer than
 * the batch in hand. */
static void drain_round(pc_engine *engine)
{
    for (int batch = 0; batch < DRAIN_BATCHES_MAX; batch++) {
        if (drain_batch(engine) < PC_READ_BATCH || atomic_load(&engine->disarm_waiting))
            return;
    }
}

static void *drain_main(void *argument)
{
    /* Named for top -H and ps. */
    pthread_setname_np(pthread_self(), "flare-pc-drain");
    pc_engine *engine = argument;
    pthread_mutex_lock(&engine->lock);
    while (!engine->thread_exit) {
        int armed = atomic_load(&engine->armed);
        if (armed && !atomic_load(&engine->paused)) {
            pthread_mutex_unlock(&engine->lock);
            pthread_mutex_lock(&engine->hardware_lock);
            /* Disarm may have stopped and drained since armed was read. */
            if (atomic_load(&engine->sampling))
                drain_round(engine);
            pthread_mutex_unlock(&engine->hardware_lock);
            pthread_mutex_lock(&engine->lock);
            if (engine->thread_exit)
                break;
        }
        struct timespec deadline =
            core_deadline_after_ns(armed ? PC_DRAIN_PERIOD_NS : IDLE_WAIT_NS);
        pthread_cond_timedwait(&engine->wake, &engine->lock, &deadline);
    }
    pthread_mutex_unlock(&engine->lock);
    return NULL;
}

/* ---- disarming ---- */

/* Stops the hardware and reads what it kept (hardware_lock held). Returns
 * the stop's status; stop_reason gets its reason. */
static int stop_and_drain(pc_engine *engine, char *stop_reason, size_t stop_reason_size)
{
    int status = engine->ops->stop(engine->hardware, stop_reason, stop_reason_size);
    if (status != FLARE_OK)
        core_log(CORE_LOG_WARNING, "%s: stop failed: %s", engine->ops->name, stop_reason);
    int batch = 0;
    while (batch < DISARM_BATCHES_MAX && drain_batch(engine) > 0)
        batch++;
    if (batch == DISARM_BATCHES_MAX)
        core_log(CORE_LOG_WARNING,
                 "%s: the hardware still had samples after %d reads at window close; the "
                 "next start counts them as lost",
                 engine->ops->name, DISARM_BATCHES_MAX);
    atomic_store(&engine->sampling, 0);
    return status;
}

/* Closes the open window in the table (its entries become takeable) and
 * records its share of the counters; stats gets a copy of them all and
 * capacity the table's size. */
static void close_window(pc_engine *engine, pc_engine_stats *stats, size_t *capacity)
{
    pthread_mutex_lock(&engine->table_lock);
    /* A drain round that read between the close's now_ns and the disarm
     * taking hardware_lock stamped its samples after the close, unclamped
     * (close_ns was 0 then; a last_ns past closed_ns failed test_pc_session
     * once in CI): the window's entries end at its close. */
    for (uint32_t i = engine->table.order_head; i != NIL; i = engine->table.entries[i].order_next) {
        pc_aggregate *entry = &engine->table.entries[i];
        if (entry->epoch != engine->open_epoch)
            continue;
        if (entry->last_ns > engine->close_ns)
            entry->last_ns = engine->close_ns;
        if (entry->first_ns > engine->close_ns)
            entry->first_ns = engine->close_ns;
    }
    engine->open_epoch = 0;
    engine->stats.disarms++;
    engine->stats.window_samples = engine->stats.samples - engine->window_base.samples;
    engine->stats.window_lost = engine->stats.samples_lost - engine->window_base.samples_lost;
    engine->stats.window_drops =
        engine->stats.aggregate_drops - engine->window_base.aggregate_drops;
    engine->stats.window_entries = engine->stats.entries_made - engine->window_base.entries_made;
    *stats = engine->stats;
    *capacity = engine->table.capacity;
    pthread_mutex_unlock(&engine->table_lock);
}

int pc_engine_disarm(pc_engine *engine, int device, uint64_t now_ns, backend_engine_result *result)
{
    pthread_mutex_lock(&engine->lock);
    if (!atomic_load(&engine->armed) || device != engine->device) {
        pthread_mutex_unlock(&engine->lock);
        return FLARE_ERR_STATE;
    }
    atomic_store(&engine->armed, 0);
    pthread_mutex_unlock(&engine->lock);

    atomic_store(&engine->disarm_waiting, 1);
    pthread_mutex_lock(&engine->hardware_lock);
    atomic_store(&engine->disarm_waiting, 0);
    engine->close_ns = now_ns > engine->armed_ns ? now_ns : engine->armed_ns;
    char stop_reason[192] = "";
    int status = stop_and_drain(engine, stop_reason, sizeof(stop_reason));
    pc_engine_stats stats;
    size_t capacity = 0;
    close_window(engine, &stats, &capacity);
    uint64_t armed_ns = engine->armed_ns;
    uint64_t window_id = engine->window_id;
    pthread_mutex_unlock(&engine->hardware_lock);

    tracebuf_lease_release(device, engine->context_id);
    core_log(CORE_LOG_INFO,
             "%s: window %llu closed on device %d: %llu samples in %.3f s, %llu lost by the "
             "hardware, %llu dropped by a full table (of %zu keys)",
             engine->ops->name, (unsigned long long)window_id, device,
             (unsigned long long)stats.window_samples,
             now_ns > armed_ns ? (double)(now_ns - armed_ns) / 1e9 : 0.0,
             (unsigned long long)stats.window_lost, (unsigned long long)stats.window_drops,
             capacity);
    if (result != NULL) {
        result->armed_ns = armed_ns;
        result->disarmed_ns = now_ns;
        result->samples =
            engine->ops->kind == PC_ENGINE_SASS ? stats.window_entries : stats.window_samples;
        snprintf(result->reason, sizeof(result->reason), "%s",
                 status == FLARE_OK ? "" : stop_reason);
    }
    return status == FLARE_OK ? FLARE_OK : FLARE_ERR_BACKEND;
}

/* ---- the collector's side ---- */

size_t pc_engine_take(pc_engine *engine, pc_entry *out, size_t max)
{
    size_t count = 0;
    pthread_mutex_lock(&engine->table_lock);
    pc_table *table = &engine->table;
    while (count < max && table->order_head != NIL) {
        const pc_aggregate *entry = &table->entries[table->order_head];
        if (entry->epoch == engine->open_epoch)
            break; /* the armed window's: it and all after it stay */
        pc_entry *taken = &out[count++];
        taken->window_id = entry->window_id;
        taken->device = entry->device;
        taken->function = entry->function;
        taken->pc_offset = entry->pc_offset;
        taken->file = entry->file;
        taken->line = entry->line;
        taken->code = entry->file == NULL ? entry->code : NULL;
        const char *name = engine->ops->stall_reason_name(engine->hardware, entry->stall_reason);
        snprintf(taken->stall_reason, sizeof(taken->stall_reason), "%s",
                 name != NULL ? name : "unknown");
        taken->samples = entry->samples;
        taken->first_ns = entry->first_ns;
        taken->last_ns = entry->last_ns;
        table_remove_oldest(table);
    }
    pthread_mutex_unlock(&engine->table_lock);
    return count;
}

void pc_engine_stats_get(pc_engine *engine, pc_engine_stats *stats)
{
    pthread_mutex_lock(&engine->table_lock);
    *stats = engine->stats;
    stats->entries_held = engine->table.used;
    pthread_mutex_unlock(&engine->table_lock);
}

const char *pc_engine_name(pc_engine *engine)
{
    return engine->ops->name;
}

pc_engine_kind pc_engine_kind_of(pc_engine *engine)
{
    return engine->ops->kind;
}

int pc_engine_set_aggregate_capacity(pc_engine *engine, size_t capacity)
{
    if (capacity == 0 || capacity > AGGREGATE_CAPACITY_LIMIT)
        return FLARE_ERR_INVALID_ARGUMENT;
    pc_table fresh;
    if (table_init(&fresh, capacity) != FLARE_OK)
        return FLARE_ERR_NO_MEMORY;
    int status = FLARE_ERR_STATE;
    pthread_mutex_lock(&engine->lock);
    pthread_mutex_lock(&engine->table_lock);
    if (!atomic_load(&engine->armed) && engine->table.used == 0) {
        pc_table old = engine->table;
        engine->table = fresh;
        fresh = old;
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&engine->table_lock);
    pthread_mutex_unlock(&engine->lock);
    table_free(&fresh); /* the old table, or the new one refused */
    return status;
}

void pc_engine_pause_drain(pc_engine *engine, int paused)
{
    atomic_store(&engine->paused, paused);
    pthread_mutex_lock(&engine->lock);
    pthread_cond_broadcast(&engine->wake);
    pthread_mutex_unlock(&engine->lock);
}
