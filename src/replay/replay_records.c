/*
 * replay_records.c: the bounded queue of finished replay records between
 * the launching threads and the collector, which stores them.
 *
 * Producers are launching threads finishing a replay (rare, heavy events),
 * so one mutex is enough. The queue never grows past REPLAY_RECORD_QUEUE_MAX:
 * a record that does not fit is freed and counted, and the count reaches
 * the drops table.
 */
#include "replay/replay_internal.h"

#include "core/capability.h"
#include "core/log.h"
#include "store/store_replay.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static replay_record *queue[REPLAY_RECORD_QUEUE_MAX];
static size_t queue_head;
static size_t queue_count;
static uint64_t queue_dropped;
static uint64_t queue_dropped_total;
static uint64_t write_failures; /* records the store refused */

void replay_record_queue(replay_record *record)
{
    if (record->trigger_id != 0)
        replay_trigger_finished(record); /* before the queue can drop it */
    pthread_mutex_lock(&queue_lock);
    if (queue_count == REPLAY_RECORD_QUEUE_MAX) {
        queue_dropped++;
        queue_dropped_total++;
        pthread_mutex_unlock(&queue_lock);
        free(record);
        return;
    }
    queue[(queue_head + queue_count) % REPLAY_RECORD_QUEUE_MAX] = record;
    queue_count++;
    pthread_mutex_unlock(&queue_lock);
}

size_t replay_records_take(replay_record **out, size_t max, uint64_t *dropped)
{
    size_t taken = 0;
    pthread_mutex_lock(&queue_lock);
    while (taken < max && queue_count > 0) {
        out[taken++] = queue[queue_head];
        queue_head = (queue_head + 1) % REPLAY_RECORD_QUEUE_MAX;
        queue_count--;
    }
    if (dropped != NULL) {
        *dropped = queue_dropped;
    }
    queue_dropped = 0;
    pthread_mutex_unlock(&queue_lock);
    return taken;
}

/* ---- conversion to the store's rows ---- */

/* One record as the store takes it. The record is plain memory handed
 * across threads, so its strings are bounded by their arrays rather than
 * trusted to end: each is copied, NUL-terminated, into an array one longer. */
typedef struct record_row {
    store_replay_record row;
    char name[sizeof(((replay_record *)0)->kernel_name) + 1];
    char reason[sizeof(((replay_record *)0)->reason) + 1];
    char collector[sizeof(((replay_record *)0)->collector) + 1];
    char metric_names[REPLAY_RECORD_METRIC_MAX][REPLAY_METRIC_NAME_MAX + 1];
    const char *metric_pointers[REPLAY_RECORD_METRIC_MAX];
    char note_methods[REPLAY_RECORD_METRIC_MAX][REPLAY_NOTE_TEXT_MAX + 1];
    char note_statuses[REPLAY_RECORD_METRIC_MAX][REPLAY_NOTE_TEXT_MAX + 1];
    store_replay_value_note notes[REPLAY_RECORD_METRIC_MAX];
} record_row;

static const char *copy_bounded(char *out, const char *text, size_t capacity)
{
    size_t length = strnlen(text, capacity);
    memcpy(out, text, length);
    out[length] = '\0';
    return out;
}

/* The engine keeps the first REPLAY_RECORD_PASS_MAX passes' times and only
 * counts later ones (passes_run); a count beyond the arrays is clamped,
 * never read past. Likewise the metrics. */
