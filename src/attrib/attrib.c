/*
 * attrib.c: sample-to-scope attribution by one sweep over time (see
 * attrib.h for the rule and docs/attribution.md for the reasoning).
 *
 * Must never rescan the scopes per sample, and never report a scope that
 * does not contain the sample.
 */
#include "attrib/attrib.h"

#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"

/* A sort key and the array index it came from. */
typedef struct sort_pair {
    uint64_t key;
    uint64_t index;
} sort_pair;

/* A scope in the winner heap, with its rank fields copied in so comparing
 * two entries does not chase indices into the caller's array. */
typedef struct heap_entry {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t instance_id;
    uint64_t index;
    uint32_t depth;
} heap_entry;

void attrib_scratch_init(attrib_scratch *scratch)
{
    memset(scratch, 0, sizeof(*scratch));
}

void attrib_scratch_release(attrib_scratch *scratch)
{
    free(scratch->sample_keys);
    free(scratch->scope_keys);
    free(scratch->heap);
    memset(scratch, 0, sizeof(*scratch));
}

/* Grows *buffer to hold count elements of size bytes; keeps the old buffer
 * (still owned by the scratch) on failure. */
static int reserve(void **buffer, size_t *capacity, size_t count, size_t size)
{
    if (count <= *capacity)
        return FLARE_OK;
    if (count > SIZE_MAX / size)
        return FLARE_ERR_NO_MEMORY;
    void *grown = malloc(count * size);
    if (grown == NULL)
        return FLARE_ERR_NO_MEMORY;
    free(*buffer);
    *buffer = grown;
    *capacity = count;
    return FLARE_OK;
}

int attrib_scope_outranks(const attrib_scope *a, size_t index_a, const attrib_scope *b,
                          size_t index_b)
{
    if (a->depth != b->depth)
        return a->depth > b->depth;
    if (a->start_ns != b->start_ns)
        return a->start_ns > b->start_ns;
    if (a->instance_id != b->instance_id)
        return a->instance_id > b->instance_id;
    return index_a < index_b;
}

/* The same order as attrib_scope_outranks, on heap entries. Kept separate
 * (and checked against it by the property test through the naive resolver)
 * because the heap compares its own copies. */
static inline int entry_outranks(const heap_entry *a, const heap_entry *b)
{
    if (a->depth != b->depth)
        return a->depth > b->depth;
    if (a->start_ns != b->start_ns)
        return a->start_ns > b->start_ns;
    if (a->instance_id != b->instance_id)
        return a->instance_id > b->instance_id;
    return a->index < b->index;
}

/*
 * Stable LSD radix sort of pairs by key, 8 bits per pass. Passes where every
 * key has the same byte are skipped: timestamps of one drain share their top
 * bytes, so typically only four or five of the eight passes run. data and
 * buffer each hold count pairs; returns whichever ends up holding the result.
 */
static sort_pair *radix_sort(sort_pair *data, sort_pair *buffer, size_t count)
{
    size_t histogram[8][256];
    memset(histogram, 0, sizeof(histogram));
    for (size_t i = 0; i < count; i++) {
        uint64_t key = data[i].key;
        for (int pass = 0; pass < 8; pass++)
            histogram[pass][(key >> (8 * pass)) & 0xff]++;
    }
    for (int pass = 0; pass < 8; pass++) {
        size_t *counts = histogram[pass];
        int single_bucket = 0;
        for (int b = 0; b < 256; b++) {
            if (counts[b] == count) {
                single_bucket = 1;
                break;
            }
        }
        if (single_bucket)
            continue;
        size_t offset = 0;
        for (int b = 0; b < 256; b++) {
            size_t n = counts[b];
            counts[b] = offset;
            offset += n;
        }
        int shift = 8 * pass;
        for (size_t i = 0; i < count; i++)
            buffer[counts[(data[i].key >> shift) & 0xff]++] = data[i];
        sort_pair *swap = data;
        data = buffer;
        buffer = swap;
    }
    return data;
}

static void heap_push(heap_entry *heap, size_t *size, const heap_entry *entry)
{
    size_t child = (*size)++;
    while (child > 0) {
        size_t parent = (child - 1) / 2;
        if (!entry_outranks(entry, &heap[parent]))
            break;
        heap[child] = heap[parent];
        child = parent;
    }
    heap[child] = *entry;
}

static void heap_pop(heap_entry *heap, size_t *size)
{
    size_t count = --(*size);
    if (count == 0)
        return;
    heap_entry last = heap[count];
    size_t parent = 0;
    for (;;) {
        size_t child = 2 * parent + 1;
        if (child >= count)
            break;
        if (child + 1 < count && entry_outranks(&heap[child + 1], &heap[child]))
            child++;
        if (!entry_outranks(&heap[child], &last))
            break;
        heap[parent] = heap[child];
        parent = child;
    }
    heap[parent] = last;
}

