/*
 * cuda_descriptor.c: the CUDA backend's descriptor (backend.h).
 *
 * start() is the tracing engine's start (CUPTI activity and callbacks,
 * NVTX, NVML, replay's attach, PM and PC sampling's install, the range
 * profiler's install); the getters answer what that start made available,
 * NULL before it or where a part is unavailable. Must never call the
 * driver itself: start runs inside cuInit (InitializeInjection).
 */
#include "backend/cuda/cuda_descriptor.h"

#include <stddef.h>

#include "backend/cuda/cuda_pc.h"
#include "backend/cuda/cuda_pm.h"
#include "backend/cuda/cuda_rangeprof.h"
#include "backend/cuda/cuda_replay.h"
#include "backend/cuda/cuda_sass.h"
#include "backend/cuda/cuda_trace.h"

static void start(const backend_host *host)
{
    /* Failures are capability rows, never the session's. */
    (void)cuda_trace_start(host);
}

static const backend_descriptor descriptor = {
    .name = "cuda",
    .caps = BACKEND_CAP_TRACE | BACKEND_CAP_DEEP_ENGINE | BACKEND_CAP_REPLAY | BACKEND_CAP_NVTX,
    .device = NULL,
    .start = start,
    .forward_nvtx = cuda_trace_forward_nvtx,
    .deep_engine = cuda_pm_deep_engine,
    .pm_engine = cuda_pm_core,
    .pc_deep_engine = cuda_pc_deep_engine,
    .pc_engine = cuda_pc_core,
    .sass_deep_engine = cuda_sass_deep_engine,
    .sass_engine = cuda_sass_core,
    .replay_ops = cuda_replay_device_ops,
    .metric_collector = cuda_rangeprof_collector,
    .open_scopes = cuda_trace_open_ranges,
    .deliver = cuda_trace_deliver,
};

const backend_descriptor *cuda_descriptor(void)
{
    return &descriptor;
}
