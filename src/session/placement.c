/*
 * placement.c: a process's host, rank and clock pairs (placement.h).
 *
 * Must never: refuse or stop a session over its environment, or store a
 * value that is not what the launcher said.
 */
#include "session/placement.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/clock.h"
#include "store/store_ranks.h"

/* The first of names that is set and not empty, or NULL. */
static const char *first_set(const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const char *value = getenv(names[i]);
        if (value != NULL && value[0] != '\0')
            return value;
    }
    return NULL;
}

#define FIRST_SET(...)                                                                             \
    first_set((const char *const[]){__VA_ARGS__},                                                  \
              sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

const char *session_rank_text(void)
{
    return FIRST_SET("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK");
}

/* A whole non-negative number from text; false when absent or not one. */
static bool whole_number(const char *text, int64_t *out)
{
    if (text == NULL || text[0] < '0' || text[0] > '9')
        return false;
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = value;
    return true;
}

int session_placement_begin(store *database, int64_t pid, const char *host, uint64_t clock_ns,
                            uint64_t unix_ns)
{
    store_rank_row row = {.pid = pid, .host = host};
    row.has_rank = whole_number(session_rank_text(), &row.rank);
    row.has_local_rank = whole_number(
        FIRST_SET("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"),
        &row.local_rank);
    row.has_world_size =
        whole_number(FIRST_SET("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"),
                     &row.world_size);
    row.job_id = FIRST_SET("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID", "LSB_JOBID");
    int status = store_put_process_rank(database, &row);
    if (status == 0)
        status = store_put_clock_pair(database, pid, clock_ns, unix_ns);
    return status;
}

int session_placement_end(store *database, int64_t pid)
{
    /* Read together, so the pair says one moment on both clocks. */
    uint64_t clock_ns = core_now_ns();
    uint64_t unix_ns = core_unix_now_ns();
    return store_put_clock_pair(database, pid, clock_ns, unix_ns);
}
