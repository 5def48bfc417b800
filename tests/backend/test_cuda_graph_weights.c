/*
 * test_cuda_graph_weights.c: weighing CUDA graphs for the launch-storm
 * guard, against fake graph queries: node kinds, child graphs, large
 * graphs, failed queries, the table's capacity and reuse, and launches
 * reading the table on several threads while another thread makes and
 * destroys graphs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend/cuda/cuda_graph_weights.h"

/* A fake graph: node types, and for a child-graph node its graph. */
#define FAKE_NODES_MAX 600
typedef struct fake_graph {
    size_t count;
    CUgraphNodeType types[FAKE_NODES_MAX];
    struct fake_graph *children[FAKE_NODES_MAX];
} fake_graph;

/* A node handle is the address of its entry in its graph's types array. */
typedef struct fake_node_ref {
    fake_graph *graph;
    size_t index;
} fake_node_ref;
static fake_node_ref refs[64 * FAKE_NODES_MAX];
static _Atomic size_t ref_count;
static int fail_get_nodes, fail_node_type;

static CUresult fake_get_nodes(CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    fake_graph *fake = (fake_graph *)graph;
    if (fail_get_nodes)
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes == NULL) {
        *count = fake->count;
        return CUDA_SUCCESS;
    }
    size_t n = *count < fake->count ? *count : fake->count;
    for (size_t i = 0; i < n; i++) {
        size_t at = atomic_fetch_add(&ref_count, 1);
        assert_true(at < sizeof(refs) / sizeof(refs[0]));
        refs[at] = (fake_node_ref){fake, i};
        nodes[i] = (CUgraphNode)&refs[at];
    }
    *count = n;
    return CUDA_SUCCESS;
}

static CUresult fake_node_type(CUgraphNode node, CUgraphNodeType *type)
{
    if (fail_node_type)
        return CUDA_ERROR_INVALID_VALUE;
    const fake_node_ref *ref = (const fake_node_ref *)node;
    *type = ref->graph->types[ref->index];
    return CUDA_SUCCESS;
}

static CUresult fake_child_graph(CUgraphNode node, CUgraph *graph)
{
    const fake_node_ref *ref = (const fake_node_ref *)node;
    *graph = (CUgraph)ref->graph->children[ref->index];
    return CUDA_SUCCESS;
}

static const cuda_graph_queries queries = {fake_get_nodes, fake_node_type, fake_child_graph};

static void add(fake_graph *graph, CUgraphNodeType type, fake_graph *child)
{
    graph->types[graph->count] = type;
    graph->children[graph->count++] = child;
}

static int set_up(void **state)
{
    (void)state;
    cuda_graph_weights_reset();
    atomic_store(&ref_count, 0);
    fail_get_nodes = fail_node_type = 0;
    return 0;
}

static CUgraphExec exec_handle(uintptr_t n)
{
    return (CUgraphExec)(n * 0x40 + 0x1000); /* aligned like real handles */
}

static void test_node_kinds_and_child_graphs(void **state)
{
    (void)state;
    static fake_graph inner, middle, top;
    add(&inner, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&inner, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&inner, CU_GRAPH_NODE_TYPE_MEMSET, NULL);
    add(&middle, CU_GRAPH_NODE_TYPE_GRAPH, &inner);
    add(&middle, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&top, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&top, CU_GRAPH_NODE_TYPE_MEMCPY, NULL);
    add(&top, CU_GRAPH_NODE_TYPE_HOST, NULL);
    add(&top, CU_GRAPH_NODE_TYPE_EMPTY, NULL);
    add(&top, CU_GRAPH_NODE_TYPE_EVENT_RECORD, NULL);
    add(&top, CU_GRAPH_NODE_TYPE_GRAPH, &middle);
    add(&top, CU_GRAPH_NODE_TYPE_GRAPH, &inner);
    cuda_graph_weight weight;
    assert_int_equal(cuda_graph_weigh(&queries, (CUgraph)&top, &weight), 0);
    /* top 1 + middle (1 + inner 2) + inner 2 kernels; memcpy + 2 memsets */
    assert_int_equal(weight.kernels, 6);
    assert_int_equal(weight.copies, 3);
}

