/*
 * cuda_pm.h: CUPTI PM sampling as flare's deep engine on CUDA ("cuda-pm").
 *
 * The CUPTI half of pm/pm_engine.h: the profiler host API checks a preset is
 * one pass and builds its config image; cuptiPmSampling* enables, configures,
 * starts, stops and decodes. The expensive set-up (about 0.8 s on the H200)
 * runs once, on a thread of its own, after the program's first context
 * exists, so a window later opens with only a start (under a millisecond).
 *
 * Must never: call the driver or CUPTI inside InitializeInjection (install
 * only resolves symbols and reads settings), link libcupti (every function
 * is resolved with dlsym on the handle cuda_loader opened), or let a CUPTI
 * error reach the program (errors become capability reasons).
 */
#ifndef FLARE_BACKEND_CUDA_PM_H
#define FLARE_BACKEND_CUDA_PM_H

#include <cuda.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_loader.h"
#include "pm/pm_engine.h"

/* The engine's lease key on CUDA devices. */
#define CUDA_PM_CONTEXT_ID 0xC0DAu
/* Range replay's PM sampling (its own instance, enabled per pass). */
#define CUDA_PM_REPLAY_CONTEXT_ID 0xC0DBu

/* Range replay's PM hardware (replay_device_ops.pm_hardware): CUPTI's PM
 * sampling functions on an instance of its own; NULL where they could not
 * be resolved (or FLARE_PM=0). */
const pm_hardware_ops *cuda_pm_replay_hardware(int device, void **hardware, uint64_t *context_id);

/* After libcupti is loaded (cuda_trace_start): resolves the PM functions,
 * reads FLARE_PM_PRESET / FLARE_PM_INTERVAL and makes the CUDA engine the
 * windows' engine, or records why PM sampling is unavailable (capability
 * "pm_sampling") and leaves windows without an engine. No CUPTI call. */
void cuda_pm_install(const cuda_cupti_api *cupti);

/* The CUPTI resource callback saw a context created: the first starts the
 * set-up thread. Cheap; safe on the application's thread. */
void cuda_pm_context_created(CUcontext context);
/* A context was created in a process whose spans are measured by PM
 * sampling (flare replay --method pm): the first starts a thread that sets
 * range replay's PM sampling up early (pm_replay_prepare_early), counted
 * in the exit wait below. Cheap; safe on the application's thread. */
void cuda_pm_replay_context_created(int device);
/* A context is being destroyed: forgotten as the one a lazy set-up uses. */
void cuda_pm_context_destroying(CUcontext context);
/* At exit: waits (at most timeout_ns) for the set-up thread to leave CUPTI.
 * A program that exits within the ~0.8 s set-up crashed at exit on the
 * H200 (SIGSEGV) while the thread was still inside CUPTI. */
void cuda_pm_wait_for_setup(uint64_t timeout_ns);

const backend_engine_ops *cuda_pm_engine(void);
/* After cuda_pm_install: the deep engine windows arm, or NULL when PM
 * sampling is off or unavailable; and the engine whose samples the session
 * collects (NULL likewise). */
const backend_engine_ops *cuda_pm_deep_engine(void);
pm_engine *cuda_pm_core(void);

#endif /* FLARE_BACKEND_CUDA_PM_H */
