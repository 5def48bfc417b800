/*
 * pc_session.c: the collector's side of PC sampling and SASS metrics
 * (pc_session.h): takes the aggregates of disarmed windows from every
 * registered engine and writes them, one row each, into the open batch
 * (pc_samples, or sass_metrics for a SASS engine); keeps the engines' loss
 * counts in the drops table. Only the collector thread calls in (the
 * registry alone is shared, under its lock).
 *
 * Must never: write an aggregate twice (an engine hands each out once), hold
 * more than one batch of aggregates (PC_SESSION_BATCH), or lose one without
 * counting its samples.
 */
#include "pcsamp/pc_session.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/log.h"
#include "flare/flare.h"
#include "store/store_pc.h"
#include "store/store_sass.h"

#define PC_SESSION_ENGINES_MAX 4
/* Aggregates one take moves (about 80 KiB on the collector's side). */
#define PC_SESSION_BATCH 256u

/* An engine outlives sessions (the simulated one lives for the process):
 * its loss counters are counted from the session's start (the baseline,
 * taken when the session registers it), and what an earlier session left
 * untaken (it could not end) is counted, never written as this one's. */
typedef struct registered_engine {
    pc_engine *engine;
    uint64_t generation; /* the session whose baseline this is */
    uint64_t base_lost, base_dropped;
} registered_engine;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered_engine engines[PC_SESSION_ENGINES_MAX];
static size_t engine_count;
static uint64_t generation; /* under registry_lock */

/* Collector thread only. */
static pc_entry taken[PC_SESSION_BATCH];
static pc_session_stats stats;
/* Per pc_engine_kind: what the drops rows say now, and values not stored. */
#define KINDS 2
static uint64_t stored_lost[KINDS], stored_dropped[KINDS], stored_unwritten[KINDS];
static uint64_t unwritten_by_kind[KINDS], in_batch_by_kind[KINDS];
static _Atomic uint64_t leftover_by_kind[KINDS];

/* engine's loss counters since it was made. */
static void engine_losses(pc_engine *engine, uint64_t *lost, uint64_t *dropped)
{
    pc_engine_stats engine_stats;
    pc_engine_stats_get(engine, &engine_stats);
    *lost = engine_stats.samples_lost;
    *dropped = engine_stats.aggregate_drops;
}

/* registry_lock held: entry's baseline for this session, and the entries
 * an earlier session left, counted and dropped. */
static void start_counting(registered_engine *entry)
{
    if (entry->generation == generation)
        return;
    entry->generation = generation;
    engine_losses(entry->engine, &entry->base_lost, &entry->base_dropped);
    pc_entry left[8]; /* not the collector's buffer: any thread may register */
    size_t got;
    while ((got = pc_engine_take(entry->engine, left, sizeof(left) / sizeof(left[0]))) > 0)
        for (size_t i = 0; i < got; i++) {
            int sass = pc_engine_kind_of(entry->engine) == PC_ENGINE_SASS;
            atomic_fetch_add(&leftover_by_kind[sass], sass ? 1 : left[i].samples);
        }
}

int pc_session_register_engine(pc_engine *engine)
{
    int status = FLARE_OK;
    pthread_mutex_lock(&registry_lock);
    size_t i = 0;
    while (i < engine_count && engines[i].engine != engine)
        i++;
    if (i == engine_count) {
        if (engine_count == PC_SESSION_ENGINES_MAX)
            status = FLARE_ERR_NO_MEMORY;
        else
            engines[engine_count++] = (registered_engine){.engine = engine};
    }
    if (status == FLARE_OK) {
        start_counting(&engines[i]);
        pc_engine_reload_settings(engine);
    }
    pthread_mutex_unlock(&registry_lock);
    return status;
}

static size_t registered(registered_engine *out)
{
    pthread_mutex_lock(&registry_lock);
    size_t count = engine_count;
    memcpy(out, engines, count * sizeof(*out));
    pthread_mutex_unlock(&registry_lock);
    return count;
}

void pc_session_begin(void)
{
    pthread_mutex_lock(&registry_lock);
    generation++;
    for (int kind = 0; kind < KINDS; kind++)
        atomic_store(&leftover_by_kind[kind], 0); /* the last session's were written there */
    for (size_t i = 0; i < engine_count; i++)
        start_counting(&engines[i]);
    pthread_mutex_unlock(&registry_lock);
    memset(&stats, 0, sizeof(stats));
    memset(stored_lost, 0, sizeof(stored_lost));
    memset(stored_dropped, 0, sizeof(stored_dropped));
    memset(stored_unwritten, 0, sizeof(stored_unwritten));
    memset(unwritten_by_kind, 0, sizeof(unwritten_by_kind));
    memset(in_batch_by_kind, 0, sizeof(in_batch_by_kind));
}

/* One SASS aggregate into sass_metrics. */
static int put_sass(store *database, int64_t pid, const pc_entry *entry)
{
    store_sass_row row = {.pid = pid,
                          .window_id = entry->window_id,
                          .device = entry->device,
                          .function = entry->function,
                          .pc_offset = entry->pc_offset,
                          .metric = entry->stall_reason,
                          .value = entry->samples,
                          .file = entry->file,
                          .line = entry->line,
                          .code = entry->code};
    return store_put_sass_metric(database, &row);
}

