/*
 * cuda_graph_weights.c: the weight of each executable CUDA graph and the
 * guard's count of graph kernels (cuda_graph_weights.h).
 *
 * The table is open addressing with linear probing over
 * CUDA_GRAPH_WEIGHTS_MAX slots, at most PROBE_MAX from a key's home. Writers (instantiation,
 * destruction) hold table_lock; readers (every graph launch) take none: a writer stores a slot's
 * weight before publishing its key (release), a reader loads the key (acquire) before the weight. A
 * destroyed graph's slot becomes a tombstone, which a reader walks past and a writer reuses, so a
 * probe never stops early. Must never allocate or lock on the lookup path.
 */
#include "backend/cuda/cuda_graph_weights.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SLOT_EMPTY     0u
#define SLOT_TOMBSTONE UINT64_MAX
/* A key lives within this many slots of its home, so a launch's lookup
 * reads at most this many slots even when churn has left no empty slot;
 * a graph with no free slot in its reach goes unweighed. */
#define PROBE_MAX 64u

typedef struct weight_slot {
    _Atomic uint64_t exec; /* SLOT_EMPTY, SLOT_TOMBSTONE or a CUgraphExec */
    _Atomic uint32_t kernels;
    _Atomic uint32_t copies;
} weight_slot;

static weight_slot table[CUDA_GRAPH_WEIGHTS_MAX];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t extra_launches;   /* graph kernels beyond one per launch */
static _Atomic uint64_t kernels_launched; /* kernel nodes of weighed launches */
static _Atomic uint64_t unweighed;        /* instantiations not weighed */

static uint32_t slot_of(uint64_t key)
{
    /* Handles are pointers: mix the bits so aligned ones spread. */
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)(key % CUDA_GRAPH_WEIGHTS_MAX);
}

static int weigh_level(const cuda_graph_queries *queries, CUgraph graph, unsigned depth,
                       cuda_graph_weight *out);

static int weigh_node(const cuda_graph_queries *queries, CUgraphNode node, unsigned depth,
                      cuda_graph_weight *out)
{
    CUgraphNodeType type;
    if (queries->node_type(node, &type) != CUDA_SUCCESS)
        return -1;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
        out->kernels++;
    } else if (type == CU_GRAPH_NODE_TYPE_MEMCPY || type == CU_GRAPH_NODE_TYPE_MEMSET) {
        out->copies++;
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && depth + 1 < CUDA_GRAPH_NESTING_MAX) {
        CUgraph child;
        if (queries->child_graph == NULL || queries->child_graph(node, &child) != CUDA_SUCCESS)
            return -1;
        return weigh_level(queries, child, depth + 1, out);
    }
    return 0;
}

static int weigh_level(const cuda_graph_queries *queries, CUgraph graph, unsigned depth,
                       cuda_graph_weight *out)
{
    size_t count = 0;
    if (queries->get_nodes(graph, NULL, &count) != CUDA_SUCCESS)
        return -1;
    if (count == 0)
        return 0;
    CUgraphNode on_stack[CUDA_GRAPH_NODES_ON_STACK];
    CUgraphNode *nodes = on_stack;
    if (count > CUDA_GRAPH_NODES_ON_STACK) {
        nodes = malloc(count * sizeof(*nodes));
        if (nodes == NULL)
            return -1;
    }
    size_t read = count;
    int result = queries->get_nodes(graph, nodes, &read) == CUDA_SUCCESS ? 0 : -1;
    /* A graph cannot change while it is instantiated; take the smaller count
     * anyway, so a query that disagrees never reads past the buffer. */
    for (size_t i = 0; result == 0 && i < read && i < count; i++)
        result = weigh_node(queries, nodes[i], depth, out);
    if (nodes != on_stack)
        free(nodes);
    return result;
}

int cuda_graph_weigh(const cuda_graph_queries *queries, CUgraph graph, cuda_graph_weight *out)
{
    out->kernels = 0;
    out->copies = 0;
    if (queries == NULL || queries->get_nodes == NULL || queries->node_type == NULL ||
        graph == NULL)
        return -1;
    return weigh_level(queries, graph, 0, out);
}

/* Under table_lock: the slot holding key, or NULL. */
static weight_slot *find_locked(uint64_t key)
{
    uint32_t start = slot_of(key);
    for (uint32_t i = 0; i < PROBE_MAX; i++) {
        weight_slot *slot = &table[(start + i) % CUDA_GRAPH_WEIGHTS_MAX];
        uint64_t held = atomic_load_explicit(&slot->exec, memory_order_relaxed);
        if (held == key)
            return slot;
        if (held == SLOT_EMPTY)
            return NULL;
    }
    return NULL;
}

