/*
 * cuda_trace_alternate.h: a benchmark's switch that turns flare's CUPTI
 * tracing off and on in blocks inside one process (cuda_trace_alternate.c
 * says what and why). Must never run in a user's session unless its
 * variables ask for it.
 */
#ifndef FLARE_BACKEND_CUDA_TRACE_ALTERNATE_H
#define FLARE_BACKEND_CUDA_TRACE_ALTERNATE_H

#include "backend/cuda/cuda_loader.h"

/* Called once tracing is set up: with FLARE_TRACE_ALTERNATE_MS,
 * FLARE_TRACE_ALTERNATE_LOG and FLARE_STORM_RATE=0 set, starts the thread
 * that takes turns; otherwise does nothing (a bad value is logged). */
void cuda_trace_alternate_start(const cuda_cupti_api *cupti, CUpti_SubscriberHandle subscriber);

#endif /* FLARE_BACKEND_CUDA_TRACE_ALTERNATE_H */
