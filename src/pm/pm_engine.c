/*
 * pm_engine.c: the hardware-independent PM sampling engine (pm_engine.h):
 * the lease, the decode thread and its loop, overflow flags, clock
 * conversion and the queue to the collector (presets and settings are
 * pm_presets.c).
 *
 * Locks: `lock` guards the state and the window fields and is never held
 * across a hardware call; `hardware_lock` serialises every hardware call
 * (start, stop, a whole decode round) so the decode thread and disarm never
 * touch the hardware at once; `stats_lock` guards the counters. Order:
 * hardware_lock before stats_lock; `lock` is never taken inside the others.
 * The queue is single-producer (whoever holds hardware_lock), single-consumer
 * (the collector), lock-free.
 */
#include "pm/pm_engine.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "tracebuf/lease.h"

/* ---- the engine ---- */

/* Samples a batch reads (pm_hardware_ops.read_batch): 2,048 hold a third
 * of a 68 ms pass at 10 us; the buffer is 180 KiB. */
#define PM_RAW_BATCH 2048u

struct pm_engine {
    const pm_hardware_ops *ops;
    void *hardware;
    uint64_t context_id;

    pthread_mutex_t lock; /* state, window fields, decode thread control */
    pthread_cond_t wake;
    _Atomic int state;
    int device;
    const pm_preset *preset;
    uint64_t interval_ns;
    pm_resolved_metrics metrics;
    char failure[256];
    int thread_started;
    int thread_exit;
    pthread_t thread;

    pthread_mutex_t hardware_lock;
    _Atomic int sampling; /* started and not yet stopped */
    _Atomic int paused;
    _Atomic int read_all_at_disarm; /* range replay: a pass's samples are all read at its stop */
    /* The image holds the last pass's samples: the stop of a read-all
     * pass leaves its reset (60-80 ms for range replay's 217 MB image on
     * the H200) to the next arm, out of this span (a later span that
     * re-arms a kept engine pays it). hardware_lock. */
    int image_dirty;
    pm_raw_sample *raw;         /* PM_RAW_BATCH, where the hardware reads in batches */
    uint32_t image_samples;     /* per decode; 0: PM_IMAGE_SAMPLES_DEFAULT */
    _Atomic int disarm_waiting; /* disarm wants hardware_lock: the decode thread yields */
    /* The current window; written by arm before sampling starts, read by
     * whoever holds hardware_lock. */
    uint64_t window_id;
    uint64_t armed_ns;
    uint64_t window_samples;
    uint64_t previous_end_ns;
    int gap_suspected; /* an overflow happened: the next sample may follow a gap */
    int clock_method;
    int64_t clock_offset_ns;
    int first_sample_seen;

    pthread_mutex_t stats_lock;
    pm_engine_stats stats;

    pm_queue_entry *queue;
    _Atomic uint64_t queue_head; /* next to take (consumer) */
    _Atomic uint64_t queue_tail; /* next to fill (producer) */
};

static void *decode_main(void *argument);

