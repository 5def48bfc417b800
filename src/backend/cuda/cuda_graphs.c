/*
 * cuda_graphs.c: one event per CUDA graph launch (cuda_graphs.h).
 *
 * Runs on the application thread inside cuGraphLaunch: reads the thread's
 * own scope stack (its owner is the only writer, so no lock), resolves the
 * stream's CUPTI id and emits into the thread's ring. A full ring drops the
 * record (counted like every ring drop); the launch itself is never touched.
 */
#include "backend/cuda/cuda_graphs.h"

#include <stdatomic.h>

#include "core/clock.h"
#include "core/event.h"
#include "core/runtime.h"

/* The innermost open scope (flare's, or an NVTX push range, which flare
 * keeps on the same per-thread stack) of the calling thread: its instance
 * id, 0 for none, and its name into event. */
static uint64_t innermost_scope(core_thread *thread, core_event *event)
{
    uint32_t depth = atomic_load_explicit(&thread->scope_depth, memory_order_relaxed);
    if (depth == 0 || depth > FLARE_SCOPE_DEPTH_MAX) {
        event->name[0] = '\0';
        return 0;
    }
    const core_scope_frame *frame = &thread->scopes[depth - 1];
    core_copy_name(event->name, frame->name);
    return frame->instance_id;
}

void cuda_graphs_launched(const cuda_cupti_api *cupti, CUpti_CallbackId id,
                          const CUpti_CallbackData *call)
{
    /* Both variants take (hGraph, a CUgraphExec, and hStream). */
    const cuGraphLaunch_params *params = call->functionParams;
    int per_thread = id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    uint32_t stream_id = 0;
    if (cupti->cuptiGetStreamIdEx != NULL && params != NULL)
        cupti->cuptiGetStreamIdEx(call->context, params->hStream,
                                  (uint8_t)(per_thread && params->hStream == NULL), &stream_id);
    event->kind = CORE_EVENT_GRAPH_LAUNCH;
    event->start_ns = event->end_ns = core_now_ns();
    event->id = call->correlationId;
    event->stream_id = stream_id;
    event->device = -1;
    event->depth = 0;
    event->detail.graph_launch.graph_exec =
        params != NULL ? (uint64_t)(uintptr_t)params->hGraph : 0;
    event->detail.graph_launch.scope_instance_id = innermost_scope(thread, event);
    core_emit_commit(thread);
}
