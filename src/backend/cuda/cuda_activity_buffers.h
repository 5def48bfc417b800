/*
 * cuda_activity_buffers.h: CUPTI's activity buffers for flare's tracing:
 * handed to CUPTI on request (mapped whole), parsed when CUPTI completes
 * them, then unmapped; and the count of what CUPTI or flare lost on the way.
 *
 * Parsing stays inside CUPTI's completion callback. Moving it to a thread
 * of flare's own was tried on the H200's launch loop (issue 22): no gain
 * (light mode 0.940 of untraced with the thread, 0.952 inline, in one
 * script; docs/PERFORMANCE.md), so the simpler path stays.
 *
 * Must never: lose a buffer without counting it, or parse one twice.
 */
#ifndef FLARE_BACKEND_CUDA_ACTIVITY_BUFFERS_H
#define FLARE_BACKEND_CUDA_ACTIVITY_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_loader.h"

/* Emits flare's events for the valid_size bytes of records in buffer. */
typedef void (*cuda_activity_parse_fn)(uint8_t *buffer, size_t valid_size);

/* Reads FLARE_CUPTI_BUFFER_KB and registers the buffer callbacks with
 * CUPTI; parse is called once per completed buffer. Returns CUPTI's answer
 * to cuptiActivityRegisterCallbacks. */
CUptiResult cuda_activity_buffers_register(const cuda_cupti_api *cupti,
                                           cuda_activity_parse_fn parse);

typedef struct cuda_activity_counts {
    uint64_t cupti_dropped; /* records CUPTI dropped (its buffers were full) */
    uint64_t buffers_lost;  /* buffers flare could not give CUPTI (no memory) */
} cuda_activity_counts;
void cuda_activity_buffers_counts(cuda_activity_counts *counts);

#endif /* FLARE_BACKEND_CUDA_ACTIVITY_BUFFERS_H */
