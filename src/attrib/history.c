/*
 * history.c: the bounded scope history and its watermark (see history.h).
 *
 * Must never grow past the capacity given at init, and never move the
 * watermark backwards or on a decode that did not prove exhaustion.
 */
#include "attrib/history.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "flare/flare.h"

int attrib_history_init(attrib_history *history, size_t capacity)
{
    memset(history, 0, sizeof(*history));
    if (capacity == 0 || capacity > SIZE_MAX / sizeof(attrib_scope))
        return FLARE_ERR_INVALID_ARGUMENT;
    history->ring = malloc(capacity * sizeof(attrib_scope));
    if (history->ring == NULL)
        return FLARE_ERR_NO_MEMORY;
    history->capacity = capacity;
    return FLARE_OK;
}

void attrib_history_destroy(attrib_history *history)
{
    free(history->ring);
    memset(history, 0, sizeof(*history));
}

static size_t slot(const attrib_history *history, size_t position)
{
    return (history->head + position) % history->capacity;
}

void attrib_history_record_close(attrib_history *history, const attrib_scope *closed)
{
    if (history->capacity == 0)
        return;
    if (history->count == history->capacity) {
        /* Evict the oldest so the newest scopes, which pending samples are
         * most likely to need, are the ones kept. */
        history->head = (history->head + 1) % history->capacity;
        history->count--;
        history->evictions++;
        /* Past the cap every close evicts: one line, the rest counted. */
        CORE_LOG_ONCE("attrib_history_evict", CORE_LOG_WARNING,
                      "scope history full (%zu scopes): evicting the oldest; samples in evicted "
                      "scopes will be unattributed",
                      history->capacity);
    }
    history->ring[slot(history, history->count)] = *closed;
    history->count++;
}

size_t attrib_history_trim(attrib_history *history, uint64_t watermark_ns)
{
    /* Closes are not recorded in end order (threads and NVTX ranges
     * interleave), so expired scopes can sit anywhere: compact in place. */
    size_t kept = 0;
    for (size_t i = 0; i < history->count; i++) {
        const attrib_scope *scope = &history->ring[slot(history, i)];
        if (scope->end_ns < watermark_ns)
            continue;
        if (kept != i)
            history->ring[slot(history, kept)] = *scope;
        kept++;
    }
    size_t removed = history->count - kept;
    history->count = kept;
    history->trimmed += removed;
    return removed;
}

int attrib_watermark_advance(attrib_history *history, const attrib_decode_result *decode)
{
    if (decode == NULL)
        return 0;
    /* Only an exhausted, complete decode proves no older sample is waiting. */
    if (!decode->exhausted || decode->overflow || decode->failed || decode->truncated)
        return 0;
    if (decode->newest_sample_ns <= history->watermark_ns)
        return 0;
    history->watermark_ns = decode->newest_sample_ns;
    attrib_history_trim(history, history->watermark_ns);
    return 1;
}

size_t attrib_history_snapshot_size(const attrib_history *history, size_t open_count)
{
    return history->count + open_count;
}

static int compare_pending(const void *a, const void *b)
{
    uint64_t x = ((const attrib_pending_close *)a)->instance_id;
    uint64_t y = ((const attrib_pending_close *)b)->instance_id;
    return (x > y) - (x < y);
}

int attrib_history_snapshot(const attrib_history *history, const attrib_scope *open_scopes,
                            size_t open_count, const attrib_pending_close *pending,
                            size_t pending_count, attrib_scope *out, size_t out_capacity,
                            size_t *out_count)
{
    if ((open_count > 0 && open_scopes == NULL) || (pending_count > 0 && pending == NULL) ||
        out_count == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    size_t needed = attrib_history_snapshot_size(history, open_count);
    if (needed > 0 && out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (needed > out_capacity)
        return FLARE_ERR_FULL;

    /* Sorted copy of the pending closes so each open scope is one lookup. */
    attrib_pending_close *sorted = NULL;
    if (pending_count > 0 && open_count > 0) {
        sorted = malloc(pending_count * sizeof(*sorted));
        if (sorted == NULL)
            return FLARE_ERR_NO_MEMORY;
        memcpy(sorted, pending, pending_count * sizeof(*sorted));
        qsort(sorted, pending_count, sizeof(*sorted), compare_pending);
    }

    size_t written = 0;
    for (size_t i = 0; i < history->count; i++)
        out[written++] = history->ring[slot(history, i)];
    for (size_t i = 0; i < open_count; i++) {
        attrib_scope scope = open_scopes[i];
        if (scope.end_ns == ATTRIB_OPEN && sorted != NULL) {
            attrib_pending_close key = {.instance_id = scope.instance_id};
            const attrib_pending_close *close =
                bsearch(&key, sorted, pending_count, sizeof(*sorted), compare_pending);
            if (close != NULL)
                scope.end_ns = close->end_ns;
        }
        out[written++] = scope;
    }
    free(sorted);
    *out_count = written;
    return FLARE_OK;
}