static int put_pc(store *database, int64_t pid, const pc_entry *entry)
{
    store_pc_sample_row row = {.pid = pid,
                               .window_id = entry->window_id,
                               .device = entry->device,
                               .function = entry->function,
                               .pc_offset = entry->pc_offset,
                               .stall_reason = entry->stall_reason,
                               .samples = entry->samples,
                               .first_ns = entry->first_ns,
                               .last_ns = entry->last_ns,
                               .file = entry->file,
                               .line = entry->line,
                               .code = entry->code};
    return store_put_pc_sample(database, &row);
}

static void write_entry(store *database, int64_t pid, const pc_entry *entry, int sass)
{
    if ((sass ? put_sass(database, pid, entry) : put_pc(database, pid, entry)) != FLARE_OK) {
        if (sass)
            stats.sass_write_failures++;
        else
            stats.write_failures += entry->samples;
        unwritten_by_kind[sass] += sass ? 1 : entry->samples;
        CORE_LOG_ONCE("pc_session.write", CORE_LOG_ERROR, "cannot store %s: %s",
                      sass ? "SASS metrics" : "PC samples", store_last_error(database));
        return;
    }
    stats.entries_written++;
    if (sass)
        stats.sass_entries_written++;
    else
        stats.samples_written += entry->samples;
    in_batch_by_kind[sass] += sass ? 1 : entry->samples;
}

/* Every aggregate the engines hand out now. */
static void take_all(store *database, int64_t pid)
{
    registered_engine list[PC_SESSION_ENGINES_MAX];
    size_t count = registered(list);
    for (size_t e = 0; e < count; e++) {
        int sass = pc_engine_kind_of(list[e].engine) == PC_ENGINE_SASS;
        size_t got;
        while ((got = pc_engine_take(list[e].engine, taken, PC_SESSION_BATCH)) > 0)
            for (size_t i = 0; i < got; i++)
                write_entry(database, pid, &taken[i], sass);
    }
}

/* The words of each kind's drops rows. */
static const struct {
    const char *source, *lost, *dropped, *unwritten;
} drop_words[KINDS] = {
    {"pc_sampling", "samples lost (hardware buffer full)", "samples dropped (aggregate table full)",
     "samples not stored (a write, its batch or an earlier session's end failed)"},
    {"sass_metrics", "instruction values lost (the hardware's record buffer was full)",
     "instruction values dropped (aggregate table full)",
     "instruction values not stored (a write, its batch or an earlier session's end failed)"},
};

/* One drops row, when its count changed (or always, at the end, when not 0). */
static void set_drop(store *database, int64_t pid, int kind, const char *what, uint64_t count,
                     uint64_t *stored, int always)
{
    if ((count != *stored || (always && count != 0)) &&
        store_set_drops(database, pid, drop_words[kind].source, what, count) == FLARE_OK)
        *stored = count;
}

/* The drops rows, when a count changed (or always, at the end). A SASS
 * engine's losses count instruction values (records), never summed values. */
static void write_drops(store *database, int64_t pid, int always)
{
    registered_engine list[PC_SESSION_ENGINES_MAX];
    size_t count = registered(list);
    uint64_t lost[KINDS] = {0}, dropped[KINDS] = {0};
    for (size_t e = 0; e < count; e++) {
        int kind = pc_engine_kind_of(list[e].engine) == PC_ENGINE_SASS;
        uint64_t engine_lost = 0, engine_dropped = 0;
        engine_losses(list[e].engine, &engine_lost, &engine_dropped);
        lost[kind] += engine_lost - list[e].base_lost;
        dropped[kind] += engine_dropped - list[e].base_dropped;
    }
    for (int kind = 0; kind < KINDS; kind++) {
        uint64_t unwritten = unwritten_by_kind[kind] + atomic_load(&leftover_by_kind[kind]);
        set_drop(database, pid, kind, drop_words[kind].lost, lost[kind], &stored_lost[kind],
                 always);
        set_drop(database, pid, kind, drop_words[kind].dropped, dropped[kind],
                 &stored_dropped[kind], always);
        set_drop(database, pid, kind, drop_words[kind].unwritten, unwritten,
                 &stored_unwritten[kind], always);
    }
}

void pc_session_batch(store *database, int64_t pid)
{
    memset(in_batch_by_kind, 0, sizeof(in_batch_by_kind));
    take_all(database, pid);
    write_drops(database, pid, 0);
}

void pc_session_committed(int committed)
{
    if (!committed) {
        /* Taken from the engines, gone with the batch: counted, and the
         * drops rows written again with the next batch. */
        stats.samples_uncommitted += in_batch_by_kind[0]; /* PC samples */
        for (int kind = 0; kind < KINDS; kind++)
            unwritten_by_kind[kind] += in_batch_by_kind[kind];
        memset(stored_lost, 0, sizeof(stored_lost));
        memset(stored_dropped, 0, sizeof(stored_dropped));
        memset(stored_unwritten, 0, sizeof(stored_unwritten));
    }
    memset(in_batch_by_kind, 0, sizeof(in_batch_by_kind));
}

void pc_session_end(store *database, int64_t pid)
{
    take_all(database, pid);
    write_drops(database, pid, 1);
}

void pc_session_stats_get(pc_session_stats *out)
{
    *out = stats;
}
