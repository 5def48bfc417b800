/*
 * store_merge.h: several sessions made one (`flare merge`, docs/fleet.md):
 * every row of every input copied into a new session, each process's
 * times moved onto one timeline, its pid kept unless another input has it
 * (then moved past every pid seen), names interned again.
 *
 * The timeline is the first input's clock. A process's times move by the
 * difference between its clock's offset to wall-clock time (its first
 * clock_pairs row, else its session's start pair) and the first input's:
 * the hosts' wall clocks are the reference (alignment "wall"). With
 * "collectives", each input's offset is then refined from its NCCL
 * kernels: the k-th collective of every rank ends within microseconds on
 * every rank, so the median difference of their ends to the first input's
 * is taken out, and what is left over (the median absolute deviation) is
 * the alignment's residual error.
 *
 * Must never write to an input (each is opened read-only), keep rows of a
 * table the output lacks, or hold more than one input open at a time.
 */
#ifndef FLARE_STORE_MERGE_H
#define FLARE_STORE_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_MERGE_INPUTS_MAX 1024
/* Collectives compared per input, at most. */
#define STORE_MERGE_COLLECTIVES_MAX 4096

typedef enum store_merge_align {
    STORE_MERGE_ALIGN_AUTO,        /* collectives when every input has 3 or more */
    STORE_MERGE_ALIGN_WALL,        /* wall-clock offsets only */
    STORE_MERGE_ALIGN_COLLECTIVES, /* refined from NCCL kernels; refused without them */
} store_merge_align;

typedef struct store_merge_input_result {
    int schema_version;
    int ended;                   /* 0: the session never ended (a crashed or killed run) */
    int64_t processes;           /* process rows copied */
    int64_t pids_moved;          /* of them, moved to a new pid (another input had it) */
    int64_t rows;                /* rows copied, every table */
    int64_t wall_shift_ns;       /* added to its times by the wall-clock alignment */
    int64_t collective_shift_ns; /* then added by the collectives' refinement */
    size_t collectives;          /* collectives compared (0: not refined) */
    int64_t residual_ns;         /* median absolute deviation left after refinement */
    int64_t drift_ns;            /* largest change of a process's clock offset start to end */
} store_merge_input_result;

typedef struct store_merge_result {
    store_merge_align used; /* WALL or COLLECTIVES */
    size_t input_count;
    store_merge_input_result inputs[STORE_MERGE_INPUTS_MAX];
} store_merge_result;

/* Merges the sessions in input_dirs into out, a session database just
 * created (no session row yet), writing its session row too (command
 * given). 0, or a flare_status with error filled (naming the input);
 * out may then hold part of the rows: the caller removes it. */
int store_merge(store *out, const char *const *input_dirs, size_t input_count,
                store_merge_align align, const char *command, store_merge_result *result,
                char *error, size_t error_size);

#endif /* FLARE_STORE_MERGE_H */
