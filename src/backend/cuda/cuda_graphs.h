/*
 * cuda_graphs.h: launches of CUDA graphs, as the launching thread sees them.
 *
 * A graph launch (cuGraphLaunch) is one host call that runs every node of
 * the graph; CUPTI stamps each kernel, copy and memset it runs with the
 * launch's correlation id and the graph's and node's ids. This records the
 * launch itself: its correlation id, the CUgraphExec, its stream and the
 * innermost scope or NVTX push range open on the launching thread, so that
 * the graph's work can be attributed to whoever launched it. Must never
 * block or allocate: it runs inside the driver's launch call.
 */
#ifndef FLARE_BACKEND_CUDA_GRAPHS_H
#define FLARE_BACKEND_CUDA_GRAPHS_H

#include <cupti_callbacks.h>

#include "backend/cuda/cuda_loader.h"

/* At a graph launch's API entry (id: cuGraphLaunch or cuGraphLaunch_ptsz). */
void cuda_graphs_launched(const cuda_cupti_api *cupti, CUpti_CallbackId id,
                          const CUpti_CallbackData *call);

/* CUPTI resource callbacks CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED and
 * _DESTROY_STARTING (data: CUpti_ResourceData): weighs an executable graph
 * for the launch-storm guard, or forgets it. Other ids are ignored. */
void cuda_graphs_resource(CUpti_CallbackId id, const void *data);

#endif /* FLARE_BACKEND_CUDA_GRAPHS_H */
