/*
 * pm_session.c: samples from the engines' queues to pm_samples, attributed
 * (pm_session.h). Collector thread only, except registration and the stats
 * copy, which take registry_lock.
 *
 * A round: at one beat, take a drain of queue entries and snapshot the open
 * scopes; at a later beat whose ring drain was complete, resolve the drain
 * against history + snapshot in one sweep (attrib_resolve), write the rows,
 * then offer each decode's watermark (which trims the history). Names: the
 * history keeps none, so a small direct-mapped cache keyed by instance id
 * remembers the names of drained scopes; a sample credited to a scope still
 * open (name unknown) is written without a name, and the name is filled in
 * when that scope's close is drained.
 */
#include "pm/pm_session.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib/history.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/runtime.h"
#include "flare/flare.h"
#include "store/store_pm.h"

#define NAME_CACHE_SLOTS  8192u
#define UNNAMED_MAX       256u
#define ROWS_PER_WRITE    1024u
#define PENDING_BEATS_MAX 20u /* resolve anyway after this many incomplete drains */
#define CLOSING_SPIN_MAX  2000

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pm_engine *engines[PM_SESSION_ENGINES_MAX]; /* guarded by registry_lock */
static pm_open_scope_source open_source;           /* guarded by registry_lock */
static void *open_source_user;
static size_t history_capacity_wanted;
static pm_session_stats shared_stats; /* guarded by registry_lock */

typedef struct name_slot {
    uint64_t instance_id;
    char name[FLARE_NAME_MAX];
} name_slot;

/* Collector-owned state of the session. */
static struct {
    int ready;
    uint32_t generation;
    attrib_history history;
    int feeding;
    attrib_scratch scratch;
    name_slot *names;
    uint64_t unnamed[UNNAMED_MAX];
    size_t unnamed_count;
    uint64_t named_pending[UNNAMED_MAX]; /* drained closes whose samples need their name */
    char named_pending_text[UNNAMED_MAX][FLARE_NAME_MAX];
    size_t named_pending_count;
    /* the pending round */
    pm_queue_entry *entries;
    size_t entry_count;
    pm_engine *entry_engine[PM_SESSION_BATCH_MAX];
    pm_open_scope *open;
    size_t open_count;
    unsigned pending_beats;
    /* resolution scratch */
    attrib_scope *candidates;
    size_t candidate_capacity;
    uint64_t *times;
    int64_t *winners;
    store_pm_row *rows;
    pm_session_stats stats;
    uint64_t capability_samples_written; /* last values put in the matrix */
    uint64_t capability_evictions;
} state;

int pm_session_register_engine(pm_engine *engine)
{
    int status = FLARE_ERR_FULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < PM_SESSION_ENGINES_MAX; i++)
        if (engines[i] == engine)
            status = FLARE_OK;
    for (size_t i = 0; status != FLARE_OK && i < PM_SESSION_ENGINES_MAX; i++)
        if (engines[i] == NULL) {
            engines[i] = engine;
            status = FLARE_OK;
        }
    pthread_mutex_unlock(&registry_lock);
    return status;
}

void pm_session_unregister_engine(pm_engine *engine)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < PM_SESSION_ENGINES_MAX; i++)
        if (engines[i] == engine)
            engines[i] = NULL;
    pthread_mutex_unlock(&registry_lock);
}

void pm_session_set_open_scope_source(pm_open_scope_source source, void *user)
{
    pthread_mutex_lock(&registry_lock);
    open_source = source;
    open_source_user = user;
    pthread_mutex_unlock(&registry_lock);
}

void pm_session_set_history_capacity(size_t capacity)
{
    pthread_mutex_lock(&registry_lock);
    history_capacity_wanted = capacity;
    pthread_mutex_unlock(&registry_lock);
}

void pm_session_stats_get(pm_session_stats *stats)
{
    pthread_mutex_lock(&registry_lock);
    *stats = shared_stats;
    pthread_mutex_unlock(&registry_lock);
}

static void release_state(void)
{
    attrib_history_destroy(&state.history);
    attrib_scratch_release(&state.scratch);
    free(state.names);
    free(state.entries);
    free(state.open);
    free(state.candidates);
    free(state.times);
    free(state.winners);
    free(state.rows);
    memset(&state, 0, sizeof(state));
}