int pm_engine_create(const pm_hardware_ops *ops, void *hardware, uint64_t context_id,
                     pm_engine **out)
{
    if (ops == NULL || out == NULL || context_id == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    pm_engine *engine = calloc(1, sizeof(*engine));
    if (engine == NULL)
        return FLARE_ERR_NO_MEMORY;
    engine->queue = calloc(PM_QUEUE_CAPACITY, sizeof(*engine->queue));
    if (ops->read_batch != NULL)
        engine->raw = calloc(PM_RAW_BATCH, sizeof(*engine->raw));
    if (engine->queue == NULL || (ops->read_batch != NULL && engine->raw == NULL)) {
        free(engine->queue);
        free(engine->raw);
        free(engine);
        return FLARE_ERR_NO_MEMORY;
    }
    engine->ops = ops;
    engine->hardware = hardware;
    engine->context_id = context_id;
    engine->device = -1;
    pthread_mutex_init(&engine->lock, NULL);
    pthread_mutex_init(&engine->hardware_lock, NULL);
    pthread_mutex_init(&engine->stats_lock, NULL);
    core_cond_init_monotonic(&engine->wake);
    *out = engine;
    return FLARE_OK;
}

void pm_engine_destroy(pm_engine *engine)
{
    if (engine == NULL)
        return;
    if (atomic_load(&engine->state) == PM_ENGINE_ARMED)
        pm_engine_disarm(engine, engine->device, core_now_ns(), NULL);
    pthread_mutex_lock(&engine->lock);
    engine->thread_exit = 1;
    pthread_cond_broadcast(&engine->wake);
    int joined = engine->thread_started;
    pthread_mutex_unlock(&engine->lock);
    if (joined)
        pthread_join(engine->thread, NULL);
    if (atomic_load(&engine->state) == PM_ENGINE_PREPARED) {
        engine->ops->release(engine->hardware);
        tracebuf_lease_release(engine->device, engine->context_id);
    }
    pthread_cond_destroy(&engine->wake);
    pthread_mutex_destroy(&engine->lock);
    pthread_mutex_destroy(&engine->hardware_lock);
    pthread_mutex_destroy(&engine->stats_lock);
    free(engine->queue);
    free(engine->raw);
    free(engine);
}

void pm_engine_shutdown(pm_engine *engine, const char *reason)
{
    if (atomic_load(&engine->state) == PM_ENGINE_ARMED)
        pm_engine_disarm(engine, engine->device, core_now_ns(), NULL);
    int prepared = atomic_load(&engine->state) == PM_ENGINE_PREPARED;
    pm_engine_mark_failed(engine, reason);
    pthread_mutex_lock(&engine->hardware_lock);
    if (prepared) {
        engine->ops->release(engine->hardware);
        tracebuf_lease_release(engine->device, engine->context_id);
    }
    pthread_mutex_unlock(&engine->hardware_lock);
}

void pm_engine_mark_preparing(pm_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
    if (atomic_load(&engine->state) == PM_ENGINE_UNPREPARED)
        atomic_store(&engine->state, PM_ENGINE_PREPARING);
    pthread_mutex_unlock(&engine->lock);
}

void pm_engine_mark_failed(pm_engine *engine, const char *reason)
{
    pthread_mutex_lock(&engine->lock);
    snprintf(engine->failure, sizeof(engine->failure), "%s", reason);
    atomic_store(&engine->state, PM_ENGINE_FAILED);
    pthread_mutex_unlock(&engine->lock);
}

int pm_engine_prepare(pm_engine *engine, int device, const pm_preset *preset, uint64_t interval_ns,
                      char *reason, size_t reason_size)
{
    char message[256] = "";
    uint64_t began = core_now_ns();
    char holder[TRACEBUF_HOLDER_MAX] = "";
    /* A prepared engine holds the device (the hardware is enabled for it),
     * so the lease is claimed for as long as it stays prepared. */
    int status = tracebuf_lease_acquire(device, engine->context_id, holder);
    if (status != FLARE_OK) {
        tracebuf_lease_busy_reason(device, holder, message, sizeof(message));
    } else {
        pm_resolved_metrics resolved = {0};
        status = engine->ops->prepare(engine->hardware, device, preset, interval_ns,
                                      engine->image_samples != 0 ? engine->image_samples
                                                                 : PM_IMAGE_SAMPLES_DEFAULT,
                                      &resolved, message, sizeof(message));
        if (status == FLARE_OK) {
            pthread_mutex_lock(&engine->lock);
            engine->device = device;
            engine->preset = preset;
            engine->interval_ns = interval_ns;
            engine->metrics = resolved;
            pthread_mutex_unlock(&engine->lock);
        } else {
            tracebuf_lease_release(device, engine->context_id);
            if (message[0] == '\0')
                snprintf(message, sizeof(message), "%s: prepare failed: %s", engine->ops->name,
                         flare_strerror(status));
        }
    }
    pthread_mutex_lock(&engine->stats_lock);
    engine->stats.prepare_ns = core_now_ns() - began;
    pthread_mutex_unlock(&engine->stats_lock);
    if (status != FLARE_OK) {
        pm_engine_mark_failed(engine, message);
        if (reason != NULL && reason_size > 0)
            snprintf(reason, reason_size, "%s", message);
        return status;
    }
    pthread_mutex_lock(&engine->lock);
    atomic_store(&engine->state, PM_ENGINE_PREPARED);
    if (!engine->thread_started) {
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &previous);
        engine->thread_started = pthread_create(&engine->thread, NULL, decode_main, engine) == 0;
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
    }
    int started = engine->thread_started;
    pthread_mutex_unlock(&engine->lock);
    if (!started) {
        /* Disarm decodes what is left, so samples still arrive, only late. */
        core_log(CORE_LOG_WARNING, "%s: no decode thread; samples are decoded at window close",
                 engine->ops->name);
    }
    return FLARE_OK;
}

