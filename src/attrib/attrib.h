/*
 * attrib.h: sample-to-scope attribution. Given a batch of sample timestamps
 * (a whole PM drain) and a snapshot of candidate scopes, decides for every
 * sample which scope it belongs to, or that no scope covers it.
 *
 * The rule: a sample belongs to the deepest scope whose closed interval
 * [start_ns, end_ns] contains its timestamp. Among equally deep scopes the
 * latest start wins, then the greater instance id; instance ids are unique,
 * so two distinct scopes never rank equal (the array index is a last resort
 * only for callers that break that contract, so the answer stays
 * deterministic). Scopes of every thread compete, and a still-open scope
 * (end_ns == ATTRIB_OPEN) covers everything from its start on.
 *
 * This module must never credit a sample to a scope that does not contain
 * it: a sample no interval covers is reported as unattributed (-1), never as
 * "whatever is open now". It does no I/O, takes no locks, and allocates only
 * in proportion to its inputs; it is not for application hot paths.
 */
#ifndef FLARE_ATTRIB_ATTRIB_H
#define FLARE_ATTRIB_ATTRIB_H

#include <stddef.h>
#include <stdint.h>

/* end_ns of a scope that has not closed (and has no pending close). */
#define ATTRIB_OPEN UINT64_MAX

/* Result for a sample that no scope covers. */
#define ATTRIB_UNATTRIBUTED ((int64_t)-1)

typedef struct attrib_scope {
    uint64_t start_ns;
    uint64_t end_ns; /* inclusive; ATTRIB_OPEN while the scope is still running */
    uint64_t instance_id;
    int64_t thread_id; /* recorded for callers; attribution ignores it */
    uint32_t depth;    /* 0 = outermost */
} attrib_scope;

/*
 * Reusable working memory for attrib_resolve, so a collector resolving a
 * drain every few milliseconds does not allocate each time. Zero it (or call
 * attrib_scratch_init) before first use; it grows to the largest inputs seen
 * and is released by attrib_scratch_release.
 */
typedef struct attrib_scratch {
    void *sample_keys; /* (time, index) pairs for the samples, and their sort buffer */
    size_t sample_capacity;
    void *scope_keys; /* (start, index) pairs for the scopes, and their sort buffer */
    size_t scope_capacity;
    void *heap; /* the winner heap: at most one entry per scope */
    size_t heap_capacity;
} attrib_scratch;

void attrib_scratch_init(attrib_scratch *scratch);
void attrib_scratch_release(attrib_scratch *scratch);

/*
 * Ranks two scopes that both contain a sample: returns nonzero when scope a
 * (at array index index_a) wins over scope b (at index_b). Deeper wins, then
 * the later start, then the greater instance id, then the lower index.
 */
int attrib_scope_outranks(const attrib_scope *a, size_t index_a, const attrib_scope *b,
                          size_t index_b);

/*
 * Resolves a whole batch at once. For each sample i writes to
 * winner_index_out[i] the index into scopes of the winning scope, or
 * ATTRIB_UNATTRIBUTED. Samples and scopes may come in any order.
 *
 * Sorts the samples by time and the scopes by start, then sweeps once: a
 * scope enters a max-heap (ordered by the rank above) when the sweep reaches
 * its start, and the heap's top is discarded while it ended before the
 * current sample. O((n + m) log m) for n samples and m scopes; nothing is
 * rescanned per sample. scratch may be NULL (memory is then allocated and
 * freed inside the call).
 *
 * Returns FLARE_OK; FLARE_ERR_INVALID_ARGUMENT for a NULL array with a
 * nonzero count; FLARE_ERR_NO_MEMORY when working memory cannot be had (the
 * outputs are then unspecified, and scratch stays valid for release).
 */
int attrib_resolve(const attrib_scope *scopes, size_t scope_count, const uint64_t *sample_times,
                   size_t sample_count, int64_t *winner_index_out, attrib_scratch *scratch);

/*
 * The reference resolver: for each sample, scans every scope. O(n * m).
 * For tests and the benchmark only; same contract and results as
 * attrib_resolve (never fails except FLARE_ERR_INVALID_ARGUMENT).
 */
int attrib_resolve_naive(const attrib_scope *scopes, size_t scope_count,
                         const uint64_t *sample_times, size_t sample_count,
                         int64_t *winner_index_out);

#endif /* FLARE_ATTRIB_ATTRIB_H */