void pm_session_begin(void)
{
    release_state();
    pthread_mutex_lock(&registry_lock);
    size_t capacity =
        history_capacity_wanted != 0 ? history_capacity_wanted : PM_SESSION_HISTORY_DEFAULT;
    shared_stats = (pm_session_stats){0};
    pthread_mutex_unlock(&registry_lock);
    state.candidate_capacity = capacity + PM_SESSION_OPEN_MAX;
    state.names = calloc(NAME_CACHE_SLOTS, sizeof(*state.names));
    state.entries = calloc(PM_SESSION_BATCH_MAX, sizeof(*state.entries));
    state.open = calloc(PM_SESSION_OPEN_MAX, sizeof(*state.open));
    state.candidates = calloc(state.candidate_capacity, sizeof(*state.candidates));
    state.times = calloc(PM_SESSION_BATCH_MAX, sizeof(*state.times));
    state.winners = calloc(PM_SESSION_BATCH_MAX, sizeof(*state.winners));
    state.rows = calloc(ROWS_PER_WRITE, sizeof(*state.rows));
    attrib_scratch_init(&state.scratch);
    if (state.names == NULL || state.entries == NULL || state.open == NULL ||
        state.candidates == NULL || state.times == NULL || state.winners == NULL ||
        state.rows == NULL || attrib_history_init(&state.history, capacity) != FLARE_OK) {
        release_state();
        core_capability_set("pm_attribution", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "out of memory for the scope history (%zu scopes)", capacity);
        return;
    }
    state.ready = 1;
}

/* ---- names ---- */

static name_slot *name_slot_of(uint64_t instance_id)
{
    uint64_t mixed = instance_id * 0x9e3779b97f4a7c15ull;
    return &state.names[(mixed >> 40) % NAME_CACHE_SLOTS];
}

static void name_remember(uint64_t instance_id, const char *name)
{
    name_slot *slot = name_slot_of(instance_id);
    slot->instance_id = instance_id;
    core_copy_name(slot->name, name);
}

static const char *name_lookup(uint64_t instance_id)
{
    name_slot *slot = name_slot_of(instance_id);
    return slot->instance_id == instance_id ? slot->name : NULL;
}

static void unnamed_add(uint64_t instance_id)
{
    for (size_t i = 0; i < state.unnamed_count; i++)
        if (state.unnamed[i] == instance_id)
            return;
    if (state.unnamed_count < UNNAMED_MAX)
        state.unnamed[state.unnamed_count++] = instance_id;
    else
        CORE_LOG_ONCE("pm.unnamed_full", CORE_LOG_INFO,
                      "PM attribution: more than %u open scopes without a name; some samples "
                      "keep scope_name NULL (scope_instance_id still names the scope)",
                      UNNAMED_MAX);
}

void pm_session_scope_closed(uint64_t start_ns, uint64_t end_ns, uint64_t instance_id,
                             uint32_t depth, int64_t thread_id, const char *name)
{
    if (!state.ready)
        return;
    for (size_t i = 0; i < state.unnamed_count; i++) {
        if (state.unnamed[i] != instance_id)
            continue;
        if (state.named_pending_count < UNNAMED_MAX) {
            state.named_pending[state.named_pending_count] = instance_id;
            core_copy_name(state.named_pending_text[state.named_pending_count], name);
            state.named_pending_count++;
        }
        state.unnamed[i] = state.unnamed[--state.unnamed_count];
        break;
    }
    if (!state.feeding)
        return;
    attrib_scope closed = {.start_ns = start_ns,
                           .end_ns = end_ns,
                           .instance_id = instance_id,
                           .thread_id = thread_id,
                           .depth = depth};
    attrib_history_record_close(&state.history, &closed);
    name_remember(instance_id, name);
}

/* ---- the open snapshot ---- */

typedef struct snapshot_context {
    uint32_t generation;
} snapshot_context;

static void open_add(const attrib_scope *scope, const char *name)
{
    if (state.open_count >= PM_SESSION_OPEN_MAX) {
        state.stats.open_snapshot_full++;
        CORE_LOG_ONCE("pm.open_full", CORE_LOG_WARNING,
                      "PM attribution: more than %u scopes open at once; the rest are not "
                      "candidates (their samples may stay unattributed)",
                      PM_SESSION_OPEN_MAX);
        return;
    }
    pm_open_scope *slot = &state.open[state.open_count++];
    slot->scope = *scope;
    if (name != NULL)
        core_copy_name(slot->name, name);
    else
        slot->name[0] = '\0';
}