static void state_reason(pm_engine *engine, int state, char *reason, size_t reason_size)
{
    if (reason == NULL || reason_size == 0)
        return;
    switch (state) {
    case PM_ENGINE_UNPREPARED:
        snprintf(reason, reason_size,
                 "%s: not prepared yet (set-up starts after the program's first context, or "
                 "at the first window when no rule or schedule asks earlier)",
                 engine->ops->name);
        break;
    case PM_ENGINE_PREPARING:
        snprintf(reason, reason_size,
                 "%s: still preparing (config image and enable take about 0.8 s after the first "
                 "context)",
                 engine->ops->name);
        break;
    case PM_ENGINE_FAILED:
        pthread_mutex_lock(&engine->lock);
        snprintf(reason, reason_size, "%s", engine->failure);
        pthread_mutex_unlock(&engine->lock);
        break;
    case PM_ENGINE_ARMED:
        snprintf(reason, reason_size, "%s: already sampling", engine->ops->name);
        break;
    default:
        reason[0] = '\0';
    }
}

static int check_device(pm_engine *engine, int device, char *reason, size_t reason_size)
{
    if (device == -1 || device == engine->device || engine->device < 0)
        return FLARE_OK;
    snprintf(reason, reason_size, "%s samples device %d only, not device %d", engine->ops->name,
             engine->device, device);
    return FLARE_ERR_UNSUPPORTED;
}

int pm_engine_probe(pm_engine *engine, int device, char *reason, size_t reason_size)
{
    int state = atomic_load(&engine->state);
    if (state == PM_ENGINE_FAILED) {
        state_reason(engine, state, reason, reason_size);
        return FLARE_ERR_UNSUPPORTED;
    }
    /* Unprepared or preparing: it will be able to arm soon; a rule is not
     * refused for that. */
    return check_device(engine, device, reason, reason_size);
}