static int insert(uint64_t key, const cuda_graph_weight *weight)
{
    pthread_mutex_lock(&table_lock);
    weight_slot *slot = find_locked(key); /* a handle the driver reused */
    uint32_t start = slot_of(key);
    for (uint32_t i = 0; slot == NULL && i < PROBE_MAX; i++) {
        weight_slot *candidate = &table[(start + i) % CUDA_GRAPH_WEIGHTS_MAX];
        uint64_t held = atomic_load_explicit(&candidate->exec, memory_order_relaxed);
        if (held == SLOT_EMPTY || held == SLOT_TOMBSTONE)
            slot = candidate;
    }
    if (slot != NULL) {
        /* A reader that finds the key must see its weight: weight first.
         * (A reused handle's reader may see the old weight or the new one,
         * either a real graph's.) */
        atomic_store_explicit(&slot->kernels, weight->kernels, memory_order_relaxed);
        atomic_store_explicit(&slot->copies, weight->copies, memory_order_relaxed);
        atomic_store_explicit(&slot->exec, key, memory_order_release);
    }
    pthread_mutex_unlock(&table_lock);
    return slot != NULL ? 0 : -1;
}

int cuda_graph_weights_created(const cuda_graph_queries *queries, CUgraphExec exec, CUgraph graph)
{
    uint64_t key = (uint64_t)(uintptr_t)exec;
    cuda_graph_weight weight;
    if (key == SLOT_EMPTY || key == SLOT_TOMBSTONE ||
        cuda_graph_weigh(queries, graph, &weight) != 0 || insert(key, &weight) != 0) {
        cuda_graph_weights_destroyed(exec); /* a reused handle's old weight is not this graph's */
        atomic_fetch_add_explicit(&unweighed, 1, memory_order_relaxed);
        return -1;
    }
    return 0;
}

void cuda_graph_weights_destroyed(CUgraphExec exec)
{
    uint64_t key = (uint64_t)(uintptr_t)exec;
    if (key == SLOT_EMPTY || key == SLOT_TOMBSTONE)
        return;
    pthread_mutex_lock(&table_lock);
    weight_slot *slot = find_locked(key);
    if (slot != NULL)
        atomic_store_explicit(&slot->exec, SLOT_TOMBSTONE, memory_order_release);
    pthread_mutex_unlock(&table_lock);
}

int cuda_graph_weights_lookup(CUgraphExec exec, cuda_graph_weight *out)
{
    uint64_t key = (uint64_t)(uintptr_t)exec;
    out->kernels = 1;
    out->copies = 0;
    if (key == SLOT_EMPTY || key == SLOT_TOMBSTONE)
        return 0;
    uint32_t start = slot_of(key);
    for (uint32_t i = 0; i < PROBE_MAX; i++) {
        weight_slot *slot = &table[(start + i) % CUDA_GRAPH_WEIGHTS_MAX];
        uint64_t held = atomic_load_explicit(&slot->exec, memory_order_acquire);
        if (held == SLOT_EMPTY)
            return 0;
        if (held == key) {
            out->kernels = atomic_load_explicit(&slot->kernels, memory_order_relaxed);
            out->copies = atomic_load_explicit(&slot->copies, memory_order_relaxed);
            return 1;
        }
    }
    return 0;
}

uint32_t cuda_graph_weights_launched(CUgraphExec exec)
{
    cuda_graph_weight weight;
    if (!cuda_graph_weights_lookup(exec, &weight))
        return 0;
    atomic_fetch_add_explicit(&kernels_launched, weight.kernels, memory_order_relaxed);
    /* The host launch is counted already; a graph of no kernel adds none
     * (the guard's count never goes down). */
    if (weight.kernels > 1)
        atomic_fetch_add_explicit(&extra_launches, weight.kernels - 1u, memory_order_relaxed);
    return weight.copies;
}

uint64_t cuda_graph_weights_extra_launches(void)
{
    return atomic_load_explicit(&extra_launches, memory_order_relaxed);
}

uint64_t cuda_graph_weights_kernels_launched(void)
{
    return atomic_load_explicit(&kernels_launched, memory_order_relaxed);
}

uint64_t cuda_graph_weights_unweighed(void)
{
    return atomic_load_explicit(&unweighed, memory_order_relaxed);
}

void cuda_graph_weights_reset(void)
{
    pthread_mutex_lock(&table_lock);
    for (uint32_t i = 0; i < CUDA_GRAPH_WEIGHTS_MAX; i++)
        atomic_store_explicit(&table[i].exec, SLOT_EMPTY, memory_order_relaxed);
    atomic_store(&extra_launches, 0);
    atomic_store(&kernels_launched, 0);
    atomic_store(&unweighed, 0);
    pthread_mutex_unlock(&table_lock);
}