/* Reads one frame another thread may be rewriting; 0 when consistent. */
static int read_frame(core_scope_frame *frame, attrib_scope *out, uint32_t generation)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        uint64_t id = __atomic_load_n(&frame->instance_id, __ATOMIC_ACQUIRE);
        if (id == 0)
            return -1; /* being pushed right now: it began after this snapshot */
        /* Acquire loads throughout: the id's re-read below cannot move
         * before them (a seqlock's reader side, without a fence, which
         * ThreadSanitizer cannot model). */
        uint64_t start = __atomic_load_n(&frame->start_ns, __ATOMIC_ACQUIRE);
        uint64_t end = __atomic_load_n(&frame->end_ns, __ATOMIC_ACQUIRE);
        uint32_t frame_generation = __atomic_load_n(&frame->generation, __ATOMIC_ACQUIRE);
        for (int spin = 0; end == CORE_SCOPE_CLOSING && spin < CLOSING_SPIN_MAX; spin++) {
            /* A close between its mark and its time: a few instructions,
             * unless its thread was preempted there. */
            if (spin > 16)
                sched_yield();
            end = __atomic_load_n(&frame->end_ns, __ATOMIC_ACQUIRE);
        }
        if (__atomic_load_n(&frame->instance_id, __ATOMIC_ACQUIRE) != id)
            continue;
        if (frame_generation != generation)
            return -1;
        if (end == CORE_SCOPE_CLOSING) {
            /* Its end will be later than this snapshot, so for samples
             * decoded before it the scope is still running. */
            state.stats.close_races++;
            end = 0;
        }
        out->start_ns = start;
        out->end_ns = end == 0 ? ATTRIB_OPEN : end;
        out->instance_id = id;
        return 0;
    }
    return -1;
}

static void snapshot_thread(core_thread *thread, void *user)
{
    snapshot_context *context = user;
    if (atomic_load_explicit(&thread->state, memory_order_acquire) != CORE_THREAD_OWNED)
        return;
    uint32_t depth = atomic_load_explicit(&thread->scope_depth, memory_order_acquire);
    if (depth > FLARE_SCOPE_DEPTH_MAX)
        depth = FLARE_SCOPE_DEPTH_MAX;
    int64_t thread_id = atomic_load_explicit(&thread->thread_id, memory_order_relaxed);
    for (uint32_t level = 0; level < depth; level++) {
        attrib_scope scope = {.thread_id = thread_id, .depth = level};
        if (read_frame(&thread->scopes[level], &scope, context->generation) == 0)
            open_add(&scope, name_lookup(scope.instance_id));
    }
}

static void take_open_snapshot(void)
{
    state.open_count = 0;
    snapshot_context context = {.generation = state.generation};
    core_threads_for_each(snapshot_thread, &context);
    pthread_mutex_lock(&registry_lock);
    pm_open_scope_source source = open_source;
    void *user = open_source_user;
    pthread_mutex_unlock(&registry_lock);
    if (source != NULL) {
        size_t room = PM_SESSION_OPEN_MAX - state.open_count;
        size_t added = source(&state.open[state.open_count], room, user);
        state.open_count += added < room ? added : room;
    }
}

/* ---- a round ---- */

static int take_entries(void)
{
    state.entry_count = 0;
    pthread_mutex_lock(&registry_lock);
    pm_engine *current[PM_SESSION_ENGINES_MAX];
    memcpy(current, engines, sizeof(current));
    pthread_mutex_unlock(&registry_lock);
    for (size_t i = 0; i < PM_SESSION_ENGINES_MAX; i++) {
        if (current[i] == NULL)
            continue;
        size_t room = PM_SESSION_BATCH_MAX - state.entry_count;
        size_t taken = pm_engine_take(current[i], &state.entries[state.entry_count], room);
        for (size_t k = 0; k < taken; k++)
            state.entry_engine[state.entry_count + k] = current[i];
        state.entry_count += taken;
    }
    return state.entry_count > 0;
}

static void flush_rows(store *database, size_t *row_count)
{
    if (*row_count == 0)
        return;
    if (store_put_pm_samples(database, state.rows, *row_count) != FLARE_OK) {
        state.stats.rows_failed += *row_count;
        CORE_LOG_ONCE("pm.store", CORE_LOG_ERROR, "cannot store PM samples: %s",
                      store_last_error(database));
    }
    *row_count = 0;
}

static void store_latency(store *database, int64_t pid, const pm_sample *sample)
{
    store_metric_row row = {.pid = pid,
                            .device = sample->device,
                            .name = "pm_open_to_first_sample_ns",
                            .time_ns = sample->end_ns,
                            .value = (int64_t)sample->open_to_sample_ns};
    store_put_metric(database, &row);
    row.name = "pm_open_to_first_delivery_ns";
    row.value = (int64_t)sample->open_to_delivery_ns;
    store_put_metric(database, &row);
    core_log(CORE_LOG_INFO,
             "PM window %llu: first sample ended %.2f ms after the window opened, decoded "
             "%.2f ms after",
             (unsigned long long)sample->window_id, sample->open_to_sample_ns / 1e6,
             sample->open_to_delivery_ns / 1e6);
}