int pm_engine_arm(pm_engine *engine, int device, const backend_engine_config *config,
                  uint64_t now_ns, char *reason, size_t reason_size)
{
    int status = check_device(engine, device, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    int state = atomic_load(&engine->state);
    if (state != PM_ENGINE_PREPARED) {
        state_reason(engine, state, reason, reason_size);
        if (state == PM_ENGINE_FAILED)
            return FLARE_ERR_UNSUPPORTED;
        /* Not set up yet: the window still opens, without samples. */
        return state == PM_ENGINE_UNPREPARED || state == PM_ENGINE_PREPARING
                   ? BACKEND_ENGINE_NOT_READY
                   : FLARE_ERR_STATE;
    }
    int sampled_device = engine->device;
    char holder[TRACEBUF_HOLDER_MAX] = "";
    if (tracebuf_lease_acquire(sampled_device, engine->context_id, holder) != FLARE_OK) {
        tracebuf_lease_busy_reason(sampled_device, holder, reason, reason_size);
        tracebuf_lease_note_busy(sampled_device, holder);
        return BACKEND_ENGINE_BUSY;
    }
    tracebuf_lease_use_begin(sampled_device, engine->context_id);

    pthread_mutex_lock(&engine->hardware_lock);
    engine->window_id = config != NULL ? config->window_id : 0;
    engine->armed_ns = now_ns;
    engine->window_samples = 0;
    engine->previous_end_ns = 0;
    engine->gap_suspected = 0;
    engine->clock_method = PM_CLOCK_UNKNOWN;
    engine->first_sample_seen = 0;
    if (engine->image_dirty) {
        engine->ops->image_reset(engine->hardware);
        engine->image_dirty = 0;
    }
    uint64_t start_began = core_now_ns();
    status = engine->ops->start(engine->hardware, reason, reason_size);
    uint64_t start_cost = core_now_ns() - start_began;
    if (status == FLARE_OK)
        atomic_store(&engine->sampling, 1);
    pthread_mutex_unlock(&engine->hardware_lock);
    if (status != FLARE_OK) {
        tracebuf_lease_use_end(sampled_device, engine->context_id);
        tracebuf_lease_release(sampled_device, engine->context_id);
        return status;
    }
    pthread_mutex_lock(&engine->stats_lock);
    engine->stats.arms++;
    engine->stats.start_ns_cost = start_cost;
    engine->stats.first_sample_latency_ns = 0;
    pthread_mutex_unlock(&engine->stats_lock);
    pthread_mutex_lock(&engine->lock);
    atomic_store(&engine->state, PM_ENGINE_ARMED);
    pthread_cond_broadcast(&engine->wake);
    pthread_mutex_unlock(&engine->lock);
    return FLARE_OK;
}

/* ---- decoding (hardware_lock held) ---- */

static int queue_push(pm_engine *engine, const pm_queue_entry *entry)
{
    uint64_t tail = atomic_load_explicit(&engine->queue_tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&engine->queue_head, memory_order_acquire);
    if (tail - head >= PM_QUEUE_CAPACITY)
        return -1;
    engine->queue[tail % PM_QUEUE_CAPACITY] = *entry;
    atomic_store_explicit(&engine->queue_tail, tail + 1, memory_order_release);
    return 0;
}

size_t pm_engine_take(pm_engine *engine, pm_queue_entry *out, size_t max)
{
    uint64_t head = atomic_load_explicit(&engine->queue_head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&engine->queue_tail, memory_order_acquire);
    size_t count = 0;
    while (head != tail && count < max) {
        out[count++] = engine->queue[head % PM_QUEUE_CAPACITY];
        head++;
    }
    atomic_store_explicit(&engine->queue_head, head, memory_order_release);
    return count;
}

static uint64_t realtime_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* A converted sample end is plausible when it lies between the window's
 * open (less a slack for the beat) and the decode that found it. */
#define CLOCK_SLACK_NS 200000000ll

static int plausible(int64_t end_ns, uint64_t armed_ns, uint64_t decoded_ns)
{
    return end_ns >= (int64_t)armed_ns - CLOCK_SLACK_NS &&
           end_ns <= (int64_t)decoded_ns + CLOCK_SLACK_NS;
}

/* Picks how this window's hardware times map to flare's clock, from the
 * first sample seen: the first candidate that puts it where it must be. */
static void choose_clock(pm_engine *engine, uint64_t raw_end, uint64_t decoded_ns)
{
    int64_t offset = 0;
    if (plausible((int64_t)raw_end, engine->armed_ns, decoded_ns)) {
        engine->clock_method = PM_CLOCK_IDENTITY;
        engine->clock_offset_ns = 0;
        return;
    }
    if (engine->ops->clock_offset != NULL &&
        engine->ops->clock_offset(engine->hardware, &offset) == FLARE_OK &&
        plausible((int64_t)raw_end + offset, engine->armed_ns, decoded_ns)) {
        engine->clock_method = PM_CLOCK_HARDWARE;
        engine->clock_offset_ns = offset;
        return;
    }
    /* The smallest gap of a few paired reads is the best estimate. */
    int64_t best = 0;
    uint64_t best_span = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t before = core_now_ns();
        uint64_t real = realtime_now_ns();
        uint64_t after = core_now_ns();
        if (after - before < best_span) {
            best_span = after - before;
            best = (int64_t)(before + (after - before) / 2) - (int64_t)real;
        }
    }
    if (plausible((int64_t)raw_end + best, engine->armed_ns, decoded_ns)) {
        engine->clock_method = PM_CLOCK_REALTIME;
        engine->clock_offset_ns = best;
        return;
    }
    engine->clock_method = PM_CLOCK_ALIGNED;
    engine->clock_offset_ns = (int64_t)decoded_ns - (int64_t)raw_end;
    CORE_LOG_ONCE("pm.clock_aligned", CORE_LOG_WARNING,
                  "%s: sample times fit no known clock; aligned to the decode and flagged",
                  engine->ops->name);
}

