/*
 * cuda_rangeprof.h: the "cuda-range-profiler" metric collector for kernel
 * replay: CUPTI's range profiler in user-replay mode with automatic ranges
 * (one range per kernel), one configuration pass per replay pass.
 *
 * Owns its own table of CUPTI range-profiler and profiler-host functions
 * (resolved with dlsym on the loaded libcupti) and a cache of host set-up
 * per (context, metric list). Must never link libcupti, and never crash the
 * program: a CUPTI error fails the collection with a reason and degrades
 * the "range_profiler" capability.
 */
#ifndef FLARE_BACKEND_CUDA_RANGEPROF_H
#define FLARE_BACKEND_CUDA_RANGEPROF_H

#include "backend/cuda/cuda_loader.h"

#include <stdint.h>

/* Resolves the functions and installs the collector with
 * replay_set_metric_collector. No driver or CUPTI call is made here (it
 * runs inside InitializeInjection); set-up happens at the first prepare. */
void cuda_rangeprof_install(const cuda_cupti_api *cupti, const cuda_driver_api *driver);
/* The range-profiler metric collector once installed, else NULL. */
const struct replay_metric_collector *cuda_rangeprof_collector(void);

/* A context was created: when replay with metrics is configured, runs the
 * host set-up for it (availability, enable, config image: 100s of ms) on a
 * thread of its own, so the first replayed launch does not wait for it.
 * Never waits itself; a failure is retried by the first replayed launch. */
void cuda_rangeprof_context_created(CUcontext context, int device);
/* At exit: waits (at most timeout_ns) for early set-up threads to leave
 * CUPTI, so the process never tears CUPTI down under them. */
void cuda_rangeprof_wait_for_setup(uint64_t timeout_ns);

#endif /* FLARE_BACKEND_CUDA_RANGEPROF_H */
