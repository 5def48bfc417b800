/*
 * cuda_graphs.c: one event per CUDA graph launch (cuda_graphs.h).
 *
 * Runs on the application thread inside cuGraphLaunch: adds the graph's
 * weight to the launch-storm guard's count (a lock-free table read), reads
 * the thread's own scope stack (its owner is the only writer, so no lock),
 * resolves the stream's CUPTI id and emits into the thread's ring. A full
 * ring drops the record (counted like every ring drop); the launch itself
 * is never touched. Instantiation and destruction of executable graphs
 * (CUPTI resource callbacks) weigh and forget them.
 */
#include "backend/cuda/cuda_graphs.h"

#include <pthread.h>
#include <stdatomic.h>

#include "backend/cuda/cuda_graph_weights.h"
#include "backend/cuda/cuda_storm.h"
#include "core/clock.h"
#include "core/event.h"
#include "core/log.h"
#include "core/runtime.h"

/* The driver's graph queries, loaded once at the first instantiation. */
static pthread_once_t queries_once = PTHREAD_ONCE_INIT;
static cuda_driver_api graphs_driver;
static cuda_graph_queries queries;

static void load_queries(void)
{
    char reason[256];
    if (cuda_load_driver(&graphs_driver, reason, sizeof(reason)) != 0) {
        core_log(CORE_LOG_WARNING, "CUDA graphs are not weighed for the launch-storm guard: %s",
                 reason);
        return;
    }
    queries.get_nodes = graphs_driver.cuGraphGetNodes;
    queries.node_type = graphs_driver.cuGraphNodeGetType;
    queries.child_graph = graphs_driver.cuGraphChildGraphNodeGetGraph;
    if (queries.get_nodes == NULL || queries.node_type == NULL)
        core_log(CORE_LOG_WARNING, "CUDA graphs are not weighed for the launch-storm guard: "
                                   "this driver lacks cuGraphGetNodes or cuGraphNodeGetType");
}

void cuda_graphs_resource(CUpti_CallbackId id, const void *data)
{
    const CUpti_ResourceData *resource = data;
    const CUpti_GraphData *graph = resource != NULL ? resource->resourceDescriptor : NULL;
    if (graph == NULL)
        return;
    if (id == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
        pthread_once(&queries_once, load_queries);
        if (cuda_graph_weights_created(&queries, graph->graphExec, graph->graph) != 0 &&
            cuda_graph_weights_unweighed() == 1)
            core_log(CORE_LOG_WARNING,
                     "a CUDA graph could not be weighed: its launches count as one launch each "
                     "for the launch-storm guard (the count of such graphs is reported)");
    } else if (id == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) {
        cuda_graph_weights_destroyed(graph->graphExec);
    }
}

/* The innermost open scope (flare's, or an NVTX push range, which flare
 * keeps on the same per-thread stack) of the calling thread: its instance
 * id, 0 for none, and its name into event. */
static uint64_t innermost_scope(core_thread *thread, core_event *event)
{
    const core_scope_frame *frame = core_thread_innermost_scope(thread);
    core_copy_name(event->name, frame != NULL ? frame->name : NULL);
    return frame != NULL ? frame->instance_id : 0;
}

void cuda_graphs_launched(const cuda_cupti_api *cupti, CUpti_CallbackId id,
                          const CUpti_CallbackData *call)
{
    /* Both variants take (hGraph, a CUgraphExec, and hStream). */
    const cuGraphLaunch_params *params = call->functionParams;
    int per_thread = id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
    /* The guard counts the graph's kernels, and a storm's untimed copies
     * its copy and memset nodes (cuda_graph_weights.h). */
    if (params != NULL)
        cuda_storm_count_graph_copies(cuda_graph_weights_launched(params->hGraph));
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