static uint64_t convert(pm_engine *engine, uint64_t raw)
{
    int64_t value = (int64_t)raw + engine->clock_offset_ns;
    return value > 0 ? (uint64_t)value : 0;
}

#define DECODE_ROUNDS_MAX 64
/* Image fills disarm reads at most (about 0.16 s each with six metrics on
 * the H200); what remains after is decoded without being read, so a stop
 * never holds the collector for seconds nor leaves stale records behind,
 * and is counted as discarded. */
#define DISARM_READ_ROUNDS 4
#define DISARM_ROUNDS_MAX  65536

/* What one decode round counted, over all its reads. */
typedef struct decode_tally {
    uint64_t newest;
    uint64_t delivered;
    uint64_t dropped;
    uint64_t lost;
    uint64_t missing;
    uint64_t first_latency;
} decode_tally;

/* Stamps and flags a sample read from the decoded image (its values in
 * entry, its times raw in the hardware's clock) and queues it for the
 * collector; tally takes its counts. */
static void stamp_sample(pm_engine *engine, pm_queue_entry *entry, uint64_t raw_start,
                         uint64_t raw_end, int overflow, uint64_t decoded_ns, decode_tally *tally)
{
    pm_sample *sample = &entry->sample;
    if (engine->clock_method == PM_CLOCK_UNKNOWN)
        choose_clock(engine, raw_end, decoded_ns);
    sample->start_ns = convert(engine, raw_start);
    sample->end_ns = convert(engine, raw_end);
    if (engine->window_samples == 0 && sample->start_ns < engine->armed_ns) {
        sample->start_ns = engine->armed_ns < sample->end_ns ? engine->armed_ns : sample->end_ns;
        sample->flags |= PM_SAMPLE_START_CLAMPED;
    }
    sample->window_id = engine->window_id;
    sample->sample_index = engine->window_samples++;
    sample->device = engine->device;
    if (engine->clock_method == PM_CLOCK_ALIGNED)
        sample->flags |= PM_SAMPLE_CLOCK_GUESS;
    if (overflow)
        sample->flags |= PM_SAMPLE_OVERFLOW;
    if (engine->previous_end_ns != 0) {
        /* Lost samples leave a hole before the next one: estimate their
         * number from its width. After an overflow they are overflow
         * losses; a hole without one (seen on GH100 at a 10 us interval)
         * is counted as missing. */
        uint64_t gap = sample->start_ns > engine->previous_end_ns
                           ? sample->start_ns - engine->previous_end_ns
                           : 0;
        if (gap * 2 > engine->interval_ns * 3) {
            sample->flags |= PM_SAMPLE_AFTER_GAP;
            if (engine->gap_suspected)
                tally->lost += gap / engine->interval_ns;
            else
                tally->missing += gap / engine->interval_ns;
        }
        engine->gap_suspected = 0;
    }
    engine->previous_end_ns = sample->end_ns;
    if (sample->end_ns > tally->newest)
        tally->newest = sample->end_ns;
    if (!engine->first_sample_seen) {
        engine->first_sample_seen = 1;
        tally->first_latency =
            sample->end_ns > engine->armed_ns ? sample->end_ns - engine->armed_ns : 1;
        sample->open_to_sample_ns = tally->first_latency;
        sample->open_to_delivery_ns =
            decoded_ns > engine->armed_ns ? decoded_ns - engine->armed_ns : 1;
    }
    if (queue_push(engine, entry) == 0)
        tally->delivered++;
    else
        tally->dropped++;
}