static void test_nesting_is_bounded(void **state)
{
    (void)state;
    /* A chain deeper than CUDA_GRAPH_NESTING_MAX: the levels past it count
     * as nothing rather than recursing without end. */
    static fake_graph chain[CUDA_GRAPH_NESTING_MAX + 4];
    for (size_t i = 0; i < CUDA_GRAPH_NESTING_MAX + 4; i++) {
        add(&chain[i], CU_GRAPH_NODE_TYPE_KERNEL, NULL);
        if (i + 1 < CUDA_GRAPH_NESTING_MAX + 4)
            add(&chain[i], CU_GRAPH_NODE_TYPE_GRAPH, &chain[i + 1]);
    }
    cuda_graph_weight weight;
    assert_int_equal(cuda_graph_weigh(&queries, (CUgraph)&chain[0], &weight), 0);
    assert_int_equal(weight.kernels, CUDA_GRAPH_NESTING_MAX);
}

static void test_large_graph_read_whole(void **state)
{
    (void)state;
    static fake_graph big;
    for (size_t i = 0; i < FAKE_NODES_MAX; i++)
        add(&big, i % 3 == 2 ? CU_GRAPH_NODE_TYPE_MEMCPY : CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    assert_true(FAKE_NODES_MAX > CUDA_GRAPH_NODES_ON_STACK);
    cuda_graph_weight weight;
    assert_int_equal(cuda_graph_weigh(&queries, (CUgraph)&big, &weight), 0);
    assert_int_equal(weight.kernels, FAKE_NODES_MAX / 3 * 2);
    assert_int_equal(weight.copies, FAKE_NODES_MAX / 3);
}

static void test_launches_count_kernels_beyond_one(void **state)
{
    (void)state;
    static fake_graph graph, copies_only;
    for (int i = 0; i < 20; i++)
        add(&graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&graph, CU_GRAPH_NODE_TYPE_MEMSET, NULL);
    add(&copies_only, CU_GRAPH_NODE_TYPE_MEMCPY, NULL);
    assert_int_equal(cuda_graph_weights_created(&queries, exec_handle(1), (CUgraph)&graph), 0);
    assert_int_equal(cuda_graph_weights_created(&queries, exec_handle(2), (CUgraph)&copies_only),
                     0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(cuda_graph_weights_launched(exec_handle(1)), 1); /* the memset */
    assert_int_equal(cuda_graph_weights_launched(exec_handle(2)), 1);
    /* 5 launches of 20 kernels: 19 beyond each host launch; a graph of no
     * kernel adds nothing (its host launch is counted already). */
    assert_int_equal(cuda_graph_weights_extra_launches(), 5 * 19);
    assert_int_equal(cuda_graph_weights_kernels_launched(), 100);
    /* An unknown graph counts as its one host launch. */
    assert_int_equal(cuda_graph_weights_launched(exec_handle(3)), 0);
    assert_int_equal(cuda_graph_weights_extra_launches(), 5 * 19);
    /* Destroyed: forgotten. */
    cuda_graph_weights_destroyed(exec_handle(1));
    cuda_graph_weight weight;
    assert_int_equal(cuda_graph_weights_lookup(exec_handle(1), &weight), 0);
    assert_int_equal(weight.kernels, 1);
    assert_int_equal(cuda_graph_weights_lookup(exec_handle(2), &weight), 1);
    assert_int_equal(cuda_graph_weights_unweighed(), 0);
}

static void test_failed_query_counts_as_one_and_is_counted(void **state)
{
    (void)state;
    static fake_graph graph;
    add(&graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    assert_int_equal(cuda_graph_weights_created(&queries, exec_handle(7), (CUgraph)&graph), 0);
    /* The driver reuses the handle for a graph that cannot be weighed: the
     * old weight must not be charged to it. */
    fail_node_type = 1;
    assert_int_equal(cuda_graph_weights_created(&queries, exec_handle(7), (CUgraph)&graph), -1);
    fail_node_type = 0;
    fail_get_nodes = 1;
    assert_int_equal(cuda_graph_weights_created(&queries, exec_handle(8), (CUgraph)&graph), -1);
    cuda_graph_weight weight;
    assert_int_equal(cuda_graph_weights_lookup(exec_handle(7), &weight), 0);
    assert_int_equal(weight.kernels, 1);
    assert_int_equal(cuda_graph_weights_unweighed(), 2);
    /* No queries at all (the driver lacks them). */
    cuda_graph_queries none = {0};
    assert_int_equal(cuda_graph_weights_created(&none, exec_handle(9), (CUgraph)&graph), -1);
    assert_int_equal(cuda_graph_weights_unweighed(), 3);
    assert_int_equal(cuda_graph_weights_extra_launches(), 0);
}

static void test_table_full_then_reused(void **state)
{
    (void)state;
    static fake_graph graph;
    add(&graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    uintptr_t made = 0;
    uint64_t refused = 0;
    for (uintptr_t n = 1; n <= CUDA_GRAPH_WEIGHTS_MAX + 100; n++) {
        if (cuda_graph_weights_created(&queries, exec_handle(n), (CUgraph)&graph) == 0)
            made++;
        else
            refused++;
    }
    assert_true(refused >= 100); /* never more than the table holds */
    assert_int_equal(cuda_graph_weights_unweighed(), refused);
    assert_true(made > CUDA_GRAPH_WEIGHTS_MAX / 2);
    /* Every graph that was weighed is found; every refused one counts one. */
    uint64_t found = 0;
    for (uintptr_t n = 1; n <= CUDA_GRAPH_WEIGHTS_MAX + 100; n++) {
        cuda_graph_weight weight;
        if (cuda_graph_weights_lookup(exec_handle(n), &weight)) {
            assert_int_equal(weight.kernels, 3);
            found++;
        } else {
            assert_int_equal(weight.kernels, 1);
        }
    }
    assert_int_equal(found, made);
    /* Destroy them all: the slots (tombstones now) take new graphs. */
    for (uintptr_t n = 1; n <= CUDA_GRAPH_WEIGHTS_MAX + 100; n++)
        cuda_graph_weights_destroyed(exec_handle(n));
    for (uintptr_t n = 1; n <= CUDA_GRAPH_WEIGHTS_MAX / 2; n++)
        assert_int_equal(
            cuda_graph_weights_created(&queries, exec_handle(n + 100000), (CUgraph)&graph), 0);
}

/* Launching threads read a graph that stays while another thread makes
 * and destroys others around it: every launch sees the right weight. */
#define LAUNCHERS     3
#define LAUNCHES_EACH 200000
static fake_graph stable_graph, churn_graph;
static _Atomic int churning;

static void *launch_stable(void *arg)
{
    (void)arg;
    for (int i = 0; i < LAUNCHES_EACH; i++)
        if (cuda_graph_weights_launched(exec_handle(1)) != 2)
            return (void *)1;
    return NULL;
}

static void *churn(void *arg)
{
    (void)arg;
    for (uintptr_t round = 0; atomic_load(&churning); round++) {
        for (uintptr_t n = 2; n < 200; n++)
            if (cuda_graph_weights_created(&queries, exec_handle(n + round % 7 * 1000),
                                           (CUgraph)&churn_graph) != 0)
                return (void *)1;
        for (uintptr_t n = 2; n < 200; n++)
            cuda_graph_weights_destroyed(exec_handle(n + round % 7 * 1000));
        atomic_store(&ref_count, 0); /* the fake's node handles are reused */
    }
    return NULL;
}

static void test_launches_read_while_graphs_churn(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++)
        add(&stable_graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    add(&stable_graph, CU_GRAPH_NODE_TYPE_MEMCPY, NULL);
    add(&stable_graph, CU_GRAPH_NODE_TYPE_MEMSET, NULL);
    add(&churn_graph, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    assert_int_equal(cuda_graph_weights_created(&queries, exec_handle(1), (CUgraph)&stable_graph),
                     0);
    atomic_store(&churning, 1);
    pthread_t writer, readers[LAUNCHERS];
    assert_int_equal(pthread_create(&writer, NULL, churn, NULL), 0);
    for (int i = 0; i < LAUNCHERS; i++)
        assert_int_equal(pthread_create(&readers[i], NULL, launch_stable, NULL), 0);
    for (int i = 0; i < LAUNCHERS; i++) {
        void *result;
        pthread_join(readers[i], &result);
        assert_null(result);
    }
    atomic_store(&churning, 0);
    void *result;
    pthread_join(writer, &result);
    assert_null(result);
    assert_int_equal(cuda_graph_weights_extra_launches(), (uint64_t)LAUNCHERS * LAUNCHES_EACH * 9);
    assert_int_equal(cuda_graph_weights_unweighed(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_node_kinds_and_child_graphs, set_up),
        cmocka_unit_test_setup(test_nesting_is_bounded, set_up),
        cmocka_unit_test_setup(test_large_graph_read_whole, set_up),
        cmocka_unit_test_setup(test_launches_count_kernels_beyond_one, set_up),
        cmocka_unit_test_setup(test_failed_query_counts_as_one_and_is_counted, set_up),
        cmocka_unit_test_setup(test_table_full_then_reused, set_up),
        cmocka_unit_test_setup(test_launches_read_while_graphs_churn, set_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
