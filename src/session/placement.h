/*
 * placement.h: where a process of the session runs, from the environment
 * a job launcher gives it (torchrun, srun, mpirun): host, rank, local rank,
 * world size, job id; written with the process's row, with a pair of its
 * clock and wall-clock time at its start and its end (store_ranks.h).
 *
 * Must never fail a session: a value that is missing or not a number is
 * stored as unknown (NULL).
 */
#ifndef FLARE_SESSION_PLACEMENT_H
#define FLARE_SESSION_PLACEMENT_H

#include <stdint.h>

#include "store/store.h"

/* The variables the rank is read from, first set wins (for messages). */
#define SESSION_RANK_VARIABLES "RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK"

/* The rank's text from the environment, or NULL. */
const char *session_rank_text(void);

/* Inside the batch that writes the process row: its process_ranks row and
 * its first clock pair. 0 or the store's status. */
int session_placement_begin(store *database, int64_t pid, const char *host, uint64_t clock_ns,
                            uint64_t unix_ns);
/* Inside the process's last batch: the closing clock pair. */
int session_placement_end(store *database, int64_t pid);

#endif /* FLARE_SESSION_PLACEMENT_H */
