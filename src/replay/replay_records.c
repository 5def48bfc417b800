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

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static replay_record *queue[REPLAY_RECORD_QUEUE_MAX];
static size_t queue_head;
static size_t queue_count;
static uint64_t queue_dropped;
static uint64_t queue_dropped_total;
static uint64_t write_failures; /* records the store refused */

void replay_record_queue(replay_record *record)
{
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

void replay_write_records(struct store *database, int64_t pid)
{
    replay_record *records[64];
    uint64_t dropped = 0;
    size_t count;
    do {
        count = replay_records_take(records, 64, &dropped);
        if (count > 0) {
            if (store_write_replay_records(database, pid, (replay_record *const *)records, count) !=
                FLARE_OK) {
                CORE_LOG_ONCE("replay.store", CORE_LOG_ERROR,
                              "replay: %zu records could not be stored: %s", count,
                              store_last_error(database));
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
