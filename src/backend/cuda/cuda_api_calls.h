/*
 * cuda_api_calls.h: the host side of GPU work. Each kernel launch, copy
 * and memset the program's threads make through the driver is recorded as
 * an API call (thread, start, end, correlation id, entry point; table
 * api_calls), so a trace can draw the call on its thread and an arrow to
 * the kernel or copy it caused.
 *
 * Runs on the program's threads inside CUPTI's driver callbacks: a clock
 * read at entry, a clock read and one ring event at exit. Must never block,
 * allocate or lock; a full ring drops the record (counted like every ring
 * drop). flare's own driver calls (replay) are never recorded; during a
 * launch storm (kernel activity off) neither are the program's, which have
 * no GPU record to point to then.
 */
#ifndef FLARE_BACKEND_CUDA_API_CALLS_H
#define FLARE_BACKEND_CUDA_API_CALLS_H

#include <cupti_callbacks.h>
#include <stdbool.h>

/* Switches recording on or off for the process (the tracer's start-up,
 * before any callback can run). */
void cuda_api_calls_enable(bool on);
bool cuda_api_calls_enabled(void);

/* A launch, copy or memset's entry and exit callbacks (CUPTI_API_ENTER and
 * CUPTI_API_EXIT), for the program's own calls only. */
void cuda_api_call_enter(const CUpti_CallbackData *call);
void cuda_api_call_exit(const CUpti_CallbackData *call);

#endif /* FLARE_BACKEND_CUDA_API_CALLS_H */
