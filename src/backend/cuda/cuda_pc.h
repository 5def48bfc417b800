/*
 * cuda_pc.h: CUPTI's PC sampling as flare's PC deep engine on CUDA devices
 * (the hardware side of pcsamp/pc_engine.h, backend_engine_ops
 * "cuda-pc-sampling").
 *
 * CUPTI gives PC records only for modules loaded after PC sampling was
 * enabled on their context (the H200 probe: enabled late, every sample came
 * back as a "non-user kernel" sample, no record). So the engine is enabled
 * in the context-created callback, idle (start/stop control) until a window
 * with engine pc arms it, and only in processes whose deep windows can ask
 * for pc: FLARE_DEEP_ENGINE=pc, or a window rule with `engine pc` in
 * FLARE_DEEP_WHEN, unless FLARE_CUDA_PC=0 switches it off, and only with
 * the launch callbacks on (start and stop are made at launches). Everywhere
 * else nothing here runs.
 *
 * Must never: enable PC sampling in a process that did not ask for it, call
 * CUPTI inside InitializeInjection, or crash the program on a CUPTI error
 * (every failure is the pc_sampling capability's reason, or the reason a
 * refused window records).
 */
#ifndef FLARE_BACKEND_CUDA_PC_H
#define FLARE_BACKEND_CUDA_PC_H

#include <cuda.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_loader.h"

struct pc_engine;

/* After libcupti is loaded (cuda_trace_start): resolves the PC sampling
 * functions and makes the engine when the process's windows may ask for pc
 * and launch_callbacks (launches are hooked: start and stop are made there,
 * cuda_app_thread.h); otherwise records why PC sampling is off. */
void cuda_pc_install(const cuda_cupti_api *cupti, int launch_callbacks);

/* The CUPTI resource callback saw a context created: the first one gets PC
 * sampling enabled and configured, on the application's thread, before any
 * of its modules loads. */
void cuda_pc_context_created(CUcontext context);
/* That context is being destroyed: the engine stops using it. */
void cuda_pc_context_destroying(CUcontext context);
/* 1 once PC sampling is being enabled or was enabled on a context of this
 * process (0 again only when that enable failed): PM sampling is then
 * never set up (cuda_pm.c says why). */
int cuda_pc_enabled(void);

/* The window coordinator's engine, and the engine the PC collector takes
 * aggregates from: NULL unless installed. */
const backend_engine_ops *cuda_pc_deep_engine(void);
struct pc_engine *cuda_pc_core(void);

#endif /* FLARE_BACKEND_CUDA_PC_H */
