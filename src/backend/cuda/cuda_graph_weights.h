/*
 * cuda_graph_weights.h: how much work one launch of a CUDA graph is, for
 * the launch-storm guard.
 *
 * Why: the guard exists because CUPTI's activity costs every kernel it
 * records, and a graph launch is one host call that may run hundreds of
 * kernels. Counted as one launch, a storm of graph launches running
 * 890,000 kernels a second stayed under the guard's 50,000 launches a
 * second on the H200 (docs/PERFORMANCE.md) and ran at 58% of its untraced
 * speed. So each executable graph is weighed once, when it is instantiated
 * (its kernel nodes and its copy and memset nodes, child graphs included),
 * and each launch of it adds its weight to the guard's count.
 *
 * A fixed table maps a CUgraphExec to its weight: written under a lock at
 * instantiation and destruction (rare), read without a lock or an
 * allocation at every graph launch. A graph that cannot be weighed (the
 * table is full, the driver lacks the graph queries, a query failed) counts
 * as one launch, as before, and is counted as unweighed. Must never block a
 * launch or allocate on it.
 */
#ifndef FLARE_BACKEND_CUDA_GRAPH_WEIGHTS_H
#define FLARE_BACKEND_CUDA_GRAPH_WEIGHTS_H

#include <stdint.h>

#include <cuda.h>

/* The graph queries weighing needs (the driver's, or a test's). */
typedef struct cuda_graph_queries {
    CUresult (*get_nodes)(CUgraph graph, CUgraphNode *nodes, size_t *count);
    CUresult (*node_type)(CUgraphNode node, CUgraphNodeType *type);
    CUresult (*child_graph)(CUgraphNode node, CUgraph *graph);
} cuda_graph_queries;

typedef struct cuda_graph_weight {
    uint32_t kernels; /* kernel nodes */
    uint32_t copies;  /* copy and memset nodes */
} cuda_graph_weight;

/* How many graphs may be weighed at once (live executable graphs). */
#define CUDA_GRAPH_WEIGHTS_MAX 4096u
/* Child graphs are followed this deep; deeper ones count as nothing. */
#define CUDA_GRAPH_NESTING_MAX 8u
/* Nodes of one graph level read at once; a larger level is read in a
 * heap buffer (instantiation only, never a launch). */
#define CUDA_GRAPH_NODES_ON_STACK 256u

/* Counts graph's kernel, copy and memset nodes, child graphs included.
 * 0, or -1 when a query failed (*out is then incomplete). */
int cuda_graph_weigh(const cuda_graph_queries *queries, CUgraph graph, cuda_graph_weight *out);

/* At a graph's instantiation: weighs graph and records the weight of exec.
 * Returns 0, or -1 when it could not (the launch then counts as one). */
int cuda_graph_weights_created(const cuda_graph_queries *queries, CUgraphExec exec, CUgraph graph);
/* Before exec is destroyed. */
void cuda_graph_weights_destroyed(CUgraphExec exec);

/* At a graph launch (any thread, lock-free): exec's weight into *out, or
 * {1, 0} when it was not weighed. Returns whether it was. */
int cuda_graph_weights_lookup(CUgraphExec exec, cuda_graph_weight *out);

/* At a graph launch: adds the launch's kernels beyond its one host launch
 * to the guard's count, and returns its copy and memset nodes. */
uint32_t cuda_graph_weights_launched(CUgraphExec exec);

/* The guard's count beyond the host launches: graph kernel nodes launched
 * minus one per weighed graph launch. Monotonic. */
uint64_t cuda_graph_weights_extra_launches(void);
/* Kernel nodes run by weighed graph launches, and graphs that could not be
 * weighed (instantiations). */
uint64_t cuda_graph_weights_kernels_launched(void);
uint64_t cuda_graph_weights_unweighed(void);

/* Tests only: forget every weight and count. */
void cuda_graph_weights_reset(void);

#endif /* FLARE_BACKEND_CUDA_GRAPH_WEIGHTS_H */