/* Reads, stamps and queues samples [0, count) of the decoded image: in
 * batches where the hardware reads them so (raw), else one at a time. */
static void read_samples(pm_engine *engine, size_t count, int overflow, uint64_t decoded_ns,
                         decode_tally *tally)
{
    for (size_t first = 0; first < count;) {
        size_t batch = 1;
        if (engine->ops->read_batch != NULL && engine->raw != NULL) {
            batch = count - first < PM_RAW_BATCH ? count - first : PM_RAW_BATCH;
            engine->ops->read_batch(engine->hardware, first, batch, engine->raw);
        }
        for (size_t index = 0; index < batch; index++) {
            pm_queue_entry entry = {0};
            uint64_t raw_start = 0, raw_end = 0;
            if (engine->raw != NULL && engine->ops->read_batch != NULL) {
                const pm_raw_sample *raw = &engine->raw[index];
                if (!raw->ok)
                    continue;
                raw_start = raw->start;
                raw_end = raw->end;
                memcpy(entry.sample.values, raw->values, sizeof entry.sample.values);
            } else if (engine->ops->sample_read(engine->hardware, first + index, &raw_start,
                                                &raw_end, entry.sample.values) != FLARE_OK) {
                continue;
            }
            stamp_sample(engine, &entry, raw_start, raw_end, overflow, decoded_ns, tally);
        }
        first += batch;
    }
}

/* One decode round: decode, read every completed sample, reset the image;
 * on COUNTER_DATA_FULL decode again. Ends with a watermark offer. With
 * defer_reset the last reset is left to the next arm (image_dirty). */
