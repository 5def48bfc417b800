/*
 * cuda_ranges.h: the table of NVTX start/end ranges still open.
 *
 * nvtxRangeStart returns an id and nvtxRangeEnd may come on another thread,
 * so open ranges live in a bounded, process-wide table keyed by id (open
 * addressing, backward-shift deletion so lookups never see a broken probe
 * chain). A start that finds the table full is refused (the caller counts
 * it); an end with an unknown id is ignored. Guarded by one mutex: NVTX
 * start/end are not on a per-launch path. Needs no CUDA header.
 */
#ifndef FLARE_BACKEND_CUDA_RANGES_H
#define FLARE_BACKEND_CUDA_RANGES_H

#include <pthread.h>
#include <stdint.h>

#include "flare/flare.h"

#define CUDA_RANGES_MAX 4096
/* At most this many open at once: linear probing stays short only while the
 * table is at most three quarters full. */
#define CUDA_RANGES_OPEN_MAX (CUDA_RANGES_MAX / 4 * 3)

typedef struct cuda_open_range {
    uint64_t id; /* 0: free slot (NVTX never hands out 0) */
    uint64_t start_ns;
    uint64_t end_ns; /* 0 while open; set by cuda_range_close until forgotten */
    uint64_t instance_id;
    char name[FLARE_NAME_MAX];
} cuda_open_range;

typedef struct cuda_range_table {
    pthread_mutex_t lock;
    cuda_open_range slots[CUDA_RANGES_MAX];
    uint32_t count;
} cuda_range_table;

#define CUDA_RANGE_TABLE_INITIALIZER                                                               \
    {                                                                                              \
        .lock = PTHREAD_MUTEX_INITIALIZER                                                          \
    }

/* 0, or -1 when the table is full or id is 0. */
int cuda_range_start(cuda_range_table *table, uint64_t id, const char *name, uint64_t start_ns,
                     uint64_t instance_id);
/* 0 and the range (removed from the table), or -1 when id is not open. */
int cuda_range_end(cuda_range_table *table, uint64_t id, cuda_open_range *out);

/* The close as PM attribution needs it: times the end with core_now_ns()
 * inside the table's lock and keeps the range, marked closed with that end,
 * until cuda_range_forget; so a snapshot (cuda_range_visit) sees it either
 * open or closed with its end, never gone while its interval is still on
 * its way to the store. 0 and the range, or -1 when id is not open. */
int cuda_range_close(cuda_range_table *table, uint64_t id, cuda_open_range *out);
/* Removes a range closed by cuda_range_close (after it was recorded). */
void cuda_range_forget(cuda_range_table *table, uint64_t id);
/* Calls visit for every range in the table (open or closed-not-forgotten)
 * under the lock; visit must be quick and must not call back into the table. */
void cuda_range_visit(cuda_range_table *table, void (*visit)(const cuda_open_range *, void *),
                      void *user);

#endif /* FLARE_BACKEND_CUDA_RANGES_H */