static void resolve_pending(store *database, int64_t pid)
{
    size_t sample_count = 0;
    for (size_t i = 0; i < state.entry_count; i++)
        if (!state.entries[i].is_decode_end)
            state.times[sample_count++] =
                state.entries[i].sample.start_ns / 2 + state.entries[i].sample.end_ns / 2;
    /* Candidates: the history, then the open snapshot (closes in progress
     * carry their end already). */
    size_t candidate_count = 0;
    if (attrib_history_snapshot(&state.history, NULL, 0, NULL, 0, state.candidates,
                                state.candidate_capacity, &candidate_count) != FLARE_OK)
        candidate_count = 0;
    size_t history_part = candidate_count;
    for (size_t i = 0; i < state.open_count && candidate_count < state.candidate_capacity; i++)
        state.candidates[candidate_count++] = state.open[i].scope;
    if (sample_count > 0 &&
        attrib_resolve(state.candidates, candidate_count, state.times, sample_count, state.winners,
                       &state.scratch) != FLARE_OK) {
        for (size_t i = 0; i < sample_count; i++)
            state.winners[i] = ATTRIB_UNATTRIBUTED;
        CORE_LOG_ONCE("pm.resolve", CORE_LOG_WARNING,
                      "PM attribution ran out of memory; a drain was stored unattributed");
    }
    size_t row_count = 0, sample_at = 0;
    for (size_t i = 0; i < state.entry_count; i++) {
        const pm_queue_entry *entry = &state.entries[i];
        if (entry->is_decode_end)
            continue;
        const pm_sample *sample = &entry->sample;
        int64_t winner = state.winners[sample_at++];
        const char *scope_name = NULL;
        uint64_t scope_id = 0;
        if (winner >= 0) {
            const attrib_scope *scope = &state.candidates[winner];
            scope_id = scope->instance_id;
            scope_name = name_lookup(scope_id);
            if (scope_name == NULL && (size_t)winner >= history_part &&
                state.open[(size_t)winner - history_part].name[0] != '\0')
                scope_name = state.open[(size_t)winner - history_part].name;
            if (scope_name == NULL)
                unnamed_add(scope_id);
            state.stats.samples_attributed++;
        } else {
            state.stats.samples_unattributed++;
        }
        state.stats.samples_stored++;
        if (sample->open_to_sample_ns != 0)
            store_latency(database, pid, sample);
        const pm_resolved_metrics *metrics = pm_engine_metrics(state.entry_engine[i]);
        for (size_t m = 0; m < metrics->count; m++) {
            state.rows[row_count++] = (store_pm_row){.pid = pid,
                                                     .window_id = sample->window_id,
                                                     .device = sample->device,
                                                     .sample_index = sample->sample_index,
                                                     .start_ns = sample->start_ns,
                                                     .end_ns = sample->end_ns,
                                                     .has_scope = winner >= 0,
                                                     .scope_instance_id = scope_id,
                                                     .scope_name = scope_name,
                                                     .flags = sample->flags,
                                                     .metric = metrics->labels[m],
                                                     .value = sample->values[m]};
            if (row_count == ROWS_PER_WRITE)
                flush_rows(database, &row_count);
        }
    }
    flush_rows(database, &row_count);
    /* Only now, with every sample before it resolved, may a decode's
     * watermark trim the history. */
    for (size_t i = 0; i < state.entry_count; i++) {
        const pm_queue_entry *entry = &state.entries[i];
        if (!entry->is_decode_end)
            continue;
        attrib_decode_result decode = {.exhausted = entry->exhausted,
                                       .overflow = entry->overflow,
                                       .failed = entry->failed,
                                       .truncated = entry->truncated,
                                       .newest_sample_ns = entry->newest_sample_ns};
        attrib_watermark_advance(&state.history, &decode);
    }
    state.entry_count = 0;
    state.open_count = 0;
    state.pending_beats = 0;
}

static void write_names(store *database, int64_t pid)
{
    for (size_t i = 0; i < state.named_pending_count; i++)
        store_pm_name_scope(database, pid, state.named_pending[i], state.named_pending_text[i]);
    state.named_pending_count = 0;
}

static int any_engine_armed(void)
{
    int armed = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < PM_SESSION_ENGINES_MAX; i++)
        if (engines[i] != NULL && pm_engine_state_get(engines[i]) == PM_ENGINE_ARMED)
            armed = 1;
    pthread_mutex_unlock(&registry_lock);
    return armed;
}