static void record_row_fill(record_row *out, const replay_record *record)
{
    uint32_t passes = record->pass_count_kept;
    if (passes > REPLAY_RECORD_PASS_MAX)
        passes = REPLAY_RECORD_PASS_MAX;
    uint32_t metrics = record->metric_count;
    if (metrics > REPLAY_RECORD_METRIC_MAX)
        metrics = REPLAY_RECORD_METRIC_MAX;
    for (uint32_t index = 0; index < metrics; index++) {
        out->metric_pointers[index] = copy_bounded(
            out->metric_names[index], record->metric_names[index], REPLAY_METRIC_NAME_MAX);
        const replay_value_note *note = &record->metric_notes[index];
        out->notes[index] = (store_replay_value_note){
            .method = copy_bounded(out->note_methods[index], note->method, REPLAY_NOTE_TEXT_MAX),
            .status = copy_bounded(out->note_statuses[index], note->status, REPLAY_NOTE_TEXT_MAX),
            .error_bound = note->error_bound,
            .samples = note->samples,
        };
    }
    out->row = (store_replay_record){
        .is_span = record->is_span,
        .launch_id = record->launch_id,
        .span_id = record->span_id,
        .device = record->device,
        .stream_id = record->stream_id,
        .name = copy_bounded(out->name, record->kernel_name, sizeof(record->kernel_name)),
        .launch_index = record->launch_index,
        .span_kernels = record->span_kernels,
        .span_copies = record->span_copies,
        .passes_planned = record->passes_planned,
        .passes_run = record->passes_run,
        .declined = record->declined,
        .reason = copy_bounded(out->reason, record->reason, sizeof(record->reason)),
        .begin_ns = record->begin_ns,
        .end_ns = record->end_ns,
        .drain_ns = record->drain_ns,
        .snapshot_bytes = record->snapshot_bytes,
        .shadow_on_device = record->shadow_on_device,
        .snapshot_ns = record->snapshot_ns,
        .restore_ns = record->restore_ns,
        .bytes_restored = record->bytes_restored,
        .collector = copy_bounded(out->collector, record->collector, sizeof(record->collector)),
        .pass_count = passes,
        .pass_start_ns = record->pass_start_ns,
        .pass_end_ns = record->pass_end_ns,
        .metric_count = metrics,
        .metric_names = out->metric_pointers,
        .metric_values = record->metric_values,
        .metric_notes = record->has_notes ? out->notes : NULL,
    };
}

int replay_records_store(struct store *database, int64_t pid, replay_record *const *records,
                         size_t count)
{
    if (records == NULL || count == 0)
        return store_write_replay_records(database, pid, NULL, count);
    record_row *rows = malloc(count * sizeof(*rows));
    const store_replay_record **pointers = calloc(count, sizeof(*pointers));
    int status = FLARE_ERR_NO_MEMORY;
    if (rows != NULL && pointers != NULL) {
        for (size_t index = 0; index < count; index++) {
            if (records[index] == NULL)
                continue; /* pointers[index] stays NULL: the store skips it */
            record_row_fill(&rows[index], records[index]);
            pointers[index] = &rows[index].row;
        }
        status = store_write_replay_records(database, pid, pointers, count);
    }
    free(rows);
    free(pointers);
    return status;
}

/* ---- the collector's side ---- */

void replay_write_records(struct store *database, int64_t pid)
{
    replay_record *records[64];
    uint64_t dropped = 0;
    size_t count;
    do {
        count = replay_records_take(records, 64, &dropped);
        if (count > 0) {
            int status = replay_records_store(database, pid, records, count);
            if (status != FLARE_OK) {
                CORE_LOG_ONCE("replay.store", CORE_LOG_ERROR,
                              "replay: %zu records could not be stored: %s", count,
                              status == FLARE_ERR_NO_MEMORY ? "out of memory"
                                                            : store_last_error(database));
                pthread_mutex_lock(&queue_lock);
                write_failures += count;
                pthread_mutex_unlock(&queue_lock);
                core_drops_set("replay", "records (store write failed)", write_failures);
            }
            for (size_t index = 0; index < count; index++) {
                free(records[index]);
            }
        }
    } while (count == 64);
    if (dropped > 0) {
        pthread_mutex_lock(&queue_lock);
        uint64_t total = queue_dropped_total;
        pthread_mutex_unlock(&queue_lock);
        core_drops_set("replay", "records (queue full)", total);
    }
}

void replay_records_reset_for_tests(void)
{
    replay_record *records[64];
    size_t count;
    do {
        count = replay_records_take(records, 64, NULL);
        for (size_t index = 0; index < count; index++) {
            free(records[index]);
        }
    } while (count == 64);
    pthread_mutex_lock(&queue_lock);
    queue_dropped = queue_dropped_total = write_failures = 0;
    pthread_mutex_unlock(&queue_lock);
}