static void decode_round(pm_engine *engine, int read_rounds, int defer_reset)
{
    uint64_t round_began = core_now_ns();
    int overflow = 0, failed = 0, exhausted = 0, truncated = 1;
    uint64_t fulls = 0, overflows = 0, failures = 0, decodes = 0, discarded = 0;
    uint64_t decode_call_ns = 0, read_ns = 0;
    decode_tally tally = {0};
    char failure_reason[160] = "";
    /* A close goes on until the hardware is empty (unread decodes are
     * cheap); the decode thread stops after DECODE_ROUNDS_MAX. */
    int rounds_max = read_rounds < DECODE_ROUNDS_MAX ? DISARM_ROUNDS_MAX : DECODE_ROUNDS_MAX;
    for (int round = 0; round < rounds_max; round++) {
        pm_hardware_decode result = {0};
        uint64_t decoding_ns = core_now_ns();
        engine->ops->decode(engine->hardware, &result);
        uint64_t decoded_ns = core_now_ns();
        decode_call_ns += decoded_ns - decoding_ns;
        decodes++;
        if (result.failed) {
            failed = 1;
            failures++;
            snprintf(failure_reason, sizeof(failure_reason), "%s", result.reason);
        }
        if (result.overflow) {
            overflow = 1;
            overflows++;
        }
        size_t count = engine->ops->sample_count(engine->hardware);
        if (round >= read_rounds) {
            discarded += count;
            count = 0;
        }
        read_samples(engine, count, result.overflow, decoded_ns, &tally);
        read_ns += core_now_ns() - decoded_ns;
        bool again = result.counter_data_full && !result.failed;
        if (again || !defer_reset)
            engine->ops->image_reset(engine->hardware);
        else
            engine->image_dirty = 1;
        if (result.overflow)
            engine->gap_suspected = 1;
        if (again) {
            fulls++;
            if (read_rounds == DECODE_ROUNDS_MAX && atomic_load(&engine->disarm_waiting))
                break; /* disarm takes over (truncated: no watermark) */
            continue;  /* the image was full: more records wait; decode again */
        }
        exhausted = result.end_of_records;
        truncated = 0;
        break;
    }
    pm_queue_entry end = {.is_decode_end = 1,
                          .exhausted = exhausted,
                          .overflow = overflow || tally.dropped > 0,
                          .failed = failed,
                          .truncated = truncated,
                          .newest_sample_ns = tally.newest};
    /* A lost offer only keeps the watermark where it is: safe. */
    (void)queue_push(engine, &end);
    if (failed)
        CORE_LOG_ONCE("pm.decode_failed", CORE_LOG_WARNING, "%s: decode failed: %s",
                      engine->ops->name, failure_reason);
    pthread_mutex_lock(&engine->stats_lock);
    engine->stats.samples += tally.delivered;
    engine->stats.queue_drops += tally.dropped;
    engine->stats.samples_lost += tally.lost;
    engine->stats.samples_discarded += discarded;
    engine->stats.samples_missing += tally.missing;
    engine->stats.overflows += overflows;
    engine->stats.counter_data_full += fulls;
    engine->stats.decode_failures += failures;
    engine->stats.decodes += decodes;
    engine->stats.decode_ns += core_now_ns() - round_began;
    engine->stats.decode_call_ns += decode_call_ns;
    engine->stats.read_ns += read_ns;
    engine->stats.clock_method = engine->clock_method;
    if (tally.first_latency != 0)
        engine->stats.first_sample_latency_ns = tally.first_latency;
    pthread_mutex_unlock(&engine->stats_lock);
}

static void *decode_main(void *argument)
{
    /* Named for top -H and ps, and the H200 soak check's CPU times. */
    pthread_setname_np(pthread_self(), "flare-pm-decode");
    pm_engine *engine = argument;
    pthread_mutex_lock(&engine->lock);
    while (!engine->thread_exit) {
        int armed = atomic_load(&engine->state) == PM_ENGINE_ARMED;
        int fast = 0;
        if (armed && !atomic_load(&engine->paused)) {
            pthread_mutex_unlock(&engine->lock);
            pthread_mutex_lock(&engine->hardware_lock);
            /* Disarm may have stopped and drained since the state was read. */
            if (atomic_load(&engine->sampling))
                decode_round(engine, DECODE_ROUNDS_MAX, 0);
            fast = !engine->first_sample_seen;
            pthread_mutex_unlock(&engine->hardware_lock);
            pthread_mutex_lock(&engine->lock);
        }
        /* Until a window's first sample, poll every millisecond so its
         * latency is measured, not hidden by the decode period. */
        uint64_t wait_ns = armed ? (fast ? 1000000ull : PM_DECODE_PERIOD_NS) : 1000000000ull;
        struct timespec deadline = core_deadline_after_ns(wait_ns);
        pthread_cond_timedwait(&engine->wake, &engine->lock, &deadline);
    }
    pthread_mutex_unlock(&engine->lock);
    return NULL;
}