static void publish(void)
{
    state.stats.history_evictions = state.history.evictions;
    state.stats.history_trimmed = state.history.trimmed;
    state.stats.watermark_ns = state.history.watermark_ns;
    state.stats.history_count = state.history.count;
    if (state.stats.history_evictions != 0)
        core_drops_set("scope_history", "scopes evicted by the attribution cap",
                       state.stats.history_evictions);
    if (state.stats.samples_stored != 0 &&
        (state.stats.samples_stored != state.capability_samples_written ||
         state.stats.history_evictions != state.capability_evictions)) {
        state.capability_samples_written = state.stats.samples_stored;
        state.capability_evictions = state.stats.history_evictions;
        if (state.stats.history_evictions != 0)
            core_capability_set(
                "pm_attribution", 1, CORE_CAPABILITY_DEGRADED,
                "%llu scopes evicted from the attribution history (cap %zu): samples they "
                "covered are unattributed; %llu of %llu samples attributed",
                (unsigned long long)state.stats.history_evictions, state.history.capacity,
                (unsigned long long)state.stats.samples_attributed,
                (unsigned long long)state.stats.samples_stored);
        else
            core_capability_set("pm_attribution", 1, CORE_CAPABILITY_ACTIVE,
                                "%llu of %llu samples attributed to a scope; history cap %zu, "
                                "no evictions",
                                (unsigned long long)state.stats.samples_attributed,
                                (unsigned long long)state.stats.samples_stored,
                                state.history.capacity);
    }
    pthread_mutex_lock(&registry_lock);
    shared_stats = state.stats;
    pm_engine *current[PM_SESSION_ENGINES_MAX];
    memcpy(current, engines, sizeof(current));
    pthread_mutex_unlock(&registry_lock);
    for (size_t i = 0; i < PM_SESSION_ENGINES_MAX; i++) {
        if (current[i] == NULL)
            continue;
        pm_engine_stats engine_stats;
        pm_engine_stats_get(current[i], &engine_stats);
        if (engine_stats.samples_lost != 0)
            core_drops_set("pm_sampling", "samples lost to hardware buffer overflow (estimated)",
                           engine_stats.samples_lost);
        if (engine_stats.overflows != 0)
            core_drops_set("pm_sampling", "decodes that found the hardware buffer overflowed",
                           engine_stats.overflows);
        if (engine_stats.samples_discarded != 0)
            core_drops_set("pm_sampling",
                           "samples discarded at window close: the decoder was behind",
                           engine_stats.samples_discarded);
        if (engine_stats.samples_missing != 0)
            core_drops_set("pm_sampling",
                           "samples missing: holes in the stream without an overflow (estimated)",
                           engine_stats.samples_missing);
        if (engine_stats.queue_drops != 0)
            core_drops_set("pm_sampling", "decoded samples dropped: queue to the collector full",
                           engine_stats.queue_drops);
        if (engine_stats.decode_failures != 0)
            core_drops_set("pm_sampling", "failed decodes", engine_stats.decode_failures);
    }
}

void pm_session_beat(store *database, int64_t pid, uint64_t now_ns, int rings_drained)
{
    (void)now_ns;
    if (!state.ready)
        return;
    if (state.generation == 0)
        state.generation = core_active_generation();
    if (state.entry_count > 0) {
        if (rings_drained || ++state.pending_beats >= PENDING_BEATS_MAX)
            resolve_pending(database, pid);
    }
    if (state.entry_count == 0 && take_entries())
        take_open_snapshot();
    write_names(database, pid);
    int feeding = state.entry_count > 0 || any_engine_armed();
    if (state.feeding && !feeding) {
        /* Nothing can need a closed scope until the next window opens. */
        attrib_history_trim(&state.history, ATTRIB_OPEN);
    }
    state.feeding = feeding;
    publish();
}

void pm_session_cancel(void)
{
    release_state();
}

void pm_session_end(store *database, int64_t pid, uint64_t end_ns)
{
    (void)end_ns;
    if (!state.ready)
        return;
    if (state.generation == 0)
        state.generation = core_active_generation();
    /* Windows are closed: every sample is in a queue. The snapshot of the
     * pending round is still valid; later rounds snapshot what is open at
     * the end (the stacks still hold it). */
    for (int rounds = 0; rounds < 1000; rounds++) {
        if (state.entry_count > 0)
            resolve_pending(database, pid);
        if (!take_entries())
            break;
        take_open_snapshot();
    }
    write_names(database, pid);
    publish();
    state.feeding = 0;
}
