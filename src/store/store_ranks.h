/*
 * store_ranks.h: where each process of a session ran (host, rank of a
 * distributed job, local rank, world size, job id: table process_ranks)
 * and pairs of its clock with wall-clock time (clock_pairs), written by
 * the session at a process's start and end, read by the report and by
 * `flare merge` to align sessions of several hosts (docs/fleet.md).
 *
 * Must never guess: a value the environment did not give is stored NULL.
 */
#ifndef FLARE_STORE_RANKS_H
#define FLARE_STORE_RANKS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

typedef struct store_rank_row {
    int64_t pid;
    const char *host;
    bool has_rank, has_local_rank, has_world_size;
    int64_t rank;
    int64_t local_rank;
    int64_t world_size;
    const char *job_id; /* NULL or "": unknown */
} store_rank_row;

/* Inside a write batch. 0 or a flare_status with the message recorded. */
int store_put_process_rank(store *handle, const store_rank_row *row);
int store_put_clock_pair(store *handle, int64_t pid, uint64_t clock_ns, uint64_t unix_ns);

/* Every process_ranks row, by rank then pid (none in a session older than
 * version 9). callback returns non-zero to stop. */
typedef int (*store_rank_callback)(const store_rank_row *row, void *user);
int store_read_process_ranks(store *handle, store_rank_callback callback, void *user);

#endif /* FLARE_STORE_RANKS_H */
