/*
 * cuda_sass.h: CUPTI's SASS metrics as flare's SASS deep engine on CUDA
 * devices (the hardware side of pcsamp/pc_engine.h, kind PC_ENGINE_SASS;
 * backend_engine_ops "cuda-sass-metrics").
 *
 * CUPTI patches each kernel's SASS so every instruction counts itself; the
 * counts come back per (function, pc offset, metric) when flushed. What the
 * bare-CUPTI probe found on the H200 (docs/PERFORMANCE.md, Session 17) and
 * flare's first windows there (Session 18) fix the shape:
 *   - the metrics are configured once per process (a second SetConfig after
 *     UnsetConfig fails), at the program's first context, on its thread and
 *     before its modules load (configured at the first window instead, the
 *     H200 counted nothing), with the context current (SetConfig refused a
 *     call from another thread), and never unset;
 *   - each window enables from the coordinator's thread (lazy patching: a
 *     kernel is patched at its first launch inside the window);
 *   - its close flushes, then disables (a flush after the disable is
 *     refused), on the program's own thread at its next launch: made from
 *     flare's thread while the program launched, FlushData or Disable never
 *     returned (cuda_sass.c says more).
 * Patched kernels run 6.3x to 465x slower: a window of sass is for a few
 * launches.
 *
 * Only in processes whose windows can ask for sass: FLARE_DEEP_ENGINE=sass
 * or a window rule with `engine sass` in FLARE_DEEP_WHEN, unless
 * FLARE_CUDA_SASS=0 switches it off (engine auto never picks SASS metrics:
 * their cost is past any deep budget). The metrics are FLARE_SASS_METRICS
 * (CUPTI's names, comma-separated), default CUDA_SASS_METRICS_DEFAULT.
 *
 * Must never: call CUPTI inside InitializeInjection, flush or disable from
 * flare's thread while the program launches, crash the program on a CUPTI error (each failure is
 * the sass_metrics capability's reason or a refused window's), grow past its record bound (what
 * does not fit is counted lost), or leak CUPTI's function-name strings.
 */
#ifndef FLARE_BACKEND_CUDA_SASS_H
#define FLARE_BACKEND_CUDA_SASS_H

#include <cuda.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_loader.h"

struct pc_engine;

/* What a window counts by default: warp and thread instructions executed,
 * and global memory sectors against the ideal (uncoalesced access). */
#define CUDA_SASS_METRICS_DEFAULT                                                                  \
    "smsp__sass_inst_executed,smsp__sass_thread_inst_executed,smsp__sass_sectors_mem_global,"      \
    "smsp__sass_sectors_mem_global_ideal"
/* Metrics a window may count at once. */
#define CUDA_SASS_METRICS_MAX 16u
/* How long a stop waits for the program's next launch, where the flush and
 * the disable are made, before making them on flare's thread. */
#define CUDA_SASS_STOP_WAIT_NS 2000000000ull
/* Records one flush may bring back (one per instruction and metric); a
 * window past it keeps none and counts them all lost. */
#define CUDA_SASS_RECORDS_MAX (1u << 22)

/* After libcupti is loaded (cuda_trace_start): resolves the SASS metrics
 * functions and makes the engine when the process's windows may ask for
 * sass and launch_callbacks (the launches are counted); otherwise records
 * why SASS metrics are off. */
void cuda_sass_install(const cuda_cupti_api *cupti, int launch_callbacks);
/* Whether installed: module loads are then watched, for source lines. */
int cuda_sass_installed(void);

/* The CUPTI resource callback saw a context created / being destroyed:
 * the process's first one is the context windows enable SASS metrics on,
 * configured here, on the program's thread (about 100 ms once); a later
 * context is never taken, even after the first one's end. */
void cuda_sass_context_created(CUcontext context);
void cuda_sass_context_destroying(CUcontext context);

/* The program's exit, from cuda_trace's exit handler on the exiting
 * thread, before CUPTI's own exit handlers: a window still open is flushed
 * and disabled here (made at the session's end, after CUPTI's handlers, the
 * flush lost counts, the disable was refused, and the program crashed on
 * the H200, session 19); its close takes the results. A stop posted for the
 * program's next launch is made here first. Nothing when not installed. */
void cuda_sass_exit(void);

/* The window coordinator's engine, and the engine the collector takes
 * aggregates from: NULL unless installed. */
const backend_engine_ops *cuda_sass_deep_engine(void);
struct pc_engine *cuda_sass_core(void);

#endif /* FLARE_BACKEND_CUDA_SASS_H */