int pm_engine_disarm(pm_engine *engine, int device, uint64_t now_ns, backend_engine_result *result)
{
    (void)device;
    pthread_mutex_lock(&engine->lock);
    if (atomic_load(&engine->state) != PM_ENGINE_ARMED) {
        pthread_mutex_unlock(&engine->lock);
        return FLARE_ERR_STATE;
    }
    atomic_store(&engine->state, PM_ENGINE_PREPARED);
    pthread_mutex_unlock(&engine->lock);

    atomic_store(&engine->disarm_waiting, 1);
    pthread_mutex_lock(&engine->hardware_lock);
    atomic_store(&engine->disarm_waiting, 0);
    char reason[160] = "";
    int status = engine->ops->stop(engine->hardware, reason, sizeof(reason));
    if (status != FLARE_OK) {
        core_log(CORE_LOG_WARNING, "%s: stop failed: %s", engine->ops->name, reason);
        pthread_mutex_lock(&engine->stats_lock);
        engine->stats.stop_failures++;
        pthread_mutex_unlock(&engine->stats_lock);
    }
    /* Whatever the hardware still holds belongs to this window: decode it
     * now, so the window's count is complete when it closes. */
    int read_all = atomic_load(&engine->read_all_at_disarm);
    decode_round(engine, read_all ? DECODE_ROUNDS_MAX : DISARM_READ_ROUNDS, read_all);
    atomic_store(&engine->sampling, 0);
    uint64_t samples = engine->window_samples;
    uint64_t armed_ns = engine->armed_ns;
    uint64_t tail_lost = 0;
    if (engine->gap_suspected && engine->previous_end_ns != 0 &&
        now_ns > engine->previous_end_ns + engine->interval_ns) {
        /* An overflow with no sample after it: the hole runs to the stop. */
        tail_lost = (now_ns - engine->previous_end_ns) / engine->interval_ns;
        engine->gap_suspected = 0;
    }
    pthread_mutex_unlock(&engine->hardware_lock);
    pthread_mutex_lock(&engine->stats_lock);
    engine->stats.samples_lost += tail_lost;
    pm_engine_stats stats = engine->stats;
    pthread_mutex_unlock(&engine->stats_lock);
    core_log(CORE_LOG_INFO,
             "%s: window %llu closed: %llu samples in %.3f s; so far %llu decodes (%llu stopped "
             "by a full image), %.1f ms decoding, %llu overflows, %llu samples lost (estimated), "
             "%llu dropped by the queue",
             engine->ops->name, (unsigned long long)engine->window_id, (unsigned long long)samples,
             now_ns > armed_ns ? (now_ns - armed_ns) / 1e9 : 0.0, (unsigned long long)stats.decodes,
             (unsigned long long)stats.counter_data_full, stats.decode_ns / 1e6,
             (unsigned long long)stats.overflows, (unsigned long long)stats.samples_lost,
             (unsigned long long)stats.queue_drops);
    tracebuf_lease_use_end(engine->device, engine->context_id);
    tracebuf_lease_release(engine->device, engine->context_id);
    if (result != NULL) {
        result->armed_ns = armed_ns;
        result->disarmed_ns = now_ns;
        result->samples = samples;
    }
    return status == FLARE_OK ? FLARE_OK : FLARE_ERR_BACKEND;
}

void pm_engine_stats_get(pm_engine *engine, pm_engine_stats *stats)
{
    pthread_mutex_lock(&engine->stats_lock);
    *stats = engine->stats;
    pthread_mutex_unlock(&engine->stats_lock);
}

pm_engine_state pm_engine_state_get(pm_engine *engine)
{
    return (pm_engine_state)atomic_load(&engine->state);
}

const pm_resolved_metrics *pm_engine_metrics(pm_engine *engine)
{
    return &engine->metrics;
}

int pm_engine_device(pm_engine *engine)
{
    return engine->device;
}

const char *pm_engine_name(pm_engine *engine)
{
    return engine->ops->name;
}

void pm_engine_set_image_samples(pm_engine *engine, uint32_t samples)
{
    engine->image_samples = samples;
}

void pm_engine_read_all_at_disarm(pm_engine *engine, int all)
{
    atomic_store(&engine->read_all_at_disarm, all);
}

void pm_engine_pause_decode(pm_engine *engine, int paused)
{
    atomic_store(&engine->paused, paused);
    pthread_mutex_lock(&engine->lock);
    pthread_cond_broadcast(&engine->wake);
    pthread_mutex_unlock(&engine->lock);
}