int attrib_resolve(const attrib_scope *scopes, size_t scope_count, const uint64_t *sample_times,
                   size_t sample_count, int64_t *winner_index_out, attrib_scratch *scratch)
{
    if ((scope_count > 0 && scopes == NULL) ||
        (sample_count > 0 && (sample_times == NULL || winner_index_out == NULL)))
        return FLARE_ERR_INVALID_ARGUMENT;
    if (sample_count == 0)
        return FLARE_OK;
    if (scope_count == 0) {
        for (size_t i = 0; i < sample_count; i++)
            winner_index_out[i] = ATTRIB_UNATTRIBUTED;
        return FLARE_OK;
    }

    attrib_scratch local;
    attrib_scratch *work = scratch;
    if (work == NULL) {
        attrib_scratch_init(&local);
        work = &local;
    }
    int status = FLARE_OK;
    /* Each key array holds the pairs and, after them, the radix sort's buffer. */
    if (sample_count > SIZE_MAX / 2 || scope_count > SIZE_MAX / 2) {
        status = FLARE_ERR_NO_MEMORY;
        goto out;
    }
    status =
        reserve(&work->sample_keys, &work->sample_capacity, 2 * sample_count, sizeof(sort_pair));
    if (status != FLARE_OK)
        goto out;
    status = reserve(&work->scope_keys, &work->scope_capacity, 2 * scope_count, sizeof(sort_pair));
    if (status != FLARE_OK)
        goto out;
    status = reserve(&work->heap, &work->heap_capacity, scope_count, sizeof(heap_entry));
    if (status != FLARE_OK)
        goto out;

    sort_pair *samples = work->sample_keys;
    for (size_t i = 0; i < sample_count; i++)
        samples[i] = (sort_pair){.key = sample_times[i], .index = i};
    /* The sorted pairs may end in either half of the array; both are ours. */
    samples = radix_sort(samples, samples + sample_count, sample_count);

    sort_pair *by_start = work->scope_keys;
    for (size_t i = 0; i < scope_count; i++)
        by_start[i] = (sort_pair){.key = scopes[i].start_ns, .index = i};
    by_start = radix_sort(by_start, by_start + scope_count, scope_count);

    /*
     * The sweep. Samples come in time order, so a scope that ended before
     * the current sample has ended before every later one too: it can be
     * dropped for good. That is why the heap needs no removal from its
     * middle: an expired scope is harmless until it reaches the top (a
     * non-expired top outranks everything below it, expired or not), and at
     * the top it is discarded. No separate expiry heap is needed for the
     * same reason. Each scope is pushed and popped at most once.
     */
    heap_entry *heap = work->heap;
    size_t heap_size = 0;
    size_t next_scope = 0;
    for (size_t s = 0; s < sample_count; s++) {
        uint64_t time = samples[s].key;
        while (next_scope < scope_count && by_start[next_scope].key <= time) {
            const attrib_scope *scope = &scopes[by_start[next_scope].index];
            heap_entry entry = {.start_ns = scope->start_ns,
                                .end_ns = scope->end_ns,
                                .instance_id = scope->instance_id,
                                .index = by_start[next_scope].index,
                                .depth = scope->depth};
            heap_push(heap, &heap_size, &entry);
            next_scope++;
        }
        /* Closed intervals: a scope ending exactly at the sample still holds it. */
        while (heap_size > 0 && heap[0].end_ns < time)
            heap_pop(heap, &heap_size);
        winner_index_out[samples[s].index] =
            heap_size > 0 ? (int64_t)heap[0].index : ATTRIB_UNATTRIBUTED;
    }

out:
    if (work == &local)
        attrib_scratch_release(&local);
    return status;
}

int attrib_resolve_naive(const attrib_scope *scopes, size_t scope_count,
                         const uint64_t *sample_times, size_t sample_count,
                         int64_t *winner_index_out)
{
    if ((scope_count > 0 && scopes == NULL) ||
        (sample_count > 0 && (sample_times == NULL || winner_index_out == NULL)))
        return FLARE_ERR_INVALID_ARGUMENT;
    for (size_t s = 0; s < sample_count; s++) {
        uint64_t time = sample_times[s];
        int64_t best = ATTRIB_UNATTRIBUTED;
        for (size_t i = 0; i < scope_count; i++) {
            if (scopes[i].start_ns > time || scopes[i].end_ns < time)
                continue;
            if (best < 0 || attrib_scope_outranks(&scopes[i], i, &scopes[best], (size_t)best))
                best = (int64_t)i;
        }
        winner_index_out[s] = best;
    }
    return FLARE_OK;
}
